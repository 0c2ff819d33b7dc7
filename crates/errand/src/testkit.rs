//! A test kit for applications: an embedded queue on a controllable clock.
//!
//! ```
//! # use std::sync::Arc;
//! # use std::time::Duration;
//! # use errand::testkit::TestQueue;
//! # use errand::{Client, Handler, NewJob, Outcome, Payload};
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let q = TestQueue::new()?;
//! // The application enqueues (here through a client; `q.sqlite()` for
//! // code that enqueues inside its own transaction).
//! let order = Payload::from_json_text(r#"{"order": 7}"#)?;
//! Client::new(q.store()).enqueue(NewJob::new("receipt", order)?).await?;
//! assert_eq!(q.enqueued("receipt").await?.len(), 1);       // what was enqueued
//! let handler: Arc<dyn Handler> = Arc::new(errand::handler_fn(|_ctx| async { Outcome::Success }));
//! let reports = q.run_due(handler.clone()).await?;         // run everything due, inline
//! assert_eq!(reports.len(), 1);
//! q.advance(Duration::from_secs(60));                      // fast-forward backoff and schedules
//! let outcome = TestQueue::perform(&handler, "receipt", &serde_json::json!({"order": 7})).await?; // one call, no queue
//! assert_eq!(outcome, Outcome::Success);
//! # Ok(())
//! # }
//! ```
//!
//! The queue is a SQLite file in a fresh temporary directory (removed on
//! drop) with the full schema, so application code that enqueues inside the
//! store's write transaction, or its own `rusqlite` transaction, behaves as
//! in production. Time moves only when the test says so.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use errand_core::AdminStore;
use errand_core::{
    ClaimedJob, Clock, Error, Job, JobFilter, JobId, JobState, Lease, LeaseToken, ManualClock,
    Name, Outcome, Payload, Result, RetryPolicy, Store, Timestamp,
};
use errand_sqlite::{SqliteOptions, SqliteStore};

use crate::handler::{Handler, JobContext};
use crate::work_report::{WorkOutcome, WorkReport};
use crate::worker::{Worker, WorkerConfig};

/// The instant a test queue's clock starts at (2026-01-01T00:00:00Z).
pub const START: Timestamp = Timestamp::from_millis(1_767_225_600_000);

/// An embedded queue for tests. See the module documentation.
#[derive(Debug)]
pub struct TestQueue {
    dir: PathBuf,
    store: SqliteStore,
    clock: ManualClock,
    retry: RetryPolicy,
}

impl TestQueue {
    /// A fresh, empty queue whose clock stands at [`START`].
    pub fn new() -> Result<Self> {
        let dir = std::env::temp_dir().join(format!("errand-testkit-{}", JobId::generate()));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::storage(format!("cannot create {}: {e}", dir.display())))?;
        let clock = ManualClock::new(START);
        let options = SqliteOptions {
            create: true,
            migrate: true,
            clock: Arc::new(clock.clone()),
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open(dir.join("queue.db"), options)?;
        Ok(TestQueue {
            dir,
            store,
            clock,
            retry: RetryPolicy::default(),
        })
    }

    /// Uses `policy` for failures recorded by [`TestQueue::run_due`].
    pub fn with_retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// The store, for the code under test.
    pub fn store(&self) -> Arc<dyn Store> {
        Arc::new(self.store.clone())
    }

    /// The SQLite store itself (for `write` and `enqueue_in`).
    pub fn sqlite(&self) -> &SqliteStore {
        &self.store
    }

    /// The clock.
    pub fn clock(&self) -> &ManualClock {
        &self.clock
    }

    /// The current test time.
    pub fn now(&self) -> Timestamp {
        self.clock.now()
    }

    /// Moves time forward: retries and scheduled jobs become due.
    pub fn advance(&self, d: Duration) {
        self.clock.advance(d);
    }

    /// Jobs of `kind` waiting to run (`ready`), oldest first.
    pub async fn enqueued(&self, kind: &str) -> Result<Vec<Job>> {
        let filter = JobFilter {
            state: Some(JobState::Ready),
            kind: Some(Name::parse("kind", kind)?),
            limit: Some(10_000),
            ..JobFilter::default()
        };
        self.store.list(&filter).await
    }

    /// Every job, oldest first.
    pub async fn jobs(&self) -> Result<Vec<Job>> {
        self.store
            .list(&JobFilter {
                limit: Some(10_000),
                ..JobFilter::default()
            })
            .await
    }

    /// Runs every job due now with `handler`, one at a time, until none is
    /// due (retries scheduled in the future wait for [`TestQueue::advance`]).
    /// Returns one report per attempt.
    pub async fn run_due(&self, handler: Arc<dyn Handler>) -> Result<Vec<WorkReport>> {
        let config = WorkerConfig {
            heartbeat: false,
            retry: self.retry.clone(),
            sampler: Arc::new(|| 0.5),
            ..WorkerConfig::default()
        };
        let worker = Worker::new(self.store(), config);
        let mut reports = Vec::new();
        loop {
            let report = worker.run_once(handler.clone()).await?;
            if report.outcome == WorkOutcome::Idle {
                return Ok(reports);
            }
            reports.push(report);
            if reports.len() > 100_000 {
                return Err(Error::invalid(
                    "run_due ran 100,000 attempts; a handler keeps snoozing at zero delay?",
                ));
            }
        }
    }

    /// Calls `handler` once on a job of `kind` with `payload`, without a
    /// queue: the handler's unit test.
    pub async fn perform<T: serde::Serialize>(
        handler: &Arc<dyn Handler>,
        kind: &str,
        payload: &T,
    ) -> Result<Outcome> {
        let now = Timestamp::now();
        let id = JobId::generate();
        let job = Job {
            id: id.clone(),
            queue: Name::parse("queue", errand_core::DEFAULT_QUEUE)?,
            kind: Name::parse("kind", kind)?,
            state: JobState::Running,
            payload: Payload::from_value(payload)?,
            priority: 0,
            attempts: 1,
            max_attempts: errand_core::DEFAULT_MAX_ATTEMPTS,
            replays: 0,
            lease_expiries: 0,
            max_lease_expiries: errand_core::DEFAULT_MAX_LEASE_EXPIRIES,
            give_up_at: None,
            available_at: now,
            created_at: now,
            updated_at: now,
            lease_until: Some(now.plus(Duration::from_secs(30))),
            attempt_started_at: Some(now),
            last_error: None,
            last_error_class: None,
            finished_at: None,
            key: None,
            deadline: None,
            traceparent: None,
            waiting_on: 0,
            on_dependency_failure: None,
            has_dependents: false,
            output: None,
            progress: None,
            workflow: None,
            tags: Vec::new(),
            meta: errand_core::Meta::new(),
            unique_key: None,
            batch: None,
            awaiting: None,
            resumed_by: None,
            added_by: None,
        };
        let lease = Lease {
            id,
            token: LeaseToken::generate(),
            attempt: 1,
        };
        let claimed = ClaimedJob { job, lease };
        let ctx = JobContext {
            job: claimed.job,
            lease: claimed.lease,
            lease_lost: tokio_util::sync::CancellationToken::new(),
            reader: crate::handler::OutputReader::default(),
            progress: crate::handler::ProgressSlot::default(),
            children: crate::handler::ChildSlot::default(),
        };
        Ok(handler.handle(ctx).await)
    }
}

impl Drop for TestQueue {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
