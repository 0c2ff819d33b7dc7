//! Enqueue and complete inside a sqlx transaction (feature `sqlx`).
//! Needs `ERRAND_TEST_POSTGRES_URL`; says SKIPPED without it.
#![cfg(feature = "sqlx")]

use errand_core::{AdminStore, JobStore};
use errand_core::{Error, JobId, JobState, NewJob, Payload, WorkflowId};
use errand_postgres::sqlx_adapter::{complete_in, enqueue_in};
use errand_postgres::{PgOptions, PgStore};
use sqlx::Connection;

/// An sqlx connection and a store over a fresh, migrated `schema`.
async fn setup(url: &str, schema: &str) -> (sqlx::PgConnection, PgStore) {
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("sqlx connect");
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(&mut conn)
        .await
        .expect("drop");
    let store = PgStore::connect(
        url,
        PgOptions {
            schema: schema.into(),
            migrate: true,
            ..PgOptions::default()
        },
    )
    .await
    .expect("store");
    (conn, store)
}

#[tokio::test]
async fn a_job_enqueued_in_a_sqlx_transaction_commits_or_rolls_back_with_it() {
    let Some(url) = errand_testsupport::postgres_url("the sqlx adapter test") else {
        return;
    };
    let schema = format!("errand_sqlx_{}", std::process::id());
    let (mut conn, store) = setup(&url, &schema).await;
    let job = |id: &str| {
        NewJob::new(
            "receipt",
            Payload::from_json_text(r#"{"p":1}"#).expect("payload"),
        )
        .expect("kind")
        .with_id(JobId::new(id).expect("id"))
    };

    let mut tx = conn.begin().await.expect("begin");
    let e = enqueue_in(&mut tx, &schema, &job("s1"))
        .await
        .expect("enqueue");
    assert!(e.created);
    tx.rollback().await.expect("rollback");
    assert!(matches!(
        store.get(&JobId::new("s1").expect("id")).await,
        Err(Error::NotFound(_))
    ));

    let mut tx = conn.begin().await.expect("begin");
    assert!(
        enqueue_in(&mut tx, &schema, &job("s1"))
            .await
            .expect("enqueue")
            .created
    );
    assert!(
        !enqueue_in(&mut tx, &schema, &job("s1"))
            .await
            .expect("again")
            .created
    );
    tx.commit().await.expect("commit");
    let stored = store
        .get(&JobId::new("s1").expect("id"))
        .await
        .expect("job");
    // Stored as the text given.
    assert_eq!(stored.payload.as_str(), r#"{"p":1}"#);

    // A concurrency key travels through the adapter too.
    let keyed = job("s3")
        .with_key("tenant-3", errand_core::KeyLimit::Concurrent(4))
        .expect("key");
    assert!(
        enqueue_in(&mut conn, &schema, &keyed)
            .await
            .expect("keyed")
            .created
    );
    let key = store
        .get(&JobId::new("s3").expect("id"))
        .await
        .expect("job")
        .key
        .expect("stored key");
    assert_eq!(
        (key.name.as_str(), key.limit, key.ordered),
        ("tenant-3", 4, false)
    );

    // A workflow step enqueued through the adapter is one of its
    // workflow's steps, once however often it is enqueued.
    let mut wf = errand_core::Workflow::with_id(WorkflowId::new("wf-sqlx").expect("workflow"));
    wf.step(job("s4"));
    let step = wf.into_jobs().pop().expect("step");
    let mut tx = conn.begin().await.expect("begin");
    assert!(
        enqueue_in(&mut tx, &schema, &step)
            .await
            .expect("step")
            .created
    );
    assert!(
        !enqueue_in(&mut tx, &schema, &step)
            .await
            .expect("again")
            .created
    );
    tx.commit().await.expect("commit");
    let counts = store
        .workflow_counts(&WorkflowId::new("wf-sqlx").expect("workflow"))
        .await
        .expect("counts");
    assert_eq!(counts, [(JobState::Ready, 1)]);

    let err = enqueue_in(&mut conn, "no_such_schema", &job("s2"))
        .await
        .expect_err("missing schema");
    assert!(matches!(err, Error::SchemaOutdated(_)), "{err}");
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut conn)
        .await
        .expect("cleanup");
}

/// A handler acknowledges its job in its own sqlx transaction: the job is
/// done, and its dependent released, exactly when that transaction
/// commits; a lease that is not the job's writes nothing.
#[tokio::test]
async fn a_job_completed_in_a_sqlx_transaction_is_done_exactly_when_it_commits() {
    let Some(url) = errand_testsupport::postgres_url("the sqlx adapter test") else {
        return;
    };
    let schema = format!("errand_sqlxc_{}", std::process::id());
    let (mut conn, store) = setup(&url, &schema).await;
    sqlx::query(&format!(
        "CREATE TABLE {schema}.receipts (id text PRIMARY KEY)"
    ))
    .execute(&mut conn)
    .await
    .expect("app table");
    let id = |s: &str| JobId::new(s).expect("id");
    let job = |s: &str| {
        NewJob::new("receipt", Payload::default())
            .expect("kind")
            .with_id(id(s))
    };
    store.insert(job("c1")).await.expect("insert");
    store
        .insert(job("after-c1").depends_on(id("c1")))
        .await
        .expect("dependent");
    store.insert(job("c2")).await.expect("insert");
    store.insert(job("c3")).await.expect("insert");
    store
        .insert(job("after-c3").depends_on(id("c3")))
        .await
        .expect("dependent");
    store.insert(job("c4")).await.expect("insert");
    store.insert(job("c5")).await.expect("insert");
    store
        .insert(job("after-c5").depends_on(id("c5")))
        .await
        .expect("dependent");
    let req = errand_core::ClaimRequest {
        queues: vec![],
        limit: 5,
        lease: std::time::Duration::from_secs(30),
        rate: None,
        reclaim: true,
    };
    let claimed = store.claim(&req).await.expect("claim");
    let lease = |s: &str| {
        claimed
            .iter()
            .find(|c| c.lease.id.as_str() == s)
            .map(|c| c.lease.clone())
            .expect("claimed")
    };
    let (a, b) = (lease("c1"), lease("c2"));
    let state = |s: &'static str| {
        let store = &store;
        async move { store.get(&id(s)).await.expect("job").state }
    };
    let effect = format!("INSERT INTO {schema}.receipts VALUES ($1)");

    // Rolled back: neither the effect nor the acknowledgment stays.
    let mut tx = conn.begin().await.expect("begin");
    sqlx::query(&effect)
        .bind("c1")
        .execute(&mut *tx)
        .await
        .expect("effect");
    let done = complete_in(&mut tx, &schema, &a).await.expect("complete");
    assert!(done.released_dependents);
    assert_eq!(state("c1").await, JobState::Running, "not before commit");
    tx.rollback().await.expect("rollback");
    assert_eq!(state("c1").await, JobState::Running);
    assert_eq!(state("after-c1").await, JobState::Blocked);

    // Committed: done, and the dependent released by the same transaction.
    let mut tx = conn.begin().await.expect("begin");
    sqlx::query(&effect)
        .bind("c1")
        .execute(&mut *tx)
        .await
        .expect("effect");
    let done = complete_in(&mut tx, &schema, &a).await.expect("complete");
    tx.commit().await.expect("commit");
    assert_eq!(
        (done.id.as_str(), done.attempt, done.released_dependents),
        ("c1", 1, true)
    );
    assert_eq!(state("c1").await, JobState::Done);
    assert_eq!(state("after-c1").await, JobState::Ready);
    // The same lease again: the job is no longer running under it.
    let again = complete_in(&mut conn, &schema, &a).await;
    assert!(matches!(again, Err(Error::LeaseLost { .. })), "{again:?}");

    // A forged token: refused, nothing written.
    let forged = errand_core::Lease {
        id: b.id.clone(),
        token: errand_core::LeaseToken::generate(),
        attempt: b.attempt,
    };
    let refused = complete_in(&mut conn, &schema, &forged).await;
    assert!(
        matches!(refused, Err(Error::LeaseLost { .. })),
        "{refused:?}"
    );
    assert_eq!(state("c2").await, JobState::Running);
    let done = complete_in(&mut conn, &schema, &b).await.expect("complete");
    assert!(!done.released_dependents);
    assert_eq!(state("c2").await, JobState::Done);

    // Outside any transaction: the completion and the release still go
    // together (the adapter opens its own transaction).
    let c = lease("c3");
    let done = complete_in(&mut conn, &schema, &c).await.expect("complete");
    assert!(done.released_dependents);
    assert_eq!(state("c3").await, JobState::Done);
    assert_eq!(state("after-c3").await, JobState::Ready);

    // A transaction the caller opened with a plain BEGIN (sqlx does not
    // know it): the call joins it, and the caller's ROLLBACK undoes it.
    sqlx::raw_sql("BEGIN")
        .execute(&mut conn)
        .await
        .expect("begin");
    complete_in(&mut conn, &schema, &lease("c4"))
        .await
        .expect("complete");
    sqlx::raw_sql("ROLLBACK")
        .execute(&mut conn)
        .await
        .expect("rollback");
    assert_eq!(
        state("c4").await,
        JobState::Running,
        "rolled back with the caller"
    );

    // The completion and the release commit together: when the release
    // fails, the job is not left done with its dependent blocked.
    sqlx::raw_sql(&format!(
        "CREATE FUNCTION {schema}.refuse() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$; \
         CREATE TRIGGER refuse BEFORE UPDATE ON {schema}.errand_jobs FOR EACH ROW \
         WHEN (OLD.id = 'after-c5') EXECUTE FUNCTION {schema}.refuse();"
    ))
    .execute(&mut conn)
    .await
    .expect("trigger");
    let failed = complete_in(&mut conn, &schema, &lease("c5")).await;
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(state("c5").await, JobState::Running);
    assert_eq!(state("after-c5").await, JobState::Blocked);
    sqlx::raw_sql(&format!("DROP TRIGGER refuse ON {schema}.errand_jobs"))
        .execute(&mut conn)
        .await
        .expect("drop trigger");
    complete_in(&mut conn, &schema, &lease("c5"))
        .await
        .expect("complete");
    assert_eq!(state("after-c5").await, JobState::Ready);

    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut conn)
        .await
        .expect("cleanup");
}

/// A signal sent in a sqlx transaction is delivered exactly when it
/// commits; a refusal writes nothing and says what the job waits for.
#[tokio::test]
async fn a_signal_sent_in_a_sqlx_transaction_is_delivered_when_it_commits() {
    let Some(url) = errand_testsupport::postgres_url("the sqlx adapter test") else {
        return;
    };
    let schema = format!("errand_sqlxsig_{}", std::process::id());
    let (mut conn, store) = setup(&url, &schema).await;
    let wait = NewJob::new("hold", Payload::default())
        .expect("kind")
        .with_id(JobId::new("h1").expect("id"))
        .awaiting("paid", None, errand_core::OnAwaitTimeout::Fail)
        .expect("wait");
    store.insert(wait).await.expect("insert");
    let id = JobId::new("h1").expect("id");
    let signal = |name: &str| errand_core::NewSignal::new(id.clone(), name).expect("signal");

    let mut tx = conn.begin().await.expect("begin");
    let e = errand_postgres::sqlx_adapter::signal_in(&mut tx, &schema, &signal("shipped"))
        .await
        .expect_err("not awaited");
    assert!(e.to_string().contains("waits for the signal paid"), "{e}");
    let sent = errand_postgres::sqlx_adapter::signal_in(&mut tx, &schema, &signal("paid"))
        .await
        .expect("signal");
    assert!(sent.delivered);
    tx.rollback().await.expect("rollback");
    assert_eq!(store.get(&id).await.expect("job").state, JobState::Waiting);

    let mut tx = conn.begin().await.expect("begin");
    errand_postgres::sqlx_adapter::signal_in(&mut tx, &schema, &signal("paid"))
        .await
        .expect("signal");
    tx.commit().await.expect("commit");
    assert_eq!(store.get(&id).await.expect("job").state, JobState::Ready);
    assert_eq!(store.detail(&id).await.expect("detail").signals.len(), 1);
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut conn)
        .await
        .expect("drop");
}
