//! Claims that may start keyed jobs take turns on the schema's key lock,
//! so each sees the running counts the previous one committed; claims with
//! no keyed job due never wait for it.
//! Needs `ERRAND_TEST_POSTGRES_URL`; says SKIPPED without it.

use std::time::Duration;

use errand_core::{ClaimRequest, JobId, KeyLimit, NewJob, Payload, Store};
use errand_postgres::{PgOptions, PgStore};

fn url() -> Option<String> {
    let url = std::env::var("ERRAND_TEST_POSTGRES_URL")
        .ok()
        .filter(|s| !s.is_empty());
    if url.is_none() {
        eprintln!("SKIPPED: set ERRAND_TEST_POSTGRES_URL to run the PostgreSQL key-lock test");
    }
    url
}

fn job(id: &str) -> NewJob {
    NewJob::new("k", Payload::default())
        .expect("kind")
        .with_id(JobId::new(id).expect("id"))
}

fn claim_all() -> ClaimRequest {
    ClaimRequest {
        queues: Vec::new(),
        limit: 10,
        lease: Duration::from_secs(30),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_keyed_jobs_waits_for_the_key_lock_and_a_plain_claim_does_not() {
    let Some(url) = url() else { return };
    let schema = format!("errand_keylock_{}", std::process::id());
    let (other, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    other
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
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

    // Another session holds the key lock, as a claim in flight would.
    let lock_key = format!("\"{schema}\".errand_jobs keys");
    other
        .execute(
            "SELECT pg_advisory_lock(hashtextextended($1, 0))",
            &[&lock_key],
        )
        .await
        .expect("lock");

    store.insert(job("plain")).await.expect("insert");
    let plain = tokio::time::timeout(Duration::from_secs(10), store.claim(&claim_all()))
        .await
        .expect("with no keyed job due, a claim does not wait for the key lock")
        .expect("claim");
    assert_eq!(plain.len(), 1);

    store
        .insert(job("keyed").with_key("t", KeyLimit::Ordered).expect("key"))
        .await
        .expect("insert");
    let pending = tokio::spawn({
        let store = store.clone();
        async move { store.claim(&claim_all()).await }
    });
    // The claim must be waiting on the lock: watch it in pg_locks rather
    // than trusting a sleep.
    let mut waiting = false;
    for _ in 0..200 {
        let n: i64 = other
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                &[],
            )
            .await
            .expect("pg_locks")
            .get(0);
        if n > 0 {
            waiting = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(
        waiting,
        "a claim with a keyed job due waits for the key lock"
    );
    assert!(!pending.is_finished());
    other
        .execute(
            "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
            &[&lock_key],
        )
        .await
        .expect("unlock");
    let keyed = pending.await.expect("task").expect("claim");
    assert_eq!(keyed.len(), 1);
    assert_eq!(keyed[0].job.id.as_str(), "keyed");
    other
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("drop");
}
