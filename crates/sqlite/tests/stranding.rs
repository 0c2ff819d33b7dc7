#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Retention never deletes a job that a blocked job still waits for. The
//! rules leave no such job among those retention may delete (a cancelled
//! job's waiting dependents are cancelled with it; an enqueue or a replay
//! under a cancelled dependency is judged at once or refused), so the
//! state is written here by hand: the prune's own statement must still
//! refuse to strand the waiting job.

use std::time::Duration;

use errand_core::{JobId, JobState, JobStore, NewJob, Payload};
use errand_sqlite::{SqliteOptions, SqliteStore};

fn job(id: &str) -> NewJob {
    NewJob::new("k", Payload::default())
        .unwrap()
        .with_id(JobId::new(id).unwrap())
}

#[tokio::test]
async fn a_prune_keeps_a_cancelled_job_that_a_blocked_job_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let options = SqliteOptions {
        create: true,
        migrate: true,
        ..SqliteOptions::default()
    };
    let store = SqliteStore::open(&path, options).unwrap();
    store.insert(job("a")).await.unwrap();
    store.insert(job("quiet")).await.unwrap();
    store
        .insert(job("b").depends_on(JobId::new("a").unwrap()))
        .await
        .unwrap();
    // a and quiet cancelled long ago, b left waiting for a.
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute(
        "UPDATE errand_jobs SET state = 'cancelled', finished_at = 0,
             last_error = 'by hand', last_error_class = 'cancelled'
         WHERE id IN ('a', 'quiet')",
        [],
    )
    .unwrap();

    let pruned = store.prune(Duration::from_secs(1), 100).await.unwrap();
    assert_eq!(pruned, 1, "only the job nothing waits for goes");
    let a = store.get(&JobId::new("a").unwrap()).await.unwrap();
    assert_eq!(a.state, JobState::Cancelled, "b still waits for a");
    let b = store.get(&JobId::new("b").unwrap()).await.unwrap();
    assert_eq!((b.state, b.waiting_on), (JobState::Blocked, 1));
}
