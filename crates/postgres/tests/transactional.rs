//! Enqueue inside the application's own tokio-postgres transaction.
//! Needs `ERRAND_TEST_POSTGRES_URL`; says SKIPPED without it.

use errand_core::{Error, JobFilter, JobId, NewJob, Payload, Store};
use errand_postgres::{PgOptions, PgStore};

fn url() -> Option<String> {
    let url = std::env::var("ERRAND_TEST_POSTGRES_URL")
        .ok()
        .filter(|s| !s.is_empty());
    if url.is_none() {
        eprintln!(
            "SKIPPED: set ERRAND_TEST_POSTGRES_URL to run the PostgreSQL transactional tests"
        );
    }
    url
}

fn job(id: &str) -> NewJob {
    NewJob::new("receipt", Payload::default())
        .expect("kind")
        .with_id(JobId::new(id).expect("id"))
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
    assert_eq!(
        all.iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
        vec!["o1"]
    );

    client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("cleanup");
}
