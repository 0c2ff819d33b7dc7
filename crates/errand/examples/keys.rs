//! What a claim costs while one concurrency key sits at its limit with a
//! long backlog: one key with BACKLOG due jobs (limit 2, both slots taken),
//! then other keys' and plain jobs; each claim must pass over the saturated
//! key and return the others'.
//!
//! ```text
//! cargo run --release -p errand --example keys -- [BACKLOG] [DB]
//! # DB: a SQLite path (default: a temporary file) or postgres://…
//! ```

use std::time::{Duration, Instant};

use errand::{ClaimRequest, ConnectOptions, JobState, KeyLimit, NewJob, Payload};

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let backlog: usize = args
        .next()
        .map(|s| s.parse())
        .transpose()?
        .unwrap_or(10_000);
    let dir = tempfile::tempdir()?;
    let db = args
        .next()
        .unwrap_or_else(|| dir.path().join("keys.db").display().to_string());
    let schema = format!("errand_keys_{}", std::process::id());
    let options = ConnectOptions {
        create_and_migrate: true,
        schema: Some(schema.clone()),
        ..Default::default()
    };
    let store = errand::connect(&db, &options).await?;
    let lease = Duration::from_secs(300);
    let claim = |limit| ClaimRequest {
        queues: Vec::new(),
        limit,
        lease,
        rate: None,
        reclaim: true,
    };

    let mut jobs = Vec::with_capacity(backlog);
    for _ in 0..backlog {
        jobs.push(
            NewJob::new("noop", Payload::default())?.with_key("big", KeyLimit::Concurrent(2))?,
        );
    }
    for chunk in jobs.chunks(5_000) {
        store.insert_many(chunk.to_vec()).await?;
    }
    // Take big's two slots; from now on it is saturated.
    let first = store.claim(&claim(2)).await?;
    assert_eq!(first.len(), 2);

    // Each round: 10 small keys with one job each and 10 plain jobs; one
    // claim of 20 must return exactly those.
    let rounds = 50;
    let mut times = Vec::with_capacity(rounds);
    for round in 0..rounds {
        let mut other = Vec::new();
        for k in 0..10 {
            other.push(
                NewJob::new("noop", Payload::default())?
                    .with_key(&format!("small-{round}-{k}"), KeyLimit::Concurrent(2))?,
            );
            other.push(NewJob::new("noop", Payload::default())?);
        }
        store.insert_many(other).await?;
        let start = Instant::now();
        let got = store.claim(&claim(20)).await?;
        times.push(start.elapsed());
        assert_eq!(got.len(), 20, "round {round}: claimed {}", got.len());
        assert!(
            got.iter()
                .all(|c| c.job.key.as_ref().is_none_or(|k| k.name != "big"))
        );
        for c in got {
            store.complete(&c.lease).await?;
        }
    }
    let running = store
        .list(&errand::JobFilter {
            state: Some(JobState::Running),
            ..Default::default()
        })
        .await?;
    assert_eq!(running.len(), 2);
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    println!(
        "db={} saturated_backlog={backlog} claim_of_20_ms p50={:.2} p95={:.2} max={:.2}",
        if db.starts_with("postgres") {
            "postgres"
        } else {
            "sqlite"
        },
        ms(times[rounds / 2]),
        ms(times[rounds * 95 / 100]),
        ms(times[rounds - 1]),
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
