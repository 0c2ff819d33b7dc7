#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `errand stats --check --max-lateness`: lateness against business
//! deadlines. A queue crosses it when a job with a deadline finished more
//! than the threshold after its deadline within the window, or when an
//! unfinished job is more than the threshold past its deadline. Exit 6, as
//! for every other threshold.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let d = Db { _dir: dir, path };
    let out = errand(&d.path, &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    d
}

fn errand(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_errand"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("ERRAND_DB")
        .output()
        .expect("run errand")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn succeed(o: Output) -> Output {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        stderr(&o)
    );
    o
}

/// An RFC 3339 time `ago` before now.
fn ago(ago: Duration) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis();
    errand::Timestamp::from_millis((now - ago.as_millis()) as i64).to_rfc3339()
}

fn enqueue(db: &Path, id: &str, queue: &str, deadline: &str) {
    succeed(errand(
        db,
        &[
            "enqueue",
            "--kind",
            "k",
            "--id",
            id,
            "--queue",
            queue,
            "--deadline",
            deadline,
        ],
    ));
}

fn run_one(db: &Path, queue: &str) {
    let out = succeed(errand(
        db,
        &["work", "--once", "--queue", queue, "--exec", "true"],
    ));
    assert!(
        stdout(&out).contains("acknowledged=true"),
        "{}",
        stdout(&out)
    );
}

fn check(db: &Path, extra: &[&str]) -> Output {
    let mut args = vec!["stats", "--check"];
    args.extend_from_slice(extra);
    errand(db, &args)
}

#[test]
fn a_job_that_finished_long_after_its_deadline_crosses_max_lateness() {
    let d = db();
    // Finished about an hour after its deadline.
    enqueue(&d.path, "late", "reports", &ago(Duration::from_secs(3600)));
    run_one(&d.path, "reports");
    // Finished before its deadline: lateness zero.
    enqueue(&d.path, "early", "mail", "1h");
    run_one(&d.path, "mail");

    let out = check(&d.path, &["--max-lateness", "30m"]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let text = stdout(&out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "only the late queue: {text}");
    assert!(
        lines[0].starts_with("CROSSED queue reports: a job finished 1h")
            && lines[0].ends_with("after its deadline in the window (the latest of 1 with a deadline), above max_lateness = 30m"),
        "{text}"
    );

    let out = check(&d.path, &["--max-lateness", "30m", "--json"]);
    assert_eq!(out.status.code(), Some(6));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["crossed"][0]["queue"], "reports");
    assert_eq!(v["crossed"][0]["threshold"], "max_lateness");
    assert_eq!(v["crossed"][0]["max"], 1_800_000);
    assert!(
        v["crossed"][0]["value"].as_u64().unwrap() >= 3_600_000,
        "{v}"
    );
    assert_eq!(v["lateness"]["queues"]["reports"]["finished"], 1);
    assert_eq!(v["lateness"]["queues"]["mail"]["max_finished_ms"], 0);
    assert_eq!(v["checked"], 2, "both queues were compared: {v}");

    let out = check(&d.path, &["--max-lateness", "2h"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).starts_with("ok: "), "{}", stdout(&out));
}

#[test]
fn an_unfinished_job_past_its_deadline_crosses_max_lateness() {
    let d = db();
    enqueue(&d.path, "stuck", "reports", &ago(Duration::from_secs(600)));
    enqueue(&d.path, "ahead", "reports", "1h");
    let out = check(&d.path, &["--max-lateness", "5m"]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(
            "CROSSED queue reports: 1 unfinished job(s) are past their deadline, the oldest by 10m"
        ),
        "{text}"
    );
    let out = check(&d.path, &["--max-lateness", "1h"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn the_window_bounds_which_finished_jobs_count() {
    let d = db();
    enqueue(&d.path, "late", "reports", &ago(Duration::from_secs(3600)));
    run_one(&d.path, "reports");
    assert_eq!(
        check(&d.path, &["--max-lateness", "1m"]).status.code(),
        Some(6)
    );
    // Once the job finished longer ago than the window, it no longer counts.
    let finished = Instant::now();
    while finished.elapsed() < Duration::from_millis(100) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = check(&d.path, &["--max-lateness", "1m", "--window", "50ms"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn the_thresholds_file_sets_max_lateness_overall_and_per_queue() {
    let d = db();
    enqueue(&d.path, "late", "reports", &ago(Duration::from_secs(3600)));
    run_one(&d.path, "reports");
    enqueue(
        &d.path,
        "late-mail",
        "mail",
        &ago(Duration::from_secs(3600)),
    );
    run_one(&d.path, "mail");
    let file = d.path.with_file_name("thresholds.toml");
    std::fs::write(
        &file,
        "max_lateness = \"2h\"\n[queues.reports]\nmax_lateness = \"30m\"\n",
    )
    .unwrap();
    let config = file.to_str().unwrap();
    let out = check(&d.path, &["--config", config]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    let text = stdout(&out);
    assert_eq!(text.lines().count(), 1, "{text}");
    assert!(text.starts_with("CROSSED queue reports: "), "{text}");
    // A flag overrides the file everywhere.
    let out = check(&d.path, &["--config", config, "--max-lateness", "3h"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    std::fs::write(&file, "max_lateness = \"soon\"\n").unwrap();
    let out = check(&d.path, &["--config", config]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("thresholds file"), "{}", stderr(&out));
    let out = errand(&d.path, &["stats", "--max-lateness", "1h"]);
    assert_eq!(out.status.code(), Some(2), "a threshold needs --check");
    let out = check(&d.path, &["--max-lateness", "later"]);
    assert_eq!(out.status.code(), Some(2));
}
