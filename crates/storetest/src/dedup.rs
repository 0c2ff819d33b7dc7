//! How long an id de-duplicates: exactly as long as its job's row exists.
//! Ready, running and dead jobs keep their id taken (dead ones until an
//! operator purges them); done and cancelled ones until retention prunes
//! them. After that, the id names a new job.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    CancelRequest, JobFilter, JobId, JobState, ManualClock, Payload, PurgeRequest, Store,
};

use crate::{admin, claim_req, job, retry_after};

const LEASE: Duration = Duration::from_secs(30);
const DAY: Duration = Duration::from_secs(86_400);

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// The payload's JSON text, as stored (the text given).
fn payload(job: &errand_core::Job) -> String {
    job.payload.as_str().to_owned()
}

/// Inserts `name` again with a different payload; returns whether a job
/// was created and the job the store answered with.
async fn again(store: &dyn Store, name: &str) -> (bool, errand_core::Job) {
    let mut repeat = job(name);
    repeat.payload = Payload::from_json_text(r#"{"repeat":true}"#).unwrap();
    let ins = store.insert(repeat).await.unwrap();
    (ins.created, ins.job)
}

/// Within retention an existing id — in every state — returns the existing
/// job and creates nothing; once `prune` (retention) has deleted a done or
/// cancelled job, or `purge` a dead one, the same id creates a new job.
pub async fn an_id_deduplicates_until_its_job_is_pruned_or_purged(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let s = store.as_ref();
    for name in ["done-1", "dead-1"] {
        store
            .insert(job(name).with_max_attempts(1).unwrap())
            .await
            .unwrap();
    }
    for c in store.claim(&claim_req(2, LEASE)).await.unwrap() {
        match c.job.id.as_str() {
            "done-1" => drop(store.complete(&c.lease).await.unwrap()),
            "dead-1" => drop(store.fail(&c.lease, retry_after("x", LEASE)).await.unwrap()),
            other => panic!("unexpected claim of {other}"),
        }
    }
    for name in ["cancelled-1", "running-1", "waiting-1"] {
        store.insert(job(name)).await.unwrap();
    }
    admin(&store)
        .cancel_jobs(&CancelRequest {
            ids: vec![id("cancelled-1")],
            operator: "test".into(),
            reason: None,
        })
        .await
        .unwrap();
    let running = store.claim(&claim_req(1, LEASE)).await.unwrap();
    assert_eq!(running[0].job.id.as_str(), "running-1");
    let states = [
        ("done-1", JobState::Done),
        ("dead-1", JobState::Dead),
        ("cancelled-1", JobState::Cancelled),
        ("running-1", JobState::Running),
        ("waiting-1", JobState::Ready),
    ];
    // Within retention (one day short of the seven pruned below), every
    // state de-duplicates: the stored job comes back, unchanged.
    clock.advance(6 * DAY);
    assert_eq!(store.prune(7 * DAY, 100).await.unwrap(), 0);
    for (name, state) in states {
        let (created, got) = again(s, name).await;
        assert!(!created, "{name} ({state:?}) was created again");
        assert_eq!(got.state, state, "{name}");
        assert_eq!(payload(&got), format!(r#"{{"n":"{name}"}}"#), "{name}");
    }
    assert_eq!(store.list(&JobFilter::default()).await.unwrap().len(), 5);
    // Past retention: the done and cancelled jobs are pruned, and their
    // ids then create new jobs. Dead, running and ready ones stay.
    clock.advance(2 * DAY);
    assert_eq!(store.prune(7 * DAY, 100).await.unwrap(), 2);
    for name in ["done-1", "cancelled-1"] {
        let (created, got) = again(s, name).await;
        assert!(created, "{name}: a pruned job's id names a new job");
        assert_eq!(
            (got.state, got.attempts, got.replays),
            (JobState::Ready, 0, 0)
        );
        assert_eq!(payload(&got), r#"{"repeat":true}"#);
    }
    for (name, state) in [
        ("dead-1", JobState::Dead),
        ("running-1", JobState::Running),
        ("waiting-1", JobState::Ready),
    ] {
        let (created, got) = again(s, name).await;
        assert!(
            !created,
            "{name} ({state:?}) was created again after a prune"
        );
        assert_eq!(got.state, state, "{name}");
    }
    // A dead job keeps its id until an operator purges it.
    admin(&store)
        .purge_jobs(&PurgeRequest {
            ids: vec![id("dead-1")],
            operator: "test".into(),
            reason: "dead letter handled".into(),
        })
        .await
        .unwrap();
    let (created, got) = again(s, "dead-1").await;
    assert!(created, "a purged job's id names a new job");
    assert_eq!(got.state, JobState::Ready);
}
