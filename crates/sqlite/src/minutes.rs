//! The per-minute counts behind the dashboard's charts.

use errand_core::{Error, MinuteCount, MinuteQuery, MinuteRow, Result, check_minutes};
use rusqlite::{Connection, named_params};

use crate::map_err;

/// A counter adds to the stored value; a gauge keeps the larger.
const ADD_COUNTER: &str = "INSERT INTO errand_minutes (queue, minute, series, value)
     VALUES (:queue, :minute, :series, :value)
     ON CONFLICT (queue, minute, series) DO UPDATE SET value = value + excluded.value";
const RAISE_GAUGE: &str = "INSERT INTO errand_minutes (queue, minute, series, value)
     VALUES (:queue, :minute, :series, :value)
     ON CONFLICT (queue, minute, series) DO UPDATE SET value = max(value, excluded.value)";

/// Adds the rows (on the writer, in its transaction).
pub(crate) fn record(conn: &Connection, rows: &[MinuteCount]) -> Result<()> {
    check_minutes(rows)?;
    for r in rows {
        let sql = if r.series.is_gauge() {
            RAISE_GAUGE
        } else {
            ADD_COUNTER
        };
        let value = i64::try_from(r.value)
            .map_err(|_| Error::invalid(format!("a per-minute count is too large: {}", r.value)))?;
        conn.prepare_cached(sql)
            .map_err(map_err)?
            .execute(named_params! {
                ":queue": r.queue.as_str(),
                ":minute": r.minute,
                ":series": r.series.to_string(),
                ":value": value,
            })
            .map_err(map_err)?;
    }
    Ok(())
}

/// Deletes the minutes before `before`.
pub(crate) fn prune(conn: &Connection, before: i64) -> Result<u64> {
    let n = conn
        .prepare_cached("DELETE FROM errand_minutes WHERE minute < :before")
        .map_err(map_err)?
        .execute(named_params! {":before": before})
        .map_err(map_err)?;
    Ok(u64::try_from(n).unwrap_or(u64::MAX))
}

/// The minutes of a window, added over the queue or every queue.
pub(crate) fn read(conn: &Connection, q: &MinuteQuery) -> Result<Vec<MinuteRow>> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT minute, series, sum(value), max(value) FROM errand_minutes
             WHERE minute >= :from AND minute < :until
               AND (:queue IS NULL OR queue = :queue)
             GROUP BY minute, series ORDER BY minute, series",
        )
        .map_err(map_err)?;
    let rows = stmt
        .query_map(
            named_params! {
                ":from": q.from,
                ":until": q.until,
                ":queue": q.queue.as_ref().map(errand_core::Name::as_str),
            },
            |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, i64>(2)?,
                    r.get::<_, i64>(3)?,
                ))
            },
        )
        .map_err(map_err)?;
    rows.map(|r| {
        let (minute, series, sum, max) = r.map_err(map_err)?;
        Ok(MinuteRow {
            minute,
            series,
            // The schema keeps values non-negative; a sum past i64 is
            // refused by SQLite itself (integer overflow).
            sum: u64::try_from(sum).unwrap_or(0),
            max: u64::try_from(max).unwrap_or(0),
        })
    })
    .collect()
}
