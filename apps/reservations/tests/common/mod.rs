#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]
//! Shared helpers for the process-level tests: a database on either backend
//! and the real `reservations` binary.
//!
//! Every test runs on SQLite and on PostgreSQL (the `both!` macro makes one
//! test function per backend). The PostgreSQL tests read
//! `ERRAND_TEST_POSTGRES_URL`; each creates its own database and drops it
//! afterwards. Without the URL they print a SKIPPED line, and fail when `CI`
//! is set.

use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_reservations");

/// Makes `mod NAME { fn sqlite(); fn postgres(); }` running `NAME(db)` on
/// a fresh, uninitialised database of each backend.
#[macro_export]
macro_rules! both {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn sqlite() {
                super::$name(super::common::Db::sqlite());
            }
            #[test]
            fn postgres() {
                if let Some(db) = super::common::Db::postgres(stringify!($name)) {
                    super::$name(db);
                }
            }
        }
    )*};
}

/// The PostgreSQL server for tests, or `None` (after printing SKIPPED;
/// under `CI` a missing URL fails the test instead).
pub fn postgres_url() -> Option<String> {
    errand_testsupport::postgres_url("the reservations tests on PostgreSQL")
}

/// `url` with its database name replaced by `name`.
fn with_database(url: &str, name: &str) -> String {
    let (base, query) = match url.split_once('?') {
        Some((b, q)) => (b, format!("?{q}")),
        None => (url, String::new()),
    };
    let after_scheme = base.find("://").map_or(0, |i| i + 3);
    let authority_end = base[after_scheme..]
        .find('/')
        .map_or(base.len(), |i| after_scheme + i);
    format!("{}/{name}{query}", &base[..authority_end])
}

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// A database of one backend, dropped (PostgreSQL) or deleted (SQLite)
/// with the value.
pub struct Db {
    url: String,
    pub backend: &'static str,
    _dir: Option<tempfile::TempDir>,
    /// (server URL, database name) of a PostgreSQL test database.
    pg: Option<(String, String)>,
}

impl Db {
    /// A SQLite path in a fresh directory; nothing created yet.
    pub fn sqlite() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let url = dir
            .path()
            .join("reservations.sqlite")
            .to_str()
            .unwrap()
            .to_owned();
        Db {
            url,
            backend: "sqlite",
            _dir: Some(dir),
            pg: None,
        }
    }

    /// A fresh, empty PostgreSQL database named after the test, or `None`
    /// when no server is configured.
    pub fn postgres(tag: &str) -> Option<Db> {
        let server = postgres_url()?;
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!(
            "rsv_{}_{}_{n}",
            tag.chars().take(30).collect::<String>(),
            std::process::id()
        );
        psql(
            &server,
            &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
        );
        psql(&server, &format!("CREATE DATABASE {name}"));
        Some(Db {
            url: with_database(&server, &name),
            backend: "postgres",
            _dir: None,
            pg: Some((server, name)),
        })
    }

    /// Runs `reservations init` and returns the database.
    pub fn init(self) -> Db {
        ok(&["init", self.arg()]);
        self
    }

    /// The DB argument.
    pub fn arg(&self) -> &str {
        &self.url
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        if let Some((server, name)) = &self.pg {
            let _ = Command::new("psql")
                .args([
                    server.as_str(),
                    "-q",
                    "-c",
                    &format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"),
                ])
                .stderr(Stdio::null())
                .status();
        }
    }
}

fn psql(url: &str, sql: &str) {
    let out = Command::new("psql")
        .args([url, "-q", "-v", "ON_ERROR_STOP=1", "-c", sql])
        .output()
        .expect("run psql");
    assert!(
        out.status.success(),
        "psql failed: {sql}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs the binary.
pub fn run(args: &[&str]) -> Output {
    run_env(args, &[])
}

/// Runs the binary with extra environment variables.
pub fn run_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(BIN)
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Runs the binary and requires success; returns stdout.
pub fn ok(args: &[&str]) -> String {
    let o = run(args);
    assert!(
        o.status.success(),
        "reservations {args:?} failed with {:?}\nstdout: {}\nstderr: {}",
        o.status,
        stdout(&o),
        stderr(&o)
    );
    stdout(&o)
}

/// Runs the binary with `--json` and parses stdout.
pub fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = ok(&all);
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("not JSON ({e}): {out}"))
}

/// Runs the binary, requires the exit `code`, returns stderr.
pub fn fails(args: &[&str], code: i32) -> String {
    let o = run(args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "reservations {args:?}: expected exit {code}\nstdout: {}\nstderr: {}",
        stdout(&o),
        stderr(&o)
    );
    assert!(
        stdout(&o).is_empty(),
        "a refused command prints nothing on stdout: {}",
        stdout(&o)
    );
    stderr(&o)
}

/// Holds `unit` for a guest; returns the reservation.
pub fn hold(db: &Db, unit: &str, window: &str) -> Value {
    hold_with(db, unit, window, &[])
}

/// [`hold`] with more flags (`--await-payment`).
pub fn hold_with(db: &Db, unit: &str, window: &str, flags: &[&str]) -> Value {
    let mut args = vec![
        "hold",
        db.arg(),
        "--unit",
        unit,
        "--guest",
        "Test Guest",
        "--window",
        window,
    ];
    args.extend_from_slice(flags);
    json(&args)
}

/// Holds `unit` for a guest for one night, `nights_ahead` nights from
/// 2099-01-01 (two holds of one unit may not share a night); returns the
/// reservation.
pub fn hold_night(db: &Db, unit: &str, window: &str, nights_ahead: i64) -> Value {
    let from =
        reservations::app::parse_date("2099-01-01").unwrap() + time::Duration::days(nights_ahead);
    let to = from + time::Duration::days(1);
    let (from, to) = (
        reservations::app::iso_date(from),
        reservations::app::iso_date(to),
    );
    json(&[
        "hold",
        db.arg(),
        "--unit",
        unit,
        "--guest",
        "Test Guest",
        "--window",
        window,
        "--from",
        &from,
        "--to",
        &to,
    ])
}

/// Every reservation.
pub fn list(db: &Db) -> Vec<Value> {
    json(&["list", db.arg()]).as_array().unwrap().clone()
}

/// One reservation by id.
pub fn reservation(db: &Db, id: &str) -> Value {
    list(db)
        .into_iter()
        .find(|r| r["id"] == id)
        .unwrap_or_else(|| panic!("no reservation {id}"))
}

/// Every expiry job.
pub fn jobs(db: &Db) -> Vec<Value> {
    json(&["jobs", db.arg()]).as_array().unwrap().clone()
}

/// One expiry job by id.
pub fn job(db: &Db, id: &str) -> Value {
    jobs(db)
        .into_iter()
        .find(|j| j["id"] == id)
        .unwrap_or_else(|| panic!("no job {id}"))
}

/// `stats --json`.
pub fn stats(db: &Db) -> Value {
    json(&["stats", db.arg()])
}

/// Everything the command line shows, to prove a refused command wrote
/// nothing.
pub fn snapshot(db: &Db) -> (Value, Value, Value) {
    (
        json(&["list", db.arg()]),
        json(&["jobs", db.arg()]),
        stats(db),
    )
}

/// Polls until `f` returns `Some`, up to `limit`.
pub fn poll_until<T>(limit: Duration, what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs `work --once --json` (with `flags` and `env`) until it does
/// something other than report `idle`; returns that run's output (which
/// may have been killed).
pub fn work_until_busy(db: &Db, flags: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec!["work", db.arg(), "--once", "--json"];
    args.extend_from_slice(flags);
    poll_until(Duration::from_secs(30), "a due job", || {
        let o = run_env(&args, env);
        if o.status.success() {
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            if v["outcome"] == "idle" {
                return None;
            }
        }
        Some(o)
    })
}

/// Parses a successful `work --json` output.
pub fn report(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "work failed: {:?} {}",
        o.status,
        stderr(o)
    );
    serde_json::from_slice(&o.stdout).unwrap()
}

pub fn killed_by_sigkill(o: &Output) -> bool {
    o.status.signal() == Some(9)
}

/// Starts a service-mode worker with `--json` output.
pub fn spawn_worker(db: &Db, flags: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new(BIN)
        .args(["work", db.arg(), "--json"])
        .args(flags)
        .envs(env.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Stops a service worker with SIGTERM (it drains) and returns its JSON
/// lines.
pub fn stop_worker(child: Child) -> Vec<Value> {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "the worker did not drain cleanly: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Kills a worker with SIGKILL, as a deploy or the OOM killer would.
pub fn kill_worker(mut child: Child) {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    kill(Pid::from_raw(child.id() as i32), Signal::SIGKILL).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(9));
}

/// A current-thread runtime for tests that use the library directly.
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(f)
}

pub fn ms(v: &Value) -> i64 {
    errand::Timestamp::parse_rfc3339(v.as_str().unwrap())
        .unwrap()
        .as_millis()
}
