#![allow(clippy::unwrap_used)]
//! A handler whose database or service did not answer in time reports
//! `Outcome::TimedOut`: the attempt is retried on the policy and recorded
//! under the class `timeout` with the handler's own message, so retries by
//! class (`errand stats`) tell timeouts apart from other failures.

mod common;

use std::sync::Arc;
use std::time::Duration;

use errand::{
    ErrorClass, Handler, JobId, NewJob, Outcome, Payload, RetryPolicy, StatsRequest, Store,
    WorkOutcome, Worker, WorkerConfig, handler_fn,
};

#[tokio::test]
async fn a_timed_out_dependency_is_retried_under_the_timeout_class_with_its_message() {
    let f = common::fixture();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    let job = NewJob::new("receipt", Payload::from_json_text("{}").unwrap())
        .unwrap()
        .with_id(JobId::new("job-1").unwrap())
        .with_max_attempts(3)
        .unwrap();
    store.insert(job).await.unwrap();
    let handler: Arc<dyn Handler> = Arc::new(handler_fn(|_ctx| async {
        Outcome::timed_out("database timeout: database is locked")
    }));
    let worker = Worker::new(
        store.clone(),
        WorkerConfig {
            lease: Duration::from_secs(1),
            retry: RetryPolicy::EqualJitter {
                base: Duration::from_millis(250),
                max: Duration::from_secs(30),
            },
            heartbeat: false,
            ..WorkerConfig::default()
        },
    );
    let r = worker.run_once(handler).await.unwrap();
    assert_eq!(r.outcome, WorkOutcome::RetryScheduled);
    assert_eq!(
        r.error.as_deref(),
        Some("database timeout: database is locked")
    );
    let j = store.get(&JobId::new("job-1").unwrap()).await.unwrap();
    assert_eq!(j.last_error_class, Some(ErrorClass::Timeout));
    assert_eq!(
        j.last_error.as_deref(),
        Some("database timeout: database is locked")
    );
    let stats = store.stats(&StatsRequest::default()).await.unwrap();
    let retries = &stats.totals().retries;
    assert_eq!(retries.get("timeout"), Some(&1), "{retries:?}");
    assert_eq!(retries.get("retryable"), None, "{retries:?}");
}
