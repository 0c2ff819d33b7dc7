//! Signals: a job that waits for a named signal is never claimed until the
//! signal arrives (or its wait times out and its policy applies); each
//! signal is delivered at most once and each wait takes exactly one; a
//! running handler can suspend its job until a signal, without holding a
//! worker.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    AuditStamp, CancelRequest, DependencyFailure, Error, ErrorClass, JobId, JobState, ManualClock,
    NewSignal, OnAwaitTimeout, Store,
};

use crate::{admin, assert_lease_lost, claim_one, claim_req, get, job};

const LEASE: Duration = Duration::from_secs(10);

fn id(name: &str) -> JobId {
    JobId::new(name).unwrap()
}

fn signal(job: &str, name: &str) -> NewSignal {
    NewSignal::new(id(job), name).unwrap()
}

/// Asserts a refusal of a signal the job does not wait for, and returns
/// its hint.
fn refused<T: std::fmt::Debug>(result: errand_core::Result<T>, state: &str) -> String {
    match result {
        Err(Error::InvalidState { state: s, hint, .. }) => {
            assert_eq!(s, state, "the refusal names the job's state");
            hint
        }
        other => panic!("expected the signal to be refused, got {other:?}"),
    }
}

/// A job enqueued to wait for a signal is `waiting` and never claimed;
/// a signal of another name is refused and writes nothing; the awaited
/// one makes it ready, due now, and its handler reads the payload; the
/// signal is recorded (time, payload size) and, sent by a person, audited.
pub async fn a_waiting_job_runs_only_once_its_signal_arrives(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let wait = job("hold-1")
        .awaiting("paid", None, OnAwaitTimeout::Fail)
        .unwrap();
    let stored = store.insert(wait).await.unwrap().job;
    assert_eq!(stored.state, JobState::Waiting);
    let awaiting = stored.awaiting.clone().expect("the wait is stored");
    assert_eq!(awaiting.signal.as_str(), "paid");
    assert_eq!(awaiting.until, None);
    assert_eq!(stored, get(store.as_ref(), "hold-1").await);
    store.insert(job("other")).await.unwrap();
    let waiting = admin(&store)
        .list(&errand_core::JobFilter {
            state: Some(JobState::Waiting),
            ..errand_core::JobFilter::default()
        })
        .await
        .unwrap();
    let listed: Vec<&str> = waiting.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(listed, ["hold-1"], "listed by its state");
    let stats = admin(&store)
        .stats(&errand_core::StatsRequest::default())
        .await
        .unwrap();
    let totals = stats.totals();
    assert_eq!(
        (totals.waiting, totals.ready),
        (1, 1),
        "counted by its state"
    );
    clock.advance(Duration::from_secs(60));
    let claimed = store.claim(&claim_req(10, LEASE)).await.unwrap();
    let claimed: Vec<&str> = claimed.iter().map(|c| c.job.id.as_str()).collect();
    assert_eq!(claimed, ["other"], "a waiting job is never claimed");

    let hint = refused(store.signal(&signal("hold-1", "shipped")).await, "waiting");
    assert!(hint.contains("waits for the signal paid"), "{hint}");
    let missing = store.signal(&signal("no-such-job", "paid")).await;
    assert!(matches!(missing, Err(Error::NotFound(_))), "{missing:?}");

    let stamp = AuditStamp {
        operator: "ops".into(),
        reason: Some("payment p-1 cleared".into()),
    };
    let paid = signal("hold-1", "paid")
        .with_payload_text(r#"{"payment":"p-1"}"#)
        .unwrap()
        .sent_by(stamp);
    let sent = store.signal(&paid).await.unwrap();
    assert!(sent.delivered);
    assert_eq!(sent.job.state, JobState::Ready);
    assert_eq!(sent.job.awaiting, None);
    assert_eq!(
        sent.job.available_at,
        errand_core::Clock::now(&clock),
        "due at once"
    );
    let seq = sent.job.resumed_by.expect("resumed by the signal");

    // Delivered once: the job waits no more.
    let again = refused(store.signal(&signal("hold-1", "paid")).await, "ready");
    assert!(again.contains("--buffer"), "{again}");

    let c = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c.job.id.as_str(), "hold-1");
    let got = store.received_signal(&id("hold-1")).await.unwrap().unwrap();
    assert_eq!(got.name.as_str(), "paid");
    assert_eq!(got.payload.unwrap().as_str(), r#"{"payment":"p-1"}"#);

    let detail = admin(&store).detail(&id("hold-1")).await.unwrap();
    assert_eq!(detail.signals.len(), 1, "refused signals are not recorded");
    let record = &detail.signals[0];
    assert_eq!(record.seq, seq);
    assert_eq!(record.name.as_str(), "paid");
    assert_eq!(record.payload_bytes, 17);
    assert_eq!(record.delivered_at, Some(record.sent_at));
    let audited: Vec<_> = detail.audit.iter().map(|a| a.action.as_str()).collect();
    assert_eq!(audited, ["signal"]);
    assert_eq!(detail.audit[0].operator, "ops");
    assert_eq!(
        detail.audit[0].reason.as_deref(),
        Some("payment p-1 cleared")
    );

    // A job that never waited received no signal.
    assert_eq!(store.received_signal(&id("other")).await.unwrap(), None);
}

/// Two signals sent at once to one waiting job: exactly one is delivered;
/// the other is refused, or, asking to be kept, is kept for a later wait.
pub async fn a_signal_is_delivered_once_when_two_are_sent_at_once(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    for round in 0..12 {
        let name = format!("race-{round}");
        let wait = job(&name)
            .awaiting("go", None, OnAwaitTimeout::Fail)
            .unwrap();
        store.insert(wait).await.unwrap();
        let buffer = round % 2 == 1;
        let send = |n: u32| {
            let store = Arc::clone(&store);
            let mut s = signal(&name, "go").with_payload(&n).unwrap();
            s.buffer = buffer;
            tokio::spawn(async move { store.signal(&s).await })
        };
        let (a, b) = (send(1), send(2));
        let results = [a.await.unwrap(), b.await.unwrap()];
        let delivered = results
            .iter()
            .filter(|r| r.as_ref().is_ok_and(|s| s.delivered))
            .count();
        assert_eq!(delivered, 1, "round {round}: {results:?}");
        let other = results
            .iter()
            .find(|r| !r.as_ref().is_ok_and(|s| s.delivered))
            .unwrap();
        if buffer {
            assert!(other.as_ref().is_ok_and(|s| !s.delivered), "{other:?}");
        } else {
            assert!(
                matches!(other, Err(Error::InvalidState { .. })),
                "{other:?}"
            );
        }
        let detail = admin(&store).detail(&id(&name)).await.unwrap();
        let delivered_rows = detail
            .signals
            .iter()
            .filter(|s| s.delivered_at.is_some())
            .count();
        assert_eq!(delivered_rows, 1);
        assert_eq!(detail.signals.len(), if buffer { 2 } else { 1 });
        assert_eq!(get(store.as_ref(), &name).await.state, JobState::Ready);
    }
}

/// A wait that times out follows its policy: `run` makes the job ready
/// with no signal, `fail` moves it to dead (class `signal_timeout`),
/// `cancel` cancels it; a wait without a timeout, or not yet timed out,
/// keeps waiting; a job that ended this way releases its dependents by
/// their policies; a signal after the timeout is refused.
pub async fn a_timed_out_wait_follows_its_policy(store: Arc<dyn Store>, clock: ManualClock) {
    let minute = Some(Duration::from_secs(60));
    for (name, policy) in [
        ("t-run", OnAwaitTimeout::Run),
        ("t-fail", OnAwaitTimeout::Fail),
        ("t-cancel", OnAwaitTimeout::Cancel),
    ] {
        let wait = job(name).awaiting("paid", minute, policy).unwrap();
        let stored = store.insert(wait).await.unwrap().job;
        assert_eq!(
            stored.awaiting.unwrap().until,
            Some(errand_core::Clock::now(&clock).plus(Duration::from_secs(60)))
        );
    }
    let later = job("t-later")
        .awaiting("paid", Some(Duration::from_secs(600)), OnAwaitTimeout::Fail)
        .unwrap();
    store.insert(later).await.unwrap();
    let forever = job("t-forever")
        .awaiting("paid", None, OnAwaitTimeout::Fail)
        .unwrap();
    store.insert(forever).await.unwrap();
    let after = job("after-fail")
        .depends_on(id("t-fail"))
        .on_dependency_failure(DependencyFailure::Run);
    store.insert(after).await.unwrap();

    clock.advance(Duration::from_secs(59));
    assert!(store.expire_waits(100).await.unwrap().is_empty());
    clock.advance(Duration::from_secs(1));
    let ended = store.expire_waits(100).await.unwrap();
    let names: Vec<&str> = ended.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(names, ["t-cancel", "t-fail", "t-run"]);
    assert!(store.expire_waits(100).await.unwrap().is_empty(), "once");

    let run = get(store.as_ref(), "t-run").await;
    assert_eq!(run.state, JobState::Ready);
    assert_eq!((run.awaiting, run.resumed_by), (None, None));
    let fail = get(store.as_ref(), "t-fail").await;
    assert_eq!(fail.state, JobState::Dead);
    assert_eq!(fail.last_error_class, Some(ErrorClass::SignalTimeout));
    assert_eq!(
        fail.last_error.as_deref(),
        Some("no signal paid arrived before the wait timed out")
    );
    let cancel = get(store.as_ref(), "t-cancel").await;
    assert_eq!(cancel.state, JobState::Cancelled);
    assert_eq!(cancel.last_error_class, Some(ErrorClass::Cancelled));
    assert_eq!(
        get(store.as_ref(), "after-fail").await.state,
        JobState::Ready
    );
    for name in ["t-later", "t-forever"] {
        assert_eq!(get(store.as_ref(), name).await.state, JobState::Waiting);
    }
    refused(store.signal(&signal("t-fail", "paid")).await, "dead");

    // The timed-out `run` job runs without a signal.
    let mut claimed: Vec<String> = store
        .claim(&claim_req(10, LEASE))
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.job.id.to_string())
        .collect();
    claimed.sort();
    assert_eq!(claimed, ["after-fail", "t-run"]);
    assert_eq!(store.received_signal(&id("t-run")).await.unwrap(), None);

    // An operator may cancel a waiting job; its wait ends with it.
    let cancelled = admin(&store)
        .cancel_jobs(&CancelRequest {
            ids: vec![id("t-forever")],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(cancelled[0].state, JobState::Cancelled);
    assert_eq!(cancelled[0].awaiting, None);
}

/// A running handler suspends its job: the attempt is given back and
/// recorded as `awaiting`, the lease is gone (a late settlement is
/// refused), the job is claimed by nobody while it waits, and the signal
/// makes it claimable again with its payload. A signal kept for it before
/// it suspended is taken at once; one suspend under a lost lease changes
/// nothing.
pub async fn a_suspended_job_resumes_with_the_signals_payload(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store.insert(job("step")).await.unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    let wait = errand_core::Await::new("approved")
        .unwrap()
        .timeout(Duration::from_secs(3600), OnAwaitTimeout::Cancel);
    let waiting = store.suspend(&c.lease, &wait).await.unwrap();
    assert_eq!(waiting.state, JobState::Waiting);
    assert_eq!(waiting.attempts, 0, "the attempt is given back");
    assert_eq!(waiting.lease_until, None);
    assert_lease_lost(store.complete(&c.lease).await);
    assert_lease_lost(store.suspend(&c.lease, &wait).await);
    clock.advance(Duration::from_secs(5));
    assert!(store.claim(&claim_req(10, LEASE)).await.unwrap().is_empty());

    let sent = store
        .signal(
            &signal("step", "approved")
                .with_payload_text("true")
                .unwrap(),
        )
        .await
        .unwrap();
    assert!(sent.delivered);
    let c = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c.job.id.as_str(), "step");
    assert_eq!(c.job.attempts, 1, "the suspended attempt spent nothing");
    let got = store.received_signal(&id("step")).await.unwrap().unwrap();
    assert_eq!(got.payload.unwrap().as_str(), "true");

    // A signal kept while it runs is taken by its next wait of that name.
    let early = signal("step", "second")
        .with_payload_text(r#"{"n":2}"#)
        .unwrap()
        .buffered();
    let kept = store.signal(&early).await.unwrap();
    assert!(!kept.delivered);
    assert_eq!(kept.job.state, JobState::Running);
    let again = store
        .suspend(&c.lease, &errand_core::Await::new("second").unwrap())
        .await
        .unwrap();
    assert_eq!(
        again.state,
        JobState::Ready,
        "the kept signal is taken at once"
    );
    let c = claim_one(store.as_ref(), LEASE).await;
    let got = store.received_signal(&id("step")).await.unwrap().unwrap();
    assert_eq!(got.name.as_str(), "second");
    assert_eq!(got.payload.unwrap().as_str(), r#"{"n":2}"#);
    store.complete(&c.lease).await.unwrap();

    let detail = admin(&store).detail(&id("step")).await.unwrap();
    let outcomes: Vec<Option<&str>> = detail
        .history
        .iter()
        .map(|a| a.outcome.as_deref())
        .collect();
    assert_eq!(
        outcomes,
        [Some("awaiting"), Some("awaiting"), Some("succeeded")]
    );
    assert!(detail.signals.iter().all(|s| s.delivered_at.is_some()));
    refused(
        store.signal(&signal("step", "second").buffered()).await,
        "done",
    );
}
