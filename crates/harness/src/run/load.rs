//! The load generator: the jobs enqueued in batches through the library,
//! retried while their outcome is unknown, or (http plan) one request per
//! job through `errand serve`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use errand::{Error, NewJob, Store};

use crate::check::{Enqueue, Intent};

/// What the HTTP clients saw (http plan).
#[derive(Debug, Default)]
pub(super) struct HttpStats {
    pub(super) requests_failed: u64,
    pub(super) found_existing: u64,
}

/// Inserts `batch`, retrying the same ids while the outcome is unknown;
/// counts the "storage full" refusals.
async fn enqueue_batch(store: &dyn Store, batch: Vec<NewJob>, full: &AtomicU64) -> Enqueue {
    for _ in 0..40 {
        match store.insert_many(batch.clone()).await {
            Ok(_) => return Enqueue::Ok,
            Err(Error::Invalid(_)) => return Enqueue::Failed,
            Err(e) => {
                if matches!(e, Error::StorageFull(_)) {
                    full.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
    Enqueue::Ambiguous
}

/// The jobs in batches of `size`, in order, except that a job that
/// depends on the one before it joins that one's batch: a join is enqueued
/// with the step whose children it waits for, as a workflow is (a job
/// enqueued after the step completed would wait for the step alone).
fn batches_of(jobs: Vec<(String, bool, NewJob)>, size: usize) -> Vec<Vec<(String, bool, NewJob)>> {
    let mut batches: Vec<Vec<(String, bool, NewJob)>> = Vec::new();
    for entry in jobs {
        let follows = batches
            .last()
            .and_then(|b| b.last())
            .is_some_and(|(prev, _, _)| {
                entry
                    .2
                    .depends_on
                    .iter()
                    .any(|d| d.as_str() == prev.as_str())
            });
        match batches.last_mut() {
            Some(b) if b.len() < size || follows => b.push(entry),
            _ => batches.push(vec![entry]),
        }
    }
    batches
}

/// What the load generator shares with the nemesis and the checker.
#[derive(Default)]
pub(super) struct LoadShared {
    pub(super) intents: Arc<Mutex<BTreeMap<String, Intent>>>,
    /// "Storage full" refusals the load generator met.
    pub(super) full: Arc<AtomicU64>,
    pub(super) http_stats: Arc<Mutex<HttpStats>>,
    /// HTTP enqueues in flight, and the signal a new one started (the
    /// server kill waits for one).
    pub(super) http_in_flight: Arc<AtomicU64>,
    pub(super) request_started: Arc<tokio::sync::Notify>,
}

/// The load generator: batches of 25 spread over the first 70% of the
/// fault phase, through the library or (http plan) through `errand serve`
/// at `base`, one request per job.
pub(super) fn spawn_load(
    store: &Arc<dyn Store>,
    jobs: Vec<(String, bool, NewJob)>,
    base: Option<String>,
    fault_ms: u64,
    shared: &LoadShared,
) -> Result<tokio::task::JoinHandle<()>> {
    let store = Arc::clone(store);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .context("build the HTTP client")?;
    let (intents, full) = (Arc::clone(&shared.intents), Arc::clone(&shared.full));
    let http_stats = Arc::clone(&shared.http_stats);
    let http_in_flight = Arc::clone(&shared.http_in_flight);
    let request_started = Arc::clone(&shared.request_started);
    let batches = batches_of(jobs, 25);
    let spread = fault_ms * 7 / 10 / batches.len().max(1) as u64;
    Ok(tokio::spawn(async move {
        let t0 = Instant::now();
        for (i, batch) in batches.into_iter().enumerate() {
            let due = t0 + Duration::from_millis(spread * i as u64);
            tokio::time::sleep_until(due.into()).await;
            if let Some(base) = &base {
                // One request per job, the batch's requests at once.
                let mut set = tokio::task::JoinSet::new();
                for (id, poison, job) in batch {
                    let (client, base) = (client.clone(), base.clone());
                    let in_flight = Arc::clone(&http_in_flight);
                    let started = Arc::clone(&request_started);
                    set.spawn(async move {
                        let kind = job.kind.as_str().to_owned();
                        let posted = crate::http::enqueue(
                            &client,
                            &base,
                            &id,
                            &kind,
                            &job.payload,
                            &in_flight,
                            &started,
                        )
                        .await;
                        (id, poison, posted)
                    });
                }
                while let Some(Ok((id, poison, posted))) = set.join_next().await {
                    if let Ok(mut s) = http_stats.lock() {
                        s.requests_failed += posted.errors;
                        s.found_existing += u64::from(posted.found_existing);
                    }
                    if let Ok(mut map) = intents.lock() {
                        let status = posted.status;
                        map.insert(id, Intent { status, poison });
                    }
                }
                continue;
            }
            let ids: Vec<(String, bool)> =
                batch.iter().map(|(id, p, _)| (id.clone(), *p)).collect();
            let jobs = batch.into_iter().map(|(_, _, j)| j).collect();
            let status = enqueue_batch(store.as_ref(), jobs, &full).await;
            if let Ok(mut map) = intents.lock() {
                for (id, poison) in ids {
                    map.insert(id, Intent { status, poison });
                }
            }
        }
    }))
}
