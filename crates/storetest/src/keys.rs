//! Conformance cases for concurrency keys: per-key limits, per-key order,
//! and fairness between keys.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    ClaimRequest, ErrorClass, Failure, JobState, KeyLimit, Lease, ManualClock, NewJob, Store,
};

use crate::{claim_req, get, job, reclaim_req, retry_after};

const LEASE: Duration = Duration::from_secs(30);

fn keyed(id: &str, key: &str, limit: KeyLimit) -> NewJob {
    job(id).with_key(key, limit).unwrap()
}

/// Claims up to `limit` jobs; returns their leases by id (sorted).
async fn claim(store: &dyn Store, limit: u32) -> BTreeMap<String, Lease> {
    store
        .claim(&claim_req(limit, LEASE))
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.job.id.to_string(), c.lease))
        .collect()
}

fn ids(claimed: &BTreeMap<String, Lease>) -> Vec<&str> {
    claimed.keys().map(String::as_str).collect()
}

/// A job's key and limit are stored and read back.
pub async fn a_job_keeps_its_concurrency_key(store: Arc<dyn Store>, _clock: ManualClock) {
    let ins = store
        .insert(keyed("k1", "tenant/ü 7", KeyLimit::Concurrent(3)))
        .await
        .unwrap();
    let key = ins.job.key.clone().expect("the key is returned");
    assert_eq!(
        (key.name.as_str(), key.limit, key.ordered),
        ("tenant/ü 7", 3, false)
    );
    assert_eq!(get(store.as_ref(), "k1").await.key, Some(key));
    store
        .insert(keyed("k2", "t", KeyLimit::Ordered))
        .await
        .unwrap();
    let o = get(store.as_ref(), "k2").await.key.unwrap();
    assert_eq!((o.limit, o.ordered), (1, true));
}

/// An ordered key runs one job at a time in enqueue order: priority does
/// not jump the line, a job waiting for its retry blocks those behind it,
/// and a dead job stops blocking.
pub async fn an_ordered_key_runs_one_job_at_a_time_in_enqueue_order(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store
        .insert(keyed("o1", "acct", KeyLimit::Ordered))
        .await
        .unwrap();
    store
        .insert(keyed("o2", "acct", KeyLimit::Ordered))
        .await
        .unwrap();
    store
        .insert(keyed("o3", "acct", KeyLimit::Ordered).with_priority(10))
        .await
        .unwrap();
    store.insert(job("free")).await.unwrap();
    let first = claim(store.as_ref(), 10).await;
    assert_eq!(ids(&first), ["free", "o1"]);
    store.complete(&first["free"]).await.unwrap();
    assert!(
        claim(store.as_ref(), 10).await.is_empty(),
        "o1 runs: o2, o3 wait"
    );

    store.complete(&first["o1"]).await.unwrap();
    let second = claim(store.as_ref(), 10).await;
    assert_eq!(ids(&second), ["o2"]);
    store
        .fail(&second["o2"], retry_after("flaky", Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(
        claim(store.as_ref(), 10).await.is_empty(),
        "o2 waits for its retry and o3 waits behind it"
    );
    clock.advance(Duration::from_secs(61));
    let third = claim(store.as_ref(), 10).await;
    assert_eq!(ids(&third), ["o2"]);
    store
        .fail(
            &third["o2"],
            Failure {
                error: "bad".into(),
                class: ErrorClass::Permanent,
                retry: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(get(store.as_ref(), "o2").await.state, JobState::Dead);
    assert_eq!(
        ids(&claim(store.as_ref(), 10).await),
        ["o3"],
        "dead o2 no longer blocks"
    );
}

/// A key never has more running jobs than its limit; its earliest jobs go
/// first; the same key in another queue is a different key; reclaiming an
/// expired lease keeps the count.
pub async fn a_key_never_runs_more_than_its_limit(store: Arc<dyn Store>, clock: ManualClock) {
    for n in 1..=5 {
        store
            .insert(keyed(&format!("k{n}"), "t", KeyLimit::Concurrent(2)))
            .await
            .unwrap();
    }
    store
        .insert(
            keyed("elsewhere", "t", KeyLimit::Concurrent(1))
                .on_queue("other")
                .unwrap(),
        )
        .await
        .unwrap();
    let first = claim(store.as_ref(), 10).await;
    assert_eq!(ids(&first), ["elsewhere", "k1", "k2"]);
    assert!(claim(store.as_ref(), 10).await.is_empty());

    store.complete(&first["k1"]).await.unwrap();
    assert_eq!(ids(&claim(store.as_ref(), 10).await), ["k3"]);

    // Every lease expires: the claim reclaims the three running jobs and
    // starts no fourth of key t.
    clock.advance(LEASE + Duration::from_millis(1));
    // A claim that does not reclaim starts nothing: the key is still full.
    assert!(claim(store.as_ref(), 10).await.is_empty());
    let again: BTreeMap<String, Lease> = store
        .claim(&reclaim_req(10, LEASE))
        .await
        .unwrap()
        .into_iter()
        .map(|c| (c.job.id.to_string(), c.lease))
        .collect();
    assert_eq!(ids(&again), ["elsewhere", "k2", "k3"]);
    let running = store
        .list(&errand_core::JobFilter {
            state: Some(JobState::Running),
            ..Default::default()
        })
        .await
        .unwrap();
    let keyed_running = running
        .iter()
        .filter(|j| j.queue.as_str() == "default")
        .count();
    assert_eq!(keyed_running, 2);
}

/// A key with a long backlog does not hold back other keys: one claim
/// passes over its saturated backlog and takes the others' jobs.
pub async fn a_saturated_key_does_not_hold_back_other_keys(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let backlog: Vec<NewJob> = (0..500)
        .map(|n| keyed(&format!("big-{n:04}"), "big", KeyLimit::Concurrent(2)))
        .collect();
    store.insert_many(backlog).await.unwrap();
    store
        .insert(keyed("small", "small", KeyLimit::Concurrent(2)))
        .await
        .unwrap();
    store.insert(job("plain")).await.unwrap();
    let first = claim(store.as_ref(), 5).await;
    assert_eq!(ids(&first), ["big-0000", "big-0001", "plain", "small"]);
    store
        .insert(keyed("small-2", "small", KeyLimit::Concurrent(2)))
        .await
        .unwrap();
    assert_eq!(ids(&claim(store.as_ref(), 5).await), ["small-2"]);
}

/// Concurrent claimers together never exceed a key's limit, and an ordered
/// key's first job is taken by exactly one of them.
pub async fn concurrent_claims_never_exceed_a_key_limit(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let jobs: Vec<NewJob> = (0..40)
        .map(|n| keyed(&format!("c{n:02}"), "shared", KeyLimit::Concurrent(3)))
        .chain((0..10).map(|n| keyed(&format!("o{n:02}"), "serial", KeyLimit::Ordered)))
        .collect();
    store.insert_many(jobs).await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            store
                .claim(&ClaimRequest {
                    queues: Vec::new(),
                    limit: 4,
                    lease: LEASE,
                    rate: None,
                    reclaim: true,
                })
                .await
                .unwrap()
        }));
    }
    let mut ids = HashSet::new();
    for t in tasks {
        for c in t.await.unwrap() {
            assert!(
                ids.insert(c.job.id.to_string()),
                "claimed twice: {}",
                c.job.id
            );
        }
    }
    let shared = ids.iter().filter(|i| i.starts_with('c')).count();
    let serial: Vec<&String> = ids.iter().filter(|i| i.starts_with('o')).collect();
    assert_eq!(shared, 3, "claimed {ids:?}");
    assert_eq!(serial, [&"o00".to_owned()], "claimed {ids:?}");
}
