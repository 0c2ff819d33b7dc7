//! Reads of workflows: how many of a workflow's steps are in each state,
//! and the dependency edges between steps.

use errand_core::{JobId, JobState, Result, WorkflowId};
use rusqlite::{Connection, named_params};

use crate::conn::{json_list, map_err};
use crate::rows::u32_col;

const WORKFLOW_COUNTS: &str = include_str!("../queries/workflow_counts.sql");
const DEPENDENCY_EDGES: &str = include_str!("../queries/dependency_edges.sql");

/// How many steps of `workflow` are in each state.
pub(crate) fn workflow_counts(
    conn: &Connection,
    workflow: &WorkflowId,
) -> Result<Vec<(JobState, u64)>> {
    let mut stmt = conn.prepare_cached(WORKFLOW_COUNTS).map_err(map_err)?;
    let rows = stmt
        .query_map(named_params! {":workflow": workflow.as_str()}, |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .map_err(map_err)?;
    let mut counts = Vec::new();
    for row in rows {
        let (state, n) = row.map_err(map_err)?;
        counts.push((state.parse::<JobState>()?, u64::try_from(n).unwrap_or(0)));
    }
    Ok(counts)
}

/// The dependency edges of the jobs in `ids`.
pub(crate) fn dependency_edges(
    conn: &Connection,
    ids: &[JobId],
    first: u32,
) -> Result<Vec<errand_core::StepEdge>> {
    let list = json_list(&ids.iter().map(JobId::as_str).collect::<Vec<_>>())?;
    let mut stmt = conn.prepare_cached(DEPENDENCY_EDGES).map_err(map_err)?;
    let rows = stmt
        .query_map(named_params! {":ids": list, ":first": first}, |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                u32_col(r, 2)?,
            ))
        })
        .map_err(map_err)?;
    let mut edges = Vec::new();
    for row in rows {
        let (job, dep, total) = row.map_err(map_err)?;
        edges.push(errand_core::StepEdge {
            job: JobId::new(job)?,
            depends_on: JobId::new(dep)?,
            of: total,
        });
    }
    Ok(edges)
}
