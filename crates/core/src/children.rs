//! Children added at run time: jobs a running step adds to its own
//! workflow in the transaction that completes it, which the step's
//! dependents then wait for too.
//!
//! The rule, on every backend, in one transaction with the step's fenced
//! completion (a step that has lost its lease adds nothing):
//!
//! - the children are inserted as steps of the step's workflow (none when
//!   the step has none), each with a new id;
//! - every dependent of the step that still waits for it (`blocked`, its
//!   edge to the step unmet) gets an edge to each child, after the
//!   dependencies it already had, and waits for as many more; its own
//!   failure policy applies to the new edges as to the old;
//! - then the step's completion releases its dependents as any
//!   completion does: they stay blocked until the children end.
//!
//! A child may depend on other children of the same completion, on the
//! step itself (met at once: it is done), and on stored jobs that are not
//! `blocked`. A blocked one could depend, through others, on the step,
//! and the dependents' new edges would then close a circle no job could
//! leave; a job that is not blocked gains no dependencies later, so the
//! check is exact.

use std::collections::HashSet;

use crate::error::{Error, Result};
use crate::ids::JobId;
use crate::job::Job;
use crate::labels::WorkflowId;
use crate::new_job::{MAX_DEPENDENCIES, NewJob};
use crate::state::JobState;

/// The most children one completion may add.
pub const MAX_CHILDREN: usize = MAX_DEPENDENCIES;

/// What completing a step that added children did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ChildrenAdded {
    /// The step, `done`.
    pub job: Job,
    /// The children as stored, in the order given.
    pub children: Vec<Job>,
    /// How many of the step's dependents now wait for the children too.
    pub dependents: u64,
}

/// Checks children before any is stored: at most [`MAX_CHILDREN`], each a
/// valid job that no unique or debounce rule could replace with another,
/// no two with one id, and among them no cycle. Gives each child without
/// an id a new one, so dependencies between them can be named.
///
/// # Errors
/// [`Error::Invalid`] saying which child is wrong and how.
pub fn check_children(children: &mut [NewJob]) -> Result<()> {
    if children.len() > MAX_CHILDREN {
        return Err(Error::invalid(format!(
            "a step may add at most {MAX_CHILDREN} children when it completes (got {}); add \
             them in stages, each stage a child that adds the next",
            children.len()
        )));
    }
    let mut ids = HashSet::with_capacity(children.len());
    for child in children.iter_mut() {
        let id = child.id.get_or_insert_with(JobId::generate).clone();
        if child.unique.is_some() {
            return Err(Error::invalid(format!(
                "child {id} is unique or debounced: a child added at run time is always a new \
                 job, so drop its unique or debounce rule"
            )));
        }
        if !ids.insert(id.clone()) {
            return Err(Error::invalid(format!(
                "two children have the id {id}; give each its own (or none, for a new one)"
            )));
        }
        child.validate()?;
    }
    crate::deps::check_dependencies(children)
}

/// Makes the checked children steps of the step's workflow (`None`: the
/// step has none, nor do they).
///
/// # Errors
/// [`Error::Invalid`] for a child that names another workflow.
pub fn adopt(children: &mut [NewJob], step: &JobId, workflow: Option<&WorkflowId>) -> Result<()> {
    for child in children.iter_mut() {
        match (&child.workflow, workflow) {
            (Some(own), Some(w)) if own == w => {}
            (None, _) => child.workflow = workflow.cloned(),
            (Some(own), _) => {
                return Err(Error::invalid(format!(
                    "child {} names the workflow {own}, but a child joins the workflow of the \
                     step that adds it ({}, of step {step}); leave its workflow out",
                    child.id.as_ref().map_or("", JobId::as_str),
                    workflow.map_or("none", WorkflowId::as_str),
                )));
            }
        }
    }
    Ok(())
}

/// The jobs the children depend on that are neither children nor the
/// step: each must be stored and not `blocked` ([`check_outside`]).
pub fn outside_dependencies(step: &JobId, children: &[NewJob]) -> Vec<JobId> {
    let own: HashSet<&JobId> = children.iter().filter_map(|c| c.id.as_ref()).collect();
    let mut seen = HashSet::new();
    children
        .iter()
        .flat_map(|c| &c.depends_on)
        .filter(|d| *d != step && !own.contains(d))
        .filter(|d| seen.insert(*d))
        .cloned()
        .collect()
}

/// Refuses a child's dependency on a stored job that is `blocked` (see
/// the module's notes); `states` are those of [`outside_dependencies`]
/// as stored (a missing one is left to the insert, which names it).
///
/// # Errors
/// [`Error::Invalid`] naming the blocked job.
pub fn check_outside<'a>(states: impl IntoIterator<Item = (&'a JobId, JobState)>) -> Result<()> {
    for (id, state) in states {
        if state == JobState::Blocked {
            return Err(Error::invalid(format!(
                "a child depends on job {id}, which is blocked: a child added at run time may \
                 depend only on the other children, on the step that adds it, and on jobs that \
                 are not blocked (a blocked one may wait for the step itself)"
            )));
        }
    }
    Ok(())
}

/// Refuses a child whose id names a job that is already stored: a child
/// is always a new job.
pub fn child_exists(id: &JobId) -> Error {
    Error::invalid(format!(
        "child {id} names a job that already exists; give each child a new id (or none, for a \
         generated one)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Payload;

    fn child(id: &str) -> NewJob {
        NewJob::new("page", Payload::from_json_text("{}").unwrap())
            .unwrap()
            .with_id(JobId::new(id).unwrap())
    }

    fn id(s: &str) -> JobId {
        JobId::new(s).unwrap()
    }

    #[test]
    fn children_get_ids_and_join_the_steps_workflow() {
        let mut kids = vec![
            NewJob::new("page", Payload::from_json_text("{}").unwrap()).unwrap(),
            child("b"),
        ];
        check_children(&mut kids).unwrap();
        assert!(kids[0].id.is_some());
        let wf = WorkflowId::new("report-7").unwrap();
        adopt(&mut kids, &id("step"), Some(&wf)).unwrap();
        assert!(kids.iter().all(|k| k.workflow.as_ref() == Some(&wf)));
        let mut none = vec![child("c")];
        adopt(&mut none, &id("step"), None).unwrap();
        assert_eq!(none[0].workflow, None);
    }

    #[test]
    fn a_child_of_another_workflow_is_refused() {
        let mut kids = vec![child("a").in_workflow(WorkflowId::new("other").unwrap())];
        let wf = WorkflowId::new("mine").unwrap();
        let e = adopt(&mut kids, &id("step"), Some(&wf)).unwrap_err();
        assert!(
            e.to_string().contains("joins the workflow of the step"),
            "{e}"
        );
        let e = adopt(&mut kids, &id("step"), None).unwrap_err();
        assert!(e.to_string().contains("none"), "{e}");
        // Naming the step's own workflow is fine.
        let mut same = vec![child("a").in_workflow(wf.clone())];
        adopt(&mut same, &id("step"), Some(&wf)).unwrap();
    }

    #[test]
    fn unique_repeated_and_cyclic_children_are_refused() {
        let mut unique = vec![child("a").unique_for(std::time::Duration::from_secs(60))];
        let e = check_children(&mut unique).unwrap_err();
        assert!(e.to_string().contains("unique or debounced"), "{e}");
        let mut twice = vec![child("a"), child("a")];
        let e = check_children(&mut twice).unwrap_err();
        assert!(e.to_string().contains("two children have the id a"), "{e}");
        let mut cycle = vec![
            child("a").depends_on(id("b")),
            child("b").depends_on(id("a")),
        ];
        assert!(check_children(&mut cycle).is_err());
        let mut many: Vec<NewJob> = (0..=MAX_CHILDREN)
            .map(|_| NewJob::new("page", Payload::from_json_text("{}").unwrap()).unwrap())
            .collect();
        let e = check_children(&mut many).unwrap_err();
        assert!(e.to_string().contains("at most"), "{e}");
    }

    #[test]
    fn only_outside_dependencies_are_looked_up_and_blocked_ones_refused() {
        let kids = vec![
            child("a").depends_on(id("step")),
            child("b")
                .depends_on(id("a"))
                .depends_on(id("x"))
                .depends_on(id("y")),
            child("c").depends_on(id("x")),
        ];
        assert_eq!(
            outside_dependencies(&id("step"), &kids),
            vec![id("x"), id("y")]
        );
        let (x, y) = (id("x"), id("y"));
        check_outside([(&x, JobState::Running), (&y, JobState::Done)]).unwrap();
        let e = check_outside([(&x, JobState::Ready), (&y, JobState::Blocked)]).unwrap_err();
        assert!(e.to_string().contains("job y, which is blocked"), "{e}");
    }
}
