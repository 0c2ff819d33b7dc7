//! The statistics: each queue's sample, the recent window's outcomes, the
//! paused queues and the workers' latest reports, which workers upsert.

use std::time::Duration;

use errand_core::{
    Error, QueueSample, Result, Stats, StatsRead, StatsRequest, Timestamp, WindowRow,
    WorkerMetrics, WorkerReport, WorkerSeen, assemble_stats,
};
use rusqlite::{Connection, OptionalExtension, named_params};

use crate::conn::map_err;
use crate::queues::{limits, paused};
use crate::rows::{opt_ts_col, ts_col, u32_col, u64_col};

const REPORT_WORKER: &str = include_str!("../queries/report_worker.sql");
const STATS_SAMPLE: &str = include_str!("../queries/stats_sample.sql");
const STATS_WINDOW: &str = include_str!("../queries/stats_window.sql");

/// Worker reports older than this are deleted when another arrives.
const WORKER_FORGOTTEN_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Upserts a worker's report and forgets workers silent for a day.
pub(crate) fn report_worker(conn: &Connection, w: &WorkerReport, now: Timestamp) -> Result<()> {
    w.validate()?;
    let queues = serde_json::to_string(&w.queues)
        .map_err(|e| Error::invalid(format!("a worker's queues could not be encoded: {e}")))?;
    // A one-shot run's counts add to those stored under its id; the
    // writer's `BEGIN IMMEDIATE` makes the read and the write one step, for
    // other processes too.
    let mut totals = w.metrics.clone();
    if w.one_shot {
        let stored: Option<String> = conn
            .prepare_cached("SELECT metrics FROM errand_workers WHERE id = :id")
            .map_err(map_err)?
            .query_row(named_params! {":id": w.id}, |r| r.get(0))
            .optional()
            .map_err(map_err)?;
        if let Some(stored) = stored {
            let stored = serde_json::from_str::<WorkerMetrics>(&stored).map_err(|e| {
                Error::storage(format!("worker {}'s counters are not readable: {e}", w.id))
            })?;
            totals.add_all(&stored);
        }
    }
    let metrics = serde_json::to_string(&totals)
        .map_err(|e| Error::invalid(format!("a worker's counters could not be encoded: {e}")))?;
    conn.prepare_cached(REPORT_WORKER)
        .map_err(map_err)?
        .execute(named_params! {
            ":id": w.id, ":host": w.host, ":pid": w.pid, ":queues": queues,
            ":started_at": w.started_at.as_millis(), ":now": now.as_millis(), ":metrics": metrics,
        })
        .map_err(map_err)?;
    conn.prepare_cached("DELETE FROM errand_workers WHERE last_cycle_at < :before")
        .map_err(map_err)?
        .execute(named_params! {":before": now.minus(WORKER_FORGOTTEN_AFTER).as_millis()})
        .map_err(map_err)?;
    Ok(())
}

fn workers(conn: &Connection) -> Result<Vec<WorkerSeen>> {
    let rows = conn
        .prepare_cached(
            "SELECT id, host, pid, queues, started_at, last_cycle_at, metrics FROM errand_workers
             ORDER BY last_cycle_at DESC LIMIT 1000",
        )
        .map_err(map_err)?
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                u32_col(r, 2)?,
                r.get::<_, String>(3)?,
                ts_col(r, 4)?,
                ts_col(r, 5)?,
                r.get::<_, String>(6)?,
            ))
        })
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)?;
    rows.into_iter()
        .map(
            |(id, host, pid, queues, started_at, last_cycle_at, metrics)| {
                Ok(WorkerSeen {
                    queues: serde_json::from_str(&queues).map_err(|e| {
                        Error::storage(format!("worker {id}'s queues are not readable: {e}"))
                    })?,
                    metrics: serde_json::from_str::<WorkerMetrics>(&metrics).map_err(|e| {
                        Error::storage(format!("worker {id}'s counters are not readable: {e}"))
                    })?,
                    id,
                    host,
                    pid,
                    started_at,
                    last_cycle_at,
                })
            },
        )
        .collect()
}

/// The most queues the statistics report on.
const MAX_QUEUES: usize = 1000;

/// The queues that have blocked, waiting, ready, running or dead jobs, or
/// are paused or capped, by
/// name: found by skipping through the indexes that lead with the queue
/// (one probe per queue), and through at most `read` running jobs.
fn queue_names(conn: &Connection, read: i64) -> Result<Vec<String>> {
    let mut names = std::collections::BTreeSet::new();
    for sql in [
        "SELECT queue FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
         WHERE state = 'ready' AND queue > :after ORDER BY queue LIMIT 1",
        "SELECT queue FROM errand_jobs INDEXED BY errand_jobs_dead_by_queue
         WHERE state = 'dead' AND queue > :after ORDER BY queue LIMIT 1",
        "SELECT queue FROM errand_jobs INDEXED BY errand_jobs_blocked_by_queue
         WHERE state = 'blocked' AND queue > :after ORDER BY queue LIMIT 1",
        "SELECT queue FROM errand_jobs INDEXED BY errand_jobs_waiting_by_queue
         WHERE state = 'waiting' AND queue > :after ORDER BY queue LIMIT 1",
    ] {
        let mut stmt = conn.prepare_cached(sql).map_err(map_err)?;
        let mut after = String::new();
        while names.len() < MAX_QUEUES {
            let next: Option<String> = stmt
                .query_row(named_params! {":after": after}, |r| r.get(0))
                .optional()
                .map_err(map_err)?;
            let Some(q) = next else { break };
            names.insert(q.clone());
            after = q;
        }
    }
    let mut stmt = conn
        .prepare_cached(
            "SELECT DISTINCT queue FROM (SELECT queue FROM errand_jobs INDEXED BY errand_jobs_leases
             WHERE state = 'running' LIMIT :read)
             UNION SELECT queue FROM errand_paused_queues
             UNION SELECT queue FROM errand_queue_limits",
        )
        .map_err(map_err)?;
    let more = stmt
        .query_map(named_params! {":read": read}, |r| r.get::<_, String>(0))
        .map_err(map_err)?;
    for q in more {
        names.insert(q.map_err(map_err)?);
    }
    Ok(names.into_iter().take(MAX_QUEUES).collect())
}

/// The statistics, read in one transaction.
pub(crate) fn stats(conn: &Connection, req: &StatsRequest, now: Timestamp) -> Result<Stats> {
    let mut samples = Vec::new();
    let read = i64::from(req.cap) + 1;
    for queue in queue_names(conn, read)? {
        let sample = conn
            .prepare_cached(STATS_SAMPLE)
            .map_err(map_err)?
            .query_row(
                named_params! {":queue": queue, ":now": now.as_millis(), ":cap": read},
                |r| {
                    Ok(QueueSample {
                        queue: queue.clone(),
                        due: u64_col(r, 0)?,
                        scheduled: u64_col(r, 1)?,
                        oldest_due_at: opt_ts_col(r, 2)?,
                        ready_read: u64_col(r, 3)?,
                        running: u64_col(r, 4)?,
                        live: u64_col(r, 5)?,
                        dead: u64_col(r, 6)?,
                        blocked: u64_col(r, 7)?,
                        waiting: u64_col(r, 8)?,
                    })
                },
            )
            .map_err(map_err)?;
        samples.push(sample);
    }
    let window = conn
        .prepare_cached(STATS_WINDOW)
        .map_err(map_err)?
        .query_map(
            named_params! {":since": now.minus(req.window).as_millis(), ":cap": i64::from(req.cap) + 1},
            |r| {
                Ok(WindowRow {
                    queue: r.get(0)?,
                    dead: r.get::<_, i64>(1)? != 0,
                    class: r.get(2)?,
                    n: u64_col(r, 3)?,
                })
            },
        )
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)?;
    let read = StatsRead {
        samples,
        window,
        paused: paused(conn)?,
        limits: limits(conn)?,
        counted: crate::counts::stored(conn)?,
        workers: workers(conn)?,
    };
    assemble_stats(req, now, read)
}
