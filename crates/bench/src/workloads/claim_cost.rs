//! The claim-cost workload: the time of one claim of ten due jobs on an
//! empty table, beside a million done and future rows, and (PostgreSQL)
//! while another session holds a snapshot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use errand::{ClaimRequest, Lease, Store};

use super::resolve::Resolved;
use super::{CLAIM_LIMIT, LEASE, job};
use crate::stats::{Summary, ms, per_second, ratio};
use crate::target::{Finished, PgSession, Target};
use crate::{BenchError, ClaimReport, Report, Result, SnapshotReport};

/// Rounds of: insert 10 due jobs, claim 10 (timed), acknowledge them. Runs
/// `rounds` rounds, or with `until` as many as fit in that time. Returns
/// (when the claim began, how long it took) per round.
async fn claim_rounds(
    store: &Arc<dyn Store>,
    rounds: u64,
    until: Option<Duration>,
) -> Result<Vec<(Duration, Duration)>> {
    let request = ClaimRequest {
        queues: Vec::new(),
        limit: CLAIM_LIMIT,
        lease: LEASE,
        rate: None,
        reclaim: true,
    };
    let start = Instant::now();
    let mut samples = Vec::new();
    for round in 0.. {
        match until {
            Some(d) if start.elapsed() >= d => break,
            None if round >= rounds => break,
            _ => {}
        }
        let jobs = (0..CLAIM_LIMIT)
            .map(|_| job())
            .collect::<Result<Vec<_>>>()?;
        store.insert_many(jobs).await?;
        let began = Instant::now();
        let claimed = store.claim(&request).await?;
        let took = began.elapsed();
        if claimed.len() != CLAIM_LIMIT as usize {
            return Err(BenchError::Failed(format!(
                "a claim of {CLAIM_LIMIT} with {CLAIM_LIMIT} due jobs returned {}",
                claimed.len()
            )));
        }
        let leases: Vec<Lease> = claimed.into_iter().map(|c| c.lease).collect();
        let acked = store.complete_many(&leases).await?;
        if !acked.iter().all(|&a| a) {
            return Err(BenchError::Failed(
                "an acknowledgment of freshly claimed jobs was refused (lease lost)".into(),
            ));
        }
        samples.push((began.duration_since(start), took));
    }
    Ok(samples)
}

fn durations(samples: &[(Duration, Duration)]) -> Vec<Duration> {
    samples.iter().map(|&(_, took)| took).collect()
}

pub(super) async fn claim_cost(target: &Target, r: &Resolved, report: &mut Report) -> Result<()> {
    let rounds = r.jobs.div_ceil(u64::from(CLAIM_LIMIT));
    let phase = target.phase().await?;
    let empty = claim_rounds(&phase.store, rounds, None).await;
    target.finish(phase).await?;
    let empty = Summary::of(&durations(&empty?));

    let load_start = Instant::now();
    target.bulk_load(r.rows).await?;
    let load_time = load_start.elapsed();

    let phase = target.phase().await?;
    let started = Instant::now();
    let loaded = claim_rounds(&phase.store, rounds, None).await;
    let elapsed = started.elapsed();
    let Finished { commits, note, .. } = target.finish(phase).await?;
    let loaded = durations(&loaded?);
    let claim_time: Duration = loaded.iter().sum();
    let loaded = Summary::of(&loaded);

    let snapshot = match target.pg_url() {
        Some(url) => Some(snapshot_rounds(target, url, r.duration).await?),
        None => None,
    };
    let claimed = rounds * u64::from(CLAIM_LIMIT);
    report.notes.extend(note);
    report.jobs = claimed;
    report.elapsed_ms = ms(elapsed);
    // Jobs per second of claim time (10 / the mean claim).
    report.jobs_per_sec = per_second(claimed, claim_time);
    report.commits = commits;
    report.p50_ms = Some(loaded.p50_ms);
    report.p95_ms = Some(loaded.p95_ms);
    report.p99_ms = Some(loaded.p99_ms);
    report.claim = Some(ClaimReport {
        p50_ratio: ratio(loaded.p50_ms, empty.p50_ms),
        p99_ratio: ratio(loaded.p99_ms, empty.p99_ms),
        empty,
        loaded,
        rows_done: r.rows,
        rows_future: r.rows,
        load: format!(
            "direct SQL in statements of up to 200,000 rows ({}), not the store's insert path: \
             done rows holding their succeeded attempt (no history row, as the store leaves them), future rows ready and due from a day ahead{}",
            if target.pg_url().is_some() {
                "INSERT … SELECT FROM generate_series"
            } else {
                "INSERT … SELECT from a recursive CTE, through SqliteStore::write"
            },
            if target.pg_url().is_some() {
                "; then VACUUM (ANALYZE) of both tables, as autovacuum would have done"
            } else {
                "; no ANALYZE (Errand never runs it on SQLite)"
            }
        ),
        load_ms: ms(load_time),
        snapshot,
    });
    Ok(())
}

/// Claim rounds while another session holds a `REPEATABLE READ` snapshot.
async fn snapshot_rounds(target: &Target, url: &str, hold: Duration) -> Result<SnapshotReport> {
    let phase = target.phase().await?;
    let holder = PgSession::connect(url).await?;
    let began = holder
        .client
        .batch_execute("BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1")
        .await
        .map_err(|e| BenchError::Postgres(format!("cannot open the snapshot: {e}")));
    let held = Instant::now();
    let samples = match began {
        Ok(()) => claim_rounds(&phase.store, 0, Some(hold)).await,
        Err(e) => Err(e),
    };
    let held = held.elapsed();
    let _ = holder.client.batch_execute("ROLLBACK").await;
    holder.close().await;
    target.finish(phase).await?;
    let samples = samples?;
    let window = Duration::from_secs(5);
    let first: Vec<Duration> = samples
        .iter()
        .filter(|&&(at, _)| at < window)
        .map(|&(_, took)| took)
        .collect();
    let last: Vec<Duration> = samples
        .iter()
        .filter(|&&(at, _)| at + window >= held)
        .map(|&(_, took)| took)
        .collect();
    Ok(SnapshotReport {
        held_ms: ms(held),
        claims: Summary::of(&durations(&samples)),
        first_5s_p50_ms: Summary::of(&first).p50_ms,
        last_5s_p50_ms: Summary::of(&last).p50_ms,
    })
}
