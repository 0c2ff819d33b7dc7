//! Dependencies between jobs: a dependent waits `blocked` until each of its
//! dependencies is `done`; whatever ends a dependency releases its
//! dependents in the same transaction, by the policy each dependent chose
//! for a dependency that fails (`wait`, `cancel`, `run`).

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    CancelRequest, DependencyFailure, Error, ErrorClass, Failure, JobId, JobState, ManualClock,
    NewJob, ReplayRequest, StatsRequest, Store,
};

use crate::{admin, claim_req, get, job, reclaim_req};

const LEASE: Duration = Duration::from_secs(10);

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

fn after(name: &str, deps: &[&str], policy: DependencyFailure) -> NewJob {
    deps.iter()
        .fold(job(name), |j, d| j.depends_on(id(d)))
        .on_dependency_failure(policy)
}

/// Claims every due job and returns their ids, sorted, settling nothing.
async fn claim_all(store: &dyn Store) -> Vec<errand_core::ClaimedJob> {
    let mut got = store.claim(&reclaim_req(100, LEASE)).await.unwrap();
    got.sort_by(|a, b| a.job.id.cmp(&b.job.id));
    got
}

fn names(jobs: &[errand_core::ClaimedJob]) -> Vec<&str> {
    jobs.iter().map(|c| c.job.id.as_str()).collect()
}

async fn state(store: &dyn Store, name: &str) -> JobState {
    get(store, name).await.state
}

/// Runs `name` (claiming it, and completing whatever else was due) and
/// fails it permanently: it ends `dead`.
async fn kill(store: &dyn Store, name: &str) {
    loop {
        let claimed = claim_all(store).await;
        assert!(!claimed.is_empty(), "{name} never became claimable");
        let mut found = false;
        for c in claimed {
            if c.job.id.as_str() == name {
                let failure = Failure {
                    error: format!("{name} cannot work"),
                    class: ErrorClass::Permanent,
                    retry: None,
                };
                store.fail(&c.lease, failure).await.unwrap();
                found = true;
            } else {
                store.complete(&c.lease).await.unwrap();
            }
        }
        if found {
            return;
        }
    }
}

/// A dependent is inserted `blocked`, is never claimed while a dependency
/// is unfinished, and becomes ready — in the transaction of the last
/// acknowledgment, single or batched — once every dependency is done. Its
/// detail lists its dependencies in order, met; theirs list it.
pub async fn a_dependent_waits_blocked_until_every_dependency_is_done(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    store.insert(job("b")).await.unwrap();
    let c = store
        .insert(after("c", &["b", "a"], DependencyFailure::Wait))
        .await
        .unwrap();
    assert!(c.created);
    assert_eq!(c.job.state, JobState::Blocked);
    assert_eq!(c.job.waiting_on, 2);
    assert_eq!(c.job.on_dependency_failure, Some(DependencyFailure::Wait));
    // A queue holding only blocked jobs is counted; blocked ones apart.
    store
        .insert(
            after("elsewhere", &["a"], DependencyFailure::Wait)
                .on_queue("later")
                .unwrap(),
        )
        .await
        .unwrap();
    let stats = admin(&store).stats(&StatsRequest::default()).await.unwrap();
    let counts: Vec<(&str, u64, u64)> = stats
        .queues
        .iter()
        .map(|q| (q.queue.as_str(), q.counts.blocked, q.counts.ready))
        .collect();
    assert_eq!(counts, [("default", 1, 2), ("later", 1, 0)]);
    let listed = admin(&store)
        .list(&errand_core::JobFilter {
            state: Some(JobState::Blocked),
            ..errand_core::JobFilter::default()
        })
        .await
        .unwrap();
    let listed: Vec<&str> = listed.iter().map(|j| j.id.as_str()).collect();
    assert_eq!(listed, ["c", "elsewhere"]);
    let cancel = CancelRequest {
        ids: vec![id("elsewhere")],
        operator: "ops".into(),
        reason: None,
    };
    admin(&store).cancel_jobs(&cancel).await.unwrap();

    let running = claim_all(&*store).await;
    assert_eq!(
        names(&running),
        ["a", "b"],
        "a blocked job is never claimed"
    );
    store.complete(&running[0].lease).await.unwrap();
    let c = get(&*store, "c").await;
    assert_eq!((c.state, c.waiting_on), (JobState::Blocked, 1));
    assert!(claim_all(&*store).await.is_empty());
    assert!(get(&*store, "a").await.has_dependents);

    // The last dependency settles through the batched acknowledgment.
    assert_eq!(
        store
            .complete_many(std::slice::from_ref(&running[1].lease))
            .await
            .unwrap(),
        [true]
    );
    let c = get(&*store, "c").await;
    assert_eq!((c.state, c.waiting_on), (JobState::Ready, 0));
    assert_eq!(names(&claim_all(&*store).await), ["c"]);

    let detail = store.detail(&id("c")).await.unwrap();
    let deps: Vec<(&str, Option<JobState>, bool)> = detail
        .dependencies
        .iter()
        .map(|d| (d.id.as_str(), d.state, d.met))
        .collect();
    assert_eq!(
        deps,
        [
            ("b", Some(JobState::Done), true),
            ("a", Some(JobState::Done), true)
        ]
    );
    let a = store.detail(&id("a")).await.unwrap();
    let dependents: Vec<(&str, Option<JobState>)> = a
        .dependents
        .iter()
        .map(|d| (d.id.as_str(), d.state))
        .collect();
    assert_eq!(
        dependents,
        [
            ("c", Some(JobState::Running)),
            ("elsewhere", Some(JobState::Cancelled))
        ]
    );
    assert!(a.dependencies.is_empty());
}

/// A call may name jobs it inserts itself, in any order; a dependency
/// that is neither stored nor in the call, and a cycle, refuse the whole
/// call with an error that names them, and nothing is created. A
/// dependency that is already done is met at once.
pub async fn dependencies_are_checked_when_jobs_are_inserted(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    // z names y, which comes later in the same call.
    let got = store
        .insert_many(vec![
            after("z", &["y"], DependencyFailure::Wait),
            job("x"),
            after("y", &["x"], DependencyFailure::Wait),
        ])
        .await
        .unwrap();
    let states: Vec<JobState> = got.iter().map(|i| i.job.state).collect();
    assert_eq!(
        states,
        [JobState::Blocked, JobState::Ready, JobState::Blocked]
    );

    let unknown = store
        .insert_many(vec![
            job("fresh"),
            after("orphan", &["x", "nowhere"], DependencyFailure::Wait),
        ])
        .await;
    match unknown {
        Err(Error::Invalid(m)) => {
            assert!(m.contains("nowhere") && m.contains("not stored"), "{m}");
        }
        other => panic!("an unknown dependency must be refused, got {other:?}"),
    }
    let cycle = store
        .insert_many(vec![
            after("p", &["q"], DependencyFailure::Wait),
            after("q", &["p"], DependencyFailure::Wait),
        ])
        .await;
    match cycle {
        Err(Error::Invalid(m)) => assert!(m.contains("cycle"), "{m}"),
        other => panic!("a cycle must be refused, got {other:?}"),
    }
    for gone in ["fresh", "orphan", "p", "q"] {
        assert!(
            matches!(store.get(&id(gone)).await, Err(Error::NotFound(_))),
            "{gone} must not exist after a refused call"
        );
    }
    let itself = store
        .insert(after("me", &["me"], DependencyFailure::Wait))
        .await;
    assert!(matches!(itself, Err(Error::Invalid(_))), "{itself:?}");

    // A dependency already done: the new job is ready at once.
    let x = claim_all(&*store).await;
    assert_eq!(names(&x), ["x"]);
    store.complete(&x[0].lease).await.unwrap();
    assert_eq!(state(&*store, "y").await, JobState::Ready);
    let late = store
        .insert(after("late", &["x"], DependencyFailure::Wait))
        .await
        .unwrap();
    assert_eq!((late.job.state, late.job.waiting_on), (JobState::Ready, 0));
}

/// Under `wait` (the default) a dead dependency keeps its dependent
/// blocked; replayed and done, it releases it.
pub async fn a_waiting_dependent_resumes_when_its_dead_dependency_is_replayed(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    store
        .insert(after("w", &["a"], DependencyFailure::Wait))
        .await
        .unwrap();
    kill(&*store, "a").await;
    assert_eq!(state(&*store, "a").await, JobState::Dead);
    assert_eq!(state(&*store, "w").await, JobState::Blocked);
    // A job that depends on the dead one now waits too.
    let w2 = store
        .insert(after("w2", &["a"], DependencyFailure::Wait))
        .await
        .unwrap();
    assert_eq!(w2.job.state, JobState::Blocked);
    // Purging a would strand them: refused, and nothing is deleted.
    let purge = errand_core::PurgeRequest {
        ids: vec![id("a")],
        operator: "ops".into(),
        reason: "clean up".into(),
    };
    match admin(&store).purge_jobs(&purge).await {
        Err(Error::InvalidState { hint, .. }) => assert!(hint.contains("w"), "{hint}"),
        other => panic!("a purge that strands blocked jobs must be refused, got {other:?}"),
    }
    assert_eq!(state(&*store, "a").await, JobState::Dead);

    let req = ReplayRequest {
        ids: vec![id("a")],
        operator: "ops".into(),
        reason: None,
    };
    admin(&store).replay_jobs(&req).await.unwrap();
    let a = claim_all(&*store).await;
    assert_eq!(names(&a), ["a"]);
    store.complete(&a[0].lease).await.unwrap();
    assert_eq!(state(&*store, "w").await, JobState::Ready);
    assert_eq!(state(&*store, "w2").await, JobState::Ready);
}

/// Under `cancel` a dead dependency cancels its dependent at once, and the
/// cancellation cascades: a `wait` or `cancel` dependent of the cancelled
/// job is cancelled too, a `run` one goes ahead. The cancelled say why.
/// A job inserted under a dependency that already failed is judged at once.
pub async fn a_failed_dependency_cancels_or_releases_by_policy_and_cascades(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    store
        .insert_many(vec![
            after("c", &["a"], DependencyFailure::Cancel),
            after("cw", &["c"], DependencyFailure::Wait),
            after("cww", &["cw"], DependencyFailure::Wait),
            after("cr", &["c"], DependencyFailure::Run),
            after("r", &["a"], DependencyFailure::Run),
            after("w", &["a"], DependencyFailure::Wait),
        ])
        .await
        .unwrap();
    kill(&*store, "a").await;
    for (name, want) in [
        ("c", JobState::Cancelled),
        ("cw", JobState::Cancelled),
        ("cww", JobState::Cancelled),
        ("cr", JobState::Ready),
        ("r", JobState::Ready),
        ("w", JobState::Blocked),
    ] {
        assert_eq!(state(&*store, name).await, want, "{name}");
    }
    let c = get(&*store, "c").await;
    assert_eq!(c.last_error_class, Some(ErrorClass::Cancelled));
    let why = c.last_error.unwrap_or_default();
    assert!(why.contains("a") && why.contains("dead"), "{why}");
    let cw = get(&*store, "cw").await.last_error.unwrap_or_default();
    assert!(cw.contains("c") && cw.contains("cancelled"), "{cw}");

    // Inserted after the failure, each policy is applied at once.
    let later = store
        .insert_many(vec![
            after("c2", &["a"], DependencyFailure::Cancel),
            after("r2", &["a"], DependencyFailure::Run),
            after("w3", &["a"], DependencyFailure::Wait),
        ])
        .await
        .unwrap();
    let states: Vec<JobState> = later.iter().map(|i| i.job.state).collect();
    assert_eq!(
        states,
        [JobState::Cancelled, JobState::Ready, JobState::Blocked]
    );
}

/// Under `run` a failed dependency is met; if an operator replays it and it
/// succeeds, the dependent's edge is not counted a second time.
pub async fn a_run_dependent_is_met_once_even_if_its_dependency_is_replayed(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    store.insert(job("b")).await.unwrap();
    store
        .insert(after("r", &["a", "b"], DependencyFailure::Run))
        .await
        .unwrap();
    // a dies while b runs on.
    let running = claim_all(&*store).await;
    assert_eq!(names(&running), ["a", "b"]);
    let failure = Failure {
        error: "no".into(),
        class: ErrorClass::Permanent,
        retry: None,
    };
    store.fail(&running[0].lease, failure).await.unwrap();
    let r = get(&*store, "r").await;
    assert_eq!((r.state, r.waiting_on), (JobState::Blocked, 1));
    // a, replayed, succeeds before b: r still waits for b alone.
    let req = ReplayRequest {
        ids: vec![id("a")],
        operator: "ops".into(),
        reason: None,
    };
    admin(&store).replay_jobs(&req).await.unwrap();
    let again = store.claim(&claim_req(10, LEASE)).await.unwrap();
    assert_eq!(names(&again), ["a"]);
    store.complete(&again[0].lease).await.unwrap();
    let r = get(&*store, "r").await;
    assert_eq!((r.state, r.waiting_on), (JobState::Blocked, 1));
    store.complete(&running[1].lease).await.unwrap();
    let r = get(&*store, "r").await;
    assert_eq!((r.state, r.waiting_on), (JobState::Ready, 0));
}

/// A cancelled dependency cancels its `wait` and `cancel` dependents —
/// whether an operator cancelled it (blocked, ready or running) or its
/// handler did — and an operator may cancel a blocked job itself.
/// Replayed, a dependent that still waits for something is blocked again.
pub async fn a_cancelled_dependency_cancels_its_waiting_dependents(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    store.insert(job("h")).await.unwrap();
    store
        .insert_many(vec![
            after("w", &["a"], DependencyFailure::Wait),
            after("ww", &["w"], DependencyFailure::Wait),
            after("hw", &["h"], DependencyFailure::Wait),
            after("hr", &["h"], DependencyFailure::Run),
        ])
        .await
        .unwrap();
    let ops = admin(&store);
    let cancel = |ids: &[&str]| CancelRequest {
        ids: ids.iter().map(|s| id(s)).collect(),
        operator: "ops".into(),
        reason: None,
    };
    // An operator cancels the blocked w: ww follows; a is untouched.
    ops.cancel_jobs(&cancel(&["w"])).await.unwrap();
    assert_eq!(state(&*store, "w").await, JobState::Cancelled);
    assert_eq!(state(&*store, "ww").await, JobState::Cancelled);
    assert_eq!(state(&*store, "a").await, JobState::Ready);

    // The handler of h cancels it: hw is cancelled, hr runs.
    let running = claim_all(&*store).await;
    let h = running.iter().find(|c| c.job.id.as_str() == "h").unwrap();
    store.cancel_running(&h.lease, "not wanted").await.unwrap();
    assert_eq!(state(&*store, "hw").await, JobState::Cancelled);
    assert_eq!(state(&*store, "hr").await, JobState::Ready);

    // Replayed while a has not finished, w waits again.
    let req = ReplayRequest {
        ids: vec![id("w")],
        operator: "ops".into(),
        reason: None,
    };
    let back = ops.replay_jobs(&req).await.unwrap();
    assert_eq!(back[0].state, JobState::Blocked);
    let a = running.iter().find(|c| c.job.id.as_str() == "a").unwrap();
    store.complete(&a.lease).await.unwrap();
    assert_eq!(state(&*store, "w").await, JobState::Ready);
}

/// A dependency whose final lease expires dies in the sweep, and the sweep
/// releases its dependents in the same transaction.
pub async fn the_sweep_releases_the_dependents_of_a_job_it_kills(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    store
        .insert(job("a").with_max_attempts(1).unwrap())
        .await
        .unwrap();
    store
        .insert_many(vec![
            after("r", &["a"], DependencyFailure::Run),
            after("c", &["a"], DependencyFailure::Cancel),
        ])
        .await
        .unwrap();
    let running = claim_all(&*store).await;
    assert_eq!(names(&running), ["a"]);
    clock.advance(LEASE + Duration::from_secs(1));
    let swept = store.sweep_expired().await.unwrap();
    assert_eq!(swept.dead, [id("a")]);
    assert_eq!(state(&*store, "r").await, JobState::Ready);
    assert_eq!(state(&*store, "c").await, JobState::Cancelled);
}

/// Failures recorded together release the dependents of the jobs they
/// kill, and leave the dependents of jobs they only retry blocked.
pub async fn failures_recorded_together_release_the_dependents_of_the_dead(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    store.insert(job("b")).await.unwrap();
    store
        .insert_many(vec![
            after("ra", &["a"], DependencyFailure::Run),
            after("rb", &["b"], DependencyFailure::Run),
        ])
        .await
        .unwrap();
    let running = claim_all(&*store).await;
    assert_eq!(names(&running), ["a", "b"]);
    let dies = Failure {
        error: "no".into(),
        class: ErrorClass::Permanent,
        retry: None,
    };
    let retries = crate::retry_after("later", Duration::from_secs(60));
    let got = store
        .fail_many(&[
            (running[0].lease.clone(), dies),
            (running[1].lease.clone(), retries),
        ])
        .await
        .unwrap();
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].as_ref().map(|j| j.state), Some(JobState::Dead));
    assert_eq!(got[1].as_ref().map(|j| j.state), Some(JobState::Ready));
    assert_eq!(state(&*store, "ra").await, JobState::Ready);
    assert_eq!(state(&*store, "rb").await, JobState::Blocked);
}

/// Retention may prune a dependency that finished long ago while its
/// dependent stays: the dependent's detail still lists it, without a
/// state, met if it had succeeded and unmet if it had not (a `run`
/// dependent went ahead of a cancelled one: that edge is met too).
pub async fn a_pruned_dependency_still_reads_as_it_ended(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let day = Duration::from_secs(86_400);
    store.insert(job("ok")).await.unwrap();
    store.insert(job("dropped")).await.unwrap();
    store.insert(job("skipped")).await.unwrap();
    store
        .insert_many(vec![
            after("after-ok", &["ok"], DependencyFailure::Wait),
            after("after-both", &["ok", "skipped"], DependencyFailure::Run),
            after("after-dropped", &["dropped"], DependencyFailure::Wait),
        ])
        .await
        .unwrap();
    let cancel = CancelRequest {
        ids: vec![id("dropped"), id("skipped")],
        operator: "ops".into(),
        reason: None,
    };
    admin(&store).cancel_jobs(&cancel).await.unwrap();
    let running = claim_all(&*store).await;
    assert_eq!(names(&running), ["ok"]);
    store.complete(&running[0].lease).await.unwrap();
    assert_eq!(state(&*store, "after-dropped").await, JobState::Cancelled);
    // The dependents run long enough to stay past the dependencies'
    // retention: they are still running when those are pruned.
    let dependents = claim_all(&*store).await;
    assert_eq!(names(&dependents), ["after-both", "after-ok"]);
    let edges = |d: &errand_core::JobDetail| -> Vec<(String, Option<JobState>, bool)> {
        d.dependencies
            .iter()
            .map(|e| (e.id.to_string(), e.state, e.met))
            .collect()
    };
    let before = edges(&store.detail(&id("after-both")).await.unwrap());
    assert_eq!(
        before,
        [
            ("ok".to_owned(), Some(JobState::Done), true),
            ("skipped".to_owned(), Some(JobState::Cancelled), true)
        ]
    );
    clock.advance(8 * day);
    // Pruned: ok, dropped, skipped, and after-dropped (cancelled with them).
    assert_eq!(store.prune(7 * day, 100).await.unwrap(), 4);
    assert_eq!(
        edges(&store.detail(&id("after-both")).await.unwrap()),
        [
            ("ok".to_owned(), None, true),
            ("skipped".to_owned(), None, true)
        ]
    );
    assert_eq!(
        edges(&store.detail(&id("after-ok")).await.unwrap()),
        [("ok".to_owned(), None, true)]
    );
}

/// A job acknowledged with an output keeps it (and only a done job has
/// one); its dependents read their dependencies' outputs in the order they
/// named them, `None` for one that recorded none. The output is fenced
/// with the acknowledgment: a lost lease records nothing.
pub async fn an_output_is_kept_with_its_job_and_read_by_its_dependents(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    store.insert(job("b")).await.unwrap();
    store
        .insert(after("c", &["b", "a"], DependencyFailure::Wait))
        .await
        .unwrap();
    let running = claim_all(&*store).await;
    assert_eq!(names(&running), ["a", "b"]);
    let output = errand_core::Payload::output(r#"{"rows":120,"note":"ünïcode"}"#).unwrap();
    let a = store
        .complete_with_output(&running[0].lease, &output)
        .await
        .unwrap();
    // Compared as JSON values (the text is kept as given, too:
    // hostile::stored_json_reads_back_as_the_text_given).
    let json =
        |p: Option<&errand_core::Payload>| p.map(|p| p.decode::<serde_json::Value>().unwrap());
    assert_eq!(a.state, JobState::Done);
    assert_eq!(json(a.output.as_ref()), json(Some(&output)));
    let again = store.complete_with_output(&running[0].lease, &output).await;
    assert!(matches!(again, Err(Error::LeaseLost { .. })), "{again:?}");
    store.complete(&running[1].lease).await.unwrap();
    assert_eq!(
        json(get(&*store, "a").await.output.as_ref()),
        json(Some(&output))
    );
    assert_eq!(get(&*store, "b").await.output, None);
    let read: Vec<(JobId, Option<serde_json::Value>)> = store
        .dependency_outputs(&id("c"))
        .await
        .unwrap()
        .into_iter()
        .map(|(dep, out)| (dep, json(out.as_ref())))
        .collect();
    assert_eq!(read, [(id("b"), None), (id("a"), json(Some(&output)))]);
    assert!(store.dependency_outputs(&id("a")).await.unwrap().is_empty());
    // The detail carries it too (what `show` and the API render).
    let detail = store.detail(&id("a")).await.unwrap();
    assert_eq!(json(detail.job.output.as_ref()), json(Some(&output)));
    let c = claim_all(&*store).await;
    assert_eq!(names(&c), ["c"]);
}

/// The outputs of a fan-in's dependencies come a page at a time, by
/// dependency id in byte order (not as named): each page holds at most the
/// limit asked for, starts after the id given, and the pages together hold
/// every dependency once, `None` for one that recorded none. A job without
/// dependencies, a page after the last id, and a limit of zero read none.
pub async fn dependency_outputs_come_in_pages_by_id(store: Arc<dyn Store>, _clock: ManualClock) {
    let named = ["c-2", "b", "a", "c-10", "d", "B"];
    for name in named {
        store.insert(job(name)).await.unwrap();
    }
    store
        .insert(after("fan", &named, DependencyFailure::Wait))
        .await
        .unwrap();
    for c in claim_all(&*store).await {
        if c.job.id.as_str() == "b" {
            store.complete(&c.lease).await.unwrap();
        } else {
            let text = format!("{{\"from\":\"{}\"}}", c.job.id);
            let output = errand_core::Payload::output(&text).unwrap();
            store.complete_with_output(&c.lease, &output).await.unwrap();
        }
    }
    // Compared as JSON values: PostgreSQL keeps jsonb in its own layout.
    let from = |p: &Option<errand_core::Payload>| {
        p.as_ref()
            .map(|p| p.decode::<serde_json::Value>().unwrap()["from"].clone())
    };
    let mut pages = Vec::new();
    let mut last: Option<JobId> = None;
    loop {
        let page = store
            .dependency_outputs_after(&id("fan"), last.as_ref(), 2)
            .await
            .unwrap();
        assert!(page.len() <= 2, "a page holds at most its limit: {page:?}");
        if page.is_empty() {
            break;
        }
        last = page.last().map(|(dep, _)| dep.clone());
        pages.push(
            page.iter()
                .map(|(dep, out)| (dep.to_string(), from(out)))
                .collect::<Vec<_>>(),
        );
        assert!(pages.len() <= 3, "the pages end: {pages:?}");
    }
    let entry = |dep: &str, out: Option<&str>| (dep.to_owned(), out.map(serde_json::Value::from));
    assert_eq!(
        pages,
        [
            vec![entry("B", Some("B")), entry("a", Some("a"))],
            vec![entry("b", None), entry("c-10", Some("c-10"))],
            vec![entry("c-2", Some("c-2")), entry("d", Some("d"))],
        ]
    );
    let one = store
        .dependency_outputs_after(&id("fan"), Some(&id("c-10")), 100)
        .await
        .unwrap();
    let ids: Vec<&str> = one.iter().map(|(dep, _)| dep.as_str()).collect();
    assert_eq!(ids, ["c-2", "d"]);
    for (job, after, limit) in [("fan", None, 0), ("fan", Some("d"), 10), ("a", None, 10)] {
        let after = after.map(id);
        let read = store
            .dependency_outputs_after(&id(job), after.as_ref(), limit)
            .await
            .unwrap();
        assert!(
            read.is_empty(),
            "{job} after {after:?} limit {limit}: {read:?}"
        );
    }
}

/// Acknowledgments sent with a claim (`complete_and_claim`, what a busy
/// worker does) release their dependents in that transaction, before its
/// claim: a dependent they make due is taken by the same call, under a
/// lease that settles like any other. A dependent of two jobs acknowledged
/// together is counted down by both at once; one still waiting for
/// another job stays blocked, and one delayed becomes ready but is not
/// claimed early. A repeated acknowledgment, refused, counts nothing.
pub async fn acknowledgments_sent_with_a_claim_release_the_dependents_it_takes(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    for name in ["a", "b", "x"] {
        store.insert(job(name)).await.unwrap();
    }
    let hour = Duration::from_secs(3600);
    let jobs = [
        after("after_a", &["a"], DependencyFailure::Wait),
        after("after_both", &["a", "b"], DependencyFailure::Wait),
        after("after_b", &["b"], DependencyFailure::Wait),
        after("after_a_and_x", &["a", "x"], DependencyFailure::Wait),
        after("later", &["b"], DependencyFailure::Wait)
            .scheduled(errand_core::Schedule::After(hour)),
    ];
    for j in jobs {
        store.insert(j).await.unwrap();
    }
    let running = claim_all(&*store).await;
    assert_eq!(names(&running), ["a", "b", "x"]);
    let leases = [running[0].lease.clone(), running[1].lease.clone()];

    let (acked, claimed) = store
        .complete_and_claim(&leases, &claim_req(10, LEASE))
        .await
        .unwrap();
    assert_eq!(acked, [true, true]);
    let mut claimed = claimed.unwrap();
    claimed.sort_by(|p, q| p.job.id.cmp(&q.job.id));
    assert_eq!(
        names(&claimed),
        ["after_a", "after_b", "after_both"],
        "the claim takes what its own acknowledgments made due"
    );
    for c in &claimed {
        assert_eq!((c.job.state, c.job.waiting_on), (JobState::Running, 0));
    }
    let waiting = get(&*store, "after_a_and_x").await;
    assert_eq!((waiting.state, waiting.waiting_on), (JobState::Blocked, 1));
    let later = get(&*store, "later").await;
    assert_eq!((later.state, later.waiting_on), (JobState::Ready, 0));

    // Acknowledged again: refused, and nothing counted twice.
    let (acked, again) = store
        .complete_and_claim(&leases[..1], &claim_req(10, LEASE))
        .await
        .unwrap();
    assert_eq!(acked, [false]);
    assert!(again.unwrap().is_empty());
    let waiting = get(&*store, "after_a_and_x").await;
    assert_eq!((waiting.state, waiting.waiting_on), (JobState::Blocked, 1));

    // The dependents' leases are real: they settle, and `x` releases the
    // last one.
    for c in &claimed {
        assert_eq!(
            store.complete(&c.lease).await.unwrap().state,
            JobState::Done
        );
    }
    let (acked, last) = store
        .complete_and_claim(&[running[2].lease.clone()], &claim_req(10, LEASE))
        .await
        .unwrap();
    assert_eq!(acked, [true]);
    assert_eq!(names(&last.unwrap()), ["after_a_and_x"]);
}

fn stamp() -> errand_core::AuditStamp {
    errand_core::AuditStamp {
        operator: "ops".into(),
        reason: Some("clean up".into()),
    }
}

/// A purge never leaves a blocked job waiting for a job that is gone: the
/// store's own step refuses a dead job that a blocked job still waits
/// for (whatever an earlier read saw), and the operator is told which
/// job waits. Once no blocked job waits for it, it goes; a job enqueued
/// after that naming it is refused.
pub async fn a_purge_never_strands_a_job_that_waits_for_it(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    store.insert(job("a")).await.unwrap();
    kill(&*store, "a").await;
    store
        .insert(after("w", &["a"], DependencyFailure::Wait))
        .await
        .unwrap();
    assert_eq!(state(&*store, "w").await, JobState::Blocked);

    // The step itself refuses, not only the operator's policy above it.
    let purged = store.purge_jobs(&[id("a")], &stamp()).await.unwrap();
    assert!(
        purged.is_empty(),
        "the purge step deleted {purged:?}, which blocked job w waits for"
    );
    assert_eq!(state(&*store, "a").await, JobState::Dead);
    let purge = errand_core::PurgeRequest {
        ids: vec![id("a")],
        operator: "ops".into(),
        reason: "clean up".into(),
    };
    match admin(&store).purge_jobs(&purge).await {
        Err(Error::InvalidState {
            id: which, hint, ..
        }) => {
            assert_eq!(which, "a");
            assert!(hint.contains('w'), "{hint}");
        }
        other => panic!("a purge that strands w must be refused, got {other:?}"),
    }

    // Cancelled, w no longer waits: a goes, and nothing can name it now.
    admin(&store)
        .cancel_jobs(&CancelRequest {
            ids: vec![id("w")],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
    assert_eq!(admin(&store).purge_jobs(&purge).await.unwrap(), [id("a")]);
    match store
        .insert(after("late", &["a"], DependencyFailure::Wait))
        .await
    {
        Err(Error::Invalid(m)) => assert!(m.contains("not stored"), "{m}"),
        other => panic!("a job naming a purged job must be refused, got {other:?}"),
    }
}

/// A replay never leaves a job blocked on a dependency that can no longer
/// release it by the rules: one that is gone (purged), cancelled (under
/// `wait` or `cancel`), or dead under `cancel`. Replaying the dependency
/// first, or with it, is accepted; so is a `wait` dependent of a dead
/// dependency, which waits for that dependency's replay as always.
pub async fn a_replay_never_leaves_a_job_waiting_for_what_cannot_release_it(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let ops = admin(&store);
    let cancel = |names: &[&str]| CancelRequest {
        ids: names.iter().map(|s| id(s)).collect(),
        operator: "ops".into(),
        reason: None,
    };
    let replay = |names: &[&str]| ReplayRequest {
        ids: names.iter().map(|s| id(s)).collect(),
        operator: "ops".into(),
        reason: None,
    };
    let refused =
        |result: errand_core::Result<Vec<errand_core::Job>>, job: &str, dep: &str| match result {
            Err(Error::InvalidState {
                id: which, hint, ..
            }) => {
                assert_eq!(which, job);
                assert!(hint.contains(dep), "{hint}");
            }
            other => panic!("replaying {job} must be refused because of {dep}, got {other:?}"),
        };

    // b waits for a (not yet due); both are cancelled, b first.
    let later = errand_core::Schedule::After(Duration::from_secs(3600));
    store.insert(job("a").scheduled(later)).await.unwrap();
    store
        .insert(after("b", &["a"], DependencyFailure::Wait))
        .await
        .unwrap();
    ops.cancel_jobs(&cancel(&["b"])).await.unwrap();
    ops.cancel_jobs(&cancel(&["a"])).await.unwrap();
    let stepped = store.replay_jobs(&[id("b")], &stamp()).await.unwrap();
    assert!(
        stepped.is_empty(),
        "the replay step put b back ({:?}) while its dependency a is cancelled",
        stepped.iter().map(|j| j.state).collect::<Vec<_>>()
    );
    refused(ops.replay_jobs(&replay(&["b"])).await, "b", "a");
    assert_eq!(state(&*store, "b").await, JobState::Cancelled);
    // With its dependency, it waits for it again.
    let back = ops.replay_jobs(&replay(&["b", "a"])).await.unwrap();
    let states: Vec<(&str, JobState)> = back.iter().map(|j| (j.id.as_str(), j.state)).collect();
    assert_eq!(states, [("b", JobState::Blocked), ("a", JobState::Ready)]);

    // Under `cancel`, a dead dependency cancels: d is refused until c is
    // replayed.
    store.insert(job("c")).await.unwrap();
    store
        .insert(after("d", &["c"], DependencyFailure::Cancel))
        .await
        .unwrap();
    kill(&*store, "c").await;
    assert_eq!(state(&*store, "d").await, JobState::Cancelled);
    refused(ops.replay_jobs(&replay(&["d"])).await, "d", "c");
    ops.replay_jobs(&replay(&["c"])).await.unwrap();
    assert_eq!(
        ops.replay_jobs(&replay(&["d"])).await.unwrap()[0].state,
        JobState::Blocked
    );

    // A dependency purged since (nothing waited for it then): refused.
    store.insert(job("p")).await.unwrap();
    store
        .insert(after("q", &["p"], DependencyFailure::Cancel))
        .await
        .unwrap();
    kill(&*store, "p").await;
    assert_eq!(state(&*store, "q").await, JobState::Cancelled);
    let purge = errand_core::PurgeRequest {
        ids: vec![id("p")],
        operator: "ops".into(),
        reason: "clean up".into(),
    };
    ops.purge_jobs(&purge).await.unwrap();
    refused(ops.replay_jobs(&replay(&["q"])).await, "q", "p");
    assert_eq!(state(&*store, "q").await, JobState::Cancelled);

    // Under `wait`, a dead dependency keeps its dependent waiting: a
    // cancelled dependent replayed waits for it again.
    store.insert(job("m")).await.unwrap();
    store
        .insert(after("n", &["m"], DependencyFailure::Wait))
        .await
        .unwrap();
    kill(&*store, "m").await;
    ops.cancel_jobs(&cancel(&["n"])).await.unwrap();
    assert_eq!(
        ops.replay_jobs(&replay(&["n"])).await.unwrap()[0].state,
        JobState::Blocked
    );
}

/// A copy (`replay --new-key`) depends on what its original depends on,
/// under the same policy, so a workflow step's copy reads the same inputs;
/// it is judged against them at once as any enqueue is (ready when they
/// are done, blocked while they run). An original whose dependency is gone
/// is refused: its copy could never read its inputs.
pub async fn a_copy_depends_on_what_its_original_depends_on(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let ops = admin(&store);
    let copy = |name: &str| errand_core::CopyRequest {
        ids: vec![id(name)],
        operator: "ops".into(),
        reason: None,
    };
    let deps_of = |job: JobId| {
        let store = Arc::clone(&store);
        async move {
            let detail = store.detail(&job).await.unwrap();
            detail
                .dependencies
                .iter()
                .map(|d| (d.id.to_string(), d.met))
                .collect::<Vec<_>>()
        }
    };

    // y ran after x and died: its copy is ready at once, x met.
    store.insert(job("x")).await.unwrap();
    store
        .insert(after("y", &["x"], DependencyFailure::Run))
        .await
        .unwrap();
    let x = claim_all(&*store).await;
    store.complete(&x[0].lease).await.unwrap();
    kill(&*store, "y").await;
    let copied = ops.copy_jobs(&copy("y")).await.unwrap();
    let y2 = copied[0].job.clone();
    assert_eq!(y2.state, JobState::Ready);
    assert_eq!(y2.on_dependency_failure, Some(DependencyFailure::Run));
    assert_eq!(deps_of(y2.id.clone()).await, [("x".to_owned(), true)]);

    // q, cancelled while p waits: its copy waits for p.
    let later = errand_core::Schedule::After(Duration::from_secs(3600));
    store.insert(job("p").scheduled(later)).await.unwrap();
    store
        .insert(after("q", &["p"], DependencyFailure::Cancel))
        .await
        .unwrap();
    ops.cancel_jobs(&CancelRequest {
        ids: vec![id("q")],
        operator: "ops".into(),
        reason: None,
    })
    .await
    .unwrap();
    let q2 = ops.copy_jobs(&copy("q")).await.unwrap()[0].job.clone();
    assert_eq!((q2.state, q2.waiting_on), (JobState::Blocked, 1));
    assert_eq!(deps_of(q2.id.clone()).await, [("p".to_owned(), false)]);

    // s's dependency r was purged: refused, nothing copied.
    store.insert(job("r")).await.unwrap();
    store
        .insert(after("s", &["r"], DependencyFailure::Cancel))
        .await
        .unwrap();
    kill(&*store, "r").await;
    ops.purge_jobs(&errand_core::PurgeRequest {
        ids: vec![id("r")],
        operator: "ops".into(),
        reason: "clean up".into(),
    })
    .await
    .unwrap();
    match ops.copy_jobs(&copy("s")).await {
        Err(Error::InvalidState {
            id: which, hint, ..
        }) => {
            assert_eq!(which, "s");
            assert!(hint.contains("job r") && hint.contains("gone"), "{hint}");
        }
        other => panic!("a copy of s must be refused: r is gone; got {other:?}"),
    }
}
