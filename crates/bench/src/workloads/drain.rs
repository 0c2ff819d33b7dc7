//! The drain workloads (burn-down, retry-heavy, workflow): pre-inserted
//! jobs of one shape worked off by a runtime, timed to the last
//! acknowledgment.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::resolve::Resolved;
use super::{Counters, Shape, bench_runtime, check_settled, preinsert, watch};
use crate::stats::{ms, per_second};
use crate::target::{Finished, Target};
use crate::{BenchError, Progress, Report, Result};

pub(super) async fn burn_down(
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
    let inserted = preinsert(&phase.store, n, shape, &r.meta).await;
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
