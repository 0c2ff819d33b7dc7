//! The conformance cases, one rule each.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    CancelRequest, ClaimRequest, Clock, Error, ErrorClass, Failure, JobFilter, JobId, JobState,
    KeyLimit, Lease, ManualClock, Name, NewJob, Payload, ReplayRequest, RetryAt, Schedule, Store,
};

use crate::{
    admin, assert_lease_lost, claim_one, claim_req, forged, get, job, reclaim_req, retry_after,
};

const LEASE: Duration = Duration::from_secs(1);
const MS: Duration = Duration::from_millis(1);

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// Stable identity: the id given is the id kept; a new job is ready with no
/// attempts.
pub async fn insert_returns_a_ready_job_with_a_stable_id(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let ins = store.insert(job("a")).await.unwrap();
    assert!(ins.created);
    assert_eq!(ins.job.id, id("a"));
    assert_eq!(ins.job.state, JobState::Ready);
    assert_eq!(ins.job.attempts, 0);
    assert_eq!(ins.job.replays, 0);
    assert_eq!(ins.job.available_at, clock.now_ts());
    let generated = store
        .insert(errand_core::NewJob::new("test", Default::default()).unwrap())
        .await
        .unwrap();
    let again = store
        .insert(errand_core::NewJob::new("test", Default::default()).unwrap())
        .await
        .unwrap();
    assert_ne!(generated.job.id, again.job.id, "generated ids must differ");
}

/// Inserting an existing id returns the existing job and creates nothing,
/// even with a different payload.
pub async fn inserting_an_existing_id_returns_the_existing_job_and_creates_nothing(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let first = store.insert(job("pay-1")).await.unwrap();
    let mut other = job("pay-1");
    other.payload = errand_core::Payload::from_json_text(r#"{"different":true}"#).unwrap();
    let second = store.insert(other).await.unwrap();
    assert!(!second.created);
    assert_eq!(second.job, first.job);
    let all = store.list(&JobFilter::default()).await.unwrap();
    assert_eq!(all.len(), 1);
    // Also after the job has moved on.
    let c = claim_one(store.as_ref(), LEASE).await;
    store.complete(&c.lease).await.unwrap();
    let third = store.insert(job("pay-1")).await.unwrap();
    assert!(!third.created);
    assert_eq!(third.job.state, JobState::Done);
}

/// `insert_many` inserts each job once and reports which were created.
pub async fn insert_many_is_all_or_nothing_per_call(store: Arc<dyn Store>, _clock: ManualClock) {
    store.insert(job("m1")).await.unwrap();
    let res = store
        .insert_many(vec![job("m1"), job("m2"), job("m3")])
        .await
        .unwrap();
    let created: Vec<bool> = res.iter().map(|r| r.created).collect();
    assert_eq!(created, vec![false, true, true]);
    let mut bad = job("m4");
    bad.max_attempts = 0;
    assert!(store.insert_many(vec![job("m5"), bad]).await.is_err());
    assert!(matches!(
        store.get(&id("m5")).await,
        Err(Error::NotFound(_))
    ));
}

/// One `insert_many` call keeps every field of every job, answers in input
/// order, creates a repeated id once (the first occurrence; the repeat gets
/// that job back), keeps an existing job untouched, and stores a key's jobs
/// in input order: an ordered key runs them in that order.
pub async fn insert_many_keeps_each_job_in_input_order(store: Arc<dyn Store>, clock: ManualClock) {
    store.insert(job("old")).await.unwrap();
    let ordered = |name: &str| job(name).with_key("k", KeyLimit::Ordered).unwrap();
    let special = job("special")
        .with_priority(-7)
        .with_max_attempts(3)
        .unwrap()
        .give_up_after(Duration::from_secs(60))
        .scheduled(Schedule::After(Duration::from_secs(5)))
        .with_deadline(crate::T0.plus(Duration::from_secs(3600)))
        .with_traceparent(crate::admin::trace());
    let mut again = job("o2");
    again.payload = Payload::from_json_text(r#"{"n":"second"}"#).unwrap();
    let res = store
        .insert_many(vec![
            ordered("o2"),
            job("old"),
            ordered("o1"),
            special,
            again,
            ordered("o3"),
        ])
        .await
        .unwrap();
    let got: Vec<(&str, bool)> = res.iter().map(|r| (r.job.id.as_str(), r.created)).collect();
    assert_eq!(
        got,
        vec![
            ("o2", true),
            ("old", false),
            ("o1", true),
            ("special", true),
            ("o2", false),
            ("o3", true)
        ]
    );
    for r in &res {
        assert_eq!(
            r.job,
            store.get(&r.job.id).await.unwrap(),
            "the job insert_many returned is the stored one"
        );
    }
    assert_eq!(res[3].job.traceparent, Some(crate::admin::trace()));
    assert_eq!(
        res[3].job.deadline,
        Some(crate::T0.plus(Duration::from_secs(3600)))
    );
    let n = |p: &Payload| p.as_str().to_owned(); // stored as the text given
    assert_eq!(
        n(&res[4].job.payload),
        r#"{"n":"o2"}"#,
        "the first o2 stays"
    );
    let s = &res[3].job;
    let now = clock.now();
    assert_eq!(
        (s.priority, s.max_attempts, s.give_up_at, s.available_at),
        (
            -7,
            3,
            Some(now.plus(Duration::from_secs(60))),
            now.plus(Duration::from_secs(5))
        )
    );
    assert_eq!(n(&s.payload), r#"{"n":"special"}"#);
    assert_eq!(n(&get(store.as_ref(), "o2").await.payload), r#"{"n":"o2"}"#);
    // The ordered key runs o2, o1, o3: the batch's order, not the ids'.
    let rounds = keyed_runs(store.as_ref(), 3, 10).await;
    let mut ran = Vec::new();
    for keyed in rounds {
        assert_eq!(keyed.len(), 1, "an ordered key runs one job at a time");
        ran.extend(keyed);
    }
    assert_eq!(ran, vec!["o2", "o1", "o3"]);
}

/// A key's jobs start in the order given even when one of them waits for
/// another job of the same call: here `c`, given before `a` on one ordered
/// key, runs first once its dependency is done and both are due — whatever
/// order a store writes the call's rows in.
pub async fn a_keys_jobs_keep_input_order_across_dependencies(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let ordered = |name: &str| job(name).with_key("kd", KeyLimit::Ordered).unwrap();
    store
        .insert_many(vec![
            job("kd-p"),
            ordered("kd-c").depends_on(id("kd-p")),
            ordered("kd-a").scheduled(Schedule::After(Duration::from_secs(3600))),
        ])
        .await
        .unwrap();
    // kd-p runs and releases kd-c; kd-a is not due yet.
    assert_eq!(
        keyed_runs(store.as_ref(), 1, 10).await,
        vec![Vec::<String>::new()]
    );
    assert_eq!(get(store.as_ref(), "kd-c").await.state, JobState::Ready);
    clock.advance(Duration::from_secs(7200));
    assert_eq!(
        keyed_runs(store.as_ref(), 2, 10).await,
        vec![vec!["kd-c".to_owned()], vec!["kd-a".to_owned()]]
    );
}

/// Claims (up to `limit`) and acknowledges everything due, `rounds` times;
/// returns the keyed jobs each round started.
async fn keyed_runs(store: &dyn Store, rounds: usize, limit: u32) -> Vec<Vec<String>> {
    let mut out = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let claimed = store
            .claim(&ClaimRequest {
                queues: vec![],
                limit,
                lease: LEASE,
                rate: None,
                reclaim: true,
            })
            .await
            .unwrap();
        out.push(
            claimed
                .iter()
                .filter(|c| c.job.key.is_some())
                .map(|c| c.job.id.as_str().to_owned())
                .collect(),
        );
        let leases: Vec<Lease> = claimed.iter().map(|c| c.lease.clone()).collect();
        store.complete_many(&leases).await.unwrap();
    }
    out
}

/// A batch larger than a backend's statement (SQLite binds 256 jobs per
/// statement, PostgreSQL sends 1,000 per statement) is still one atomic
/// call in input order: an id repeated across statements is created at
/// its first occurrence, and an ordered key spread over them runs in
/// input order.
pub async fn a_large_insert_many_spans_statements_in_input_order(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let mut jobs = Vec::new();
    for i in 0..2_500 {
        let name = format!("big-{i:04}");
        let job = job(&name);
        // Every 600th job is on one ordered key, in descending id order so
        // that id order and input order disagree.
        if i % 600 == 0 {
            let keyed = JobId::new(format!("key-{:04}", 9_999 - i)).unwrap();
            jobs.push(job.with_id(keyed).with_key("k", KeyLimit::Ordered).unwrap());
        } else {
            jobs.push(job);
        }
    }
    let mut again = job("big-0010");
    again.payload = Payload::from_json_text(r#"{"n":"later"}"#).unwrap();
    jobs.push(again);
    let res = store.insert_many(jobs.clone()).await.unwrap();
    assert_eq!(res.len(), 2_501);
    for (r, j) in res.iter().zip(&jobs) {
        assert_eq!(Some(&r.job.id), j.id.as_ref(), "answers in input order");
    }
    assert!(res[..2_500].iter().all(|r| r.created));
    assert!(!res[2_500].created, "the repeat finds the first");
    assert!(!res[2_500].job.payload.as_str().contains("later"));
    // A failing job anywhere fails the whole call: nothing of it is kept.
    let mut bad: Vec<NewJob> = (0..2_000).map(|i| job(&format!("bad-{i:04}"))).collect();
    bad[1_500].max_attempts = 0;
    assert!(store.insert_many(bad).await.is_err());
    assert!(matches!(
        store.get(&id("bad-0000")).await,
        Err(Error::NotFound(_))
    ));
    // The keyed jobs run one at a time in input order.
    let ran: Vec<String> = keyed_runs(store.as_ref(), 5, 3_000)
        .await
        .into_iter()
        .flatten()
        .collect();
    assert_eq!(
        ran,
        vec!["key-9999", "key-9399", "key-8799", "key-8199", "key-7599"]
    );
}

/// A claim increments attempts, writes a fresh 128-bit token and
/// `lease_until = now + lease`.
pub async fn claim_increments_attempts_and_writes_a_fresh_token_and_lease(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    let c1 = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c1.job.state, JobState::Running);
    assert_eq!(c1.job.attempts, 1);
    assert_eq!(c1.lease.attempt, 1);
    assert_eq!(c1.job.lease_until, Some(clock.now_ts().plus(LEASE)));
    assert_eq!(c1.lease.token.as_str().len(), 32);
    clock.advance(LEASE);
    let c2 = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c2.job.attempts, 2);
    assert_ne!(c1.lease.token, c2.lease.token);
    assert_eq!(get(store.as_ref(), "a").await.attempts, 2);
}

/// A job not yet due is never claimed, by a millisecond.
pub async fn a_job_not_yet_due_is_never_claimed(store: Arc<dyn Store>, clock: ManualClock) {
    store
        .insert(job("later").scheduled(Schedule::After(Duration::from_secs(10))))
        .await
        .unwrap();
    let at = clock.now_ts().plus(Duration::from_secs(30));
    store
        .insert(job("at").scheduled(Schedule::At(at)))
        .await
        .unwrap();
    assert!(store.claim(&claim_req(10, LEASE)).await.unwrap().is_empty());
    clock.advance(Duration::from_secs(10) - MS);
    assert!(store.claim(&claim_req(10, LEASE)).await.unwrap().is_empty());
    clock.advance(MS);
    let got = store.claim(&claim_req(10, LEASE)).await.unwrap();
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].job.id, id("later"));
    clock.set(at.minus(MS));
    assert!(
        store
            .claim(&claim_req(10, LEASE))
            .await
            .unwrap()
            .iter()
            .all(|c| c.job.id != id("at"))
    );
    clock.set(at);
    let got = store
        .claim(&claim_req(10, Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(got.iter().any(|c| c.job.id == id("at")));
}

/// A claim never returns more than its limit.
pub async fn claim_never_returns_more_than_its_limit(store: Arc<dyn Store>, _clock: ManualClock) {
    for i in 0..10 {
        store.insert(job(&format!("j{i}"))).await.unwrap();
    }
    assert_eq!(store.claim(&claim_req(3, LEASE)).await.unwrap().len(), 3);
    assert_eq!(store.claim(&claim_req(0, LEASE)).await.unwrap().len(), 0);
    assert_eq!(store.claim(&claim_req(100, LEASE)).await.unwrap().len(), 7);
    assert!(
        store
            .claim(&claim_req(100, LEASE))
            .await
            .unwrap()
            .is_empty()
    );
}

/// Concurrent claims never hand out the same attempt twice.
pub async fn two_concurrent_claims_never_hold_the_same_attempt(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    for i in 0..50 {
        store.insert(job(&format!("c{i}"))).await.unwrap();
    }
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut mine = Vec::new();
            loop {
                let got = s.claim(&claim_req(3, LEASE)).await.unwrap();
                if got.is_empty() {
                    return mine;
                }
                mine.extend(got.into_iter().map(|c| (c.job.id, c.lease.attempt)));
            }
        }));
    }
    let mut seen = HashSet::new();
    for t in tasks {
        for pair in t.await.unwrap() {
            assert!(seen.insert(pair.clone()), "attempt claimed twice: {pair:?}");
        }
    }
    assert_eq!(seen.len(), 50);
    assert!(seen.iter().all(|(_, attempt)| *attempt == 1));
}

/// Claims take only the named queues, and higher priority first.
pub async fn claims_respect_queues_and_priority(store: Arc<dyn Store>, _clock: ManualClock) {
    store.insert(job("low")).await.unwrap();
    store.insert(job("high").with_priority(5)).await.unwrap();
    store
        .insert(job("other").on_queue("mail").unwrap())
        .await
        .unwrap();
    let req = ClaimRequest {
        queues: vec![Name::parse("queue", "default").unwrap()],
        limit: 1,
        lease: LEASE,
        rate: None,
        reclaim: true,
    };
    let first = store.claim(&req).await.unwrap();
    assert_eq!(first[0].job.id, id("high"));
    let second = store.claim(&req).await.unwrap();
    assert_eq!(second[0].job.id, id("low"));
    assert!(store.claim(&req).await.unwrap().is_empty());
    let mail = ClaimRequest {
        queues: vec![Name::parse("queue", "mail").unwrap()],
        ..req
    };
    assert_eq!(store.claim(&mail).await.unwrap()[0].job.id, id("other"));
}

/// Claimed at t0, reclaimed at exactly t0 + lease: the old token's ack is
/// refused and the new owner's state is untouched.
pub async fn ack_with_the_old_token_after_a_reclaim_at_exactly_the_lease_end_is_refused(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    let old = claim_one(store.as_ref(), LEASE).await;
    clock.advance(LEASE);
    let new = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(new.lease.attempt, 2);
    assert_lease_lost(store.complete(&old.lease).await);
    let j = get(store.as_ref(), "a").await;
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.attempts, 2);
    assert_eq!(j.lease_until, Some(clock.now_ts().plus(LEASE)));
    let done = store.complete(&new.lease).await.unwrap();
    assert_eq!(done.state, JobState::Done);
}

/// A matching token whose lease expired (not yet reclaimed) is refused: the
/// token alone is not proof of ownership.
pub async fn a_matching_token_whose_lease_expired_unreclaimed_is_refused(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    clock.advance(LEASE - MS);
    // Still valid a millisecond before the end: a forged token is refused.
    assert_lease_lost(store.complete(&forged(&c.lease)).await);
    clock.advance(MS);
    assert_lease_lost(store.complete(&c.lease).await);
    assert_lease_lost(store.fail(&c.lease, retry_after("late", LEASE)).await);
    assert_lease_lost(store.snooze(&c.lease, LEASE).await);
    assert_lease_lost(store.release(&c.lease).await);
    assert_lease_lost(store.cancel_running(&c.lease, "late").await);
    let j = get(store.as_ref(), "a").await;
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.attempts, 1);
    assert_eq!(j.last_error, None);
}

/// A stale worker's failure report does not overwrite the new owner.
pub async fn a_stale_fail_is_refused(store: Arc<dyn Store>, clock: ManualClock) {
    store.insert(job("a")).await.unwrap();
    let old = claim_one(store.as_ref(), LEASE).await;
    clock.advance(Duration::from_secs(2));
    let new = claim_one(store.as_ref(), LEASE).await;
    let permanent = Failure {
        error: "stale".into(),
        class: ErrorClass::Permanent,
        retry: None,
    };
    assert_lease_lost(store.fail(&old.lease, permanent).await);
    let j = get(store.as_ref(), "a").await;
    assert_eq!(j.state, JobState::Running);
    assert_eq!(j.last_error, None);
    store.complete(&new.lease).await.unwrap();
}

/// Heartbeat extends a live lease from now; after expiry it is lease lost.
pub async fn heartbeat_extends_a_live_lease_and_refuses_an_expired_one(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    clock.advance(Duration::from_millis(900));
    let until = store.heartbeat(&c.lease, LEASE).await.unwrap();
    assert_eq!(until, clock.now_ts().plus(LEASE));
    clock.advance(Duration::from_millis(900));
    // Past the original lease, inside the renewed one: nobody can reclaim.
    assert!(store.claim(&claim_req(1, LEASE)).await.unwrap().is_empty());
    assert_lease_lost(store.heartbeat(&forged(&c.lease), LEASE).await);
    clock.advance(Duration::from_millis(100));
    assert_lease_lost(store.heartbeat(&c.lease, LEASE).await);
}

/// A lease renewal may carry the handler's progress: stored with the job
/// under the attempt's own number (whatever the report said), kept by
/// plain renewals, replaced by the next report (a percentage over 100
/// counts as 100); a renewal refused by the fence stores nothing.
pub async fn a_renewal_carries_the_handlers_progress(store: Arc<dyn Store>, _clock: ManualClock) {
    use errand_core::Progress;
    store.insert(job("p")).await.unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(crate::get(store.as_ref(), "p").await.progress, None);
    let report = Progress::new(40, Some("copying rows".into()), 99);
    store
        .heartbeat_with_progress(&c.lease, LEASE, &report)
        .await
        .unwrap();
    let p = crate::get(store.as_ref(), "p").await.progress.unwrap();
    assert_eq!(
        (p.percent, p.message.as_deref(), p.attempt),
        (40, Some("copying rows"), 1)
    );
    store.heartbeat(&c.lease, LEASE).await.unwrap();
    let kept = crate::get(store.as_ref(), "p").await.progress.unwrap();
    assert_eq!(kept, p, "a plain renewal keeps the last report");
    store
        .heartbeat_with_progress(&c.lease, LEASE, &Progress::new(250, None, 1))
        .await
        .unwrap();
    let p = crate::get(store.as_ref(), "p").await.progress.unwrap();
    assert_eq!((p.percent, p.message), (100, None));
    assert_lease_lost(
        store
            .heartbeat_with_progress(&forged(&c.lease), LEASE, &Progress::new(5, None, 1))
            .await,
    );
    let p = crate::get(store.as_ref(), "p").await.progress.unwrap();
    assert_eq!(p.percent, 100, "a refused renewal stores nothing");
    // A replay starts the attempts again from 1: the old report would
    // pass for the new cycle's, so it goes.
    let failure = Failure {
        error: "gave up".into(),
        class: ErrorClass::Permanent,
        retry: None,
    };
    store.fail(&c.lease, failure).await.unwrap();
    assert!(crate::get(store.as_ref(), "p").await.progress.is_some());
    crate::admin(&store)
        .replay_jobs(&replay_req(&["p"]))
        .await
        .unwrap();
    assert_eq!(crate::get(store.as_ref(), "p").await.progress, None);
}

/// A running job whose final attempt's lease expired becomes dead (reason:
/// An expired lease is taken back only by a claim that asks to reclaim:
/// one that does not claims the ready jobs and leaves the expired one
/// running, and the next reclaiming claim takes it first, as a new attempt.
pub async fn only_a_reclaiming_claim_takes_back_an_expired_lease(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store.insert(job("old")).await.unwrap();
    let first = claim_one(store.as_ref(), LEASE).await;
    clock.advance(LEASE);
    store.insert(job("new")).await.unwrap();
    let plain = store.claim(&claim_req(5, LEASE)).await.unwrap();
    let ids: Vec<&str> = plain.iter().map(|c| c.job.id.as_str()).collect();
    assert_eq!(ids, ["new"]);
    let old = get(store.as_ref(), "old").await;
    assert_eq!(old.state, JobState::Running);
    assert_eq!(old.attempts, 1);
    assert_eq!(old.lease_until, first.job.lease_until);
    store.insert(job("newer")).await.unwrap();
    let again = store.claim(&reclaim_req(5, LEASE)).await.unwrap();
    let ids: Vec<&str> = again.iter().map(|c| c.job.id.as_str()).collect();
    assert_eq!(ids, ["old", "newer"], "reclaimed leases come first");
    assert_eq!(again[0].lease.attempt, 2);
    assert_ne!(again[0].lease.token, first.lease.token);
}

/// lease expired) at the next claim, instead of staying running.
pub async fn an_expired_final_attempt_dies_at_the_next_claim(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store
        .insert(job("a").with_max_attempts(1).unwrap())
        .await
        .unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    clock.advance(LEASE);
    // A claim that does not look at expired leases leaves it running.
    assert!(store.claim(&claim_req(5, LEASE)).await.unwrap().is_empty());
    assert_eq!(get(store.as_ref(), "a").await.state, JobState::Running);
    assert!(
        store
            .claim(&reclaim_req(5, LEASE))
            .await
            .unwrap()
            .is_empty()
    );
    let j = get(store.as_ref(), "a").await;
    assert_eq!(j.state, JobState::Dead);
    assert_eq!(j.last_error_class, Some(ErrorClass::LeaseExpired));
    assert!(j.last_error.unwrap_or_default().contains("lease expired"));
    assert_eq!(j.finished_at, Some(clock.now_ts()));
    assert_eq!(j.lease_until, None);
    assert_lease_lost(store.complete(&c.lease).await);
}

/// The maintenance sweep kills expired final attempts — and leaves live
/// leases and expired non-final attempts alone.
pub async fn the_sweep_kills_expired_final_attempts_and_nothing_else(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store
        .insert(job("final").with_max_attempts(1).unwrap())
        .await
        .unwrap();
    store
        .insert(job("more").with_max_attempts(3).unwrap())
        .await
        .unwrap();
    store.claim(&claim_req(2, LEASE)).await.unwrap();
    store
        .insert(job("live").with_max_attempts(1).unwrap())
        .await
        .unwrap();
    clock.advance(LEASE - MS);
    store
        .claim(&claim_req(1, Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(store.sweep_expired().await.unwrap().dead.is_empty());
    clock.advance(MS);
    let report = store.sweep_expired().await.unwrap();
    assert_eq!(report.dead, vec![id("final")]);
    assert_eq!(get(store.as_ref(), "final").await.state, JobState::Dead);
    assert_eq!(get(store.as_ref(), "more").await.state, JobState::Running);
    assert_eq!(get(store.as_ref(), "live").await.state, JobState::Running);
    assert!(store.sweep_expired().await.unwrap().dead.is_empty());
}

/// Regression (found by the model test): the sweep reported dead jobs in
/// the database's RETURNING order on SQLite; it reports them in id order.
pub async fn the_sweep_reports_dead_jobs_in_id_order(store: Arc<dyn Store>, clock: ManualClock) {
    for name in ["zulu", "alpha", "mike"] {
        store
            .insert(job(name).with_max_attempts(1).unwrap())
            .await
            .unwrap();
    }
    assert_eq!(store.claim(&claim_req(3, LEASE)).await.unwrap().len(), 3);
    clock.advance(LEASE);
    let dead = store.sweep_expired().await.unwrap().dead;
    assert_eq!(dead, vec![id("alpha"), id("mike"), id("zulu")]);
}

/// The lost-lease budget: a job whose lease keeps expiring — its worker
/// dies every time — is quarantined as dead (class lost_lease) after N
/// expiries, although attempts remain. Settled attempts do not count.
pub async fn a_job_that_keeps_losing_its_lease_is_quarantined(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let j = job("poison")
        .with_max_attempts(10)
        .unwrap()
        .with_max_lease_expiries(3)
        .unwrap();
    store.insert(j).await.unwrap();
    // A settled failure does not count against the lost-lease budget.
    let c = claim_one(store.as_ref(), LEASE).await;
    store
        .fail(&c.lease, retry_after("ordinary failure", MS))
        .await
        .unwrap();
    clock.advance(MS);
    for expiries in 0..3u32 {
        let c = claim_one(store.as_ref(), LEASE).await;
        assert_eq!(c.job.lease_expiries, expiries);
        clock.advance(LEASE); // the worker died
    }
    // The third expiry spends the budget: no reclaim, dead.
    assert!(
        store
            .claim(&reclaim_req(1, LEASE))
            .await
            .unwrap()
            .is_empty()
    );
    let j = get(store.as_ref(), "poison").await;
    assert_eq!(j.state, JobState::Dead);
    assert_eq!(j.last_error_class, Some(ErrorClass::LostLease));
    assert!(j.last_error.unwrap_or_default().contains("expired 3 times"));
    assert_eq!((j.attempts, j.lease_expiries), (4, 3));
    // Replay resets the budget.
    let j = admin(&store)
        .replay_jobs(&replay_req(&["poison"]))
        .await
        .unwrap()
        .remove(0);
    assert_eq!((j.attempts, j.lease_expiries), (0, 0));
}

/// The sweep applies the lost-lease budget too.
pub async fn the_sweep_quarantines_a_job_out_of_lease_budget(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store
        .insert(job("p").with_max_lease_expiries(1).unwrap())
        .await
        .unwrap();
    claim_one(store.as_ref(), LEASE).await;
    clock.advance(LEASE);
    assert_eq!(store.sweep_expired().await.unwrap().dead, vec![id("p")]);
    assert_eq!(
        get(store.as_ref(), "p").await.last_error_class,
        Some(ErrorClass::LostLease)
    );
}

/// The elapsed-time budget: a failure whose retry would fall after it goes
/// dead, with the reason in the error.
pub async fn the_elapsed_time_budget_stops_retries(store: Arc<dyn Store>, clock: ManualClock) {
    let budget = Duration::from_secs(10);
    store.insert(job("a").give_up_after(budget)).await.unwrap();
    let j = get(store.as_ref(), "a").await;
    assert_eq!(j.give_up_at, Some(clock.now_ts().plus(budget)));
    let c = claim_one(store.as_ref(), LEASE).await;
    let j = store
        .fail(
            &c.lease,
            retry_after("slow provider", Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(j.state, JobState::Ready, "t0+5s is inside the budget");
    clock.advance(Duration::from_secs(6));
    let c = claim_one(store.as_ref(), LEASE).await;
    let j = store
        .fail(
            &c.lease,
            retry_after("slow provider", Duration::from_secs(5)),
        )
        .await
        .unwrap();
    assert_eq!(j.state, JobState::Dead, "t0+11s is past the budget");
    assert!(
        j.last_error
            .unwrap_or_default()
            .contains("elapsed-time budget")
    );
}

/// Retention deletes done and cancelled jobs past the age, in bounded
/// batches, and never a dead, ready or running one.
pub async fn retention_prunes_old_finished_jobs_and_keeps_dead_ones(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let day = Duration::from_secs(86_400);
    for name in ["done1", "done2", "gone", "dead", "live", "recent"] {
        store
            .insert(job(name).with_max_attempts(1).unwrap())
            .await
            .unwrap();
    }
    let claimed = store.claim(&claim_req(4, LEASE)).await.unwrap();
    for c in &claimed {
        match c.job.id.as_str() {
            "done1" | "done2" => drop(store.complete(&c.lease).await.unwrap()),
            "dead" => drop(store.fail(&c.lease, retry_after("x", MS)).await.unwrap()),
            "gone" => drop(store.cancel_running(&c.lease, "not wanted").await.unwrap()),
            other => panic!("unexpected claim of {other}"),
        }
    }
    clock.advance(8 * day);
    let c = claim_one(store.as_ref(), LEASE).await; // "live": running now
    assert_eq!(c.job.id.as_str(), "live");
    let r = claim_one(store.as_ref(), LEASE).await;
    store.complete(&r.lease).await.unwrap(); // "recent": done just now
    assert_eq!(
        store.prune(7 * day, 2).await.unwrap(),
        2,
        "bounded by the limit"
    );
    assert_eq!(store.prune(7 * day, 100).await.unwrap(), 1);
    assert_eq!(store.prune(7 * day, 100).await.unwrap(), 0);
    let left: Vec<String> = store
        .list(&JobFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id.to_string())
        .collect();
    assert_eq!(left, vec!["dead", "live", "recent"]);
    assert!(matches!(
        store.detail(&id("done1")).await,
        Err(Error::NotFound(_))
    ));
}

/// Batched acknowledgment fences every job by its own token and lease.
pub async fn complete_many_fences_each_job_individually(store: Arc<dyn Store>, clock: ManualClock) {
    for name in ["b1", "b2", "b3"] {
        store.insert(job(name)).await.unwrap();
    }
    let first = store.claim(&claim_req(3, LEASE)).await.unwrap();
    clock.advance(LEASE);
    // b1 is reclaimed by another worker; b2 is reclaimed and given back;
    // b3's lease expired and nobody reclaimed it.
    let reclaimed = store.claim(&reclaim_req(1, LEASE)).await.unwrap().remove(0);
    assert_eq!(reclaimed.job.id.as_str(), "b1");
    let renewed = store.claim(&reclaim_req(1, LEASE)).await.unwrap().remove(0);
    assert_eq!(renewed.job.id.as_str(), "b2");
    store.release(&renewed.lease).await.unwrap();
    let mut leases: Vec<Lease> = first.iter().map(|c| c.lease.clone()).collect();
    leases.push(reclaimed.lease.clone());
    leases.push(forged(&reclaimed.lease));
    let acked = store.complete_many(&leases).await.unwrap();
    // b1 (stale), b2 (stale), b3 (expired, unreclaimed), b1 (current), forged.
    assert_eq!(acked, vec![false, false, false, true, false]);
    assert_eq!(get(store.as_ref(), "b1").await.state, JobState::Done);
    assert_eq!(get(store.as_ref(), "b2").await.state, JobState::Ready);
    assert_eq!(get(store.as_ref(), "b3").await.state, JobState::Running);
    assert!(store.complete_many(&[]).await.unwrap().is_empty());

    // One claimed batch acknowledged together: an expired lease (c3, not
    // renewed) and a wrong token (c4's) among live leases refuse only
    // their own jobs; every other job is acknowledged.
    let queue = || ClaimRequest {
        queues: vec![Name::parse("queue", "batch").unwrap()],
        limit: 5,
        lease: LEASE,
        rate: None,
        reclaim: true,
    };
    for name in ["c1", "c2", "c3", "c4", "c5"] {
        store
            .insert(job(name).on_queue("batch").unwrap())
            .await
            .unwrap();
    }
    let claimed = store.claim(&queue()).await.unwrap();
    let names: Vec<&str> = claimed.iter().map(|c| c.job.id.as_str()).collect();
    assert_eq!(names, ["c1", "c2", "c3", "c4", "c5"]);
    clock.advance(LEASE / 2);
    for c in claimed.iter().filter(|c| c.job.id.as_str() != "c3") {
        store.heartbeat(&c.lease, LEASE).await.unwrap();
    }
    clock.advance(LEASE / 2); // c3's lease ends now; the others' live on
    let mut leases: Vec<Lease> = claimed.iter().map(|c| c.lease.clone()).collect();
    leases[3] = forged(&claimed[3].lease);
    let acked = store.complete_many(&leases).await.unwrap();
    assert_eq!(acked, vec![true, true, false, false, true]);
    for (name, state) in [
        ("c1", JobState::Done),
        ("c2", JobState::Done),
        ("c3", JobState::Running),
        ("c4", JobState::Running),
        ("c5", JobState::Done),
    ] {
        assert_eq!(get(store.as_ref(), name).await.state, state, "{name}");
    }
    // The refused jobs are untouched: c4's holder still settles it, and c3
    // is reclaimed as its next attempt.
    assert_eq!(
        store.complete(&claimed[3].lease).await.unwrap().state,
        JobState::Done
    );
    let again = store.claim(&queue()).await.unwrap();
    assert_eq!(again.len(), 1);
    assert_eq!(
        (again[0].job.id.as_str(), again[0].lease.attempt),
        ("c3", 2)
    );
    assert_eq!(
        store
            .complete_many(&[again[0].lease.clone()])
            .await
            .unwrap(),
        vec![true]
    );
}

/// A batch that names the same job more than once settles as if its
/// leases came one after another: a forged token is refused, the live
/// lease acknowledges the job once, and its repeat finds it done.
pub async fn complete_many_with_a_job_listed_twice_acknowledges_it_once(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    store.insert(job("b")).await.unwrap();
    let a = claim_one(store.as_ref(), LEASE).await;
    let b = claim_one(store.as_ref(), LEASE).await;
    let acked = store
        .complete_many(&[
            forged(&a.lease),
            a.lease.clone(),
            b.lease.clone(),
            a.lease.clone(),
        ])
        .await
        .unwrap();
    assert_eq!(acked, vec![false, true, true, false]);
    assert_eq!(get(store.as_ref(), "a").await.state, JobState::Done);
    assert_eq!(get(store.as_ref(), "b").await.state, JobState::Done);
}

/// `complete_and_claim` acknowledges exactly like `complete_many` (each
/// lease fenced on its own) and claims like `claim`: the acknowledged job
/// is done, the forged one untouched and not claimable under its live
/// lease, and the claim takes what is due.
pub async fn complete_and_claim_settles_one_batch_and_claims_the_next(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    store.insert(job("b")).await.unwrap();
    let a = claim_one(store.as_ref(), LEASE).await;
    let b = claim_one(store.as_ref(), LEASE).await;
    store.insert(job("c")).await.unwrap();
    store.insert(job("d")).await.unwrap();
    let req = ClaimRequest {
        queues: vec![],
        limit: 1,
        lease: LEASE,
        rate: None,
        reclaim: true,
    };
    let (acked, claimed) = store
        .complete_and_claim(&[a.lease.clone(), forged(&b.lease)], &req)
        .await
        .unwrap();
    assert_eq!(acked, vec![true, false]);
    let claimed = claimed.unwrap();
    assert_eq!(claimed.len(), 1, "the claim's limit holds");
    assert_eq!(claimed[0].job.id.as_str(), "c");
    assert_eq!(claimed[0].lease.attempt, 1);
    assert_eq!(get(store.as_ref(), "a").await.state, JobState::Done);
    assert_eq!(get(store.as_ref(), "b").await.state, JobState::Running);
    // b's real lease still settles it; with nothing to acknowledge the
    // call is a plain claim.
    store.complete(&b.lease).await.unwrap();
    let (acked, claimed) = store.complete_and_claim(&[], &req).await.unwrap();
    assert!(acked.is_empty());
    let claimed = claimed.unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].job.id.as_str(), "d");
    // The claimed job's lease is a real one.
    store.complete(&claimed[0].lease).await.unwrap();
    let (_, nothing) = store.complete_and_claim(&[], &req).await.unwrap();
    assert!(nothing.unwrap().is_empty());
}

/// A shared token bucket: starts full, refills on the store's clock at its
/// rate, never beyond its burst, and grants no more than it holds.
pub async fn the_rate_limit_bucket_refills_at_its_rate_up_to_its_burst(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let bucket = errand_core::RateBucket::queue(&Name::parse("queue", "mail").unwrap());
    let rate = errand_core::RateLimit {
        per_second: 2.0,
        burst: 5,
    };
    assert_eq!(
        store.take_tokens(&bucket, rate, 10).await.unwrap(),
        5,
        "a new bucket is full"
    );
    assert_eq!(store.take_tokens(&bucket, rate, 1).await.unwrap(), 0);
    clock.advance(Duration::from_millis(499));
    assert_eq!(
        store.take_tokens(&bucket, rate, 1).await.unwrap(),
        0,
        "0.998 tokens are not one"
    );
    clock.advance(Duration::from_millis(1));
    assert_eq!(store.take_tokens(&bucket, rate, 1).await.unwrap(), 1);
    clock.advance(Duration::from_secs(1));
    assert_eq!(store.take_tokens(&bucket, rate, 10).await.unwrap(), 2);
    clock.advance(Duration::from_secs(3600));
    assert_eq!(
        store.take_tokens(&bucket, rate, 10).await.unwrap(),
        5,
        "capped at the burst"
    );
    let other = errand_core::RateBucket::queue(&Name::parse("queue", "sms").unwrap());
    assert_eq!(
        store.take_tokens(&other, rate, 3).await.unwrap(),
        3,
        "buckets are separate"
    );
    let bad = errand_core::RateLimit {
        per_second: 0.0,
        burst: 1,
    };
    assert!(matches!(
        store.take_tokens(&bucket, bad, 1).await,
        Err(Error::Invalid(_))
    ));
}

/// A retryable failure returns the job to ready with a persisted future due
/// time; it is not claimable a millisecond before.
pub async fn a_retryable_failure_persists_its_due_time(store: Arc<dyn Store>, clock: ManualClock) {
    store.insert(job("a")).await.unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    let delay = Duration::from_millis(375);
    let j = store
        .fail(&c.lease, retry_after("receipt_unavailable", delay))
        .await
        .unwrap();
    assert_eq!(j.state, JobState::Ready);
    assert_eq!(j.available_at, clock.now_ts().plus(delay));
    assert_eq!(j.last_error.as_deref(), Some("receipt_unavailable"));
    assert_eq!(j.last_error_class, Some(ErrorClass::Retryable));
    assert_eq!(j.lease_until, None);
    assert_eq!(get(store.as_ref(), "a").await, j);
    clock.advance(delay - MS);
    assert!(store.claim(&claim_req(1, LEASE)).await.unwrap().is_empty());
    clock.advance(MS);
    assert_eq!(claim_one(store.as_ref(), LEASE).await.lease.attempt, 2);
}

/// Failures recorded together are each fenced by their own token and lease
/// and judged exactly as one recorded alone: a retry while attempts remain,
/// dead on the last attempt, past the elapsed-time budget or when
/// permanent, and nothing changed where the lease is not the job's; the
/// history gets one entry per recorded failure, and the answer keeps the
/// input's order.
pub async fn failures_recorded_together_are_judged_one_by_one(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store.insert(job("a-retry")).await.unwrap();
    store
        .insert(job("b-last").with_max_attempts(1).unwrap())
        .await
        .unwrap();
    store
        .insert(job("c-budget").give_up_after(Duration::from_secs(10)))
        .await
        .unwrap();
    store.insert(job("d-forged")).await.unwrap();
    store.insert(job("e-permanent")).await.unwrap();
    let claimed = store.claim(&claim_req(5, LEASE)).await.unwrap();
    assert_eq!(claimed.len(), 5);
    let lease = |id: &str| {
        claimed
            .iter()
            .find(|c| c.job.id.as_str() == id)
            .map(|c| c.lease.clone())
            .unwrap()
    };
    let delay = Duration::from_millis(375);
    let items = vec![
        (
            lease("e-permanent"),
            Failure {
                error: "bad input".into(),
                class: ErrorClass::Permanent,
                retry: None,
            },
        ),
        (lease("a-retry"), retry_after("busy", delay)),
        (forged(&lease("d-forged")), retry_after("stale", delay)),
        (lease("b-last"), retry_after("busy again", delay)),
        (
            lease("c-budget"),
            retry_after("slow", Duration::from_secs(3600)),
        ),
    ];
    let got = store.fail_many(&items).await.unwrap();
    let states: Vec<Option<(&str, JobState)>> = got
        .iter()
        .map(|j| j.as_ref().map(|j| (j.id.as_str(), j.state)))
        .collect();
    assert_eq!(
        states,
        [
            Some(("e-permanent", JobState::Dead)),
            Some(("a-retry", JobState::Ready)),
            None,
            Some(("b-last", JobState::Dead)),
            Some(("c-budget", JobState::Dead)),
        ]
    );
    for j in got.iter().flatten() {
        assert_eq!(
            &get(store.as_ref(), j.id.as_str()).await,
            j,
            "the answer is the job as stored"
        );
        assert_eq!(j.lease_until, None);
    }
    let retry = got[1].as_ref().unwrap();
    assert_eq!(retry.available_at, clock.now_ts().plus(delay));
    assert_eq!(retry.last_error.as_deref(), Some("busy"));
    assert_eq!(retry.last_error_class, Some(ErrorClass::Retryable));
    let permanent = got[0].as_ref().unwrap();
    assert_eq!(permanent.last_error_class, Some(ErrorClass::Permanent));
    assert_eq!(permanent.finished_at, Some(clock.now_ts()));
    let budget = got[4].as_ref().unwrap();
    assert!(
        budget
            .last_error
            .as_deref()
            .unwrap_or("")
            .contains("gave up"),
        "{:?}",
        budget.last_error
    );
    // The forged lease changed nothing: the job still runs on its own.
    let d = get(store.as_ref(), "d-forged").await;
    assert_eq!(d.state, JobState::Running);
    store.complete(&lease("d-forged")).await.unwrap();
    for (id, outcome, error) in [
        ("a-retry", "retry", "busy"),
        ("b-last", "dead", "busy again"),
        ("e-permanent", "dead", "bad input"),
    ] {
        let detail = store.detail(&JobId::new(id).unwrap()).await.unwrap();
        let last = detail.history.last().unwrap();
        assert_eq!(
            (last.outcome.as_deref(), last.error.as_deref()),
            (Some(outcome), Some(error)),
            "{id}"
        );
    }
    // Recording them again finds every lease spent.
    let again = store.fail_many(&items).await.unwrap();
    assert!(again.iter().all(Option::is_none), "{again:?}");
    assert!(store.fail_many(&[]).await.unwrap().is_empty());
}

/// Spending the last attempt on a retryable failure goes dead with the last
/// error; dead keeps the payload and attempts.
pub async fn exhaustion_goes_dead_with_the_last_error(store: Arc<dyn Store>, clock: ManualClock) {
    let original = store
        .insert(job("a").with_max_attempts(2).unwrap())
        .await
        .unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    store
        .fail(&c.lease, retry_after("first", MS))
        .await
        .unwrap();
    clock.advance(MS);
    let c = claim_one(store.as_ref(), LEASE).await;
    let j = store
        .fail(&c.lease, retry_after("second", MS))
        .await
        .unwrap();
    assert_eq!(j.state, JobState::Dead);
    assert_eq!(j.attempts, 2);
    assert_eq!(j.last_error.as_deref(), Some("second"));
    assert_eq!(j.payload, original.job.payload);
    assert!(j.finished_at.is_some());
    clock.advance(Duration::from_secs(3600));
    assert!(store.claim(&claim_req(1, LEASE)).await.unwrap().is_empty());
}

/// A permanent failure goes dead at once with attempts left.
pub async fn a_permanent_failure_goes_dead_at_once(store: Arc<dyn Store>, _clock: ManualClock) {
    store.insert(job("a")).await.unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    let f = Failure {
        error: "invalid payload".into(),
        class: ErrorClass::Permanent,
        retry: None,
    };
    let j = store.fail(&c.lease, f).await.unwrap();
    assert_eq!(j.state, JobState::Dead);
    assert_eq!(j.attempts, 1);
    assert_eq!(j.last_error_class, Some(ErrorClass::Permanent));
}

/// Retry-at uses the given time and counts an attempt.
pub async fn retry_at_a_given_time_counts_an_attempt(store: Arc<dyn Store>, clock: ManualClock) {
    store.insert(job("a")).await.unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    let at = clock.now_ts().plus(Duration::from_secs(120));
    let f = Failure {
        error: "429 retry-after 120".into(),
        class: ErrorClass::Retryable,
        retry: Some(RetryAt::At(at)),
    };
    let j = store.fail(&c.lease, f).await.unwrap();
    assert_eq!(j.available_at, at);
    assert_eq!(j.attempts, 1);
    clock.set(at);
    assert_eq!(claim_one(store.as_ref(), LEASE).await.lease.attempt, 2);
}

/// Snooze re-schedules without spending an attempt.
pub async fn snooze_spends_no_attempt(store: Arc<dyn Store>, clock: ManualClock) {
    store
        .insert(job("a").with_max_attempts(1).unwrap())
        .await
        .unwrap();
    for _ in 0..3 {
        let c = claim_one(store.as_ref(), LEASE).await;
        assert_eq!(c.lease.attempt, 1);
        let j = store
            .snooze(&c.lease, Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(j.state, JobState::Ready);
        assert_eq!(j.attempts, 0);
        assert_eq!(j.available_at, clock.now_ts().plus(Duration::from_secs(5)));
        clock.advance(Duration::from_secs(5));
    }
    let c = claim_one(store.as_ref(), LEASE).await;
    store.complete(&c.lease).await.unwrap();
}

/// Release (draining) gives the attempt back and is due at once.
pub async fn release_gives_the_attempt_back_and_is_due_at_once(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    let j = store.release(&c.lease).await.unwrap();
    assert_eq!((j.state, j.attempts), (JobState::Ready, 0));
    assert_lease_lost(store.complete(&c.lease).await);
    assert_eq!(claim_one(store.as_ref(), LEASE).await.lease.attempt, 1);
}

/// A handler's cancel is terminal `cancelled`, not dead; its ack is refused.
pub async fn a_cancelled_running_job_is_terminal_and_refuses_its_ack(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    let j = store
        .cancel_running(&c.lease, "order withdrawn")
        .await
        .unwrap();
    assert_eq!(j.state, JobState::Cancelled);
    assert_eq!(j.last_error_class, Some(ErrorClass::Cancelled));
    assert_lease_lost(store.complete(&c.lease).await);
    clock.advance(Duration::from_secs(3600));
    assert!(store.claim(&claim_req(1, LEASE)).await.unwrap().is_empty());
}

fn replay_req(ids: &[&str]) -> ReplayRequest {
    ReplayRequest {
        ids: ids.iter().map(|s| id(s)).collect(),
        operator: "ops@example".into(),
        reason: Some("provider restored".into()),
    }
}

/// Replay applies to dead (and cancelled) jobs only (a refusal carries
/// [`ReplayRequest::REFUSED`]); it resets attempts, increments replays,
/// keeps the id, and writes an audit row.
pub async fn replay_only_from_dead_or_cancelled_and_is_audited(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store
        .insert(job("a").with_max_attempts(1).unwrap())
        .await
        .unwrap();
    // Ready: refused.
    assert!(matches!(
        admin(&store).replay_jobs(&replay_req(&["a"])).await,
        Err(Error::InvalidState { .. })
    ));
    let c = claim_one(store.as_ref(), LEASE).await;
    // Running: refused, with the hint every surface shows.
    let err = admin(&store)
        .replay_jobs(&replay_req(&["a"]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidState { state, hint, .. }
            if state == "running" && hint == ReplayRequest::REFUSED),
        "{err}"
    );
    store.fail(&c.lease, retry_after("down", MS)).await.unwrap();
    assert_eq!(get(store.as_ref(), "a").await.state, JobState::Dead);
    clock.advance(Duration::from_secs(7));
    let replayed = admin(&store)
        .replay_jobs(&replay_req(&["a"]))
        .await
        .unwrap();
    assert_eq!(replayed.len(), 1);
    let j = &replayed[0];
    assert_eq!(j.id, id("a"));
    assert_eq!((j.state, j.attempts, j.replays), (JobState::Ready, 0, 1));
    assert_eq!(j.available_at, clock.now_ts());
    assert_eq!(j.finished_at, None);
    let detail = store.detail(&id("a")).await.unwrap();
    assert_eq!(detail.audit.len(), 1);
    assert_eq!(detail.audit[0].action, "replay");
    assert_eq!(detail.audit[0].operator, "ops@example");
    assert_eq!(detail.audit[0].reason.as_deref(), Some("provider restored"));
    assert_eq!(detail.audit[0].at, clock.now_ts());
    // Done: refused.
    let c = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c.lease.attempt, 1);
    store.complete(&c.lease).await.unwrap();
    let err = admin(&store)
        .replay_jobs(&replay_req(&["a"]))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidState { state, .. } if state == "done"),
        "{err}"
    );
    // Cancelled: allowed.
    store.insert(job("b")).await.unwrap();
    admin(&store)
        .cancel_jobs(&CancelRequest {
            ids: vec![id("b")],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(
        admin(&store)
            .replay_jobs(&replay_req(&["b"]))
            .await
            .unwrap()[0]
            .replays,
        1
    );
    // An operator name is required.
    let mut nameless = replay_req(&["a"]);
    nameless.operator = " ".into();
    assert!(matches!(
        admin(&store).replay_jobs(&nameless).await,
        Err(Error::Invalid(_))
    ));
    // A reason is held to the rule of every audited action: a control
    // character (here a bell, and a terminal escape) is refused before
    // the job's state is looked at, and nothing changes.
    let mut bell = replay_req(&["b"]);
    bell.reason = Some("relay fixed\u{7}".into());
    assert!(matches!(
        admin(&store).replay_jobs(&bell).await,
        Err(Error::Invalid(_))
    ));
    let escape = CancelRequest {
        ids: vec![id("b")],
        operator: "ops".into(),
        reason: Some("\u{1b}[31mred".into()),
    };
    assert!(matches!(
        admin(&store).cancel_jobs(&escape).await,
        Err(Error::Invalid(_))
    ));
    let b = store.get(&id("b")).await.unwrap();
    assert_eq!((b.state, b.replays), (JobState::Ready, 1));
}

/// A replay naming one job that may not be replayed changes nothing.
pub async fn replay_of_several_jobs_is_all_or_nothing(store: Arc<dyn Store>, _clock: ManualClock) {
    for name in ["d1", "d2"] {
        store
            .insert(job(name).with_max_attempts(1).unwrap())
            .await
            .unwrap();
        let c = claim_one(store.as_ref(), LEASE).await;
        store
            .fail(
                &c.lease,
                Failure {
                    error: "x".into(),
                    class: ErrorClass::Permanent,
                    retry: None,
                },
            )
            .await
            .unwrap();
    }
    store.insert(job("ready")).await.unwrap();
    assert!(
        admin(&store)
            .replay_jobs(&replay_req(&["d1", "ready", "d2"]))
            .await
            .is_err()
    );
    assert_eq!(get(store.as_ref(), "d1").await.state, JobState::Dead);
    assert_eq!(get(store.as_ref(), "d1").await.replays, 0);
    assert!(store.detail(&id("d1")).await.unwrap().audit.is_empty());
    assert!(matches!(
        admin(&store)
            .replay_jobs(&replay_req(&["d1", "missing"]))
            .await,
        Err(Error::NotFound(_))
    ));
    assert_eq!(
        admin(&store)
            .replay_jobs(&replay_req(&["d1", "d2"]))
            .await
            .unwrap()
            .len(),
        2
    );
}

/// Operator cancel: ready and running jobs only, refused otherwise with
/// [`CancelRequest::REFUSED`]; a cancelled running job's worker cannot
/// settle it afterwards, and a cancelled ready job is never claimed.
pub async fn operator_cancel_refuses_finished_jobs_and_fences_the_worker(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let req = |s: &str| CancelRequest {
        ids: vec![id(s)],
        operator: "ops".into(),
        reason: Some("dup".into()),
    };
    store.insert(job("r")).await.unwrap();
    store.insert(job("x")).await.unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    let j = admin(&store)
        .cancel_jobs(&req(c.job.id.as_str()))
        .await
        .unwrap();
    assert_eq!(j[0].state, JobState::Cancelled);
    assert_lease_lost(store.complete(&c.lease).await);
    let other = if c.job.id.as_str() == "r" { "x" } else { "r" };
    let c2 = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(c2.job.id.as_str(), other);
    store.complete(&c2.lease).await.unwrap();
    match admin(&store).cancel_jobs(&req(other)).await {
        Err(Error::InvalidState { id, state, hint }) => {
            assert_eq!((id.as_str(), state.as_str()), (other, "done"));
            assert_eq!(hint, CancelRequest::REFUSED, "the hint every surface shows");
        }
        refused => panic!("a done job cannot be cancelled, got {refused:?}"),
    }
    // Cancelled is finished too: a second cancel is refused and writes no
    // second audit entry.
    assert!(matches!(
        admin(&store).cancel_jobs(&req(c.job.id.as_str())).await,
        Err(Error::InvalidState { .. })
    ));
    let detail = store.detail(&id(c.job.id.as_str())).await.unwrap();
    assert_eq!(detail.audit.len(), 1, "one cancel, one entry");
    assert_eq!(detail.audit[0].action, "cancel");
    store.insert(job("waiting")).await.unwrap();
    admin(&store).cancel_jobs(&req("waiting")).await.unwrap();
    assert!(
        store
            .claim(&reclaim_req(10, LEASE))
            .await
            .unwrap()
            .is_empty(),
        "a cancelled ready job is never claimed"
    );
}

/// Unknown ids are reported as not found, and change nothing.
pub async fn unknown_ids_are_not_found(store: Arc<dyn Store>, _clock: ManualClock) {
    assert!(matches!(
        store.get(&id("nope")).await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        store.detail(&id("nope")).await,
        Err(Error::NotFound(_))
    ));
    assert!(matches!(
        admin(&store).replay_jobs(&replay_req(&["nope"])).await,
        Err(Error::NotFound(_))
    ));
    let cancel = CancelRequest {
        ids: vec![id("nope")],
        operator: "ops".into(),
        reason: None,
    };
    assert!(matches!(
        admin(&store).cancel_jobs(&cancel).await,
        Err(Error::NotFound(_))
    ));
}

/// Every attempt leaves a history row with its outcome and error.
pub async fn history_records_every_attempt(store: Arc<dyn Store>, clock: ManualClock) {
    store
        .insert(job("a").with_max_attempts(3).unwrap())
        .await
        .unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    store.fail(&c.lease, retry_after("boom", MS)).await.unwrap();
    clock.advance(MS);
    claim_one(store.as_ref(), LEASE).await;
    clock.advance(LEASE); // the worker "crashed"
    let c = claim_one(store.as_ref(), LEASE).await;
    store.complete(&c.lease).await.unwrap();
    let h = store.detail(&id("a")).await.unwrap().history;
    let summary: Vec<(u32, Option<&str>)> = h
        .iter()
        .map(|r| (r.attempt, r.outcome.as_deref()))
        .collect();
    assert_eq!(
        summary,
        vec![
            (1, Some("retry")),
            (2, Some("lease_expired")),
            (3, Some("succeeded"))
        ]
    );
    assert_eq!(h[0].error.as_deref(), Some("boom"));
    assert_eq!(h[1].error_class, Some(ErrorClass::LeaseExpired));
    assert!(h.iter().all(|r| r.finished_at.is_some() && r.cycle == 0));
}

/// Listing filters by state, queue and kind.
pub async fn list_filters_by_state_queue_and_kind(store: Arc<dyn Store>, _clock: ManualClock) {
    store.insert(job("a")).await.unwrap();
    store
        .insert(job("b").on_queue("mail").unwrap())
        .await
        .unwrap();
    let c = claim_one(store.as_ref(), LEASE).await;
    let by_state = store
        .list(&JobFilter {
            state: Some(JobState::Running),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(by_state.len(), 1);
    assert_eq!(by_state[0].id, c.job.id);
    let by_queue = store
        .list(&JobFilter {
            queue: Some(Name::parse("queue", "mail").unwrap()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        by_queue.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        vec!["b"]
    );
    let by_kind = store
        .list(&JobFilter {
            kind: Some(Name::parse("kind", "other").unwrap()),
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(by_kind.is_empty());
    let limited = store
        .list(&JobFilter {
            limit: Some(1),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(limited.len(), 1);
}

/// Keyset pages (`after` = the last id of the previous page) visit every
/// job exactly once in the listing's order, ties on creation time included,
/// whatever states the jobs are in (listings merge one index range per
/// state); a cursor may name a job of another state than the filter's; a
/// page placed after a job that does not exist is an error, not an empty
/// page that looks like the end. Jobs created at the same instant are
/// listed in an order the store fixes when it creates them: by id
/// (PostgreSQL) or in the order stored, which for a call without
/// dependencies is the order given (SQLite).
pub async fn list_pages_by_cursor_visit_every_job_once(store: Arc<dyn Store>, clock: ManualClock) {
    // Three created at the same instant, then four more, two per instant.
    let batch = ["m", "c", "x"].map(job).to_vec();
    store.insert_many(batch).await.unwrap();
    for pair in [["b", "z"], ["a", "k"]] {
        clock.advance(Duration::from_millis(5));
        store.insert_many(pair.map(job).to_vec()).await.unwrap();
    }
    let all = store.list(&JobFilter::default()).await.unwrap();
    let all: Vec<String> = all.iter().map(|j| j.id.to_string()).collect();
    let by_id = ["c", "m", "x", "b", "z", "a", "k"];
    let as_given = ["m", "c", "x", "b", "z", "a", "k"];
    assert!(
        all == by_id || all == as_given,
        "oldest first, each instant's jobs by id or as given: {all:?}"
    );
    // Spread them over four states: c running, m dead, z cancelled.
    assert_eq!(claim_one(store.as_ref(), LEASE).await.job.id, id("c"));
    let m = claim_one(store.as_ref(), LEASE).await;
    assert_eq!(m.job.id, id("m"));
    let failure = Failure {
        error: "boom".into(),
        class: ErrorClass::Permanent,
        retry: None,
    };
    store.fail(&m.lease, failure).await.unwrap();
    admin(&store)
        .cancel_jobs(&CancelRequest {
            ids: vec![id("z")],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
    let ready_after_m = store
        .list(&JobFilter {
            state: Some(JobState::Ready),
            limit: Some(3),
            after: Some(id("m")),
            ..Default::default()
        })
        .await
        .unwrap();
    let ready_after_m: Vec<&str> = ready_after_m.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(
        ready_after_m,
        ["x", "b", "a"],
        "a dead job places a page of ready ones"
    );
    for size in [1u32, 2, 3, 7] {
        let mut seen = Vec::new();
        let mut after = None;
        let mut ended = false;
        // More pages than jobs means the cursor stopped advancing.
        for _ in 0..=all.len() {
            let page = store
                .list(&JobFilter {
                    limit: Some(size),
                    after: after.clone(),
                    ..Default::default()
                })
                .await
                .unwrap();
            if page.is_empty() {
                ended = true;
                break;
            }
            assert!(page.len() <= size as usize);
            after = page.last().map(|j| j.id.clone());
            seen.extend(page.iter().map(|j| j.id.to_string()));
        }
        assert!(ended, "pages of {size} did not end");
        assert_eq!(seen, all, "pages of {size}");
    }
    match store
        .list(&JobFilter {
            after: Some(JobId::new("no-such-job").unwrap()),
            ..Default::default()
        })
        .await
    {
        Err(Error::NotFound(msg)) => assert!(msg.contains("no-such-job"), "{msg}"),
        other => panic!("a page after a missing job must be NotFound: {other:?}"),
    }
}

/// Reads the manual clock as a timestamp.
trait NowTs {
    fn now_ts(&self) -> errand_core::Timestamp;
}

impl NowTs for ManualClock {
    fn now_ts(&self) -> errand_core::Timestamp {
        errand_core::Clock::now(self)
    }
}
