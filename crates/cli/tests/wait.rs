#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `errand wait`: one process waits while another ends the job, and the
//! exit code says how it ended (0 done, 7 dead, 8 cancelled, 9 the
//! timeout passed, 3 no such job), on both backends.

mod common;

use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use common::{Backend, both};
use serde_json::Value;

fn enqueue(b: &Backend, id: &str) {
    b.ok(&[
        "enqueue",
        "--kind",
        "k",
        "--id",
        id,
        "--max-attempts",
        "1",
        "--json",
    ]);
}

/// On PostgreSQL, until the waiting process has marked job `id` as waited
/// for (so the end it hears is a notification, not its first read).
fn waiting_on_postgres(b: &Backend, id: &str) {
    let Some((url, schema)) = &b.pg else {
        return;
    };
    let until = Instant::now() + Duration::from_secs(20);
    loop {
        let out = std::process::Command::new("psql")
            .args([url.as_str(), "-Atq", "-c"])
            .arg(format!(
                "SELECT awaited FROM {schema}.errand_jobs WHERE id = '{id}'"
            ))
            .output()
            .unwrap();
        if stdout(&out).trim() == "t" {
            return;
        }
        assert!(Instant::now() < until, "the waiter never marked {id}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn a_waiter_in_one_process_hears_a_worker_in_another_end_the_job() {
    both("wait_done", |b| {
        enqueue(b, "w1");
        let waiter = b
            .command(&["wait", "w1", "--timeout", "60s", "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        waiting_on_postgres(b, "w1");
        let report = b.ok(&[
            "work",
            "--once",
            "--exec",
            "echo '{\"n\": 1}' > \"$ERRAND_OUTPUT\"",
            "--json",
        ]);
        assert_eq!(report["outcome"], "acknowledged", "{report}");
        // With a 60 s timeout, exit 0 says it answered at the end.
        let out = waiter.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let jobs: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(jobs[0]["id"], "w1");
        assert_eq!(jobs[0]["state"], "done");
        assert_eq!(jobs[0]["output"], serde_json::json!({"n": 1}));
    });
}

#[test]
fn the_exit_code_says_how_the_jobs_ended() {
    both("wait_codes", |b| {
        enqueue(b, "d1");
        b.ok(&[
            "work",
            "--once",
            "--exec",
            "echo broken >&2; exit 1",
            "--json",
        ]);
        let dead = b.run(&["wait", "d1"]);
        assert_eq!(dead.status.code(), Some(7), "dead: 7");
        assert_eq!(stdout(&dead), "d1 dead: broken\n");

        enqueue(b, "c1");
        b.ok(&["cancel", "c1", "--by", "ops", "--json"]);
        let cancelled = b.run(&["wait", "c1"]);
        assert_eq!(cancelled.status.code(), Some(8), "cancelled: 8");
        assert_eq!(stdout(&cancelled), "c1 cancelled\n");
        // Several jobs: dead outweighs cancelled.
        assert_eq!(b.run(&["wait", "c1", "d1"]).status.code(), Some(7));

        enqueue(b, "r1");
        let waiting = b.run(&["wait", "c1", "r1", "--timeout", "200ms"]);
        assert_eq!(waiting.status.code(), Some(9), "the timeout passed: 9");
        assert_eq!(
            stdout(&waiting),
            "c1 cancelled\nr1 still ready (the timeout passed)\n"
        );

        let missing = b.run(&["wait", "nope", "--timeout", "1s"]);
        assert_eq!(missing.status.code(), Some(3));
        assert!(String::from_utf8_lossy(&missing.stderr).contains("no job with id `nope`"));
    });
}
