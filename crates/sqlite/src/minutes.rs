//! The per-minute counts behind the dashboard's charts.

use errand_core::{Error, MinuteCount, MinuteQuery, MinuteRow, Result, check_minutes};
use rusqlite::{Connection, named_params};

use crate::conn::map_err;

/// A counter adds to the stored value (saturating at the largest integer
/// SQLite keeps, where plain addition would turn the column into a
/// floating-point number); a gauge keeps the larger.
const ADD_COUNTER: &str = "INSERT INTO errand_minutes (queue, minute, series, value)
     VALUES (:queue, :minute, :series, :value)
     ON CONFLICT (queue, minute, series) DO UPDATE SET value =
         CASE WHEN value > 9223372036854775807 - excluded.value THEN 9223372036854775807
              ELSE value + excluded.value END";
const RAISE_GAUGE: &str = "INSERT INTO errand_minutes (queue, minute, series, value)
     VALUES (:queue, :minute, :series, :value)
     ON CONFLICT (queue, minute, series) DO UPDATE SET value = max(value, excluded.value)";

/// Each minute's values added over the queues, then each slot's minutes
/// added up. `total()` adds in floating point, which cannot overflow (an
/// integer `sum()` fails past `i64::MAX`); the counts read back exactly
/// below 2^53.
const SLOTS: &str = "SELECT :from + ((minute - :from) / :slot) * :slot AS slot, series,
            total(minute_sum), max(minute_sum), max(minute_max)
     FROM (SELECT minute, series, total(value) AS minute_sum, max(value) AS minute_max
           FROM errand_minutes WHERE __QUEUE__ minute >= :from AND minute < :until
           GROUP BY minute, series)
     GROUP BY slot, series ORDER BY slot, series";

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

/// A floating-point total as a count, saturating at the largest value a
/// store keeps (`i64::MAX`, as the PostgreSQL store answers); negative or
/// not a number reads as zero (Rust's float-to-integer conversion
/// saturates and maps NaN to zero).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn count_of(total: f64) -> u64 {
    (total as u64).min(i64::MAX.unsigned_abs())
}

/// The slots of a window, added over the queue or every queue. One queue
/// is read by its primary key, every queue by the minute index.
pub(crate) fn read(conn: &Connection, q: &MinuteQuery) -> Result<Vec<MinuteRow>> {
    if q.slot < 1 {
        return Err(Error::invalid("a chart slot must be at least one minute"));
    }
    let (sql, queue) = match &q.queue {
        Some(queue) => (
            SLOTS.replace("__QUEUE__", "queue = :queue AND"),
            Some(queue.as_str()),
        ),
        None => (SLOTS.replace("__QUEUE__", ""), None),
    };
    let mut stmt = conn.prepare_cached(&sql).map_err(map_err)?;
    let map = |r: &rusqlite::Row<'_>| {
        Ok(MinuteRow {
            minute: r.get(0)?,
            series: r.get(1)?,
            sum: count_of(r.get(2)?),
            peak_sum: count_of(r.get(3)?),
            max: u64::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
        })
    };
    let rows = match queue {
        Some(queue) => stmt.query_map(
            named_params! {":from": q.from, ":until": q.until, ":slot": q.slot, ":queue": queue},
            map,
        ),
        None => stmt.query_map(
            named_params! {":from": q.from, ":until": q.until, ":slot": q.slot},
            map,
        ),
    }
    .map_err(map_err)?;
    rows.map(|r| r.map_err(map_err)).collect()
}
