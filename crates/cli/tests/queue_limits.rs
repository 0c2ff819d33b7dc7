#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A queue's concurrency cap with real worker processes: `errand queue
//! limit` as an operator uses it, and four `errand work` processes of 16
//! slots each sharing a cap of 5 — on SQLite and, when
//! `ERRAND_TEST_POSTGRES_URL` is set, on PostgreSQL. (Which claims a cap
//! stops is conformance's `limits` cases.)

use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::both;

/// `errand work` processes, killed if the test fails before they stop.
struct Workers(Vec<Child>);

impl Workers {
    /// Stops every worker with SIGTERM; each must exit cleanly.
    fn stop(mut self) {
        for w in &self.0 {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &w.id().to_string()])
                .status();
        }
        for mut w in self.0.drain(..) {
            assert!(w.wait().unwrap().success(), "a worker failed");
        }
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for w in &mut self.0 {
            let _ = w.kill();
            let _ = w.wait();
        }
    }
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn stdout(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `errand queue limit` sets, shows and clears a cap, each change
/// audited; bad input exits 2 and writes nothing.
#[test]
fn an_operator_sets_and_clears_a_cap_from_the_command_line() {
    both("qlimit_cli", |b| {
        b.ok(&["enqueue", "--kind", "k", "--queue", "mail", "--json"]);
        let out = b.run(&[
            "queue",
            "limit",
            "mail",
            "--concurrency",
            "5",
            "--by",
            "ops",
            "--reason",
            "provider allows 5",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).starts_with("queue mail: at most 5 of its jobs run at once"),
            "{}",
            stdout(&out)
        );
        let same = b.ok(&[
            "queue",
            "limit",
            "mail",
            "--concurrency",
            "5",
            "--by",
            "bob",
            "--json",
        ]);
        assert_eq!(
            (
                &same["concurrency_limit"],
                &same["changed"],
                &same["set_by"]
            ),
            (&Value::from(5), &Value::from(false), &Value::from("ops"))
        );
        let queues = b.ok(&["queues", "--json"]);
        assert_eq!(queues[0]["queue"], "mail");
        assert_eq!(queues[0]["concurrency_limit"], 5);
        let table = stdout(&b.run(&["queues"]));
        assert!(table.starts_with("QUEUE  STATE   LIMIT"), "{table}");
        assert!(
            table
                .lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>()[..3] == ["mail", "active", "5"]),
            "{table}"
        );

        for (args, needle) in [
            (&["--concurrency", "0", "--by", "ops"][..], "1 to 100000"),
            (
                &["--concurrency", "1000000000", "--by", "ops"][..],
                "1 to 100000",
            ),
            (&["--by", "ops"][..], "--clear"),
            (
                &["--concurrency", "3", "--clear", "--by", "ops"][..],
                "--clear",
            ),
            (&["--concurrency", "3"][..], "--by"),
            (&["--concurrency", "3", "--by", " "][..], "operator"),
        ] {
            let out = b.run(&[&["queue", "limit", "mail"][..], args].concat());
            assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
            assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
        }
        assert_eq!(b.ok(&["queues", "--json"])[0]["concurrency_limit"], 5);

        let cleared = b.ok(&["queue", "limit", "mail", "--clear", "--by", "ops", "--json"]);
        assert_eq!(
            (&cleared["concurrency_limit"], &cleared["changed"]),
            (&Value::Null, &Value::from(true))
        );
        let out = b.run(&["queue", "limit", "mail", "--clear", "--by", "ops"]);
        assert_eq!(
            stdout(&out).trim(),
            "queue mail has no cap; nothing changed"
        );
        let audit = b.ok(&["audit", "--queue", "mail", "--json"]);
        let actions: Vec<&str> = audit
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["action"].as_str().unwrap())
            .collect();
        assert_eq!(actions, ["unlimit", "limit"]);
    });
}

/// One job's run as its command saw it: start and end, in nanoseconds.
struct Run {
    start: u128,
    end: u128,
}

fn runs(log: &Path) -> Vec<Run> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            Run {
                start: f[1].parse().unwrap(),
                end: f[2].parse().unwrap(),
            }
        })
        .collect()
}

/// The most runs that overlapped at any instant (a run that ends at the
/// instant another starts does not overlap it).
fn most_at_once(runs: &[Run]) -> usize {
    let mut edges: Vec<(u128, i32)> = runs
        .iter()
        .flat_map(|r| [(r.start, 1), (r.end, -1)])
        .collect();
    edges.sort_unstable();
    let (mut now, mut most) = (0i32, 0i32);
    for (_, step) in edges {
        now += step;
        most = most.max(now);
    }
    usize::try_from(most).unwrap()
}

const JOBS: usize = 60;
const CAP: usize = 5;

/// Four worker processes of 16 slots each serve a queue capped at 5: at
/// no sampled moment do more than 5 of its jobs run, and no more than 5
/// commands ever overlap; the cap is reached (5 do overlap), and every job
/// runs once.
#[test]
fn four_processes_of_sixteen_slots_never_run_more_than_the_cap() {
    both("qlimit_procs", |b| {
        let ids: Vec<String> = (0..JOBS).map(|n| format!("j{n:02}")).collect();
        b.ok(&[
            "queue",
            "limit",
            "mail",
            "--concurrency",
            &CAP.to_string(),
            "--by",
            "test",
        ]);
        for id in &ids {
            b.ok(&[
                "enqueue", "--kind", "k", "--queue", "mail", "--id", id, "--json",
            ]);
        }
        let log = b.dir.join("runs.log");
        let cmd = format!(
            "s=$(date +%s%N); sleep 0.2; e=$(date +%s%N); echo \"$ERRAND_JOB_ID $s $e\" >> {}",
            log.display()
        );
        let started = Instant::now();
        let workers = Workers(
            (0..4)
                .map(|_| {
                    b.command(&["work", "--concurrency", "16", "--poll", "50ms"])
                        .args(["--exec", &cmd])
                        .stdout(Stdio::null())
                        .stderr(Stdio::null())
                        .spawn()
                        .expect("spawn worker")
                })
                .collect(),
        );
        let mut most_sampled = 0;
        loop {
            let stats = b.ok(&["stats", "--json"]);
            let running = stats["queues"][0]["running"].as_u64().unwrap_or(0);
            assert!(
                running <= CAP as u64,
                "{running} of the queue's jobs running at once: {stats}"
            );
            most_sampled = most_sampled.max(running);
            if runs(&log).len() >= JOBS {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "gave up waiting for the jobs to run"
            );
        }
        let elapsed = started.elapsed();
        workers.stop();
        let runs = runs(&log);
        assert_eq!(runs.len(), JOBS, "every job ran once");
        let most = most_at_once(&runs);
        assert_eq!(
            most, CAP,
            "the commands overlapped at most (and at least) the cap"
        );
        let first = runs.iter().map(|r| r.start).min().unwrap();
        let last = runs.iter().map(|r| r.end).max().unwrap();
        eprintln!(
            "{}: {JOBS} jobs of 200 ms on a cap of {CAP}: {:.1} jobs/s between the first start \
             and the last end (the cap allows 25), {elapsed:?} in all; most running in a \
             sample {most_sampled}, most commands at once {most}",
            if b.pg.is_some() {
                "PostgreSQL"
            } else {
                "SQLite"
            },
            JOBS as f64 / ((last - first) as f64 / 1e9),
        );
        let done = b.ok(&["jobs", "--state", "done", "--limit", "1000", "--json"]);
        assert_eq!(done.as_array().map(Vec::len), Some(JOBS));
    });
}
