//! Enqueue inside a sqlx transaction (feature `sqlx`).
//! Needs `ERRAND_TEST_POSTGRES_URL`; says SKIPPED without it.
#![cfg(feature = "sqlx")]

use errand_core::JobStore;
use errand_core::{Error, JobId, NewJob, Payload};
use errand_postgres::sqlx_adapter::enqueue_in;
use errand_postgres::{PgOptions, PgStore};
use sqlx::Connection;

#[tokio::test]
async fn a_job_enqueued_in_a_sqlx_transaction_commits_or_rolls_back_with_it() {
    let Some(url) = errand_testsupport::postgres_url("the sqlx adapter test") else {
        return;
    };
    let schema = format!("errand_sqlx_{}", std::process::id());
    let mut conn = sqlx::PgConnection::connect(&url)
        .await
        .expect("sqlx connect");
    sqlx::query(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .execute(&mut conn)
        .await
        .expect("drop");
    let store = PgStore::connect(
        &url,
        PgOptions {
            schema: schema.clone(),
            migrate: true,
            ..PgOptions::default()
        },
    )
    .await
    .expect("store");
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
    assert_eq!(stored.payload.as_str(), r#"{"p": 1}"#);

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

    let err = enqueue_in(&mut conn, "no_such_schema", &job("s2"))
        .await
        .expect_err("missing schema");
    assert!(matches!(err, Error::SchemaOutdated(_)), "{err}");
    sqlx::query(&format!("DROP SCHEMA {schema} CASCADE"))
        .execute(&mut conn)
        .await
        .expect("cleanup");
}
