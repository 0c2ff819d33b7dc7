#![allow(clippy::unwrap_used)]
//! The charts' per-minute counts, as a running worker writes them: what
//! it settles per queue (finished, dead, retries by class, lateness past a
//! deadline, wait from due to start) and each queue's sampled depth, read
//! back through `Admin::charts`.

use std::sync::Arc;
use std::time::Duration;

use errand::{
    Admin, ChartWindow, JobId, NewJob, Outcome, Payload, Runtime, SqliteOptions, SqliteStore,
    Store, Timestamp,
};

fn store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        create: true,
        migrate: true,
        ..Default::default()
    };
    let store = SqliteStore::open(dir.path().join("charts.db"), options).unwrap();
    (dir, Arc::new(store))
}

fn job(id: &str, outcome: &str, queue: &str) -> NewJob {
    NewJob::new(
        "t",
        Payload::from_json_text(format!("{{\"do\":\"{outcome}\"}}")).unwrap(),
    )
    .unwrap()
    .with_id(JobId::new(id).unwrap())
    .on_queue(queue)
    .unwrap()
}

fn total(v: &[u64]) -> u64 {
    v.iter().sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_counts_what_it_settles_per_queue_and_minute() {
    let (_d, store) = store();
    let runtime = Runtime::builder(store.clone())
        .handler("t", |p: serde_json::Value, _ctx| async move {
            let far = Timestamp::now().plus(Duration::from_secs(3600));
            match p["do"].as_str() {
                Some("ok") => Outcome::Success,
                Some("retry") => Outcome::RetryAt {
                    error: "provider busy".into(),
                    at: far,
                },
                Some("slow") => Outcome::TimedOut {
                    error: "provider did not answer".into(),
                },
                Some("out") => Outcome::success_with(&serde_json::json!({"receipt": 7})),
                _ => Outcome::permanent("no such receipt"),
            }
        })
        .unwrap()
        .all_queues(4)
        .unwrap()
        .poll(Duration::from_millis(20))
        .report_every(Some(Duration::from_millis(50)))
        // Retries wait an hour: no attempt runs twice in this test.
        .retry(
            errand::RetryPolicy::EqualJitter {
                base: Duration::from_secs(3600),
                max: Duration::from_secs(7200),
            },
            std::sync::Arc::new(|| 0.5),
        )
        .build()
        .unwrap();
    let hour_ago = Timestamp::now().minus(Duration::from_secs(3600));
    let mut jobs = Vec::new();
    for i in 0..4 {
        jobs.push(job(&format!("ok-{i}"), "ok", "mail"));
    }
    jobs.push(job("late-1", "ok", "mail").with_deadline(hour_ago));
    jobs.push(job("sms-ok", "ok", "sms"));
    // A success with an output is finished too.
    jobs.push(job("out-1", "out", "mail"));
    // A retryable failure on the last attempt of its budget ends it dead.
    jobs.push(
        job("last-try", "retry", "mail")
            .with_max_attempts(1)
            .unwrap(),
    );
    for i in 0..3 {
        jobs.push(job(&format!("retry-{i}"), "retry", "mail"));
    }
    jobs.push(job("slow-1", "slow", "mail"));
    jobs.push(job("dead-1", "gone", "mail"));
    jobs.push(job("dead-2", "gone", "sms"));
    store.insert_many(jobs).await.unwrap();

    let admin = Admin::new(store.clone());
    let a = admin.clone();
    runtime
        .run_until(async move {
            for _ in 0..800 {
                let c = a
                    .charts(None, ChartWindow::Hour, Timestamp::now())
                    .await
                    .unwrap();
                let retries: u64 = c.retries.values().map(|v| total(v)).sum();
                if total(&c.finished) == 7 && total(&c.dead) == 3 && retries == 4 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("the worker's counts never reached the store");
        })
        .await
        .unwrap();

    let now = Timestamp::now();
    let all = admin.charts(None, ChartWindow::Hour, now).await.unwrap();
    assert_eq!(all.slots(), 60);
    assert_eq!(total(&all.finished), 7);
    assert_eq!(total(&all.dead), 3);
    assert_eq!(total(&all.retries["retryable"]), 3);
    assert_eq!(total(&all.retries["timeout"]), 1);
    assert_eq!(all.retries.len(), 2, "{:?}", all.retries);
    // Fourteen attempts started, each counted by its wait.
    assert_eq!(total(&all.wait), 14);
    // The one job with a deadline was an hour late: the bucket above five
    // minutes.
    assert_eq!(total(&all.lateness), 1);
    assert_eq!(all.lateness[errand::HISTOGRAM_BUCKETS - 1], 1);
    // The runtime sampled the queues' depth when it started.
    assert!(all.depth.iter().any(Option::is_some), "{:?}", all.depth);
    assert!(all.oldest_due_ms.iter().any(Option::is_some));

    let sms = admin
        .charts(
            Some(errand::Name::parse("queue", "sms").unwrap()),
            ChartWindow::Hour,
            now,
        )
        .await
        .unwrap();
    assert_eq!(total(&sms.finished), 1);
    assert_eq!(total(&sms.dead), 1);
    assert!(sms.retries.is_empty());

    // The day's chart holds the same counts in 96 slots of 15 minutes.
    let day = admin.charts(None, ChartWindow::Day, now).await.unwrap();
    assert_eq!(day.slots(), 96);
    assert_eq!(total(&day.finished), 7);
}

/// A worker told never to report writes no per-minute counts either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_that_never_reports_writes_no_counts() {
    let (_d, store) = store();
    let runtime = Runtime::builder(store.clone())
        .handler(
            "t",
            |_: serde_json::Value, _ctx| async move { Outcome::Success },
        )
        .unwrap()
        .all_queues(2)
        .unwrap()
        .poll(Duration::from_millis(20))
        .report_every(None)
        .build()
        .unwrap();
    store.insert(job("ok-1", "ok", "mail")).await.unwrap();
    let s = store.clone();
    runtime
        .run_until(async move {
            for _ in 0..400 {
                let j = s.get(&JobId::new("ok-1").unwrap()).await.unwrap();
                if j.state == errand::JobState::Done {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
            panic!("the job never ran");
        })
        .await
        .unwrap();
    let c = Admin::new(store)
        .charts(None, ChartWindow::Hour, Timestamp::now())
        .await
        .unwrap();
    assert_eq!(total(&c.finished), 0);
    assert!(c.depth.iter().all(Option::is_none));
}

/// A sample files each queue's depth and oldest due age under the minute
/// given; a second sample of that minute (another process's) reads the
/// statistics no more; a queue gone since the last sample is sampled as
/// empty; minutes older than two days go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn samples_file_depth_once_a_minute_zero_a_gone_queue_and_prune() {
    use std::collections::BTreeSet;
    let (_d, store) = store();
    let t0 = Timestamp::now();
    let minute = errand::core::minute_of(t0);
    store.insert(job("m-1", "ok", "mail")).await.unwrap();
    store.insert(job("m-2", "ok", "mail")).await.unwrap();
    store
        .record_minutes(&[errand::MinuteCount {
            queue: errand::Name::parse("queue", "mail").unwrap(),
            minute: minute - errand::MINUTES_KEPT - 1,
            series: errand::Series::Finished,
            value: 9,
        }])
        .await
        .unwrap();
    let read = |from: i64, until: i64| {
        let store = store.clone();
        async move {
            store
                .minutes(&errand::MinuteQuery {
                    queue: None,
                    from,
                    until,
                    slot: 1,
                })
                .await
                .unwrap()
        }
    };
    let seen = errand::sample_queues(store.as_ref(), store.as_ref(), &BTreeSet::new(), t0)
        .await
        .unwrap();
    assert_eq!(
        seen.iter().map(errand::Name::as_str).collect::<Vec<_>>(),
        ["mail"]
    );
    let rows = read(minute, minute + 1).await;
    let depth = rows.iter().find(|r| r.series == "depth").unwrap();
    assert_eq!(depth.sum, 2);
    assert!(rows.iter().any(|r| r.series == "oldest_due_ms"));
    assert!(
        read(
            minute - errand::MINUTES_KEPT - 1,
            minute - errand::MINUTES_KEPT
        )
        .await
        .is_empty(),
        "the minute older than two days was pruned"
    );

    // Another process sampling the same minute finds it sampled.
    store.insert(job("m-3", "ok", "mail")).await.unwrap();
    let again = errand::sample_queues(store.as_ref(), store.as_ref(), &BTreeSet::new(), t0)
        .await
        .unwrap();
    assert!(again.is_empty(), "nothing sampled: {again:?}");
    let rows = read(minute, minute + 1).await;
    assert_eq!(rows.iter().find(|r| r.series == "depth").unwrap().sum, 2);

    // A minute later the queue has nothing left: sampled as empty.
    let claimed = store
        .claim(&errand::ClaimRequest {
            queues: Vec::new(),
            limit: 10,
            lease: Duration::from_secs(30),
            rate: None,
            reclaim: false,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 3);
    for c in &claimed {
        store.complete(&c.lease).await.unwrap();
    }
    let next = errand::sample_queues(
        store.as_ref(),
        store.as_ref(),
        &seen,
        t0.plus(Duration::from_secs(60)),
    )
    .await
    .unwrap();
    assert!(next.is_empty(), "{next:?}");
    let rows = read(minute + 1, minute + 2).await;
    let depth = rows.iter().find(|r| r.series == "depth").unwrap();
    assert_eq!(depth.sum, 0, "a gone queue is sampled as empty");
    let oldest = rows.iter().find(|r| r.series == "oldest_due_ms").unwrap();
    assert_eq!(oldest.max, 0);
}

/// A queue past the statistics' cap is counted whole when a service
/// samples the minute: the sample charts its exact depth, and the
/// statistics show the exact count (marked counted) until the next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_counts_a_queue_past_the_cap_whole() {
    use std::collections::BTreeSet;
    let (_d, store) = store();
    let t0 = Timestamp::now();
    let minute = errand::core::minute_of(t0);
    let jobs: Vec<errand::NewJob> = (0..10_050)
        .map(|n| job(&format!("b-{n:05}"), "ok", "bulk"))
        .collect();
    store.insert_many(jobs).await.unwrap();
    let before = store.stats(&errand::StatsRequest::default()).await.unwrap();
    assert_eq!(before.queues[0].truncated, ["ready"]);
    errand::sample_queues(store.as_ref(), store.as_ref(), &BTreeSet::new(), t0)
        .await
        .unwrap();
    let rows = store
        .minutes(&errand::MinuteQuery {
            queue: None,
            from: minute,
            until: minute + 1,
            slot: 1,
        })
        .await
        .unwrap();
    let depth = rows.iter().find(|r| r.series == "depth").unwrap();
    assert_eq!(depth.sum, 10_050, "the exact depth is charted");
    let after = store.stats(&errand::StatsRequest::default()).await.unwrap();
    let bulk = &after.queues[0];
    assert_eq!(bulk.counts.ready, 10_050);
    assert_eq!(bulk.counted, ["ready"]);
    assert!(bulk.truncated.is_empty());
}
