//! The audit log: the entry an operator's change writes in the
//! transaction that makes it, and the log as an operator reads it.

use errand_core::{AuditEntry, AuditFilter, AuditStamp, JobId, Name, Result};
use time::OffsetDateTime;

use crate::conn::{Conn, query};
use crate::error::map_err;
use crate::queries::Queries;
use crate::rows::from_odt;

/// One audit entry (`audit.sql`).
pub(crate) struct Entry<'a> {
    /// The job acted on; none for a queue's pause and resume.
    pub(crate) job: Option<&'a str>,
    pub(crate) queue: &'a str,
    pub(crate) action: &'a str,
    pub(crate) operator: &'a str,
    pub(crate) reason: Option<&'a str>,
    /// For a copy: the new job.
    pub(crate) copy: Option<&'a str>,
    /// For a schedule's action: the schedule.
    pub(crate) schedule: Option<&'a str>,
}

pub(crate) async fn audit<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    e: Entry<'_>,
) -> Result<()> {
    query(
        client,
        &q.audit,
        &[
            &now,
            &e.job,
            &e.queue,
            &e.action,
            &e.operator,
            &e.reason,
            &e.copy,
            &e.schedule,
        ],
    )
    .await
    .map(drop)
}

pub(crate) async fn queue_audit<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    queue: &Name,
    by: &AuditStamp,
    action: &str,
) -> Result<()> {
    let entry = Entry {
        job: None,
        queue: queue.as_str(),
        action,
        operator: &by.operator,
        reason: by.reason.as_deref(),
        copy: None,
        schedule: None,
    };
    audit(client, q, now, entry).await
}

/// Audit entries, newest first.
pub(crate) async fn audit_log<C: Conn>(
    client: &C,
    q: &Queries,
    f: &AuditFilter,
) -> Result<Vec<AuditEntry>> {
    let sql = format!(
        "SELECT seq, at, action, job_id, queue, operator, reason, copy_id, schedule
         FROM {}.errand_audit
         WHERE ($1::text IS NULL OR job_id = $1::text OR copy_id = $1::text) AND ($2::text IS NULL OR queue = $2::text)
           AND ($3::bigint IS NULL OR seq < $3) AND ($5::text IS NULL OR schedule = $5::text)
         ORDER BY seq DESC LIMIT $4",
        q.schema
    );
    let before = f.before.map(|b| i64::try_from(b).unwrap_or(i64::MAX));
    let job = f.job.as_ref().map(JobId::as_str);
    let queue = f.queue.as_ref().map(Name::as_str);
    let limit = i64::from(f.effective_limit());
    let schedule = f.schedule.as_ref().map(Name::as_str);
    query(client, &sql, &[&job, &queue, &before, &limit, &schedule])
        .await?
        .iter()
        .map(|r| {
            Ok(AuditEntry {
                seq: u64::try_from(r.try_get::<_, i64>("seq").map_err(map_err)?).unwrap_or(0),
                at: from_odt(r.try_get("at").map_err(map_err)?),
                action: r.try_get("action").map_err(map_err)?,
                job_id: r
                    .try_get::<_, Option<String>>("job_id")
                    .map_err(map_err)?
                    .map(JobId::new)
                    .transpose()?,
                copy_id: r
                    .try_get::<_, Option<String>>("copy_id")
                    .map_err(map_err)?
                    .map(JobId::new)
                    .transpose()?,
                queue: r
                    .try_get::<_, Option<String>>("queue")
                    .map_err(map_err)?
                    .map(|s| Name::parse("queue", s))
                    .transpose()?,
                schedule: r
                    .try_get::<_, Option<String>>("schedule")
                    .map_err(map_err)?
                    .map(|s| Name::parse("schedule", s))
                    .transpose()?,
                operator: r.try_get("operator").map_err(map_err)?,
                reason: r.try_get("reason").map_err(map_err)?,
            })
        })
        .collect()
}
