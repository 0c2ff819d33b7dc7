#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Real worker processes on PostgreSQL: racing over a shared backlog, and
//! surviving a crash-restart of the database server.
//!
//! The race runs against `ERRAND_TEST_POSTGRES_URL` in its own schema. The
//! restart test starts a private cluster of its own (it needs root, to run
//! `initdb` as the `postgres` user, and the server binaries); it says SKIPPED
//! where it cannot, and fails under CI.

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn errand(db: &str, schema: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["--db", db, "--schema", schema])
        .args(args)
        .output()
        .expect("run errand")
}

fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-Atq", "-c", sql])
        .output()
        .expect("psql");
    assert!(
        out.status.success(),
        "psql {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn spawn_worker(db: &str, schema: &str, dir: &Path, lease: &str) -> Child {
    let cmd = format!(
        "echo \"$ERRAND_JOB_ID $ERRAND_ATTEMPT\" >> {log}; touch {sink}/\"$ERRAND_JOB_ID\"",
        log = dir.join("executions.log").display(),
        sink = dir.join("sink").display(),
    );
    Command::new(env!("CARGO_BIN_EXE_errand"))
        .args([
            "--db",
            db,
            "--schema",
            schema,
            "work",
            "--concurrency",
            "4",
            "--poll",
            "100ms",
        ])
        .args([
            "--lease",
            lease,
            "--retry-base",
            "100ms",
            "--retry-max",
            "1s",
            "--exec",
            &cmd,
        ])
        .env("ERRAND_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn worker")
}

fn stop(mut workers: Vec<Child>) {
    for w in &workers {
        let _ = Command::new("kill")
            .args(["-TERM", &w.id().to_string()])
            .status();
    }
    for w in &mut workers {
        let status = w.wait().expect("wait");
        assert!(
            status.success(),
            "a worker did not drain cleanly: {status:?}"
        );
    }
}

fn count(url: &str, schema: &str, state: &str) -> usize {
    psql(
        url,
        &format!("SELECT count(*) FROM {schema}.errand_jobs WHERE state = '{state}'"),
    )
    .parse()
    .expect("a count")
}

fn wait_until(what: &str, deadline: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < deadline, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn executions(dir: &Path) -> Vec<String> {
    std::fs::read_to_string(dir.join("executions.log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

fn workdir() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    std::fs::create_dir(path.join("sink")).unwrap();
    (dir, path)
}

#[test]
fn four_worker_processes_run_each_of_2000_jobs_exactly_once() {
    let Some(url) = errand_testsupport::postgres_url("the multi-process PostgreSQL test") else {
        return;
    };
    let schema = format!("errand_race_{}", std::process::id());
    psql(&url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    assert!(errand(&url, &schema, &["migrate"]).status.success());
    let (_keep, dir) = workdir();
    let workers: Vec<Child> = (0..4)
        .map(|_| spawn_worker(&url, &schema, &dir, "30s"))
        .collect();
    // Enqueue while the workers are already waiting (they are woken by NOTIFY).
    psql(
        &url,
        &format!(
            "SELECT count({schema}.enqueue('race', id => 'job-' || g)) FROM generate_series(1, 2000) g"
        ),
    );
    wait_until("2000 jobs done", Duration::from_secs(240), || {
        count(&url, &schema, "done") == 2000
    });
    stop(workers);

    let log = executions(&dir);
    let unique: HashSet<&String> = log.iter().collect();
    assert_eq!(log.len(), 2000, "every job ran exactly once");
    assert_eq!(unique.len(), 2000);
    assert!(
        log.iter().all(|l| l.ends_with(" 1")),
        "attempts = 1 everywhere"
    );
    assert_eq!(std::fs::read_dir(dir.join("sink")).unwrap().count(), 2000);
    assert_eq!(
        psql(
            &url,
            &format!("SELECT count(*) FROM {schema}.errand_jobs WHERE attempts <> 1")
        ),
        "0"
    );
    assert_eq!(
        count(&url, &schema, "running") + count(&url, &schema, "ready"),
        0,
        "nothing left"
    );
    psql(&url, &format!("DROP SCHEMA {schema} CASCADE"));
}

/// A PostgreSQL cluster of the test's own, on a free port.
struct Cluster {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

impl Cluster {
    fn start() -> Option<Cluster> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(Result::ok)
            .map(|e| e.path().join("bin"))
            .find(|p| p.join("initdb").exists())?;
        let dir = tempfile::tempdir().ok()?;
        let chown = Command::new("chown")
            .args(["postgres"])
            .arg(dir.path())
            .status()
            .ok()?;
        if !chown.success() {
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let c = Cluster { bin, dir, port };
        let data = c.data();
        let ok = c.as_postgres("initdb", &["-D", &data, "-A", "trust", "-U", "postgres"]);
        (ok && c.ctl(&["start"])).then_some(c)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn as_postgres(&self, tool: &str, args: &[&str]) -> bool {
        Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(self.bin.join(tool))
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn ctl(&self, action: &[&str]) -> bool {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let log = self.dir.path().join("server.log").display().to_string();
        let data = self.data();
        let mut args = vec!["-D", &data, "-l", &log, "-w", "-o", &opts];
        args.extend_from_slice(action);
        self.as_postgres("pg_ctl", &args)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.ctl(&["-m", "immediate", "stop"]);
    }
}

#[test]
fn workers_ride_out_a_crash_restart_of_the_server() {
    let Some(cluster) = Cluster::start() else {
        errand_testsupport::skip(
            "the restart test",
            "a private PostgreSQL cluster needs root and the server binaries (/usr/lib/postgresql/*/bin)",
        );
        return;
    };
    let url = cluster.url();
    let schema = "errand";
    assert!(errand(&url, schema, &["migrate"]).status.success());
    psql(
        &url,
        "SELECT count(errand.enqueue('restart', id => 'job-' || g)) FROM generate_series(1, 600) g",
    );
    let (_keep, dir) = workdir();
    let workers: Vec<Child> = (0..2)
        .map(|_| spawn_worker(&url, schema, &dir, "2s"))
        .collect();
    wait_until("some progress", Duration::from_secs(120), || {
        count(&url, schema, "done") >= 100
    });
    assert!(
        cluster.ctl(&["-m", "immediate", "restart"]),
        "restart the server"
    );
    wait_until(
        "every job done after the restart",
        Duration::from_secs(240),
        || count(&url, schema, "done") == 600,
    );
    stop(workers);

    let log = executions(&dir);
    let unique: HashSet<&str> = log.iter().filter_map(|l| l.split(' ').next()).collect();
    assert_eq!(unique.len(), 600, "nothing lost");
    assert_eq!(std::fs::read_dir(dir.join("sink")).unwrap().count(), 600);
    assert_eq!(
        count(&url, schema, "running") + count(&url, schema, "ready") + count(&url, schema, "dead"),
        0,
        "nothing stuck"
    );
    // Only jobs in flight at the crash may have run twice.
    let repeats = log.len() - unique.len();
    assert!(
        repeats <= 16,
        "{repeats} repeated executions; at most 2 workers × 4 slots × 2 were in flight"
    );
    eprintln!("restart test: {} executions for 600 jobs", log.len());
}
