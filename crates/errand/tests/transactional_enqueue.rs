#![allow(clippy::unwrap_used)]
//! Transactional enqueue: the job commits with the caller's rows or not at all.

mod common;

use std::sync::Arc;

use errand::{Error, JobFilter, JobId, NewJob, Payload, Store, sqlite};

fn receipt(id: &str) -> NewJob {
    NewJob::new("receipt", Payload::from_json_text("{}").unwrap())
        .unwrap()
        .with_id(JobId::new(id).unwrap())
}

/// A typed job: the kind and queue come with the type.
#[derive(serde::Serialize, serde::Deserialize)]
struct Receipt {
    order: String,
}

impl errand::JobArgs for Receipt {
    const KIND: &'static str = "receipt";
    fn options() -> errand::JobOptions {
        errand::JobOptions {
            queue: Some("mail"),
            ..errand::JobOptions::default()
        }
    }
}

fn app_table(conn: &sqlite::rusqlite::Connection) {
    conn.execute_batch("CREATE TABLE IF NOT EXISTS orders (id TEXT PRIMARY KEY)")
        .unwrap();
}

#[tokio::test]
async fn a_committed_caller_transaction_commits_the_job() {
    let f = common::fixture();
    let mut conn = sqlite::rusqlite::Connection::open(&f.path).unwrap();
    app_table(&conn);
    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES ('o1')", []).unwrap();
    // The store's own clock stamps it: the call has the shape of
    // `PgStore::enqueue_in(&tx, job)`, without the await.
    let ins = f.store.enqueue_in(&tx, receipt("o1")).unwrap();
    assert!(ins.created);
    assert_eq!(ins.job.created_at, f.store.now());
    let typed = Receipt { order: "o1".into() };
    let typed = f.store.enqueue_in(&tx, &typed).unwrap().job;
    assert_eq!(
        (typed.kind.as_str(), typed.queue.as_str()),
        ("receipt", "mail")
    );
    assert_eq!(typed.payload.as_str(), r#"{"order":"o1"}"#);
    tx.commit().unwrap();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    assert_eq!(
        store
            .get(&JobId::new("o1").unwrap())
            .await
            .unwrap()
            .id
            .as_str(),
        "o1"
    );
}

#[tokio::test]
async fn a_rolled_back_caller_transaction_leaves_no_job() {
    let f = common::fixture();
    let mut conn = sqlite::rusqlite::Connection::open(&f.path).unwrap();
    app_table(&conn);
    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES ('o2')", []).unwrap();
    f.store.enqueue_in(&tx, receipt("o2")).unwrap();
    f.store
        .enqueue_in(&tx, &Receipt { order: "o2".into() })
        .unwrap();
    tx.rollback().unwrap();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    assert!(matches!(
        store.get(&JobId::new("o2").unwrap()).await,
        Err(Error::NotFound(_))
    ));
    assert!(store.list(&JobFilter::default()).await.unwrap().is_empty());
    let orders: i64 = conn
        .query_row("SELECT count(*) FROM orders", [], |r| r.get(0))
        .unwrap();
    assert_eq!(orders, 0);
}

#[tokio::test]
async fn writes_in_the_store_transaction_commit_or_roll_back_with_the_job() {
    let f = common::fixture();
    f.store
        .write(|c, _| {
            c.execute_batch("CREATE TABLE orders (id TEXT PRIMARY KEY)")
                .map_err(|e| Error::storage(e.to_string()))
        })
        .await
        .unwrap();
    // Committed together.
    f.store
        .write(|c, now| {
            c.execute("INSERT INTO orders VALUES ('o3')", [])
                .map_err(|e| Error::storage(e.to_string()))?;
            sqlite::enqueue_in(c, &receipt("o3"), now)
        })
        .await
        .unwrap();
    // An error after the enqueue undoes both, and only this operation.
    let failed: Result<(), Error> = f
        .store
        .write(|c, now| {
            c.execute("INSERT INTO orders VALUES ('o4')", [])
                .map_err(|e| Error::storage(e.to_string()))?;
            sqlite::enqueue_in(c, &receipt("o4"), now)?;
            Err(Error::invalid("insufficient funds"))
        })
        .await;
    assert!(failed.is_err());
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    assert!(store.get(&JobId::new("o3").unwrap()).await.is_ok());
    assert!(matches!(
        store.get(&JobId::new("o4").unwrap()).await,
        Err(Error::NotFound(_))
    ));
    let orders = f
        .store
        .read(|c| {
            c.query_row("SELECT group_concat(id) FROM orders", [], |r| {
                r.get::<_, String>(0)
            })
            .map_err(|e| Error::storage(e.to_string()))
        })
        .await
        .unwrap();
    assert_eq!(orders, "o3");
}

#[tokio::test]
async fn a_failing_operation_does_not_undo_others_committed_in_the_same_batch() {
    let f = common::fixture();
    let store = f.store.clone();
    let mut tasks = Vec::new();
    for i in 0..40 {
        let s = store.clone();
        tasks.push(tokio::spawn(async move {
            s.write(move |c, now| {
                sqlite::enqueue_in(c, &receipt(&format!("b{i}")), now)?;
                if i % 2 == 1 {
                    Err(Error::invalid("odd"))
                } else {
                    Ok(())
                }
            })
            .await
        }));
    }
    let mut ok = 0;
    for t in tasks {
        if t.await.unwrap().is_ok() {
            ok += 1;
        }
    }
    assert_eq!(ok, 20);
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    let jobs = store.list(&JobFilter::default()).await.unwrap();
    assert_eq!(jobs.len(), 20);
    assert!(
        jobs.iter()
            .all(|j| j.id.as_str()[1..].parse::<u32>().unwrap() % 2 == 0)
    );
}

#[tokio::test]
async fn a_handler_can_complete_its_job_in_the_same_transaction_as_its_effect() {
    use errand::{Handler, Outcome, WorkOutcome, Worker, WorkerConfig, handler_fn};
    let f = common::fixture();
    f.store
        .write(|c, _| {
            c.execute_batch("CREATE TABLE effects (job_id TEXT PRIMARY KEY)")
                .map_err(|e| Error::storage(e.to_string()))
        })
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    store.insert(receipt("t1")).await.unwrap();
    let sqlite = f.store.clone();
    let handler: Arc<dyn Handler> = Arc::new(handler_fn(move |ctx| {
        let sqlite = sqlite.clone();
        async move {
            let lease = ctx.lease.clone();
            let result = sqlite
                .write(move |c, now| {
                    c.execute("INSERT INTO effects VALUES (?1)", [lease.id.as_str()])
                        .map_err(|e| Error::storage(e.to_string()))?;
                    sqlite::complete_in(c, &lease, now)
                })
                .await;
            match result {
                Ok(_) => Outcome::Completed,
                Err(e) => Outcome::retry(e),
            }
        }
    }));
    let config = WorkerConfig {
        heartbeat: false,
        ..WorkerConfig::default()
    };
    let report = Worker::new(store.clone(), config)
        .run_once(handler)
        .await
        .unwrap();
    assert_eq!(report.outcome, WorkOutcome::Acknowledged);
    let job = store.get(&JobId::new("t1").unwrap()).await.unwrap();
    assert_eq!((job.state, job.attempts), (errand::JobState::Done, 1));

    // A stale lease: the fenced completion fails and the effect rolls back.
    store.insert(receipt("t2")).await.unwrap();
    let req = errand::ClaimRequest {
        queues: vec![],
        limit: 1,
        lease: std::time::Duration::from_secs(1),
        rate: None,
        reclaim: true,
    };
    let claimed = store.claim(&req).await.unwrap().remove(0);
    f.clock.advance(std::time::Duration::from_secs(1));
    let lease = claimed.lease.clone();
    let stale = f
        .store
        .write(move |c, now| {
            c.execute("INSERT INTO effects VALUES (?1)", [lease.id.as_str()])
                .map_err(|e| Error::storage(e.to_string()))?;
            sqlite::complete_in(c, &lease, now)
        })
        .await;
    assert!(matches!(stale, Err(Error::LeaseLost { .. })));
    let effects: Vec<String> = f
        .store
        .read(|c| {
            let mut stmt = c
                .prepare("SELECT job_id FROM effects ORDER BY 1")
                .map_err(|e| Error::storage(e.to_string()))?;
            let rows: Vec<String> = stmt
                .query_map([], |r| r.get(0))
                .map_err(|e| Error::storage(e.to_string()))?
                .collect::<Result<_, _>>()
                .map_err(|e| Error::storage(e.to_string()))?;
            Ok(rows)
        })
        .await
        .unwrap();
    assert_eq!(
        effects,
        vec!["t1"],
        "the stale attempt's effect rolled back with its refused completion"
    );
}

/// A whole workflow goes in with the caller's rows, inside the caller's
/// transaction, or not at all.
#[tokio::test]
async fn a_workflow_commits_or_rolls_back_with_the_callers_transaction() {
    let f = common::fixture();
    let mut conn = sqlite::rusqlite::Connection::open(&f.path).unwrap();
    app_table(&conn);
    let build = || {
        let mut wf = errand::Workflow::with_id(errand::WorkflowId::new("order-9").unwrap());
        let a = wf.step(receipt("w-a"));
        wf.step_after(receipt("w-b"), &[&a]);
        wf
    };
    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES ('o9')", []).unwrap();
    f.store.enqueue_many_in(&tx, &build().into_jobs()).unwrap();
    tx.rollback().unwrap();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    let admin = errand::Admin::new(Arc::clone(&store));
    let gone = admin
        .workflow(&errand::WorkflowId::new("order-9").unwrap(), None, 10)
        .await;
    assert!(matches!(gone, Err(Error::NoSuchWorkflow(_))), "{gone:?}");

    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES ('o9')", []).unwrap();
    let ins = f.store.enqueue_many_in(&tx, &build().into_jobs()).unwrap();
    assert!(ins.iter().all(|i| i.created));
    tx.commit().unwrap();
    let view = admin
        .workflow(&errand::WorkflowId::new("order-9").unwrap(), None, 10)
        .await
        .unwrap();
    assert_eq!(view.total, 2);
    assert_eq!(view.steps[1].depends_on, [JobId::new("w-a").unwrap()]);
    let all = store.list(&JobFilter::default()).await.unwrap();
    assert_eq!(all.len(), 2);
}

/// On the application's own connection in autocommit, a completion whose
/// job has dependents is still one commit with their release: the call
/// opens a transaction of its own and leaves the connection as it found it.
#[tokio::test]
async fn a_completion_on_an_autocommit_connection_releases_dependents_in_its_own_transaction() {
    let f = common::fixture();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    store.insert(receipt("first")).await.unwrap();
    store
        .insert(receipt("then").depends_on(JobId::new("first").unwrap()))
        .await
        .unwrap();
    let req = errand::ClaimRequest {
        queues: vec![],
        limit: 1,
        lease: std::time::Duration::from_secs(30),
        rate: None,
        reclaim: true,
    };
    let lease = store.claim(&req).await.unwrap().remove(0).lease;
    let conn = errand::sqlite::rusqlite::Connection::open(&f.path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    assert!(conn.is_autocommit());
    // When the release fails, the completion does not stay behind: one
    // transaction, not two commits.
    conn.execute_batch(
        "CREATE TRIGGER refuse BEFORE UPDATE ON errand_jobs WHEN OLD.id = 'then' \
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
    )
    .unwrap();
    let failed = f.store.complete_in(&conn, &lease);
    assert!(failed.is_err(), "{failed:?}");
    assert!(conn.is_autocommit());
    let first = store.get(&lease.id).await.unwrap();
    assert_eq!(first.state, errand::JobState::Running);
    let then = store.get(&JobId::new("then").unwrap()).await.unwrap();
    assert_eq!(then.state, errand::JobState::Blocked);
    conn.execute_batch("DROP TRIGGER refuse").unwrap();
    let done = f.store.complete_in(&conn, &lease).unwrap();
    assert_eq!(done.state, errand::JobState::Done);
    assert!(conn.is_autocommit(), "the call's own transaction is closed");
    let then = store.get(&JobId::new("then").unwrap()).await.unwrap();
    assert_eq!(then.state, errand::JobState::Ready);
    // Inside the application's transaction it joins that one instead.
    store.insert(receipt("second")).await.unwrap();
    let lease = store.claim(&req).await.unwrap().remove(0).lease;
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    f.store.complete_in(&conn, &lease).unwrap();
    assert!(!conn.is_autocommit());
    conn.execute_batch("ROLLBACK").unwrap();
    let second = store.get(&lease.id).await.unwrap();
    assert_eq!(
        second.state,
        errand::JobState::Running,
        "rolled back with the caller"
    );
}

/// A signal sent in the caller's transaction is delivered when it commits
/// and not at all when it rolls back.
#[tokio::test]
async fn a_signal_commits_or_rolls_back_with_the_callers_rows() {
    let f = common::fixture();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    let wait = receipt("h1")
        .awaiting("paid", None, errand::OnAwaitTimeout::Fail)
        .unwrap();
    store.insert(wait).await.unwrap();
    let id = JobId::new("h1").unwrap();
    let paid = errand::NewSignal::new(id.clone(), "paid").unwrap();
    let mut conn = sqlite::rusqlite::Connection::open(&f.path).unwrap();
    app_table(&conn);

    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES ('o1')", []).unwrap();
    assert!(f.store.signal_in(&tx, &paid).unwrap().delivered);
    tx.rollback().unwrap();
    assert_eq!(
        store.get(&id).await.unwrap().state,
        errand::JobState::Waiting
    );

    let tx = conn.transaction().unwrap();
    tx.execute("INSERT INTO orders VALUES ('o1')", []).unwrap();
    assert!(f.store.signal_in(&tx, &paid).unwrap().delivered);
    tx.commit().unwrap();
    assert_eq!(store.get(&id).await.unwrap().state, errand::JobState::Ready);
}

/// Children added with a completion on the application's own SQLite
/// connection: rolled back with the caller's transaction, nothing of them
/// exists; in autocommit the call commits on its own, the child stored and
/// the join waiting for it.
#[tokio::test]
async fn children_added_on_the_callers_connection_commit_or_roll_back_with_it() {
    let f = common::fixture();
    let store: Arc<dyn Store> = Arc::new(f.store.clone());
    store.insert(receipt("step")).await.unwrap();
    store
        .insert(receipt("join").depends_on(JobId::new("step").unwrap()))
        .await
        .unwrap();
    let req = errand::ClaimRequest {
        queues: vec![],
        limit: 1,
        lease: std::time::Duration::from_secs(30),
        rate: None,
        reclaim: true,
    };
    let lease = store.claim(&req).await.unwrap().remove(0).lease;
    let conn = errand::sqlite::rusqlite::Connection::open(&f.path).unwrap();
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    let kids = [receipt("kid")];
    conn.execute_batch("BEGIN IMMEDIATE").unwrap();
    let added = f
        .store
        .complete_with_children_in(&conn, &lease, None, &kids)
        .unwrap();
    assert_eq!(added.dependents, 1);
    conn.execute_batch("ROLLBACK").unwrap();
    assert_eq!(
        store.get(&lease.id).await.unwrap().state,
        errand::JobState::Running
    );
    assert!(store.get(&JobId::new("kid").unwrap()).await.is_err());
    f.store
        .complete_with_children_in(&conn, &lease, None, &kids)
        .unwrap();
    assert!(conn.is_autocommit(), "the call's own transaction is closed");
    let kid = store.get(&JobId::new("kid").unwrap()).await.unwrap();
    assert_eq!(kid.added_by.as_ref().map(JobId::as_str), Some("step"));
    let join = store.get(&JobId::new("join").unwrap()).await.unwrap();
    assert_eq!(
        (join.state, join.waiting_on),
        (errand::JobState::Blocked, 1)
    );
}
