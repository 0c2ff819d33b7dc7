//! The latency workloads: samples enqueued one at a time (or open-loop at
//! a rate), each timed from the insert call to its start and its
//! acknowledgment; or, for signals, samples enqueued waiting before the
//! run, each timed from the signal that releases it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use errand::{JobId, Store};

use super::resolve::Resolved;
use super::{
    Counters, LATENCY_GAP, LatencyLog, SAMPLE_PREFIX, WARMUP, bench_runtime, check_settled, job,
    sample_id, watch,
};
use crate::stats::{Summary, ms, per_second};
use crate::target::{Finished, Target};
use crate::{BenchError, LatencyReport, Report, Result};

/// Waits until `c` has acknowledged `goal` jobs, failing after the stall
/// timeout without progress.
async fn wait_acked(c: &Counters, goal: u64, stall: Duration) -> Result<()> {
    watch(c, goal, None, Instant::now(), stall, None, None)
        .await
        .map(|_| ())
}

/// What starts a sample: its insert, or the signal to a job inserted
/// waiting before the run.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Arrival {
    Insert,
    Signal,
}

/// The signal the samples of the signals workload wait for.
const GO: &str = "go";

/// Sample `i` as the latency workload enqueues it.
fn sample(i: u64, arrival: Arrival) -> Result<errand::NewJob> {
    let job = job()?.with_id(sample_id(i)?);
    Ok(match arrival {
        Arrival::Insert => job,
        Arrival::Signal => job.awaiting(GO, None, errand::OnAwaitTimeout::Fail)?,
    })
}

/// Starts sample `i`: inserts it, or signals it.
async fn arrive(store: &Arc<dyn Store>, i: u64, arrival: Arrival) -> Result<()> {
    match arrival {
        Arrival::Insert => {
            store.insert(sample(i, arrival)?).await?;
        }
        Arrival::Signal => {
            let signal = errand::NewSignal::new(sample_id(i)?, GO)?;
            store.signal(&signal).await?;
        }
    }
    Ok(())
}

pub(super) async fn latency(
    target: &Target,
    r: &Resolved,
    report: &mut Report,
    arrival: Arrival,
) -> Result<()> {
    let n = r.jobs;
    let phase = target.phase().await?;
    let store = phase.store.clone();
    if arrival == Arrival::Signal {
        // Every sample waits before the run: the run times the signals.
        let waiting: Vec<errand::NewJob> =
            (0..n).map(|i| sample(i, arrival)).collect::<Result<_>>()?;
        for chunk in waiting.chunks(1_000) {
            store.insert_many(chunk.to_vec()).await?;
        }
    }
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
                            let called = Instant::now();
                            log.with(&format!("{SAMPLE_PREFIX}{i}"), |s| s.called = Some(called));
                            arrive(&store, i, arrival).await?;
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
