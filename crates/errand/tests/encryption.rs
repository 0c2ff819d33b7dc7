#![allow(clippy::unwrap_used)]
//! Encryption at rest on both backends: what is stored, who can read it,
//! a worker without the key, copies, and re-encryption under a new key.

mod common;

use std::sync::Arc;

use errand::encryption::{Field, Keyring};
use errand::{
    Admin, ClaimRequest, ConnectOptions, CopyRequest, ErrorClass, JobId, JobState, NewJob,
    NewSignal, Outcome, Payload, Store, handler_fn,
};
use errand_testsupport::{PgSchema, postgres_url};

/// Stores over one database, each with its own keys.
struct Db {
    db: String,
    schema: Option<String>,
    _dir: Option<tempfile::TempDir>,
    _pg: Option<PgSchema>,
}

impl Db {
    fn sqlite() -> Db {
        let dir = tempfile::tempdir().unwrap();
        Db {
            db: dir.path().join("e.db").display().to_string(),
            schema: None,
            _dir: Some(dir),
            _pg: None,
        }
    }

    fn postgres(url: &str, tag: &str) -> Db {
        let pg = PgSchema::new(url, tag);
        Db {
            db: url.to_owned(),
            schema: Some(pg.name.clone()),
            _dir: None,
            _pg: Some(pg),
        }
    }

    async fn store(&self, keys: Option<&Keyring>) -> Arc<dyn Store> {
        errand::connect(
            &self.db,
            &ConnectOptions {
                create_and_migrate: true,
                schema: self.schema.clone(),
                keys: keys.map(|k| Arc::new(k.clone())),
                ..ConnectOptions::default()
            },
        )
        .await
        .unwrap()
    }
}

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

fn payload(text: &str) -> Payload {
    Payload::from_json_text(text).unwrap()
}

fn job(name: &str, text: &str) -> NewJob {
    NewJob::new("charge", payload(text))
        .unwrap()
        .with_id(id(name))
}

fn claim_one() -> ClaimRequest {
    ClaimRequest {
        queues: Vec::new(),
        limit: 1,
        lease: std::time::Duration::from_secs(30),
        rate: None,
        reclaim: false,
    }
}

async fn run(db: &Db) {
    let (a, b) = (Keyring::generate_key(), Keyring::generate_key());
    let k1 = Keyring::parse(&format!("k1:{a}")).unwrap();
    let both = Keyring::parse(&format!("k2:{b},k1:{a}")).unwrap();
    let only_k2 = Keyring::parse(&format!("k2:{b}")).unwrap();
    let sealing = db.store(Some(&k1)).await;
    let keyless = db.store(None).await;

    // Stored sealed, read back clear by the keys' holder only.
    sealing
        .insert(job("paid", r#"{"card":"4242"}"#))
        .await
        .unwrap();
    let stored = keyless.get(&id("paid")).await.unwrap();
    assert!(
        !stored.payload.as_str().contains("4242"),
        "{}",
        stored.payload.as_str()
    );
    assert_eq!(stored.payload.shown(), "encrypted (key k1)");
    let claimed = sealing.claim(&claim_one()).await.unwrap().pop().unwrap();
    sealing
        .complete_with_output(&claimed.lease, &payload(r#"{"receipt":"r-9"}"#))
        .await
        .unwrap();
    let stored = keyless.get(&id("paid")).await.unwrap();
    assert_eq!(
        stored
            .output
            .as_ref()
            .and_then(Payload::encrypted_with)
            .as_deref(),
        Some("k1")
    );
    let seen = Admin::new(sealing.clone()).job(&id("paid")).await.unwrap();
    assert_eq!(seen.payload.as_str(), r#"{"card":"4242"}"#);
    assert_eq!(seen.output.unwrap().as_str(), r#"{"receipt":"r-9"}"#);
    let unseen = Admin::new(keyless.clone()).job(&id("paid")).await.unwrap();
    assert_eq!(unseen.payload.shown(), "encrypted (key k1)");

    // A signal's payload is sealed too (kept for the job's next wait).
    sealing.insert(job("held", r#"{"hold":7}"#)).await.unwrap();
    sealing
        .signal(&NewSignal {
            buffer: true,
            payload: Some(payload(r#"{"by":"visa"}"#)),
            ..NewSignal::new(id("held"), "paid").unwrap()
        })
        .await
        .unwrap();
    let values = keyless.stored_values(None, 100).await.unwrap();
    let signal = values
        .values
        .iter()
        .find(|v| v.field == Field::Signal)
        .expect("the signal's payload is read");
    assert_eq!(signal.value.encrypted_with().as_deref(), Some("k1"));
    assert_eq!(
        k1.open(Field::Signal, &id("held"), &signal.value)
            .unwrap()
            .as_str(),
        r#"{"by":"visa"}"#
    );
    assert!(
        values
            .values
            .iter()
            .all(|v| v.value.encrypted_with().is_some())
    );

    // A worker without the key fails the attempt for good, saying which key.
    let ran = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let seen_run = ran.clone();
    let handler = Arc::new(handler_fn(move |_ctx| {
        seen_run.store(true, std::sync::atomic::Ordering::SeqCst);
        async { Outcome::Success }
    }));
    let worker = errand::Worker::new(keyless.clone(), common::config(0.5));
    let report = worker.run_once(handler).await.unwrap();
    assert!(
        !ran.load(std::sync::atomic::Ordering::SeqCst),
        "the handler must not run"
    );
    assert_eq!(report.job_id, Some(id("held")));
    let failed = keyless.get(&id("held")).await.unwrap();
    assert_eq!(failed.state, JobState::Dead);
    assert_eq!(failed.last_error_class, Some(ErrorClass::Permanent));
    let error = failed.last_error.unwrap();
    assert!(error.contains("key `k1`"), "{error}");

    // A copy is sealed for its own id and opens.
    let copies = Admin::new(sealing.clone())
        .copy_jobs(&CopyRequest {
            ids: vec![id("held")],
            operator: "ops".into(),
            reason: Some("test".into()),
        })
        .await
        .unwrap();
    let copy = keyless.get(&copies[0].job.id).await.unwrap();
    assert_eq!(
        k1.open(Field::Payload, &copy.id, &copy.payload)
            .unwrap()
            .as_str(),
        r#"{"hold":7}"#
    );
    let copy_id = copy.id.clone();

    // Rotation: everything under k2, one job a step; again, nothing to do.
    let admin = Admin::new(keyless.clone());
    let mut steps = 0;
    let done = admin.rotate_keys(&both, 1, |_| steps += 1).await.unwrap();
    assert_eq!(done.jobs, 3, "{done:?}");
    assert_eq!(steps, 3);
    assert_eq!(
        (done.rewritten, done.unreadable, done.changed),
        (done.values, 0, 0)
    );
    let again = admin.rotate_keys(&both, 500, |_| ()).await.unwrap();
    assert_eq!((again.rewritten, again.already), (0, done.values));
    let reader = Admin::new(db.store(Some(&only_k2)).await);
    let seen = reader.job(&id("paid")).await.unwrap();
    assert_eq!(seen.payload.as_str(), r#"{"card":"4242"}"#);
    assert_eq!(seen.output.unwrap().as_str(), r#"{"receipt":"r-9"}"#);
    let copy = reader.job(&copy_id).await.unwrap();
    assert_eq!(copy.payload.as_str(), r#"{"hold":7}"#);
    // Clear values are brought under the key too.
    keyless.insert(job("plain", r#"{"n":1}"#)).await.unwrap();
    let clear = admin.rotate_keys(&both, 500, |_| ()).await.unwrap();
    assert_eq!(clear.rewritten, 1);
    let plain = keyless.get(&id("plain")).await.unwrap();
    assert_eq!(plain.payload.encrypted_with().as_deref(), Some("k2"));
    // Under a key not given, a value is left and counted.
    let stranger = Keyring::parse(&format!("k3:{}", Keyring::generate_key())).unwrap();
    let stuck = admin.rotate_keys(&stranger, 500, |_| ()).await.unwrap();
    assert_eq!(stuck.unreadable, stuck.values);
    assert!(admin.rotate_keys(&both, 0, |_| ()).await.is_err());
}

/// A dependent reads its dependency's sealed output clear; a search by a
/// payload field reads sealed payloads with the keys, and without them
/// finds nothing.
async fn outputs_and_searches(db: &Db) {
    let k1 = Keyring::parse(&format!("k1:{}", Keyring::generate_key())).unwrap();
    let sealing = db.store(Some(&k1)).await;
    let keyless = db.store(None).await;
    sealing.insert(job("first", r#"{"step":1}"#)).await.unwrap();
    sealing
        .insert(job("second", r#"{"step":2}"#).depends_on(id("first")))
        .await
        .unwrap();
    let claimed = sealing.claim(&claim_one()).await.unwrap().pop().unwrap();
    sealing
        .complete_with_output(&claimed.lease, &payload(r#"{"rows":12}"#))
        .await
        .unwrap();
    let read = Arc::new(std::sync::Mutex::new(None));
    let seen = read.clone();
    let handler = Arc::new(handler_fn(move |ctx| {
        let seen = seen.clone();
        async move {
            let outputs = ctx.dependency_outputs().await.unwrap();
            *seen.lock().unwrap() = outputs[0].1.as_ref().map(|p| p.as_str().to_owned());
            Outcome::Success
        }
    }));
    let worker = errand::Worker::new(sealing.clone(), common::config(0.5));
    worker.run_once(handler).await.unwrap();
    assert_eq!(read.lock().unwrap().as_deref(), Some(r#"{"rows":12}"#));

    let search = errand::JobSearch {
        payload: vec![errand::PayloadTerm::parse("payload.step=2").unwrap()],
        ..errand::JobSearch::default()
    };
    let found = Admin::new(sealing.clone()).search(&search).await.unwrap();
    assert_eq!(found.jobs.len(), 1);
    assert_eq!(found.jobs[0].id, id("second"));
    let found = Admin::new(keyless.clone()).search(&search).await.unwrap();
    assert!(found.jobs.is_empty());
}

#[tokio::test]
async fn sqlite_opens_outputs_and_searches_with_the_keys() {
    outputs_and_searches(&Db::sqlite()).await;
}

#[tokio::test]
async fn postgres_opens_outputs_and_searches_with_the_keys() {
    let Some(url) = postgres_url("encryption on PostgreSQL") else {
        return;
    };
    outputs_and_searches(&Db::postgres(&url, "encryption_outputs")).await;
}

#[tokio::test]
async fn sqlite_stores_values_encrypted_and_rotates_them() {
    run(&Db::sqlite()).await;
}

#[tokio::test]
async fn postgres_stores_values_encrypted_and_rotates_them() {
    let Some(url) = postgres_url("encryption on PostgreSQL") else {
        return;
    };
    run(&Db::postgres(&url, "encryption")).await;
}
