//! What an operator sets on a queue: a pause (claims take nothing from it)
//! and a concurrency cap (claims read it in claim.rs), each changed with
//! its audit entry in the writer's transaction.

use errand_core::{
    AuditStamp, Name, PausedQueue, QueueLimit, QueueLimitRequest, Result, Timestamp,
};
use rusqlite::{Connection, named_params};

use crate::audit::{AuditRow, audit};
use crate::conn::map_err;
use crate::rows::{name_col, ts_col, u32_col};

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

/// Sets (`Some`) or clears (`None`) a queue's cap with its audit entry;
/// `false` when the queue already had that cap, or had none to clear.
pub(crate) fn set_limit(
    conn: &Connection,
    queue: &Name,
    concurrency: Option<u32>,
    by: &AuditStamp,
    now: Timestamp,
) -> Result<bool> {
    let n = match concurrency {
        Some(n) => conn
            .prepare_cached(
                "INSERT INTO errand_queue_limits (queue, concurrency, operator, reason, set_at)
                 VALUES (:queue, :concurrency, :operator, :reason, :now)
                 ON CONFLICT (queue) DO UPDATE
                 SET concurrency = excluded.concurrency, operator = excluded.operator,
                     reason = excluded.reason, set_at = excluded.set_at
                 WHERE errand_queue_limits.concurrency <> excluded.concurrency",
            )
            .map_err(map_err)?
            .execute(named_params! {
                ":queue": queue.as_str(), ":concurrency": n, ":operator": by.operator,
                ":reason": by.reason, ":now": now.as_millis(),
            }),
        None => conn
            .prepare_cached("DELETE FROM errand_queue_limits WHERE queue = :queue")
            .map_err(map_err)?
            .execute(named_params! {":queue": queue.as_str()}),
    }
    .map_err(map_err)?;
    if n == 1 {
        let action = match concurrency {
            Some(_) => QueueLimitRequest::SET,
            None => QueueLimitRequest::CLEAR,
        };
        queue_audit(conn, queue, by, action, now)?;
    }
    Ok(n == 1)
}

/// The queues' caps, by name.
pub(crate) fn limits(conn: &Connection) -> Result<Vec<QueueLimit>> {
    conn.prepare_cached(
        "SELECT queue, concurrency, operator, reason, set_at FROM errand_queue_limits
         ORDER BY queue",
    )
    .map_err(map_err)?
    .query_map([], |r| {
        Ok(QueueLimit {
            queue: name_col(r, 0)?,
            concurrency: u32_col(r, "concurrency")?,
            operator: r.get(2)?,
            reason: r.get(3)?,
            set_at: ts_col(r, 4)?,
        })
    })
    .map_err(map_err)?
    .collect::<rusqlite::Result<Vec<_>>>()
    .map_err(map_err)
}
