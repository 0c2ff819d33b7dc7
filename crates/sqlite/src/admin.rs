//! The operator's operations: pausing queues, purging dead jobs, the audit
//! log, workers' reports and the statistics. Each write runs in the writer's
//! transaction, like every other operation.

use std::time::Duration;

use errand_core::{
    AuditEntry, AuditFilter, Copied, CopyRequest, Error, Job, JobId, JobState, Name, NewJob,
    PausedQueue, QueueAction, QueueSample, Result, Stats, StatsRequest, Timestamp, WindowRow,
    WorkerMetrics, WorkerReport, WorkerSeen, assemble_stats,
};
use rusqlite::{Connection, OptionalExtension, Row, named_params};

use crate::map_err;
use crate::queue::{AuditRow, audit, get, insert_many, opt_ts_col, refused, ts_col, u32_col};

const STATS_SAMPLE: &str = include_str!("../queries/stats_sample.sql");
const STATS_WINDOW: &str = include_str!("../queries/stats_window.sql");
const REPORT_WORKER: &str = include_str!("../queries/report_worker.sql");

/// Worker reports older than this are deleted when another arrives.
const WORKER_FORGOTTEN_AFTER: Duration = Duration::from_secs(24 * 3600);

fn u64_col(row: &Row<'_>, col: usize) -> rusqlite::Result<u64> {
    let v: i64 = row.get(col)?;
    Ok(u64::try_from(v).unwrap_or(0))
}

fn name_col(row: &Row<'_>, col: usize) -> rusqlite::Result<Name> {
    let s: String = row.get(col)?;
    Name::parse("queue", s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(col, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Pauses a queue; `false` when it already was.
pub(crate) fn pause(conn: &Connection, a: &QueueAction, now: Timestamp) -> Result<bool> {
    a.validate()?;
    let n = conn
        .prepare_cached(
            "INSERT INTO errand_paused_queues (queue, operator, reason, paused_at)
             VALUES (:queue, :operator, :reason, :now) ON CONFLICT (queue) DO NOTHING",
        )
        .map_err(map_err)?
        .execute(named_params! {
            ":queue": a.queue.as_str(), ":operator": a.operator,
            ":reason": a.reason, ":now": now.as_millis(),
        })
        .map_err(map_err)?;
    if n == 1 {
        queue_audit(conn, a, "pause", now)?;
    }
    Ok(n == 1)
}

/// Resumes a queue; `false` when it was not paused.
pub(crate) fn resume(conn: &Connection, a: &QueueAction, now: Timestamp) -> Result<bool> {
    a.validate()?;
    let n = conn
        .prepare_cached("DELETE FROM errand_paused_queues WHERE queue = :queue")
        .map_err(map_err)?
        .execute(named_params! {":queue": a.queue.as_str()})
        .map_err(map_err)?;
    if n == 1 {
        queue_audit(conn, a, "resume", now)?;
    }
    Ok(n == 1)
}

fn queue_audit(conn: &Connection, a: &QueueAction, action: &str, now: Timestamp) -> Result<()> {
    let row = AuditRow {
        job: None,
        queue: &a.queue,
        action,
        operator: &a.operator,
        reason: a.reason.as_deref(),
        copy: None,
    };
    audit(conn, &row, now)
}

/// The paused queues, by name.
pub(crate) fn paused(conn: &Connection) -> Result<Vec<PausedQueue>> {
    conn.prepare_cached(
        "SELECT queue, operator, reason, paused_at FROM errand_paused_queues ORDER BY queue",
    )
    .map_err(map_err)?
    .query_map([], |r| {
        Ok(PausedQueue {
            queue: name_col(r, 0)?,
            operator: r.get(1)?,
            reason: r.get(2)?,
            paused_at: ts_col(r, 3)?,
        })
    })
    .map_err(map_err)?
    .collect::<rusqlite::Result<Vec<_>>>()
    .map_err(map_err)
}

/// Deletes dead jobs (all or none), each with an audit entry.
pub(crate) fn purge(
    conn: &Connection,
    ids: &[JobId],
    operator: &str,
    reason: &str,
    now: Timestamp,
) -> Result<Vec<JobId>> {
    let mut out: Vec<JobId> = Vec::with_capacity(ids.len());
    for id in ids {
        if out.contains(id) {
            continue; // named twice: purged once
        }
        let queue: Option<String> = conn
            .prepare_cached(
                "DELETE FROM errand_jobs WHERE id = :id AND state = 'dead' RETURNING queue",
            )
            .map_err(map_err)?
            .query_row(named_params! {":id": id.as_str()}, |r| r.get(0))
            .optional()
            .map_err(map_err)?;
        let Some(queue) = queue else {
            return Err(refused(conn, id, errand_core::PurgeRequest::REFUSED));
        };
        let queue = Name::parse("queue", queue)?;
        let row = AuditRow {
            job: Some(id),
            queue: &queue,
            action: "purge",
            operator,
            reason: Some(reason),
            copy: None,
        };
        audit(conn, &row, now)?;
        out.push(id.clone());
    }
    Ok(out)
}

/// Copies dead or cancelled jobs under new ids (all or none), each with a
/// `copy` audit entry naming both; the originals are not touched.
pub(crate) fn copy(conn: &Connection, req: &CopyRequest, now: Timestamp) -> Result<Vec<Copied>> {
    req.validate()?;
    let mut originals: Vec<Job> = Vec::with_capacity(req.ids.len());
    for id in &req.ids {
        if originals.iter().any(|j| &j.id == id) {
            continue; // named twice: copied once
        }
        let job = get(conn, id)?;
        if !matches!(job.state, JobState::Dead | JobState::Cancelled) {
            return Err(refused(conn, id, CopyRequest::REFUSED));
        }
        originals.push(job);
    }
    let copies = originals
        .iter()
        .map(NewJob::copy_of)
        .collect::<Result<Vec<_>>>()?;
    let inserted = insert_many(conn, &copies, now)?;
    let mut out = Vec::with_capacity(originals.len());
    for (from, new) in originals.into_iter().zip(inserted) {
        let row = AuditRow {
            job: Some(&from.id),
            queue: &from.queue,
            action: "copy",
            operator: &req.operator,
            reason: req.reason.as_deref(),
            copy: Some(&new.job.id),
        };
        audit(conn, &row, now)?;
        out.push(Copied {
            from: from.id,
            job: new.job,
        });
    }
    Ok(out)
}

/// Audit entries, newest first.
pub(crate) fn audit_log(conn: &Connection, f: &AuditFilter) -> Result<Vec<AuditEntry>> {
    // Each filter has its index; the statement text is one of a fixed set.
    // A job's entries include the copy that made it (its own index).
    let (index, cond) = match (&f.job, &f.queue) {
        (Some(_), _) => ("", "(job_id = :job OR copy_id = :job)"),
        (None, Some(_)) => ("errand_audit_queue", "queue = :queue"),
        (None, None) => ("", "1"),
    };
    let indexed = if index.is_empty() {
        String::new()
    } else {
        format!(" INDEXED BY {index}")
    };
    let sql = format!(
        "SELECT seq, at, action, job_id, queue, operator, reason, copy_id FROM errand_audit{indexed}
         WHERE {cond} AND (:job IS NULL OR job_id = :job OR copy_id = :job)
           AND (:queue IS NULL OR queue = :queue)
           AND (:before IS NULL OR seq < :before)
         ORDER BY seq DESC LIMIT :limit"
    );
    let before = f.before.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
    conn.prepare_cached(&sql)
        .map_err(map_err)?
        .query_map(
            named_params! {
                ":job": f.job.as_ref().map(JobId::as_str),
                ":queue": f.queue.as_ref().map(Name::as_str),
                ":before": before,
                ":limit": f.effective_limit(),
            },
            |r| {
                let job: Option<String> = r.get(3)?;
                let queue: Option<String> = r.get(4)?;
                let copy: Option<String> = r.get(7)?;
                Ok((
                    AuditEntry {
                        seq: u64_col(r, 0)?,
                        at: ts_col(r, 1)?,
                        action: r.get(2)?,
                        job_id: None,
                        copy_id: None,
                        queue: None,
                        operator: r.get(5)?,
                        reason: r.get(6)?,
                    },
                    job,
                    queue,
                    copy,
                ))
            },
        )
        .map_err(map_err)?
        .map(|r| {
            let (mut e, job, queue, copy) = r.map_err(map_err)?;
            e.job_id = job.map(JobId::new).transpose()?;
            e.copy_id = copy.map(JobId::new).transpose()?;
            e.queue = queue.map(|q| Name::parse("queue", q)).transpose()?;
            Ok(e)
        })
        .collect()
}

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
                Error::Storage(format!("worker {}'s counters are not readable: {e}", w.id))
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
                        Error::Storage(format!("worker {id}'s queues are not readable: {e}"))
                    })?,
                    metrics: serde_json::from_str::<WorkerMetrics>(&metrics).map_err(|e| {
                        Error::Storage(format!("worker {id}'s counters are not readable: {e}"))
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

/// The queues that have ready, running or dead jobs, or are paused, by
/// name: found by skipping through the indexes that lead with the queue
/// (one probe per queue), and through at most `read` running jobs.
fn queue_names(conn: &Connection, read: i64) -> Result<Vec<String>> {
    let mut names = std::collections::BTreeSet::new();
    for sql in [
        "SELECT queue FROM errand_jobs INDEXED BY errand_jobs_due_by_queue
         WHERE state = 'ready' AND queue > :after ORDER BY queue LIMIT 1",
        "SELECT queue FROM errand_jobs INDEXED BY errand_jobs_dead_by_queue
         WHERE state = 'dead' AND queue > :after ORDER BY queue LIMIT 1",
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
             UNION SELECT queue FROM errand_paused_queues",
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
    let paused = paused(conn)?;
    let workers = workers(conn)?;
    assemble_stats(req, now, samples, window, &paused, workers)
}
