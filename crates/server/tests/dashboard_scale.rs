#![allow(clippy::unwrap_used, clippy::expect_used)]
//! How long the dashboard's pages take over 1,000,000 jobs in mixed states.
//! A measurement, not a test: it asserts only that every page answers 200,
//! and prints the times. Ignored by default; run it with
//!
//! ```text
//! cargo test --release -p errand-server --test dashboard_scale -- --ignored --nocapture
//! ```
//!
//! SQLite always (a file in a temporary directory, `synchronous = NORMAL`
//! while filling); PostgreSQL too when `ERRAND_TEST_POSTGRES_URL` is set (in
//! a schema of its own, dropped afterwards). `ERRAND_SCALE_JOBS` changes the
//! number of jobs (default 1,000,000). The figures of a run are in
//! `docs/dashboard.md`.
//!
//! The fill: `insert_many` in batches of 5,000 spread over four queues and
//! five kinds, then, through the store's own operations, 60% claimed and
//! completed (`done`), 10% claimed and failed permanently with one of four
//! errors (`dead`), 2% cancelled (with audit rows), 3% claimed and left
//! `running`; the remaining 25% stay `ready`. One job in a hundred carries
//! the tag `vip`, every job one of 50 tags `t0`…`t49`, and the first 1,000
//! jobs are the steps of the workflow `wf-scale`.
//!
//! The charts' per-minute counts are filled as a busy deployment keeps
//! them: every minute of the two days kept, on each of the four queues,
//! with twenty series each (finished, dead, the two retry classes workers
//! report, seven lateness and seven wait buckets, depth and oldest due
//! age) — 230,400 rows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use errand::{
    CancelRequest, ClaimRequest, ErrorClass, Failure, JobFilter, JobId, JobState, NewJob, Payload,
    PgOptions, PgStore, SqliteOptions, SqliteStore, Store, Synchronous,
};
use errand_server::{ServerConfig, router};
use futures_util::future::join_all;
use tower::ServiceExt;

const QUEUES: [&str; 4] = ["mail", "billing", "reports", "webhooks"];
const KINDS: [&str; 5] = [
    "send-receipt",
    "charge",
    "render-pdf",
    "deliver-hook",
    "expire-hold",
];
const ERRORS: [&str; 4] = [
    "SMTP 550: mailbox unavailable",
    "HTTP 503 from the payments provider",
    "handler deadline of 30s passed",
    "invalid payload: missing field `to`",
];
const BATCH: usize = 5_000;
const ROUNDS: usize = 7;

fn jobs_wanted() -> usize {
    std::env::var("ERRAND_SCALE_JOBS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

/// Ids kept while filling, to address deep pages and single jobs.
#[derive(Default)]
struct Marks {
    /// The id 90% of the way through the insertion order.
    deep: Option<JobId>,
    /// A dead job (with history).
    dead: Option<JobId>,
    /// A dead job 90% of the way through the dead ones, in listing order.
    deep_dead: Option<JobId>,
}

async fn fill(store: &Arc<dyn Store>, total: usize) -> Marks {
    let started = Instant::now();
    let mut marks = Marks::default();
    let mut inserted = 0;
    while inserted < total {
        let n = BATCH.min(total - inserted);
        let jobs = (inserted..inserted + n)
            .map(|i| {
                let payload = format!(
                    r#"{{"n":{i},"to":"user{}@example.com","note":"<b>job {i}</b>"}}"#,
                    i % 9973
                );
                let mut job = NewJob::new(
                    KINDS[i % KINDS.len()],
                    Payload::from_json_text(payload).unwrap(),
                )
                .unwrap()
                .on_queue(QUEUES[i % QUEUES.len()])
                .unwrap()
                .with_max_attempts(1)
                .unwrap()
                .with_tag(&format!("t{}", i % 50))
                .unwrap()
                .with_meta("tenant", &format!("t{}", i % 1000))
                .with_meta("region", if i % 2 == 0 { "eu" } else { "us" });
                if i % 100 == 7 {
                    job = job.with_tag("vip").unwrap();
                }
                if i < 1_000 {
                    job = job.in_workflow(errand::WorkflowId::new("wf-scale").unwrap());
                }
                job
            })
            .collect();
        let rows = store.insert_many(jobs).await.unwrap();
        let deep_at = total * 9 / 10;
        if (inserted..inserted + n).contains(&deep_at) {
            marks.deep = Some(rows[deep_at - inserted].job.id.clone());
        }
        inserted += n;
    }
    eprintln!("  inserted {total} in {:.1?}", started.elapsed());

    let claim = |limit| ClaimRequest {
        queues: vec![],
        limit,
        lease: Duration::from_secs(3600),
        rate: None,
        reclaim: true,
    };
    // done: claim and acknowledge.
    let t = Instant::now();
    let mut left = total * 60 / 100;
    while left > 0 {
        let claimed = store.claim(&claim(left.min(1_000) as u32)).await.unwrap();
        let leases: Vec<_> = claimed.iter().map(|c| c.lease.clone()).collect();
        store.complete_many(&leases).await.unwrap();
        left -= claimed.len();
    }
    eprintln!("  done: {:.1?}", t.elapsed());
    // dead: claim and fail permanently, many at once (group commit).
    let t = Instant::now();
    let mut left = total * 10 / 100;
    let mut dead_ids = Vec::new();
    while left > 0 {
        let claimed = store.claim(&claim(left.min(1_000) as u32)).await.unwrap();
        let fails = claimed.iter().enumerate().map(|(i, c)| {
            store.fail(
                &c.lease,
                Failure {
                    error: ERRORS[i % ERRORS.len()].to_owned(),
                    class: ErrorClass::Permanent,
                    retry: None,
                },
            )
        });
        for job in join_all(fails).await {
            dead_ids.push(job.unwrap().id);
        }
        left -= claimed.len();
    }
    marks.dead = dead_ids.get(dead_ids.len() / 2).cloned();
    eprintln!("  dead: {:.1?}", t.elapsed());
    // cancelled: the next ready jobs, with audit rows.
    let t = Instant::now();
    let mut left = total * 2 / 100;
    while left > 0 {
        let ready = store
            .list(&JobFilter {
                state: Some(JobState::Ready),
                limit: Some(left.min(1_000) as u32),
                ..JobFilter::default()
            })
            .await
            .unwrap();
        let ids: Vec<_> = ready.iter().map(|j| j.id.clone()).collect();
        errand::Admin::new(store.clone())
            .cancel_jobs(&CancelRequest {
                ids,
                operator: "scale-test".into(),
                reason: Some("filling".into()),
            })
            .await
            .unwrap();
        left -= ready.len();
    }
    eprintln!("  cancelled: {:.1?}", t.elapsed());
    // running: claimed and left.
    let mut left = total * 3 / 100;
    while left > 0 {
        left -= store
            .claim(&claim(left.min(1_000) as u32))
            .await
            .unwrap()
            .len();
    }
    // The dead job 90% of the way through the dead-letter listing.
    let mut after = None;
    let mut seen = 0;
    let target = total * 10 / 100 * 9 / 10;
    while seen < target {
        let page = store
            .list(&JobFilter {
                state: Some(JobState::Dead),
                limit: Some((target - seen).min(10_000) as u32),
                after: after.clone(),
                ..JobFilter::default()
            })
            .await
            .unwrap();
        if page.is_empty() {
            break;
        }
        seen += page.len();
        after = page.last().map(|j| j.id.clone());
    }
    marks.deep_dead = after;
    eprintln!("  filled in {:.1?}", started.elapsed());
    marks
}

/// Two days of every series on every queue, written as workers would
/// (in calls of a few thousand rows).
async fn fill_minutes(store: &Arc<dyn Store>) {
    use errand::{MINUTES_KEPT, MinuteCount, Series};
    let started = Instant::now();
    let now = errand::core::minute_of(errand::Timestamp::now());
    let mut series = vec![
        Series::Finished,
        Series::Dead,
        Series::Retry(ErrorClass::Retryable),
        Series::Retry(ErrorClass::Timeout),
        Series::Depth,
        Series::OldestDueMs,
    ];
    series.extend((0..7).map(Series::Late));
    series.extend((0..7).map(Series::Wait));
    let mut rows = Vec::new();
    let mut written = 0;
    for minute in (now - MINUTES_KEPT + 1)..=now {
        for queue in QUEUES {
            let queue = errand::Name::parse("queue", queue).unwrap();
            for (i, s) in series.iter().enumerate() {
                let value = u64::try_from((minute % 97) * 13 + i64::try_from(i).unwrap()).unwrap();
                rows.push(MinuteCount {
                    queue: queue.clone(),
                    minute,
                    series: *s,
                    value,
                });
            }
        }
        if rows.len() >= 8_000 {
            written += rows.len();
            store
                .record_minutes(&std::mem::take(&mut rows))
                .await
                .unwrap();
        }
    }
    written += rows.len();
    store.record_minutes(&rows).await.unwrap();
    eprintln!(
        "  {written} per-minute rows written in {:.1?}",
        started.elapsed()
    );
}

async fn time_page(app: &Router, uri: &str) -> (Duration, Duration, usize) {
    let mut times = Vec::with_capacity(ROUNDS);
    let mut size = 0;
    for _ in 0..ROUNDS {
        let req = Request::get(uri)
            .header(header::HOST, "127.0.0.1:7878")
            .body(Body::empty())
            .unwrap();
        let t = Instant::now();
        let response = app.clone().oneshot(req).await.unwrap();
        let status = response.status();
        let body = axum::body::to_bytes(response.into_body(), 64 << 20)
            .await
            .unwrap();
        times.push(t.elapsed());
        assert_eq!(
            status,
            StatusCode::OK,
            "{uri}: {}",
            String::from_utf8_lossy(&body)
        );
        size = body.len();
    }
    times.sort();
    (times[ROUNDS / 2], times[ROUNDS - 1], size)
}

async fn measure(backend: &str, store: &Arc<dyn Store>, total: usize, marks: &Marks) {
    let app = router(Arc::clone(store), ServerConfig::default());
    let enc = |id: &Option<JobId>| {
        form_urlencoded::byte_serialize(id.as_ref().unwrap().as_str().as_bytes())
            .collect::<String>()
    };
    let pages = [
        (
            "jobs, first page (all states)",
            "/dashboard/jobs".to_owned(),
        ),
        (
            "jobs, first page, state=ready",
            "/dashboard/jobs?state=ready".to_owned(),
        ),
        (
            "jobs, first page, state=done, queue=billing",
            "/dashboard/jobs?state=done&queue=billing".to_owned(),
        ),
        (
            "jobs, deep keyset page (90%, all states)",
            format!("/dashboard/jobs?after={}", enc(&marks.deep)),
        ),
        (
            "a job page (dead, with history)",
            format!("/dashboard/jobs/{}", enc(&marks.dead)),
        ),
        ("dead letters, first page", "/dashboard/dead".to_owned()),
        (
            "dead letters, deep keyset page (90%)",
            format!("/dashboard/dead?after={}", enc(&marks.deep_dead)),
        ),
        (
            "dead letters, queue=billing + error text",
            "/dashboard/dead?queue=billing&error=HTTP+503".to_owned(),
        ),
        (
            "dead letters, error text matching nothing",
            "/dashboard/dead?error=no+such+error".to_owned(),
        ),
        (
            "bulk replay confirmation (50 dead jobs)",
            "/dashboard/dead/replay?error=SMTP".to_owned(),
        ),
        (
            "jobs tagged vip (1%), first page",
            "/dashboard/jobs?tag=vip".to_owned(),
        ),
        (
            "jobs tagged vip, state=dead",
            "/dashboard/jobs?tag=vip&state=dead".to_owned(),
        ),
        (
            "jobs tagged t7 (2%), first page",
            "/dashboard/jobs?tag=t7".to_owned(),
        ),
        (
            "jobs of a tag no job carries",
            "/dashboard/jobs?tag=none".to_owned(),
        ),
        (
            "search: meta.tenant=t42 (0.1%), first page",
            "/dashboard/jobs?q=meta.tenant%3Dt42".to_owned(),
        ),
        (
            "search: meta.region=eu (50%), first page",
            "/dashboard/jobs?q=meta.region%3Deu".to_owned(),
        ),
        (
            "search: meta.tenant=t42, state=dead",
            "/dashboard/jobs?state=dead&q=meta.tenant%3Dt42".to_owned(),
        ),
        (
            "search: meta.tenant=nobody (no job)",
            "/dashboard/jobs?q=meta.tenant%3Dnobody".to_owned(),
        ),
        (
            "search: payload.to (0.01%), first page (stops at 100,000 read)",
            "/dashboard/jobs?q=payload.to%3D%22user42%40example.com%22".to_owned(),
        ),
        (
            "search: payload.n=999999 (the last job; stops at 100,000 read)",
            "/dashboard/jobs?q=payload.n%3D999999".to_owned(),
        ),
        (
            "search: payload.to, state=dead (stops at 100,000 read)",
            "/dashboard/dead?q=payload.to%3D%22user42%40example.com%22".to_owned(),
        ),
        (
            "search: meta.tenant=t42 and payload.to",
            "/dashboard/jobs?q=meta.tenant%3Dt42+payload.to%3D%22user42%40example.com%22"
                .to_owned(),
        ),
        (
            "a workflow of 1,000 steps, first page",
            "/dashboard/workflows/wf-scale".to_owned(),
        ),
        (
            "queues (per-queue counts, capped; every queue's charts, last hour)",
            "/dashboard/queues".to_owned(),
        ),
        (
            "queues, every queue's charts over the last day",
            "/dashboard/queues?window=day".to_owned(),
        ),
        (
            "one queue's counts and charts, last hour",
            "/dashboard/queues/billing".to_owned(),
        ),
        (
            "one queue's counts and charts, last day",
            "/dashboard/queues/billing?window=day".to_owned(),
        ),
        (
            "chart data alone (GET /v1/charts), every queue, last hour",
            "/v1/charts".to_owned(),
        ),
        (
            "chart data alone, every queue, last day",
            "/v1/charts?window=day".to_owned(),
        ),
        (
            "chart data alone, one queue, last day",
            "/v1/charts?queue=billing&window=day".to_owned(),
        ),
        ("audit log, first page", "/dashboard/audit".to_owned()),
        (
            "audit log of one queue",
            "/dashboard/audit?queue=billing".to_owned(),
        ),
    ];
    println!("\n{backend}, {total} jobs ({ROUNDS} rounds each):");
    println!("| page | median | slowest | HTML bytes |");
    println!("|---|---:|---:|---:|");
    for (name, uri) in pages {
        let (median, max, size) = time_page(&app, &uri).await;
        println!(
            "| {name} | {:.1} ms | {:.1} ms | {size} |",
            median.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement over 1,000,000 jobs; run it by hand (see the module docs)"]
async fn dashboard_pages_over_a_million_jobs() {
    let total = jobs_wanted();
    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(
        dir.path().join("scale.db"),
        SqliteOptions {
            create: true,
            migrate: true,
            synchronous: Synchronous::Normal,
            ..SqliteOptions::default()
        },
    )
    .unwrap();
    let sqlite: Arc<dyn Store> = Arc::new(sqlite);
    eprintln!("SQLite: filling {total} jobs");
    let marks = fill(&sqlite, total).await;
    fill_minutes(&sqlite).await;
    measure("SQLite", &sqlite, total, &marks).await;

    let Some(url) = errand_testsupport::postgres_url("the PostgreSQL half") else {
        return;
    };
    let schema = format!("errand_dash_scale_{}", std::process::id());
    let psql = |sql: String| {
        let _ = std::process::Command::new("psql")
            .args([url.as_str(), "-q", "-c", &sql])
            .stderr(std::process::Stdio::null())
            .status();
    };
    psql(format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    let pg = PgStore::connect(
        &url,
        PgOptions {
            schema: schema.clone(),
            migrate: true,
            ..PgOptions::default()
        },
    )
    .await
    .unwrap();
    let pg: Arc<dyn Store> = Arc::new(pg);
    eprintln!("PostgreSQL: filling {total} jobs");
    let marks = fill(&pg, total).await;
    fill_minutes(&pg).await;
    // Right after the fill the planner's statistics may still describe a
    // small table, and the index holds the entries of every row version
    // the fill left behind: measured as filled, then after VACUUM ANALYZE
    // (what autovacuum does soon after such a burst), the steady state.
    measure("PostgreSQL, right after the fill", &pg, total, &marks).await;
    psql(format!("VACUUM ANALYZE {schema}.errand_jobs"));
    psql(format!("VACUUM ANALYZE {schema}.errand_minutes"));
    measure("PostgreSQL, after VACUUM ANALYZE", &pg, total, &marks).await;
    psql(format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
}
