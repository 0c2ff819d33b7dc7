//! Batches on PostgreSQL: jobs joining a batch and its seal each lock the
//! batch's row for the rest of their transaction, so a job joins before the
//! seal lists the batch's jobs, or is refused after it. The seal itself,
//! which enqueues the batch's callbacks, is in workflow.rs.

use std::collections::BTreeMap;

use errand_core::{Batch, BatchId, Error, JobId, JobState, NewJob, Result};
use time::OffsetDateTime;

use crate::conn::{Conn, query, query_opt, require_transaction};
use crate::error::map_err;
use crate::queries::Queries;
use crate::rows::{col, from_odt};

/// The batch `id` with its job count (no counts by state), if it exists.
async fn row<C: Conn>(client: &C, q: &Queries, id: &BatchId) -> Result<Option<Batch>> {
    let Some(r) = query_opt(client, &q.batch_row, &[&id.as_str()]).await? else {
        return Ok(None);
    };
    let job = |i: usize| -> Result<Option<JobId>> {
        Ok(r.try_get::<_, Option<String>>(i)
            .map_err(map_err)?
            .and_then(|s| JobId::new(s).ok()))
    };
    Ok(Some(Batch {
        id: id.clone(),
        created_at: from_odt(r.try_get(0).map_err(map_err)?),
        sealed_at: r
            .try_get::<_, Option<OffsetDateTime>>(1)
            .map_err(map_err)?
            .map(from_odt),
        on_success: job(2)?,
        on_finish: job(3)?,
        total: u64::try_from(r.try_get::<_, i64>(4).map_err(map_err)?).unwrap_or(0),
        states: Vec::new(),
    }))
}

/// Opens (or finds) and locks the batch `id`, and reads it.
pub(crate) async fn open_locked<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    id: &BatchId,
) -> Result<Batch> {
    query(client, &q.batch_open, &[&id.as_str(), &now]).await?;
    query(client, &q.batch_lock, &[&id.as_str()]).await?;
    row(client, q, id)
        .await?
        .ok_or_else(|| Error::storage(format!("batch {id} vanished while it was locked")))
}

/// Opens and locks the batch of each job that names one, refusing a
/// sealed batch or one the jobs would take past its size. The caller
/// inserts the jobs next, in the same transaction, which `client` must
/// hold.
pub(crate) async fn join<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    jobs: &[NewJob],
) -> Result<()> {
    let mut adding: BTreeMap<&BatchId, usize> = BTreeMap::new();
    for job in jobs {
        if let Some(b) = &job.batch {
            *adding.entry(b).or_default() += 1;
        }
    }
    if adding.is_empty() {
        return Ok(());
    }
    require_transaction(client, "a job joining a batch").await?;
    for (batch, n) in adding {
        let held = open_locked(client, q, now, batch).await?;
        errand_core::check_open(batch, held.sealed_at)?;
        errand_core::check_batch_size(batch, held.total, n)?;
    }
    Ok(())
}

/// A batch with its counts by state.
pub(crate) async fn batch<C: Conn>(client: &C, q: &Queries, id: &BatchId) -> Result<Batch> {
    let mut batch = row(client, q, id)
        .await?
        .ok_or_else(|| Error::NoSuchBatch(id.to_string()))?;
    for r in query(client, &q.batch_counts, &[&id.as_str()]).await? {
        let state: &str = col(&r, 0)?;
        let n: i64 = col(&r, 1)?;
        batch.states.push(errand_core::StateCount {
            state: state.parse::<JobState>()?,
            count: u64::try_from(n).unwrap_or(0),
        });
    }
    batch.states.sort_by_key(|c| c.state as u8);
    Ok(batch)
}
