//! Claim-and-acknowledge round trips per second on SQLite.
//!
//! ```text
//! cargo run --release -p errand --example roundtrip -- [JOBS] [TASKS] [full|normal]
//! ```
//!
//! Pre-inserts JOBS jobs in one transaction, then TASKS concurrent loops each
//! claim one job and acknowledge it (two commits per job) until none is
//! left. With one task every commit waits for its own fsync; with more, the
//! writer thread commits what is queued together (group commit).

use std::sync::Arc;
use std::time::{Duration, Instant};

use errand::{ClaimRequest, NewJob, Payload, SqliteOptions, SqliteStore, Store, Synchronous};

/// The machine's bound: one-row commits in a loop on a bare WAL database.
fn raw_commits(
    path: &std::path::Path,
    sync: Synchronous,
    n: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let conn = errand::sqlite::rusqlite::Connection::open(path)?;
    let level = if sync == Synchronous::Full {
        "FULL"
    } else {
        "NORMAL"
    };
    conn.execute_batch(&format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {level}; CREATE TABLE t (x INTEGER)"
    ))?;
    let start = Instant::now();
    for i in 0..n {
        conn.execute("INSERT INTO t VALUES (?1)", [i as i64])?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "baseline: one-row autocommit inserts, synchronous={level}: {:.0} commits/s",
        n as f64 / secs
    );
    Ok(())
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let jobs: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(5000);
    let tasks: usize = args.next().map(|s| s.parse()).transpose()?.unwrap_or(1);
    let sync: Synchronous = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or_default();
    let dir = tempfile::tempdir()?;
    raw_commits(&dir.path().join("raw.db"), sync, jobs)?;
    let store = SqliteStore::open(
        dir.path().join("bench.db"),
        SqliteOptions {
            create: true,
            migrate: true,
            synchronous: sync,
            ..SqliteOptions::default()
        },
    )?;
    let store: Arc<dyn Store> = Arc::new(store);
    let batch: Vec<NewJob> = (0..jobs)
        .map(|_| NewJob::new("noop", Payload::default()))
        .collect::<Result<_, _>>()?;
    store.insert_many(batch).await?;

    let start = Instant::now();
    let mut handles = Vec::new();
    for _ in 0..tasks {
        let store = store.clone();
        handles.push(tokio::spawn(async move {
            let req = ClaimRequest {
                queues: vec![],
                limit: 1,
                lease: Duration::from_secs(30),
                rate: None,
                reclaim: true,
            };
            let mut done = 0usize;
            while let Some(c) = store.claim(&req).await?.pop() {
                store.complete(&c.lease).await?;
                done += 1;
            }
            Ok::<usize, errand::Error>(done)
        }));
    }
    let mut total = 0;
    for h in handles {
        total += h.await??;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "synchronous={sync:?} tasks={tasks} jobs={total} seconds={secs:.3} round_trips_per_sec={:.0} commits_per_sec<={:.0}",
        total as f64 / secs,
        2.0 * total as f64 / secs
    );
    Ok(())
}
