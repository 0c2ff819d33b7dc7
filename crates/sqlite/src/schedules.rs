//! Stored periodic schedules: each change one conditional statement that
//! answers with the row it changed, and its audit entry in the same write
//! transaction.

use errand_core::{
    AuditStamp, Result, ScheduleChange, ScheduleDefinition, ScheduleRow, StoredSchedule, Timestamp,
};
use rusqlite::{Connection, OptionalExtension, Row, named_params};

use crate::audit::{AuditRow, audit};
use crate::conn::map_err;
use crate::rows::{opt_ts_col, ts_col};

const COLUMNS: &str = "name, cron, kind, queue, payload, max_attempts, misfire, created_at, \
                       updated_at, active_since, paused_at, paused_by, paused_reason, tz";

fn row(r: &Row<'_>) -> rusqlite::Result<ScheduleRow> {
    Ok(ScheduleRow {
        name: r.get(0)?,
        cron: r.get(1)?,
        kind: r.get(2)?,
        queue: r.get(3)?,
        payload: r.get(4)?,
        max_attempts: r.get(5)?,
        misfire: r.get(6)?,
        created_at: ts_col(r, 7)?,
        updated_at: ts_col(r, 8)?,
        active_since: ts_col(r, 9)?,
        paused_at: opt_ts_col(r, 10)?,
        paused_by: r.get(11)?,
        paused_reason: r.get(12)?,
        tz: r.get(13)?,
    })
}

/// Runs one statement naming a definition's fields; its answer row.
fn with_definition(
    conn: &Connection,
    sql: &str,
    d: &ScheduleDefinition,
    now: Timestamp,
) -> Result<Option<ScheduleRow>> {
    conn.prepare_cached(sql)
        .map_err(map_err)?
        .query_row(
            named_params! {
                ":name": d.name.as_str(), ":cron": d.cron, ":kind": d.kind.as_str(),
                ":queue": d.queue.as_str(), ":payload": d.payload.as_str(),
                ":max_attempts": d.max_attempts, ":misfire": d.misfire.to_string(),
                ":tz": d.tz.name(), ":now": now.as_millis(),
            },
            row,
        )
        .optional()
        .map_err(map_err)
}

/// Deletes the schedule only with the definition its audit entry records.
fn remove(conn: &Connection, d: &ScheduleDefinition) -> Result<Option<ScheduleRow>> {
    conn.prepare_cached(&format!(
        "DELETE FROM errand_schedules
         WHERE name = :name AND cron = :cron AND kind = :kind AND queue = :queue
           AND payload = :payload AND max_attempts = :max_attempts
           AND misfire = :misfire AND tz = :tz
         RETURNING {COLUMNS}"
    ))
    .map_err(map_err)?
    .query_row(
        named_params! {
            ":name": d.name.as_str(), ":cron": d.cron, ":kind": d.kind.as_str(),
            ":queue": d.queue.as_str(), ":payload": d.payload.as_str(),
            ":max_attempts": d.max_attempts, ":misfire": d.misfire.to_string(),
            ":tz": d.tz.name(),
        },
        row,
    )
    .optional()
    .map_err(map_err)
}

/// Applies `change` if its condition holds, with its audit entry.
pub(crate) fn change(
    conn: &Connection,
    change: &ScheduleChange,
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Option<StoredSchedule>> {
    let name = change.name().as_str();
    let changed = match change {
        ScheduleChange::Add(d) => with_definition(
            conn,
            &format!(
                "INSERT INTO errand_schedules
                   (name, cron, kind, queue, payload, max_attempts, misfire, tz,
                    created_at, updated_at, active_since)
                 VALUES (:name, :cron, :kind, :queue, :payload, :max_attempts, :misfire, :tz,
                         :now, :now, :now)
                 ON CONFLICT (name) DO NOTHING
                 RETURNING {COLUMNS}"
            ),
            d,
            now,
        )?,
        ScheduleChange::Replace(d) => with_definition(
            conn,
            &format!(
                "UPDATE errand_schedules
                 SET cron = :cron, kind = :kind, queue = :queue, payload = :payload,
                     max_attempts = :max_attempts, misfire = :misfire, tz = :tz,
                     updated_at = :now, active_since = :now
                 WHERE name = :name
                 RETURNING {COLUMNS}"
            ),
            d,
            now,
        )?,
        ScheduleChange::Remove(d) => remove(conn, d)?,
        ScheduleChange::Pause(_) => conn
            .prepare_cached(&format!(
                "UPDATE errand_schedules
                 SET paused_at = :now, paused_by = :operator, paused_reason = :reason
                 WHERE name = :name AND paused_at IS NULL
                 RETURNING {COLUMNS}"
            ))
            .map_err(map_err)?
            .query_row(
                named_params! {
                    ":name": name, ":now": now.as_millis(),
                    ":operator": by.operator, ":reason": by.reason,
                },
                row,
            )
            .optional()
            .map_err(map_err)?,
        ScheduleChange::Resume(_) => conn
            .prepare_cached(&format!(
                "UPDATE errand_schedules
                 SET paused_at = NULL, paused_by = NULL, paused_reason = NULL,
                     active_since = :now
                 WHERE name = :name AND paused_at IS NOT NULL
                 RETURNING {COLUMNS}"
            ))
            .map_err(map_err)?
            .query_row(named_params! {":name": name, ":now": now.as_millis()}, row)
            .optional()
            .map_err(map_err)?,
    };
    let Some(changed) = changed else {
        return Ok(None);
    };
    let schedule = changed.into_schedule()?;
    let entry = AuditRow {
        job: None,
        queue: &schedule.definition.queue,
        action: change.action(),
        operator: &by.operator,
        reason: by.reason.as_deref(),
        copy: None,
        schedule: Some(change.name()),
    };
    audit(conn, &entry, now)?;
    Ok(Some(schedule))
}

/// The stored schedules, by name.
pub(crate) fn list(conn: &Connection) -> Result<Vec<StoredSchedule>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM errand_schedules ORDER BY name"
    ))
    .map_err(map_err)?
    .query_map([], row)
    .map_err(map_err)?
    .map(|r| r.map_err(map_err)?.into_schedule())
    .collect()
}
