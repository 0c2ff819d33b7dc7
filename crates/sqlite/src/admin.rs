//! The operator's operations: replay, cancel, copy, purge, reschedule,
//! pausing queues, the audit log, workers' reports and the statistics.
//! Each action checks that every job named is in a state it accepts, then
//! changes them all with one set-based statement (SQLite has no
//! data-modifying CTE, so the audit entries are a second). Each write runs in the writer's
//! transaction, like every other operation.

use std::time::Duration;

use errand_core::{
    AuditEntry, AuditFilter, AuditStamp, CopyRequest, Error, Job, JobId, JobState, Name, NewJob,
    PausedQueue, QueueSample, Reschedule, Result, Schedule, Stats, StatsRequest, Timestamp,
    WindowRow, WorkerMetrics, WorkerReport, WorkerSeen, assemble_stats,
};
use rusqlite::{Connection, OptionalExtension, named_params};

use crate::audit::{AuditRow, audit};
use crate::conn::map_err;
use crate::insert::insert_many;
use crate::release::{Release, release_dependents};
use crate::rows::{job_from_row, name_col, opt_ts_col, ts_col, u32_col, u64_col};

const REPLAY: &str = include_str!("../queries/replay.sql");
const CANCEL: &str = include_str!("../queries/cancel.sql");
const CANCEL_ATTEMPTS: &str = include_str!("../queries/cancel_attempts.sql");
const PURGE: &str = include_str!("../queries/purge.sql");
const PURGE_STRANDS: &str = include_str!("../queries/purge_strands.sql");
const REPLAY_STRANDS: &str = include_str!("../queries/replay_strands.sql");
const RESCHEDULE: &str = include_str!("../queries/reschedule.sql");
const COUNT_IN_STATES: &str = include_str!("../queries/count_in_states.sql");
const AUDIT_MANY: &str = include_str!("../queries/audit_many.sql");
const STATS_SAMPLE: &str = include_str!("../queries/stats_sample.sql");
const STATS_WINDOW: &str = include_str!("../queries/stats_window.sql");
const REPORT_WORKER: &str = include_str!("../queries/report_worker.sql");

/// Worker reports older than this are deleted when another arrives.
const WORKER_FORGOTTEN_AFTER: Duration = Duration::from_secs(24 * 3600);

/// Pauses a queue; `false` when it already was.
pub(crate) fn pause(
    conn: &Connection,
    queue: &Name,
    by: &AuditStamp,
    now: Timestamp,
) -> Result<bool> {
    let n = conn
        .prepare_cached(
            "INSERT INTO errand_paused_queues (queue, operator, reason, paused_at)
             VALUES (:queue, :operator, :reason, :now) ON CONFLICT (queue) DO NOTHING",
        )
        .map_err(map_err)?
        .execute(named_params! {
            ":queue": queue.as_str(), ":operator": by.operator,
            ":reason": by.reason, ":now": now.as_millis(),
        })
        .map_err(map_err)?;
    if n == 1 {
        queue_audit(conn, queue, by, "pause", now)?;
    }
    Ok(n == 1)
}

/// Resumes a queue; `false` when it was not paused.
pub(crate) fn resume(
    conn: &Connection,
    queue: &Name,
    by: &AuditStamp,
    now: Timestamp,
) -> Result<bool> {
    let n = conn
        .prepare_cached("DELETE FROM errand_paused_queues WHERE queue = :queue")
        .map_err(map_err)?
        .execute(named_params! {":queue": queue.as_str()})
        .map_err(map_err)?;
    if n == 1 {
        queue_audit(conn, queue, by, "resume", now)?;
    }
    Ok(n == 1)
}

fn queue_audit(
    conn: &Connection,
    queue: &Name,
    by: &AuditStamp,
    action: &str,
    now: Timestamp,
) -> Result<()> {
    let row = AuditRow {
        job: None,
        queue,
        action,
        operator: &by.operator,
        reason: by.reason.as_deref(),
        copy: None,
        schedule: None,
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

/// The ids as the JSON array the set-based statements read.
fn id_array<'a>(ids: impl IntoIterator<Item = &'a JobId>) -> Result<String> {
    serde_json::to_string(&ids.into_iter().map(JobId::as_str).collect::<Vec<_>>())
        .map_err(|e| Error::storage(format!("the job ids could not be encoded: {e}")))
}

/// Whether every job in `ids` (a JSON array of `n` distinct ids) is in one
/// of `states`. The writer's transaction keeps the answer true until the
/// action that asked commits.
fn all_in(conn: &Connection, ids: &str, n: usize, states: &[JobState]) -> Result<bool> {
    let states = serde_json::to_string(&states.iter().map(|s| s.as_str()).collect::<Vec<_>>())
        .map_err(|e| Error::storage(format!("the job states could not be encoded: {e}")))?;
    let found: i64 = conn
        .prepare_cached(COUNT_IN_STATES)
        .map_err(map_err)?
        .query_row(named_params! {":ids": ids, ":states": states}, |r| r.get(0))
        .map_err(map_err)?;
    Ok(usize::try_from(found).is_ok_and(|found| found == n))
}

/// Whether `action` on the jobs in `ids` (a JSON array) would leave a job
/// waiting for good: a purge of a job a blocked job waits for, a replay
/// of a job whose dependency can no longer release it. The action is then
/// refused whole, like one naming a job in a state it does not accept.
fn strands(conn: &Connection, action: &str, ids: &str) -> Result<bool> {
    let sql = match action {
        "purge" => PURGE_STRANDS,
        "replay" => REPLAY_STRANDS,
        _ => return Ok(false),
    };
    let n: i64 = conn
        .prepare_cached(sql)
        .map_err(map_err)?
        .query_row(named_params! {":ids": ids}, |r| r.get(0))
        .map_err(map_err)?;
    Ok(n > 0)
}

/// One audit entry per job in `ids` (a JSON array), in its order; `copies`
/// names the new job beside each original of a copy.
fn audit_all(
    conn: &Connection,
    ids: &str,
    action: &str,
    by: &AuditStamp,
    copies: Option<&str>,
    now: Timestamp,
) -> Result<()> {
    conn.prepare_cached(AUDIT_MANY)
        .map_err(map_err)?
        .execute(named_params! {
            ":ids": ids, ":action": action, ":operator": by.operator,
            ":reason": by.reason, ":now": now.as_millis(), ":copies": copies,
        })
        .map_err(map_err)?;
    Ok(())
}

/// Runs a set-based statement that answers with changed jobs.
fn changed_jobs(
    conn: &Connection,
    sql: &str,
    params: &[(&str, &dyn rusqlite::ToSql)],
) -> Result<Vec<Job>> {
    conn.prepare_cached(sql)
        .map_err(map_err)?
        .query_map(params, job_from_row)
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)
}

/// The shape every operator action on jobs takes here: when every job
/// named is in one of `states`, `change` (set-based, given the ids as a
/// JSON array) and an `action` audit entry each — for a purge written
/// before the change, while the jobs can still be read; otherwise nothing
/// and an empty answer.
fn all_or_none<T: Default>(
    conn: &Connection,
    ids: &[JobId],
    states: &[JobState],
    action: &str,
    by: &AuditStamp,
    now: Timestamp,
    change: impl FnOnce(&str) -> Result<T>,
) -> Result<T> {
    let list = id_array(ids)?;
    if !all_in(conn, &list, ids.len(), states)? || strands(conn, action, &list)? {
        return Ok(T::default());
    }
    let deletes = action == "purge";
    if deletes {
        audit_all(conn, &list, action, by, None, now)?;
    }
    let out = change(&list)?;
    if !deletes {
        audit_all(conn, &list, action, by, None, now)?;
    }
    Ok(out)
}

/// Replays every job named, if each is dead or cancelled; else none.
pub(crate) fn replay(
    conn: &Connection,
    ids: &[JobId],
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Vec<Job>> {
    let states = errand_core::ReplayRequest::ACCEPTS;
    all_or_none(conn, ids, states, "replay", by, now, |list| {
        changed_jobs(
            conn,
            REPLAY,
            named_params! {":ids": list, ":now": now.as_millis()},
        )
    })
}

/// Cancels every job named, if each is blocked, ready or running; else
/// none. The running ones' attempts end in the history first; the
/// dependents of the cancelled jobs are released (or cancelled in turn).
pub(crate) fn cancel(
    conn: &Connection,
    ids: &[JobId],
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Vec<Job>> {
    let states = errand_core::CancelRequest::ACCEPTS;
    all_or_none(conn, ids, states, "cancel", by, now, |list| {
        conn.prepare_cached(CANCEL_ATTEMPTS)
            .map_err(map_err)?
            .execute(named_params! {":ids": list, ":now": now.as_millis()})
            .map_err(map_err)?;
        let params =
            named_params! {":ids": list, ":operator": by.operator, ":now": now.as_millis()};
        let cancelled = changed_jobs(conn, CANCEL, params)?;
        let depended_on: Vec<&str> = cancelled
            .iter()
            .filter(|j| j.has_dependents)
            .map(|j| j.id.as_str())
            .collect();
        if !depended_on.is_empty() {
            release_dependents(conn, &depended_on, Release::Failed, now)?;
        }
        Ok(cancelled)
    })
}

/// Moves every job named to a new due time and/or priority, if each is
/// ready; else none.
pub(crate) fn reschedule(
    conn: &Connection,
    ids: &[JobId],
    to: &Reschedule,
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Vec<Job>> {
    let available_at = to.run.map(|run| match run {
        Schedule::Now => now,
        Schedule::After(d) => now.plus(d),
        Schedule::At(t) => t,
    });
    all_or_none(
        conn,
        ids,
        errand_core::RescheduleRequest::ACCEPTS,
        "reschedule",
        by,
        now,
        |list| {
            let params = named_params! {
                ":ids": list, ":now": now.as_millis(),
                ":available_at": available_at.map(Timestamp::as_millis), ":priority": to.priority,
            };
            changed_jobs(conn, RESCHEDULE, params)
        },
    )
}

/// Deletes every job named, if each is dead; else none.
pub(crate) fn purge(
    conn: &Connection,
    ids: &[JobId],
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Vec<JobId>> {
    all_or_none(
        conn,
        ids,
        errand_core::PurgeRequest::ACCEPTS,
        "purge",
        by,
        now,
        |list| {
            conn.prepare_cached(PURGE)
                .map_err(map_err)?
                .query_map(named_params! {":ids": list}, |r| r.get::<_, String>(0))
                .map_err(map_err)?
                .map(|id| JobId::new(id.map_err(map_err)?))
                .collect()
        },
    )
}

/// Inserts each copy while every original is still dead or cancelled (else
/// none), with a `copy` audit entry naming both.
pub(crate) fn copy(
    conn: &Connection,
    copies: &[(JobId, NewJob)],
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Vec<Job>> {
    let originals = id_array(copies.iter().map(|(from, _)| from))?;
    if !all_in(conn, &originals, copies.len(), CopyRequest::ACCEPTS)? {
        return Ok(Vec::new());
    }
    let new_jobs: Vec<NewJob> = copies.iter().map(|(_, job)| job.clone()).collect();
    let inserted = insert_many(conn, &new_jobs, now)?;
    let new_ids = id_array(inserted.iter().map(|i| &i.job.id))?;
    audit_all(conn, &originals, "copy", by, Some(&new_ids), now)?;
    Ok(inserted.into_iter().map(|i| i.job).collect())
}

/// Audit entries, newest first.
pub(crate) fn audit_log(conn: &Connection, f: &AuditFilter) -> Result<Vec<AuditEntry>> {
    // Each filter has its index; the statement text is one of a fixed set.
    // A job's entries include the copy that made it (its own index).
    let (index, cond) = match (&f.job, &f.schedule, &f.queue) {
        (Some(_), _, _) => ("", "(job_id = :job OR copy_id = :job)"),
        (None, Some(_), _) => ("errand_audit_schedule", "schedule = :schedule"),
        (None, None, Some(_)) => ("errand_audit_queue", "queue = :queue"),
        (None, None, None) => ("", "1"),
    };
    let indexed = if index.is_empty() {
        String::new()
    } else {
        format!(" INDEXED BY {index}")
    };
    let sql = format!(
        "SELECT seq, at, action, job_id, queue, operator, reason, copy_id, schedule
         FROM errand_audit{indexed}
         WHERE {cond} AND (:job IS NULL OR job_id = :job OR copy_id = :job)
           AND (:queue IS NULL OR queue = :queue)
           AND (:schedule IS NULL OR schedule = :schedule)
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
                ":schedule": f.schedule.as_ref().map(Name::as_str),
                ":before": before,
                ":limit": f.effective_limit(),
            },
            |r| {
                let job: Option<String> = r.get(3)?;
                let queue: Option<String> = r.get(4)?;
                let copy: Option<String> = r.get(7)?;
                let schedule: Option<String> = r.get(8)?;
                Ok((
                    AuditEntry {
                        seq: u64_col(r, 0)?,
                        at: ts_col(r, 1)?,
                        action: r.get(2)?,
                        job_id: None,
                        copy_id: None,
                        queue: None,
                        schedule: None,
                        operator: r.get(5)?,
                        reason: r.get(6)?,
                    },
                    job,
                    queue,
                    copy,
                    schedule,
                ))
            },
        )
        .map_err(map_err)?
        .map(|r| {
            let (mut e, job, queue, copy, schedule) = r.map_err(map_err)?;
            e.schedule = schedule.map(|s| Name::parse("schedule", s)).transpose()?;
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

/// The queues that have blocked, ready, running or dead jobs, or are paused, by
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
                        blocked: u64_col(r, 7)?,
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
