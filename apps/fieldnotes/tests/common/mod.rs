#![allow(dead_code, clippy::unwrap_used)]
//! Shared helpers for the process-level tests: a temporary database and the
//! real `fieldnotes` binary.

pub mod server;

use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::{Command, Output};
use std::time::Duration;

use rusqlite::Connection;
use serde_json::Value;

pub const BIN: &str = env!("CARGO_BIN_EXE_fieldnotes");

/// A database file in its own temporary directory.
pub struct Db {
    pub dir: tempfile::TempDir,
    pub path: PathBuf,
}

impl Db {
    /// A path in a fresh directory; nothing created yet.
    pub fn empty() -> Db {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("field-notes.sqlite");
        Db { dir, path }
    }

    /// A database made by `fieldnotes init`.
    pub fn init() -> Db {
        let db = Db::empty();
        ok(&["init", db.arg()]);
        db
    }

    pub fn arg(&self) -> &str {
        self.path.to_str().unwrap()
    }

    /// A raw connection for checks the command line does not expose.
    pub fn conn(&self) -> Connection {
        Connection::open(&self.path).unwrap()
    }

    pub fn balance(&self) -> i64 {
        self.conn()
            .query_row("SELECT balance_cents FROM authors", [], |r| r.get(0))
            .unwrap()
    }

    pub fn count(&self, table: &str) -> i64 {
        self.conn()
            .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
            .unwrap()
    }
}

/// Runs the binary.
pub fn run(args: &[&str]) -> Output {
    Command::new(BIN).args(args).output().unwrap()
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
        "fieldnotes {args:?} failed with {:?}\nstdout: {}\nstderr: {}",
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

/// Pays for a document and returns the payment (= job) id.
pub fn pay(db: &Db) -> String {
    let p = json(&["pay", db.arg()]);
    assert_eq!(p["payment_id"], p["job_id"]);
    p["job_id"].as_str().unwrap().to_owned()
}

/// The one job of a database, from `jobs --json`.
pub fn only_job(db: &Db) -> Value {
    let jobs = json(&["jobs", db.arg()]);
    let jobs = jobs.as_array().unwrap();
    assert_eq!(jobs.len(), 1, "{jobs:?}");
    jobs[0].clone()
}

pub fn receipts(db: &Db) -> Vec<Value> {
    json(&["receipts", db.arg()]).as_array().unwrap().clone()
}

pub fn killed_by_sigkill(o: &Output) -> bool {
    o.status.signal() == Some(9)
}

/// Runs `work` (with `flags`) until it does something other than report
/// `idle`, waiting out a retry's backoff between tries. Returns the output
/// of the first run that was not idle (which may have been killed).
pub fn work_until_busy(db: &Db, flags: &[&str]) -> Output {
    let mut args = vec!["work", db.arg(), "--json"];
    args.extend_from_slice(flags);
    for _ in 0..100 {
        let o = run(&args);
        if o.status.success() {
            let v: Value = serde_json::from_slice(&o.stdout).unwrap();
            if v["outcome"] == "idle" {
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        }
        return o;
    }
    panic!("the job never became due again");
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

/// The `errand` binary of this build, next to this test (target/debug/
/// deps/TEST-… → target/debug/errand), when it was built: `cargo test
/// --workspace` builds it, `cargo test -p fieldnotes` alone does not. Under
/// CI (`CI` set) it must be there.
pub fn errand_bin() -> Option<PathBuf> {
    let me = std::env::current_exe().unwrap();
    let found = me
        .ancestors()
        .skip(1)
        .take(3)
        .map(|d| d.join("errand"))
        .find(|p| p.is_file());
    if found.is_none() {
        eprintln!("no `errand` binary next to {}", me.display());
        errand_testsupport::skip(
            "the `errand` command half",
            "no `errand` binary was built next to the tests: build it with `cargo build -p errand-cli` (`cargo test --workspace` builds it)",
        );
    }
    found
}
