//! Workflows: a graph of jobs enqueued together under one id, shown and
//! acted on as a whole.

use std::collections::{HashMap, HashSet, VecDeque};

use serde::Serialize;

use crate::admin::check_operator;
use crate::error::{Error, Result};
use crate::job::{Job, JobId, JobState, NewJob};
use crate::labels::WorkflowId;

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

/// The order in which a store that updates rows where they lie (SQLite)
/// writes the rows of one insert call: each job after the jobs of the call
/// it depends on, one depth together (a job's depth: 0 when it waits for
/// no other job of the call, else one more than its deepest such
/// dependency), in the order given within a depth. `ids` are the jobs'
/// ids, given or generated, one per job.
///
/// Jobs that depend on each other run wave by wave — the first ones, then
/// the ones they release, each claimed behind older ready jobs — so stored
/// this way the rows each wave of claims and acknowledgments rewrites sit
/// side by side, instead of one in every few rows of a graph built, say,
/// one chain at a time. Only where the rows are written changes: ids, and
/// what the call answers, stay as given.
///
/// `None` means "write them as given": no job of the call depends on
/// another of it; the order is not defined (a cycle, which the store
/// refuses, or an id given twice, whose first occurrence is the one
/// created); or the new order would put a job before one given earlier on
/// the same concurrency key, whose jobs start in the order they were
/// enqueued.
pub fn storage_order(ids: &[JobId], jobs: &[NewJob]) -> Option<Vec<usize>> {
    if ids.len() != jobs.len() || jobs.iter().all(|j| j.depends_on.is_empty()) {
        return None;
    }
    let depth = depths(ids, jobs)?;
    if depth.iter().all(|&d| d == 0) {
        return None;
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    // A stable sort: one depth keeps the order given.
    order.sort_by_key(|&i| depth[i]);
    let mut last_on_key: HashMap<(&str, &str), usize> = HashMap::new();
    for &i in &order {
        if let Some(key) = &jobs[i].key {
            let before = last_on_key.insert((jobs[i].queue.as_str(), key.name.as_str()), i);
            if before.is_some_and(|b| b > i) {
                return None;
            }
        }
    }
    Some(order)
}

/// Each job's depth (see [`storage_order`]), or `None` for a cycle or an
/// id given twice.
fn depths(ids: &[JobId], jobs: &[NewJob]) -> Option<Vec<usize>> {
    let mut index: HashMap<&JobId, usize> = HashMap::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        if index.insert(id, i).is_some() {
            return None;
        }
    }
    // Kahn's algorithm: a job's depth is final once every dependency of it
    // in the call has been taken.
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); jobs.len()];
    let mut waiting: Vec<usize> = vec![0; jobs.len()];
    for (i, job) in jobs.iter().enumerate() {
        let mut named = HashSet::new();
        for dep in &job.depends_on {
            if let Some(&d) = index.get(dep)
                && named.insert(d)
            {
                dependents[d].push(i);
                waiting[i] += 1;
            }
        }
    }
    let mut depth = vec![0; jobs.len()];
    let mut free: VecDeque<usize> = (0..jobs.len()).filter(|&i| waiting[i] == 0).collect();
    let mut taken = 0;
    while let Some(d) = free.pop_front() {
        taken += 1;
        for &i in &dependents[d] {
            depth[i] = depth[i].max(depth[d] + 1);
            waiting[i] -= 1;
            if waiting[i] == 0 {
                free.push_back(i);
            }
        }
    }
    (taken == jobs.len()).then_some(depth)
}

/// One step of a stored workflow: the job and the ids it depends on, in
/// the order they were named.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkflowStep {
    /// The job.
    #[serde(flatten)]
    pub job: Job,
    /// The jobs it waits for (or waited for).
    pub depends_on: Vec<JobId>,
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
            .map_or(Ok(()), crate::admin::check_reason)
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
    use crate::job::{KeyLimit, Payload};

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

    fn kinds(steps: &[NewJob]) -> Vec<&str> {
        steps.iter().map(|s| s.kind.as_str()).collect()
    }

    /// The steps in the order storage_order writes them.
    fn stored(steps: Vec<NewJob>) -> Vec<NewJob> {
        let ids: Vec<JobId> = steps.iter().filter_map(|s| s.id.clone()).collect();
        match storage_order(&ids, &steps) {
            Some(order) => order.into_iter().map(|i| steps[i].clone()).collect(),
            None => steps,
        }
    }

    #[test]
    fn jobs_that_depend_on_none_of_the_call_are_written_as_given() {
        let mut wf = Workflow::new();
        let stored_before = JobId::new("stored-before").unwrap();
        wf.step(job("a"));
        wf.step_after(job("b"), &[&stored_before]);
        let steps = wf.into_jobs();
        let ids: Vec<JobId> = steps.iter().filter_map(|s| s.id.clone()).collect();
        assert_eq!(
            storage_order(&ids, &steps),
            None,
            "depends on none of the call"
        );
        let plain = vec![job("x"), job("y")];
        let plain_ids = vec![JobId::new("x").unwrap(), JobId::new("y").unwrap()];
        assert_eq!(storage_order(&plain_ids, &plain), None);
    }

    #[test]
    fn chains_built_one_at_a_time_are_written_depth_by_depth() {
        let mut wf = Workflow::new();
        for chain in ["a", "b", "c"] {
            let mut before = wf.step(job(&format!("{chain}0")));
            for n in 1..3 {
                before = wf.step_after(job(&format!("{chain}{n}")), &[&before]);
            }
        }
        let added: Vec<JobId> = wf.steps().iter().filter_map(|s| s.id.clone()).collect();
        let stored = stored(wf.into_jobs());
        assert_eq!(
            kinds(&stored),
            ["a0", "b0", "c0", "a1", "b1", "c1", "a2", "b2", "c2"]
        );
        // The ids are the ones handed out; only the order changed.
        let mut ids: Vec<JobId> = stored.iter().filter_map(|s| s.id.clone()).collect();
        ids.sort();
        let mut added = added;
        added.sort();
        assert_eq!(ids, added);
    }

    #[test]
    fn a_step_goes_one_deeper_than_its_deepest_dependency() {
        let mut wf = Workflow::new();
        let root = wf.step(job("root"));
        let long = wf.step_after(job("long"), &[&root]);
        let longer = wf.step_after(job("longer"), &[&long]);
        let stored_elsewhere = JobId::new("stored-before").unwrap();
        // Waits for the root (depth 0) and `longer` (depth 2): depth 3.
        wf.step_after(job("join"), &[&root, &longer, &stored_elsewhere]);
        // Waits only for a job outside the workflow: depth 0.
        wf.step_after(job("outside"), &[&stored_elsewhere]);
        assert_eq!(
            kinds(&stored(wf.into_jobs())),
            ["root", "outside", "long", "longer", "join"]
        );
    }

    #[test]
    fn a_dependency_given_after_its_dependent_is_written_before_it() {
        let mut wf = Workflow::new();
        let later = JobId::new("added-later").unwrap();
        wf.step_after(job("first-added"), &[&later]);
        wf.step(job("second-added").with_id(later));
        assert_eq!(
            kinds(&stored(wf.into_jobs())),
            ["second-added", "first-added"]
        );
    }

    #[test]
    fn jobs_that_cannot_be_ordered_are_written_as_given() {
        let (x, y) = (JobId::new("x").unwrap(), JobId::new("y").unwrap());
        let mut cycle = Workflow::new();
        cycle.step(job("free"));
        cycle.step_after(job("x").with_id(x.clone()), &[&y]);
        cycle.step_after(job("y").with_id(y.clone()), &[&x]);
        assert_eq!(kinds(&stored(cycle.into_jobs())), ["free", "x", "y"]);

        let mut twice = Workflow::new();
        twice.step_after(job("after"), &[&x]);
        twice.step(job("x").with_id(x.clone()));
        twice.step(job("x-again").with_id(x));
        assert_eq!(kinds(&stored(twice.into_jobs())), ["after", "x", "x-again"]);
    }

    #[test]
    fn a_keys_jobs_are_never_written_out_of_the_order_given() {
        let keyed = |kind: &str| job(kind).with_key("tenant-1", KeyLimit::Ordered).unwrap();
        let p = JobId::new("p").unwrap();
        let in_order = |jobs: Vec<NewJob>| {
            let ids: Vec<JobId> = jobs.iter().filter_map(|s| s.id.clone()).collect();
            storage_order(&ids, &jobs)
        };
        // The keyed job at depth 1 was given before the keyed one at depth
        // 0: sorting by depth would swap them, so nothing moves.
        let swapped = vec![
            job("p").with_id(p.clone()),
            keyed("c")
                .with_id(JobId::new("c").unwrap())
                .depends_on(p.clone()),
            keyed("a").with_id(JobId::new("a").unwrap()),
        ];
        assert_eq!(in_order(swapped), None);
        // Keyed jobs already in depth order, or on another key or queue,
        // do not stop the rest from moving.
        let kept = vec![
            keyed("a").with_id(JobId::new("a").unwrap()),
            job("c")
                .with_id(JobId::new("c").unwrap())
                .depends_on(p.clone()),
            job("p").with_id(p.clone()),
            keyed("d")
                .with_id(JobId::new("d").unwrap())
                .depends_on(p.clone()),
            job("e")
                .with_key("tenant-2", KeyLimit::Ordered)
                .unwrap()
                .with_id(JobId::new("e").unwrap()),
            keyed("f")
                .on_queue("other")
                .unwrap()
                .with_id(JobId::new("f").unwrap()),
        ];
        assert_eq!(in_order(kept), Some(vec![0, 2, 4, 5, 1, 3]));
    }

    proptest::proptest! {
        // Any acyclic workflow: the same steps come out, each after every
        // step of the workflow it depends on.
        #[test]
        fn every_job_is_written_after_its_dependencies(
            edges in proptest::collection::vec(proptest::collection::vec(0usize..64, 0..4), 1..64),
        ) {
            let mut wf = Workflow::new();
            let ids: Vec<JobId> = (0..edges.len()).map(|i| JobId::new(format!("s{i}")).unwrap()).collect();
            // A step waits only for steps numbered before it (no cycle);
            // they are added in reverse, so that most dependencies are
            // added after the steps that wait for them.
            let mut built: Vec<NewJob> = Vec::new();
            for (i, deps) in edges.iter().enumerate() {
                let mut step = job("k").with_id(ids[i].clone());
                for &d in deps.iter().filter(|&&d| d < i) {
                    step = step.depends_on(ids[d].clone());
                }
                built.push(step);
            }
            for step in built.into_iter().rev() {
                wf.step(step);
            }
            let stored = stored(wf.into_jobs());
            proptest::prop_assert_eq!(stored.len(), edges.len());
            let position: HashMap<JobId, usize> = stored
                .iter()
                .enumerate()
                .filter_map(|(p, s)| s.id.clone().map(|id| (id, p)))
                .collect();
            proptest::prop_assert_eq!(position.len(), edges.len());
            for (p, step) in stored.iter().enumerate() {
                for dep in &step.depends_on {
                    proptest::prop_assert!(position[dep] < p, "{dep} stored after a step that waits for it");
                }
            }
        }
    }
}
