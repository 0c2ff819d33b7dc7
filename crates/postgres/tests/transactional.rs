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
    // Stored as the text serialized.
    assert_eq!(typed.payload.as_str(), r#"{"order":"o1"}"#);
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
    store.insert(job("c3")).await.expect("insert");
    store.insert(job("c4")).await.expect("insert");
    store
        .insert(job("after-c3").depends_on(JobId::new("c3").expect("id")))
        .await
        .expect("dependent");
    let req = errand_core::ClaimRequest {
        queues: vec![],
        limit: 4,
        lease: std::time::Duration::from_secs(30),
        rate: None,
        reclaim: true,
    };
    let claimed = store.claim(&req).await.expect("claim");
    let lease = |id: &str| {
        &claimed
            .iter()
            .find(|c| c.lease.id.as_str() == id)
            .expect("claimed")
            .lease
    };
    let (a, b) = (lease("c1"), lease("c2"));

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

    // On a plain client (no transaction): a job without dependents is
    // completed; one with dependents is refused, nothing written, because
    // its completion and their release could not commit together.
    let state = |id: &'static str| {
        let store = &store;
        async move {
            store
                .get(&JobId::new(id).expect("id"))
                .await
                .expect("job")
                .state
        }
    };
    store
        .complete_in(&client, lease("c4"))
        .await
        .expect("plain client");
    assert_eq!(state("c4").await, errand_core::JobState::Done);
    let refused = store.complete_in(&client, lease("c3")).await;
    assert!(
        matches!(&refused, Err(Error::Invalid(m)) if m.contains("has dependents")),
        "{refused:?}"
    );
    assert_eq!(state("c3").await, errand_core::JobState::Running);
    assert_eq!(state("after-c3").await, errand_core::JobState::Blocked);
    let tx = client.transaction().await.expect("begin");
    store
        .complete_in(&tx, lease("c3"))
        .await
        .expect("in a transaction");
    tx.commit().await.expect("commit");
    assert_eq!(state("c3").await, errand_core::JobState::Done);
    assert_eq!(state("after-c3").await, errand_core::JobState::Ready);
    // A lost lease on a plain client is still a lost lease.
    let gone = store.complete_in(&client, lease("c3")).await;
    assert!(matches!(gone, Err(Error::LeaseLost { .. })), "{gone:?}");
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
    let batch = errand_core::BatchId::new("b-outside").expect("batch id");
    let outside = store.enqueue_in(&client, job("b1").in_batch(batch)).await;
    assert!(
        matches!(&outside, Err(Error::Invalid(m))
            if m.contains("a job joining a batch must be enqueued inside a transaction")),
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

/// The SQL function's newer parameters mean what the library's options
/// mean: a delay, a deadline, a trace context, an elapsed-time budget,
/// tags (found by the tag listing) and unique keys — judged together with
/// the library's own unique enqueues of the same key. Calls that name
/// none of them keep working (the test above).
#[tokio::test]
async fn the_sql_enqueue_function_takes_the_librarys_options() {
    let Some(url) = url() else { return };
    let schema = format!("errand_fo_{}", std::process::id());
    let (store, client) = setup(&url, &schema).await;
    let one = |sql: String| {
        let client = &client;
        async move {
            let row = client.query_one(&sql, &[]).await;
            row.map(|r| r.get::<_, String>(0))
        }
    };
    let get = |id: String| {
        let store = &store;
        async move { store.get(&JobId::new(&id).expect("id")).await.expect("job") }
    };

    let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let id = one(format!(
        "SELECT {schema}.enqueue('mail', delay => interval '1 hour', \
         deadline => '2031-01-02T03:04:05Z', traceparent => '{tp}', \
         give_up_after => interval '2 days', tags => ARRAY['tenant:7', 'vip'])"
    ))
    .await
    .expect("enqueue");
    let job = get(id.clone()).await;
    let created = job.created_at.as_millis();
    assert_eq!(job.available_at.as_millis() - created, 3_600_000);
    assert_eq!(
        job.give_up_at.map(|t| t.as_millis() - created),
        Some(2 * 86_400_000)
    );
    assert_eq!(
        job.deadline.map(|t| t.as_millis()),
        Some(1_925_089_445_000),
        "2031-01-02T03:04:05Z"
    );
    assert_eq!(job.traceparent.as_ref().map(|t| t.as_str()), Some(tp));
    assert_eq!(job.tags, ["tenant:7", "vip"]);
    let tagged = store
        .list(&JobFilter {
            tag: Some("vip".into()),
            ..JobFilter::default()
        })
        .await
        .expect("list by tag");
    assert_eq!(
        tagged.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        [id.as_str()]
    );

    // Unique for a period: the second call answers with the first job; a
    // library enqueue of the same key finds it too, and the other way round.
    let unique = format!(
        "SELECT {schema}.enqueue('sync', unique_key => 'sync:9', unique_for => interval '10 minutes')"
    );
    let first = one(unique.clone()).await.expect("unique");
    assert_eq!(one(unique.clone()).await.expect("again"), first);
    let mut tx_client = client;
    let tx = tx_client.transaction().await.expect("begin");
    let from_library = store
        .enqueue_in(
            &tx,
            NewJob::new("sync", Payload::default())
                .expect("kind")
                .unique_for(std::time::Duration::from_secs(600))
                .with_unique_key("sync:9"),
        )
        .await
        .expect("library unique");
    tx.commit().await.expect("commit");
    assert!(!from_library.created);
    assert_eq!(from_library.job.id.as_str(), first);
    let client = tx_client;
    let one = |sql: String| {
        let client = &client;
        async move {
            let row = client.query_one(&sql, &[]).await;
            row.map(|r| r.get::<_, String>(0))
        }
    };

    // A library enqueue first, then SQL: the SQL call finds the library's.
    client.batch_execute("BEGIN").await.expect("begin");
    let library_first = store
        .enqueue_in(
            &client,
            NewJob::new("sync", Payload::default())
                .expect("kind")
                .unique_for(std::time::Duration::from_secs(600))
                .with_unique_key("sync:10"),
        )
        .await
        .expect("library unique");
    client.batch_execute("COMMIT").await.expect("commit");
    assert!(library_first.created);
    let from_sql = one(format!(
        "SELECT {schema}.enqueue('sync', unique_key => 'sync:10', unique_for => interval '10 minutes')"
    ))
    .await
    .expect("SQL unique");
    assert_eq!(from_sql, library_first.job.id.as_str());

    // Unique while ready or running: a finished twin does not count.
    let live = format!(
        "SELECT {schema}.enqueue('sync', unique_key => 'live:1', \
         unique_while => ARRAY['ready', 'running'])"
    );
    let a = one(live.clone()).await.expect("live");
    assert_eq!(one(live.clone()).await.expect("live again"), a);
    let by = errand_core::AuditStamp {
        operator: "test".into(),
        reason: None,
    };
    store
        .cancel_jobs(&[JobId::new(&a).expect("id")], &by)
        .await
        .expect("cancel");
    let b = one(live.clone()).await.expect("after cancel");
    assert_ne!(a, b, "a cancelled twin stands in for nothing");

    // A REPEATABLE READ transaction cannot judge a unique key.
    let err = client
        .batch_execute(&format!(
            "BEGIN ISOLATION LEVEL REPEATABLE READ; {live}; COMMIT"
        ))
        .await
        .expect_err("repeatable read");
    let msg = err.as_db_error().map(|d| d.message().to_owned());
    assert!(
        msg.as_deref().is_some_and(|m| m.contains("READ COMMITTED")),
        "{msg:?}"
    );
    client.batch_execute("ROLLBACK").await.expect("rollback");

    for (args, needle) in [
        (
            "run_at => now(), delay => interval '1 s'",
            "run_at or delay, not both",
        ),
        (
            "delay => interval '-1 s'",
            "delay -00:00:01 is out of range",
        ),
        (
            "delay => interval '36501 days'",
            "delay 36501 days is out of range",
        ),
        ("give_up_after => interval '-1 day'", "give_up_after"),
        ("deadline => '10000-01-01T00:00:00Z'", "deadline"),
        ("traceparent => '00-abc'", "not a W3C trace context"),
        (
            "traceparent => '00-00000000000000000000000000000000-00f067aa0ba902b7-01'",
            "not a W3C trace context",
        ),
        ("tags => ARRAY['a b']", "tag 'a b' is not valid"),
        (
            "tags => ARRAY[['a', 'b'], ['c', 'd']]",
            "tags must be a flat array",
        ),
        (
            "unique_key => 'k', unique_while => ARRAY[['ready'], ['running']]",
            "unique_while must be a flat array",
        ),
        ("tags => ARRAY['x', 'x']", "the tag 'x' is given twice"),
        (
            "tags => ARRAY['1','2','3','4','5','6','7','8','9','10','11','12','13','14','15','16','17','18','19','20','21']",
            "at most 20 tags (got 21)",
        ),
        ("unique_for => interval '1 minute'", "need a unique_key"),
        ("unique_key => 'k'", "needs unique_for or unique_while"),
        (
            "unique_key => 'k', unique_for => interval '0'",
            "unique_for 00:00:00 is out of range",
        ),
        (
            "unique_key => 'k', unique_while => ARRAY['sleeping']",
            "state 'sleeping' is not a job state",
        ),
        (
            "unique_key => 'k', unique_while => ARRAY[]::text[]",
            "at least one state",
        ),
        (
            "unique_key => 'k', unique_for => interval '1 s', unique_while => ARRAY['ready']",
            "not both",
        ),
    ] {
        let sql = format!("SELECT {schema}.enqueue('k', {args})");
        let err = one(sql.clone()).await.expect_err(&sql);
        let db = err.as_db_error().expect("a database error");
        assert!(db.message().contains(needle), "{sql}: {}", db.message());
        assert_eq!(db.code().code(), "22023", "{sql}");
    }
    // The example in docs/postgres.md runs as written (in this schema).
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/postgres.md"
    ))
    .expect("docs/postgres.md");
    let example = page
        .split("```sql\n")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the SQL example");
    assert!(example.contains("errand.enqueue("), "{example}");
    let id = one(example.replace("errand.enqueue(", &format!("{schema}.enqueue(")))
        .await
        .expect("the documented call");
    assert_eq!(id, "p-1");
    let job = get(id).await;
    assert_eq!((job.kind.as_str(), job.max_attempts), ("receipt", 5));
    assert_eq!(job.tags, ["tenant:7", "vip"]);
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .expect("drop");
}

/// Twenty connections calling the SQL function with one unique key at the
/// same moment create one job; all twenty answer with its id.
#[tokio::test]
async fn twenty_sql_enqueuers_of_one_unique_key_create_one_job() {
    let Some(url) = url() else { return };
    let schema = format!("errand_fu_{}", std::process::id());
    let (store, _client) = setup(&url, &schema).await;
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(20));
    let mut tasks = Vec::new();
    for _ in 0..20 {
        let (url, schema, barrier) = (url.clone(), schema.clone(), barrier.clone());
        tasks.push(tokio::spawn(async move {
            let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .expect("connect");
            tokio::spawn(conn);
            barrier.wait().await;
            client
                .query_one(
                    &format!(
                        "SELECT {schema}.enqueue('sync', unique_key => 'one', \
                         unique_for => interval '1 hour')"
                    ),
                    &[],
                )
                .await
                .expect("enqueue")
                .get::<_, String>(0)
        }));
    }
    let mut ids = Vec::new();
    for t in tasks {
        ids.push(t.await.expect("task"));
    }
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 1, "{ids:?}");
    let all = store.list(&JobFilter::default()).await.expect("list");
    assert_eq!(all.len(), 1);
    assert_eq!(all[0].id.as_str(), ids[0]);
    _client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .expect("drop");
}

/// The SQL function and the library serialize unique enqueues of one key on
/// the same advisory lock: the same expression, the same seed, in both.
#[test]
fn the_sql_function_and_the_library_lock_a_unique_key_alike() {
    let library = include_str!("../queries/unique_lock.sql");
    let function = include_str!("../migrations/V1__baseline.sql");
    assert!(
        library.contains("pg_advisory_xact_lock(hashtextextended($1::text, 7266140))"),
        "{library}"
    );
    assert!(
        function.contains(
            "PERFORM pg_advisory_xact_lock(hashtextextended(enqueue.unique_key, 7266140));"
        ),
        "the SQL function locks the key another way"
    );
}

/// The SQL function restates the library's rules; the same input gets the
/// same verdict from both, at each bound and one past it. (Each SQL call
/// runs in a transaction rolled back, so nothing is stored.)
#[tokio::test]
async fn the_sql_function_and_the_library_accept_and_refuse_alike() {
    use errand_core::{KeyLimit, Schedule, Timestamp, TraceParent};
    use std::time::Duration;
    let Some(url) = url() else { return };
    let schema = format!("errand_fa_{}", std::process::id());
    let (_store, client) = setup(&url, &schema).await;
    let day = Duration::from_secs(86_400);
    let tags = |n: usize| -> String {
        let list: Vec<String> = (0..n).map(|i| format!("'t{i}'")).collect();
        format!("tags => ARRAY[{}]", list.join(","))
    };
    type Rust = Box<dyn Fn() -> Result<NewJob, Error>>;
    let cases: Vec<(&str, String, Rust)> = vec![
        (
            "kind of 100",
            format!("'{}'", "k".repeat(100)),
            Box::new(|| plain(&"k".repeat(100))),
        ),
        (
            "kind of 101",
            format!("'{}'", "k".repeat(101)),
            Box::new(|| plain(&"k".repeat(101))),
        ),
        (
            "kind with a space",
            "'a b'".into(),
            Box::new(|| plain("a b")),
        ),
        (
            "queue empty",
            "'k', queue => ''".into(),
            Box::new(|| plain("k")?.on_queue("")),
        ),
        (
            "queue q.1",
            "'k', queue => 'q.1'".into(),
            Box::new(|| plain("k")?.on_queue("q.1")),
        ),
        (
            "id of 200",
            format!("'k', id => '{}'", "i".repeat(200)),
            Box::new(|| Ok(plain("k")?.with_id(JobId::new("i".repeat(200))?))),
        ),
        (
            "id of 201",
            format!("'k', id => '{}'", "i".repeat(201)),
            Box::new(|| Ok(plain("k")?.with_id(JobId::new("i".repeat(201))?))),
        ),
        (
            "1000 attempts",
            "'k', max_attempts => 1000".into(),
            Box::new(|| plain("k")?.with_max_attempts(1000)),
        ),
        (
            "1001 attempts",
            "'k', max_attempts => 1001".into(),
            Box::new(|| plain("k")?.with_max_attempts(1001)),
        ),
        (
            "0 attempts",
            "'k', max_attempts => 0".into(),
            Box::new(|| plain("k")?.with_max_attempts(0)),
        ),
        (
            "key with a control character",
            "'k', key => E'a\\x01b'".into(),
            Box::new(|| plain("k")?.with_key("a\u{1}b", KeyLimit::Concurrent(1))),
        ),
        (
            "key limit 10000",
            "'k', key => 't', key_limit => 10000".into(),
            Box::new(|| plain("k")?.with_key("t", KeyLimit::Concurrent(10_000))),
        ),
        (
            "key limit 10001",
            "'k', key => 't', key_limit => 10001".into(),
            Box::new(|| plain("k")?.with_key("t", KeyLimit::Concurrent(10_001))),
        ),
        (
            "delay of 36500 days",
            "'k', delay => interval '36500 days'".into(),
            Box::new(move || Ok(plain("k")?.scheduled(Schedule::After(day * 36_500)))),
        ),
        (
            "delay of 36501 days",
            "'k', delay => interval '36501 days'".into(),
            Box::new(move || Ok(plain("k")?.scheduled(Schedule::After(day * 36_501)))),
        ),
        (
            "run at the end of 9999",
            "'k', run_at => '9999-12-31T23:59:59.999Z'".into(),
            Box::new(|| {
                Ok(plain("k")?.scheduled(Schedule::At(Timestamp::parse_rfc3339(
                    "9999-12-31T23:59:59.999Z",
                )?)))
            }),
        ),
        (
            "run at 1969",
            "'k', run_at => '1969-12-31T23:59:59Z'".into(),
            Box::new(|| {
                Ok(plain("k")?.scheduled(Schedule::At(Timestamp::parse_rfc3339(
                    "1969-12-31T23:59:59Z",
                )?)))
            }),
        ),
        (
            "deadline in 1969",
            "'k', deadline => '1969-12-31T23:59:59Z'".into(),
            Box::new(|| {
                Ok(plain("k")?.with_deadline(Timestamp::parse_rfc3339("1969-12-31T23:59:59Z")?))
            }),
        ),
        (
            "give up after 36501 days",
            "'k', give_up_after => interval '36501 days'".into(),
            Box::new(move || Ok(plain("k")?.give_up_after(day * 36_501))),
        ),
        (
            "a sampled trace context",
            "'k', traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01'".into(),
            Box::new(|| {
                Ok(plain("k")?.with_traceparent(TraceParent::parse(
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                )?))
            }),
        ),
        (
            "a zero parent id",
            "'k', traceparent => '00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01'".into(),
            Box::new(|| {
                Ok(plain("k")?.with_traceparent(TraceParent::parse(
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
                )?))
            }),
        ),
        (
            "upper-case hex",
            "'k', traceparent => '00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01'".into(),
            Box::new(|| {
                Ok(plain("k")?.with_traceparent(TraceParent::parse(
                    "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
                )?))
            }),
        ),
        (
            "20 tags",
            format!("'k', {}", tags(20)),
            Box::new(move || plain_tagged(20)),
        ),
        (
            "21 tags",
            format!("'k', {}", tags(21)),
            Box::new(move || plain_tagged(21)),
        ),
        (
            "a tag of 100",
            format!("'k', tags => ARRAY['{}']", "t".repeat(100)),
            Box::new(|| plain("k")?.with_tag(&"t".repeat(100))),
        ),
        (
            "a tag of 101",
            format!("'k', tags => ARRAY['{}']", "t".repeat(101)),
            Box::new(|| plain("k")?.with_tag(&"t".repeat(101))),
        ),
        (
            "a tag with a space",
            "'k', tags => ARRAY['a b']".into(),
            Box::new(|| plain("k")?.with_tag("a b")),
        ),
        (
            "a unique key of 200",
            format!(
                "'k', unique_key => '{}', unique_for => interval '1 minute'",
                "u".repeat(200)
            ),
            Box::new(|| {
                Ok(plain("k")?
                    .unique_for(Duration::from_secs(60))
                    .with_unique_key(&"u".repeat(200)))
            }),
        ),
        (
            "a unique key of 201",
            format!(
                "'k', unique_key => '{}', unique_for => interval '1 minute'",
                "u".repeat(201)
            ),
            Box::new(|| {
                Ok(plain("k")?
                    .unique_for(Duration::from_secs(60))
                    .with_unique_key(&"u".repeat(201)))
            }),
        ),
    ];
    // The cases both must accept; every other one both must refuse.
    let accepted = [
        "kind of 100",
        "queue q.1",
        "id of 200",
        "1000 attempts",
        "key limit 10000",
        "delay of 36500 days",
        "run at the end of 9999",
        "a sampled trace context",
        "20 tags",
        "a tag of 100",
        "a unique key of 200",
    ];
    for (what, args, rust) in cases {
        let expected = accepted.contains(&what);
        let library = rust().and_then(|j| j.validate());
        client.batch_execute("BEGIN").await.expect("begin");
        let sql = client
            .query_one(&format!("SELECT {schema}.enqueue({args})"), &[])
            .await;
        client.batch_execute("ROLLBACK").await.expect("rollback");
        assert_eq!(
            library.is_ok(),
            expected,
            "{what}: the library says {library:?}"
        );
        match &sql {
            Ok(_) => assert!(expected, "{what}: SQL accepted it"),
            Err(e) => {
                // A refusal by the function's own rules, not a mistake in
                // the test's SQL.
                let db = e.as_db_error().expect("a database error");
                assert!(
                    !expected
                        && db.code().code() == "22023"
                        && db.message().starts_with("errand.enqueue:"),
                    "{what}: SQL says {} {}",
                    db.code().code(),
                    db.message()
                );
            }
        }
    }
    client
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .expect("drop");
}

/// A job of `kind` with an empty payload.
fn plain(kind: &str) -> Result<NewJob, Error> {
    NewJob::new(kind, Payload::default())
}

/// A job carrying tags `t0`…`t{n-1}`.
fn plain_tagged(n: usize) -> Result<NewJob, Error> {
    let mut j = plain("k")?;
    for i in 0..n {
        j = j.with_tag(&format!("t{i}"))?;
    }
    Ok(j)
}

/// A signal sent in the caller's transaction is delivered when it commits
/// and not at all when it rolls back; outside a transaction it is refused.
#[tokio::test]
async fn a_signal_commits_or_rolls_back_with_the_callers_rows() {
    let Some(url) = url() else { return };
    let schema = format!("errand_txsig_{}", std::process::id());
    let (store, mut client) = setup(&url, &schema).await;
    let wait = job("h1")
        .awaiting("paid", None, errand_core::OnAwaitTimeout::Fail)
        .expect("wait");
    store.insert(wait).await.expect("insert");
    let id = JobId::new("h1").expect("id");
    let paid = errand_core::NewSignal::new(id.clone(), "paid")
        .expect("signal")
        .with_payload_text(r#"{"payment":"p-1"}"#)
        .expect("payload");

    // A signal that may be kept locks the job's row: only in a transaction.
    let e = store
        .signal_in(&client, &paid.clone().buffered())
        .await
        .expect_err("no tx");
    assert!(e.to_string().contains("inside a transaction"), "{e}");

    let tx = client.transaction().await.expect("begin");
    tx.execute(&format!("INSERT INTO {schema}.orders VALUES ('o1')"), &[])
        .await
        .expect("order");
    assert!(store.signal_in(&tx, &paid).await.expect("signal").delivered);
    tx.rollback().await.expect("rollback");
    let job = store.get(&id).await.expect("job");
    assert_eq!(job.state, errand_core::JobState::Waiting);
    assert!(store.detail(&id).await.expect("detail").signals.is_empty());

    let tx = client.transaction().await.expect("begin");
    tx.execute(&format!("INSERT INTO {schema}.orders VALUES ('o1')"), &[])
        .await
        .expect("order");
    assert!(store.signal_in(&tx, &paid).await.expect("signal").delivered);
    // Not visible to others before the commit.
    assert_eq!(
        store.get(&id).await.expect("job").state,
        errand_core::JobState::Waiting
    );
    tx.commit().await.expect("commit");
    assert_eq!(
        store.get(&id).await.expect("job").state,
        errand_core::JobState::Ready
    );
    let got = store
        .received_signal(&id)
        .await
        .expect("read")
        .expect("one");
    assert_eq!(
        got.payload.expect("payload").as_str(),
        r#"{"payment":"p-1"}"#
    );
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("drop");
}

/// From SQL: `enqueue(…, await_signal => …)` stores a waiting job and
/// `signal(…)` delivers to it in the caller's transaction (or keeps, or
/// refuses, as the library does).
#[tokio::test]
async fn sql_enqueues_a_waiting_job_and_signals_it() {
    let Some(url) = url() else { return };
    let schema = format!("errand_sqlsig_{}", std::process::id());
    let (store, client) = setup(&url, &schema).await;
    client
        .batch_execute(&format!(
            "SELECT {schema}.enqueue('hold', '{{}}', id => 'h1', await_signal => 'paid', \
             await_timeout => interval '1 hour', on_await_timeout => 'run')"
        ))
        .await
        .expect("enqueue");
    let id = JobId::new("h1").expect("id");
    let job = store.get(&id).await.expect("job");
    assert_eq!(job.state, errand_core::JobState::Waiting);
    let wait = job.awaiting.expect("wait");
    assert_eq!(wait.on_timeout, errand_core::OnAwaitTimeout::Run);
    assert!(wait.until.is_some());

    let refused = client
        .query_one(&format!("SELECT {schema}.signal('h1', 'shipped')"), &[])
        .await
        .expect_err("not awaited");
    let db = refused.as_db_error().expect("a database error");
    assert_eq!(db.code().code(), "55000");
    assert!(
        db.hint()
            .unwrap_or("")
            .contains("waits for the signal paid"),
        "{db:?}"
    );
    let kept: bool = client
        .query_one(
            &format!("SELECT {schema}.signal('h1', 'shipped', buffer => true)"),
            &[],
        )
        .await
        .expect("kept")
        .get(0);
    assert!(!kept);
    let delivered: bool = client
        .query_one(
            &format!("SELECT {schema}.signal('h1', 'paid', '{{\"payment\": 9}}')"),
            &[],
        )
        .await
        .expect("delivered")
        .get(0);
    assert!(delivered);
    assert_eq!(
        store.get(&id).await.expect("job").state,
        errand_core::JobState::Ready
    );
    let got = store
        .received_signal(&id)
        .await
        .expect("read")
        .expect("one");
    assert_eq!(got.payload.expect("payload").as_str(), r#"{"payment": 9}"#);
    assert_eq!(store.detail(&id).await.expect("detail").signals.len(), 2);
    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("drop");
}

/// A handler completes its step with children inside its own transaction:
/// rolled back, neither the completion nor any child exists; committed,
/// the step is done, the child stored and the join waits for it. Outside
/// a transaction the call is refused and writes nothing.
#[tokio::test]
async fn children_added_in_the_handlers_transaction_commit_with_its_rows() {
    let Some(url) = url() else { return };
    let schema = format!("errand_tk_{}", std::process::id());
    let (store, mut client) = setup(&url, &schema).await;
    store.insert(job("step")).await.expect("insert");
    store
        .insert(job("join").depends_on(JobId::new("step").expect("id")))
        .await
        .expect("join");
    let req = errand_core::ClaimRequest {
        queues: vec![],
        limit: 1,
        lease: std::time::Duration::from_secs(30),
        rate: None,
        reclaim: true,
    };
    let lease = store.claim(&req).await.expect("claim").remove(0).lease;
    let kids = [job("kid")];
    let refused = store
        .complete_with_children_in(&client, &lease, None, &kids)
        .await;
    assert!(matches!(refused, Err(Error::Invalid(_))), "{refused:?}");
    for commit in [false, true] {
        let tx = client.transaction().await.expect("begin");
        tx.execute(
            &format!("INSERT INTO {schema}.orders VALUES ($1)"),
            &[&"step"],
        )
        .await
        .expect("effect");
        let added = store
            .complete_with_children_in(&tx, &lease, None, &kids)
            .await
            .expect("complete with children");
        assert_eq!(added.dependents, 1);
        if commit {
            tx.commit().await.expect("commit");
        } else {
            tx.rollback().await.expect("rollback");
            let step = store.get(&lease.id).await.expect("step");
            assert_eq!(step.state, errand_core::JobState::Running);
            assert!(matches!(
                store.get(&JobId::new("kid").expect("id")).await,
                Err(Error::NotFound(_))
            ));
        }
    }
    let kid = store
        .get(&JobId::new("kid").expect("id"))
        .await
        .expect("kid");
    assert_eq!(kid.added_by.as_ref().map(JobId::as_str), Some("step"));
    let join = store
        .get(&JobId::new("join").expect("id"))
        .await
        .expect("join");
    assert_eq!(
        (join.state, join.waiting_on),
        (errand_core::JobState::Blocked, 1)
    );
}
