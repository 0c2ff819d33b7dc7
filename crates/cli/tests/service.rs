#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The service worker (`errand work` without `--once`) as real processes
//! with real signals, on SQLite and — when `ERRAND_TEST_POSTGRES_URL` is set —
//! on PostgreSQL.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::Value;

mod common;

use common::{Backend, both};
use errand_testsupport::KillOnDrop;

impl Backend {
    fn enqueue(&self, id: &str, payload: &str) {
        self.ok(&[
            "enqueue",
            "--kind",
            "svc",
            "--id",
            id,
            "--payload",
            payload,
            "--json",
        ]);
    }

    fn jobs(&self) -> Vec<Value> {
        self.ok(&["jobs", "--limit", "1000", "--json"])
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn count(&self, state: &str) -> usize {
        self.jobs().iter().filter(|j| j["state"] == state).count()
    }

    fn worker(&self, args: &[&str]) -> Child {
        self.command(&["work", "--poll", "50ms", "--json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn worker")
    }

    fn log(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.join("exec.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// Inserts jobs through the library in one call (the CLI enqueues one
    /// job per process, too slow for a 10,000-job backlog).
    fn insert_many(&self, jobs: Vec<errand::NewJob>) {
        self.with_store(async |store| {
            for chunk in jobs.chunks(2_000) {
                store.insert_many(chunk.to_vec()).await.unwrap();
            }
        });
    }

    fn sink(&self) -> PathBuf {
        let sink = self.dir.join("sink");
        std::fs::create_dir_all(&sink).unwrap();
        sink
    }
}

/// The shared bound of every wait in these tests.
fn wait_until(what: &str, done: impl FnMut() -> bool) {
    // Each look runs the errand command: twenty a second are plenty.
    errand_testsupport::wait_until(
        what,
        Duration::from_secs(120),
        Duration::from_millis(50),
        done,
    );
}

fn signal(child: &Child, sig: &str) {
    let ok = Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

/// The command appends "<job id> <attempt>" to exec.log, then sleeps for
/// the payload's `ms`, then touches sink/<job id> (the idempotent effect).
fn exec(b: &Backend) -> String {
    format!(
        "echo \"$ERRAND_JOB_ID $ERRAND_ATTEMPT\" >> {log}; ms=$(tr -cd 0-9); sleep $((ms / 1000)).$(printf %03d $((ms % 1000))); touch {sink}/\"$ERRAND_JOB_ID\"",
        log = b.dir.join("exec.log").display(),
        sink = b.sink().display(),
    )
}

#[test]
fn a_handler_five_times_longer_than_its_lease_completes_exactly_once() {
    both("long", |b| {
        // Five leases long. Renewal every third of the lease tolerates a
        // renewal up to two thirds of it late (a busy CI disk), so the lease
        // is a full second.
        b.enqueue("long", r#"{"ms": 5000}"#);
        let cmd = exec(b);
        let w = b.worker(&["--lease", "1s", "--exec", &cmd]);
        wait_until("the long job", || b.count("done") == 1);
        signal(&w, "-TERM");
        assert!(w.wait_with_output().unwrap().status.success());
        assert_eq!(b.log(), vec!["long 1"], "one execution, attempt 1");
        assert_eq!(b.jobs()[0]["attempts"], 1);
    });
}

#[test]
fn sigterm_with_50_jobs_in_flight_finishes_or_releases_every_one() {
    both("term", |b| {
        for i in 0..50 {
            // Half finish quickly, half outlast the drain deadline.
            let ms = if i % 2 == 0 { 100 } else { 20_000 };
            b.enqueue(&format!("t{i:02}"), &format!(r#"{{"ms": {ms}}}"#));
        }
        let cmd = exec(b);
        let w = b.worker(&[
            "--concurrency",
            "50",
            "--lease",
            "10s",
            "--drain",
            "2s",
            "--exec",
            &cmd,
        ]);
        wait_until("50 jobs in flight", || b.log().len() == 50);
        signal(&w, "-TERM");
        let out = w.wait_with_output().unwrap();
        assert!(out.status.success(), "the worker drains and exits 0");
        let jobs = b.jobs();
        assert_eq!(jobs.len(), 50);
        for j in &jobs {
            let state = j["state"].as_str().unwrap();
            assert!(
                state == "done" || (state == "ready" && j["attempts"] == 0),
                "{j}"
            );
        }
        let done = jobs.iter().filter(|j| j["state"] == "done").count();
        assert!(
            done >= 25,
            "the quick half finished within the drain deadline ({done} done)"
        );
        assert!(
            b.count("running") + b.count("dead") == 0,
            "none stuck, none dead"
        );
        let reports: Vec<Value> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let released = reports
            .iter()
            .filter(|r| r["outcome"] == "released")
            .count();
        assert_eq!(
            released + done,
            50,
            "every job was reported finished or released"
        );
    });
}

#[test]
fn after_a_sigkill_another_worker_finishes_the_jobs_with_one_effect_each() {
    both("kill", |b| {
        for i in 0..20 {
            b.enqueue(&format!("k{i:02}"), r#"{"ms": 400}"#);
        }
        let cmd = exec(b);
        let a = b.worker(&["--concurrency", "8", "--lease", "1s", "--exec", &cmd]);
        wait_until("jobs in flight", || b.log().len() >= 8);
        signal(&a, "-KILL");
        let _ = a.wait_with_output();
        let second = b.worker(&["--concurrency", "8", "--lease", "1s", "--exec", &cmd]);
        wait_until("all jobs done", || b.count("done") == 20);
        signal(&second, "-TERM");
        assert!(second.wait_with_output().unwrap().status.success());
        let effects = std::fs::read_dir(b.sink()).unwrap().count();
        assert_eq!(effects, 20, "each effect once at the idempotent sink");
        let log = b.log();
        let unique: HashSet<&str> = log.iter().filter_map(|l| l.split(' ').next()).collect();
        assert_eq!(unique.len(), 20);
        assert!(
            log.iter().any(|l| l.ends_with(" 2")),
            "some job was reclaimed after the kill"
        );
        assert_eq!(b.count("running") + b.count("ready") + b.count("dead"), 0);
    });
}

#[test]
fn twenty_processes_on_one_cron_schedule_enqueue_exactly_one_job_per_tick() {
    both("cron", |b| {
        // backfill:3 so a process stalled by a loaded machine still enqueues
        // the ticks it slept through (the others then find them existing).
        let spawn = || {
            b.command(&[
                "schedule",
                "--name",
                "tick",
                "--cron",
                "* * * * * *",
                "--kind",
                "k",
                "--misfire",
                "backfill:3",
                "--json",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn scheduler")
        };
        let procs: Vec<Child> = (0..20).map(|_| spawn()).collect();
        std::thread::sleep(Duration::from_millis(3500));
        for p in &procs {
            signal(p, "-TERM");
        }
        let mut created = Vec::new();
        for p in procs {
            let out = p.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            for line in String::from_utf8_lossy(&out.stdout).lines() {
                let v: Value = serde_json::from_str(line).unwrap();
                created.push(v["id"].as_str().unwrap().to_owned());
            }
        }
        let unique: HashSet<&String> = created.iter().collect();
        assert_eq!(
            unique.len(),
            created.len(),
            "no tick was created twice: {created:?}"
        );
        let mut ids: Vec<String> = b
            .jobs()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_owned())
            .collect();
        ids.sort();
        created.sort();
        assert_eq!(ids, created, "every job was created by exactly one process");
        assert!(ids.len() >= 3, "about one tick per second: {ids:?}");
        // Consecutive seconds, none missed.
        let secs: Vec<i64> = ids
            .iter()
            .map(|id| {
                let t =
                    errand::Timestamp::parse_rfc3339(id.trim_start_matches("cron:tick:")).unwrap();
                assert_eq!(t.as_millis() % 1000, 0, "ticks fall on whole seconds");
                t.as_millis() / 1000
            })
            .collect();
        assert!(
            secs.windows(2).all(|w| w[1] == w[0] + 1),
            "no tick missed: {secs:?}"
        );
    });
}

#[test]
fn a_tenant_with_10000_queued_jobs_does_not_delay_another_tenants_job_by_more_than_one_batch() {
    both("fair", |b| {
        let backlog: Vec<errand::NewJob> = (0..10_000)
            .map(|n| {
                errand::NewJob::new("svc", errand::Payload::default())
                    .unwrap()
                    .with_id(errand::JobId::new(format!("a-{n:05}")).unwrap())
                    .with_key("tenant-a", errand::KeyLimit::Concurrent(2))
                    .unwrap()
            })
            .collect();
        b.insert_many(backlog);
        b.ok(&[
            "enqueue",
            "--kind",
            "svc",
            "--id",
            "b-only",
            "--key",
            "tenant-b",
            "--key-limit",
            "2",
            "--json",
        ]);
        // Each run logs its start and its end (before it is acknowledged).
        let log_path = b.dir.join("exec.log");
        let cmd = format!(
            "echo \"start $ERRAND_JOB_ID\" >> {log}; sleep 0.01; echo \"end $ERRAND_JOB_ID\" >> {log}",
            log = log_path.display()
        );
        // Four slots: each claim asks for up to four jobs (one batch).
        let mut w = KillOnDrop::new(b.worker(&["--concurrency", "4", "--exec", &cmd]));
        wait_until("tenant-b's job and 40 of tenant-a's to finish", || {
            let log = b.log();
            log.iter().any(|l| l == "end b-only")
                && log.iter().filter(|l| l.starts_with("end a-")).count() >= 40
        });
        signal(w.child(), "-TERM");
        assert!(w.wait_with_output().status.success());
        let log = b.log();
        let starts: Vec<&str> = log
            .iter()
            .filter_map(|l| l.strip_prefix("start "))
            .collect();
        let position = starts.iter().position(|id| *id == "b-only").unwrap();
        assert!(
            position < 4,
            "tenant-b's job started as number {} behind tenant-a's backlog: {:?}",
            position + 1,
            &starts[..starts.len().min(12)]
        );
        // Tenant-a never had more than its limit of two running at once.
        let (mut running, mut most) = (0i32, 0i32);
        for line in log.iter().filter(|l| l.contains(" a-")) {
            running += if line.starts_with("start ") { 1 } else { -1 };
            most = most.max(running);
        }
        assert_eq!(most, 2, "tenant-a's most at once");
    });
}
