//! The continuous workload: a producer keeping a backlog topped up while
//! a runtime works it off for a fixed time.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::resolve::Resolved;
use super::{Counters, TOP_UP_MAX, bench_runtime, check_settled, job, watch};
use crate::stats::{ms, per_second, ratio};
use crate::target::{Finished, Target};
use crate::{BenchError, Progress, Report, Result};

pub(super) async fn continuous(
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
