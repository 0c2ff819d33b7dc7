//! Enqueue inside the application's own tokio-postgres transaction.
//! Needs `ERRAND_TEST_POSTGRES_URL`; says SKIPPED without it.

use errand_core::{AdminStore, JobStore, Notifier};
use errand_core::{Error, JobFilter, JobId, NewJob, Payload};
use errand_postgres::{PgOptions, PgStore};

fn url() -> Option<String> {
    errand_testsupport::postgres_url("the PostgreSQL transactional tests")
}

fn job(id: &str) -> NewJob {
    NewJob::new("receipt", Payload::default())
        .expect("kind")
        .with_id(JobId::new(id).expect("id"))
}

/// A typed job: the kind and queue come with the type.
#[derive(serde::Serialize, serde::Deserialize)]
struct Receipt {
    order: String,
}

impl errand_core::JobArgs for Receipt {
    const KIND: &'static str = "receipt";
    fn options() -> errand_core::JobOptions {
        errand_core::JobOptions {
            queue: Some("mail"),
            ..errand_core::JobOptions::default()
        }
    }
}

async fn setup(url: &str, schema: &str) -> (PgStore, tokio_postgres::Client) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
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
    client
        .batch_execute(&format!(
            "CREATE TABLE {schema}.orders (id text PRIMARY KEY)"
        ))
        .await
        .expect("app table");
    (store, client)
}

#[tokio::test]
async fn the_job_commits_or_rolls_back_with_the_callers_rows() {
    let Some(url) = url() else { return };
    let schema = format!("errand_tx_{}", std::process::id());
    let (store, mut client) = setup(&url, &schema).await;

    let tx = client.transaction().await.expect("begin");
    tx.execute(&format!("INSERT INTO {schema}.orders VALUES ('o1')"), &[])
        .await
        .expect("order");
    assert!(
        store
            .enqueue_in(&tx, &job("o1"))
            .await
            .expect("enqueue")
            .created
    );
    let typed = store
        .enqueue_in(&tx, &Receipt { order: "o1".into() })
        .await
        .expect("typed enqueue")
        .job;
    assert_eq!(
        (typed.kind.as_str(), typed.queue.as_str()),
        ("receipt", "mail")
    );
    assert_eq!(typed.payload.as_str(), r#"{"order": "o1"}"#);
    // Not visible to others before the commit.
    assert!(matches!(
        store.get(&JobId::new("o1").expect("id")).await,
        Err(Error::NotFound(_))
    ));
    tx.commit().await.expect("commit");
    assert_eq!(
        store
            .get(&JobId::new("o1").expect("id"))
            .await
            .expect("job")
            .id
            .as_str(),
        "o1"
    );

    let tx = client.transaction().await.expect("begin");
    tx.execute(&format!("INSERT INTO {schema}.orders VALUES ('o2')"), &[])
        .await
        .expect("order");
    let many = store
        .enqueue_many_in(&tx, &[job("o2"), job("o3"), job("o1")])
        .await
        .expect("enqueue many");
    assert_eq!(
        many.iter().map(|i| i.created).collect::<Vec<_>>(),
        vec![true, true, false]
    );
    tx.rollback().await.expect("rollback");
    let all = store.list(&JobFilter::default()).await.expect("list");
    let mut ids: Vec<&str> = all.iter().map(|j| j.id.as_str()).collect();
    let mut want = vec!["o1", typed.id.as_str()];
    ids.sort_unstable();
    want.sort_unstable();
    assert_eq!(ids, want);

    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("cleanup");
}

#[tokio::test]
async fn the_sql_enqueue_function_validates_and_joins_the_callers_transaction() {
    let Some(url) = url() else { return };
    let schema = format!("errand_fn_{}", std::process::id());
    let (store, mut client) = setup(&url, &schema).await;
    let call = format!("SELECT {schema}.enqueue($1, $2::text::jsonb, id => $3)");

    let tx = client.transaction().await.expect("begin");
    let id: String = tx
        .query_one(&call, &[&"receipt", &r#"{"payment":"p-9"}"#, &"p-9"])
        .await
        .expect("enqueue")
        .get(0);
    assert_eq!(id, "p-9");
    tx.rollback().await.expect("rollback");
    assert!(matches!(
        store.get(&JobId::new("p-9").expect("id")).await,
        Err(Error::NotFound(_))
    ));

    let id: String = client
        .query_one(&call, &[&"receipt", &r#"{"payment":"p-9"}"#, &"p-9"])
        .await
        .expect("enqueue")
        .get(0);
    let job = store.get(&JobId::new(&id).expect("id")).await.expect("job");
    assert_eq!(
        (job.kind.as_str(), job.queue.as_str(), job.max_attempts),
        ("receipt", "default", 25)
    );
    // The same id again creates nothing and returns the id.
    let again: String = client
        .query_one(&call, &[&"other", &"{}", &"p-9"])
        .await
        .expect("enqueue")
        .get(0);
    assert_eq!(again, "p-9");
    assert_eq!(
        store
            .get(&JobId::new("p-9").expect("id"))
            .await
            .expect("job")
            .kind
            .as_str(),
        "receipt"
    );
    // A generated id.
    let generated: String = client
        .query_one(&format!("SELECT {schema}.enqueue('mail')"), &[])
        .await
        .expect("enqueue")
        .get(0);
    assert!(
        store
            .get(&JobId::new(&generated).expect("id"))
            .await
            .is_ok()
    );

    // A concurrency key, from SQL.
    for (sql, want) in [
        (
            format!("SELECT {schema}.enqueue('mail', key => 'tenant 9', key_limit => 3)"),
            ("tenant 9", 3, false),
        ),
        (
            format!("SELECT {schema}.enqueue('mail', key => 'acct-1', ordered => true)"),
            ("acct-1", 1, true),
        ),
    ] {
        let id: String = client
            .query_one(&sql, &[])
            .await
            .expect("keyed enqueue")
            .get(0);
        let key = store
            .get(&JobId::new(&id).expect("id"))
            .await
            .expect("job")
            .key
            .expect("stored key");
        assert_eq!((key.name.as_str(), key.limit, key.ordered), want, "{sql}");
    }

    for (sql, needle) in [
        (
            format!("SELECT {schema}.enqueue('k', ordered => true)"),
            "need a key",
        ),
        (
            format!("SELECT {schema}.enqueue('k', key => 't', key_limit => 0)"),
            "key_limit must be between",
        ),
        (
            format!("SELECT {schema}.enqueue('k', key => 't', key_limit => 2, ordered => true)"),
            "ordered key",
        ),
        (
            format!("SELECT {schema}.enqueue('bad kind')"),
            "kind 'bad kind' is not valid",
        ),
        (
            format!("SELECT {schema}.enqueue('k', queue => '')"),
            "queue '' is not valid",
        ),
        (
            format!("SELECT {schema}.enqueue('k', id => 'a b')"),
            "id 'a b' is not valid",
        ),
        (
            format!("SELECT {schema}.enqueue('k', max_attempts => 0)"),
            "max_attempts",
        ),
        (
            format!("SELECT {schema}.enqueue('k', priority => 40000)"),
            "priority",
        ),
        (
            format!("SELECT {schema}.enqueue('k', payload => NULL)"),
            "payload",
        ),
    ] {
        let err = client.query_one(&sql, &[]).await.expect_err(&sql);
        let msg = err
            .as_db_error()
            .map(|d| d.message().to_owned())
            .unwrap_or_default();
        assert!(msg.contains(needle), "{sql}: {msg}");
    }
    // Direct inserts obey the same name rules, at their bounds too: 100
    // characters for a queue or kind, 200 for an id, and only the allowed
    // characters.
    let (q100, q101) = (
        format!("q{}", "x".repeat(99)),
        format!("q{}", "x".repeat(100)),
    );
    let (id200, id201) = ("i".repeat(200), "i".repeat(201));
    let refused: [(&str, &str, &str); 8] = [
        ("x", "q", "bad kind"),
        ("x", "q", "-k"),
        ("x", "", "k"),
        ("x", &q101, "k"),
        ("x", "q", &q101),
        (&id201, "q", "k"),
        ("bad id", "q", "k"),
        ("x", "q\u{e9}", "k"),
    ];
    let insert = |id: &str, queue: &str, kind: &str| {
        format!(
            "INSERT INTO {schema}.errand_jobs (id, queue, kind, state, payload, max_attempts, available_at, created_at, updated_at) VALUES ('{id}', '{queue}', '{kind}', 'ready', '{{}}', 1, now(), now(), now())"
        )
    };
    for (id, queue, kind) in refused {
        let err = client.execute(&insert(id, queue, kind), &[]).await;
        assert!(
            err.is_err(),
            "accepted id {id:?}, queue {queue:?}, kind {kind:?}"
        );
    }
    // The longest valid names are accepted (rolled back: the count below
    // is of the jobs enqueued above).
    let tx = client.transaction().await.expect("begin");
    tx.execute(&insert(&id200, &q100, &q100), &[])
        .await
        .expect("the longest valid id, queue and kind are accepted");
    tx.rollback().await.expect("rollback");
    assert_eq!(
        store
            .list(&errand_core::JobFilter::default())
            .await
            .expect("list")
            .len(),
        4,
        "p-9, the generated one and the two keyed ones: no refused call wrote a row"
    );
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("cleanup");
}

#[tokio::test]
async fn an_insert_notifies_listeners_at_commit_only() {
    let Some(url) = url() else { return };
    let schema = format!("errand_nt_{}", std::process::id());
    let (store, mut client) = setup(&url, &schema).await;
    let (listener, mut conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    let (tx_notes, mut notes) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut stream = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
        use futures_util::StreamExt;
        while let Some(Ok(msg)) = stream.next().await {
            if let tokio_postgres::AsyncMessage::Notification(n) = msg {
                let _ = tx_notes.send((n.channel().to_owned(), n.payload().to_owned()));
            }
        }
    });
    listener
        .batch_execute(&format!("LISTEN \"{schema}.errand_jobs\""))
        .await
        .expect("listen");

    let tx = client.transaction().await.expect("begin");
    store.enqueue_in(&tx, &job("n1")).await.expect("enqueue");
    tx.rollback().await.expect("rollback");
    store
        .insert(job("n2").on_queue("mail").expect("queue"))
        .await
        .expect("insert");
    let got = tokio::time::timeout(std::time::Duration::from_secs(5), notes.recv())
        .await
        .expect("a notification")
        .expect("open");
    assert_eq!(
        got,
        (format!("{schema}.errand_jobs"), "mail".to_owned()),
        "only the committed insert notifies"
    );
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("cleanup");
}

#[tokio::test]
async fn an_idle_worker_wakes_when_another_host_enqueues() {
    let Some(url) = url() else { return };
    let schema = format!("errand_wk_{}", std::process::id());
    let (store, client) = setup(&url, &schema).await;
    let mut signal = store.work_signal();
    for _ in 0..100 {
        if store.notifications_ok() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        store.notifications_ok(),
        "the LISTEN/NOTIFY self-test should pass against a direct connection"
    );
    let other = PgStore::connect(
        &url,
        PgOptions {
            schema: schema.clone(),
            ..PgOptions::default()
        },
    )
    .await
    .expect("second store");
    let waiter = tokio::spawn(async move { signal.wait(std::time::Duration::from_secs(30)).await });
    other.insert(job("w1")).await.expect("insert");
    assert!(
        waiter.await.expect("join"),
        "woken by the notification, not by the timeout"
    );
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("cleanup");
}

#[tokio::test]
async fn a_job_completed_in_the_handlers_transaction_is_done_exactly_when_it_commits() {
    let Some(url) = url() else { return };
    let schema = format!("errand_tc_{}", std::process::id());
    let (store, mut client) = setup(&url, &schema).await;
    store.insert(job("c1")).await.expect("insert");
    store.insert(job("c2")).await.expect("insert");
    let req = errand_core::ClaimRequest {
        queues: vec![],
        limit: 2,
        lease: std::time::Duration::from_secs(30),
        rate: None,
        reclaim: true,
    };
    let claimed = store.claim(&req).await.expect("claim");
    let (a, b) = (&claimed[0].lease, &claimed[1].lease);

    let tx = client.transaction().await.expect("begin");
    tx.execute(
        &format!("INSERT INTO {schema}.orders VALUES ($1)"),
        &[&a.id.as_str()],
    )
    .await
    .expect("effect");
    store
        .complete_in(&tx, a)
        .await
        .expect("complete in the transaction");
    tx.commit().await.expect("commit");
    assert_eq!(
        store.get(&a.id).await.expect("job").state,
        errand_core::JobState::Done
    );

    // A forged token: the fence refuses, and the caller rolls back its effect.
    let forged = errand_core::Lease {
        id: b.id.clone(),
        token: errand_core::LeaseToken::generate(),
        attempt: b.attempt,
    };
    let tx = client.transaction().await.expect("begin");
    tx.execute(
        &format!("INSERT INTO {schema}.orders VALUES ($1)"),
        &[&b.id.as_str()],
    )
    .await
    .expect("effect");
    assert!(matches!(
        store.complete_in(&tx, &forged).await,
        Err(Error::LeaseLost { .. })
    ));
    tx.rollback().await.expect("rollback");
    let n: i64 = client
        .query_one(&format!("SELECT count(*) FROM {schema}.orders"), &[])
        .await
        .expect("count")
        .get(0);
    assert_eq!(n, 1);
    assert_eq!(
        store.get(&b.id).await.expect("job").state,
        errand_core::JobState::Running
    );
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("cleanup");
}

#[tokio::test]
async fn dropping_the_store_closes_its_listening_connection() {
    let Some(url) = url() else { return };
    let schema = format!("errand_ld_{}", std::process::id());
    let (store, client) = setup(&url, &schema).await;
    let _signal = store.work_signal();
    for _ in 0..100 {
        if listening(&client, &schema).await == 1 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        listening(&client, &schema).await,
        1,
        "one listening connection while the store lives"
    );
    drop(store);
    for _ in 0..100 {
        if listening(&client, &schema).await == 0 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(
        listening(&client, &schema).await,
        0,
        "closed once the store is dropped"
    );
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("cleanup");
}

async fn listening(client: &tokio_postgres::Client, schema: &str) -> i64 {
    let pattern = format!("LISTEN \"{schema}.errand_jobs\"%");
    client
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE $1 AND pid <> pg_backend_pid()",
            &[&pattern],
        )
        .await
        .expect("pg_stat_activity")
        .get::<_, i64>(0)
}

/// A unique job, or one joining a batch, is enqueued in the caller's
/// READ COMMITTED transaction, and refused — writing nothing — outside a
/// transaction or in a transaction that kept an earlier snapshot.
#[tokio::test]
async fn unique_and_batch_enqueues_need_a_read_committed_transaction() {
    let Some(url) = url() else { return };
    let schema = format!("errand_tu_{}", std::process::id());
    let (store, mut client) = setup(&url, &schema).await;
    let unique = || job("u1").unique_for(std::time::Duration::from_secs(60));
    let outside = store.enqueue_in(&client, unique()).await;
    assert!(
        matches!(&outside, Err(Error::Invalid(m)) if m.contains("inside a transaction")),
        "{outside:?}"
    );
    let tx = client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .start()
        .await
        .expect("begin");
    let repeatable = store.enqueue_in(&tx, unique()).await;
    assert!(
        matches!(&repeatable, Err(Error::Invalid(m)) if m.contains("READ COMMITTED")),
        "{repeatable:?}"
    );
    let batch = job("b1").in_batch(errand_core::BatchId::new("b").expect("id"));
    let joined = store.enqueue_in(&tx, batch).await;
    assert!(
        matches!(&joined, Err(Error::Invalid(m)) if m.contains("READ COMMITTED")),
        "{joined:?}"
    );
    tx.rollback().await.expect("rollback");
    let tx = client.transaction().await.expect("begin");
    let first = store.enqueue_in(&tx, unique()).await.expect("unique");
    assert!(first.created);
    let again = store
        .enqueue_in(
            &tx,
            job("u2").unique_for(std::time::Duration::from_secs(60)),
        )
        .await
        .expect("unique again");
    assert!(!again.created);
    assert_eq!(again.job.id.as_str(), "u1");
    tx.commit().await.expect("commit");
    let all = store.list(&JobFilter::default()).await.expect("list");
    assert_eq!(all.len(), 1);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .expect("drop");
}

/// A workflow enqueued inside the application's transaction commits or
/// rolls back whole with the application's rows.
#[tokio::test]
async fn a_workflow_commits_or_rolls_back_with_the_callers_transaction() {
    let Some(url) = url() else { return };
    let schema = format!("errand_tw_{}", std::process::id());
    let (store, mut client) = setup(&url, &schema).await;
    let build = || {
        let mut wf = errand_core::Workflow::with_id(
            errand_core::WorkflowId::new("order-9").expect("workflow id"),
        );
        let a = wf.step(job("w-a"));
        wf.step_after(job("w-b"), &[&a]);
        wf
    };
    let tx = client.transaction().await.expect("begin");
    tx.execute(&format!("INSERT INTO {schema}.orders VALUES ('o9')"), &[])
        .await
        .expect("app row");
    store
        .enqueue_many_in(&tx, &build().into_jobs())
        .await
        .expect("workflow");
    tx.rollback().await.expect("rollback");
    assert!(
        store
            .list(&JobFilter::default())
            .await
            .expect("list")
            .is_empty()
    );

    let tx = client.transaction().await.expect("begin");
    let ins = store
        .enqueue_many_in(&tx, &build().into_jobs())
        .await
        .expect("workflow");
    assert!(ins.iter().all(|i| i.created));
    tx.commit().await.expect("commit");
    let counts = store
        .workflow_counts(&errand_core::WorkflowId::new("order-9").expect("id"))
        .await
        .expect("counts");
    assert_eq!(counts.iter().map(|(_, n)| n).sum::<u64>(), 2);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .expect("drop");
}
