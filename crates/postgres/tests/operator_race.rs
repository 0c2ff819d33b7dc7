//! An operator action stays all or none when a job it names reaches an
//! accepted state while the action waits for that job's row lock.
//! Needs `ERRAND_TEST_POSTGRES_URL`; says SKIPPED without it.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    Admin, AdminStore, ClaimRequest, JobId, JobStore, NewJob, Payload, RescheduleRequest,
};
use errand_postgres::{PgOptions, PgStore};
use errand_testsupport::PgSchema;

fn url() -> Option<String> {
    errand_testsupport::postgres_url("the PostgreSQL operator race test")
}

fn id(s: &str) -> JobId {
    JobId::new(s).expect("id")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_job_that_becomes_acceptable_while_the_action_waits_is_changed_with_the_rest() {
    let Some(url) = url() else { return };
    let scratch = PgSchema::new(&url, "race");
    let schema = scratch.name.clone();
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    let options = PgOptions {
        schema: schema.clone(),
        migrate: true,
        ..PgOptions::default()
    };
    let store = PgStore::connect(&url, options).await.expect("store");
    // "b" is running, "a" waits.
    for name in ["b", "a"] {
        let job = NewJob::new("k", Payload::default())
            .expect("kind")
            .with_id(id(name));
        store.insert(job).await.expect("insert");
        if name == "b" {
            let req = ClaimRequest {
                queues: Vec::new(),
                limit: 1,
                lease: Duration::from_secs(60),
                rate: None,
                reclaim: false,
            };
            assert_eq!(store.claim(&req).await.expect("claim")[0].job.id, id("b"));
        }
    }

    // Another session gives "b" back (as a worker's retry would) and holds
    // its row until the operator's statement is waiting for it.
    let (mut other, other_conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(other_conn);
    let tx = other.transaction().await.expect("begin");
    tx.execute(
        &format!(
            "UPDATE {schema}.errand_jobs SET state = 'ready', lease_token = NULL, lease_until = NULL
             WHERE id = 'b'"
        ),
        &[],
    )
    .await
    .expect("give b back");

    let admin = Admin::new(Arc::new(store.clone()));
    let moved = tokio::spawn(async move {
        admin
            .reschedule(&RescheduleRequest {
                ids: vec![id("a"), id("b")],
                run: None,
                priority: Some(5),
                operator: "ops".into(),
                reason: None,
            })
            .await
    });
    // Wait until the operator's statement is blocked on "b"'s lock: it has
    // taken its snapshot while "b" was still running.
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity
         WHERE wait_event_type = 'Lock' AND query LIKE '%{schema}%errand_jobs%'"
    );
    let mut blocked = false;
    for _ in 0..500 {
        let n: i64 = client
            .query_one(&waiting, &[])
            .await
            .expect("activity")
            .get(0);
        if n > 0 {
            blocked = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(blocked, "the reschedule never waited for the row lock");
    tx.commit().await.expect("commit");

    let moved = moved.await.expect("task").expect("reschedule");
    assert_eq!(
        moved
            .iter()
            .map(|j| (j.id.as_str(), j.priority))
            .collect::<Vec<_>>(),
        [("a", 5), ("b", 5)]
    );
    for name in ["a", "b"] {
        let detail = store.detail(&id(name)).await.expect("detail");
        assert_eq!(detail.job.priority, 5, "{name}");
        let actions: Vec<&str> = detail.audit.iter().map(|e| e.action.as_str()).collect();
        assert_eq!(actions, ["reschedule"], "{name}: one audit entry");
    }
}
