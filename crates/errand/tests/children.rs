#![allow(clippy::unwrap_used)]
//! A handler adds children with `ctx.add_children`: stored only when its
//! attempt succeeds, in the completion's transaction, and waited for by the
//! step's dependents. The classic report: a step lists the pages, adds one
//! child per page, and the join reads every page's output.

use std::sync::Arc;

use errand::testkit::TestQueue;
use errand::{
    Client, Handler, JobId, JobState, NewJob, Outcome, Payload, WorkOutcome, Workflow, WorkflowId,
    handler_fn,
};

fn job(kind: &str, id: &str) -> NewJob {
    NewJob::new(kind, Payload::default())
        .unwrap()
        .with_id(JobId::new(id).unwrap())
}

/// `list` adds one `page` per page (3), each recording its number; `join`
/// records how many outputs it read; `flaky-list` adds children and then
/// fails; `bad-list` adds a child that depends on a blocked job.
fn report_handler() -> Arc<dyn Handler> {
    Arc::new(handler_fn(|ctx| async move {
        match ctx.job.kind.as_str() {
            "list" => {
                let pages = (1..=3).map(|n| {
                    NewJob::new(
                        "page",
                        Payload::from_json_text(format!(r#"{{"n":{n}}}"#)).unwrap(),
                    )
                    .unwrap()
                });
                let ids = ctx.add_children(pages);
                assert_eq!(ids.len(), 3);
                Outcome::success_with(&serde_json::json!({"pages": 3}))
            }
            "page" => {
                let n: serde_json::Value = ctx.payload().unwrap();
                Outcome::success_with(&n["n"])
            }
            "join" => {
                let inputs = ctx.dependency_outputs().await.unwrap();
                Outcome::success_with(&inputs.len())
            }
            "flaky-list" => {
                ctx.add_child(job("page", "never"));
                Outcome::retry("the listing timed out")
            }
            "bad-list" => {
                ctx.add_child(job("page", "bad-child").depends_on(JobId::new("join").unwrap()));
                Outcome::Success
            }
            other => Outcome::permanent(format!("no handler for {other}")),
        }
    }))
}

#[tokio::test]
async fn a_join_runs_after_every_page_its_step_added() {
    let q = TestQueue::new().unwrap();
    let mut flow = Workflow::with_id(WorkflowId::new("report-7").unwrap());
    let list = flow.step(job("list", "list"));
    flow.step_after(job("join", "join"), &[&list]);
    Client::new(q.store()).enqueue_workflow(flow).await.unwrap();
    let handler = report_handler();
    let reports = q.run_due(handler.clone()).await.unwrap();
    assert!(
        reports
            .iter()
            .all(|r| r.outcome == WorkOutcome::Acknowledged),
        "{reports:?}"
    );
    // list, its three pages, then the join.
    assert_eq!(reports.len(), 5, "{reports:?}");
    assert_eq!(reports[4].job_id.as_ref().map(JobId::as_str), Some("join"));
    let pages: Vec<_> = q
        .jobs()
        .await
        .unwrap()
        .into_iter()
        .filter(|j| j.kind.as_str() == "page")
        .collect();
    assert_eq!(pages.len(), 3);
    assert!(pages.iter().all(|p| p.state == JobState::Done
        && p.workflow.as_ref().map(WorkflowId::as_str) == Some("report-7")));
    let join = q.store().get(&JobId::new("join").unwrap()).await.unwrap();
    assert_eq!(join.state, JobState::Done);
    assert_eq!(
        join.output.as_ref().map(Payload::as_str),
        Some("4"),
        "list and 3 pages"
    );
}

#[tokio::test]
async fn children_of_a_failed_attempt_are_not_stored_and_a_refused_child_fails_the_step() {
    let q = TestQueue::new().unwrap();
    let store = q.store();
    store.insert(job("flaky-list", "flaky")).await.unwrap();
    let reports = q.run_due(report_handler()).await.unwrap();
    assert_eq!(reports[0].outcome, WorkOutcome::RetryScheduled);
    assert!(
        store.get(&JobId::new("never").unwrap()).await.is_err(),
        "no child of a failure"
    );

    store.insert(job("list", "list-2")).await.unwrap();
    store
        .insert(job("join", "join").depends_on(JobId::new("list-2").unwrap()))
        .await
        .unwrap();
    store.insert(job("bad-list", "bad")).await.unwrap();
    let reports = q.run_due(report_handler()).await.unwrap();
    let bad = reports
        .iter()
        .find(|r| r.job_id.as_ref().map(JobId::as_str) == Some("bad"))
        .unwrap();
    assert_eq!(bad.outcome, WorkOutcome::Dead, "{reports:?}");
    let bad = store.get(&JobId::new("bad").unwrap()).await.unwrap();
    let error = bad.last_error.unwrap();
    assert!(
        error.contains("were refused") && error.contains("join"),
        "{error}"
    );
    assert_eq!(bad.last_error_class, Some(errand::ErrorClass::Permanent));
    assert!(store.get(&JobId::new("bad-child").unwrap()).await.is_err());
}

/// The same report run by a [`errand::Runtime`] (its settlements go through
/// the completion batcher; a completion with children bypasses it): the
/// join runs once, after every page.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_stores_children_and_runs_the_join_after_them() {
    let dir = tempfile::tempdir().unwrap();
    let options = errand::SqliteOptions {
        create: true,
        migrate: true,
        ..Default::default()
    };
    let store: Arc<dyn errand::Store> =
        Arc::new(errand::SqliteStore::open(dir.path().join("rt.db"), options).unwrap());
    let mut flow = Workflow::with_id(WorkflowId::new("report-8").unwrap());
    let list = flow.step(job("list", "list"));
    flow.step_after(job("join", "join"), &[&list]);
    Client::new(store.clone())
        .enqueue_workflow(flow)
        .await
        .unwrap();
    let runtime = errand::Runtime::builder(store.clone())
        .fallback(report_handler())
        .all_queues(4)
        .unwrap()
        .poll(std::time::Duration::from_millis(20))
        .build()
        .unwrap();
    let joined = {
        let store = store.clone();
        async move {
            for _ in 0..400 {
                let join = store.get(&JobId::new("join").unwrap()).await.unwrap();
                if join.state == JobState::Done {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(25)).await;
            }
            panic!("the join never ran");
        }
    };
    let stats = runtime.run_until(joined).await.unwrap();
    assert_eq!(stats.count(WorkOutcome::Acknowledged), 5);
    let join = store.get(&JobId::new("join").unwrap()).await.unwrap();
    assert_eq!(join.output.as_ref().map(Payload::as_str), Some("4"));
}
