#![allow(clippy::unwrap_used)]
//! The worker service: kinds, queues, leases, deadlines and draining, on a
//! real SQLite file with the host clock (heartbeats run on real time).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use errand::{
    CancelRequest, ErrorClass, JobFilter, JobId, JobState, KindOptions, NewJob, Outcome, Payload,
    RetryPolicy, Runtime, SqliteOptions, SqliteStore, Store, WorkOutcome,
};
use serde::Deserialize;

fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        create: true,
        migrate: true,
        ..Default::default()
    };
    let store = SqliteStore::open(dir.path().join("rt.db"), options).unwrap();
    (dir, Arc::new(store))
}

/// A store whose clock only the test moves.
fn store_on_manual_clock() -> (tempfile::TempDir, Arc<dyn Store>, errand::ManualClock) {
    let dir = tempfile::tempdir().unwrap();
    let clock = errand::ManualClock::new(errand::Timestamp::from_millis(1_795_996_800_000));
    let options = SqliteOptions {
        create: true,
        migrate: true,
        clock: Arc::new(clock.clone()),
        ..Default::default()
    };
    let store = SqliteStore::open(dir.path().join("clocked.db"), options).unwrap();
    (dir, Arc::new(store), clock)
}

async fn enqueue(store: &Arc<dyn Store>, id: &str, kind: &str, queue: &str, payload: &str) {
    let job = NewJob::new(kind, Payload::from_json_text(payload).unwrap())
        .unwrap()
        .with_id(JobId::new(id).unwrap())
        .on_queue(queue)
        .unwrap();
    store.insert(job).await.unwrap();
}

async fn job(store: &Arc<dyn Store>, id: &str) -> errand::Job {
    store.get(&JobId::new(id).unwrap()).await.unwrap()
}

/// Resolves once no job is ready (and due) or running.
async fn settled(store: Arc<dyn Store>) {
    for _ in 0..600 {
        let jobs = store.list(&JobFilter::default()).await.unwrap();
        if jobs
            .iter()
            .all(|j| !matches!(j.state, JobState::Running | JobState::Ready))
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("jobs never settled");
}

#[derive(Deserialize)]
struct Add {
    a: i64,
    b: i64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn typed_handlers_run_by_kind_and_an_undecodable_payload_is_permanent() {
    let (_d, store) = store();
    let sum = Arc::new(AtomicUsize::new(0));
    let s = sum.clone();
    let runtime = Runtime::builder(store.clone())
        .handler("add", move |p: Add, _ctx| {
            let s = s.clone();
            async move {
                s.fetch_add(usize::try_from(p.a + p.b).unwrap_or(0), Ordering::SeqCst);
                Outcome::Success
            }
        })
        .unwrap()
        .queue("default", 4)
        .unwrap()
        .poll(Duration::from_millis(50))
        .build()
        .unwrap();
    enqueue(&store, "a1", "add", "default", r#"{"a":1,"b":2}"#).await;
    enqueue(&store, "a2", "add", "default", r#"{"a":10,"b":20}"#).await;
    enqueue(&store, "bad", "add", "default", r#"{"a":"one"}"#).await;
    let stats = runtime.run_until(settled(store.clone())).await.unwrap();
    assert_eq!(sum.load(Ordering::SeqCst), 33);
    assert_eq!(stats.count(WorkOutcome::Acknowledged), 2);
    let bad = job(&store, "bad").await;
    assert_eq!((bad.state, bad.attempts), (JobState::Dead, 1));
    assert_eq!(bad.last_error_class, Some(ErrorClass::Permanent));
}

/// A typed job: kind, queue, budget and retry schedule written once.
#[derive(serde::Serialize, Deserialize)]
struct Sum {
    a: i64,
    b: i64,
}

impl errand::JobArgs for Sum {
    const KIND: &'static str = "sum";
    fn options() -> errand::JobOptions {
        errand::JobOptions {
            queue: Some("math"),
            max_attempts: Some(2),
            retry: Some(RetryPolicy::Fixed(Duration::from_millis(20))),
            ..errand::JobOptions::default()
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_job_is_enqueued_and_handled_by_its_type_alone() {
    let (_d, store) = store();
    let client = errand::Client::new(store.clone());
    let ok = client.enqueue(&Sum { a: 2, b: 3 }).await.unwrap().job;
    let bad = client.enqueue(&Sum { a: -1, b: 0 }).await.unwrap().job;
    assert_eq!((ok.kind.as_str(), ok.queue.as_str()), ("sum", "math"));
    assert_eq!(
        (ok.payload.as_str(), ok.max_attempts),
        (r#"{"a":2,"b":3}"#, 2)
    );
    let total = Arc::new(AtomicUsize::new(0));
    let t = total.clone();
    let runtime = Runtime::builder(store.clone())
        .register(move |sum: Sum, _ctx| {
            let t = t.clone();
            async move {
                if sum.a < 0 {
                    return Outcome::retry("negative");
                }
                t.fetch_add(
                    usize::try_from(sum.a + sum.b).unwrap_or(0),
                    Ordering::SeqCst,
                );
                Outcome::Success
            }
        })
        .unwrap()
        .queue("math", 2)
        .unwrap()
        .poll(Duration::from_millis(10))
        .build()
        .unwrap();
    runtime.run_until(settled(store.clone())).await.unwrap();
    assert_eq!(total.load(Ordering::SeqCst), 5);
    assert_eq!(job(&store, ok.id.as_str()).await.state, JobState::Done);
    // The kind's attempt budget (2), from its options: dead after two.
    let bad = job(&store, bad.id.as_str()).await;
    assert_eq!((bad.state, bad.attempts), (JobState::Dead, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_queue_runs_at_most_its_concurrency() {
    let (_d, store) = store();
    let (now, max) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (n, m) = (now.clone(), max.clone());
    let runtime = Runtime::builder(store.clone())
        .handler("slow", move |_: serde_json::Value, _ctx| {
            let (n, m) = (n.clone(), m.clone());
            async move {
                let cur = n.fetch_add(1, Ordering::SeqCst) + 1;
                m.fetch_max(cur, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(40)).await;
                n.fetch_sub(1, Ordering::SeqCst);
                Outcome::Success
            }
        })
        .unwrap()
        .queue("narrow", 2)
        .unwrap()
        .poll(Duration::from_millis(20))
        .build()
        .unwrap();
    for i in 0..10 {
        enqueue(&store, &format!("n{i}"), "slow", "narrow", "{}").await;
    }
    enqueue(&store, "elsewhere", "slow", "other", "{}").await;
    let s = store.clone();
    let stats = runtime
        .run_until(async move {
            for _ in 0..400 {
                let done = s
                    .list(&JobFilter {
                        state: Some(JobState::Done),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                if done.len() == 10 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("the narrow queue never finished");
        })
        .await
        .unwrap();
    assert_eq!(stats.count(WorkOutcome::Acknowledged), 10);
    assert_eq!(max.load(Ordering::SeqCst), 2, "two at a time, never more");
    assert_eq!(
        job(&store, "elsewhere").await.state,
        JobState::Ready,
        "other queues are not touched"
    );
}

/// Runs one job of 4 s under a 2 s lease with `run` as its handler, and
/// checks that it finished on its first attempt: the lease was renewed in
/// time, never lost and reclaimed.
async fn a_job_longer_than_its_lease_finishes_once<F, Fut>(run: F)
where
    F: Fn(serde_json::Value, errand::JobContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Outcome> + Send + 'static,
{
    let (_d, store) = store();
    let runtime = Runtime::builder(store.clone())
        .handler("long", run)
        .unwrap()
        .queue("default", 1)
        .unwrap()
        // Renewed every third: a renewal may be up to two thirds of the
        // lease late (a busy CI disk) before the lease is lost. A 300 ms
        // lease failed that way once (attempts = 2) in a loaded CI run, and
        // a 1 s lease once (attempts = 3) on a machine running two test
        // suites at once: 2 s leaves a renewal 1.3 s.
        .lease(Duration::from_millis(2000))
        .poll(Duration::from_millis(20))
        .build()
        .unwrap();
    enqueue(&store, "l1", "long", "default", "{}").await;
    runtime.run_until(settled(store.clone())).await.unwrap();
    let j = job(&store, "l1").await;
    assert_eq!((j.state, j.attempts), (JobState::Done, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_longer_than_its_lease_keeps_it_by_heartbeat() {
    a_job_longer_than_its_lease_finishes_once(|_, _ctx| async {
        tokio::time::sleep(Duration::from_millis(4000)).await;
        Outcome::Success
    })
    .await;
}

/// A handler that holds its thread (blocking work, which it should not do,
/// but some will) still has its lease renewed: the handler runs in a task
/// of its own, and the renewal in the task waiting for it, free to run on
/// the other thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_blocks_its_thread_still_has_its_lease_renewed() {
    a_job_longer_than_its_lease_finishes_once(|_, _ctx| async {
        std::thread::sleep(Duration::from_millis(4000));
        Outcome::Success
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_lease_tells_the_handler_and_its_late_settlement_is_refused() {
    let (_d, store) = store();
    let told = Arc::new(AtomicUsize::new(0));
    let t = told.clone();
    let runtime = Runtime::builder(store.clone())
        .handler("watch", move |_: serde_json::Value, ctx| {
            let t = t.clone();
            async move {
                tokio::select! {
                    () = ctx.lease_lost() => { t.fetch_add(1, Ordering::SeqCst); }
                    () = tokio::time::sleep(Duration::from_secs(20)) => {}
                }
                Outcome::Success
            }
        })
        .unwrap()
        .queue("default", 1)
        .unwrap()
        .lease(Duration::from_millis(300))
        .poll(Duration::from_millis(20))
        .build()
        .unwrap();
    enqueue(&store, "w1", "watch", "default", "{}").await;
    let s = store.clone();
    let stats = runtime
        .run_until(async move {
            while job(&s, "w1").await.state != JobState::Running {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // An operator takes the job away while the handler runs.
            let req = CancelRequest {
                ids: vec![JobId::new("w1").unwrap()],
                operator: "ops".into(),
                reason: None,
            };
            errand::Admin::new(s.clone())
                .cancel_jobs(&req)
                .await
                .unwrap();
            settled(s).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        })
        .await
        .unwrap();
    assert_eq!(told.load(Ordering::SeqCst), 1, "the handler was told");
    assert_eq!(
        stats.count(WorkOutcome::LeaseLost),
        1,
        "its success was refused"
    );
    assert_eq!(job(&store, "w1").await.state, JobState::Cancelled);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_past_its_deadline_is_a_retryable_timeout() {
    let (_d, store) = store();
    let runtime = Runtime::builder(store.clone())
        .handler("stuck", |_: serde_json::Value, _ctx| async {
            tokio::time::sleep(Duration::from_secs(30)).await;
            Outcome::Success
        })
        .unwrap()
        .kind_options(
            "stuck",
            KindOptions {
                deadline: Some(Duration::from_millis(100)),
                retry: None,
            },
        )
        .unwrap()
        .queue("default", 1)
        .unwrap()
        .retry(
            errand::RetryPolicy::Fixed(Duration::from_secs(3600)),
            Arc::new(|| 0.5),
        )
        .poll(Duration::from_millis(20))
        .build()
        .unwrap();
    enqueue(&store, "s1", "stuck", "default", "{}").await;
    let s = store.clone();
    let stats = runtime
        .run_until(async move {
            while job(&s, "s1").await.attempts == 0
                || job(&s, "s1").await.state == JobState::Running
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap();
    let j = job(&store, "s1").await;
    assert_eq!(
        (j.state, j.last_error_class),
        (JobState::Ready, Some(ErrorClass::Timeout))
    );
    assert_eq!(stats.count(WorkOutcome::RetryScheduled), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draining_finishes_quick_jobs_and_releases_the_rest_without_spending_an_attempt() {
    let (_d, store) = store();
    let started = Arc::new(AtomicUsize::new(0));
    let st = started.clone();
    let runtime = Runtime::builder(store.clone())
        .handler("job", move |p: serde_json::Value, _ctx| {
            let st = st.clone();
            async move {
                st.fetch_add(1, Ordering::SeqCst);
                let ms = p["ms"].as_u64().unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Outcome::Success
            }
        })
        .unwrap()
        .queue("default", 2)
        .unwrap()
        .drain_deadline(Duration::from_millis(1500))
        .poll(Duration::from_millis(20))
        .build()
        .unwrap();
    enqueue(&store, "quick", "job", "default", r#"{"ms":50}"#).await;
    enqueue(&store, "slow", "job", "default", r#"{"ms":60000}"#).await;
    let st = started.clone();
    let stats = runtime
        .run_until(async move {
            while st.load(Ordering::SeqCst) < 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await
        .unwrap();
    let quick = job(&store, "quick").await;
    assert_eq!(
        quick.state,
        JobState::Done,
        "finished within the drain deadline"
    );
    let slow = job(&store, "slow").await;
    assert_eq!(
        (slow.state, slow.attempts),
        (JobState::Ready, 0),
        "released, attempt given back"
    );
    assert_eq!(stats.count(WorkOutcome::Released), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_without_a_handler_fails_with_a_message_naming_it() {
    let (_d, store) = store();
    let runtime = Runtime::builder(store.clone())
        .handler("known", |_: serde_json::Value, _ctx| async {
            Outcome::Success
        })
        .unwrap()
        .all_queues(1)
        .unwrap()
        .retry(
            errand::RetryPolicy::Fixed(Duration::from_secs(3600)),
            Arc::new(|| 0.5),
        )
        .poll(Duration::from_millis(20))
        .build()
        .unwrap();
    enqueue(&store, "u1", "mystery", "default", "{}").await;
    let s = store.clone();
    runtime
        .run_until(async move {
            while job(&s, "u1").await.attempts == 0
                || job(&s, "u1").await.state == JobState::Running
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap();
    let j = job(&store, "u1").await;
    assert_eq!(j.state, JobState::Ready);
    assert!(
        j.last_error
            .unwrap()
            .contains("no handler for kind `mystery`")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_maintenance_services_sweep_and_prune_on_their_own() {
    // Seeded rows and a controlled clock; the services are called directly.
    let (_dir, store, clock) = store_on_manual_clock();
    for id in ["old-done", "stuck"] {
        let j = NewJob::new("k", Payload::default())
            .unwrap()
            .with_id(JobId::new(id).unwrap())
            .with_max_attempts(1)
            .unwrap();
        store.insert(j).await.unwrap();
    }
    let req = errand::ClaimRequest {
        queues: vec![],
        limit: 2,
        lease: Duration::from_secs(1),
        rate: None,
        reclaim: true,
    };
    let claimed = store.claim(&req).await.unwrap();
    let done = claimed
        .iter()
        .find(|c| c.job.id.as_str() == "old-done")
        .unwrap();
    store.complete(&done.lease).await.unwrap();
    clock.advance(Duration::from_secs(2 * 86_400));
    let sweeper = errand::Sweeper::new(store.clone());
    assert_eq!(
        sweeper.run_once().await.unwrap(),
        vec![JobId::new("stuck").unwrap()]
    );
    let mut pruner = errand::Pruner::new(store.clone());
    pruner.keep = Duration::from_secs(86_400);
    pruner.batch = 1;
    assert_eq!(pruner.run_once().await.unwrap(), 1);
    let left: Vec<String> = store
        .list(&JobFilter::default())
        .await
        .unwrap()
        .into_iter()
        .map(|j| j.id.to_string())
        .collect();
    assert_eq!(left, vec!["stuck"], "the dead job stays");
    assert_eq!(job(&store, "stuck").await.state, JobState::Dead);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runtime_with_a_cron_schedule_enqueues_and_runs_its_ticks() {
    let (_d, store) = store();
    let ran = Arc::new(AtomicUsize::new(0));
    let r = ran.clone();
    let template = NewJob::new("tick", Payload::default()).unwrap();
    let schedule = errand::CronSchedule::new(
        "every-second",
        "* * * * * *",
        template,
        errand::Misfire::Skip,
    )
    .unwrap();
    let runtime = Runtime::builder(store.clone())
        .handler("tick", move |_: serde_json::Value, _ctx| {
            let r = r.clone();
            async move {
                r.fetch_add(1, Ordering::SeqCst);
                Outcome::Success
            }
        })
        .unwrap()
        .all_queues(2)
        .unwrap()
        .cron(schedule)
        .poll(Duration::from_millis(50))
        .build()
        .unwrap();
    let r = ran.clone();
    runtime
        .run_until(async move {
            while r.load(Ordering::SeqCst) < 2 {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await
        .unwrap();
    let jobs = store.list(&JobFilter::default()).await.unwrap();
    assert!(jobs.len() >= 2);
    assert!(
        jobs.iter()
            .all(|j| j.id.as_str().starts_with("cron:every-second:"))
    );
}

/// A runtime running kind `send` on queue `mail` (8 slots), limited to one
/// start per second with `burst`, counting the jobs it starts.
fn counting_rate_limited_runtime(
    store: &Arc<dyn Store>,
    burst: u32,
) -> (Runtime, Arc<AtomicUsize>) {
    let started = Arc::new(AtomicUsize::new(0));
    let s = started.clone();
    let runtime = Runtime::builder(store.clone())
        .handler("send", move |_: serde_json::Value, _ctx| {
            let s = s.clone();
            async move {
                s.fetch_add(1, Ordering::SeqCst);
                Outcome::Success
            }
        })
        .unwrap()
        .queue("mail", 8)
        .unwrap()
        .rate_limit(
            "mail",
            errand::RateLimit {
                per_second: 1.0,
                burst,
            },
        )
        .unwrap()
        .poll(Duration::from_millis(20))
        .build()
        .unwrap();
    (runtime, started)
}

/// A rate-limited queue keeps its burst while its worker idles: the
/// runtime's claims spend tokens only for the jobs they claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_keeps_its_queues_burst() {
    let (_dir, store, clock) = store_on_manual_clock();
    let (runtime, started) = counting_rate_limited_runtime(&store, 5);
    let st = store.clone();
    let c = clock.clone();
    runtime
        .run_until(async move {
            // Eight seconds of store time pass while the worker idles,
            // polling the empty queue many times in between.
            for _ in 0..8 {
                c.advance(Duration::from_secs(1));
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
            // Now eight jobs arrive while the store's clock stands still:
            // the burst of five starts, with no refill needed.
            let jobs = (0..8)
                .map(|i| {
                    NewJob::new("send", Payload::default())
                        .unwrap()
                        .with_id(JobId::new(format!("j{i}")).unwrap())
                        .on_queue("mail")
                        .unwrap()
                })
                .collect();
            st.insert_many(jobs).await.unwrap();
            for _ in 0..1_000 {
                if started.load(Ordering::SeqCst) >= 5 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            assert_eq!(
                started.load(Ordering::SeqCst),
                5,
                "the burst starts at once after idling"
            );
            // Time stands still: the burst is spent, nothing else starts.
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(started.load(Ordering::SeqCst), 5, "the burst is 5");
            c.advance(Duration::from_secs(1));
            for _ in 0..1_000 {
                if started.load(Ordering::SeqCst) >= 6 {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(started.load(Ordering::SeqCst), 6, "one token per second");
        })
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_queue_starts_no_more_jobs_than_its_bucket_grants() {
    // The bucket refills on the store's clock, which only the test moves.
    let (_dir, store, clock) = store_on_manual_clock();
    for i in 0..5 {
        enqueue(&store, &format!("r{i}"), "send", "mail", "{}").await;
    }
    let (runtime, started) = counting_rate_limited_runtime(&store, 2);
    let s = started.clone();
    let c = clock.clone();
    runtime
        .run_until(async move {
            while s.load(Ordering::SeqCst) < 2 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Time stands still: the burst is spent, nothing else starts.
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(s.load(Ordering::SeqCst), 2, "the burst is 2");
            c.advance(Duration::from_secs(1));
            while s.load(Ordering::SeqCst) < 3 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(s.load(Ordering::SeqCst), 3, "one token per second");
        })
        .await
        .unwrap();
    let err = Runtime::builder(store.clone())
        .handler("send", |_: serde_json::Value, _ctx| async {
            Outcome::Success
        })
        .unwrap()
        .queue("mail", 1)
        .unwrap()
        .rate_limit(
            "other",
            errand::RateLimit {
                per_second: 1.0,
                burst: 1,
            },
        )
        .unwrap()
        .build()
        .unwrap_err();
    assert!(err.to_string().contains("does not run"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_rate_starts_no_more_of_a_keys_jobs_than_its_bucket_grants() {
    // Each key's bucket refills on the store's clock, which only the test
    // moves; jobs over their key's rate are snoozed without spending an
    // attempt, and another key is not held back.
    let (_dir, store, clock) = store_on_manual_clock();
    let keyed = |id: &str, key: &str| {
        NewJob::new("send", Payload::default())
            .unwrap()
            .with_id(JobId::new(id).unwrap())
            .on_queue("mail")
            .unwrap()
            .with_key(key, errand::KeyLimit::Concurrent(100))
            .unwrap()
    };
    for i in 0..5 {
        store
            .insert(keyed(&format!("t{i}"), "tenant-t"))
            .await
            .unwrap();
    }
    store.insert(keyed("u0", "tenant-u")).await.unwrap();
    let started = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let s = started.clone();
    let runtime = Runtime::builder(store.clone())
        .handler("send", move |_: serde_json::Value, ctx| {
            let s = s.clone();
            async move {
                s.lock().unwrap().push(ctx.id().to_string());
                Outcome::Success
            }
        })
        .unwrap()
        .queue("mail", 8)
        .unwrap()
        .key_rate(
            "mail",
            errand::RateLimit {
                per_second: 1.0,
                burst: 2,
            },
        )
        .unwrap()
        .poll(Duration::from_millis(20))
        .build()
        .unwrap();
    let s = started.clone();
    let c = clock.clone();
    let st = store.clone();
    let count = move || s.lock().unwrap().len();
    runtime
        .run_until(async move {
            while count() < 3 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            // Time stands still: tenant-t's burst is spent.
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(count(), 3, "two of tenant-t (its burst) and tenant-u's one");
            let waiting: Vec<errand::Job> = st
                .list(&JobFilter {
                    state: Some(JobState::Ready),
                    ..Default::default()
                })
                .await
                .unwrap();
            assert_eq!(waiting.len(), 3, "the rest of tenant-t waits");
            assert!(
                waiting.iter().all(|j| j.attempts == 0),
                "held back without spending an attempt"
            );
            c.advance(Duration::from_secs(1));
            while count() < 4 {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert_eq!(count(), 4, "one token per second");
        })
        .await
        .unwrap();
    let started = started.lock().unwrap().clone();
    assert!(started.contains(&"u0".to_owned()), "{started:?}");
    assert_eq!(started.iter().filter(|id| id.starts_with('t')).count(), 3);
}

/// A store that records whether each claim asked to reclaim expired
/// leases and, made with `fail_combined`, whose combined settle-and-claim
/// always fails (as a claim that times out on the key lock would, taking
/// the acknowledgments it carried down with it) and whose batch
/// acknowledgments wait until one such claim has failed, so that
/// acknowledgments pile up while a claimer claims (whatever the
/// scheduling; the wait gives up after 10 s, and the test then fails on its
/// count of failed claims rather than hanging).
#[derive(Debug)]
struct Intercepting {
    inner: Arc<dyn Store>,
    fail_combined: bool,
    failed: AtomicUsize,
    first_failure: tokio::sync::Notify,
    /// Per claim: whether it asked to reclaim, how many it asked for and
    /// how many it got (`None`: it failed).
    reclaims: std::sync::Mutex<Vec<(bool, u32, Option<usize>)>>,
    /// Failures recorded one by one, and the size of each batch of them.
    single_failures: AtomicUsize,
    failure_batches: std::sync::Mutex<Vec<usize>>,
}

impl Intercepting {
    fn new(inner: Arc<dyn Store>, fail_combined: bool) -> Self {
        Intercepting {
            inner,
            fail_combined,
            failed: AtomicUsize::new(0),
            first_failure: tokio::sync::Notify::new(),
            reclaims: std::sync::Mutex::new(Vec::new()),
            single_failures: AtomicUsize::new(0),
            failure_batches: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn reclaims(&self) -> Vec<(bool, u32, Option<usize>)> {
        self.reclaims.lock().unwrap().clone()
    }

    fn record<T>(&self, req: &errand::ClaimRequest, got: &errand::Result<Vec<T>>) {
        let got = got.as_ref().ok().map(Vec::len);
        self.reclaims
            .lock()
            .unwrap()
            .push((req.reclaim, req.limit, got));
    }
}

#[async_trait::async_trait]
impl errand::JobStore for Intercepting {
    async fn insert(&self, job: NewJob) -> errand::Result<errand::Inserted> {
        self.inner.insert(job).await
    }
    async fn insert_many(&self, jobs: Vec<NewJob>) -> errand::Result<Vec<errand::Inserted>> {
        self.inner.insert_many(jobs).await
    }
    async fn claim(&self, req: &errand::ClaimRequest) -> errand::Result<Vec<errand::ClaimedJob>> {
        let got = self.inner.claim(req).await;
        self.record(req, &got);
        got
    }
    async fn complete_and_claim(
        &self,
        leases: &[errand::Lease],
        req: &errand::ClaimRequest,
    ) -> errand::Result<(Vec<bool>, errand::Result<Vec<errand::ClaimedJob>>)> {
        if !self.fail_combined {
            let got = self.inner.complete_and_claim(leases, req).await;
            match &got {
                Ok((_, claimed)) => self.record(req, claimed),
                Err(e) => self.record::<()>(req, &Err(e.clone())),
            }
            return got;
        }
        self.failed.fetch_add(1, Ordering::SeqCst);
        self.first_failure.notify_waiters();
        Err(errand::Error::storage(
            "injected: the claim's transaction failed",
        ))
    }
    async fn complete(&self, lease: &errand::Lease) -> errand::Result<errand::Job> {
        self.inner.complete(lease).await
    }
    async fn complete_with_output(
        &self,
        lease: &errand::Lease,
        output: &errand::Payload,
    ) -> errand::Result<errand::Job> {
        self.inner.complete_with_output(lease, output).await
    }
    async fn complete_with_children(
        &self,
        lease: &errand::Lease,
        output: Option<&errand::Payload>,
        children: &[NewJob],
    ) -> errand::Result<errand::core::ChildrenAdded> {
        self.inner
            .complete_with_children(lease, output, children)
            .await
    }
    async fn dependency_outputs(
        &self,
        id: &errand::JobId,
    ) -> errand::Result<Vec<(errand::JobId, Option<errand::Payload>)>> {
        self.inner.dependency_outputs(id).await
    }
    async fn heartbeat_with_progress(
        &self,
        lease: &errand::Lease,
        extend: Duration,
        progress: &errand::core::Progress,
    ) -> errand::Result<errand::Timestamp> {
        self.inner
            .heartbeat_with_progress(lease, extend, progress)
            .await
    }
    async fn complete_many(&self, leases: &[errand::Lease]) -> errand::Result<Vec<bool>> {
        let failure = self.first_failure.notified();
        tokio::pin!(failure);
        failure.as_mut().enable();
        if self.fail_combined && self.failed.load(Ordering::SeqCst) == 0 {
            let _ = tokio::time::timeout(Duration::from_secs(10), failure).await;
        }
        self.inner.complete_many(leases).await
    }
    async fn fail(&self, lease: &errand::Lease, f: errand::Failure) -> errand::Result<errand::Job> {
        self.single_failures.fetch_add(1, Ordering::SeqCst);
        self.inner.fail(lease, f).await
    }
    async fn fail_many(
        &self,
        items: &[(errand::Lease, errand::Failure)],
    ) -> errand::Result<Vec<Option<errand::Job>>> {
        self.failure_batches.lock().unwrap().push(items.len());
        self.inner.fail_many(items).await
    }
    async fn snooze(&self, lease: &errand::Lease, d: Duration) -> errand::Result<errand::Job> {
        self.inner.snooze(lease, d).await
    }
    async fn cancel_running(&self, lease: &errand::Lease, r: &str) -> errand::Result<errand::Job> {
        self.inner.cancel_running(lease, r).await
    }
    async fn heartbeat(
        &self,
        lease: &errand::Lease,
        d: Duration,
    ) -> errand::Result<errand::Timestamp> {
        self.inner.heartbeat(lease, d).await
    }
    async fn seal_batch(
        &self,
        seal: &errand::core::BatchSeal,
    ) -> errand::Result<errand::core::Batch> {
        self.inner.seal_batch(seal).await
    }
    async fn release(&self, lease: &errand::Lease) -> errand::Result<errand::Job> {
        self.inner.release(lease).await
    }
    async fn suspend(
        &self,
        lease: &errand::Lease,
        wait: &errand::core::Await,
    ) -> errand::Result<errand::Job> {
        self.inner.suspend(lease, wait).await
    }
    async fn signal(
        &self,
        signal: &errand::core::NewSignal,
    ) -> errand::Result<errand::core::Signalled> {
        self.inner.signal(signal).await
    }
    async fn received_signal(
        &self,
        id: &JobId,
    ) -> errand::Result<Option<errand::core::ReceivedSignal>> {
        self.inner.received_signal(id).await
    }
    async fn expire_waits(&self, limit: u32) -> errand::Result<Vec<errand::Job>> {
        self.inner.expire_waits(limit).await
    }
    async fn sweep_expired(&self) -> errand::Result<errand::SweepReport> {
        self.inner.sweep_expired().await
    }
    async fn prune(&self, d: Duration, n: u32) -> errand::Result<u64> {
        self.inner.prune(d, n).await
    }
    async fn get(&self, id: &JobId) -> errand::Result<errand::Job> {
        self.inner.get(id).await
    }
    async fn finish_signal(&self, id: &JobId) -> errand::Result<Box<dyn errand::core::WorkSignal>> {
        self.inner.finish_signal(id).await
    }
    async fn take_tokens(
        &self,
        b: &errand::RateBucket,
        l: errand::RateLimit,
        w: u32,
    ) -> errand::Result<u32> {
        self.inner.take_tokens(b, l, w).await
    }
    async fn report_worker(&self, r: &errand::WorkerReport) -> errand::Result<()> {
        self.inner.report_worker(r).await
    }
    async fn record_minutes(&self, rows: &[errand::MinuteCount]) -> errand::Result<()> {
        self.inner.record_minutes(rows).await
    }
    async fn prune_minutes(&self, before: i64) -> errand::Result<u64> {
        self.inner.prune_minutes(before).await
    }
}

/// The operator's seam of a store, meddled with: reading the stored
/// schedules can fail, and a listing that starts after a job can purge
/// that job first (as an operator's purge landing between two pages
/// would).
#[derive(Debug)]
struct Meddling {
    inner: Arc<dyn Store>,
    /// Whether reading the stored schedules fails.
    fail_schedules: bool,
    /// Whether a listing that starts after a job purges that job first.
    purge_list_cursor: bool,
}

impl Meddling {
    fn new(inner: Arc<dyn Store>) -> Self {
        Meddling {
            inner,
            fail_schedules: false,
            purge_list_cursor: false,
        }
    }
}

#[async_trait::async_trait]
impl errand::AdminStore for Meddling {
    async fn replay_jobs(
        &self,
        ids: &[JobId],
        by: &errand::AuditStamp,
    ) -> errand::Result<Vec<errand::Job>> {
        self.inner.replay_jobs(ids, by).await
    }
    async fn cancel_jobs(
        &self,
        ids: &[JobId],
        by: &errand::AuditStamp,
    ) -> errand::Result<Vec<errand::Job>> {
        self.inner.cancel_jobs(ids, by).await
    }
    async fn purge_jobs(
        &self,
        ids: &[JobId],
        by: &errand::AuditStamp,
    ) -> errand::Result<Vec<JobId>> {
        self.inner.purge_jobs(ids, by).await
    }
    async fn copy_jobs(
        &self,
        copies: &[(JobId, NewJob)],
        by: &errand::AuditStamp,
    ) -> errand::Result<Vec<errand::Job>> {
        self.inner.copy_jobs(copies, by).await
    }
    async fn reschedule_jobs(
        &self,
        ids: &[JobId],
        to: &errand::Reschedule,
        by: &errand::AuditStamp,
    ) -> errand::Result<Vec<errand::Job>> {
        self.inner.reschedule_jobs(ids, to, by).await
    }
    async fn pause_queue(&self, q: &errand::Name, by: &errand::AuditStamp) -> errand::Result<bool> {
        self.inner.pause_queue(q, by).await
    }
    async fn resume_queue(
        &self,
        q: &errand::Name,
        by: &errand::AuditStamp,
    ) -> errand::Result<bool> {
        self.inner.resume_queue(q, by).await
    }
    async fn set_queue_limit(
        &self,
        q: &errand::Name,
        concurrency: Option<u32>,
        by: &errand::AuditStamp,
    ) -> errand::Result<bool> {
        self.inner.set_queue_limit(q, concurrency, by).await
    }
    async fn queue_limits(&self) -> errand::Result<Vec<errand::QueueLimit>> {
        self.inner.queue_limits().await
    }
    async fn count_exactly(&self) -> errand::Result<Vec<errand::core::ExactCount>> {
        self.inner.count_exactly().await
    }
    async fn detail(&self, id: &JobId) -> errand::Result<errand::JobDetail> {
        self.inner.detail(id).await
    }
    async fn list(&self, f: &JobFilter) -> errand::Result<Vec<errand::Job>> {
        if self.purge_list_cursor
            && let Some(after) = &f.after
        {
            let by = errand::AuditStamp {
                operator: "someone else".into(),
                reason: Some("meanwhile".into()),
            };
            self.inner
                .purge_jobs(std::slice::from_ref(after), &by)
                .await?;
        }
        self.inner.list(f).await
    }
    async fn batch(&self, id: &errand::core::WorkflowId) -> errand::Result<errand::core::Batch> {
        self.inner.batch(id).await
    }
    async fn workflow_counts(
        &self,
        w: &errand::core::WorkflowId,
    ) -> errand::Result<Vec<(errand::JobState, u64)>> {
        self.inner.workflow_counts(w).await
    }
    async fn dependency_edges(
        &self,
        ids: &[errand::JobId],
        first: u32,
    ) -> errand::Result<Vec<errand::core::StepEdge>> {
        self.inner.dependency_edges(ids, first).await
    }
    async fn paused_queues(&self) -> errand::Result<Vec<errand::PausedQueue>> {
        self.inner.paused_queues().await
    }
    async fn change_schedule(
        &self,
        change: &errand::core::ScheduleChange,
        by: &errand::core::AuditStamp,
    ) -> errand::Result<Option<errand::StoredSchedule>> {
        self.inner.change_schedule(change, by).await
    }
    async fn schedules(&self) -> errand::Result<Vec<errand::StoredSchedule>> {
        if self.fail_schedules {
            return Err(errand::Error::Busy("the schedules are locked".into()));
        }
        self.inner.schedules().await
    }
    async fn audit_log(&self, f: &errand::AuditFilter) -> errand::Result<Vec<errand::AuditEntry>> {
        self.inner.audit_log(f).await
    }
    async fn stats(&self, r: &errand::StatsRequest) -> errand::Result<errand::Stats> {
        self.inner.stats(r).await
    }
    async fn minutes(&self, q: &errand::MinuteQuery) -> errand::Result<Vec<errand::MinuteRow>> {
        self.inner.minutes(q).await
    }
}

impl errand::Notifier for Intercepting {
    fn work_signal(&self) -> Box<dyn errand_core::WorkSignal> {
        self.inner.work_signal()
    }
}

/// When the transaction that was to settle waiting acknowledgments and
/// claim more fails, the acknowledgments are not lost: the batcher writes
/// them on their own, and every job is acknowledged once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acknowledgments_a_failed_claim_carried_are_written_again() {
    let (_d, sqlite) = store();
    let store = Arc::new(Intercepting::new(sqlite.clone(), true));
    let runtime = errand::RuntimeBuilder::new(store.clone())
        .handler("quick", |_: serde_json::Value, _ctx| async {
            Outcome::Success
        })
        .unwrap()
        .all_queues(64)
        .unwrap()
        .batch(4)
        .poll(Duration::from_millis(10))
        .build()
        .unwrap();
    for i in 0..200 {
        enqueue(&sqlite, &format!("q{i:03}"), "quick", "default", "{}").await;
    }
    let s = sqlite.clone();
    let stats = runtime
        .run_until(async move {
            for _ in 0..1_200 {
                let done = s
                    .list(&JobFilter {
                        state: Some(JobState::Done),
                        limit: Some(1_000),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                if done.len() == 200 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            let all = s
                .list(&JobFilter {
                    limit: Some(1_000),
                    ..Default::default()
                })
                .await
                .unwrap();
            let mut by_state = std::collections::BTreeMap::new();
            for j in &all {
                *by_state.entry(j.state.as_str()).or_insert(0) += 1;
            }
            panic!("the jobs never all finished: {by_state:?}");
        })
        .await
        .unwrap();
    assert!(
        store.failed.load(Ordering::SeqCst) > 0,
        "claims carried acknowledgments and failed"
    );
    assert_eq!(stats.count(WorkOutcome::Acknowledged), 200);
    assert_eq!(stats.outcomes.get("settle_failed"), None, "{stats:?}");
}

/// A claimer looks for expired leases once per poll interval, busy or
/// idle, not at every claim (each look reads the lease index): with an
/// interval longer than the test, only its first claim looks, through a
/// busy drain, an idle wait and a wake-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimer_looks_for_expired_leases_once_per_poll_interval() {
    let (_d, sqlite) = store();
    let store = Arc::new(Intercepting::new(sqlite.clone(), false));
    let runtime = errand::RuntimeBuilder::new(store.clone())
        .handler("quick", |_: serde_json::Value, _ctx| async {
            Outcome::Success
        })
        .unwrap()
        .all_queues(4)
        .unwrap()
        .batch(4)
        // Longer than the test: no busy claim is due to look again.
        .poll(Duration::from_secs(3600))
        .build()
        .unwrap();
    for i in 0..40 {
        enqueue(&sqlite, &format!("b{i:02}"), "quick", "default", "{}").await;
    }
    let s = sqlite.clone();
    let done = move |n: usize| {
        let s = s.clone();
        async move {
            for _ in 0..1_200 {
                let done = s
                    .list(&JobFilter {
                        state: Some(JobState::Done),
                        limit: Some(1_000),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                if done.len() == n {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("the jobs never all finished");
        }
    };
    runtime
        .run_until(async move {
            done(40).await;
            // Idle now; the next job wakes the claimer.
            enqueue(&sqlite, "late", "quick", "default", "{}").await;
            done(41).await;
        })
        .await
        .unwrap();
    let claims = store.reclaims();
    assert!(
        claims.len() >= 11,
        "40 jobs in claims of at most 4, then one more: {claims:?}"
    );
    assert!(claims[0].0, "the first claim looks: {claims:?}");
    assert!(
        claims[1..].iter().all(|c| !c.0),
        "no other claim looks within the poll interval: {claims:?}"
    );
    assert!(
        claims
            .iter()
            .any(|(_, asked, got)| got.is_some_and(|g| g < *asked as usize)),
        "the drain ended in a claim that came up short, then waited idle: {claims:?}"
    );
}

/// A worker's failed attempts are recorded through the batcher, those
/// that arrive together in one call, never one call each; each job still
/// gets its own verdict.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_go_through_the_batcher() {
    let (_d, sqlite) = store();
    let store = Arc::new(Intercepting::new(sqlite.clone(), false));
    let runtime = errand::RuntimeBuilder::new(store.clone())
        .handler("flaky", |p: serde_json::Value, _ctx| async move {
            if p["permanent"].as_bool() == Some(true) {
                Outcome::permanent("bad input")
            } else {
                Outcome::retry("busy")
            }
        })
        .unwrap()
        .all_queues(8)
        .unwrap()
        .retry(
            RetryPolicy::Fixed(Duration::from_secs(3600)),
            Arc::new(|| 0.0),
        )
        .build()
        .unwrap();
    for i in 0..30 {
        let payload = if i % 3 == 0 {
            r#"{"permanent":true}"#
        } else {
            "{}"
        };
        enqueue(&sqlite, &format!("f{i:02}"), "flaky", "default", payload).await;
    }
    let s = sqlite.clone();
    let stats = runtime
        .run_until(async move {
            for _ in 0..1_200 {
                let live = s
                    .list(&JobFilter {
                        state: Some(JobState::Running),
                        ..Default::default()
                    })
                    .await
                    .unwrap();
                let ready_now = s
                    .list(&JobFilter {
                        state: Some(JobState::Ready),
                        ..Default::default()
                    })
                    .await
                    .unwrap()
                    .into_iter()
                    .filter(|j| j.attempts == 0)
                    .count();
                if live.is_empty() && ready_now == 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("the failures were never all recorded");
        })
        .await
        .unwrap();
    assert_eq!(stats.count(WorkOutcome::Dead), 10, "{stats:?}");
    assert_eq!(stats.count(WorkOutcome::RetryScheduled), 20, "{stats:?}");
    assert_eq!(store.single_failures.load(Ordering::SeqCst), 0);
    let batches = store.failure_batches.lock().unwrap().clone();
    assert_eq!(batches.iter().sum::<usize>(), 30, "{batches:?}");
    for i in 0..30 {
        let j = job(&sqlite, &format!("f{i:02}")).await;
        let want = if i % 3 == 0 {
            JobState::Dead
        } else {
            JobState::Ready
        };
        assert_eq!((j.state, j.attempts), (want, 1), "f{i:02}");
    }
}

/// A running worker reports itself: its claim cycles, how long each attempt
/// waited from due to start, and lateness against a job's business
/// deadline; a handler sees the trace context the job was enqueued with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_reports_cycles_latency_and_lateness_and_handlers_see_the_trace() {
    let (_d, store) = store();
    let tp =
        errand_core::TraceParent::parse("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
            .unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let s = seen.clone();
    let runtime = Runtime::builder(store.clone())
        .handler("t", move |_: serde_json::Value, ctx| {
            let s = s.clone();
            async move {
                s.lock()
                    .unwrap()
                    .push((ctx.id().to_string(), ctx.traceparent().cloned()));
                Outcome::Success
            }
        })
        .unwrap()
        .queue("default", 4)
        .unwrap()
        .poll(Duration::from_millis(20))
        .report_every(Some(Duration::from_millis(50)))
        .build()
        .unwrap();
    let now = errand::Timestamp::now();
    let hour = Duration::from_secs(3600);
    let new = |id: &str| {
        NewJob::new("t", Payload::from_json_text("{}").unwrap())
            .unwrap()
            .with_id(JobId::new(id).unwrap())
    };
    store
        .insert(
            new("late")
                .with_deadline(now.minus(hour))
                .with_traceparent(tp.clone()),
        )
        .await
        .unwrap();
    store
        .insert(new("on-time").with_deadline(now.plus(hour)))
        .await
        .unwrap();
    store.insert(new("plain")).await.unwrap();
    let s = store.clone();
    runtime
        .run_until(async move {
            for _ in 0..400 {
                let stats = s.stats(&errand::StatsRequest::default()).await.unwrap();
                if stats.workers.first().is_some_and(|w| {
                    w.metrics.on_time + w.metrics.late == 2 && w.metrics.started == 3
                }) {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("the worker never reported its three jobs");
        })
        .await
        .unwrap();
    let stats = store.stats(&errand::StatsRequest::default()).await.unwrap();
    assert_eq!(stats.workers.len(), 1);
    let w = &stats.workers[0];
    assert_eq!(w.pid, std::process::id());
    assert!(!w.host.is_empty());
    assert_eq!(w.queues, [errand::Name::parse("queue", "default").unwrap()]);
    assert!(w.metrics.cycles >= 1);
    assert_eq!((w.metrics.late, w.metrics.on_time), (1, 1));
    assert_eq!(w.metrics.start_latency.count(), 3);
    assert_eq!(w.metrics.lateness.count(), 2);
    assert!(
        w.metrics.lateness.sum_ms >= 3_600_000,
        "the late job was an hour late: {:?}",
        w.metrics.lateness
    );
    assert!(stats.last_worker_cycle_at.is_some());
    let mut seen = seen.lock().unwrap().clone();
    seen.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        seen,
        [
            ("late".to_owned(), Some(tp)),
            ("on-time".to_owned(), None),
            ("plain".to_owned(), None)
        ]
    );
}

/// A worker whose only slot holds a long job claims nothing meanwhile, yet
/// keeps reporting: with a job in flight it is working, not stalled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_busy_with_a_long_job_keeps_reporting() {
    let (_d, store) = store();
    let release = Arc::new(tokio::sync::Notify::new());
    let r = release.clone();
    let runtime = Runtime::builder(store.clone())
        .handler("long", move |_: serde_json::Value, _ctx| {
            let r = r.clone();
            async move {
                r.notified().await;
                Outcome::Success
            }
        })
        .unwrap()
        .queue("default", 1)
        .unwrap()
        .poll(Duration::from_millis(20))
        .report_every(Some(Duration::from_millis(30)))
        .build()
        .unwrap();
    enqueue(&store, "l1", "long", "default", "{}").await;
    let s = store.clone();
    runtime
        .run_until(async move {
            let last_cycle = |s: Arc<dyn Store>| async move {
                s.stats(&errand::StatsRequest::default())
                    .await
                    .unwrap()
                    .last_worker_cycle_at
            };
            // Wait until the job runs and a report is in.
            for _ in 0..400 {
                if job(&s, "l1").await.state == JobState::Running
                    && last_cycle(s.clone()).await.is_some()
                {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let first = last_cycle(s.clone()).await.expect("a first report");
            // While the job still runs, a later report arrives.
            let mut later = None;
            for _ in 0..400 {
                tokio::time::sleep(Duration::from_millis(10)).await;
                let now = last_cycle(s.clone()).await;
                if now > Some(first) {
                    later = now;
                    break;
                }
            }
            assert_eq!(job(&s, "l1").await.state, JobState::Running, "still busy");
            assert!(later.is_some(), "no report while the only slot was busy");
            release.notify_one();
            settled(s).await;
        })
        .await
        .unwrap();
    assert_eq!(job(&store, "l1").await.state, JobState::Done);
}

/// When the stored schedules cannot be read, the schedules given in code
/// still enqueue their ticks; the error is reported after them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schedules_in_code_run_when_the_stored_ones_cannot_be_read() {
    let (_d, sqlite) = store();
    let mut failing = Meddling::new(sqlite.clone());
    failing.fail_schedules = true;
    let template = NewJob::new("tick", Payload::default()).unwrap();
    let schedule =
        errand::CronSchedule::new("in-code", "* * * * * *", template, errand::Misfire::Skip)
            .unwrap();
    let enqueuer = errand::CronEnqueuer::new(sqlite.clone(), vec![schedule])
        .with_stored_schedules(Arc::new(failing));
    let now = errand::core::Timestamp::now();
    let err = enqueuer.run_once(now).await.unwrap_err();
    assert!(err.to_string().contains("locked"), "{err}");
    let jobs = sqlite.list(&JobFilter::default()).await.unwrap();
    assert_eq!(jobs.len(), 1, "the tick given in code was enqueued");
    assert!(jobs[0].id.as_str().starts_with("cron:in-code:"));
}

/// A bulk action's selection read in pages refuses, instead of acting on
/// part of it, when the job a page starts after is purged between two
/// pages: the rest could not be found where it stopped.
#[tokio::test]
async fn a_selection_whose_page_cursor_is_purged_meanwhile_is_refused() {
    let (_d, sqlite) = store();
    let heavy = format!(r#""{}""#, "x".repeat(errand::core::MAX_PAYLOAD_BYTES - 16));
    for n in 0..6 {
        let id = format!("h{n}");
        enqueue(&sqlite, &id, "k", "heavy", &heavy).await;
    }
    let lease = std::time::Duration::from_secs(30);
    let req = errand::ClaimRequest {
        queues: Vec::new(),
        limit: 10,
        lease,
        rate: None,
        reclaim: false,
    };
    for c in sqlite.claim(&req).await.unwrap() {
        let failure = errand::Failure {
            error: "bad".into(),
            class: errand::ErrorClass::Permanent,
            retry: None,
        };
        sqlite.fail(&c.lease, failure).await.unwrap();
    }
    let mut wrapped = Meddling::new(sqlite.clone());
    wrapped.purge_list_cursor = true;
    let admin = errand::Admin::over(sqlite.clone(), Arc::new(wrapped));
    let filter = errand::BulkFilter {
        state: errand::JobState::Dead,
        queue: Some(errand::Name::parse("queue", "heavy").unwrap()),
        kind: None,
        error_contains: None,
        since: None,
        until: None,
        limit: 10,
    };
    match admin.matching(&filter).await {
        Err(errand::Error::Busy(m)) => assert!(m.contains("left the selection"), "{m}"),
        other => panic!("a selection that lost its place must be refused, got {other:?}"),
    }
}

/// A handler suspends its job until a signal; the runtime holds no slot
/// while it waits; the signal resumes it, and the next attempt reads the
/// payload, typed. A wait that times out under `run` resumes it without.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_handler_resumes_with_the_signals_typed_payload() {
    #[derive(Deserialize)]
    struct Approval {
        by: String,
    }
    let (_d, store) = store();
    let seen = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let runs = Arc::new(std::sync::Mutex::new(std::collections::HashMap::<
        String,
        u32,
    >::new()));
    let s = seen.clone();
    let runtime = Runtime::builder(store.clone())
        .handler("approve", move |_: serde_json::Value, ctx| {
            let (seen, runs) = (s.clone(), runs.clone());
            async move {
                let run = {
                    let mut runs = runs.lock().unwrap();
                    let n = runs.entry(ctx.id().to_string()).or_insert(0);
                    *n += 1;
                    *n
                };
                if run == 1 {
                    // Wait for the approval; "timed" waits 300 ms at most.
                    let timeout =
                        (ctx.id().as_str() == "timed").then_some(Duration::from_millis(300));
                    return Outcome::await_signal("approved", timeout, errand::OnAwaitTimeout::Run);
                }
                match ctx.signal_payload::<Approval>().await {
                    Ok(Some(a)) => seen
                        .lock()
                        .unwrap()
                        .push(format!("{} by {}", ctx.id(), a.by)),
                    Ok(None) => seen.lock().unwrap().push(format!("{} ran alone", ctx.id())),
                    Err(e) => return Outcome::permanent(e),
                }
                Outcome::Success
            }
        })
        .unwrap()
        .all_queues(2)
        .unwrap()
        .poll(Duration::from_millis(20))
        .build()
        .unwrap();
    enqueue(&store, "signed", "approve", "default", "{}").await;
    enqueue(&store, "timed", "approve", "default", "{}").await;
    let s = store.clone();
    let seen_at_end = seen.clone();
    runtime
        .run_until(async move {
            while job(&s, "signed").await.state != JobState::Waiting {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let signal = errand::NewSignal::new(JobId::new("signed").unwrap(), "approved")
                .unwrap()
                .with_payload(&serde_json::json!({"by": "ana"}))
                .unwrap();
            assert!(
                errand::Client::new(s.clone())
                    .signal(&signal)
                    .await
                    .unwrap()
                    .delivered
            );
            while seen_at_end.lock().unwrap().len() < 2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .unwrap();
    let mut seen = seen.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, ["signed by ana", "timed ran alone"]);
    let signed = job(&store, "signed").await;
    assert_eq!((signed.state, signed.attempts), (JobState::Done, 1));
    let history = store
        .detail(&JobId::new("signed").unwrap())
        .await
        .unwrap()
        .history;
    assert_eq!(history[0].outcome.as_deref(), Some("awaiting"));
}
