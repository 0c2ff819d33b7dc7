//! Workflows: a graph of jobs enqueued together under one id, shown and
//! acted on as a whole.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::ids::JobId;
use crate::job::Job;
use crate::labels::WorkflowId;
use crate::new_job::NewJob;
use crate::stamp::check_operator;
use crate::state::JobState;

/// A workflow being built: its steps are jobs that may depend on each
/// other (and on jobs already stored). Enqueue it in one call —
/// `Client::enqueue_workflow`, or the stores' `enqueue_many_in` inside a
/// transaction the application holds — and every step is inserted or none
/// is: a cycle, an unknown dependency or a bad step refuses the whole.
///
/// ```
/// use errand_core::{NewJob, Payload, Workflow};
/// let mut wf = Workflow::new();
/// let fetch = wf.step(NewJob::new("fetch", Payload::from_json_text("{}")?)?);
/// let parse = wf.step_after(NewJob::new("parse", Payload::from_json_text("{}")?)?, &[&fetch]);
/// let _report = wf.step_after(NewJob::new("report", Payload::from_json_text("{}")?)?, &[&parse]);
/// assert_eq!(wf.steps().len(), 3);
/// assert!(wf.steps().iter().all(|s| s.workflow.as_ref() == Some(wf.id())));
/// # Ok::<(), errand_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Workflow {
    id: WorkflowId,
    steps: Vec<NewJob>,
}

impl Default for Workflow {
    fn default() -> Self {
        Workflow::new()
    }
}

impl Workflow {
    /// An empty workflow under a fresh id.
    pub fn new() -> Self {
        Workflow::with_id(WorkflowId::generate())
    }

    /// An empty workflow under a chosen id (to find it again by a business
    /// key: `order-7/fulfil`).
    pub fn with_id(id: WorkflowId) -> Self {
        Workflow {
            id,
            steps: Vec::new(),
        }
    }

    /// The workflow's id.
    pub fn id(&self) -> &WorkflowId {
        &self.id
    }

    /// Adds a step and returns its job id (generated now when the job has
    /// none), to name it in later steps' dependencies.
    pub fn step(&mut self, mut job: NewJob) -> JobId {
        let id = job.id.clone().unwrap_or_else(JobId::generate);
        job.id = Some(id.clone());
        job.workflow = Some(self.id.clone());
        self.steps.push(job);
        id
    }

    /// Adds a step that waits for `after` (steps of this workflow, or jobs
    /// already stored) and returns its job id.
    pub fn step_after(&mut self, mut job: NewJob, after: &[&JobId]) -> JobId {
        for dep in after {
            job = job.depends_on((*dep).clone());
        }
        self.step(job)
    }

    /// The steps so far, in the order added.
    pub fn steps(&self) -> &[NewJob] {
        &self.steps
    }

    /// The steps, to insert in one call.
    pub fn into_jobs(self) -> Vec<NewJob> {
        self.steps
    }
}

/// One step of a stored workflow: the job and the ids it depends on, in
/// the order they were named — the first [`WorkflowStep::DEPENDENCIES_SHOWN`]
/// of them, with how many there are (the job's own page lists them all).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkflowStep {
    /// The job.
    #[serde(flatten)]
    pub job: Job,
    /// The jobs it waits for (or waited for): the first
    /// [`WorkflowStep::DEPENDENCIES_SHOWN`].
    pub depends_on: Vec<JobId>,
    /// How many jobs it depends on in all.
    pub depends_on_count: u32,
}

impl WorkflowStep {
    /// How many of a step's dependencies a page lists.
    pub const DEPENDENCIES_SHOWN: u32 = 100;

    /// What the step weighs in a page's byte budget: the job as a listing
    /// counts it ([`crate::listed_bytes`]) and each dependency listed.
    pub fn listed_bytes(&self) -> usize {
        crate::filter::listed_bytes(&self.job)
            + self
                .depends_on
                .iter()
                .map(|d| d.as_str().len() + 8)
                .sum::<usize>()
    }
}

/// A stored workflow: how many steps are in each state, and one page of
/// its steps in the order they were enqueued.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkflowView {
    /// The workflow's id.
    pub id: WorkflowId,
    /// All its steps.
    pub total: u64,
    /// How many of its steps are in each state (states with none left out).
    pub states: Vec<StateCount>,
    /// One page of steps.
    pub steps: Vec<WorkflowStep>,
    /// Where the next page starts, when there may be one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_after: Option<JobId>,
}

/// How many steps are in one state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StateCount {
    /// The state.
    pub state: JobState,
    /// How many.
    pub count: u64,
}

impl WorkflowView {
    /// How many steps are in `state`.
    pub fn count(&self, state: JobState) -> u64 {
        self.states
            .iter()
            .find(|c| c.state == state)
            .map_or(0, |c| c.count)
    }

    /// Whether every step has ended (done, dead or cancelled).
    pub fn finished(&self) -> bool {
        self.count(JobState::Blocked) + self.count(JobState::Ready) + self.count(JobState::Running)
            == 0
    }
}

/// An operator's action on a whole workflow (cancel or replay).
#[derive(Clone, Debug)]
pub struct WorkflowAction {
    /// The workflow.
    pub id: WorkflowId,
    /// Who asked.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

impl WorkflowAction {
    /// Checks the operator and reason.
    ///
    /// # Errors
    /// [`Error::Invalid`] saying which is wrong.
    pub fn validate(&self) -> Result<()> {
        check_operator(&self.operator)?;
        self.reason
            .as_deref()
            .map_or(Ok(()), crate::stamp::check_reason)
    }
}

/// What a workflow action did: the jobs it changed (each has its audit
/// entry), in the order it reached them.
#[derive(Clone, Debug, Serialize)]
pub struct WorkflowActed {
    /// The workflow.
    pub workflow: WorkflowId,
    /// The jobs changed.
    pub jobs: Vec<Job>,
}

/// Refusal for a workflow with no stored steps.
pub(crate) fn unknown_workflow(id: &WorkflowId) -> Error {
    Error::NoSuchWorkflow(id.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Payload;

    fn job(kind: &str) -> NewJob {
        NewJob::new(kind, Payload::from_json_text("{}").unwrap()).unwrap()
    }

    #[test]
    fn steps_carry_the_workflow_id_and_their_dependencies() {
        let mut wf = Workflow::with_id(WorkflowId::new("order-7").unwrap());
        let a = wf.step(job("a"));
        let b = wf.step(job("b").with_id(JobId::new("chosen").unwrap()));
        let c = wf.step_after(job("c"), &[&a, &b]);
        assert_eq!(b.as_str(), "chosen");
        let steps = wf.into_jobs();
        assert_eq!(steps.len(), 3);
        assert!(
            steps
                .iter()
                .all(|s| s.workflow.as_ref().map(WorkflowId::as_str) == Some("order-7"))
        );
        assert_eq!(steps[2].id.as_ref(), Some(&c));
        assert_eq!(steps[2].depends_on, vec![a, b]);
        assert!(steps[0].depends_on.is_empty());
    }
}
