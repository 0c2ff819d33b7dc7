//! The waiters workload: `--jobs` clients each waiting for its own job to
//! end (`Client::wait`), idle for `--duration`, then the jobs acknowledged
//! in batches; it times how long after its job's acknowledgment each
//! waiter hears. Run it with `pg_stat_statements` to count what idle
//! waiters cost the server (docs/performance.md).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use errand::{ClaimRequest, Client, JobId, Lease};

use super::resolve::Resolved;
use super::{LEASE, PREINSERT_BATCH, job};
use crate::stats::{ms, per_second, percentile};
use crate::target::{Finished, Target};
use crate::{BenchError, Report, Result};

/// How long a waiter may wait in all (far beyond a run).
const WAIT_AT_MOST: Duration = Duration::from_secs(3600);
/// Jobs acknowledged per statement.
const ACK_BATCH: u32 = 1_000;

pub(super) async fn waiters(target: &Target, r: &Resolved, report: &mut Report) -> Result<()> {
    let n = r.jobs;
    let phase = target.phase().await?;
    let store = phase.store.clone();
    let client = Client::new(store.clone());
    let run = async {
        let mut ids: Vec<JobId> = Vec::with_capacity(n as usize);
        let mut i = 0;
        while i < n {
            let k = PREINSERT_BATCH.min(n - i);
            let batch = (0..k).map(|_| job()).collect::<Result<Vec<_>>>()?;
            ids.extend(
                store
                    .insert_many(batch)
                    .await?
                    .into_iter()
                    .map(|j| j.job.id),
            );
            i += k;
        }
        let waiting: Vec<_> = ids
            .iter()
            .cloned()
            .map(|id| {
                let client = client.clone();
                tokio::spawn(async move {
                    let ended = client.wait(&id, WAIT_AT_MOST).await;
                    (id, ended.map(|_| Instant::now()))
                })
            })
            .collect();
        // Every waiter has marked its job and is idle.
        tokio::time::sleep(r.duration).await;
        let start = Instant::now();
        let acked = acknowledge_all(store.as_ref(), n).await?;
        let mut heard: Vec<Duration> = Vec::with_capacity(n as usize);
        for w in waiting {
            let (id, ended) = w
                .await
                .map_err(|e| BenchError::Failed(format!("a waiter failed: {e}")))?;
            let at = ended?;
            let done = acked.get(&id).ok_or_else(|| {
                BenchError::Failed(format!("waiters: job {id} ended but was not acknowledged"))
            })?;
            heard.push(at.saturating_duration_since(*done));
        }
        Ok::<_, BenchError>((start.elapsed(), heard))
    }
    .await;
    let finished = target.finish(phase).await?;
    report.profile = Some(finished.profile(n));
    let Finished { commits, note, .. } = finished;
    report.commits = commits;
    report.notes.extend(note);
    let (elapsed, mut heard) = run?;
    heard.sort();
    report.jobs = n;
    report.elapsed_ms = ms(elapsed);
    report.jobs_per_sec = per_second(n, elapsed);
    report.p50_ms = percentile(&heard, 50.0).map(ms);
    report.p95_ms = percentile(&heard, 95.0).map(ms);
    report.p99_ms = percentile(&heard, 99.0).map(ms);
    report.notes.push(format!(
        "{n} waiters idle for {:?}, then their jobs acknowledged in batches of {ACK_BATCH}; \
         p50/p95/p99: from a job's acknowledgment to its waiter hearing",
        r.duration
    ));
    Ok(())
}

/// Claims and acknowledges every job, in batches; when each was
/// acknowledged.
async fn acknowledge_all(store: &dyn errand::Store, n: u64) -> Result<HashMap<JobId, Instant>> {
    let mut acked = HashMap::with_capacity(n as usize);
    loop {
        let got = store
            .claim(&ClaimRequest {
                queues: Vec::new(),
                limit: ACK_BATCH,
                lease: LEASE,
                rate: None,
                reclaim: false,
            })
            .await?;
        if got.is_empty() {
            break;
        }
        let leases: Vec<Lease> = got.into_iter().map(|c| c.lease).collect();
        store.complete_many(&leases).await?;
        let at = Instant::now();
        acked.extend(leases.into_iter().map(|l| (l.id, at)));
    }
    if acked.len() as u64 != n {
        return Err(BenchError::Failed(format!(
            "waiters: {} of {n} jobs were acknowledged",
            acked.len()
        )));
    }
    Ok(acked)
}
