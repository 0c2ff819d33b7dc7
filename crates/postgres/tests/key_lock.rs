//! Claims that may start keyed jobs take turns on the schema's key lock,
//! so each sees the running counts the previous one committed; claims with
//! no keyed job due never wait for it.
//! Needs `ERRAND_TEST_POSTGRES_URL`; says SKIPPED without it.

use std::time::Duration;

use errand_core::JobStore;
use errand_core::{ClaimRequest, JobId, KeyLimit, NewJob, Payload};
use errand_postgres::{PgOptions, PgStore};

fn url() -> Option<String> {
    errand_testsupport::postgres_url("the PostgreSQL key-lock test")
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
        rate: None,
        reclaim: true,
    }
}

/// Another session on the database, with `schema` dropped (a fresh start).
async fn session(url: &str, schema: &str) -> tokio_postgres::Client {
    let (other, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    other
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .await
        .expect("drop");
    other
}

async fn open(url: &str, schema: &str, pool_size: usize) -> PgStore {
    PgStore::connect(
        url,
        PgOptions {
            schema: schema.to_owned(),
            migrate: true,
            pool_size,
            ..PgOptions::default()
        },
    )
    .await
    .expect("store")
}

/// Takes (`lock`) or releases the schema's key lock from `other`, as a
/// claim in flight would hold it.
async fn key_lock(other: &tokio_postgres::Client, schema: &str, lock: bool) {
    let sql = if lock {
        "SELECT pg_advisory_lock(hashtextextended($1, 0))"
    } else {
        "SELECT pg_advisory_unlock(hashtextextended($1, 0))"
    };
    let lock_key = format!("\"{schema}\".errand_jobs keys");
    other.execute(sql, &[&lock_key]).await.expect("key lock");
}

/// Whether some session waits for an advisory lock (watched in pg_locks
/// rather than trusting a sleep).
async fn someone_waits_for_a_lock(other: &tokio_postgres::Client) -> bool {
    let n: i64 = other
        .query_one(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
            &[],
        )
        .await
        .expect("pg_locks")
        .get(0);
    n > 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_of_keyed_jobs_waits_for_the_key_lock_and_a_plain_claim_does_not() {
    let Some(url) = url() else { return };
    let schema = format!("errand_keylock_{}", std::process::id());
    let other = session(&url, &schema).await;
    let store = open(&url, &schema, 8).await;

    // Another session holds the key lock, as a claim in flight would.
    key_lock(&other, &schema, true).await;

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
    // The claim must be waiting on the lock.
    let mut waiting = false;
    for _ in 0..200 {
        if someone_waits_for_a_lock(&other).await {
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
    key_lock(&other, &schema, false).await;
    let keyed = pending.await.expect("task").expect("claim");
    assert_eq!(keyed.len(), 1);
    assert_eq!(keyed[0].job.id.as_str(), "keyed");
    other
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("drop");
}

/// A claim dropped while it waits for the key lock (a caller's timeout, a
/// runtime shut down mid-claim) leaves no transaction behind: its pooled
/// connection rolls back, so it does not keep the key lock it was granted
/// later and a claim from another pool goes through. (Its transaction was
/// opened with a plain BEGIN, so nothing in the driver would end it.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_dropped_mid_transaction_leaves_no_transaction_open() {
    let Some(url) = url() else { return };
    let schema = format!("errand_keydrop_{}", std::process::id());
    let other = session(&url, &schema).await;
    let store = open(&url, &schema, 1).await;
    store
        .insert(job("keyed").with_key("t", KeyLimit::Ordered).expect("key"))
        .await
        .expect("insert");
    key_lock(&other, &schema, true).await;
    // The claim begins, then waits for the lock; give up on it once it is
    // seen waiting.
    let req = claim_all();
    let mut claim = Box::pin(store.claim(&req));
    let mut waiting = false;
    for _ in 0..200 {
        if tokio::time::timeout(Duration::from_millis(25), &mut claim)
            .await
            .is_ok()
        {
            panic!("the claim finished while another session held the key lock");
        }
        if someone_waits_for_a_lock(&other).await {
            waiting = true;
            break;
        }
    }
    assert!(waiting, "the claim waits for the key lock");
    drop(claim);
    key_lock(&other, &schema, false).await;
    // The dropped claim's session is granted the lock now; unless it rolls
    // back, it keeps it, idle in its transaction.
    let elsewhere = open(&url, &schema, 1).await;
    let claimed = tokio::time::timeout(Duration::from_secs(10), elsewhere.claim(&claim_all()))
        .await
        .expect("a claim from another pool is not blocked by the dropped claim's transaction")
        .expect("claim");
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].job.id.as_str(), "keyed");
    let idle_in_tx: i64 = other
        .query_one(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() \
             AND state LIKE 'idle in transaction%' AND strpos(query, $1) > 0",
            &[&schema],
        )
        .await
        .expect("pg_stat_activity")
        .get(0);
    assert_eq!(
        idle_in_tx, 0,
        "no session of this schema is left inside a transaction"
    );
    drop(store);
    drop(elsewhere);
    other
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await
        .expect("drop");
}
