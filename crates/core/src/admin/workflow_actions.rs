//! A workflow as an operator sees it, and the actions on all its steps.

use crate::error::{Error, Result};
use crate::filter::JobFilter;
use crate::ids::JobId;
use crate::job::Job;
use crate::labels::WorkflowId;
use crate::stamp::AuditStamp;
use crate::state::JobState;
use crate::workflow::{
    StateCount, WorkflowActed, WorkflowAction, WorkflowStep, WorkflowView, unknown_workflow,
};

use super::{Admin, RACES_TOLERATED, WORKFLOW_CHUNK, partial, reason_after, stamp};

impl Admin {
    /// A stored workflow: its counts by state and one page of its steps
    /// (oldest first, at most `limit`, after the step `after`), each with
    /// the ids it depends on.
    ///
    /// # Errors
    /// [`Error::NoSuchWorkflow`](crate::Error::NoSuchWorkflow) when no stored job carries the id.
    pub async fn workflow(
        &self,
        id: &WorkflowId,
        after: Option<JobId>,
        limit: u32,
    ) -> Result<WorkflowView> {
        let counts = self.store.workflow_counts(id).await?;
        if counts.is_empty() {
            return Err(unknown_workflow(id));
        }
        let filter = JobFilter {
            workflow: Some(id.clone()),
            limit: Some(limit),
            after,
            max_bytes: Some(crate::filter::DEFAULT_PAGE_BYTES),
            ..JobFilter::default()
        };
        let jobs = self.store.list(&filter).await?;
        let listed_to = filter.next_after(&jobs).cloned();
        let (steps, cut_after) = self.steps_within_budget(jobs).await?;
        let mut states: Vec<StateCount> = counts
            .into_iter()
            .map(|(state, count)| StateCount { state, count })
            .collect();
        states.sort_by_key(|c| c.state as u8);
        Ok(WorkflowView {
            id: id.clone(),
            total: states.iter().map(|c| c.count).sum(),
            states,
            steps,
            next_after: cut_after.or(listed_to),
        })
    }

    /// `jobs` (one listing page) as steps with their dependencies, read a
    /// few steps at a time, the page ending at the step that spends its
    /// byte budget ([`WorkflowStep::listed_bytes`]: payloads and edges
    /// alike). Returns the steps, and the last one when the page was cut
    /// there.
    async fn steps_within_budget(
        &self,
        jobs: Vec<Job>,
    ) -> Result<(Vec<WorkflowStep>, Option<JobId>)> {
        const STEPS_AT_ONCE: usize = 100;
        let total = jobs.len();
        let mut steps = Vec::with_capacity(total);
        let mut spent = 0usize;
        let mut jobs = jobs.into_iter();
        loop {
            let chunk: Vec<Job> = jobs.by_ref().take(STEPS_AT_ONCE).collect();
            if chunk.is_empty() {
                return Ok((steps, None));
            }
            let ids: Vec<JobId> = chunk.iter().map(|j| j.id.clone()).collect();
            let mut edges: std::collections::HashMap<JobId, (Vec<JobId>, u32)> =
                std::collections::HashMap::new();
            let shown = WorkflowStep::DEPENDENCIES_SHOWN;
            for edge in self.store.dependency_edges(&ids, shown).await? {
                let entry = edges.entry(edge.job).or_default();
                entry.0.push(edge.depends_on);
                entry.1 = edge.of;
            }
            for job in chunk {
                let (depends_on, depends_on_count) = edges.remove(&job.id).unwrap_or_default();
                let step = WorkflowStep {
                    job,
                    depends_on,
                    depends_on_count,
                };
                spent += step.listed_bytes();
                let last = step.job.id.clone();
                steps.push(step);
                if spent >= crate::filter::DEFAULT_PAGE_BYTES && steps.len() < total {
                    return Ok((steps, Some(last)));
                }
            }
        }
    }

    /// Cancels every unfinished step of a workflow (blocked, ready or
    /// running), a `cancel` audit entry each whose reason names the
    /// workflow. Steps that end meanwhile are left as they ended; steps
    /// cancelled in cascade by a dependency's cancellation follow their
    /// policy as always. Cancelling a finished workflow changes nothing.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a bad operator or reason;
    /// [`Error::NoSuchWorkflow`](crate::Error::NoSuchWorkflow) for an unknown workflow.
    pub async fn cancel_workflow(&self, action: &WorkflowAction) -> Result<WorkflowActed> {
        // Dependents before their dependencies: cancelling a dependency
        // first would cancel its waiting dependents in cascade and make
        // the next step's all-or-none cancel refuse them.
        let order = [JobState::Blocked, JobState::Ready, JobState::Running];
        self.act_on_workflow(action, "cancel", &order, |ids, by| async move {
            self.store.cancel_jobs(&ids, &by).await
        })
        .await
    }

    /// Replays every dead step of a workflow, a `replay` audit entry each
    /// whose reason names the workflow; their dependents waiting under the
    /// `wait` policy run once they succeed.
    ///
    /// # Errors
    /// As [`Admin::cancel_workflow`].
    pub async fn replay_workflow(&self, action: &WorkflowAction) -> Result<WorkflowActed> {
        self.act_on_workflow(action, "replay", &[JobState::Dead], |ids, by| async move {
            self.store.replay_jobs(&ids, &by).await
        })
        .await
    }

    /// Applies `step` (an all-or-none store step) to the workflow's steps
    /// in `states`, a chunk at a time, until none is left. A chunk refused
    /// because another process changed one of its jobs is looked up again;
    /// the action gives up only after [`RACES_TOLERATED`] rounds in a row
    /// that changed nothing.
    async fn act_on_workflow<F, Fut>(
        &self,
        action: &WorkflowAction,
        verb: &str,
        states: &[JobState],
        step: F,
    ) -> Result<WorkflowActed>
    where
        F: Fn(Vec<JobId>, AuditStamp) -> Fut,
        Fut: std::future::Future<Output = Result<Vec<Job>>>,
    {
        action.validate()?;
        if self.store.workflow_counts(&action.id).await?.is_empty() {
            return Err(unknown_workflow(&action.id));
        }
        let reason = reason_after(
            &format!("{verb} workflow {}", action.id),
            action.reason.as_deref(),
        )?;
        let by = stamp(&action.operator, Some(&reason));
        let mut changed: Vec<Job> = Vec::new();
        // A step acted on once is not acted on again by this action (a
        // step replayed here that died again before the next round stays
        // dead).
        let mut done: std::collections::HashSet<JobId> = std::collections::HashSet::new();
        let mut idle_rounds = 0;
        loop {
            let mut progressed = false;
            let mut refused = false;
            for state in states {
                let mut ids = self.workflow_ids(&action.id, *state).await?;
                ids.retain(|id| !done.contains(id));
                for chunk in ids.chunks(WORKFLOW_CHUNK) {
                    let jobs = step(chunk.to_vec(), by.clone()).await?;
                    if jobs.len() == chunk.len() {
                        progressed = true;
                        done.extend(chunk.iter().cloned());
                        changed.extend(jobs);
                        continue;
                    }
                    if !jobs.is_empty() {
                        return Err(partial(jobs.len(), chunk.len()));
                    }
                    // A step of the chunk changed meanwhile (it finished,
                    // or a cascade reached it): the others go one by one,
                    // and the ones refused are looked at again next round.
                    for id in chunk {
                        let one = step(vec![id.clone()], by.clone()).await?;
                        if one.is_empty() {
                            refused = true;
                        } else {
                            progressed = true;
                            done.insert(id.clone());
                            changed.extend(one);
                        }
                    }
                }
            }
            if !refused {
                break;
            }
            idle_rounds = if progressed { 0 } else { idle_rounds + 1 };
            if idle_rounds >= RACES_TOLERATED {
                return Err(Error::Busy(format!(
                    "the steps of workflow {} kept changing while the {verb} ran (other \
                     processes are working on them); {} step(s) were changed, each with its \
                     audit entry: run it again",
                    action.id,
                    changed.len()
                )));
            }
        }
        Ok(WorkflowActed {
            workflow: action.id.clone(),
            jobs: changed,
        })
    }

    /// The ids of every step of `workflow` in `state`, oldest first.
    async fn workflow_ids(&self, workflow: &WorkflowId, state: JobState) -> Result<Vec<JobId>> {
        let mut ids = Vec::new();
        let mut filter = JobFilter {
            state: Some(state),
            workflow: Some(workflow.clone()),
            limit: Some(10_000),
            ..JobFilter::default()
        };
        loop {
            let page = self.store.list(&filter).await?;
            let next = filter.next_after(&page).cloned();
            ids.extend(page.into_iter().map(|j| j.id));
            match next {
                Some(after) => filter.after = Some(after),
                None => return Ok(ids),
            }
        }
    }
}
