//! Stored periodic schedules: each change one conditional statement that
//! answers with the row it changed, and its audit entry in the same
//! transaction.

use errand_core::{AuditStamp, Result, ScheduleChange, ScheduleRow, StoredSchedule};
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::audit::{Entry, audit};
use crate::conn::{Conn, Param, query, query_opt};
use crate::error::map_err;
use crate::queries::Queries;
use crate::rows::from_odt;

const COLUMNS: &str = "name, cron, kind, queue, payload, max_attempts, misfire, created_at, \
                       updated_at, active_since, paused_at, paused_by, paused_reason, tz";

fn row(r: &Row) -> Result<ScheduleRow> {
    let ts = |col: &str| -> Result<_> {
        Ok(from_odt(
            r.try_get::<_, OffsetDateTime>(col).map_err(map_err)?,
        ))
    };
    Ok(ScheduleRow {
        name: r.try_get("name").map_err(map_err)?,
        cron: r.try_get("cron").map_err(map_err)?,
        kind: r.try_get("kind").map_err(map_err)?,
        queue: r.try_get("queue").map_err(map_err)?,
        payload: r.try_get("payload").map_err(map_err)?,
        max_attempts: i64::from(r.try_get::<_, i32>("max_attempts").map_err(map_err)?),
        misfire: r.try_get("misfire").map_err(map_err)?,
        created_at: ts("created_at")?,
        updated_at: ts("updated_at")?,
        active_since: ts("active_since")?,
        paused_at: r
            .try_get::<_, Option<OffsetDateTime>>("paused_at")
            .map_err(map_err)?
            .map(from_odt),
        paused_by: r.try_get("paused_by").map_err(map_err)?,
        paused_reason: r.try_get("paused_reason").map_err(map_err)?,
        tz: r.try_get("tz").map_err(map_err)?,
    })
}

/// Applies `change` if its condition holds, with its audit entry.
pub(crate) async fn change(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    change: &ScheduleChange,
    by: &AuditStamp,
) -> Result<Option<StoredSchedule>> {
    let s = &q.schema;
    let name = change.name().as_str();
    let tx = client.transaction().await.map_err(map_err)?;
    let changed = match change {
        ScheduleChange::Add(d) | ScheduleChange::Replace(d) | ScheduleChange::Remove(d) => {
            let sql = match change {
                ScheduleChange::Add(_) => format!(
                    "INSERT INTO {s}.errand_schedules
                       (name, cron, kind, queue, payload, max_attempts, misfire, tz,
                        created_at, updated_at, active_since)
                     SELECT $2, $3, $4, $5, $6, $7, $8, $9, t, t, t
                     FROM (SELECT coalesce($1::timestamptz, now()) AS t) AS now
                     ON CONFLICT (name) DO NOTHING
                     RETURNING {COLUMNS}"
                ),
                ScheduleChange::Replace(_) => format!(
                    "UPDATE {s}.errand_schedules
                     SET cron = $3, kind = $4, queue = $5, payload = $6, max_attempts = $7,
                         misfire = $8, tz = $9, updated_at = coalesce($1::timestamptz, now()),
                         active_since = coalesce($1::timestamptz, now())
                     WHERE name = $2
                     RETURNING {COLUMNS}"
                ),
                // Removed only with the definition its audit entry records
                // (the same parameters without the time).
                _ => format!(
                    "DELETE FROM {s}.errand_schedules
                     WHERE name = $1 AND cron = $2 AND kind = $3 AND queue = $4
                       AND payload = $5 AND max_attempts = $6 AND misfire = $7 AND tz = $8
                     RETURNING {COLUMNS}"
                ),
            };
            let max_attempts = i32::try_from(d.max_attempts).unwrap_or(i32::MAX);
            let (kind, queue, payload) = (d.kind.as_str(), d.queue.as_str(), d.payload.as_str());
            let misfire = d.misfire.to_string();
            let tz = d.tz.name();
            let params: [Param<'_>; 9] = [
                &now,
                &name,
                &d.cron,
                &kind,
                &queue,
                &payload,
                &max_attempts,
                &misfire,
                &tz,
            ];
            let params = if matches!(change, ScheduleChange::Remove(_)) {
                &params[1..]
            } else {
                &params[..]
            };
            query_opt(&tx, &sql, params).await?
        }
        ScheduleChange::Pause(_) => {
            let sql = format!(
                "UPDATE {s}.errand_schedules
                 SET paused_at = coalesce($1::timestamptz, now()), paused_by = $3,
                     paused_reason = $4
                 WHERE name = $2 AND paused_at IS NULL
                 RETURNING {COLUMNS}"
            );
            query_opt(&tx, &sql, &[&now, &name, &by.operator, &by.reason]).await?
        }
        ScheduleChange::Resume(_) => {
            let sql = format!(
                "UPDATE {s}.errand_schedules
                 SET paused_at = NULL, paused_by = NULL, paused_reason = NULL,
                     active_since = coalesce($1::timestamptz, now())
                 WHERE name = $2 AND paused_at IS NOT NULL
                 RETURNING {COLUMNS}"
            );
            query_opt(&tx, &sql, &[&now, &name]).await?
        }
    };
    let Some(changed) = changed else {
        return Ok(None);
    };
    let schedule = row(&changed)?.into_schedule()?;
    let entry = Entry {
        job: None,
        queue: schedule.definition.queue.as_str(),
        action: change.action(),
        operator: &by.operator,
        reason: by.reason.as_deref(),
        copy: None,
        schedule: Some(name),
    };
    audit(&tx, q, now, entry).await?;
    tx.commit().await.map_err(map_err)?;
    Ok(Some(schedule))
}

/// The stored schedules, by name.
pub(crate) async fn list<C: Conn>(client: &C, q: &Queries) -> Result<Vec<StoredSchedule>> {
    let sql = format!(
        "SELECT {COLUMNS} FROM {}.errand_schedules ORDER BY name COLLATE \"C\"",
        q.schema
    );
    query(client, &sql, &[])
        .await?
        .iter()
        .map(|r| row(r)?.into_schedule())
        .collect()
}
