//! Batches on SQLite: jobs join an open batch in the write transaction
//! that inserts them, and a seal (seal.rs) lists the batch's jobs and
//! inserts its callbacks in its own; the single writer runs them one after
//! another.

use std::collections::BTreeMap;

use errand_core::{Batch, BatchId, Error, JobId, JobState, NewJob, Result, Timestamp};
use rusqlite::{Connection, OptionalExtension, named_params};

use crate::conn::map_err;
use crate::rows::{opt_ts_col, ts_col};

pub(crate) const OPEN: &str = include_str!("../queries/batch_open.sql");
const ROW: &str = include_str!("../queries/batch_row.sql");
const COUNTS: &str = include_str!("../queries/batch_counts.sql");

/// A batch row: the batch, with its job count (no counts by state).
pub(crate) fn row(conn: &Connection, id: &BatchId) -> Result<Option<Batch>> {
    conn.prepare_cached(ROW)
        .map_err(map_err)?
        .query_row(named_params! {":id": id.as_str()}, |r| {
            let job = |i: usize| -> rusqlite::Result<Option<JobId>> {
                Ok(r.get::<_, Option<String>>(i)?
                    .and_then(|s| JobId::new(s).ok()))
            };
            Ok(Batch {
                id: id.clone(),
                created_at: ts_col(r, 1)?,
                sealed_at: opt_ts_col(r, 2)?,
                on_success: job(3)?,
                on_finish: job(4)?,
                total: u64::try_from(r.get::<_, i64>(5)?).unwrap_or(0),
                states: Vec::new(),
            })
        })
        .optional()
        .map_err(map_err)
}

/// Opens (or finds) the batch of each job that names one, refusing a
/// sealed batch or one the jobs would take past its size. The caller
/// inserts the jobs next, in the same transaction.
pub(crate) fn join(conn: &Connection, jobs: &[NewJob], now: Timestamp) -> Result<()> {
    let mut adding: BTreeMap<&BatchId, usize> = BTreeMap::new();
    for job in jobs {
        if let Some(b) = &job.batch {
            *adding.entry(b).or_default() += 1;
        }
    }
    for (batch, n) in adding {
        conn.prepare_cached(OPEN)
            .map_err(map_err)?
            .execute(named_params! {":id": batch.as_str(), ":now": now.as_millis()})
            .map_err(map_err)?;
        let held = row(conn, batch)?.ok_or_else(|| {
            Error::storage(format!("batch {batch} vanished while jobs joined it"))
        })?;
        errand_core::check_open(batch, held.sealed_at)?;
        errand_core::check_batch_size(batch, held.total, n)?;
    }
    Ok(())
}

/// A batch with its counts by state.
pub(crate) fn batch(conn: &Connection, id: &BatchId) -> Result<Batch> {
    let mut batch = row(conn, id)?.ok_or_else(|| Error::NoSuchBatch(id.to_string()))?;
    let mut stmt = conn.prepare_cached(COUNTS).map_err(map_err)?;
    let rows = stmt
        .query_map(named_params! {":id": id.as_str()}, |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .map_err(map_err)?;
    for r in rows {
        let (state, n) = r.map_err(map_err)?;
        batch.states.push(errand_core::StateCount {
            state: state.parse::<JobState>()?,
            count: u64::try_from(n).unwrap_or(0),
        });
    }
    batch.states.sort_by_key(|c| c.state as u8);
    Ok(batch)
}
