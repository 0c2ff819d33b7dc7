//! Unique jobs beyond the id: a recent or live job with the same key
//! stands in for a new one, and a debounced job pushes its waiting twin
//! later instead of adding a second — also when many enqueue at once.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{Clock, Error, JobFilter, JobId, JobState, ManualClock, NewJob, Payload, Store};

use crate::{claim_req, get, job};

const LEASE: Duration = Duration::from_secs(10);

fn plain(kind: &str, payload: &str) -> NewJob {
    NewJob::new(kind, Payload::from_json_text(payload).unwrap()).unwrap()
}

fn value(p: &Payload) -> serde_json::Value {
    serde_json::from_str(p.as_str()).unwrap()
}

async fn with_key(store: &dyn Store, key: &str) -> Vec<errand_core::Job> {
    let all = store
        .list(&JobFilter {
            limit: Some(10_000),
            ..JobFilter::default()
        })
        .await
        .unwrap();
    all.into_iter()
        .filter(|j| j.unique_key.as_deref() == Some(key))
        .collect()
}

/// Within its period, a unique enqueue returns the job with the same key
/// (the kind and canonical payload by default, or the key given) in any
/// state and creates nothing; after it, a new job is created.
pub async fn unique_for_returns_the_job_created_within_the_period(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let hour = Duration::from_secs(3600);
    let first = store
        .insert(plain("mail", r#"{"to":"a","n":1}"#).unique_for(hour))
        .await
        .unwrap();
    assert!(first.created);
    let key = first.job.unique_key.clone().unwrap();
    assert!(key.starts_with("mail:"), "{key}");
    clock.advance(Duration::from_secs(60));
    // The same payload written otherwise is the same job.
    let again = store
        .insert(plain("mail", r#"{ "n": 1, "to": "a" }"#).unique_for(hour))
        .await
        .unwrap();
    assert!(!again.created);
    assert_eq!(again.job.id, first.job.id);
    assert_eq!(again.job, get(&*store, first.job.id.as_str()).await);
    // Another payload or kind is another key.
    assert!(
        store
            .insert(plain("mail", r#"{"to":"b","n":1}"#).unique_for(hour))
            .await
            .unwrap()
            .created
    );
    assert!(
        store
            .insert(plain("sms", r#"{"to":"a","n":1}"#).unique_for(hour))
            .await
            .unwrap()
            .created
    );
    // Finished jobs count within the period too.
    let c = store.claim(&claim_req(10, LEASE)).await.unwrap();
    for c in &c {
        store.complete(&c.lease).await.unwrap();
    }
    let done = store
        .insert(plain("mail", r#"{"to":"a","n":1}"#).unique_for(hour))
        .await
        .unwrap();
    assert!(!done.created);
    assert_eq!(done.job.state, JobState::Done);
    // A chosen key joins jobs of any kind and payload.
    let k1 = store
        .insert(
            plain("a", "{}")
                .unique_for(hour)
                .with_unique_key("report:7"),
        )
        .await
        .unwrap();
    let k2 = store
        .insert(
            plain("b", r#"{"x":1}"#)
                .unique_for(hour)
                .with_unique_key("report:7"),
        )
        .await
        .unwrap();
    assert!(k1.created && !k2.created);
    assert_eq!(k2.job.id, k1.job.id);
    // Past the period, a new job.
    clock.advance(hour);
    let later = store
        .insert(plain("mail", r#"{"to":"a","n":1}"#).unique_for(hour))
        .await
        .unwrap();
    assert!(later.created);
    assert_ne!(later.job.id, first.job.id);
    assert_eq!(with_key(&*store, &key).await.len(), 2);
}

/// A job unique while others are ready or running is stood in for by one
/// that is; once that one has finished, a new job is created.
pub async fn unique_while_stands_in_only_in_the_states_named(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let states = [JobState::Ready, JobState::Running];
    let unique = || plain("sync", r#"{"account":9}"#).unique_while(&states);
    let first = store.insert(unique()).await.unwrap();
    assert!(first.created);
    assert!(!store.insert(unique()).await.unwrap().created);
    let claimed = store.claim(&claim_req(1, LEASE)).await.unwrap();
    assert_eq!(claimed[0].job.id, first.job.id);
    let while_running = store.insert(unique()).await.unwrap();
    assert!(!while_running.created);
    assert_eq!(while_running.job.state, JobState::Running);
    store.complete(&claimed[0].lease).await.unwrap();
    let after = store.insert(unique()).await.unwrap();
    assert!(after.created, "a done job is in neither state");
    assert_ne!(after.job.id, first.job.id);
}

/// A debounced enqueue that meets its waiting twin pushes it to run the
/// delay from now, with the new payload, and adds nothing; once the twin
/// has started, the enqueue creates a new job, due after the delay.
pub async fn a_debounced_job_is_pushed_later_with_the_new_payload(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let delay = Duration::from_secs(10);
    let bounce = |payload: &str| {
        plain("reindex", payload)
            .debounce(delay)
            .with_unique_key("user:7")
    };
    let t0 = clock.now();
    let first = store.insert(bounce(r#"{"v":1}"#)).await.unwrap();
    assert!(first.created);
    assert_eq!(first.job.available_at, t0.plus(delay));
    clock.advance(Duration::from_secs(5));
    let second = store.insert(bounce(r#"{"v":2}"#)).await.unwrap();
    assert!(!second.created);
    assert_eq!(second.job.id, first.job.id);
    assert_eq!(second.job.available_at, clock.now().plus(delay));
    assert_eq!(value(&second.job.payload), serde_json::json!({"v": 2}));
    assert_eq!(get(&*store, first.job.id.as_str()).await, second.job);
    assert!(
        store.claim(&claim_req(10, LEASE)).await.unwrap().is_empty(),
        "pushed later, it is not due"
    );
    clock.advance(delay);
    let running = store.claim(&claim_req(10, LEASE)).await.unwrap();
    assert_eq!(running.len(), 1);
    assert_eq!(value(&running[0].job.payload), serde_json::json!({"v": 2}));
    let third = store.insert(bounce(r#"{"v":3}"#)).await.unwrap();
    assert!(third.created, "a started job is not pushed");
    assert_eq!(third.job.available_at, clock.now().plus(delay));
    assert_eq!(with_key(&*store, "user:7").await.len(), 2);
}

/// However many enqueue one unique key at the same moment, one job is
/// created and every enqueuer gets it (20 at once, ten times).
pub async fn concurrent_unique_enqueues_create_one_job(store: Arc<dyn Store>, _clock: ManualClock) {
    for round in 0..10 {
        let key = format!("concurrent:{round}");
        let barrier = Arc::new(tokio::sync::Barrier::new(20));
        let mut tasks = Vec::new();
        for _ in 0..20 {
            let (store, key, barrier) = (Arc::clone(&store), key.clone(), Arc::clone(&barrier));
            tasks.push(tokio::spawn(async move {
                barrier.wait().await;
                store
                    .insert(
                        plain("k", "{}")
                            .unique_for(Duration::from_secs(3600))
                            .with_unique_key(&key),
                    )
                    .await
                    .unwrap()
            }));
        }
        let mut ids: Vec<JobId> = Vec::new();
        let mut created = 0;
        for t in tasks {
            let inserted = t.await.unwrap();
            created += usize::from(inserted.created);
            ids.push(inserted.job.id);
        }
        assert_eq!(created, 1, "round {round}: exactly one enqueue creates");
        ids.dedup();
        assert_eq!(ids.len(), 1, "round {round}: every enqueuer gets that job");
        assert_eq!(with_key(&*store, &key).await.len(), 1);
    }
}

/// A unique job is enqueued on its own and without dependencies; a chosen
/// key needs a rule. Refusals write nothing.
pub async fn unique_settings_are_checked_and_refusals_write_nothing(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let hour = Duration::from_secs(3600);
    let batch = store
        .insert_many(vec![job("b1").unique_for(hour), job("b2")])
        .await;
    assert!(matches!(batch, Err(Error::Invalid(_))), "{batch:?}");
    store.insert(job("dep")).await.unwrap();
    let with_deps = store
        .insert(
            job("b3")
                .unique_for(hour)
                .depends_on(JobId::new("dep").unwrap()),
        )
        .await;
    assert!(matches!(with_deps, Err(Error::Invalid(_))), "{with_deps:?}");
    let key_only = store.insert(job("b4").with_unique_key("k")).await;
    assert!(matches!(key_only, Err(Error::Invalid(_))), "{key_only:?}");
    for id in ["b1", "b2", "b3", "b4"] {
        assert!(matches!(
            store.get(&JobId::new(id).unwrap()).await,
            Err(Error::NotFound(_))
        ));
    }
    // One unique job alone in a batch is judged like a single insert.
    let alone = store
        .insert_many(vec![job("b5").unique_for(hour)])
        .await
        .unwrap();
    let again = store
        .insert_many(vec![
            job("b5-again")
                .unique_for(hour)
                .with_unique_key(alone[0].job.unique_key.as_deref().unwrap()),
        ])
        .await
        .unwrap();
    assert!(alone[0].created && !again[0].created);
    assert_eq!(again[0].job.id.as_str(), "b5");
}

/// A job that names a batch is refused when the job found in its place —
/// the one its unique or debounce key stands for, or the one with its id —
/// is in another batch or in none: a job belongs to one batch, and
/// answering with the other job would leave the batch named without the
/// work asked for (sealed, its callbacks would run without it). Nothing is
/// written: the batch named is not started and a debounced twin is not
/// pushed. The same key in the same batch answers with the job found.
pub async fn a_job_found_in_its_place_must_be_in_the_batch_named(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let hour = Duration::from_secs(3600);
    let b = |name: &str| errand_core::BatchId::new(name).unwrap();
    let first = store
        .insert(
            plain("report", r#"{"day":1}"#)
                .unique_for(hour)
                .in_batch(b("b1")),
        )
        .await
        .unwrap();
    assert!(first.created);
    let again = store
        .insert(
            plain("report", r#"{"day":1}"#)
                .unique_for(hour)
                .in_batch(b("b1")),
        )
        .await
        .unwrap();
    assert_eq!((again.created, &again.job.id), (false, &first.job.id));

    let refused = |result: errand_core::Result<errand_core::Inserted>, held: &str| match result {
        Err(Error::Invalid(m)) => {
            assert!(m.contains(held) && m.contains("b2"), "{m}");
        }
        other => panic!("a job found {held} must refuse batch b2, got {other:?}"),
    };
    refused(
        store
            .insert(
                plain("report", r#"{"day":1}"#)
                    .unique_for(hour)
                    .in_batch(b("b2")),
            )
            .await,
        "in batch b1",
    );
    // By id, a job in no batch.
    store.insert(job("loose")).await.unwrap();
    refused(
        store.insert(job("loose").in_batch(b("b2"))).await,
        "in no batch",
    );
    refused(
        store
            .insert_many(vec![job("fresh"), job("loose").in_batch(b("b2"))])
            .await
            .map(|mut v| v.remove(0)),
        "in no batch",
    );
    assert!(
        matches!(
            store.get(&JobId::new("fresh").unwrap()).await,
            Err(Error::NotFound(_))
        ),
        "a refused call writes nothing"
    );
    // A debounced twin in b1 is not pushed by an enqueue naming b2.
    let twin = store
        .insert(
            plain("digest", r#"{"v":1}"#)
                .debounce(hour)
                .with_unique_key("digest")
                .in_batch(b("b1")),
        )
        .await
        .unwrap();
    refused(
        store
            .insert(
                plain("digest", r#"{"v":2}"#)
                    .debounce(hour)
                    .with_unique_key("digest")
                    .in_batch(b("b2")),
            )
            .await,
        "in batch b1",
    );
    let kept = store.get(&twin.job.id).await.unwrap();
    assert_eq!(
        (kept.payload.as_str(), kept.available_at),
        (twin.job.payload.as_str(), twin.job.available_at)
    );
    assert!(
        matches!(store.batch(&b("b2")).await, Err(Error::NoSuchBatch(_))),
        "batch b2 was never started"
    );
}
