#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Stored schedules from the command line, on SQLite and — when
//! `ERRAND_TEST_POSTGRES_URL` is set — on PostgreSQL: `errand schedule
//! add|list|remove|pause|resume`, their answers and exit codes, and two real
//! `errand work` services running one stored schedule: each tick becomes
//! one job, run once.

use std::collections::HashSet;
use std::process::{Child, Stdio};
use std::time::Duration;

mod common;

use common::{Backend, both};
use errand_testsupport::{KillOnDrop, wait_until};

fn stdout(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn stored_schedules_are_added_listed_paused_and_removed_with_audit() {
    both("sched_cli", |b| {
        let added = b.ok(&[
            "schedule",
            "add",
            "nightly",
            "--cron",
            "0 3 * * *",
            "--kind",
            "report",
            "--payload",
            r#"{"a":1}"#,
            "--queue",
            "reports",
            "--misfire",
            "backfill:2",
            "--by",
            "ops",
            "--json",
        ]);
        assert_eq!(added["outcome"], "added");
        assert_eq!(added["schedule"]["misfire"], "backfill:2");
        assert_eq!(added["schedule"]["payload"]["a"], 1);

        // The same definition, spelled otherwise: nothing changes.
        let out = b.run(&[
            "schedule",
            "add",
            "nightly",
            "--cron",
            "0 3 * * *",
            "--kind",
            "report",
            "--payload",
            r#"{ "a": 1 }"#,
            "--queue",
            "reports",
            "--misfire",
            "backfill:2",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).starts_with("schedule nightly unchanged"),
            "{}",
            stdout(&out)
        );

        // Another definition: refused (exit 2) unless --replace.
        let args = [
            "schedule",
            "add",
            "nightly",
            "--cron",
            "0 4 * * *",
            "--kind",
            "report",
            "--queue",
            "reports",
        ];
        let out = b.run(&args);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(stderr(&out).contains("--replace"), "{}", stderr(&out));
        let mut replace = args.to_vec();
        replace.extend(["--replace", "--by", "ops", "--reason", "later", "--json"]);
        assert_eq!(b.ok(&replace)["outcome"], "replaced");

        // A bad pattern is refused and stores nothing.
        let out = b.run(&["schedule", "add", "x", "--cron", "often", "--kind", "k"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("cron pattern"), "{}", stderr(&out));

        let list = b.ok(&["schedule", "list", "--json"]);
        let list = list.as_array().unwrap();
        assert_eq!(list.len(), 1);
        assert_eq!(list[0]["name"], "nightly");
        assert_eq!(list[0]["cron"], "0 4 * * *");
        assert!(
            list[0]["next_tick"]
                .as_str()
                .is_some_and(|t| t.ends_with("T04:00:00.000Z")),
            "{}",
            list[0]
        );

        let paused = b.ok(&[
            "schedule",
            "pause",
            "nightly",
            "--by",
            "oncall",
            "--reason",
            "quarter end",
            "--json",
        ]);
        assert_eq!(paused["changed"], true);
        assert_eq!(paused["schedule"]["paused"]["operator"], "oncall");
        let out = b.run(&["schedule", "pause", "nightly"]);
        assert!(
            stdout(&out).contains("was already paused; nothing changed"),
            "{}",
            stdout(&out)
        );
        let text = stdout(&b.run(&["schedule", "list"]));
        assert!(
            text.lines().any(|l| l.starts_with("nightly")
                && l.contains("paused by oncall")
                && l.contains("quarter end")),
            "{text}"
        );
        assert_eq!(
            b.ok(&["schedule", "resume", "nightly", "--json"])["changed"],
            true
        );
        let removed = b.ok(&["schedule", "remove", "nightly", "--by", "ops", "--json"]);
        assert_eq!(removed["removed"]["name"], "nightly");
        let out = b.run(&["schedule", "remove", "nightly"]);
        assert_eq!(out.status.code(), Some(3), "not found: {}", stderr(&out));
        assert!(stderr(&out).contains("no schedule named `nightly`"));
        let out = b.run(&["schedule", "pause", "nightly"]);
        assert_eq!(out.status.code(), Some(3));

        // Which entries each change writes is conformance's (schedules.rs).
        let text = stdout(&b.run(&["audit", "--schedule", "nightly"]));
        assert!(text.contains("schedule nightly"), "{text}");

        // The flag form still runs one schedule in this process.
        let out = b.run(&[
            "schedule",
            "--name",
            "here",
            "--cron",
            "* * * * * *",
            "--kind",
            "k",
            "--once",
            "--json",
        ]);
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            stdout(&out).contains("\"id\":\"cron:here:"),
            "{}",
            stdout(&out)
        );
    });
}

impl Backend {
    fn service(&self, sink: &std::path::Path) -> KillOnDrop {
        let exec = format!("echo \"$ERRAND_JOB_ID\" >> {}", sink.display());
        let child: Child = self
            .command(&[
                "work",
                "--poll",
                "50ms",
                "--concurrency",
                "2",
                "--exec",
                &exec,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn worker");
        KillOnDrop::new(child)
    }

    fn ticks(&self, name: &str) -> Vec<String> {
        let prefix = format!("cron:{name}:");
        self.ok(&["jobs", "--limit", "10000", "--json"])
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|j| j["id"].as_str())
            .filter(|id| id.starts_with(&prefix))
            .map(str::to_owned)
            .collect()
    }
}

fn lines(path: &std::path::Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(str::to_owned)
        .collect()
}

/// The tick of a job id `cron:NAME:TICK`, as RFC 3339 text (all in UTC
/// with milliseconds, so they compare as text).
fn tick_of(id: &str) -> &str {
    id.rsplit_once("cron:beat:").map_or(id, |(_, t)| t)
}

/// Two services run a stored every-second schedule: each tick is one job,
/// run once; no tick falls between a pause and the resume, nor after the
/// removal (a pass that read the schedule just before a change adds only
/// ticks up to its own start, which came before the change).
#[test]
fn two_work_services_run_a_stored_schedule_once_per_tick() {
    both("sched_svc", |b| {
        b.ok(&[
            "schedule",
            "add",
            "beat",
            "--cron",
            "* * * * * *",
            "--kind",
            "beat",
            "--json",
        ]);
        let sink = b.dir.join("effects");
        let services = [b.service(&sink), b.service(&sink)];
        wait_until(
            "four ticks run",
            Duration::from_secs(60),
            Duration::from_millis(100),
            || lines(&sink).len() >= 4,
        );

        let paused = b.ok(&["schedule", "pause", "beat", "--json"]);
        let paused_at = paused["schedule"]["paused"]["at"]
            .as_str()
            .unwrap()
            .to_owned();
        std::thread::sleep(Duration::from_millis(2500));
        let resumed = b.ok(&["schedule", "resume", "beat", "--json"]);
        let resumed_at = resumed["schedule"]["active_since"]
            .as_str()
            .unwrap()
            .to_owned();
        let before_resume = b.ticks("beat").len();
        wait_until(
            "ticks after the resume",
            Duration::from_secs(60),
            Duration::from_millis(300),
            || b.ticks("beat").len() >= before_resume + 2,
        );
        b.ok(&["schedule", "remove", "beat", "--json"]);
        let removed_at = b.ok(&["audit", "--schedule", "beat", "--limit", "1", "--json"])[0]["at"]
            .as_str()
            .unwrap()
            .to_owned();
        std::thread::sleep(Duration::from_millis(1500));
        let ticks = b.ticks("beat");
        wait_until(
            "every tick run",
            Duration::from_secs(30),
            Duration::from_millis(100),
            || {
                let ran = lines(&sink);
                ticks.iter().all(|t| ran.contains(t))
            },
        );
        drop(services);

        let ticks: HashSet<String> = b.ticks("beat").into_iter().collect();
        for t in &ticks {
            let at = tick_of(t);
            assert!(
                at <= paused_at.as_str() || at >= resumed_at.as_str(),
                "tick {at} while paused ({paused_at} .. {resumed_at})"
            );
            assert!(
                at <= removed_at.as_str(),
                "tick {at} after the removal at {removed_at}"
            );
        }
        let ran = lines(&sink);
        let distinct: HashSet<&String> = ran.iter().collect();
        assert_eq!(distinct.len(), ran.len(), "a tick ran twice: {ran:?}");
        assert!(
            ran.iter().all(|id| ticks.contains(id)),
            "only the ticks' jobs ran: {ran:?}"
        );
        assert!(ran.len() >= 6, "{ran:?}");
    });
}

/// `--tz ZONE` reads the pattern in an IANA time zone: stored, listed and
/// shown with the schedule, its next tick the zone's 02:30 in UTC; a zone
/// that does not exist is refused with a usage error and writes nothing.
#[test]
fn a_stored_schedule_reads_its_pattern_in_its_time_zone() {
    both("sched_tz_cli", |b| {
        let added = b.ok(&[
            "schedule",
            "add",
            "nightly",
            "--cron",
            "30 2 * * *",
            "--kind",
            "report",
            "--tz",
            "America/New_York",
            "--json",
        ]);
        assert_eq!(added["schedule"]["tz"], "America/New_York", "{added}");
        let shown = b.ok(&["schedule", "list", "--json"]);
        let next = shown[0]["next_tick"].as_str().unwrap();
        // 02:30 in New York is 06:30 or 07:30 UTC, by the season.
        assert!(
            next.ends_with("T06:30:00.000Z") || next.ends_with("T07:30:00.000Z"),
            "{next}"
        );
        let listed = b.run(&["schedule", "list"]);
        let text = stdout(&listed);
        assert!(
            text.contains("TZ") && text.contains("America/New_York"),
            "{text}"
        );
        let refused = b.run(&[
            "schedule",
            "add",
            "other",
            "--cron",
            "0 3 * * *",
            "--kind",
            "report",
            "--tz",
            "Mars/Olympus_Mons",
        ]);
        assert_eq!(refused.status.code(), Some(2), "{}", stderr(&refused));
        assert!(
            stderr(&refused).contains("does not exist"),
            "{}",
            stderr(&refused)
        );
        let all = b.ok(&["schedule", "list", "--json"]);
        assert_eq!(
            all.as_array().unwrap().len(),
            1,
            "nothing was written: {all}"
        );
    });
}
