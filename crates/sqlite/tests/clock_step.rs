#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The host's clock stepping under a SQLite store (regression tests for
//! what the harness's clock plan found: a forward step made every live lease
//! look expired, so the next claim took jobs from workers that were alive
//! and renewing, and their renewals and settlements were refused).

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use errand_core::JobStore;
use errand_core::{ClaimRequest, Clock, NewJob, Payload, Schedule, Timestamp};
use errand_sqlite::{SqliteOptions, SqliteStore};

/// The host's clock plus an offset a test can step: not a manual clock, so
/// the store treats it as the host's.
#[derive(Debug, Default)]
struct SteppedClock(AtomicI64);

impl SteppedClock {
    fn step(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for SteppedClock {
    fn now(&self) -> Timestamp {
        Timestamp::from_millis(Timestamp::now().as_millis() + self.0.load(Ordering::SeqCst))
    }
}

fn open(clock: Arc<SteppedClock>) -> (tempfile::TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        create: true,
        migrate: true,
        clock,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(dir.path().join("jobs.db"), options).unwrap();
    (dir, store)
}

fn claim(lease_ms: u64) -> ClaimRequest {
    ClaimRequest {
        queues: Vec::new(),
        limit: 10,
        lease: Duration::from_millis(lease_ms),
        rate: None,
        reclaim: true,
    }
}

#[tokio::test]
async fn a_forward_clock_step_does_not_reclaim_a_live_lease() {
    let clock = Arc::new(SteppedClock::default());
    let (_dir, store) = open(clock.clone());
    store
        .insert(NewJob::new("work", Payload::default()).unwrap())
        .await
        .unwrap();
    let held = store.claim(&claim(10_000)).await.unwrap();
    assert_eq!(held.len(), 1);
    let lease = held[0].lease.clone();

    // An hour forward: the lease looks 59 minutes expired by the new time.
    clock.step(3_600_000);
    let stolen = store.claim(&claim(10_000)).await.unwrap();
    assert!(
        stolen.is_empty(),
        "a live lease was reclaimed after a clock step: {stolen:?}"
    );
    // The holder renews on the new timeline and settles.
    let until = store
        .heartbeat(&lease, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(
        until > clock.now(),
        "renewed onto the new timeline: {until}"
    );
    store.complete(&lease).await.unwrap();
}

#[tokio::test]
async fn a_backward_clock_step_keeps_the_lease_and_the_schedule() {
    let clock = Arc::new(SteppedClock::default());
    let (_dir, store) = open(clock.clone());
    let due_in_a_minute = NewJob::new("later", Payload::default())
        .unwrap()
        .scheduled(Schedule::At(clock.now().plus(Duration::from_secs(60))));
    let later = store.insert(due_in_a_minute).await.unwrap().job.id;
    store
        .insert(NewJob::new("now", Payload::default()).unwrap())
        .await
        .unwrap();
    let held = store.claim(&claim(10_000)).await.unwrap();
    assert_eq!(held.len(), 1);

    // Ten minutes back: the running lease only looks longer.
    clock.step(-600_000);
    assert!(store.claim(&claim(10_000)).await.unwrap().is_empty());
    store
        .heartbeat(&held[0].lease, Duration::from_secs(10))
        .await
        .unwrap();
    store.complete(&held[0].lease).await.unwrap();
    // The scheduled job is still there, due at its time.
    let job = store.get(&later).await.unwrap();
    assert_eq!(job.state.as_str(), "ready");
    // Forward again past its time: it runs.
    clock.step(600_000 + 61_000);
    let due = store.claim(&claim(10_000)).await.unwrap();
    assert_eq!(due.len(), 1);
    assert_eq!(due[0].job.id, later);
    store.complete(&due[0].lease).await.unwrap();
}
