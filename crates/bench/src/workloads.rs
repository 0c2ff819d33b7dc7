//! The workloads. Each runs through the store and runtime paths an
//! application uses; see the crate documentation for what each measures.
//!
//! This file holds the dispatch, the jobs, and the instrumented runtime
//! every drain uses (its counters, handler, report hook and watch); each
//! workload's own steps are in the submodule named after it, and the
//! checking of a configuration in `resolve.rs`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use errand::{
    Handler, JobContext, JobId, NewJob, Outcome, Payload, ReportHook, RetryPolicy, Runtime, Store,
    WorkOutcome, WorkReport, Workflow, WorkflowId, handler_fn,
};
use serde::Deserialize;

use crate::stats::{ms, peak_rss_mb, per_second, ratio};
use crate::target::Target;
use crate::{BenchConfig, BenchError, Interval, Params, Progress, Report, Result, Workload};

mod claim_cost;
mod continuous;
mod drain;
mod enqueue;
mod fan_out;
mod latency;
mod resolve;
mod waiters;
use claim_cost::claim_cost;
use continuous::continuous;
use drain::burn_down;
use enqueue::enqueue;
use fan_out::fan_out;
use latency::{Arrival, latency};
use resolve::{Resolved, resolve};
use waiters::waiters;

/// The kind of every benchmark job.
const KIND: &str = "bench";
/// Batch size of the untimed pre-inserts (a multiple of [`CHAIN`]).
const PREINSERT_BATCH: u64 = 5_000;
/// The length of the workflow workload's chains.
const CHAIN: u64 = 10;
/// Default dependents of the fan-out workload, and its rounds.
const DEFAULT_FAN_OUT: u64 = 1_000;
/// Default clients of the waiters workload, and how long they wait idle.
const DEFAULT_WAITERS: u64 = 10_000;
const DEFAULT_WAITERS_IDLE: Duration = Duration::from_secs(60);
const FAN_OUT_ROUNDS: usize = 5;
/// The enqueue batch sizes run when none is given.
const ENQUEUE_BATCHES: [u32; 3] = [1, 100, 5_000];
/// Default jobs of the enqueue, burn-down and retry-heavy workloads.
const DEFAULT_JOBS: u64 = 100_000;
/// Default jobs of a batch-of-one enqueue run when `--jobs` is not given
/// (one commit each: 100,000 would take minutes on SQLite FULL).
const DEFAULT_SINGLE_JOBS: u64 = 10_000;
/// Default runtime slots.
const DEFAULT_SLOTS: usize = 256;
/// Default continuous backlog and duration.
const DEFAULT_BACKLOG: u32 = 1_000;
const DEFAULT_CONTINUOUS: Duration = Duration::from_secs(10);
/// Default latency samples, warm-up jobs and the pause between samples.
const DEFAULT_SAMPLES: u64 = 1_000;
const WARMUP: u64 = 3;
const LATENCY_GAP: Duration = Duration::from_millis(10);
/// Claim cost: jobs per claim, default jobs claimed per phase, rows loaded
/// and how long the snapshot is held.
const CLAIM_LIMIT: u32 = 10;
const DEFAULT_CLAIMED: u64 = 2_000;
const DEFAULT_ROWS: u64 = 1_000_000;
const DEFAULT_SNAPSHOT: Duration = Duration::from_secs(30);
/// The lease of every claim.
const LEASE: Duration = Duration::from_secs(30);
/// How often drains report.
const INTERVAL: Duration = Duration::from_secs(2);
/// Most jobs one producer call inserts in the continuous workload.
const TOP_UP_MAX: u64 = 5_000;

pub(crate) async fn run(config: &BenchConfig, progress: Option<Progress>) -> Result<Report> {
    let r = resolve(config)?;
    let target = Target::open(
        &config.db,
        &config.schema,
        config.synchronous,
        config.keys.clone(),
    )
    .await?;
    let mut report = Report {
        workload: config.workload,
        backend: target.backend(),
        synchronous: target.synchronous(),
        params: Params {
            jobs: r.jobs,
            batch: match config.workload {
                Workload::Enqueue => config.batch,
                Workload::Continuous => Some(r.backlog),
                _ => None,
            },
            concurrency: r.concurrency,
            duration_ms: match config.workload {
                Workload::Continuous | Workload::Waiters => Some(r.duration.as_millis() as u64),
                Workload::ClaimCost if target.pg_url().is_some() => {
                    Some(r.duration.as_millis() as u64)
                }
                _ => None,
            },
            rate: r.rate,
            job_time_ms: ms(r.job_time),
            rows: (config.workload == Workload::ClaimCost).then_some(r.rows),
            schema: target.schema().map(str::to_owned),
        },
        jobs: 0,
        elapsed_ms: 0.0,
        jobs_per_sec: 0.0,
        commits: 0,
        commits_per_job: 0.0,
        peak_rss_mb: None,
        profile: None,
        p50_ms: None,
        p95_ms: None,
        p99_ms: None,
        latency: None,
        runs: Vec::new(),
        intervals: Vec::new(),
        preinsert_jobs_per_sec: None,
        attempts: None,
        enqueued: None,
        max_in_flight: None,
        claim: None,
        states: Default::default(),
        notes: target.notes(),
    };
    match config.workload {
        Workload::Enqueue => enqueue(&target, &r, &mut report).await?,
        Workload::BurnDown => burn_down(&target, &r, progress, Shape::Plain, &mut report).await?,
        Workload::RetryHeavy => {
            burn_down(&target, &r, progress, Shape::FailFirst, &mut report).await?;
        }
        Workload::Workflow => burn_down(&target, &r, progress, Shape::Chains, &mut report).await?,
        Workload::FanOut => fan_out(&target, &r, &mut report).await?,
        Workload::Continuous => continuous(&target, &r, progress, &mut report).await?,
        Workload::Latency => latency(&target, &r, &mut report, Arrival::Insert).await?,
        Workload::Signals => latency(&target, &r, &mut report, Arrival::Signal).await?,
        Workload::ClaimCost => claim_cost(&target, &r, &mut report).await?,
        Workload::Waiters => waiters(&target, &r, &mut report).await?,
    }
    report.commits_per_job = ratio(report.commits as f64, report.jobs as f64);
    report.states = target.state_counts().await?;
    report.peak_rss_mb = peak_rss_mb();
    Ok(report)
}

fn job() -> Result<NewJob> {
    Ok(NewJob::new(KIND, Payload::default())?)
}

/// The payload of jobs that fail their first attempt (retry-heavy).
#[derive(Deserialize)]
struct FailFirst {
    #[serde(default)]
    fail_first: bool,
}

fn failing_job() -> Result<NewJob> {
    let payload = Payload::from_json_text(r#"{"fail_first":true}"#)?;
    Ok(NewJob::new(KIND, payload)?)
}

/// The jobs a drain starts from.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Independent jobs.
    Plain,
    /// Every second job fails its first attempt.
    FailFirst,
    /// Chains of [`CHAIN`] jobs, each depending on the one before it.
    Chains,
}

/// Inserts `n` jobs of `shape` in batches (untimed set-up; a chain is never
/// split across batches). Chains are the steps of one workflow, built with
/// [`Workflow`] as an application would: each step gets a generated
/// (time-ordered) id and the workflow's id, like the plain jobs it is
/// compared with.
async fn preinsert(
    store: &Arc<dyn Store>,
    n: u64,
    shape: Shape,
    meta: &errand::core::Meta,
) -> Result<()> {
    let workflow = WorkflowId::generate();
    let mut i = 0;
    while i < n {
        let k = PREINSERT_BATCH.min(n - i);
        let batch = match shape {
            Shape::Chains => {
                let mut wf = Workflow::with_id(workflow.clone());
                let mut before: Option<JobId> = None;
                for j in i..i + k {
                    let step = job()?;
                    let id = match before.take() {
                        Some(prev) if j % CHAIN != 0 => wf.step_after(step, &[&prev]),
                        _ => wf.step(step),
                    };
                    before = Some(id);
                }
                wf.into_jobs()
            }
            Shape::FailFirst | Shape::Plain => (i..i + k)
                .map(|j| {
                    if shape == Shape::FailFirst && j % 2 == 0 {
                        failing_job()
                    } else {
                        job()
                    }
                })
                .collect::<Result<Vec<_>>>()?,
        };
        let batch = batch
            .into_iter()
            .map(|mut job| {
                job.meta.extend(meta.clone());
                job
            })
            .collect();
        store.insert_many(batch).await?;
        i += k;
    }
    Ok(())
}

/// What the handler and the report hook of a benchmark runtime count.
#[derive(Default)]
struct Counters {
    started: AtomicU64,
    settled: AtomicU64,
    acked: AtomicU64,
    retried: AtomicU64,
    /// Settled any other way (dead, lease lost, released, snoozed).
    other: AtomicU64,
    max_in_flight: AtomicU64,
    /// The acknowledgment count at which `done_at` is stamped.
    goal: AtomicU64,
    done_at: Mutex<Option<Instant>>,
    latency: Option<LatencyLog>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// When each latency sample was enqueued, started and finished.
struct LatencyLog {
    samples: Mutex<Vec<Sample>>,
}

#[derive(Clone, Copy, Default)]
struct Sample {
    /// Just before the insert call.
    called: Option<Instant>,
    /// The insert call returned (committed).
    enqueued: Option<Instant>,
    /// The handler began.
    started: Option<Instant>,
    /// The runtime reported the acknowledgment.
    finished: Option<Instant>,
}

const SAMPLE_PREFIX: &str = "bench-latency-";

fn sample_id(i: u64) -> Result<JobId> {
    Ok(JobId::new(format!("{SAMPLE_PREFIX}{i}"))?)
}

impl LatencyLog {
    fn new(n: u64) -> Self {
        LatencyLog {
            samples: Mutex::new(vec![Sample::default(); usize::try_from(n).unwrap_or(0)]),
        }
    }

    fn with(&self, id: &str, f: impl FnOnce(&mut Sample)) {
        let Some(i) = id
            .strip_prefix(SAMPLE_PREFIX)
            .and_then(|s| s.parse::<usize>().ok())
        else {
            return;
        };
        if let Some(s) = lock(&self.samples).get_mut(i) {
            f(s);
        }
    }

    fn at(&self, i: u64) -> Sample {
        usize::try_from(i)
            .ok()
            .and_then(|i| lock(&self.samples).get(i).copied())
            .unwrap_or_default()
    }
}

fn bench_handler(c: Arc<Counters>, job_time: Duration, fail_first: bool) -> Arc<dyn Handler> {
    Arc::new(handler_fn(move |ctx: JobContext| {
        let c = c.clone();
        async move {
            let now = Instant::now();
            if let Some(log) = &c.latency {
                log.with(ctx.id().as_str(), |s| s.started = Some(now));
            }
            let started = c.started.fetch_add(1, Ordering::Relaxed) + 1;
            let in_flight = started.saturating_sub(c.settled.load(Ordering::Relaxed));
            c.max_in_flight.fetch_max(in_flight, Ordering::Relaxed);
            if !job_time.is_zero() {
                tokio::time::sleep(job_time).await;
            }
            if fail_first
                && ctx.attempt() == 1
                && ctx.payload::<FailFirst>().is_ok_and(|p| p.fail_first)
            {
                return Outcome::retry("errand bench: a planned first-attempt failure");
            }
            Outcome::Success
        }
    }))
}

fn report_hook(c: Arc<Counters>) -> ReportHook {
    Arc::new(move |r: &WorkReport| {
        let now = Instant::now();
        match r.outcome {
            WorkOutcome::Acknowledged => {
                if let (Some(log), Some(id)) = (&c.latency, &r.job_id) {
                    log.with(id.as_str(), |s| s.finished = Some(now));
                }
                let n = c.acked.fetch_add(1, Ordering::Relaxed) + 1;
                if n == c.goal.load(Ordering::Relaxed) {
                    *lock(&c.done_at) = Some(now);
                }
            }
            WorkOutcome::RetryScheduled => {
                c.retried.fetch_add(1, Ordering::Relaxed);
            }
            _ => {
                c.other.fetch_add(1, Ordering::Relaxed);
            }
        }
        c.settled.fetch_add(1, Ordering::Relaxed);
    })
}

/// A runtime as an application would configure it: every queue, `slots`
/// jobs at once, each claim taking as many jobs as there are free slots.
fn bench_runtime(
    store: Arc<dyn Store>,
    c: &Arc<Counters>,
    r: &Resolved,
    fail_first: bool,
) -> Result<Runtime> {
    let mut builder = Runtime::builder(store)
        .handler_dyn(KIND, bench_handler(c.clone(), r.job_time, fail_first))?
        .all_queues(r.concurrency)?
        .batch(u32::try_from(r.concurrency).unwrap_or(u32::MAX))
        // Nothing is stored; no reads of schedules among the measured work.
        .stored_schedules(false)
        .on_report(report_hook(c.clone()));
    if fail_first {
        // Failed jobs come back at once.
        builder = builder.retry(RetryPolicy::Fixed(Duration::ZERO), Arc::new(|| 0.0));
    }
    Ok(builder.build()?)
}

/// Watches a drain: returns when `goal` jobs are acknowledged (the time
/// from `start` to the last acknowledgment) or, with `until`, when that
/// moment comes; fails when nothing is acknowledged for the stall timeout.
/// Records an interval every 2 s when `intervals` is given.
async fn watch(
    c: &Counters,
    goal: u64,
    until: Option<Instant>,
    start: Instant,
    stall: Duration,
    progress: Option<&Progress>,
    mut intervals: Option<&mut Vec<Interval>>,
) -> Result<Duration> {
    let mut ticks =
        tokio::time::interval_at(tokio::time::Instant::from_std(start + INTERVAL), INTERVAL);
    let (mut last_at, mut last_done) = (start, c.acked.load(Ordering::Relaxed));
    let (mut seen, mut changed) = (last_done, Instant::now());
    loop {
        tokio::select! {
            _ = ticks.tick() => {
                let (now, done) = (Instant::now(), c.acked.load(Ordering::Relaxed));
                let interval = Interval {
                    at_s: now.duration_since(start).as_secs_f64(),
                    done,
                    jobs_per_sec: per_second(done.saturating_sub(last_done), now.duration_since(last_at)),
                };
                (last_at, last_done) = (now, done);
                if let Some(list) = intervals.as_deref_mut() {
                    if let Some(p) = progress {
                        p(&interval);
                    }
                    list.push(interval);
                }
            }
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
        let done = c.acked.load(Ordering::Relaxed);
        if done >= goal {
            let at = lock(&c.done_at).unwrap_or_else(Instant::now);
            return Ok(at.saturating_duration_since(start));
        }
        if until.is_some_and(|u| Instant::now() >= u) {
            return Ok(start.elapsed());
        }
        if done != seen {
            (seen, changed) = (done, Instant::now());
        } else if changed.elapsed() > stall {
            return Err(BenchError::Failed(format!(
                "no job was acknowledged for {} s ({done} of {goal} done, {} retried, {} settled otherwise); \
                 the runtime is stuck or the database stopped answering: rerun with ERRAND_LOG=warn to see why",
                stall.as_secs(),
                c.retried.load(Ordering::Relaxed),
                c.other.load(Ordering::Relaxed),
            )));
        }
    }
}

/// Fails unless every job settled the expected way.
fn check_settled(c: &Counters, what: &str) -> Result<()> {
    let other = c.other.load(Ordering::Relaxed);
    if other > 0 {
        return Err(BenchError::Failed(format!(
            "{what}: {other} attempts ended otherwise than acknowledged or retried (dead, lease lost or released); \
             rerun with ERRAND_LOG=warn to see why"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(w: Workload) -> BenchConfig {
        BenchConfig::new("/tmp/never-opened.db", w)
    }

    #[test]
    fn defaults_fill_in_per_workload() {
        let r = resolve(&config(Workload::Enqueue)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.batches, vec![1, 100, 5_000]);
        assert_eq!(r.concurrency, 1);
        let r = resolve(&config(Workload::BurnDown)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.jobs, r.concurrency), (100_000, 256));
        let r = resolve(&config(Workload::Latency)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.jobs, 1_000);
        let r = resolve(&config(Workload::ClaimCost)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.jobs, r.rows), (2_000, 1_000_000));
    }

    #[test]
    fn flags_that_do_not_apply_are_refused_with_the_reason() {
        let cases: Vec<(BenchConfig, &str)> = vec![
            (
                BenchConfig {
                    jobs: Some(0),
                    ..config(Workload::BurnDown)
                },
                "--jobs",
            ),
            (
                BenchConfig {
                    meta: [("tenant".to_owned(), "acme".to_owned())].into(),
                    ..config(Workload::Enqueue)
                },
                "--meta",
            ),
            (
                BenchConfig {
                    meta: [("bad key".to_owned(), "x".to_owned())].into(),
                    ..config(Workload::BurnDown)
                },
                "metadata",
            ),
            (
                BenchConfig {
                    batch: Some(10),
                    ..config(Workload::BurnDown)
                },
                "--batch",
            ),
            (
                BenchConfig {
                    rate: Some(100.0),
                    ..config(Workload::BurnDown)
                },
                "--rate",
            ),
            (
                BenchConfig {
                    rate: Some(f64::NAN),
                    ..config(Workload::Latency)
                },
                "--rate",
            ),
            (
                BenchConfig {
                    duration: Some(Duration::from_secs(1)),
                    ..config(Workload::ClaimCost)
                },
                "SQLite",
            ),
            (
                BenchConfig {
                    concurrency: Some(0),
                    ..config(Workload::Latency)
                },
                "--concurrency",
            ),
            (
                BenchConfig {
                    rows: Some(10),
                    ..config(Workload::Enqueue)
                },
                "--rows",
            ),
            (
                BenchConfig {
                    jobs: Some(10),
                    ..config(Workload::Continuous)
                },
                "--jobs",
            ),
        ];
        for (c, word) in cases {
            match resolve(&c) {
                Err(BenchError::Invalid(m)) => assert!(m.contains(word), "{m}"),
                Err(e) => panic!("{e}"),
                Ok(_) => panic!("{:?} was accepted", c.workload),
            }
        }
    }

    #[test]
    fn workload_names_round_trip() {
        for w in Workload::ALL {
            assert!(matches!(w.as_str().parse::<Workload>(), Ok(p) if p == w));
        }
        assert!("drain".parse::<Workload>().is_err());
    }
}
