#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Queue rate limits across real worker processes: three `errand work
//! --rate R --burst B` processes share one bucket, on SQLite and — when
//! `ERRAND_TEST_POSTGRES_URL` is set — on PostgreSQL.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

/// Starts per second.
const RATE: u32 = 1;
/// How many may start at once after a quiet spell.
const BURST: usize = 3;
/// Jobs enqueued at once after the workers have idled.
const JOBS: usize = 9;

mod common;

use common::Backend;
use errand_testsupport::KillOnDrop;

impl Backend {
    fn log(&self) -> PathBuf {
        self.dir.join("starts.log")
    }

    /// A service worker of the mail queue, rate limited; its command
    /// appends "<milliseconds since the epoch> <job id>" to starts.log.
    fn worker(&self) -> KillOnDrop {
        let exec = format!(
            "echo \"$(date +%s%3N) $ERRAND_JOB_ID\" >> {}",
            self.log().display()
        );
        let child = self
            .command(&[
                "work",
                "--queue",
                "mail",
                "--rate",
                &RATE.to_string(),
                "--burst",
                &BURST.to_string(),
                "--concurrency",
                "4",
                "--poll",
                "50ms",
                "--exec",
                &exec,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn worker");
        KillOnDrop::new(child)
    }
}

/// The shared bound of every wait in these tests.
fn wait_until(what: &str, done: impl FnMut() -> bool) {
    // Each look opens a store: ten a second are plenty.
    errand_testsupport::wait_until(
        what,
        Duration::from_secs(120),
        Duration::from_millis(100),
        done,
    );
}

/// The most starts in any window `[t, t + width)` of the sorted times.
fn most_in_a_window(times: &[i64], width: i64) -> usize {
    (0..times.len())
        .map(|i| {
            times[i..]
                .iter()
                .take_while(|&&t| t < times[i] + width)
                .count()
        })
        .max()
        .unwrap_or(0)
}

fn three_processes_share_one_bucket(b: &Backend) {
    let _workers: Vec<KillOnDrop> = (0..3).map(|_| b.worker()).collect();
    // Every worker has reported a claim cycle: all three are polling the
    // empty queue, as an idle worker does.
    wait_until("three idle workers", || {
        b.with_store(async |s| {
            let stats = s.stats(&errand::StatsRequest::default()).await.unwrap();
            stats
                .workers
                .iter()
                .filter(|w| w.metrics.cycles > 0)
                .count()
                == 3
        })
    });
    std::thread::sleep(Duration::from_millis(500));
    let jobs: Vec<errand::NewJob> = (0..JOBS)
        .map(|i| {
            errand::NewJob::new("mail", errand::Payload::default())
                .unwrap()
                .with_id(errand::JobId::new(format!("m{i}")).unwrap())
                .on_queue("mail")
                .unwrap()
        })
        .collect();
    b.with_store(async |s| s.insert_many(jobs).await.unwrap());
    wait_until("every job done", || {
        b.with_store(async |s| {
            let done = s
                .list(&errand::JobFilter {
                    state: Some(errand::JobState::Done),
                    ..Default::default()
                })
                .await
                .unwrap();
            done.len() == JOBS
        })
    });

    // Each job ran once.
    let log = std::fs::read_to_string(b.log()).unwrap();
    let mut starts: Vec<(i64, String)> = log
        .lines()
        .map(|l| {
            let (t, id) = l.split_once(' ').expect("a start line");
            (t.parse().expect("a time"), id.to_owned())
        })
        .collect();
    starts.sort();
    let mut ids: Vec<&str> = starts.iter().map(|(_, id)| id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!((starts.len(), ids.len()), (JOBS, JOBS), "{log}");

    // The commands' own clocks: never more than R + B starts in a second.
    let exec_times: Vec<i64> = starts.iter().map(|(t, _)| *t).collect();
    let most = most_in_a_window(&exec_times, 1_000);
    assert!(
        most <= RATE as usize + BURST,
        "{most} starts in one second (rate {RATE}, burst {BURST}): {log}"
    );

    // The claims on the store's clock: in any window of w ms, at most
    // B + R·w starts (plus a tenth of a second for transactions that
    // waited on the bucket's row and carry an earlier start time).
    let mut claimed: Vec<i64> = b.with_store(async |s| {
        let mut times = Vec::new();
        for i in 0..JOBS {
            let d = s
                .detail(&errand::JobId::new(format!("m{i}")).unwrap())
                .await
                .unwrap();
            assert_eq!(d.history.len(), 1, "m{i} ran once");
            times.push(d.history[0].started_at.as_millis());
        }
        times
    });
    claimed.sort_unstable();
    eprintln!(
        "claims, ms after the first: {:?}; command starts, ms after the first: {:?}",
        claimed.iter().map(|t| t - claimed[0]).collect::<Vec<_>>(),
        exec_times
            .iter()
            .map(|t| t - exec_times[0])
            .collect::<Vec<_>>()
    );
    for i in 0..claimed.len() {
        for j in i..claimed.len() {
            let width_ms = (claimed[j] - claimed[i] + 100) as f64;
            let bound = BURST as f64 + f64::from(RATE) * width_ms / 1000.0;
            assert!(
                (j - i + 1) as f64 <= bound,
                "{} claims within {} ms: {claimed:?}",
                j - i + 1,
                claimed[j] - claimed[i]
            );
        }
    }
    // After the quiet spell the burst started together: the first B claims
    // came closer together than one token's refill (a drained bucket
    // would have spaced them a second apart).
    let span = claimed[BURST - 1] - claimed[0];
    assert!(
        span < 1_000 / i64::from(RATE),
        "the first {BURST} jobs were claimed over {span} ms: {claimed:?}"
    );
}

#[test]
fn three_worker_processes_share_one_rate_and_keep_its_burst_while_idle() {
    three_processes_share_one_bucket(&Backend::sqlite());
    if let Some(pg) = Backend::postgres("rates") {
        three_processes_share_one_bucket(&pg);
    }
}
