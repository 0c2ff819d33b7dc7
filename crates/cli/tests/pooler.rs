#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A connection pooler in front of PostgreSQL: PgBouncer, started by the
//! test on free ports in session, transaction and statement mode. In
//! session mode every path works (migrate, enqueue, a worker with its
//! LISTEN connection, operator actions); in the other two every command is
//! refused at connect, before anything is written, with a message naming
//! the setting to change. Needs the `pgbouncer` binary (Debian's package;
//! `.ci/run` installs it) and, as root, runs it as `postgres`; says
//! SKIPPED without it, and fails under CI.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A PgBouncer of the test's own in front of the test server; killed on
/// drop.
struct Bouncer {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn pgbouncer() -> Option<PathBuf> {
    ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

impl Bouncer {
    fn start(bin: &Path, server: &url_parts::Server, mode: &str) -> Bouncer {
        let dir = tempfile::tempdir().unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let port = free_port();
        let ini = dir.path().join("pgbouncer.ini");
        let users = dir.path().join("users.txt");
        std::fs::write(&users, format!("\"{}\" \"\"\n", server.user)).unwrap();
        std::fs::write(
            &ini,
            format!(
                "[databases]\n* = host={} port={}\n[pgbouncer]\nlisten_addr = 127.0.0.1\n\
                 listen_port = {port}\nunix_socket_dir =\nauth_type = trust\nauth_file = {}\n\
                 pool_mode = {mode}\nmax_client_conn = 500\ndefault_pool_size = 20\n\
                 ignore_startup_parameters = extra_float_digits,options\n",
                server.host,
                server.port,
                users.display()
            ),
        )
        .unwrap();
        for f in [&ini, &users] {
            std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o644)).unwrap();
        }
        // PgBouncer refuses to run as root.
        let mut command = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bin);
            c
        } else {
            Command::new(bin)
        };
        let child = command
            .arg(&ini)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "pgbouncer did not listen"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Bouncer {
            child,
            port,
            _dir: dir,
        }
    }

    fn url(&self, server: &url_parts::Server) -> String {
        format!(
            "postgres://{}@127.0.0.1:{}/{}",
            server.user, self.port, server.db
        )
    }
}

impl Drop for Bouncer {
    fn drop(&mut self) {
        // runuser passes the signal on to pgbouncer.
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
    }
}

/// The parts of the test server's URL a pooler's configuration needs.
mod url_parts {
    pub struct Server {
        pub user: String,
        pub host: String,
        pub port: u16,
        pub db: String,
    }

    /// `postgres://USER@HOST:PORT/DB` (the form the tests are given).
    pub fn of(url: &str) -> Server {
        let rest = url.split_once("://").map_or(url, |(_, r)| r);
        let (user, rest) = rest.split_once('@').unwrap_or(("postgres", rest));
        let (address, db) = rest.split_once('/').unwrap_or((rest, "postgres"));
        let db = db.split('?').next().unwrap_or("postgres");
        let (host, port) = address.rsplit_once(':').unwrap_or((address, "5432"));
        Server {
            user: user.split(':').next().unwrap_or("postgres").to_owned(),
            host: host.to_owned(),
            port: port.parse().expect("a port in the test URL"),
            db: db.to_owned(),
        }
    }
}

fn errand(url: &str, schema: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["--db", url, "--schema", schema])
        .args(args)
        .env("ERRAND_LOG", "warn")
        .output()
        .unwrap()
}

fn ok(url: &str, schema: &str, args: &[&str]) -> String {
    let out = errand(url, schema, args);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-Atqc", sql])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The test server, a pooler binary, or SKIPPED.
fn setup(what: &str) -> Option<(String, PathBuf)> {
    let url = errand_testsupport::postgres_url(what)?;
    let Some(bin) = pgbouncer() else {
        errand_testsupport::skip(what, "no pgbouncer binary (Debian's pgbouncer package)");
        return None;
    };
    Some((url, bin))
}

#[test]
fn through_pgbouncer_in_session_mode_every_path_works() {
    let Some((url, bin)) = setup("the session-mode pooler test") else {
        return;
    };
    let server = url_parts::of(&url);
    let bouncer = Bouncer::start(&bin, &server, "session");
    let via = bouncer.url(&server);
    let schema = format!("errand_pooled_{}", std::process::id());
    psql(&url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    ok(&via, &schema, &["migrate"]);
    ok(&via, &schema, &["enqueue", "--kind", "k", "--id", "one"]);
    ok(&via, &schema, &["enqueue", "--kind", "k", "--id", "two"]);
    // A service worker: its LISTEN connection through the pooler hears
    // the next enqueue (no "self-test failed" in its log), and it runs
    // both jobs.
    let worker = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["--db", &via, "--schema", &schema, "work", "--exec", "true"])
        .env("ERRAND_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    ok(&via, &schema, &["enqueue", "--kind", "k", "--id", "three"]);
    let started = Instant::now();
    while psql(
        &url,
        &format!("SELECT count(*) FROM {schema}.errand_jobs WHERE state = 'done'"),
    ) != "3"
    {
        assert!(started.elapsed() < Duration::from_secs(60), "jobs not done");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Its LISTEN session, through the pooler, is on the server.
    let listening = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %{schema}.errand_jobs%'"
    );
    while psql(&url, &listening) == "0" {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no LISTEN session"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status();
    let out = worker.wait_with_output().unwrap();
    assert!(out.status.success());
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(!log.contains("self-test failed"), "{log}");
    // Operator paths.
    ok(&via, &schema, &["pause", "default", "--by", "ops"]);
    ok(&via, &schema, &["resume", "default", "--by", "ops"]);
    assert!(ok(&via, &schema, &["audit"]).contains("pause"));
    assert!(ok(&via, &schema, &["jobs", "--state", "done"]).contains("three"));
    psql(&url, &format!("DROP SCHEMA {schema} CASCADE"));
}

#[test]
fn through_pgbouncer_in_transaction_or_statement_mode_every_command_is_refused_before_writing() {
    let Some((url, bin)) = setup("the transaction-mode pooler test") else {
        return;
    };
    let server = url_parts::of(&url);
    for mode in ["transaction", "statement"] {
        let bouncer = Bouncer::start(&bin, &server, mode);
        let via = bouncer.url(&server);
        let schema = format!("errand_refused_pool_{}", std::process::id());
        psql(&url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
        for args in [
            vec!["migrate"],
            vec!["enqueue", "--kind", "k"],
            vec!["jobs"],
            vec!["work", "--once", "--exec", "true"],
        ] {
            let out = errand(&via, &schema, &args);
            assert_eq!(out.status.code(), Some(2), "{mode} {args:?}");
            let said = String::from_utf8_lossy(&out.stderr);
            assert!(
                said.contains("pool_mode = session"),
                "{mode} {args:?}: {said}"
            );
        }
        assert_eq!(
            psql(&url, &format!("SELECT to_regnamespace('{schema}') IS NULL")),
            "t",
            "{mode}: nothing was created"
        );
    }
}
