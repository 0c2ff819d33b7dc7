//! The per-minute counts behind the dashboard's charts.

use errand_core::{Error, MinuteCount, MinuteQuery, MinuteRow, Result, check_minutes};

use crate::conn::{Conn, query};
use crate::error::map_err;
use crate::queries::Queries;

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
             SELECT queue, minute, series, least(sum(value), 9223372036854775807)::bigint
             FROM input WHERE NOT gauge
             GROUP BY queue, minute, series ORDER BY queue, minute, series
             ON CONFLICT (queue, minute, series) DO UPDATE SET value =
                 CASE WHEN m.value > 9223372036854775807 - excluded.value THEN 9223372036854775807
                      ELSE m.value + excluded.value END)
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

/// The slots of a window, added over the queue or every queue: each
/// minute's values added over the queues, then each slot's minutes. Sums
/// are `numeric` in PostgreSQL and clamped to `bigint` here. One queue is
/// read by its primary key, every queue by the minute index (two
/// statements, so that neither plan has to serve both).
pub(crate) async fn read<C: Conn>(
    client: &C,
    q: &Queries,
    m: &MinuteQuery,
) -> Result<Vec<MinuteRow>> {
    if m.slot < 1 {
        return Err(Error::invalid("a chart slot must be at least one minute"));
    }
    let clamp = |e: &str| format!("least({e}, 9223372036854775807)::bigint");
    let body = |filter: &str| {
        format!(
            "SELECT $1::bigint + ((minute - $1::bigint) / $3::bigint) * $3::bigint AS slot,
                    series, {sum}, {peak_sum}, max(minute_max) AS max
             FROM (SELECT minute, series::text AS series, sum(value) AS minute_sum,
                          max(value) AS minute_max
                   FROM {schema}.errand_minutes
                   WHERE {filter} minute >= $1::bigint AND minute < $2::bigint
                   GROUP BY minute, series) per_minute
             GROUP BY slot, series ORDER BY slot, series",
            sum = clamp("sum(minute_sum)") + " AS sum",
            peak_sum = clamp("max(minute_sum)") + " AS peak_sum",
            schema = q.schema,
        )
    };
    let rows = match &m.queue {
        Some(queue) => {
            let sql = body("queue = $4::text AND");
            query(client, &sql, &[&m.from, &m.until, &m.slot, &queue.as_str()]).await?
        }
        None => query(client, &body(""), &[&m.from, &m.until, &m.slot]).await?,
    };
    rows.iter()
        .map(|r| {
            let get = |name: &str| -> Result<u64> {
                let v: i64 = r.try_get(name).map_err(map_err)?;
                Ok(u64::try_from(v).unwrap_or(0))
            };
            Ok(MinuteRow {
                minute: r.try_get("slot").map_err(map_err)?,
                series: r.try_get("series").map_err(map_err)?,
                sum: get("sum")?,
                peak_sum: get("peak_sum")?,
                max: get("max")?,
            })
        })
        .collect()
}
