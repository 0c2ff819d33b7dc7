//! Waiting for a job to end: the store tells a waiter when its job may
//! have ended (`JobStore::finish_signal`), so `Client::wait` reads the job
//! again only then.

use std::sync::Arc;
use std::time::{Duration, Instant};

use errand_core::{
    CancelRequest, ErrorClass, Failure, JobId, JobState, ManualClock, Store, WorkSignal,
};

use crate::{admin, claim_one, get, job};

const LEASE: Duration = Duration::from_secs(10);
/// How long a case gives a store to tell a waiter; far beyond the
/// milliseconds it takes, and far below a waiter's fallback look.
const HEARD_WITHIN: Duration = Duration::from_secs(4);

/// Waits on `signal` as `Client::wait` does, reading the job only when
/// signalled, until it has ended; panics if the store never says so.
async fn heard_end(store: &dyn Store, signal: &mut Box<dyn WorkSignal>, id: &str) -> JobState {
    let until = Instant::now() + HEARD_WITHIN;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        assert!(
            signal.wait(left).await,
            "job {id} ended, but its waiter was not told within {HEARD_WITHIN:?}"
        );
        let state = get(store, id).await.state;
        if state.is_final() {
            return state;
        }
    }
}

/// A waiter hears of its job's end, however it ends — acknowledged,
/// failed for good, cancelled by an operator — and only a job someone
/// waits for is watched; a job that ended before the wait began is seen
/// ended at the first read.
pub async fn a_waiter_hears_when_its_job_ends(store: Arc<dyn Store>, clock: ManualClock) {
    for name in ["w1-done", "w2-dead", "w3-cancelled"] {
        store.insert(job(name)).await.unwrap();
        clock.advance(Duration::from_millis(1));
    }
    let id = |name: &str| JobId::new(name).unwrap();
    let mut done = store.finish_signal(&id("w1-done")).await.unwrap();
    let mut dead = store.finish_signal(&id("w2-dead")).await.unwrap();
    let mut cancelled = store.finish_signal(&id("w3-cancelled")).await.unwrap();

    let c = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c.job.id.as_str(), "w1-done");
    store.complete(&c.lease).await.unwrap();
    assert_eq!(
        heard_end(store.as_ref(), &mut done, "w1-done").await,
        JobState::Done
    );

    let c = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c.job.id.as_str(), "w2-dead");
    let failure = Failure {
        error: "no".into(),
        class: ErrorClass::Permanent,
        retry: None,
    };
    store.fail(&c.lease, failure).await.unwrap();
    assert_eq!(
        heard_end(store.as_ref(), &mut dead, "w2-dead").await,
        JobState::Dead
    );

    admin(&store)
        .cancel_jobs(&CancelRequest {
            ids: vec![id("w3-cancelled")],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(
        heard_end(store.as_ref(), &mut cancelled, "w3-cancelled").await,
        JobState::Cancelled
    );

    // A second wait on an ended job: the first read says it has ended.
    let _late = store.finish_signal(&id("w1-done")).await.unwrap();
    assert!(get(store.as_ref(), "w1-done").await.state.is_final());
    // A wait for a job that does not exist is not refused by the signal;
    // the read that follows says there is no such job.
    assert!(store.finish_signal(&id("w-none")).await.is_ok());
}
