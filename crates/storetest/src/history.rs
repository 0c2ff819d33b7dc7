//! The attempt history: every attempt of a job, in order, with the times
//! it started and ended, whichever way it ended — including the attempt a
//! store keeps on the job row while it runs and after it succeeds.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    AttemptRecord, CancelRequest, Clock, ErrorClass, JobId, ManualClock, ReplayRequest, Store,
    Timestamp,
};

use crate::{admin, claim_one, job, retry_after};

const LEASE: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// One history row as (cycle, attempt, started, finished, outcome, class).
type Row = (
    u32,
    u32,
    Timestamp,
    Option<Timestamp>,
    Option<String>,
    Option<ErrorClass>,
);

fn rows(history: &[AttemptRecord]) -> Vec<Row> {
    history
        .iter()
        .map(|r| {
            (
                r.cycle,
                r.attempt,
                r.started_at,
                r.finished_at,
                r.outcome.clone(),
                r.error_class,
            )
        })
        .collect()
}

async fn history(store: &dyn Store, name: &str) -> Vec<Row> {
    rows(&store.detail(&id(name)).await.unwrap().history)
}

fn ended(
    attempt: u32,
    started: Timestamp,
    finished: Timestamp,
    outcome: &str,
    class: Option<ErrorClass>,
) -> Row {
    (
        0,
        attempt,
        started,
        Some(finished),
        Some(outcome.to_owned()),
        class,
    )
}

/// Each attempt appears once, in order, with the time its claim started it
/// and the time it ended: open (no end, no outcome) while it runs; then
/// retried, snoozed (the attempt given back, so the next one has the same
/// number), reclaimed after its lease expired, and succeeded.
pub async fn history_times_every_attempt_and_shows_the_running_one(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store
        .insert(job("a").with_max_attempts(5).unwrap())
        .await
        .unwrap();
    assert!(history(store.as_ref(), "a").await.is_empty());
    let t1 = clock.now();
    let c = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c.job.attempt_started_at, Some(t1));
    assert_eq!(
        history(store.as_ref(), "a").await,
        vec![(0, 1, t1, None, None, None)],
        "the running attempt is shown open"
    );
    clock.advance(MS);
    let t2 = clock.now();
    store.fail(&c.lease, retry_after("boom", MS)).await.unwrap();
    let retried = ended(1, t1, t2, "retry", Some(ErrorClass::Retryable));
    assert_eq!(history(store.as_ref(), "a").await, vec![retried.clone()]);

    clock.advance(MS);
    let t3 = clock.now();
    let c = claim_one(store.as_ref(), LEASE).await;
    clock.advance(MS);
    let t4 = clock.now();
    store.snooze(&c.lease, MS).await.unwrap();
    let snoozed = ended(2, t3, t4, "snoozed", None);
    assert_eq!(
        history(store.as_ref(), "a").await,
        vec![retried.clone(), snoozed.clone()]
    );

    clock.advance(MS);
    let t5 = clock.now();
    let c = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c.lease.attempt, 2, "the snooze gave its attempt back");
    clock.advance(LEASE); // the worker "crashed"
    let t6 = clock.now();
    let c = claim_one(store.as_ref(), LEASE).await;
    let expired = ended(2, t5, t6, "lease_expired", Some(ErrorClass::LeaseExpired));
    assert_eq!(
        history(store.as_ref(), "a").await,
        vec![
            retried.clone(),
            snoozed.clone(),
            expired.clone(),
            (0, 3, t6, None, None, None)
        ]
    );
    clock.advance(MS);
    let t7 = clock.now();
    store.complete(&c.lease).await.unwrap();
    let detail = store.detail(&id("a")).await.unwrap();
    assert_eq!(
        rows(&detail.history),
        vec![
            retried,
            snoozed,
            expired,
            ended(3, t6, t7, "succeeded", None)
        ]
    );
    assert_eq!(detail.job.finished_at, Some(t7));
    assert_eq!(detail.history[0].error.as_deref(), Some("boom"));
    assert!(detail.history[3].error.is_none());
}

/// The other ways an attempt ends: released by a draining worker, cancelled
/// by its handler or by an operator, dead on its final attempt's expired
/// lease (the sweep); and after a replay the next attempts count from 1 in
/// the next cycle. An operator cancelling a job that was not running ends
/// no attempt.
pub async fn history_records_releases_cancels_expiry_and_replay_cycles(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    for name in ["r", "h", "o", "w", "z"] {
        store
            .insert(job(name).with_max_attempts(1).unwrap())
            .await
            .unwrap();
    }
    let t0 = clock.now();
    let mut claimed = Vec::new();
    for _ in 0..4 {
        claimed.push(claim_one(store.as_ref(), LEASE).await);
    }
    let by = |name: &str| {
        claimed
            .iter()
            .find(|c| c.job.id.as_str() == name)
            .unwrap()
            .lease
            .clone()
    };
    clock.advance(MS);
    let t1 = clock.now();
    store.release(&by("r")).await.unwrap();
    store
        .cancel_running(&by("h"), "no longer wanted")
        .await
        .unwrap();
    let cancel = |name: &str| CancelRequest {
        ids: vec![id(name)],
        operator: "ops".into(),
        reason: None,
    };
    admin(&store).cancel_jobs(&cancel("o")).await.unwrap();
    assert_eq!(
        history(store.as_ref(), "r").await,
        vec![ended(1, t0, t1, "released", None)]
    );
    assert_eq!(
        history(store.as_ref(), "h").await,
        vec![ended(1, t0, t1, "cancelled", Some(ErrorClass::Cancelled))]
    );
    assert_eq!(
        history(store.as_ref(), "o").await,
        vec![ended(1, t0, t1, "cancelled", Some(ErrorClass::Cancelled))]
    );
    let detail = store.detail(&id("h")).await.unwrap();
    assert_eq!(detail.history[0].error.as_deref(), Some("no longer wanted"));
    // `z` was never claimed: cancelling it ends no attempt.
    assert!(
        claimed.iter().all(|c| c.job.id.as_str() != "z"),
        "four claims took h, o, r and w"
    );
    admin(&store).cancel_jobs(&cancel("z")).await.unwrap();
    assert!(history(store.as_ref(), "z").await.is_empty());

    // `w` runs its only attempt until its lease ends: the sweep kills it.
    clock.advance(LEASE);
    let t2 = clock.now();
    let swept = store.sweep_expired().await.unwrap();
    assert_eq!(swept.dead, vec![id("w")]);
    let died = ended(1, t0, t2, "lease_expired", Some(ErrorClass::LeaseExpired));
    assert_eq!(history(store.as_ref(), "w").await, vec![died.clone()]);

    // Replayed, it starts cycle 1 at attempt 1; the old cycle stays.
    admin(&store)
        .replay_jobs(&ReplayRequest {
            ids: vec![id("w")],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(history(store.as_ref(), "w").await, vec![died.clone()]);
    clock.advance(MS);
    let t3 = clock.now();
    // r (released, due now) and w (replayed) are the ready ones.
    let mut again = [
        claim_one(store.as_ref(), LEASE).await,
        claim_one(store.as_ref(), LEASE).await,
    ];
    again.sort_by(|a, b| a.job.id.as_str().cmp(b.job.id.as_str()));
    assert_eq!(again[1].job.id.as_str(), "w");
    assert_eq!(
        history(store.as_ref(), "w").await,
        vec![died, (1, 1, t3, None, None, None)]
    );
    assert_eq!(
        history(store.as_ref(), "r").await,
        vec![
            ended(1, t0, t1, "released", None),
            (0, 1, t3, None, None, None)
        ],
        "the release gave the attempt back"
    );
}
