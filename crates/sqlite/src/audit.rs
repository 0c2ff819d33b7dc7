//! The audit log: the entry an operator's change writes in the transaction
//! that makes it.

use errand_core::{JobId, Name, Result, Timestamp};
use rusqlite::{Connection, named_params};

use crate::conn::map_err;

const AUDIT: &str = include_str!("../queries/audit.sql");

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
