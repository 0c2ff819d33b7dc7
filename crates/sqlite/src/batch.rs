//! Batches on SQLite: jobs join an open batch in the write transaction
//! that inserts them, and a seal lists the batch's jobs and inserts its
//! callbacks in its own; the single writer runs them one after another.

use std::collections::BTreeMap;

use errand_core::{Batch, BatchId, BatchSeal, Error, JobId, JobState, NewJob, Result, Timestamp};
use rusqlite::{Connection, OptionalExtension, named_params};

use crate::conn::map_err;
use crate::queue::insert_many;
use crate::rows::{opt_ts_col, ts_col};

const OPEN: &str = include_str!("../queries/batch_open.sql");
const ROW: &str = include_str!("../queries/batch_row.sql");
const MEMBERS: &str = include_str!("../queries/batch_members.sql");
const COUNTS: &str = include_str!("../queries/batch_counts.sql");
const SEAL: &str = include_str!("../queries/batch_seal.sql");

/// A batch row: the batch, with its job count (no counts by state).
fn row(conn: &Connection, id: &BatchId) -> Result<Option<Batch>> {
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

/// Seals a batch and inserts its callbacks (see `JobStore::seal_batch`).
pub(crate) fn seal(conn: &Connection, seal: &BatchSeal, now: Timestamp) -> Result<Batch> {
    conn.prepare_cached(OPEN)
        .map_err(map_err)?
        .execute(named_params! {":id": seal.batch.as_str(), ":now": now.as_millis()})
        .map_err(map_err)?;
    let current = row(conn, &seal.batch)?
        .ok_or_else(|| Error::storage(format!("batch {} vanished while sealed", seal.batch)))?;
    if current.sealed_at.is_none() {
        let mut members = Vec::new();
        {
            let mut stmt = conn.prepare_cached(MEMBERS).map_err(map_err)?;
            let rows = stmt
                .query_map(named_params! {":id": seal.batch.as_str()}, |r| {
                    r.get::<_, String>(0)
                })
                .map_err(map_err)?;
            for id in rows {
                members.push(JobId::new(id.map_err(map_err)?)?);
            }
        }
        let callbacks = seal.callbacks(&members)?;
        if !callbacks.jobs.is_empty() {
            errand_core::check_callbacks_created(&insert_many(conn, &callbacks.jobs, now)?)?;
        }
        conn.prepare_cached(SEAL)
            .map_err(map_err)?
            .execute(named_params! {
                ":id": seal.batch.as_str(),
                ":now": now.as_millis(),
                ":on_success": callbacks.on_success.as_ref().map(JobId::as_str),
                ":on_finish": callbacks.on_finish.as_ref().map(JobId::as_str),
            })
            .map_err(map_err)?;
    }
    batch(conn, &seal.batch)
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
