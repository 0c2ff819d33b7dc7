//! Workflows, tags and metadata: a graph of jobs enqueued whole under one
//! id, shown and acted on as a whole; tags that find their jobs through an
//! index of their own, and go with them.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    CopyRequest, DependencyFailure, Error, ErrorClass, Failure, JobFilter, JobId, JobState,
    ManualClock, PurgeRequest, Store, Workflow, WorkflowAction, WorkflowId,
};

use crate::{admin, claim_req, get, job};

const LEASE: Duration = Duration::from_secs(10);

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

fn wid(s: &str) -> WorkflowId {
    WorkflowId::new(s).unwrap()
}

fn action(w: &str, reason: &str) -> WorkflowAction {
    WorkflowAction {
        id: wid(w),
        operator: "ops".into(),
        reason: Some(reason.into()),
    }
}

fn ids(jobs: &[errand_core::Job]) -> Vec<&str> {
    jobs.iter().map(|j| j.id.as_str()).collect()
}

async fn listed(store: &Arc<dyn Store>, filter: JobFilter) -> Vec<String> {
    admin(store)
        .list(&filter)
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id.to_string())
        .collect()
}

/// A workflow's steps go in whole in one call — or, refused, none does —
/// each carrying the workflow's id, its tags and metadata as stored; the
/// workflow view counts steps by state and pages through them oldest
/// first with the ids each depends on.
pub async fn a_workflow_is_enqueued_whole_and_shown_step_by_step(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let mut wf = Workflow::with_id(wid("order-7/fulfil"));
    let a = wf.step(
        job("a")
            .with_tag("eu")
            .unwrap()
            .with_tag("customer:42")
            .unwrap()
            .with_meta("owner", "Ada \"the\" Countess"),
    );
    clock.advance(Duration::from_millis(1));
    let b = wf.step_after(job("b"), &[&a]);
    let c = wf.step_after(job("c"), &[&b, &a]);
    let inserted = store.insert_many(wf.into_jobs()).await.unwrap();
    assert!(inserted.iter().all(|i| i.created));
    for i in &inserted {
        let mut stored = store.get(&i.job.id).await.unwrap();
        // The answer describes each row as inserted, before the call's
        // later steps named it as a dependency.
        stored.has_dependents = i.job.has_dependents;
        assert_eq!(i.job, stored, "what insert answers is what is stored");
        assert_eq!(
            stored.workflow.as_ref().map(WorkflowId::as_str),
            Some("order-7/fulfil")
        );
    }
    let a_row = get(&*store, "a").await;
    assert_eq!(a_row.tags, ["eu", "customer:42"]);
    assert_eq!(
        a_row.meta.get("owner").map(String::as_str),
        Some("Ada \"the\" Countess")
    );
    assert!(get(&*store, "b").await.tags.is_empty());

    let view = admin(&store)
        .workflow(&wid("order-7/fulfil"), None, 100)
        .await
        .unwrap();
    assert_eq!(view.total, 3);
    assert_eq!(view.count(JobState::Ready), 1);
    assert_eq!(view.count(JobState::Blocked), 2);
    assert!(!view.finished());
    let steps: Vec<(&str, Vec<&str>)> = view
        .steps
        .iter()
        .map(|s| {
            (
                s.job.id.as_str(),
                s.depends_on.iter().map(JobId::as_str).collect(),
            )
        })
        .collect();
    assert_eq!(
        steps,
        [("a", vec![]), ("b", vec!["a"]), ("c", vec!["b", "a"])],
        "steps oldest first, dependencies in the order named"
    );
    assert_eq!(view.next_after, None);
    let first = admin(&store)
        .workflow(&wid("order-7/fulfil"), None, 2)
        .await
        .unwrap();
    assert_eq!(first.steps.len(), 2);
    assert_eq!(first.next_after, Some(b.clone()));
    let rest = admin(&store)
        .workflow(&wid("order-7/fulfil"), Some(b), 2)
        .await
        .unwrap();
    assert_eq!(rest.steps.len(), 1);
    assert_eq!(rest.steps[0].job.id, c);
    assert_eq!(rest.total, 3, "the counts cover the whole workflow");

    // An id given twice in one call is created from its first occurrence,
    // with that occurrence's dependencies only.
    let twice = store
        .insert_many(vec![
            job("dup").depends_on(id("a")),
            job("dup").depends_on(id("a")).depends_on(id("b")),
        ])
        .await
        .unwrap();
    assert!(twice[0].created && !twice[1].created);
    let dup = get(&*store, "dup").await;
    assert_eq!((dup.state, dup.waiting_on), (JobState::Blocked, 1));
    let deps = store.dependency_edges(&[id("dup")], 10).await.unwrap();
    assert_eq!(
        deps,
        [errand_core::StepEdge {
            job: id("dup"),
            depends_on: id("a"),
            of: 1
        }]
    );

    // A workflow with a cycle is refused whole: none of its steps exists.
    let mut bad = Workflow::with_id(wid("cyclic"));
    bad.step(job("x"));
    bad.step(job("y").depends_on(id("z")));
    bad.step(job("z").depends_on(id("y")));
    let err = store.insert_many(bad.into_jobs()).await.unwrap_err();
    assert!(matches!(err, Error::Invalid(_)), "{err}");
    assert!(matches!(store.get(&id("x")).await, Err(Error::NotFound(_))));
    let missing = admin(&store).workflow(&wid("cyclic"), None, 10).await;
    assert!(
        matches!(missing, Err(Error::NoSuchWorkflow(_))),
        "{missing:?}"
    );
    let none = admin(&store).cancel_workflow(&action("cyclic", "x")).await;
    assert!(matches!(none, Err(Error::NoSuchWorkflow(_))), "{none:?}");
    let none = admin(&store).replay_workflow(&action("cyclic", "x")).await;
    assert!(matches!(none, Err(Error::NoSuchWorkflow(_))), "{none:?}");
}

/// Steps enqueued one call at a time are shown with their workflow just as
/// steps enqueued together are, an existing step enqueued again is shown
/// once, and steps purged or pruned leave the workflow (a workflow whose
/// steps are all gone is not found).
pub async fn a_workflow_shows_steps_enqueued_one_by_one_until_they_are_removed(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let mut wf = Workflow::with_id(wid("one-by-one"));
    wf.step(job("s1"));
    wf.step(job("s2"));
    for step in wf.into_jobs() {
        assert!(store.insert(step).await.unwrap().created);
        clock.advance(Duration::from_millis(1));
    }
    let mut again = Workflow::with_id(wid("one-by-one"));
    again.step(job("s1"));
    let repeated = store.insert_many(again.into_jobs()).await.unwrap();
    assert!(!repeated[0].created);
    let view = admin(&store)
        .workflow(&wid("one-by-one"), None, 10)
        .await
        .unwrap();
    assert_eq!(view.total, 2, "each step counted once");
    assert_eq!(view.count(JobState::Ready), 2);
    let shown: Vec<&str> = view.steps.iter().map(|s| s.job.id.as_str()).collect();
    assert_eq!(shown, ["s1", "s2"]);
    let by_filter = JobFilter {
        workflow: Some(wid("one-by-one")),
        ..JobFilter::default()
    };
    assert_eq!(listed(&store, by_filter.clone()).await, ["s1", "s2"]);

    let first = store.claim(&claim_req(1, LEASE)).await.unwrap();
    assert_eq!(
        ids(&first.iter().map(|c| c.job.clone()).collect::<Vec<_>>()),
        ["s1"]
    );
    let permanent = Failure {
        error: "no".into(),
        class: ErrorClass::Permanent,
        retry: None,
    };
    store.fail(&first[0].lease, permanent).await.unwrap();
    admin(&store)
        .purge_jobs(&PurgeRequest {
            ids: vec![id("s1")],
            operator: "ops".into(),
            reason: "gone".into(),
        })
        .await
        .unwrap();
    let view = admin(&store)
        .workflow(&wid("one-by-one"), None, 10)
        .await
        .unwrap();
    assert_eq!(view.total, 1, "a purged step leaves its workflow");
    assert_eq!(listed(&store, by_filter.clone()).await, ["s2"]);

    let claimed = store.claim(&claim_req(1, LEASE)).await.unwrap();
    assert_eq!(claimed.len(), 1);
    store.complete(&claimed[0].lease).await.unwrap();
    clock.advance(Duration::from_secs(3600));
    assert_eq!(store.prune(Duration::from_secs(60), 100).await.unwrap(), 1);
    assert!(listed(&store, by_filter).await.is_empty());
    let gone = admin(&store).workflow(&wid("one-by-one"), None, 10).await;
    assert!(matches!(gone, Err(Error::NoSuchWorkflow(_))), "{gone:?}");
}

/// Replaying a workflow replays its dead steps (a `wait` step then runs
/// once they succeed); cancelling it cancels every unfinished step —
/// blocked, ready and running (whose worker is then fenced off) — and
/// nothing else; each step changed has an audit entry naming the
/// workflow.
pub async fn cancelling_or_replaying_a_workflow_acts_on_its_steps_with_audit(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let mut wf = Workflow::with_id(wid("w"));
    let root = wf.step(job("root").with_max_attempts(1).unwrap());
    clock.advance(Duration::from_millis(1));
    wf.step_after(job("waits"), &[&root]);
    clock.advance(Duration::from_millis(1));
    wf.step_after(
        job("gives-up").on_dependency_failure(DependencyFailure::Cancel),
        &[&root],
    );
    clock.advance(Duration::from_millis(1));
    wf.step(job("later"));
    store.insert_many(wf.into_jobs()).await.unwrap();
    store.insert(job("outside")).await.unwrap();

    // root dies; `later` and `outside` are run and done.
    let claimed = store.claim(&claim_req(10, LEASE)).await.unwrap();
    for c in claimed {
        if c.job.id.as_str() == "root" {
            let failure = Failure {
                error: "provider down".into(),
                class: ErrorClass::Permanent,
                retry: None,
            };
            store.fail(&c.lease, failure).await.unwrap();
        } else {
            store.complete(&c.lease).await.unwrap();
        }
    }
    assert_eq!(get(&*store, "root").await.state, JobState::Dead);
    assert_eq!(get(&*store, "waits").await.state, JobState::Blocked);
    assert_eq!(get(&*store, "gives-up").await.state, JobState::Cancelled);

    let replayed = admin(&store)
        .replay_workflow(&action("w", "provider back"))
        .await
        .unwrap();
    assert_eq!(
        ids(&replayed.jobs),
        ["root"],
        "only dead steps are replayed"
    );
    let audit = admin(&store).detail(&id("root")).await.unwrap().audit;
    let last = audit.last().unwrap();
    assert_eq!(last.action, "replay");
    assert_eq!(
        last.reason.as_deref(),
        Some("replay workflow w: provider back")
    );
    let c = store.claim(&claim_req(10, LEASE)).await.unwrap();
    assert_eq!(
        ids(&c.iter().map(|c| c.job.clone()).collect::<Vec<_>>()),
        ["root"]
    );
    store.complete(&c[0].lease).await.unwrap();
    assert_eq!(get(&*store, "waits").await.state, JobState::Ready);

    // `waits` is running when the workflow is cancelled.
    let running = store.claim(&claim_req(10, LEASE)).await.unwrap();
    assert_eq!(running.len(), 1);
    assert_eq!(running[0].job.id.as_str(), "waits");
    let mut wf2 = Workflow::with_id(wid("w"));
    let more = wf2.step(job("added-later"));
    wf2.step_after(job("added-blocked"), &[&more]);
    store.insert_many(wf2.into_jobs()).await.unwrap();
    store.insert(job("outside-2")).await.unwrap();

    let cancelled = admin(&store)
        .cancel_workflow(&action("w", "order withdrawn"))
        .await
        .unwrap();
    let mut names = ids(&cancelled.jobs);
    names.sort_unstable();
    assert_eq!(names, ["added-blocked", "added-later", "waits"]);
    for name in ["added-blocked", "added-later", "waits"] {
        assert_eq!(
            get(&*store, name).await.state,
            JobState::Cancelled,
            "{name}"
        );
        let audit = admin(&store).detail(&id(name)).await.unwrap().audit;
        assert_eq!(
            audit.last().unwrap().reason.as_deref(),
            Some("cancel workflow w: order withdrawn"),
            "{name}"
        );
    }
    crate::assert_lease_lost(store.complete(&running[0].lease).await);
    for (name, state) in [
        ("root", JobState::Done),
        ("later", JobState::Done),
        ("gives-up", JobState::Cancelled),
        ("outside", JobState::Done),
        ("outside-2", JobState::Ready),
    ] {
        assert_eq!(get(&*store, name).await.state, state, "{name}");
    }
    let view = admin(&store).workflow(&wid("w"), None, 100).await.unwrap();
    assert!(view.finished());
    assert_eq!(view.count(JobState::Cancelled), 4);
    // Nothing is left to cancel or replay.
    let again = admin(&store).cancel_workflow(&action("w", "again")).await;
    assert!(again.unwrap().jobs.is_empty());
    let bad = WorkflowAction {
        operator: String::new(),
        ..action("w", "x")
    };
    assert!(matches!(
        admin(&store).replay_workflow(&bad).await,
        Err(Error::Invalid(_))
    ));
}

/// A tag lists its jobs oldest first, with the other filters and by
/// pages; a repeated id adds no second entry; a copy keeps the original's
/// tags, metadata and workflow; a pruned or purged job leaves its tags'
/// listings.
pub async fn tags_find_their_jobs_and_go_with_them(store: Arc<dyn Store>, clock: ManualClock) {
    let tagged = |name: &str, tags: &[&str]| {
        tags.iter()
            .fold(job(name), |j, t| j.with_tag(t).unwrap())
            .with_meta("by", name)
    };
    store.insert(tagged("t1", &["eu", "vip"])).await.unwrap();
    clock.advance(Duration::from_millis(1));
    store
        .insert_many(vec![
            tagged("t2", &["eu"]),
            tagged("t3", &["us"]),
            job("plain"),
        ])
        .await
        .unwrap();
    clock.advance(Duration::from_millis(1));
    store
        .insert(tagged("t4", &["eu"]).with_max_attempts(1).unwrap())
        .await
        .unwrap();
    // The same id again, with other tags: the stored job stands.
    let again = store.insert(tagged("t2", &["us", "eu"])).await.unwrap();
    assert!(!again.created);
    assert_eq!(again.job.tags, ["eu"]);
    let by_tag = |tag: &str| JobFilter {
        tag: Some(tag.into()),
        ..JobFilter::default()
    };
    assert_eq!(listed(&store, by_tag("eu")).await, ["t1", "t2", "t4"]);
    assert_eq!(listed(&store, by_tag("us")).await, ["t3"]);
    assert_eq!(listed(&store, by_tag("vip")).await, ["t1"]);
    assert!(listed(&store, by_tag("none")).await.is_empty());
    let page = JobFilter {
        limit: Some(2),
        ..by_tag("eu")
    };
    assert_eq!(listed(&store, page.clone()).await, ["t1", "t2"]);
    let next = JobFilter {
        after: Some(id("t2")),
        ..page
    };
    assert_eq!(listed(&store, next).await, ["t4"]);

    // t1 done, t4 dead; the state filter applies within the tag.
    let claimed = store.claim(&claim_req(10, LEASE)).await.unwrap();
    for c in claimed {
        match c.job.id.as_str() {
            "t1" => {
                store.complete(&c.lease).await.unwrap();
            }
            "t4" => {
                let f = Failure {
                    error: "no".into(),
                    class: ErrorClass::Permanent,
                    retry: None,
                };
                store.fail(&c.lease, f).await.unwrap();
            }
            _ => {
                store.release(&c.lease).await.unwrap();
            }
        }
    }
    let dead_eu = JobFilter {
        state: Some(JobState::Dead),
        ..by_tag("eu")
    };
    assert_eq!(listed(&store, dead_eu).await, ["t4"]);

    // A copy keeps the labels and is found by them.
    clock.advance(Duration::from_millis(1));
    let copied = admin(&store)
        .copy_jobs(&CopyRequest {
            ids: vec![id("t4")],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
    let copy = &copied[0].job;
    assert_eq!(copy.tags, ["eu"]);
    assert_eq!(copy.meta.get("by").map(String::as_str), Some("t4"));
    let eu = listed(&store, by_tag("eu")).await;
    assert_eq!(eu.len(), 4);
    assert_eq!(eu[3], copy.id.as_str());

    // Purged and pruned jobs leave their tags' listings.
    admin(&store)
        .purge_jobs(&PurgeRequest {
            ids: vec![id("t4")],
            operator: "ops".into(),
            reason: "gone".into(),
        })
        .await
        .unwrap();
    clock.advance(Duration::from_secs(3600));
    assert_eq!(store.prune(Duration::from_secs(60), 100).await.unwrap(), 1);
    assert!(matches!(
        store.get(&id("t1")).await,
        Err(Error::NotFound(_))
    ));
    let eu = listed(&store, by_tag("eu")).await;
    assert_eq!(eu, ["t2", copy.id.as_str()]);
    assert!(listed(&store, by_tag("vip")).await.is_empty());
    // An id given twice in one call is created from its first occurrence,
    // and carries its tags alone.
    store
        .insert_many(vec![
            tagged("twice", &["first"]),
            tagged("twice", &["second"]),
        ])
        .await
        .unwrap();
    assert_eq!(listed(&store, by_tag("first")).await, ["twice"]);
    assert!(listed(&store, by_tag("second")).await.is_empty());
    // A job re-created under a pruned id is listed once, with its own tags.
    store.insert(tagged("t1", &["vip"])).await.unwrap();
    assert_eq!(listed(&store, by_tag("vip")).await, ["t1"]);
    assert!(
        !listed(&store, by_tag("eu"))
            .await
            .contains(&"t1".to_owned())
    );
    // Refused labels write nothing.
    let too_many: Vec<String> = (0..21).map(|i| format!("t{i}")).collect();
    let mut bad = job("bad");
    bad.tags = too_many;
    assert!(matches!(store.insert(bad).await, Err(Error::Invalid(_))));
    let bad_meta = job("bad").with_meta("no spaces", "x");
    assert!(matches!(
        store.insert(bad_meta).await,
        Err(Error::Invalid(_))
    ));
    assert!(matches!(
        store.get(&id("bad")).await,
        Err(Error::NotFound(_))
    ));
}

fn bid(s: &str) -> errand_core::BatchId {
    errand_core::BatchId::new(s).unwrap()
}

/// A batch's `on_success` runs once every job is done, `on_finish` once
/// every job has ended: both wait while any job is unfinished, a dead job
/// holds `on_success` back (until replayed and done) while `on_finish`
/// runs; jobs done before the seal count at once.
pub async fn a_batch_runs_its_callbacks_once_its_jobs_have_ended(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    let b = bid("nightly");
    store
        .insert(job("first").in_batch(b.clone()))
        .await
        .unwrap();
    // One job finishes before the batch is sealed.
    let c = store.claim(&claim_req(1, LEASE)).await.unwrap();
    store.complete(&c[0].lease).await.unwrap();
    clock.advance(Duration::from_millis(1));
    store
        .insert_many(vec![
            job("second").in_batch(b.clone()),
            job("third")
                .in_batch(b.clone())
                .with_max_attempts(1)
                .unwrap(),
        ])
        .await
        .unwrap();
    let open = admin(&store).batch(&b).await.unwrap();
    assert_eq!(open.batch.sealed_at, None);
    assert_eq!(open.batch.total, 3);
    let sealed = store
        .seal_batch(&errand_core::BatchSeal {
            batch: b.clone(),
            on_success: Some(job("all-done")),
            on_finish: Some(job("all-ended")),
        })
        .await
        .unwrap();
    assert!(sealed.sealed_at.is_some());
    assert_eq!(sealed.on_success, Some(id("all-done")));
    assert_eq!(sealed.on_finish, Some(id("all-ended")));
    for name in ["all-done", "all-ended"] {
        let cb = get(&*store, name).await;
        assert_eq!((cb.state, cb.waiting_on), (JobState::Blocked, 2), "{name}");
    }
    // `second` succeeds, `third` dies.
    let running = store.claim(&claim_req(10, LEASE)).await.unwrap();
    assert_eq!(running.len(), 2);
    for r in running {
        if r.job.id.as_str() == "second" {
            store.complete(&r.lease).await.unwrap();
        } else {
            let failure = Failure {
                error: "no".into(),
                class: ErrorClass::Permanent,
                retry: None,
            };
            store.fail(&r.lease, failure).await.unwrap();
        }
    }
    assert_eq!(get(&*store, "all-ended").await.state, JobState::Ready);
    assert_eq!(get(&*store, "all-done").await.state, JobState::Blocked);
    let view = admin(&store).batch(&b).await.unwrap();
    assert_eq!(view.batch.states.len(), 2, "{:?}", view.batch.states);
    assert_eq!(
        view.on_finish_job.as_ref().map(|j| j.state),
        Some(JobState::Ready)
    );
    // An operator replays the dead job; once it is done, on_success runs.
    admin(&store)
        .replay_jobs(&errand_core::ReplayRequest {
            ids: vec![id("third")],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .unwrap();
    let mut running = store.claim(&claim_req(10, LEASE)).await.unwrap();
    running.sort_by(|x, y| x.job.id.cmp(&y.job.id));
    let names: Vec<&str> = running.iter().map(|r| r.job.id.as_str()).collect();
    assert_eq!(
        names,
        ["all-ended", "third"],
        "on_finish ran once, not again"
    );
    for r in &running {
        store.complete(&r.lease).await.unwrap();
    }
    let last = store.claim(&claim_req(10, LEASE)).await.unwrap();
    let names: Vec<&str> = last.iter().map(|r| r.job.id.as_str()).collect();
    assert_eq!(names, ["all-done"]);
    store.complete(&last[0].lease).await.unwrap();
    assert!(store.claim(&claim_req(10, LEASE)).await.unwrap().is_empty());
}

/// A sealed batch takes no more jobs, and sealing it again changes
/// nothing; a batch sealed empty has its callbacks due at once; an unknown
/// batch is not found.
pub async fn a_sealed_batch_takes_no_more_jobs(store: Arc<dyn Store>, _clock: ManualClock) {
    let b = bid("closed");
    store.insert(job("in").in_batch(b.clone())).await.unwrap();
    let seal = errand_core::BatchSeal {
        batch: b.clone(),
        on_success: Some(job("cb")),
        on_finish: None,
    };
    let sealed = store.seal_batch(&seal).await.unwrap();
    let late = store.insert(job("late").in_batch(b.clone())).await;
    assert!(
        matches!(&late, Err(Error::Invalid(m)) if m.contains("is sealed")),
        "{late:?}"
    );
    assert!(matches!(
        store.get(&id("late")).await,
        Err(Error::NotFound(_))
    ));
    let again = store
        .seal_batch(&errand_core::BatchSeal {
            on_finish: Some(job("cb2")),
            ..seal
        })
        .await
        .unwrap();
    assert_eq!(again.sealed_at, sealed.sealed_at);
    assert_eq!(again.on_finish, None);
    assert!(matches!(
        store.get(&id("cb2")).await,
        Err(Error::NotFound(_))
    ));

    // A callback whose id names a stored job would not wait for the batch:
    // the seal is refused and the batch stays open.
    store.insert(job("taken-b")).await.unwrap();
    let clash = store
        .seal_batch(&errand_core::BatchSeal {
            batch: bid("clash"),
            on_success: Some(job("taken-b")),
            on_finish: None,
        })
        .await;
    assert!(
        matches!(&clash, Err(Error::Invalid(m)) if m.contains("already names")),
        "{clash:?}"
    );
    store
        .insert(job("joins-later").in_batch(bid("clash")))
        .await
        .unwrap();
    let empty = store
        .seal_batch(&errand_core::BatchSeal {
            batch: bid("empty"),
            on_success: Some(job("empty-cb")),
            on_finish: None,
        })
        .await
        .unwrap();
    assert_eq!(empty.total, 0);
    assert_eq!(get(&*store, "empty-cb").await.state, JobState::Ready);
    let missing = admin(&store).batch(&bid("nowhere")).await;
    assert!(matches!(missing, Err(Error::NoSuchBatch(_))), "{missing:?}");
}

/// A page of a workflow's steps is bounded by what it holds, edges
/// included: each step lists its first
/// [`errand_core::WorkflowStep::DEPENDENCIES_SHOWN`] dependencies with how
/// many it has, and the page ends at the step whose payload and listed
/// edges spend the byte budget (here the fourth of five, which the
/// payloads alone would not have ended), the next page starting after it.
pub async fn a_workflow_page_counts_its_edges_in_its_byte_budget(
    store: Arc<dyn Store>,
    _clock: ManualClock,
) {
    let deps: Vec<JobId> = (0..150).map(|n| id(&format!("dep-{n:036}"))).collect();
    store
        .insert_many(deps.iter().map(|d| job(d.as_str())).collect())
        .await
        .unwrap();
    // Each step weighs 1,046,000 bytes by its payload (and 512 for the
    // rest): four stay under the 4 MiB budget, with their shown edges
    // (100 of 48 bytes each) they pass it.
    let payload = format!(r#""{}""#, "x".repeat(1_046_000 - 512 - 2));
    let mut wf = Workflow::with_id(wid("wide"));
    for n in 1..=5 {
        let step = deps.iter().fold(
            errand_core::NewJob {
                payload: errand_core::Payload::from_json_text(&payload).unwrap(),
                ..job(&format!("s{n}"))
            },
            |step, d| step.depends_on(d.clone()),
        );
        wf.step(step);
    }
    store.insert_many(wf.into_jobs()).await.unwrap();

    let page = admin(&store)
        .workflow(&wid("wide"), None, 100)
        .await
        .unwrap();
    let shown: Vec<&str> = page.steps.iter().map(|s| s.job.id.as_str()).collect();
    assert_eq!(
        shown,
        ["s1", "s2", "s3", "s4"],
        "the edges count in the budget"
    );
    assert_eq!(page.next_after, Some(id("s4")));
    for step in &page.steps {
        assert_eq!(step.depends_on, deps[..100], "the first named, in order");
        assert_eq!(step.depends_on_count, 150);
    }
    let rest = admin(&store)
        .workflow(&wid("wide"), page.next_after.clone(), 100)
        .await
        .unwrap();
    let shown: Vec<&str> = rest.steps.iter().map(|s| s.job.id.as_str()).collect();
    assert_eq!((shown, rest.next_after), (vec!["s5"], None));
}
