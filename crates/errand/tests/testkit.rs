#![allow(clippy::unwrap_used)]
//! The test kit as an application would use it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use errand::testkit::TestQueue;
use errand::{Handler, JobState, NewJob, Outcome, Payload, RetryPolicy, WorkOutcome, handler_fn};

fn flaky(fail_first: u32) -> (Arc<dyn Handler>, Arc<AtomicU32>) {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let h: Arc<dyn Handler> = Arc::new(handler_fn(move |ctx| {
        let c = c.clone();
        async move {
            let n = c.fetch_add(1, Ordering::SeqCst) + 1;
            if n <= fail_first {
                Outcome::retry(format!("provider down (attempt {})", ctx.attempt()))
            } else {
                Outcome::Success
            }
        }
    }));
    (h, calls)
}

#[tokio::test]
async fn enqueue_inside_a_transaction_then_fast_forward_through_the_backoff() {
    let q = TestQueue::new()
        .unwrap()
        .with_retry(RetryPolicy::Fixed(Duration::from_secs(60)));
    // Application code: an order and its receipt job in one transaction.
    q.sqlite()
        .write(|conn, now| {
            conn.execute_batch("CREATE TABLE orders (id INTEGER PRIMARY KEY)")
                .map_err(|e| errand::Error::storage(e.to_string()))?;
            let job = NewJob::new("receipt", Payload::from_json_text(r#"{"order":7}"#)?)?;
            errand::sqlite::enqueue_in(conn, &job, now)
        })
        .await
        .unwrap();
    let waiting = q.enqueued("receipt").await.unwrap();
    assert_eq!(waiting.len(), 1);
    assert_eq!(waiting[0].payload.as_str(), r#"{"order":7}"#);

    let (handler, calls) = flaky(2);
    let first = q.run_due(handler.clone()).await.unwrap();
    assert_eq!(first.len(), 1, "one attempt, then the retry waits");
    assert_eq!(first[0].outcome, WorkOutcome::RetryScheduled);
    assert!(
        q.run_due(handler.clone()).await.unwrap().is_empty(),
        "not due yet"
    );
    q.advance(Duration::from_secs(60));
    assert_eq!(
        q.run_due(handler.clone()).await.unwrap()[0].outcome,
        WorkOutcome::RetryScheduled
    );
    q.advance(Duration::from_secs(60));
    assert_eq!(
        q.run_due(handler).await.unwrap()[0].outcome,
        WorkOutcome::Acknowledged
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
    let jobs = q.jobs().await.unwrap();
    assert_eq!((jobs[0].state, jobs[0].attempts), (JobState::Done, 3));
}

#[tokio::test]
async fn perform_calls_a_handler_once_without_a_queue() {
    let (handler, calls) = flaky(1);
    let outcome = TestQueue::perform(&handler, "receipt", &serde_json::json!({"order": 1}))
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::retry("provider down (attempt 1)"));
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}
