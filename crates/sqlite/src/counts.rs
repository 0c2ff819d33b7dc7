//! Exact counts past the statistics' cap: every queue's jobs per state
//! counted whole (`counts.sql`, on a reader) and stored in `errand_counts`
//! by the writer, and read back by the statistics.

use errand_core::{ExactCount, Result, Timestamp};
use rusqlite::{Connection, named_params};

use crate::conn::map_err;
use crate::rows::{ts_col, u64_col};

const COUNTS: &str = include_str!("../queries/counts.sql");

/// Counts every queue's jobs per state at `now`.
pub(crate) fn count(conn: &Connection, now: Timestamp) -> Result<Vec<ExactCount>> {
    conn.prepare_cached(COUNTS)
        .map_err(map_err)?
        .query_map(named_params! {":now": now.as_millis()}, |r| {
            Ok(ExactCount {
                queue: r.get(0)?,
                state: r.get(1)?,
                n: u64_col(r, 2)?,
                counted_at: now,
            })
        })
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)
}

/// Stores `counts` in place of the last ones (in the writer's
/// transaction).
pub(crate) fn store(conn: &Connection, counts: &[ExactCount]) -> Result<()> {
    conn.execute("DELETE FROM errand_counts", [])
        .map_err(map_err)?;
    let mut insert = conn
        .prepare_cached(
            "INSERT INTO errand_counts (queue, state, n, counted_at)
             VALUES (:queue, :state, :n, :at)",
        )
        .map_err(map_err)?;
    for c in counts {
        insert
            .execute(named_params! {
                ":queue": c.queue, ":state": c.state,
                ":n": i64::try_from(c.n).unwrap_or(i64::MAX),
                ":at": c.counted_at.as_millis(),
            })
            .map_err(map_err)?;
    }
    Ok(())
}

/// The stored counts.
pub(crate) fn stored(conn: &Connection) -> Result<Vec<ExactCount>> {
    conn.prepare_cached("SELECT queue, state, n, counted_at FROM errand_counts")
        .map_err(map_err)?
        .query_map([], |r| {
            Ok(ExactCount {
                queue: r.get(0)?,
                state: r.get(1)?,
                n: u64_col(r, 2)?,
                counted_at: ts_col(r, 3)?,
            })
        })
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)
}
