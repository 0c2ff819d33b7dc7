#![allow(clippy::unwrap_used)]
//! The one-shot worker: handler outcomes and retry scheduling.

mod common;

use common::{config, insert_after, job, output_of, setup};

use std::sync::Arc;
use std::time::Duration;

use errand::{
    ErrorClass, Handler, JobId, JobState, Outcome, Store, WorkOutcome, Worker, WorkerConfig,
    handler_fn,
};

fn always(outcome: Outcome) -> Arc<dyn Handler> {
    Arc::new(handler_fn(move |_ctx| {
        let o = outcome.clone();
        async move { o }
    }))
}

#[tokio::test]
async fn equal_jitter_delays_are_persisted_within_bounds_and_grow() {
    for u in [0.0, 0.5, 0.999_999] {
        let (f, store) = setup(4).await;
        let worker = Worker::new(store.clone(), config(u));
        let fail = always(Outcome::retry("receipt_unavailable"));
        let mut last = Duration::ZERO;
        for attempt in 1..=3u32 {
            let start = errand::Clock::now(&f.clock);
            let report = worker.run_once(fail.clone()).await.unwrap();
            assert_eq!(report.outcome, WorkOutcome::RetryScheduled);
            assert_eq!(report.attempt, Some(attempt));
            let j = job(&store).await;
            assert_eq!(j.state, JobState::Ready);
            let delay = j.available_at.since(start);
            let cap = Duration::from_millis(250 * 2u64.pow(attempt - 1));
            assert!(
                delay >= cap / 2 && delay < cap,
                "attempt {attempt} u {u}: {delay:?} not in [{:?}, {cap:?})",
                cap / 2
            );
            assert_eq!(report.available_at, Some(j.available_at));
            assert!(delay > last, "delays must grow: {last:?} then {delay:?}");
            last = delay;
            // Not claimable a millisecond early.
            f.clock.advance(delay - Duration::from_millis(1));
            assert_eq!(
                worker.run_once(fail.clone()).await.unwrap().outcome,
                WorkOutcome::Idle
            );
            f.clock.advance(Duration::from_millis(1));
        }
        let report = worker.run_once(fail.clone()).await.unwrap();
        assert_eq!(report.outcome, WorkOutcome::Dead);
        let j = job(&store).await;
        assert_eq!((j.state, j.attempts), (JobState::Dead, 4));
        assert_eq!(j.last_error.as_deref(), Some("receipt_unavailable"));
    }
}

#[tokio::test]
async fn success_acknowledges() {
    let (_f, store) = setup(3).await;
    let report = Worker::new(store.clone(), config(0.5))
        .run_once(always(Outcome::Success))
        .await
        .unwrap();
    assert_eq!(report.outcome, WorkOutcome::Acknowledged);
    assert!(report.acknowledged);
    assert_eq!(report.to_string(), "job job-1 attempt 1 acknowledged=true");
    assert_eq!(job(&store).await.state, JobState::Done);
}

#[tokio::test]
async fn permanent_goes_dead_at_once_and_cancel_is_terminal() {
    let (_f, store) = setup(5).await;
    let w = Worker::new(store.clone(), config(0.5));
    let report = w
        .run_once(always(Outcome::permanent("no such reservation")))
        .await
        .unwrap();
    assert_eq!(report.outcome, WorkOutcome::Dead);
    let j = job(&store).await;
    assert_eq!(
        (j.state, j.attempts, j.last_error_class),
        (JobState::Dead, 1, Some(ErrorClass::Permanent))
    );

    let (_f, store) = setup(5).await;
    let w = Worker::new(store.clone(), config(0.5));
    let report = w
        .run_once(always(Outcome::Cancel {
            reason: "withdrawn".into(),
        }))
        .await
        .unwrap();
    assert_eq!(report.outcome, WorkOutcome::Cancelled);
    assert_eq!(job(&store).await.state, JobState::Cancelled);
}

#[tokio::test]
async fn snooze_spends_no_attempt_and_retry_at_uses_the_hint() {
    let (f, store) = setup(5).await;
    let w = Worker::new(store.clone(), config(0.5));
    let r = w
        .run_once(always(Outcome::Snooze {
            delay: Duration::from_secs(9),
        }))
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::Snoozed);
    let j = job(&store).await;
    assert_eq!(j.attempts, 0);
    assert_eq!(
        j.available_at,
        errand::Clock::now(&f.clock).plus(Duration::from_secs(9))
    );
    f.clock.advance(Duration::from_secs(9));
    let at = errand::Clock::now(&f.clock).plus(Duration::from_secs(120));
    let r = w
        .run_once(always(Outcome::RetryAt {
            error: "429".into(),
            at,
        }))
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::RetryScheduled);
    assert_eq!(r.available_at, Some(at));
    assert_eq!(job(&store).await.attempts, 1);
}

#[tokio::test]
async fn a_timeout_is_a_retryable_failure_of_its_own_class() {
    let (_f, store) = setup(5).await;
    let r = Worker::new(store.clone(), config(0.5))
        .run_once(always(Outcome::Timeout))
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::RetryScheduled);
    assert_eq!(
        job(&store).await.last_error_class,
        Some(ErrorClass::Timeout)
    );
}

#[tokio::test]
async fn a_panicking_handler_is_a_retryable_failure_with_its_message() {
    let (_f, store) = setup(5).await;
    let h: Arc<dyn Handler> = Arc::new(handler_fn(|_ctx| async { panic!("kaboom in handler") }));
    let r = Worker::new(store.clone(), config(0.5))
        .run_once(h)
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::RetryScheduled);
    assert!(
        job(&store)
            .await
            .last_error
            .unwrap()
            .contains("kaboom in handler")
    );
}

#[tokio::test]
async fn a_settlement_after_the_lease_expired_reports_lease_lost() {
    let (f, store) = setup(5).await;
    let clock = f.clock.clone();
    let h: Arc<dyn Handler> = Arc::new(handler_fn(move |_ctx| {
        let clock = clock.clone();
        async move {
            clock.advance(Duration::from_secs(1)); // the handler outlived its lease
            Outcome::Success
        }
    }));
    let r = Worker::new(store.clone(), config(0.5))
        .run_once(h)
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::LeaseLost);
    assert!(!r.acknowledged);
    assert_eq!(job(&store).await.state, JobState::Running);
}

#[tokio::test]
async fn idle_when_nothing_is_due() {
    let f = common::fixture();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    let r = Worker::new(store, config(0.5))
        .run_once(always(Outcome::Success))
        .await
        .unwrap();
    assert_eq!(r.outcome, WorkOutcome::Idle);
    assert_eq!(r.to_string(), "idle");
}

/// A handler's result (`Outcome::success_with`) is kept with its job, and
/// the job that depends on it reads it through its context; a result over
/// the limit fails the attempt for good, saying why.
#[tokio::test]
async fn a_handler_output_reaches_the_dependent_and_an_oversized_one_is_refused() {
    let (_f, store) = setup(3).await;
    insert_after(&store, "job-2", &["job-1"]).await;
    let w = Worker::new(store.clone(), config(0.5));
    let produce: Arc<dyn Handler> = Arc::new(handler_fn(|_ctx| async {
        Outcome::success_with(&serde_json::json!({"rows": 120}))
    }));
    let r = w.run_once(produce).await.unwrap();
    assert_eq!(
        (r.outcome, r.job_id.unwrap().as_str()),
        (WorkOutcome::Acknowledged, "job-1")
    );
    assert_eq!(
        output_of(&job(&store).await),
        Some(serde_json::json!({"rows": 120}))
    );
    let echo: Arc<dyn Handler> = Arc::new(handler_fn(|ctx: errand::JobContext| async move {
        match ctx.dependency_outputs().await {
            Ok(read) => {
                let seen: Vec<(String, Option<serde_json::Value>)> = read
                    .into_iter()
                    .map(|(id, out)| (id.to_string(), out.map(|p| p.decode().unwrap())))
                    .collect();
                Outcome::success_with(&seen)
            }
            Err(e) => Outcome::retry(e),
        }
    }));
    let r = w.run_once(echo).await.unwrap();
    assert_eq!(r.outcome, WorkOutcome::Acknowledged);
    let j2 = store.get(&JobId::new("job-2").unwrap()).await.unwrap();
    assert_eq!(
        output_of(&j2),
        Some(serde_json::json!([["job-1", {"rows": 120}]]))
    );

    insert_after(&store, "job-3", &[]).await;
    let huge: Arc<dyn Handler> = Arc::new(handler_fn(|_ctx| async {
        Outcome::success_with(&"x".repeat(errand::MAX_OUTPUT_BYTES))
    }));
    let r = w.run_once(huge).await.unwrap();
    assert_eq!(r.outcome, WorkOutcome::Dead);
    let j3 = store.get(&JobId::new("job-3").unwrap()).await.unwrap();
    assert_eq!((j3.state, j3.output), (JobState::Dead, None));
    let error = j3.last_error.unwrap();
    assert!(
        error.starts_with(
            "the handler's output was refused: the output is 65538 bytes; the limit is 65536 bytes"
        ),
        "{error}"
    );
}

/// A handler's progress reports ride on its lease renewals: the latest one
/// is stored with the job (under the attempt's number) without a write of
/// its own.
#[tokio::test]
async fn a_handler_reports_progress_through_its_lease_renewals() {
    let (_f, store) = setup(3).await;
    let w = Worker::new(
        store.clone(),
        WorkerConfig {
            lease: Duration::from_millis(300),
            heartbeat: true,
            ..config(0.5)
        },
    );
    let watched = store.clone();
    let handler: Arc<dyn Handler> = Arc::new(handler_fn(move |ctx: errand::JobContext| {
        let store = watched.clone();
        async move {
            ctx.set_progress(10, Some("starting"));
            ctx.set_progress(60, Some("half the rows"));
            // Wait (bounded) until a renewal has carried the report.
            for _ in 0..200 {
                let job = store.get(ctx.id()).await.unwrap();
                if job.progress.is_some() {
                    return Outcome::Success;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            Outcome::retry("no renewal carried the progress within 5 s")
        }
    }));
    let r = w.run_once(handler).await.unwrap();
    assert_eq!(r.outcome, WorkOutcome::Acknowledged);
    let p = job(&store).await.progress.unwrap();
    assert_eq!(
        (p.percent, p.message.as_deref(), p.attempt),
        (60, Some("half the rows"), 1)
    );
}
