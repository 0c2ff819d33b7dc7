//! The audit log: the entries an operator's change writes in the
//! transaction that makes it (one, or one per job of a set-based action),
//! and the log as an operator reads it.

use errand_core::{AuditEntry, AuditFilter, AuditStamp, JobId, Name, Result, Timestamp};
use rusqlite::{Connection, named_params};

use crate::conn::map_err;
use crate::rows::{ts_col, u64_col};

const AUDIT: &str = include_str!("../queries/audit.sql");
const AUDIT_MANY: &str = include_str!("../queries/audit_many.sql");

pub(crate) struct AuditRow<'a> {
    pub(crate) job: Option<&'a JobId>,
    pub(crate) queue: &'a Name,
    pub(crate) action: &'a str,
    pub(crate) operator: &'a str,
    pub(crate) reason: Option<&'a str>,
    /// For a `copy`: the new job.
    pub(crate) copy: Option<&'a JobId>,
    /// For a schedule's action: the schedule.
    pub(crate) schedule: Option<&'a Name>,
}

pub(crate) fn audit(conn: &Connection, row: &AuditRow<'_>, now: Timestamp) -> Result<()> {
    conn.prepare_cached(AUDIT)
        .map_err(map_err)?
        .execute(named_params! {
            ":id": row.job.map(JobId::as_str), ":queue": row.queue.as_str(),
            ":action": row.action, ":operator": row.operator,
            ":reason": row.reason, ":now": now.as_millis(),
            ":copy": row.copy.map(JobId::as_str),
            ":schedule": row.schedule.map(Name::as_str),
        })
        .map_err(map_err)?;
    Ok(())
}

/// One audit entry per job in `ids` (a JSON array), in its order; `copies`
/// names the new job beside each original of a copy.
pub(crate) fn audit_all(
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
