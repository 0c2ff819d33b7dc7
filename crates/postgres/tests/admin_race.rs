//! Operator actions, retention and batch seals against other
//! transactions: an action stays all or none when a job it names reaches
//! an accepted state while the action waits for that job's row lock, and
//! no purge, replay, prune or seal leaves a job waiting for a job that is
//! gone or can no longer release it.
//! Needs `ERRAND_TEST_POSTGRES_URL`; says SKIPPED without it.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    Admin, AdminStore, CancelRequest, ClaimRequest, Error, ErrorClass, Failure, JobId, JobState,
    JobStore, NewJob, Payload, PurgeRequest, ReplayRequest, RescheduleRequest,
};
use errand_postgres::{PgOptions, PgStore};
use errand_testsupport::PgSchema;

fn url() -> Option<String> {
    errand_testsupport::postgres_url("the PostgreSQL operator race test")
}

fn id(s: &str) -> JobId {
    JobId::new(s).expect("id")
}

async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
}

async fn store_in(url: &str, schema: &str) -> PgStore {
    let options = PgOptions {
        schema: schema.to_owned(),
        migrate: true,
        ..PgOptions::default()
    };
    PgStore::connect(url, options).await.expect("store")
}

/// Waits until a statement on `schema`'s jobs is waiting for a row lock
/// (`what` names it in the failure).
async fn wait_for_a_lock_wait(client: &tokio_postgres::Client, schema: &str, what: &str) {
    assert!(
        lock_waited(client, schema).await,
        "{what} never waited for the row lock"
    );
}

/// Whether a statement on `schema`'s jobs comes to wait for a row lock
/// within five seconds.
async fn lock_waited(client: &tokio_postgres::Client, schema: &str) -> bool {
    let waiting = format!(
        "SELECT count(*) FROM pg_stat_activity
         WHERE wait_event_type = 'Lock' AND query LIKE '%{schema}%errand_jobs%'"
    );
    for _ in 0..500 {
        let n: i64 = client
            .query_one(&waiting, &[])
            .await
            .expect("activity")
            .get(0);
        if n > 0 {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Claims the one due job and fails it for good: it is dead.
async fn kill(store: &PgStore, name: &str) {
    let claimed = store.claim(&claim(1)).await.expect("claim");
    assert_eq!(claimed[0].job.id, id(name));
    let failure = Failure {
        error: "bad".into(),
        class: ErrorClass::Permanent,
        retry: None,
    };
    store.fail(&claimed[0].lease, failure).await.expect("fail");
}

fn claim(limit: u32) -> ClaimRequest {
    ClaimRequest {
        queues: Vec::new(),
        limit,
        lease: Duration::from_secs(60),
        rate: None,
        reclaim: false,
    }
}

/// An enqueue naming a dead job as its dependency holds that job's row
/// while a purge of it starts; the purge, once it gets the row, sees the
/// dependent that now waits and refuses (exactly one of the two wins).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_purge_waiting_behind_an_enqueue_that_names_the_job_refuses() {
    let Some(url) = url() else { return };
    let scratch = PgSchema::new(&url, "race_purge");
    let schema = scratch.name.clone();
    let client = connect(&url).await;
    let store = store_in(&url, &schema).await;
    store
        .insert(
            NewJob::new("k", Payload::default())
                .expect("kind")
                .with_id(id("b")),
        )
        .await
        .expect("insert");
    kill(&store, "b").await;

    let mut other = connect(&url).await;
    let tx = other.transaction().await.expect("begin");
    let d = NewJob::new("k", Payload::default())
        .expect("kind")
        .with_id(id("d"))
        .depends_on(id("b"));
    let linked = store.enqueue_in(&tx, d).await.expect("enqueue d");
    assert_eq!(linked.job.state, JobState::Blocked);

    let admin = Admin::new(Arc::new(store.clone()));
    let purge = tokio::spawn(async move {
        admin
            .purge_jobs(&PurgeRequest {
                ids: vec![id("b")],
                operator: "ops".into(),
                reason: "clean up".into(),
            })
            .await
    });
    wait_for_a_lock_wait(&client, &schema, "the purge").await;
    tx.commit().await.expect("commit");

    match purge.await.expect("task") {
        Err(Error::InvalidState {
            id: which, hint, ..
        }) => {
            assert_eq!(which, "b");
            assert!(hint.contains('d'), "{hint}");
        }
        other => panic!("the purge must be refused: d waits for b; got {other:?}"),
    }
    assert_eq!(store.get(&id("b")).await.expect("b").state, JobState::Dead);
    assert_eq!(
        store.get(&id("d")).await.expect("d").state,
        JobState::Blocked
    );
}

/// A replay of a cancelled dependent while another transaction cancels
/// its dependency: the replay waits for the dependency's row, then sees it
/// cancelled and refuses, instead of putting the dependent back to wait
/// for a job whose cancellation has already released its dependents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replay_waiting_behind_its_dependencys_cancel_refuses() {
    let Some(url) = url() else { return };
    let scratch = PgSchema::new(&url, "race_replay");
    let schema = scratch.name.clone();
    let client = connect(&url).await;
    let store = store_in(&url, &schema).await;
    let later = errand_core::Schedule::After(Duration::from_secs(3600));
    store
        .insert(
            NewJob::new("k", Payload::default())
                .expect("kind")
                .with_id(id("a"))
                .scheduled(later),
        )
        .await
        .expect("insert a");
    let b = NewJob::new("k", Payload::default())
        .expect("kind")
        .with_id(id("b"))
        .depends_on(id("a"));
    store.insert(b).await.expect("insert b");
    let admin = Admin::new(Arc::new(store.clone()));
    admin
        .cancel_jobs(&CancelRequest {
            ids: vec![id("b")],
            operator: "ops".into(),
            reason: None,
        })
        .await
        .expect("cancel b");

    // Another session cancels a (as an operator's cancel does) and holds
    // its row.
    let mut other = connect(&url).await;
    let tx = other.transaction().await.expect("begin");
    tx.execute(
        &format!(
            "UPDATE {schema}.errand_jobs SET state = 'cancelled', finished_at = now(),
                 last_error = 'not wanted', last_error_class = 'cancelled'
             WHERE id = 'a'"
        ),
        &[],
    )
    .await
    .expect("cancel a");

    let replay = tokio::spawn(async move {
        admin
            .replay_jobs(&ReplayRequest {
                ids: vec![id("b")],
                operator: "ops".into(),
                reason: None,
            })
            .await
    });
    // (A replay that does not lock the dependency does not wait: it ends
    // before the commit, and the outcome below tells.)
    lock_waited(&client, &schema).await;
    tx.commit().await.expect("commit");

    match replay.await.expect("task") {
        Err(Error::InvalidState {
            id: which, hint, ..
        }) => {
            assert_eq!(which, "b");
            assert!(hint.contains("a, which is cancelled"), "{hint}");
        }
        other => panic!("the replay must be refused: a is cancelled; got {other:?}"),
    }
    assert_eq!(
        store.get(&id("b")).await.expect("b").state,
        JobState::Cancelled
    );
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
            .reschedule_jobs(&RescheduleRequest {
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
    wait_for_a_lock_wait(&client, &schema, "the reschedule").await;
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

/// A seal waiting behind the purge of one of its batch's jobs seals the
/// jobs that remain: the callbacks never name the job that went.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seal_waiting_behind_a_purge_of_one_of_its_jobs_seals_the_rest() {
    let Some(url) = url() else { return };
    let scratch = PgSchema::new(&url, "race_seal");
    let schema = scratch.name.clone();
    let client = connect(&url).await;
    let store = store_in(&url, &schema).await;
    let batch = errand_core::BatchId::new("b1").expect("batch id");
    for name in ["m1", "m2"] {
        let job = NewJob::new("k", Payload::default())
            .expect("kind")
            .with_id(id(name))
            .in_batch(batch.clone());
        store.insert(job).await.expect("insert");
    }
    kill(&store, "m1").await;

    // Another session deletes m1 (as a purge does) and holds its row.
    let mut other = connect(&url).await;
    let tx = other.transaction().await.expect("begin");
    tx.execute(
        &format!("DELETE FROM {schema}.errand_jobs WHERE id = 'm1'"),
        &[],
    )
    .await
    .expect("delete m1");

    let sealing = store.clone();
    let seal = tokio::spawn(async move {
        let callback = NewJob::new("done", Payload::default())
            .expect("kind")
            .with_id(id("cb"));
        sealing
            .seal_batch(&errand_core::BatchSeal {
                batch,
                on_success: Some(callback),
                on_finish: None,
            })
            .await
    });
    wait_for_a_lock_wait(&client, &schema, "the seal").await;
    tx.commit().await.expect("commit");

    let sealed = seal.await.expect("task").expect("the seal of what remains");
    assert_eq!(sealed.total, 1);
    let detail = store.detail(&id("cb")).await.expect("callback");
    let deps: Vec<&str> = detail.dependencies.iter().map(|d| d.id.as_str()).collect();
    assert_eq!(deps, ["m2"], "the callback waits for the job that remains");
}

/// Retention keeps a cancelled job that a blocked job still waits for.
/// The rules leave none such, so the state is written here by hand: the
/// prune's own statement must still refuse to strand the waiting job.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_prune_keeps_a_cancelled_job_that_a_blocked_job_waits_for() {
    let Some(url) = url() else { return };
    let scratch = PgSchema::new(&url, "prune_waited_for");
    let schema = scratch.name.clone();
    let client = connect(&url).await;
    let store = store_in(&url, &schema).await;
    let plain = |name: &str| {
        NewJob::new("k", Payload::default())
            .expect("kind")
            .with_id(id(name))
    };
    store.insert(plain("a")).await.expect("insert a");
    store.insert(plain("quiet")).await.expect("insert quiet");
    store
        .insert(plain("b").depends_on(id("a")))
        .await
        .expect("insert b");
    client
        .execute(
            &format!(
                "UPDATE {schema}.errand_jobs SET state = 'cancelled',
                     finished_at = now() - interval '1 day', last_error = 'by hand',
                     last_error_class = 'cancelled'
                 WHERE id IN ('a', 'quiet')"
            ),
            &[],
        )
        .await
        .expect("cancel a and quiet by hand");

    let pruned = store
        .prune(Duration::from_secs(1), 100)
        .await
        .expect("prune");
    assert_eq!(pruned, 1, "only the job nothing waits for goes");
    assert_eq!(
        store.get(&id("a")).await.expect("a").state,
        JobState::Cancelled
    );
    let b = store.get(&id("b")).await.expect("b");
    assert_eq!((b.state, b.waiting_on), (JobState::Blocked, 1));
}
