#![allow(dead_code, clippy::unwrap_used)]
//! Shared set-up for the library's integration tests.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use errand::{
    JobId, ManualClock, NewJob, Payload, RetryPolicy, SqliteOptions, SqliteStore, Store, Timestamp,
    WorkerConfig,
};

pub const T0: Timestamp = Timestamp::from_millis(1_795_996_800_000);

#[derive(Debug)]
pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub store: SqliteStore,
    pub clock: ManualClock,
}

pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("errand.db");
    let clock = ManualClock::new(T0);
    let store = SqliteStore::open(
        &path,
        SqliteOptions {
            create: true,
            migrate: true,
            clock: Arc::new(clock.clone()),
            ..SqliteOptions::default()
        },
    )
    .unwrap();
    Fixture {
        _dir: dir,
        path,
        store,
        clock,
    }
}

/// A one-shot worker's settings, its jitter drawn as `u`.
pub fn config(u: f64) -> WorkerConfig {
    WorkerConfig {
        lease: Duration::from_secs(1),
        retry: RetryPolicy::EqualJitter {
            base: Duration::from_millis(250),
            max: Duration::from_secs(30),
        },
        sampler: Arc::new(move || u),
        heartbeat: false,
        ..WorkerConfig::default()
    }
}

/// A store holding one job, `job-1`, of `max_attempts` attempts.
pub async fn setup(max_attempts: u32) -> (Fixture, Arc<dyn Store>) {
    let f = fixture();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    let job = NewJob::new(
        "receipt",
        Payload::from_json_text(r#"{"to":"a@example"}"#).unwrap(),
    )
    .unwrap()
    .with_id(JobId::new("job-1").unwrap())
    .with_max_attempts(max_attempts)
    .unwrap();
    store.insert(job).await.unwrap();
    (f, store)
}

/// `job-1` as stored.
pub async fn job(store: &Arc<dyn Store>) -> errand::Job {
    store.get(&JobId::new("job-1").unwrap()).await.unwrap()
}

/// Inserts `id`, waiting for `deps`.
pub async fn insert_after(store: &Arc<dyn Store>, id: &str, deps: &[&str]) {
    let job = deps.iter().fold(
        NewJob::new("step", Payload::default())
            .unwrap()
            .with_id(JobId::new(id).unwrap()),
        |j, d| j.depends_on(JobId::new(*d).unwrap()),
    );
    store.insert(job).await.unwrap();
}

/// A job's recorded output, as JSON.
pub fn output_of(job: &errand::Job) -> Option<serde_json::Value> {
    job.output
        .as_ref()
        .map(|p| p.decode::<serde_json::Value>().unwrap())
}
