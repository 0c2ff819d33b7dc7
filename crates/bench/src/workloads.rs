//! The workloads. Each runs through the store and runtime paths an
//! application uses; see the crate documentation for what each measures.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use errand::{
    ClaimRequest, Handler, JobContext, JobId, Lease, NewJob, Outcome, Payload, ReportHook,
    RetryPolicy, Runtime, Store, WorkOutcome, WorkReport, Workflow, WorkflowId, handler_fn,
};
use serde::Deserialize;

use crate::stats::{Summary, ms, peak_rss_mb, per_second, ratio};
use crate::target::{Finished, PgSession, Target};
use crate::{
    BenchConfig, BenchError, ClaimReport, EnqueueRun, Interval, LatencyReport, Params, Progress,
    Report, Result, SnapshotReport, Workload,
};

mod resolve;
use resolve::{Resolved, resolve};

/// The kind of every benchmark job.
const KIND: &str = "bench";
/// Batch size of the untimed pre-inserts (a multiple of [`CHAIN`]).
const PREINSERT_BATCH: u64 = 5_000;
/// The length of the workflow workload's chains.
const CHAIN: u64 = 10;
/// Default dependents of the fan-out workload, and its rounds.
const DEFAULT_FAN_OUT: u64 = 1_000;
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
    let target = Target::open(&config.db, &config.schema, config.synchronous).await?;
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
                Workload::Continuous => Some(r.duration.as_millis() as u64),
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
        Workload::Latency => latency(&target, &r, &mut report).await?,
        Workload::ClaimCost => claim_cost(&target, &r, &mut report).await?,
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
async fn preinsert(store: &Arc<dyn Store>, n: u64, shape: Shape) -> Result<()> {
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
        store.insert_many(batch).await?;
        i += k;
    }
    Ok(())
}

async fn enqueue(target: &Target, r: &Resolved, report: &mut Report) -> Result<()> {
    for &batch in &r.batches {
        let n = if batch == 1 && !r.jobs_given {
            DEFAULT_SINGLE_JOBS
        } else {
            r.jobs
        };
        let phase = target.phase().await?;
        let next = Arc::new(AtomicU64::new(0));
        let start = Instant::now();
        let mut producers = tokio::task::JoinSet::new();
        for _ in 0..r.concurrency {
            let (store, next) = (phase.store.clone(), next.clone());
            producers.spawn(async move {
                loop {
                    let i = next.fetch_add(u64::from(batch), Ordering::Relaxed);
                    if i >= n {
                        return Ok::<(), BenchError>(());
                    }
                    let k = u64::from(batch).min(n - i);
                    if batch == 1 {
                        store.insert(job()?).await?;
                    } else {
                        let jobs = (0..k).map(|_| job()).collect::<Result<Vec<_>>>()?;
                        store.insert_many(jobs).await?;
                    }
                }
            });
        }
        let mut failure = None;
        while let Some(joined) = producers.join_next().await {
            let result = joined
                .map_err(|e| BenchError::Failed(format!("an enqueue task failed: {e}")))
                .and_then(|r| r);
            if let Err(e) = result {
                failure.get_or_insert(e);
            }
        }
        let elapsed = start.elapsed();
        let finished = target.finish(phase).await?;
        let profile = finished.profile(n);
        let Finished { commits, note, .. } = finished;
        if let Some(e) = failure {
            return Err(e);
        }
        report.notes.extend(note);
        report.runs.push(EnqueueRun {
            batch,
            jobs: n,
            elapsed_ms: ms(elapsed),
            jobs_per_sec: per_second(n, elapsed),
            commits,
            commits_per_job: ratio(commits as f64, n as f64),
            profile,
        });
    }
    // The headline figure is the largest batch: the bulk path.
    if let Some(run) = report.runs.iter().max_by_key(|run| run.batch) {
        report.jobs = run.jobs;
        report.elapsed_ms = run.elapsed_ms;
        report.jobs_per_sec = run.jobs_per_sec;
        report.commits = run.commits;
        report.profile = Some(run.profile.clone());
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

async fn burn_down(
    target: &Target,
    r: &Resolved,
    progress: Option<Progress>,
    shape: Shape,
    report: &mut Report,
) -> Result<()> {
    let n = r.jobs;
    let fail_first = shape == Shape::FailFirst;
    let phase = target.phase().await?;
    let start = Instant::now();
    let inserted = preinsert(&phase.store, n, shape).await;
    let insert_time = start.elapsed();
    target.finish(phase).await?;
    inserted?;
    report.preinsert_jobs_per_sec = Some(per_second(n, insert_time));

    let phase = target.phase().await?;
    let c = Arc::new(Counters {
        goal: AtomicU64::new(n),
        ..Counters::default()
    });
    let runtime = bench_runtime(phase.store.clone(), &c, r, fail_first)?;
    let mut intervals = Vec::new();
    let mut outcome = None;
    let start = Instant::now();
    let ran = runtime
        .run_until(async {
            outcome = Some(
                watch(
                    &c,
                    n,
                    None,
                    start,
                    r.stall,
                    progress.as_ref(),
                    Some(&mut intervals),
                )
                .await,
            );
        })
        .await;
    let finished = target.finish(phase).await?;
    report.profile = Some(finished.profile(n));
    let Finished { commits, note, .. } = finished;
    ran?;
    let elapsed =
        outcome.unwrap_or_else(|| Err(BenchError::Failed("the drain did not run".into())))?;
    check_settled(&c, report.workload.as_str())?;
    let retried = c.retried.load(Ordering::Relaxed);
    if fail_first && retried != n.div_ceil(2) {
        return Err(BenchError::Failed(format!(
            "retry-heavy: {retried} first attempts failed, expected {}",
            n.div_ceil(2)
        )));
    }
    report.notes.extend(note);
    report.jobs = n;
    report.elapsed_ms = ms(elapsed);
    report.jobs_per_sec = per_second(n, elapsed);
    report.commits = commits;
    report.intervals = intervals;
    report.max_in_flight = Some(c.max_in_flight.load(Ordering::Relaxed));
    if fail_first {
        report.attempts = Some(c.acked.load(Ordering::Relaxed) + retried);
    }
    Ok(())
}

/// Times the acknowledgment of one job that `r.jobs` blocked jobs depend
/// on: it releases them in its own transaction, so when it returns every
/// one is claimable (which each round then checks by claiming them all).
async fn fan_out(target: &Target, r: &Resolved, report: &mut Report) -> Result<()> {
    let n = r.jobs;
    let phase = target.phase().await?;
    let store = phase.store.clone();
    let mut times: Vec<Duration> = Vec::with_capacity(FAN_OUT_ROUNDS);
    let rounds = async {
        let claim = |limit: u32| ClaimRequest {
            queues: Vec::new(),
            limit,
            lease: LEASE,
            rate: None,
            reclaim: false,
        };
        for round in 0..FAN_OUT_ROUNDS {
            let root = JobId::new(format!("root-{round}"))?;
            store.insert(job()?.with_id(root.clone())).await?;
            let mut i = 0;
            while i < n {
                let k = PREINSERT_BATCH.min(n - i);
                let batch = (0..k)
                    .map(|_| Ok(job()?.depends_on(root.clone())))
                    .collect::<Result<Vec<_>>>()?;
                store.insert_many(batch).await?;
                i += k;
            }
            let held = store.claim(&claim(10)).await?;
            let [held] = held.as_slice() else {
                return Err(BenchError::Failed(format!(
                    "fan-out: {} jobs were claimable before the root settled, expected the root alone",
                    held.len()
                )));
            };
            let start = Instant::now();
            store.complete(&held.lease).await?;
            times.push(start.elapsed());
            let mut released = 0u64;
            loop {
                let got = store.claim(&claim(1_000)).await?;
                if got.is_empty() {
                    break;
                }
                released += got.len() as u64;
                let leases: Vec<Lease> = got.into_iter().map(|c| c.lease).collect();
                store.complete_many(&leases).await?;
            }
            if released != n {
                return Err(BenchError::Failed(format!(
                    "fan-out: {released} of {n} dependents were claimable after the root settled"
                )));
            }
        }
        Ok(())
    }
    .await;
    target.finish(phase).await?;
    rounds?;
    let mut sorted = times.clone();
    sorted.sort();
    let median = sorted[sorted.len() / 2];
    report.jobs = n;
    report.elapsed_ms = ms(median);
    report.jobs_per_sec = per_second(n, median);
    report.notes.push(format!(
        "the acknowledgment that released {n} dependents took (ms, per round): {}; the median is reported",
        times
            .iter()
            .map(|t| format!("{:.1}", ms(*t)))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    Ok(())
}

async fn continuous(
    target: &Target,
    r: &Resolved,
    progress: Option<Progress>,
    report: &mut Report,
) -> Result<()> {
    let phase = target.phase().await?;
    let c = Arc::new(Counters::default());
    let runtime = bench_runtime(phase.store.clone(), &c, r, false)?;
    let inserted = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let backlog = u64::from(r.backlog);
    let producer = {
        let (store, c, inserted, stop) = (
            phase.store.clone(),
            c.clone(),
            inserted.clone(),
            stop.clone(),
        );
        tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let waiting = inserted
                    .load(Ordering::Relaxed)
                    .saturating_sub(c.started.load(Ordering::Relaxed));
                if waiting < backlog {
                    let k = (backlog - waiting).min(TOP_UP_MAX);
                    let jobs = (0..k).map(|_| job()).collect::<Result<Vec<_>>>()?;
                    store.insert_many(jobs).await?;
                    inserted.fetch_add(k, Ordering::Relaxed);
                } else {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                }
            }
            Ok::<(), BenchError>(())
        })
    };
    let mut intervals = Vec::new();
    let mut outcome: Option<Result<(u64, u64, Duration)>> = None;
    let start = Instant::now();
    let ran = runtime
        .run_until(async {
            let result = async {
                let window = watch(
                    &c,
                    u64::MAX,
                    Some(start + r.duration),
                    start,
                    r.stall,
                    progress.as_ref(),
                    Some(&mut intervals),
                )
                .await?;
                let done = c.acked.load(Ordering::Relaxed);
                let enqueued = inserted.load(Ordering::Relaxed);
                stop.store(true, Ordering::Relaxed);
                producer
                    .await
                    .map_err(|e| BenchError::Failed(format!("the producer task failed: {e}")))??;
                // Drain what is left, untimed.
                let total = inserted.load(Ordering::Relaxed);
                watch(&c, total, None, Instant::now(), r.stall, None, None).await?;
                Ok((done, enqueued, window))
            }
            .await;
            outcome = Some(result);
        })
        .await;
    let finished = target.finish(phase).await?;
    let Finished { commits, note, .. } = &finished;
    let (commits, note) = (*commits, note.clone());
    ran?;
    let (done, enqueued, window) = outcome
        .unwrap_or_else(|| Err(BenchError::Failed("the continuous run did not run".into())))?;
    check_settled(&c, "continuous")?;
    let total = c.acked.load(Ordering::Relaxed);
    // Like the commits, over the whole phase: the producer and the final drain.
    report.profile = Some(finished.profile(total));
    report.notes.extend(note);
    report.jobs = done;
    report.elapsed_ms = ms(window);
    report.jobs_per_sec = per_second(done, window);
    report.commits = commits;
    // Commits cover the whole phase, the final drain included.
    report.commits_per_job = ratio(commits as f64, total as f64);
    report.enqueued = Some(enqueued);
    report.intervals = intervals;
    report.max_in_flight = Some(c.max_in_flight.load(Ordering::Relaxed));
    Ok(())
}

/// Waits until `c` has acknowledged `goal` jobs, failing after the stall
/// timeout without progress.
async fn wait_acked(c: &Counters, goal: u64, stall: Duration) -> Result<()> {
    watch(c, goal, None, Instant::now(), stall, None, None)
        .await
        .map(|_| ())
}

async fn latency(target: &Target, r: &Resolved, report: &mut Report) -> Result<()> {
    let n = r.jobs;
    let phase = target.phase().await?;
    let store = phase.store.clone();
    let c = Arc::new(Counters {
        latency: Some(LatencyLog::new(n)),
        ..Counters::default()
    });
    let runtime = bench_runtime(phase.store.clone(), &c, r, false)?;
    let mut outcome = None;
    let ran = runtime
        .run_until(async {
            let result = async {
                // Warm-up jobs, not sampled: connections, prepared
                // statements, the PostgreSQL listener.
                for w in 0..WARMUP {
                    let job = job()?.with_id(JobId::new(format!("bench-warmup-{w}"))?);
                    store.insert(job).await?;
                    wait_acked(&c, w + 1, r.stall).await?;
                }
                let log = c
                    .latency
                    .as_ref()
                    .ok_or_else(|| BenchError::Failed("the latency log went missing".into()))?;
                let start = Instant::now();
                match r.rate {
                    None => {
                        for i in 0..n {
                            let job = job()?.with_id(sample_id(i)?);
                            let called = Instant::now();
                            log.with(&format!("{SAMPLE_PREFIX}{i}"), |s| s.called = Some(called));
                            store.insert(job).await?;
                            let enqueued = Instant::now();
                            log.with(&format!("{SAMPLE_PREFIX}{i}"), |s| {
                                s.enqueued = Some(enqueued)
                            });
                            wait_acked(&c, WARMUP + i + 1, r.stall).await?;
                            tokio::time::sleep(LATENCY_GAP).await;
                        }
                    }
                    Some(rate) => arrive_at_rate(&store, &c, n, rate, start, r.stall).await?,
                }
                Ok::<Duration, BenchError>(start.elapsed())
            }
            .await;
            outcome = Some(result);
        })
        .await;
    drop(store);
    let Finished { commits, note, .. } = target.finish(phase).await?;
    ran?;
    let elapsed =
        outcome.unwrap_or_else(|| Err(BenchError::Failed("the latency run did not run".into())))?;
    check_settled(&c, "latency")?;
    let log = c
        .latency
        .as_ref()
        .ok_or_else(|| BenchError::Failed("the latency log went missing".into()))?;
    let (start, finish, enqueue) = sample_times(log, n)?;
    let start = Summary::of(&start);
    report.notes.extend(note);
    report.jobs = n;
    report.elapsed_ms = ms(elapsed);
    report.jobs_per_sec = per_second(n, elapsed);
    report.commits = commits;
    report.p50_ms = Some(start.p50_ms);
    report.p95_ms = Some(start.p95_ms);
    report.p99_ms = Some(start.p99_ms);
    report.latency = Some(LatencyReport {
        start,
        finish: Summary::of(&finish),
        enqueue: Summary::of(&enqueue),
    });
    report.max_in_flight = Some(c.max_in_flight.load(Ordering::Relaxed));
    Ok(())
}

/// Inserts the latency samples open-loop (`i` at `start` + `i / rate` s), then awaits every ack.
async fn arrive_at_rate(
    store: &Arc<dyn Store>,
    c: &Arc<Counters>,
    n: u64,
    rate: f64,
    start: Instant,
    stall: Duration,
) -> Result<()> {
    let mut arrivals = tokio::task::JoinSet::new();
    for i in 0..n {
        let at = start + Duration::from_secs_f64(i as f64 / rate);
        let (store, c) = (store.clone(), c.clone());
        arrivals.spawn(async move {
            tokio::time::sleep_until(tokio::time::Instant::from_std(at)).await;
            let job = job()?.with_id(sample_id(i)?);
            let id = format!("{SAMPLE_PREFIX}{i}");
            if let Some(log) = &c.latency {
                log.with(&id, |s| s.called = Some(Instant::now()));
            }
            store.insert(job).await?;
            if let Some(log) = &c.latency {
                log.with(&id, |s| s.enqueued = Some(Instant::now()));
            }
            Ok::<(), BenchError>(())
        });
    }
    while let Some(joined) = arrivals.join_next().await {
        joined.map_err(|e| BenchError::Failed(format!("an arrival task failed: {e}")))??;
    }
    wait_acked(c, WARMUP + n, stall).await
}

/// Each sample's enqueue-to-start, enqueue-to-finish and enqueue-call times, in sample order.
fn sample_times(log: &LatencyLog, n: u64) -> Result<(Vec<Duration>, Vec<Duration>, Vec<Duration>)> {
    let (mut start, mut finish, mut enqueue) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let s = log.at(i);
        match (s.called, s.enqueued, s.started, s.finished) {
            (Some(called), Some(enqueued), Some(started), Some(finished)) => {
                start.push(started.saturating_duration_since(called));
                finish.push(finished.saturating_duration_since(called));
                enqueue.push(enqueued.saturating_duration_since(called));
            }
            _ => {
                return Err(BenchError::Failed(format!(
                    "latency sample {i} was not recorded whole (enqueued, started and finished)"
                )));
            }
        }
    }
    Ok((start, finish, enqueue))
}

/// Rounds of: insert 10 due jobs, claim 10 (timed), acknowledge them. Runs
/// `rounds` rounds, or with `until` as many as fit in that time. Returns
/// (when the claim began, how long it took) per round.
async fn claim_rounds(
    store: &Arc<dyn Store>,
    rounds: u64,
    until: Option<Duration>,
) -> Result<Vec<(Duration, Duration)>> {
    let request = ClaimRequest {
        queues: Vec::new(),
        limit: CLAIM_LIMIT,
        lease: LEASE,
        rate: None,
        reclaim: true,
    };
    let start = Instant::now();
    let mut samples = Vec::new();
    for round in 0.. {
        match until {
            Some(d) if start.elapsed() >= d => break,
            None if round >= rounds => break,
            _ => {}
        }
        let jobs = (0..CLAIM_LIMIT)
            .map(|_| job())
            .collect::<Result<Vec<_>>>()?;
        store.insert_many(jobs).await?;
        let began = Instant::now();
        let claimed = store.claim(&request).await?;
        let took = began.elapsed();
        if claimed.len() != CLAIM_LIMIT as usize {
            return Err(BenchError::Failed(format!(
                "a claim of {CLAIM_LIMIT} with {CLAIM_LIMIT} due jobs returned {}",
                claimed.len()
            )));
        }
        let leases: Vec<Lease> = claimed.into_iter().map(|c| c.lease).collect();
        let acked = store.complete_many(&leases).await?;
        if !acked.iter().all(|&a| a) {
            return Err(BenchError::Failed(
                "an acknowledgment of freshly claimed jobs was refused (lease lost)".into(),
            ));
        }
        samples.push((began.duration_since(start), took));
    }
    Ok(samples)
}

fn durations(samples: &[(Duration, Duration)]) -> Vec<Duration> {
    samples.iter().map(|&(_, took)| took).collect()
}

async fn claim_cost(target: &Target, r: &Resolved, report: &mut Report) -> Result<()> {
    let rounds = r.jobs.div_ceil(u64::from(CLAIM_LIMIT));
    let phase = target.phase().await?;
    let empty = claim_rounds(&phase.store, rounds, None).await;
    target.finish(phase).await?;
    let empty = Summary::of(&durations(&empty?));

    let load_start = Instant::now();
    target.bulk_load(r.rows).await?;
    let load_time = load_start.elapsed();

    let phase = target.phase().await?;
    let started = Instant::now();
    let loaded = claim_rounds(&phase.store, rounds, None).await;
    let elapsed = started.elapsed();
    let Finished { commits, note, .. } = target.finish(phase).await?;
    let loaded = durations(&loaded?);
    let claim_time: Duration = loaded.iter().sum();
    let loaded = Summary::of(&loaded);

    let snapshot = match target.pg_url() {
        Some(url) => Some(snapshot_rounds(target, url, r.duration).await?),
        None => None,
    };
    let claimed = rounds * u64::from(CLAIM_LIMIT);
    report.notes.extend(note);
    report.jobs = claimed;
    report.elapsed_ms = ms(elapsed);
    // Jobs per second of claim time (10 / the mean claim).
    report.jobs_per_sec = per_second(claimed, claim_time);
    report.commits = commits;
    report.p50_ms = Some(loaded.p50_ms);
    report.p95_ms = Some(loaded.p95_ms);
    report.p99_ms = Some(loaded.p99_ms);
    report.claim = Some(ClaimReport {
        p50_ratio: ratio(loaded.p50_ms, empty.p50_ms),
        p99_ratio: ratio(loaded.p99_ms, empty.p99_ms),
        empty,
        loaded,
        rows_done: r.rows,
        rows_future: r.rows,
        load: format!(
            "direct SQL in statements of up to 200,000 rows ({}), not the store's insert path: \
             done rows holding their succeeded attempt (no history row, as the store leaves them), future rows ready and due from a day ahead{}",
            if target.pg_url().is_some() {
                "INSERT … SELECT FROM generate_series"
            } else {
                "INSERT … SELECT from a recursive CTE, through SqliteStore::write"
            },
            if target.pg_url().is_some() {
                "; then VACUUM (ANALYZE) of both tables, as autovacuum would have done"
            } else {
                "; no ANALYZE (Errand never runs it on SQLite)"
            }
        ),
        load_ms: ms(load_time),
        snapshot,
    });
    Ok(())
}

/// Claim rounds while another session holds a `REPEATABLE READ` snapshot.
async fn snapshot_rounds(target: &Target, url: &str, hold: Duration) -> Result<SnapshotReport> {
    let phase = target.phase().await?;
    let holder = PgSession::connect(url).await?;
    let began = holder
        .client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1")
        .await
        .map_err(|e| BenchError::Postgres(format!("cannot open the snapshot: {e}")));
    let held = Instant::now();
    let samples = match began {
        Ok(()) => claim_rounds(&phase.store, 0, Some(hold)).await,
        Err(e) => Err(e),
    };
    let held = held.elapsed();
    let _ = holder.client.batch_execute("ROLLBACK").await;
    holder.close().await;
    target.finish(phase).await?;
    let samples = samples?;
    let window = Duration::from_secs(5);
    let first: Vec<Duration> = samples
        .iter()
        .filter(|&&(at, _)| at < window)
        .map(|&(_, took)| took)
        .collect();
    let last: Vec<Duration> = samples
        .iter()
        .filter(|&&(at, _)| at + window >= held)
        .map(|&(_, took)| took)
        .collect();
    Ok(SnapshotReport {
        held_ms: ms(held),
        claims: Summary::of(&durations(&samples)),
        first_5s_p50_ms: Summary::of(&first).p50_ms,
        last_5s_p50_ms: Summary::of(&last).p50_ms,
    })
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
