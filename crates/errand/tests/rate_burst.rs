#![allow(clippy::unwrap_used)]
//! A rate-limited queue keeps its burst while its worker idles: the
//! runtime's claims spend tokens only for the jobs they claim. The store's
//! clock is a `ManualClock`, so the bucket refills only when the test says.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use errand::{JobId, NewJob, Outcome, Payload, Runtime, SqliteOptions, SqliteStore, Store};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_worker_keeps_its_queues_burst() {
    let dir = tempfile::tempdir().unwrap();
    let clock = errand::ManualClock::new(errand::Timestamp::from_millis(1_795_996_800_000));
    let options = SqliteOptions {
        create: true,
        migrate: true,
        clock: Arc::new(clock.clone()),
        ..Default::default()
    };
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(dir.path().join("rate.db"), options).unwrap());
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
                burst: 5,
            },
        )
        .unwrap()
        .poll(Duration::from_millis(20))
        .build()
        .unwrap();
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
