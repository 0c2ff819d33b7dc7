//! Children added at run time: a step's fenced completion, the insert of
//! the jobs it adds, and their edges from the step's waiting dependents,
//! in one transaction (the rules are in `crates/core/src/children.rs`).
//!
//! The order inside it: the completion first (a lost lease ends it before
//! anything is written); then the children, through the enqueue of linked
//! jobs (a child that depends on the step finds it done and its edge met);
//! then the step's waiting dependents, locked in id order and given an
//! edge to each child; and last the release of the step's dependents,
//! which lowers each by its edge to the step alone: they stay blocked
//! until the children end.

use errand_core::{
    ChildrenAdded, Error, JobId, JobState, Lease, NewJob, Payload, Result, check_outside,
    child_exists, outside_dependencies,
};
use time::OffsetDateTime;

use crate::conn::{Conn, query};
use crate::insert::insert_linked;
use crate::queries::Queries;
use crate::rows::{bad_row, col, job_from_row};
use crate::settle::{fenced, release_with};

/// Completes the step under `lease` and adds `children` (checked by
/// [`errand_core::check_children`]) inside the transaction `conn` holds;
/// an error leaves the caller to roll it back.
pub(crate) async fn complete_adding<C: Conn>(
    conn: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    lease: &Lease,
    output: Option<&Payload>,
    mut children: Vec<NewJob>,
) -> Result<ChildrenAdded> {
    let output = output.map(Payload::as_str);
    // `true`: this transaction releases the step's dependents (below).
    let job = fenced(conn, &q.complete, now, lease, &[&output, &true]).await?;
    errand_core::adopt(&mut children, &job.id, job.workflow.as_ref())?;
    check_outside_states(conn, q, &job.id, &children).await?;
    let inserted = insert_linked(conn, q, now, &children).await?;
    if let Some(old) = inserted.iter().find(|i| !i.created) {
        return Err(child_exists(&old.job.id));
    }
    let ids: Vec<&str> = inserted.iter().map(|i| i.job.id.as_str()).collect();
    let waiting: Vec<String> = query(conn, &q.lock_step_dependents, &[&job.id.as_str()])
        .await?
        .iter()
        .map(|r| col(r, 0))
        .collect::<Result<_>>()?;
    let step = job.id.as_str();
    let rows = query(conn, &q.child_edges, &[&now, &waiting, &ids, &step]).await?;
    let dependents: i64 = match rows.first() {
        Some(r) => col(r, 0)?,
        None => return Err(bad_row("child_edges.sql returned no row")),
    };
    let dependents = u64::try_from(dependents).unwrap_or(0);
    release_with(conn, &q.release_done, now, &[job.id.as_str()]).await?;
    // The children as they stand now (marked as added by the step).
    let mut stored: std::collections::HashMap<String, errand_core::Job> =
        query(conn, &q.get_many, &[&ids])
            .await?
            .iter()
            .map(|r| job_from_row(r).map(|j| (j.id.to_string(), j)))
            .collect::<Result<_>>()?;
    let children = ids
        .iter()
        .map(|id| {
            stored
                .remove(*id)
                .ok_or_else(|| Error::storage(format!("child {id} was not found after its insert")))
        })
        .collect::<Result<_>>()?;
    Ok(ChildrenAdded {
        job,
        children,
        dependents,
    })
}

/// Refuses a child's dependency on a stored job that is blocked.
async fn check_outside_states<C: Conn>(
    conn: &C,
    q: &Queries,
    step: &JobId,
    children: &[NewJob],
) -> Result<()> {
    let outside = outside_dependencies(step, children);
    if outside.is_empty() {
        return Ok(());
    }
    let ids: Vec<&str> = outside.iter().map(JobId::as_str).collect();
    let mut states = Vec::with_capacity(ids.len());
    for r in query(conn, &q.job_states, &[&ids]).await? {
        let id: String = col(&r, 0)?;
        let state: &str = col(&r, 1)?;
        states.push((JobId::new(id)?, state.parse::<JobState>()?));
    }
    check_outside(states.iter().map(|(id, s)| (id, *s)))
}
