//! The fan-out workload: the acknowledgment of one job that releases
//! many dependents, timed round by round.

use std::time::{Duration, Instant};

use errand::{ClaimRequest, JobId, Lease};

use super::resolve::Resolved;
use super::{FAN_OUT_ROUNDS, LEASE, PREINSERT_BATCH, job};
use crate::stats::{ms, per_second};
use crate::target::Target;
use crate::{BenchError, Report, Result};

/// Times the acknowledgment of one job that `r.jobs` blocked jobs depend
/// on: it releases them in its own transaction, so when it returns every
/// one is claimable (which each round then checks by claiming them all).
pub(super) async fn fan_out(target: &Target, r: &Resolved, report: &mut Report) -> Result<()> {
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
