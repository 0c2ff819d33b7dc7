//! The per-minute counts behind the dashboard's charts.

use errand_core::{Error, MinuteCount, MinuteQuery, MinuteRow, Name, Result, check_minutes};

use crate::map_err;
use crate::queue::{Conn, Queries, query};

/// Adds the rows in one statement: counters add to the stored values,
/// gauges keep the larger. Rows are taken in key order, so two workers
/// adding to the same minutes lock them in the same order.
pub(crate) async fn record<C: Conn>(client: &C, q: &Queries, rows: &[MinuteCount]) -> Result<()> {
    check_minutes(rows)?;
    if rows.is_empty() {
        return Ok(());
    }
    let mut queues = Vec::with_capacity(rows.len());
    let mut minutes = Vec::with_capacity(rows.len());
    let mut series = Vec::with_capacity(rows.len());
    let mut values = Vec::with_capacity(rows.len());
    let mut gauges = Vec::with_capacity(rows.len());
    for r in rows {
        queues.push(r.queue.as_str());
        minutes.push(r.minute);
        series.push(r.series.to_string());
        values.push(i64::try_from(r.value).map_err(|_| {
            Error::invalid(format!("a per-minute count is too large: {}", r.value))
        })?);
        gauges.push(r.series.is_gauge());
    }
    let s = &q.schema;
    let sql = format!(
        "WITH input AS (
             SELECT queue, minute, series, value, gauge
             FROM unnest($1::text[], $2::bigint[], $3::text[], $4::bigint[], $5::bool[])
                  AS t(queue, minute, series, value, gauge)),
         counters AS (
             INSERT INTO {s}.errand_minutes AS m (queue, minute, series, value)
             SELECT queue, minute, series, sum(value) FROM input WHERE NOT gauge
             GROUP BY queue, minute, series ORDER BY queue, minute, series
             ON CONFLICT (queue, minute, series) DO UPDATE SET value = m.value + excluded.value)
         INSERT INTO {s}.errand_minutes AS m (queue, minute, series, value)
         SELECT queue, minute, series, max(value) FROM input WHERE gauge
         GROUP BY queue, minute, series ORDER BY queue, minute, series
         ON CONFLICT (queue, minute, series) DO UPDATE SET value = greatest(m.value, excluded.value)"
    );
    query(
        client,
        &sql,
        &[&queues, &minutes, &series, &values, &gauges],
    )
    .await
    .map(drop)
}

/// Deletes the minutes before `before`.
pub(crate) async fn prune<C: Conn>(client: &C, q: &Queries, before: i64) -> Result<u64> {
    let sql = format!(
        "WITH gone AS (DELETE FROM {}.errand_minutes WHERE minute < $1 RETURNING 1)
         SELECT count(*) AS n FROM gone",
        q.schema
    );
    let rows = query(client, &sql, &[&before]).await?;
    let n: i64 = match rows.first() {
        Some(r) => r.try_get("n").map_err(map_err)?,
        None => 0,
    };
    Ok(u64::try_from(n).unwrap_or(0))
}

/// The minutes of a window, added over the queue or every queue.
pub(crate) async fn read<C: Conn>(
    client: &C,
    q: &Queries,
    m: &MinuteQuery,
) -> Result<Vec<MinuteRow>> {
    let sql = format!(
        "SELECT minute, series::text AS series, sum(value)::bigint AS sum, max(value) AS max
         FROM {}.errand_minutes
         WHERE minute >= $1 AND minute < $2 AND ($3::text IS NULL OR queue = $3::text)
         GROUP BY minute, series ORDER BY minute, series",
        q.schema
    );
    let queue = m.queue.as_ref().map(Name::as_str);
    query(client, &sql, &[&m.from, &m.until, &queue])
        .await?
        .iter()
        .map(|r| {
            let sum: i64 = r.try_get("sum").map_err(map_err)?;
            let max: i64 = r.try_get("max").map_err(map_err)?;
            Ok(MinuteRow {
                minute: r.try_get("minute").map_err(map_err)?,
                series: r.try_get("series").map_err(map_err)?,
                sum: u64::try_from(sum).unwrap_or(0),
                max: u64::try_from(max).unwrap_or(0),
            })
        })
        .collect()
}
