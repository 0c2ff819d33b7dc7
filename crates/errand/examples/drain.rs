//! Jobs per second draining a backlog of no-op jobs in one process with the
//! worker runtime.
//!
//! ```text
//! cargo run --release -p errand --example drain -- [JOBS] [DB]
//! # DB: a SQLite path (default: a temporary file) or postgres://…
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use errand::{ConnectOptions, NewJob, Outcome, Payload, Runtime};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let jobs: usize = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(100_000);
    let dir = tempfile::tempdir()?;
    let db = args
        .next()
        .unwrap_or_else(|| dir.path().join("drain.db").display().to_string());
    let schema = format!("errand_drain_{}", std::process::id());
    let options = ConnectOptions {
        create_and_migrate: true,
        schema: Some(schema.clone()),
        ..Default::default()
    };
    let store = errand::connect(&db, &options).await?;

    let start = Instant::now();
    for chunk in (0..jobs).collect::<Vec<_>>().chunks(5_000) {
        let batch = chunk
            .iter()
            .map(|_| NewJob::new("noop", Payload::default()))
            .collect::<Result<Vec<_>, _>>()?;
        store.insert_many(batch).await?;
    }
    let insert_secs = start.elapsed().as_secs_f64();

    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let runtime = Runtime::builder(store.clone())
        .handler("noop", move |_: serde_json::Value, _ctx| {
            let d = d.clone();
            async move {
                d.fetch_add(1, Ordering::Relaxed);
                Outcome::Success
            }
        })?
        .all_queues(256)?
        .batch(256)
        .poll(Duration::from_millis(10))
        .build()?;
    let start = Instant::now();
    let d = done.clone();
    runtime
        .run_until(async move {
            while d.load(Ordering::Relaxed) < jobs {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await?;
    let secs = start.elapsed().as_secs_f64();
    println!(
        "db={} jobs={jobs} enqueue_jobs_per_sec={:.0} drain_seconds={secs:.2} drain_jobs_per_sec={:.0}",
        if db.starts_with("postgres") {
            "postgres"
        } else {
            "sqlite"
        },
        jobs as f64 / insert_secs,
        jobs as f64 / secs
    );
    if db.starts_with("postgres") {
        let (client, conn) = tokio_postgres::connect(&db, tokio_postgres::NoTls).await?;
        tokio::spawn(conn);
        client
            .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
            .await?;
    }
    Ok(())
}
