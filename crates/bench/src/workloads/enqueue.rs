//! The enqueue workload: producers inserting jobs one at a time or in
//! batches, one timed phase per batch size.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use super::resolve::Resolved;
use super::{DEFAULT_SINGLE_JOBS, job};
use crate::stats::{ms, per_second, ratio};
use crate::target::{Finished, Target};
use crate::{BenchError, EnqueueRun, Report, Result};

pub(super) async fn enqueue(target: &Target, r: &Resolved, report: &mut Report) -> Result<()> {
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
