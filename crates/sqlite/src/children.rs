//! Children added at run time: a step's fenced completion, the insert of
//! the jobs it adds, and their edges from the step's waiting dependents,
//! in one write operation (the rules are in `crates/core/src/children.rs`).
//!
//! The order inside it: the completion first (a lost lease ends it before
//! anything is written); then the children, through the enqueue of linked
//! jobs (a child that depends on the step finds it done and its edge met);
//! then the step's waiting dependents each get an edge to each child; and
//! last the release of the step's dependents, which lowers each by its
//! edge to the step alone, so they stay blocked until the children end.
//! The writer runs the operation under a savepoint of its own: an error
//! anywhere rolls all of it back.

use std::collections::HashMap;

use errand_core::{
    ChildrenAdded, Error, Job, JobId, JobState, Lease, NewJob, Payload, Result, check_outside,
    child_exists, outside_dependencies,
};
use rusqlite::{Connection, named_params};

use crate::conn::{Now, json_list, map_err};
use crate::release::{Release, release_dependents};
use crate::rows::job_from_row;

const STEP_DEPENDENTS: &str = include_str!("../queries/step_dependents.sql");
const CHILD_EDGES: &str = include_str!("../queries/child_edges.sql");
const CHILD_COUNTS: &str = include_str!("../queries/child_counts.sql");
const JOBS_BY_ID: &str = include_str!("../queries/jobs_by_id.sql");
const DEPENDENCY_STATES: &str = include_str!("../queries/dependency_states.sql");
const CHILD_MARKS: &str = include_str!("../queries/child_marks.sql");

/// Completes the step under `lease` and adds `children` (checked by
/// [`errand_core::check_children`]) on the writer's connection.
pub(crate) fn complete_adding(
    conn: &Connection,
    lease: &Lease,
    output: Option<&Payload>,
    mut children: Vec<NewJob>,
    now: Now,
) -> Result<ChildrenAdded> {
    let job = crate::settle::fenced_complete(conn, lease, output, now)?;
    errand_core::adopt(&mut children, &job.id, job.workflow.as_ref())?;
    check_outside_states(conn, &job.id, &children)?;
    let inserted = crate::insert::insert_many(conn, &children, now.at)?;
    if let Some(old) = inserted.iter().find(|i| !i.created) {
        return Err(child_exists(&old.job.id));
    }
    let ids: Vec<&str> = inserted.iter().map(|i| i.job.id.as_str()).collect();
    let kids = json_list(&ids)?;
    let waiting = step_dependents(conn, &job.id)?;
    if !waiting.is_empty() {
        let dependents = json_list(&waiting.iter().map(String::as_str).collect::<Vec<_>>())?;
        let n = i64::try_from(ids.len()).unwrap_or(i64::MAX);
        conn.prepare_cached(CHILD_EDGES)
            .and_then(|mut s| {
                s.execute(named_params! {":dependents": dependents, ":children": kids})
            })
            .map_err(map_err)?;
        conn.prepare_cached(CHILD_COUNTS)
            .and_then(|mut s| {
                s.execute(named_params! {
                    ":dependents": dependents, ":n": n, ":now": now.at.as_millis()
                })
            })
            .map_err(map_err)?;
    }
    conn.prepare_cached(CHILD_MARKS)
        .and_then(|mut s| {
            s.execute(named_params! {
                ":children": kids, ":step": job.id.as_str(), ":linked": !waiting.is_empty()
            })
        })
        .map_err(map_err)?;
    release_dependents(conn, &[job.id.as_str()], Release::Done, now.at)?;
    let children = stored_in_order(conn, &kids, &ids)?;
    Ok(ChildrenAdded {
        job,
        children,
        dependents: waiting.len() as u64,
    })
}

/// The dependents of `step` that still wait for it.
fn step_dependents(conn: &Connection, step: &JobId) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached(STEP_DEPENDENTS).map_err(map_err)?;
    let rows = stmt
        .query_map(named_params! {":step": step.as_str()}, |r| r.get(0))
        .map_err(map_err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(map_err)
}

/// The children as stored now, in the order given.
fn stored_in_order(conn: &Connection, list: &str, ids: &[&str]) -> Result<Vec<Job>> {
    let mut stmt = conn.prepare_cached(JOBS_BY_ID).map_err(map_err)?;
    let mut found: HashMap<String, Job> = stmt
        .query_map(named_params! {":ids": list}, job_from_row)
        .map_err(map_err)?
        .map(|r| r.map(|j| (j.id.to_string(), j)))
        .collect::<rusqlite::Result<_>>()
        .map_err(map_err)?;
    ids.iter()
        .map(|id| {
            found
                .remove(*id)
                .ok_or_else(|| Error::storage(format!("child {id} was not found after its insert")))
        })
        .collect()
}

/// Refuses a child's dependency on a stored job that is blocked.
fn check_outside_states(conn: &Connection, step: &JobId, children: &[NewJob]) -> Result<()> {
    let outside = outside_dependencies(step, children);
    if outside.is_empty() {
        return Ok(());
    }
    let list = json_list(&outside.iter().map(JobId::as_str).collect::<Vec<_>>())?;
    let mut stmt = conn.prepare_cached(DEPENDENCY_STATES).map_err(map_err)?;
    let rows = stmt
        .query_map(named_params! {":ids": list}, |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
        })
        .map_err(map_err)?;
    let mut states = Vec::with_capacity(outside.len());
    for row in rows {
        let (id, state) = row.map_err(map_err)?;
        states.push((JobId::new(id)?, state.parse::<JobState>()?));
    }
    check_outside(states.iter().map(|(id, s)| (id, *s)))
}
