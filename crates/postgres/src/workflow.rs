//! Workflows and batches as wholes: a workflow's steps counted by state,
//! the dependency edges among its steps, and the seal of a batch, which
//! enqueues the batch's callbacks (the batch's row, which every job joining
//! the batch locks, is read and written in batch.rs).

use errand_core::{Batch, BatchSeal, JobId, JobState, Result, WorkflowId};
use time::OffsetDateTime;

use crate::batch::{batch, open_locked};
use crate::conn::{Conn, query};
use crate::error::map_err;
use crate::insert::insert_linked;
use crate::queries::Queries;
use crate::rows::{bad_row, col};

/// How many steps of `workflow` are in each state.
pub(crate) async fn workflow_counts<C: Conn>(
    client: &C,
    q: &Queries,
    workflow: &WorkflowId,
) -> Result<Vec<(JobState, u64)>> {
    let mut counts = Vec::new();
    for row in query(client, &q.workflow_counts, &[&workflow.as_str()]).await? {
        let state: &str = col(&row, 0)?;
        let n: i64 = col(&row, 1)?;
        counts.push((
            state.parse::<JobState>().map_err(bad_row)?,
            u64::try_from(n).unwrap_or(0),
        ));
    }
    Ok(counts)
}

/// The first `first` dependency edges of each job in `ids`, each with how
/// many its job has.
pub(crate) async fn dependency_edges<C: Conn>(
    client: &C,
    q: &Queries,
    ids: &[JobId],
    first: u32,
) -> Result<Vec<errand_core::StepEdge>> {
    let ids: Vec<&str> = ids.iter().map(JobId::as_str).collect();
    let first = i64::from(first);
    let mut edges = Vec::new();
    for row in query(client, &q.dependency_edges, &[&ids, &first]).await? {
        edges.push(errand_core::StepEdge {
            job: JobId::new(col::<String>(&row, 0)?).map_err(bad_row)?,
            depends_on: JobId::new(col::<String>(&row, 1)?).map_err(bad_row)?,
            of: u32::try_from(col::<i64>(&row, 2)?).unwrap_or(u32::MAX),
        });
    }
    Ok(edges)
}

/// Seals a batch and inserts its callbacks, in the transaction `client`
/// holds.
pub(crate) async fn seal<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    seal: &BatchSeal,
) -> Result<Batch> {
    let current = open_locked(client, q, now, &seal.batch).await?;
    if current.sealed_at.is_none() {
        let mut members = Vec::new();
        for r in query(client, &q.batch_members, &[&seal.batch.as_str()]).await? {
            members.push(JobId::new(r.try_get::<_, String>(0).map_err(map_err)?)?);
        }
        let callbacks = seal.callbacks(&members)?;
        if !callbacks.jobs.is_empty() {
            errand_core::check_callbacks_created(
                &insert_linked(client, q, now, &callbacks.jobs).await?,
            )?;
        }
        query(
            client,
            &q.batch_seal,
            &[
                &seal.batch.as_str(),
                &now,
                &callbacks.on_success.as_ref().map(JobId::as_str),
                &callbacks.on_finish.as_ref().map(JobId::as_str),
            ],
        )
        .await?;
    }
    batch(client, q, &seal.batch).await
}
