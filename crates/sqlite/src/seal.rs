//! Sealing a batch: in the seal's own write transaction its jobs are
//! listed and its callbacks inserted (the batch itself is in batch.rs).

use errand_core::{Batch, BatchSeal, Error, JobId, Result, Timestamp};
use rusqlite::{Connection, named_params};

use crate::batch::{OPEN, batch, row};
use crate::conn::map_err;
use crate::insert::insert_many;

const MEMBERS: &str = include_str!("../queries/batch_members.sql");
const SEAL: &str = include_str!("../queries/batch_seal.sql");

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
