//! [`AdminStore`] for [`SqliteStore`]: each method hands its operation (in
//! admin.rs, reads.rs, stats.rs, …) to the writer thread or to a reader.

use async_trait::async_trait;
use errand_core::{
    AdminStore, AuditEntry, AuditFilter, AuditStamp, Job, JobDetail, JobFilter, JobId, Name,
    NewJob, PausedQueue, QueueLimit, Reschedule, Result, Stats, StatsRequest,
};

use crate::SqliteStore;
use crate::conn::in_one_read;
use crate::{admin, audit, batch, counts, minutes, queues, reads, schedules, stats, workflows};

#[async_trait]
impl AdminStore for SqliteStore {
    async fn replay_jobs(&self, ids: &[JobId], by: &AuditStamp) -> Result<Vec<Job>> {
        let (ids, by) = (ids.to_vec(), by.clone());
        self.write(move |c, now| admin::replay(c, &ids, &by, now))
            .await
    }

    async fn cancel_jobs(&self, ids: &[JobId], by: &AuditStamp) -> Result<Vec<Job>> {
        let (ids, by) = (ids.to_vec(), by.clone());
        self.write(move |c, now| admin::cancel(c, &ids, &by, now))
            .await
    }

    async fn purge_jobs(&self, ids: &[JobId], by: &AuditStamp) -> Result<Vec<JobId>> {
        let (ids, by) = (ids.to_vec(), by.clone());
        self.submit(move |c, now| admin::purge(c, &ids, &by, now))
            .await
    }

    async fn copy_jobs(&self, copies: &[(JobId, NewJob)], by: &AuditStamp) -> Result<Vec<Job>> {
        let (mut copies, by) = (copies.to_vec(), by.clone());
        for (_, copy) in &mut copies {
            self.seal_jobs(std::slice::from_mut(copy))?;
        }
        self.write(move |c, now| admin::copy(c, &copies, &by, now))
            .await
    }

    async fn reschedule_jobs(
        &self,
        ids: &[JobId],
        to: &Reschedule,
        by: &AuditStamp,
    ) -> Result<Vec<Job>> {
        let (ids, to, by) = (ids.to_vec(), *to, by.clone());
        self.write(move |c, now| admin::reschedule(c, &ids, &to, &by, now))
            .await
    }

    async fn pause_queue(&self, queue: &Name, by: &AuditStamp) -> Result<bool> {
        let (queue, by) = (queue.clone(), by.clone());
        self.submit(move |c, now| queues::pause(c, &queue, &by, now))
            .await
    }

    async fn resume_queue(&self, queue: &Name, by: &AuditStamp) -> Result<bool> {
        let (queue, by) = (queue.clone(), by.clone());
        self.write(move |c, now| queues::resume(c, &queue, &by, now))
            .await
    }

    async fn set_queue_limit(
        &self,
        queue: &Name,
        concurrency: Option<u32>,
        by: &AuditStamp,
    ) -> Result<bool> {
        let (queue, by) = (queue.clone(), by.clone());
        self.write(move |c, now| queues::set_limit(c, &queue, concurrency, &by, now))
            .await
    }

    async fn queue_limits(&self) -> Result<Vec<QueueLimit>> {
        self.read(queues::limits).await
    }

    async fn stored_values(
        &self,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<errand_core::encryption::ValuePage> {
        let after = after.cloned();
        self.read(move |c| in_one_read(c, |c| crate::rekey::page(c, after.as_ref(), limit)))
            .await
    }

    async fn rewrite_values(&self, rewrites: &[errand_core::encryption::Rewrite]) -> Result<u64> {
        let rewrites = rewrites.to_vec();
        self.submit(move |c, _| crate::rekey::rewrite(c, &rewrites))
            .await
    }

    async fn count_exactly(&self) -> Result<Vec<errand_core::ExactCount>> {
        let clock = self.inner.options.clock.clone();
        // Counted on a reader (the writer goes on meanwhile), stored by
        // the writer in one short transaction.
        let counts = self
            .read(move |c| in_one_read(c, |c| counts::count(c, clock.now())))
            .await?;
        let stored = counts.clone();
        self.submit(move |c, _| counts::store(c, &stored)).await?;
        Ok(counts)
    }

    async fn detail(&self, id: &JobId) -> Result<JobDetail> {
        let id = id.clone();
        self.read(move |c| reads::detail(c, &id)).await
    }

    async fn list(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        let filter = filter.clone();
        self.read(move |c| reads::list(c, &filter, &errand_core::Meta::new()))
            .await
    }

    async fn search_candidates(
        &self,
        filter: &JobFilter,
        meta: &errand_core::Meta,
    ) -> Result<Vec<Job>> {
        let (filter, meta) = (filter.clone(), meta.clone());
        self.read(move |c| reads::list(c, &filter, &meta)).await
    }

    async fn workflow_counts(
        &self,
        workflow: &errand_core::WorkflowId,
    ) -> Result<Vec<(errand_core::JobState, u64)>> {
        let workflow = workflow.clone();
        self.read(move |c| workflows::workflow_counts(c, &workflow))
            .await
    }

    async fn dependency_edges(
        &self,
        ids: &[JobId],
        first: u32,
    ) -> Result<Vec<errand_core::StepEdge>> {
        let ids = ids.to_vec();
        self.read(move |c| workflows::dependency_edges(c, &ids, first))
            .await
    }

    async fn batch(&self, id: &errand_core::WorkflowId) -> Result<errand_core::Batch> {
        let id = id.clone();
        self.read(move |c| batch::batch(c, &id)).await
    }

    async fn paused_queues(&self) -> Result<Vec<PausedQueue>> {
        self.read(queues::paused).await
    }

    async fn change_schedule(
        &self,
        change: &errand_core::ScheduleChange,
        by: &AuditStamp,
    ) -> Result<Option<errand_core::StoredSchedule>> {
        let (change, by) = (change.clone(), by.clone());
        self.submit(move |c, now| schedules::change(c, &change, &by, now))
            .await
    }

    async fn schedules(&self) -> Result<Vec<errand_core::StoredSchedule>> {
        self.read(schedules::list).await
    }

    async fn audit_log(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let filter = filter.clone();
        self.read(move |c| audit::audit_log(c, &filter)).await
    }

    async fn stats(&self, req: &StatsRequest) -> Result<Stats> {
        let req = *req;
        let clock = self.inner.options.clock.clone();
        // One read transaction, so the counts agree with each other.
        self.read(move |c| in_one_read(c, |c| stats::stats(c, &req, clock.now())))
            .await
    }

    async fn minutes(
        &self,
        query: &errand_core::MinuteQuery,
    ) -> Result<Vec<errand_core::MinuteRow>> {
        let query = query.clone();
        self.read(move |c| minutes::read(c, &query)).await
    }
}
