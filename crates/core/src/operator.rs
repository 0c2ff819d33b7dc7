//! [`Admin`]: every operator action over any store, with its policy in one
//! place — the request checked, each job named once, a refusal explained,
//! the audit entry worded. A backend only runs the set-based, all-or-none
//! step ([`AdminStore`]); the CLI, the HTTP API, the dashboard and the
//! applications all come through here, so they refuse and record alike.

use std::sync::Arc;

use crate::admin::{
    AuditEntry, AuditFilter, BulkFilter, CancelRequest, Copied, CopyRequest, MAX_REASON_BYTES,
    PausedQueue, PurgeRequest, QueueAction, ReplayRequest, RescheduleRequest, Stats, StatsRequest,
};
use crate::brief::JobBrief;
use crate::clock::Timestamp;
use crate::cron::{
    ScheduleActed, ScheduleAction, ScheduleAdd, ScheduleAddOutcome, ScheduleAdded, ScheduleChange,
    StoredSchedule,
};
use crate::error::{Error, Result};
use crate::filter::JobFilter;
use crate::ids::{JobId, Name};
use crate::job::{Job, JobDetail};
use crate::labels::WorkflowId;
use crate::minutes::{ChartWindow, Charts};
use crate::new_job::NewJob;
use crate::state::JobState;
use crate::store::{AdminStore, AuditStamp, JobStore, Reschedule, Store};
use crate::workflow::{
    StateCount, WorkflowActed, WorkflowAction, WorkflowStep, WorkflowView, unknown_workflow,
};

/// How many jobs one step of a workflow action changes at a time.
const WORKFLOW_CHUNK: usize = 1000;

/// How many times an action is tried again when the jobs it was refused
/// for turn out, on a second look, to be in states it accepts (another
/// process changed them in between).
const RACES_TOLERATED: usize = 3;

/// The operator's actions on a store.
///
/// Each action is all or none: it changes every job named or, refusing,
/// none, and says which job stopped it and why. A job named twice is acted
/// on once. Every change writes an audit entry with the operator and the
/// reason.
#[derive(Clone, Debug)]
pub struct Admin {
    /// The operator's seam: every action and listing.
    store: Arc<dyn AdminStore>,
    /// The worker's seam, for reading a named job as it is now.
    jobs: Arc<dyn JobStore>,
}

impl Admin {
    /// The operator's actions on `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Admin {
            store: store.clone(),
            jobs: store,
        }
    }

    /// The operator's actions through `operator`, reading single jobs
    /// through `jobs`: the two seams of one backend (or a stand-in for
    /// one of them).
    pub fn over(jobs: Arc<dyn JobStore>, operator: Arc<dyn AdminStore>) -> Self {
        Admin {
            store: operator,
            jobs,
        }
    }

    /// The worker's seam of the store acted on (to enqueue beside an
    /// action, or read a job).
    pub fn jobs(&self) -> &Arc<dyn JobStore> {
        &self.jobs
    }

    /// Replays dead or cancelled jobs: `ready` and due now, attempts reset,
    /// `replays` incremented, the id kept, a `replay` audit entry each.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad operator or reason;
    /// [`Error::NotFound`] or [`Error::InvalidState`] naming the first job
    /// that stopped it (nothing changed).
    pub async fn replay(&self, req: &ReplayRequest) -> Result<Vec<Job>> {
        req.validate()?;
        let ids = distinct(&req.ids);
        let by = stamp(&req.operator, req.reason.as_deref());
        let jobs = self
            .all_or_refusal(
                &ids,
                (ReplayRequest::ACCEPTS, ReplayRequest::REFUSED),
                Guard::Releasable,
                || self.store.replay_jobs(&ids, &by),
            )
            .await?;
        Ok(in_order(&ids, jobs, |j| &j.id))
    }

    /// Cancels ready or running jobs, a `cancel` audit entry each; a
    /// running job's attempt ends in its history as cancelled, and its
    /// worker's settlement is refused.
    ///
    /// # Errors
    /// As [`Admin::replay`].
    pub async fn cancel(&self, req: &CancelRequest) -> Result<Vec<Job>> {
        req.validate()?;
        let ids = distinct(&req.ids);
        let by = stamp(&req.operator, req.reason.as_deref());
        let jobs = self
            .all_or_refusal(
                &ids,
                (CancelRequest::ACCEPTS, CancelRequest::REFUSED),
                Guard::StateOnly,
                || self.store.cancel_jobs(&ids, &by),
            )
            .await?;
        Ok(in_order(&ids, jobs, |j| &j.id))
    }

    /// Deletes dead jobs for good, with their attempt history; the audit
    /// log keeps a `purge` entry for each. Returns the ids purged.
    ///
    /// # Errors
    /// As [`Admin::replay`]; the reason is required.
    pub async fn purge(&self, req: &PurgeRequest) -> Result<Vec<JobId>> {
        req.validate()?;
        let ids = distinct(&req.ids);
        let by = stamp(&req.operator, Some(&req.reason));
        let purged = self
            .all_or_refusal(
                &ids,
                (PurgeRequest::ACCEPTS, PurgeRequest::REFUSED),
                Guard::NoWaitingDependents,
                || self.store.purge_jobs(&ids, &by),
            )
            .await?;
        Ok(in_order(&ids, purged, |id| id))
    }

    /// Copies dead or cancelled jobs under new ids ([`NewJob::copy_of`]):
    /// the originals stay as they are, and a `copy` audit entry names
    /// both. A copy depends on what its original depends on, so a
    /// workflow step's copy reads the same inputs (it is judged against
    /// them at once, as any enqueue is). Results follow the request's
    /// order.
    ///
    /// # Errors
    /// As [`Admin::replay`]; also [`Error::InvalidState`] when an
    /// original depends on a job that is gone (its copy could never have
    /// its inputs).
    pub async fn copy(&self, req: &CopyRequest) -> Result<Vec<Copied>> {
        req.validate()?;
        let ids = distinct(&req.ids);
        let by = stamp(&req.operator, req.reason.as_deref());
        for _ in 0..RACES_TOLERATED {
            let mut copies = Vec::with_capacity(ids.len());
            for id in &ids {
                copies.push((id.clone(), self.copy_of(id).await?));
            }
            let copied = self.store.copy_jobs(&copies, &by).await?;
            if copied.len() == ids.len() {
                // The store answers in the order of `copies`, which is `ids`'.
                return Ok(ids
                    .into_iter()
                    .zip(copied)
                    .map(|(from, job)| Copied { from, job })
                    .collect());
            }
            if !copied.is_empty() {
                return Err(partial(copied.len(), ids.len()));
            }
        }
        Err(raced(&ids))
    }

    /// Moves waiting (`ready`) jobs to a new due time and/or priority, a
    /// `reschedule` audit entry each whose reason starts with the change
    /// (`run at …, priority …`). Nothing else about the job changes: its
    /// attempts, payload and history stay.
    ///
    /// # Errors
    /// As [`Admin::replay`]; also [`Error::Invalid`] when neither a due
    /// time nor a priority is given, or the due time is out of range.
    pub async fn reschedule(&self, req: &RescheduleRequest) -> Result<Vec<Job>> {
        req.validate()?;
        let ids = distinct(&req.ids);
        let reason = reason_after(&req.describe(), req.reason.as_deref())?;
        let by = stamp(&req.operator, Some(&reason));
        let to = Reschedule {
            run: req.run,
            priority: req.priority,
        };
        let jobs = self
            .all_or_refusal(
                &ids,
                (RescheduleRequest::ACCEPTS, RescheduleRequest::REFUSED),
                Guard::StateOnly,
                || self.store.reschedule_jobs(&ids, &to, &by),
            )
            .await?;
        Ok(in_order(&ids, jobs, |j| &j.id))
    }

    /// Pauses a queue for every process using the store, with a `pause`
    /// audit entry. Returns `false` (writing nothing) when it was already
    /// paused.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad operator or reason.
    pub async fn pause(&self, action: &QueueAction) -> Result<bool> {
        action.validate()?;
        let by = stamp(&action.operator, action.reason.as_deref());
        self.store.pause_queue(&action.queue, &by).await
    }

    /// Resumes a paused queue, with a `resume` audit entry. Returns `false`
    /// (writing nothing) when it was not paused.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad operator or reason.
    pub async fn resume(&self, action: &QueueAction) -> Result<bool> {
        action.validate()?;
        let by = stamp(&action.operator, action.reason.as_deref());
        self.store.resume_queue(&action.queue, &by).await
    }

    /// The paused queues, by name.
    pub async fn paused_queues(&self) -> Result<Vec<PausedQueue>> {
        self.store.paused_queues().await
    }

    /// Stores a periodic schedule that every running service enqueues at
    /// each tick (exactly one job per tick, `cron:NAME:TICK`), with a
    /// `schedule_add` audit entry whose reason starts with the definition.
    /// The same definition stored already changes nothing; another one
    /// under the name is refused unless `replace` is set, when it is
    /// replaced (`schedule_replace`; ticks before now are dropped).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad definition, operator or reason, or a
    /// name taken by another definition without `replace`.
    pub async fn add_schedule(&self, req: &ScheduleAdd) -> Result<ScheduleAdded> {
        req.validate()?;
        let def = &req.definition;
        let reason = reason_after(&def.describe(), req.reason.as_deref())?;
        let by = stamp(&req.operator, Some(&reason));
        for _ in 0..RACES_TOLERATED {
            let added = self
                .store
                .change_schedule(&ScheduleChange::Add(def.clone()), &by)
                .await?;
            if let Some(schedule) = added {
                return Ok(ScheduleAdded {
                    outcome: ScheduleAddOutcome::Added,
                    schedule,
                });
            }
            let Some(stored) = self.find_schedule(&def.name).await? else {
                continue; // removed meanwhile: add again
            };
            if stored.definition.same_as(def) {
                return Ok(ScheduleAdded {
                    outcome: ScheduleAddOutcome::Unchanged,
                    schedule: stored,
                });
            }
            if !req.replace {
                return Err(Error::invalid(format!(
                    "a schedule named `{}` is stored with another definition ({}); ask to replace \
                     it (the CLI's --replace, the API's \"replace\": true), or choose another name",
                    def.name,
                    stored.definition.describe()
                )));
            }
            let replaced = self
                .store
                .change_schedule(&ScheduleChange::Replace(def.clone()), &by)
                .await?;
            if let Some(schedule) = replaced {
                return Ok(ScheduleAdded {
                    outcome: ScheduleAddOutcome::Replaced,
                    schedule,
                });
            }
        }
        Err(Error::Busy(format!(
            "the schedule `{}` kept changing under another operator",
            def.name
        )))
    }

    /// Deletes a stored schedule (jobs it enqueued stay), with a
    /// `schedule_remove` audit entry whose reason starts with the
    /// definition removed. Returns the schedule as it was.
    ///
    /// # Errors
    /// [`Error::NoSuchSchedule`]; [`Error::Invalid`] for a bad operator or
    /// reason.
    pub async fn remove_schedule(&self, action: &ScheduleAction) -> Result<StoredSchedule> {
        action.validate()?;
        for _ in 0..RACES_TOLERATED {
            let Some(stored) = self.find_schedule(&action.name).await? else {
                return Err(Error::NoSuchSchedule(action.name.to_string()));
            };
            let change = format!("removed {}", stored.definition.describe());
            let reason = reason_after(&change, action.reason.as_deref())?;
            let by = stamp(&action.operator, Some(&reason));
            // Removed only while it still has the definition the entry
            // records; replaced meanwhile, it is read again.
            let removed = self
                .store
                .change_schedule(&ScheduleChange::Remove(stored.definition), &by)
                .await?;
            if let Some(removed) = removed {
                return Ok(removed);
            }
        }
        Err(Error::Busy(format!(
            "the schedule `{}` kept changing under another operator",
            action.name
        )))
    }

    /// Pauses a stored schedule: no service enqueues its ticks until it is
    /// resumed. A `schedule_pause` audit entry; nothing is written when it
    /// was paused already (`changed` is `false`).
    ///
    /// # Errors
    /// [`Error::NoSuchSchedule`]; [`Error::Invalid`] for a bad operator or
    /// reason.
    pub async fn pause_schedule(&self, action: &ScheduleAction) -> Result<ScheduleActed> {
        self.toggle_schedule(action, true).await
    }

    /// Resumes a paused schedule from now on: ticks missed while it was
    /// paused are not enqueued, whatever its misfire policy. A
    /// `schedule_resume` audit entry; nothing is written when it was not
    /// paused (`changed` is `false`).
    ///
    /// # Errors
    /// As [`Admin::pause_schedule`].
    pub async fn resume_schedule(&self, action: &ScheduleAction) -> Result<ScheduleActed> {
        self.toggle_schedule(action, false).await
    }

    async fn toggle_schedule(&self, action: &ScheduleAction, pause: bool) -> Result<ScheduleActed> {
        action.validate()?;
        let by = stamp(&action.operator, action.reason.as_deref());
        let change = if pause {
            ScheduleChange::Pause(action.name.clone())
        } else {
            ScheduleChange::Resume(action.name.clone())
        };
        for _ in 0..RACES_TOLERATED {
            if let Some(schedule) = self.store.change_schedule(&change, &by).await? {
                return Ok(ScheduleActed {
                    changed: true,
                    schedule,
                });
            }
            match self.find_schedule(&action.name).await? {
                None => return Err(Error::NoSuchSchedule(action.name.to_string())),
                Some(schedule) if schedule.paused.is_some() == pause => {
                    return Ok(ScheduleActed {
                        changed: false,
                        schedule,
                    });
                }
                Some(_) => {} // toggled meanwhile: try again
            }
        }
        Err(Error::Busy(format!(
            "the schedule `{}` kept changing under another operator",
            action.name
        )))
    }

    /// The stored schedules, by name.
    pub async fn schedules(&self) -> Result<Vec<StoredSchedule>> {
        self.store.schedules().await
    }

    /// One stored schedule.
    ///
    /// # Errors
    /// [`Error::NoSuchSchedule`].
    pub async fn schedule(&self, name: &Name) -> Result<StoredSchedule> {
        self.find_schedule(name)
            .await?
            .ok_or_else(|| Error::NoSuchSchedule(name.to_string()))
    }

    async fn find_schedule(&self, name: &Name) -> Result<Option<StoredSchedule>> {
        Ok(self
            .store
            .schedules()
            .await?
            .into_iter()
            .find(|s| &s.definition.name == name))
    }

    /// One job, or [`Error::NotFound`].
    pub async fn job(&self, id: &JobId) -> Result<Job> {
        self.jobs.get(id).await
    }

    /// One job with its attempt history and audit entries.
    pub async fn detail(&self, id: &JobId) -> Result<JobDetail> {
        self.store.detail(id).await
    }

    /// What a bulk replay or purge by filter acts on: the jobs in the
    /// filter's state matching every filter given, oldest first, at most
    /// its limit. The action itself (all or none) is [`Admin::replay`],
    /// [`Admin::copy`] or [`Admin::purge`] on their ids.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a limit out of range.
    pub async fn matching(&self, filter: &BulkFilter) -> Result<Vec<JobBrief>> {
        filter.validate()?;
        let wanted = filter.limit as usize;
        let mut page = filter.to_job_filter();
        // Read in pages with the listings' byte budget, each kept only as
        // briefs: the selection's memory is bounded whatever the payloads
        // weigh. (The action's own step still reads back the rows it
        // changes.)
        page.max_bytes = Some(crate::filter::DEFAULT_PAGE_BYTES);
        let mut found = Vec::new();
        loop {
            page.limit = Some(u32::try_from(wanted - found.len()).unwrap_or(u32::MAX));
            let jobs = self.page_after(&page).await?;
            let next = page.next_after(&jobs).cloned();
            found.extend(jobs.iter().map(JobBrief::from));
            match next {
                Some(after) if found.len() < wanted => page.after = Some(after),
                _ => return Ok(found),
            }
        }
    }

    /// One page of `filter`; when the job it starts after has gone (purged
    /// or pruned since the last page was read), [`Error::Busy`]: the
    /// selection cannot go on where it stopped, and a bulk action must not
    /// act on a part of it without saying so.
    async fn page_after(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        let gone = |after: &JobId| {
            Error::Busy(format!(
                "job {after} left the selection while it was being read (purged or pruned \
                 meanwhile); nothing was done: run the command again"
            ))
        };
        match (self.store.list(filter).await, &filter.after) {
            (Err(Error::NotFound(_)), Some(after)) => Err(gone(after)),
            (Ok(jobs), Some(after)) if jobs.is_empty() => match self.jobs.get(after).await {
                Err(Error::NotFound(_)) => Err(gone(after)),
                Err(e) => Err(e),
                Ok(_) => Ok(jobs),
            },
            (result, _) => result,
        }
    }

    /// The jobs named, as briefs, in the order named (each must exist).
    ///
    /// # Errors
    /// [`Error::NotFound`] naming the first job that is not stored.
    pub async fn briefs(&self, ids: &[JobId]) -> Result<Vec<JobBrief>> {
        let mut found = Vec::with_capacity(ids.len());
        for id in ids {
            found.push(JobBrief::from(&self.jobs.get(id).await?));
        }
        Ok(found)
    }

    /// Jobs matching the filter, oldest first.
    pub async fn list(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        self.store.list(filter).await
    }

    /// A stored workflow: its counts by state and one page of its steps
    /// (oldest first, at most `limit`, after the step `after`), each with
    /// the ids it depends on.
    ///
    /// # Errors
    /// [`Error::NoSuchWorkflow`] when no stored job carries the id.
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
    /// [`Error::Invalid`] for a bad operator or reason;
    /// [`Error::NoSuchWorkflow`] for an unknown workflow.
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

    /// A batch: whether it is sealed, its counts by state, and its
    /// callbacks' jobs.
    ///
    /// # Errors
    /// [`Error::NoSuchBatch`] when none has that id.
    pub async fn batch(&self, id: &WorkflowId) -> Result<crate::BatchView> {
        let batch = self.store.batch(id).await?;
        let job = |id: Option<JobId>| async move {
            match id {
                None => Ok(None),
                Some(id) => match self.jobs.get(&id).await {
                    Ok(job) => Ok(Some(job)),
                    Err(Error::NotFound(_)) => Ok(None),
                    Err(e) => Err(e),
                },
            }
        };
        let on_success_job = job(batch.on_success.clone()).await?;
        let on_finish_job = job(batch.on_finish.clone()).await?;
        Ok(crate::BatchView {
            batch,
            on_success_job,
            on_finish_job,
        })
    }

    /// Audit entries, newest first.
    pub async fn audit_log(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        self.store.audit_log(filter).await
    }

    /// The operator signals (`errand stats`, `/metrics`, the dashboard).
    pub async fn stats(&self, req: &StatsRequest) -> Result<Stats> {
        self.store.stats(req).await
    }

    /// The charts of one queue (or of every queue added together) over the
    /// window ending in the minute of `now`, from the per-minute counts
    /// workers report (see [`crate::Tally`]).
    pub async fn charts(
        &self,
        queue: Option<Name>,
        window: ChartWindow,
        now: Timestamp,
    ) -> Result<Charts> {
        let rows = self
            .store
            .minutes(&Charts::query(queue.clone(), window, now))
            .await?;
        Ok(Charts::from_minutes(queue, window, now, &rows))
    }

    /// The copy of the job `id`, with its original's dependencies, or why
    /// it cannot be made.
    async fn copy_of(&self, id: &JobId) -> Result<NewJob> {
        let original = self.jobs.get(id).await?;
        if !CopyRequest::accepts(original.state) {
            return Err(refusal(&original, CopyRequest::REFUSED));
        }
        if original.on_dependency_failure.is_none() {
            return NewJob::copy_of(&original, Vec::new());
        }
        let detail = self.store.detail(id).await?;
        if let Some(gone) = detail.dependencies.iter().find(|d| d.state.is_none()) {
            return Err(refusal(
                &original,
                &format!(
                    "it depends on job {}, which is gone (purged or pruned), so a copy could \
                     never read its inputs: enqueue the work again as a new job",
                    gone.id
                ),
            ));
        }
        let depends_on = detail.dependencies.into_iter().map(|d| d.id).collect();
        NewJob::copy_of(&detail.job, depends_on)
    }

    /// Runs `step` (one all-or-none backend step over `ids`); when it
    /// changes none of the jobs named, finds the job that stopped it: one
    /// in a state other than `accepts.0` (refused with the hint
    /// `accepts.1`), or one the `guard` stops. If every job is acceptable
    /// on that second look, another process changed them in between, and
    /// the step (which changed nothing) is tried again.
    async fn all_or_refusal<T, F, Fut>(
        &self,
        ids: &[JobId],
        accepts: (&[JobState], &str),
        guard: Guard,
        step: F,
    ) -> Result<Vec<T>>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<Vec<T>>>,
    {
        let (allowed, hint) = accepts;
        for _ in 0..RACES_TOLERATED {
            let changed = step().await?;
            if changed.len() == ids.len() {
                return Ok(changed);
            }
            if !changed.is_empty() {
                return Err(partial(changed.len(), ids.len()));
            }
            for id in ids {
                let job = self.jobs.get(id).await?;
                if !allowed.contains(&job.state) {
                    return Err(refusal(&job, hint));
                }
                if let Some(refused) = self.guarded(guard, ids, &job).await? {
                    return Err(refused);
                }
            }
        }
        Err(raced(ids))
    }

    /// Why `guard` stops an action on `job` (one of `ids`), if it does.
    async fn guarded(&self, guard: Guard, ids: &[JobId], job: &Job) -> Result<Option<Error>> {
        let needs_detail = match guard {
            Guard::StateOnly => false,
            Guard::NoWaitingDependents => job.has_dependents,
            Guard::Releasable => job.waiting_on > 0,
        };
        if !needs_detail {
            return Ok(None);
        }
        let detail = match self.store.detail(&job.id).await {
            Ok(detail) => detail,
            // Gone since: the next round reports it.
            Err(Error::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(match guard {
            Guard::StateOnly => None,
            Guard::NoWaitingDependents => crate::deps::purge_would_strand(&detail),
            Guard::Releasable => crate::deps::replay_would_strand(&detail, ids),
        })
    }
}

/// A rule besides a job's state that an action's store step checks in its
/// own statement (so no other transaction can slip in between a check and
/// the change), and that [`Admin`] explains when the step refuses.
#[derive(Clone, Copy, Debug)]
enum Guard {
    /// The state alone decides.
    StateOnly,
    /// A purge leaves no blocked job waiting for a job that is gone.
    NoWaitingDependents,
    /// A replay puts no job back to wait for a dependency that can no
    /// longer release it ([`crate::DependencyFailure::may_wait_for`]).
    Releasable,
}

/// The ids in their first-named order, each once.
fn distinct(ids: &[JobId]) -> Vec<JobId> {
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    ids.iter().filter(|id| seen.insert(*id)).cloned().collect()
}

/// `items` in the order of `ids` (a backend answers in its own order).
fn in_order<T>(ids: &[JobId], mut items: Vec<T>, id_of: impl Fn(&T) -> &JobId) -> Vec<T> {
    let rank: std::collections::HashMap<&JobId, usize> =
        ids.iter().enumerate().map(|(i, id)| (id, i)).collect();
    items.sort_by_key(|item| rank.get(id_of(item)).copied().unwrap_or(usize::MAX));
    items
}

fn stamp(operator: &str, reason: Option<&str>) -> AuditStamp {
    AuditStamp {
        operator: operator.to_owned(),
        reason: reason.map(str::to_owned),
    }
}

fn refusal(job: &Job, hint: &str) -> Error {
    Error::InvalidState {
        id: job.id.to_string(),
        state: job.state.to_string(),
        hint: hint.to_owned(),
    }
}

/// A backend step that changed some of the jobs named but not all has
/// broken its contract; trying it again could act twice on those it did
/// change, so the action stops and says so.
fn partial(changed: usize, named: usize) -> Error {
    Error::storage(format!(
        "the store changed {changed} of the {named} jobs named, where it must change all or \
         none; this is a defect in the storage backend: check the audit log for what changed"
    ))
}

fn raced(ids: &[JobId]) -> Error {
    Error::Busy(format!(
        "the {} job(s) named kept changing while the action ran (other processes are \
         working on them); nothing was changed by it",
        ids.len()
    ))
}

/// An audit reason that starts with what changed: `change` alone, or
/// `change: reason`. Refused when the whole is longer than a reason may
/// be.
fn reason_after(change: &str, reason: Option<&str>) -> Result<String> {
    let Some(reason) = reason else {
        return Ok(change.to_owned());
    };
    let whole = format!("{change}: {reason}");
    if whole.len() > MAX_REASON_BYTES {
        return Err(Error::invalid(format!(
            "the reason is {} bytes too long once the change ({change}) is written before it; \
             shorten it to at most {} bytes",
            whole.len() - MAX_REASON_BYTES,
            MAX_REASON_BYTES.saturating_sub(change.len() + 2)
        )));
    }
    Ok(whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<JobId> {
        names.iter().map(|n| JobId::new(*n).unwrap()).collect()
    }

    #[test]
    fn each_job_is_named_once_in_first_named_order() {
        assert_eq!(
            distinct(&ids(&["b", "a", "b", "c", "a"])),
            ids(&["b", "a", "c"])
        );
    }

    #[test]
    fn answers_follow_the_request_order() {
        let order = ids(&["c", "a", "b"]);
        assert_eq!(in_order(&order, ids(&["a", "b", "c"]), |id| id), order);
    }

    #[test]
    fn the_change_is_written_before_the_reason_and_the_whole_is_bounded() {
        assert_eq!(reason_after("priority 5", None).unwrap(), "priority 5");
        assert_eq!(
            reason_after("run now", Some("customer waiting")).unwrap(),
            "run now: customer waiting"
        );
        let long = "x".repeat(MAX_REASON_BYTES - 5);
        let err = reason_after("run now", Some(&long)).unwrap_err();
        assert!(err.to_string().contains("shorten it"), "{err}");
    }
}
