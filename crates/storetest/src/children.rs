//! Children added at run time: a step that completes may add jobs to its
//! workflow in the same transaction, and the step's dependents then wait
//! for those children too, under their own failure policies. A step that
//! has lost its lease adds nothing; a child that breaks a rule is refused
//! with everything else of the completion.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    ClaimedJob, DependencyFailure, Error, ErrorClass, Failure, JobId, JobState, ManualClock,
    NewJob, Payload, Store, Workflow, WorkflowId,
};

use crate::{admin, assert_lease_lost, claim_req, get, job, reclaim_req};

const LEASE: Duration = Duration::from_secs(10);

fn id(s: &str) -> JobId {
    JobId::new(s).unwrap()
}

/// A workflow `wf`: step `list`, and `join` after it under `policy`.
async fn list_and_join(store: &dyn Store, wf: &str, policy: DependencyFailure) {
    let mut flow = Workflow::with_id(WorkflowId::new(wf).unwrap());
    let list = flow.step(job("list"));
    flow.step_after(job("join").on_dependency_failure(policy), &[&list]);
    store.insert_many(flow.into_jobs()).await.unwrap();
}

/// Claims every due job, sorted by id.
async fn claim_all(store: &dyn Store) -> Vec<ClaimedJob> {
    let mut got = store.claim(&reclaim_req(100, LEASE)).await.unwrap();
    got.sort_by(|a, b| a.job.id.cmp(&b.job.id));
    got
}

fn names(jobs: &[ClaimedJob]) -> Vec<&str> {
    jobs.iter().map(|c| c.job.id.as_str()).collect()
}

fn permanent(why: &str) -> Failure {
    Failure {
        error: why.to_owned(),
        class: ErrorClass::Permanent,
        retry: None,
    }
}

/// A step adds three pages (the third after the second, the first after
/// the step itself): they join its workflow; the join, which waited for
/// the step, now waits for each page too and stays blocked until the last
/// is done; its dependencies list the step, then the pages in order, and
/// its inputs include the pages' outputs.
pub async fn a_join_waits_for_the_children_its_step_added(store: Arc<dyn Store>, _: ManualClock) {
    list_and_join(store.as_ref(), "report-1", DependencyFailure::Wait).await;
    let list = claim_all(store.as_ref()).await;
    assert_eq!(names(&list), ["list"]);
    let pages = vec![
        job("page-1").depends_on(id("list")),
        job("page-2"),
        job("page-3").depends_on(id("page-2")),
    ];
    let output = Payload::from_json_text(r#"{"pages":3}"#).unwrap();
    let added = store
        .complete_with_children(&list[0].lease, Some(&output), &pages)
        .await
        .unwrap();
    assert_eq!(added.job.state, JobState::Done);
    assert_eq!(added.job.output.as_ref(), Some(&output));
    assert_eq!(added.dependents, 1, "the join waits for the children");
    let states: Vec<(&str, JobState)> = added
        .children
        .iter()
        .map(|c| (c.id.as_str(), c.state))
        .collect();
    assert_eq!(
        states,
        [
            ("page-1", JobState::Ready),
            ("page-2", JobState::Ready),
            ("page-3", JobState::Blocked),
        ],
        "a child after the step is met at once; one after a child waits"
    );
    for child in &added.children {
        assert_eq!(
            child.workflow.as_ref().map(WorkflowId::as_str),
            Some("report-1")
        );
        assert!(child.has_dependents, "{} releases the join", child.id);
        assert_eq!(child.added_by.as_ref().map(JobId::as_str), Some("list"));
        assert_eq!(child, &get(store.as_ref(), child.id.as_str()).await);
    }
    let join = get(store.as_ref(), "join").await;
    assert_eq!((join.state, join.waiting_on), (JobState::Blocked, 3));
    let detail = admin(&store).detail(&id("join")).await.unwrap();
    let deps: Vec<(&str, bool)> = detail
        .dependencies
        .iter()
        .map(|d| (d.id.as_str(), d.met))
        .collect();
    assert_eq!(
        deps,
        [
            ("list", true),
            ("page-1", false),
            ("page-2", false),
            ("page-3", false)
        ]
    );
    let view = admin(&store)
        .workflow(&WorkflowId::new("report-1").unwrap(), None, 100)
        .await
        .unwrap();
    assert_eq!(view.total, 5, "the pages are steps of the workflow");
    // The pages run; the join is released by the last one only.
    let ready = claim_all(store.as_ref()).await;
    assert_eq!(names(&ready), ["page-1", "page-2"]);
    for c in &ready {
        let out = Payload::from_json_text(format!(r#""{}""#, c.job.id)).unwrap();
        store.complete_with_output(&c.lease, &out).await.unwrap();
    }
    assert_eq!(get(store.as_ref(), "join").await.state, JobState::Blocked);
    let last = claim_all(store.as_ref()).await;
    assert_eq!(names(&last), ["page-3"]);
    store.complete(&last[0].lease).await.unwrap();
    let join = get(store.as_ref(), "join").await;
    assert_eq!((join.state, join.waiting_on), (JobState::Ready, 0));
    let inputs = store.dependency_outputs(&id("join")).await.unwrap();
    let inputs: Vec<(&str, Option<&str>)> = inputs
        .iter()
        .map(|(d, o)| (d.as_str(), o.as_ref().map(Payload::as_str)))
        .collect();
    assert_eq!(
        inputs,
        [
            ("list", Some(r#"{"pages":3}"#)),
            ("page-1", Some(r#""page-1""#)),
            ("page-2", Some(r#""page-2""#)),
            ("page-3", None),
        ]
    );
}

/// A step whose lease has expired adds nothing: its completion is refused
/// as lost, no child exists, the join still waits for the step alone;
/// the attempt that took it over adds its own children, and only those
/// exist.
pub async fn a_child_added_by_a_step_that_loses_its_lease_never_exists(
    store: Arc<dyn Store>,
    clock: ManualClock,
) {
    list_and_join(store.as_ref(), "report-2", DependencyFailure::Wait).await;
    let first = claim_all(store.as_ref()).await;
    clock.advance(LEASE + Duration::from_secs(1));
    let second = claim_all(store.as_ref()).await;
    assert_eq!(names(&second), ["list"], "the expired lease is taken over");
    let stale = vec![job("stale-1"), job("stale-2").depends_on(id("list"))];
    assert_lease_lost(
        store
            .complete_with_children(&first[0].lease, None, &stale)
            .await,
    );
    for gone in ["stale-1", "stale-2"] {
        assert!(
            matches!(store.get(&id(gone)).await, Err(Error::NotFound(_))),
            "{gone} was added by a step that had lost its lease"
        );
    }
    let join = get(store.as_ref(), "join").await;
    assert_eq!((join.state, join.waiting_on), (JobState::Blocked, 1));
    assert_eq!(get(store.as_ref(), "list").await.state, JobState::Running);
    let added = store
        .complete_with_children(&second[0].lease, None, &[job("fresh")])
        .await
        .unwrap();
    assert_eq!(added.children.len(), 1);
    let join = get(store.as_ref(), "join").await;
    assert_eq!((join.state, join.waiting_on), (JobState::Blocked, 1));
    let detail = admin(&store).detail(&id("join")).await.unwrap();
    let deps: Vec<&str> = detail.dependencies.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(deps, ["list", "fresh"]);
    // A lease lost a second time adds nothing either.
    assert_lease_lost(
        store
            .complete_with_children(&second[0].lease, None, &[job("late")])
            .await,
    );
    assert!(matches!(
        store.get(&id("late")).await,
        Err(Error::NotFound(_))
    ));
}

/// The dependents' own policies apply to the edges to the children: a
/// child that dies cancels a `cancel` dependent and passes a `run` one,
/// which is released once the other child is done.
pub async fn children_follow_each_dependents_failure_policy(store: Arc<dyn Store>, _: ManualClock) {
    store.insert(job("step")).await.unwrap();
    let step_dep = |name: &str, policy| {
        job(name)
            .depends_on(id("step"))
            .on_dependency_failure(policy)
    };
    store
        .insert_many(vec![
            step_dep("strict", DependencyFailure::Cancel),
            step_dep("lenient", DependencyFailure::Run),
        ])
        .await
        .unwrap();
    let step = claim_all(store.as_ref()).await;
    assert_eq!(names(&step), ["step"]);
    let added = store
        .complete_with_children(&step[0].lease, None, &[job("c-bad"), job("c-good")])
        .await
        .unwrap();
    assert_eq!(added.dependents, 2);
    assert!(added.job.added_by.is_none(), "the step was enqueued");
    assert!(
        added
            .children
            .iter()
            .all(|c| c.added_by.as_ref().map(JobId::as_str) == Some("step")),
    );
    assert!(
        added.children.iter().all(|c| c.workflow.is_none()),
        "the step has no workflow"
    );
    let kids = claim_all(store.as_ref()).await;
    assert_eq!(names(&kids), ["c-bad", "c-good"]);
    store
        .fail(&kids[0].lease, permanent("no such page"))
        .await
        .unwrap();
    let strict = get(store.as_ref(), "strict").await;
    assert_eq!(
        strict.state,
        JobState::Cancelled,
        "cancel: a dead child cancels it"
    );
    let lenient = get(store.as_ref(), "lenient").await;
    assert_eq!((lenient.state, lenient.waiting_on), (JobState::Blocked, 1));
    store.complete(&kids[1].lease).await.unwrap();
    assert_eq!(get(store.as_ref(), "lenient").await.state, JobState::Ready);
}

/// Children that break a rule are refused, and nothing of the completion
/// is written — the step is still running under its lease — whether the
/// store or the check before it refuses: an id already stored, a
/// dependency on a blocked job, another workflow, a unique rule.
pub async fn refused_children_leave_the_step_running_and_write_nothing(
    store: Arc<dyn Store>,
    _: ManualClock,
) {
    list_and_join(store.as_ref(), "report-3", DependencyFailure::Wait).await;
    store.insert(job("taken")).await.unwrap();
    let list = store.claim(&claim_req(1, LEASE)).await.unwrap();
    assert_eq!(names(&list), ["list"]);
    let lease = &list[0].lease;
    let refusals: Vec<(Vec<NewJob>, &str)> = vec![
        (vec![job("ok-1"), job("taken")], "already exists"),
        (vec![job("ok-2").depends_on(id("join"))], "which is blocked"),
        (
            vec![job("ok-3").in_workflow(WorkflowId::new("elsewhere").unwrap())],
            "joins the workflow of the step",
        ),
        (
            vec![job("ok-4").unique_for(Duration::from_secs(60))],
            "unique or debounced",
        ),
        (vec![job("ok-5").depends_on(id("nowhere"))], "nowhere"),
    ];
    for (children, says) in refusals {
        match store.complete_with_children(lease, None, &children).await {
            Err(Error::Invalid(why)) => assert!(why.contains(says), "{says}: {why}"),
            other => panic!("expected the children to be refused ({says}), got {other:?}"),
        }
        let step = get(store.as_ref(), "list").await;
        assert_eq!(step.state, JobState::Running, "the step is not completed");
        for child in &children {
            let cid = child.id.as_ref().unwrap();
            if cid.as_str() != "taken" {
                assert!(
                    matches!(store.get(cid).await, Err(Error::NotFound(_))),
                    "{cid} was written"
                );
            }
        }
        let join = get(store.as_ref(), "join").await;
        assert_eq!(join.waiting_on, 1, "the join gained no edge");
    }
    // The same step may then complete with children that keep the rules.
    let added = store
        .complete_with_children(lease, None, &[job("ok-6").depends_on(id("taken"))])
        .await
        .unwrap();
    assert_eq!(added.children[0].state, JobState::Blocked);
    assert_eq!(get(store.as_ref(), "join").await.waiting_on, 1);
}

/// Steps that share a join complete at once, each adding children, while
/// others complete without: the join counts every child of every step,
/// and is released by the last job it waits for, not before.
pub async fn concurrent_completions_adding_children_count_every_child(
    store: Arc<dyn Store>,
    _: ManualClock,
) {
    const STEPS: usize = 8;
    let mut flow = Workflow::with_id(WorkflowId::new("fan").unwrap());
    let steps: Vec<JobId> = (0..STEPS)
        .map(|i| flow.step(job(&format!("s{i}"))))
        .collect();
    let refs: Vec<&JobId> = steps.iter().collect();
    flow.step_after(job("join"), &refs);
    store.insert_many(flow.into_jobs()).await.unwrap();
    let claimed = claim_all(store.as_ref()).await;
    assert_eq!(claimed.len(), STEPS);
    let mut tasks = Vec::new();
    for (i, c) in claimed.into_iter().enumerate() {
        let store = Arc::clone(&store);
        tasks.push(tokio::spawn(async move {
            // Odd steps add two children each; even ones none.
            let kids: Vec<NewJob> = if i % 2 == 1 {
                vec![job(&format!("k{i}a")), job(&format!("k{i}b"))]
            } else {
                Vec::new()
            };
            store
                .complete_with_children(&c.lease, None, &kids)
                .await
                .unwrap()
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let children = 2 * (STEPS / 2);
    let join = get(store.as_ref(), "join").await;
    assert_eq!(
        (join.state, join.waiting_on as usize),
        (JobState::Blocked, children),
        "every step released, every child counted"
    );
    let mut left = children;
    while left > 0 {
        assert_eq!(get(store.as_ref(), "join").await.state, JobState::Blocked);
        let kids = store.claim(&claim_req(1, LEASE)).await.unwrap();
        assert_eq!(kids.len(), 1, "{left} children left, one must be due");
        store.complete(&kids[0].lease).await.unwrap();
        left -= 1;
    }
    assert_eq!(get(store.as_ref(), "join").await.state, JobState::Ready);
}
