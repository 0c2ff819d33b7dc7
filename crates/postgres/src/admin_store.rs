//! [`AdminStore`] for [`PgStore`]: each method takes a pooled connection
//! and calls the function that does the work (admin.rs, reads.rs,
//! workflow.rs, batch.rs, schedules.rs, minutes.rs, queues.rs, audit.rs).

use async_trait::async_trait;
use errand_core::{
    AdminStore, AuditEntry, AuditFilter, AuditStamp, Job, JobDetail, JobFilter, JobId, Name,
    NewJob, PausedQueue, QueueLimit, Reschedule, Result, Stats, StatsRequest,
};

use crate::{PgStore, admin, audit, batch, counts, minutes, queues, reads, schedules, workflow};

#[async_trait]
impl AdminStore for PgStore {
    async fn replay_jobs(&self, ids: &[JobId], by: &AuditStamp) -> Result<Vec<Job>> {
        let _written = self.touched();
        let mut client = self.client().await?;
        admin::replay(&mut client, &self.queries, self.now(), ids, by).await
    }

    async fn cancel_jobs(&self, ids: &[JobId], by: &AuditStamp) -> Result<Vec<Job>> {
        let mut client = self.client().await?;
        admin::cancel(&mut client, &self.queries, self.now(), ids, by).await
    }

    async fn purge_jobs(&self, ids: &[JobId], by: &AuditStamp) -> Result<Vec<JobId>> {
        let mut client = self.client().await?;
        admin::purge(&mut client, &self.queries, self.now(), ids, by).await
    }

    async fn copy_jobs(&self, copies: &[(JobId, NewJob)], by: &AuditStamp) -> Result<Vec<Job>> {
        let mut copies = copies.to_vec();
        for (_, copy) in &mut copies {
            self.seal_jobs(std::slice::from_mut(copy))?;
        }
        let _written = self.touched();
        let mut client = self.client().await?;
        admin::copy(&mut client, &self.queries, self.now(), &copies, by).await
    }

    async fn reschedule_jobs(
        &self,
        ids: &[JobId],
        to: &Reschedule,
        by: &AuditStamp,
    ) -> Result<Vec<Job>> {
        let _written = self.touched();
        let client = self.client().await?;
        admin::reschedule(&client, &self.queries, self.now(), ids, to, by).await
    }

    async fn pause_queue(&self, queue: &Name, by: &AuditStamp) -> Result<bool> {
        let mut client = self.client().await?;
        queues::pause(&mut client, &self.queries, self.now(), queue, by).await
    }

    async fn resume_queue(&self, queue: &Name, by: &AuditStamp) -> Result<bool> {
        let _written = self.touched();
        let mut client = self.client().await?;
        queues::resume(&mut client, &self.queries, self.now(), queue, by).await
    }

    async fn set_queue_limit(
        &self,
        queue: &Name,
        concurrency: Option<u32>,
        by: &AuditStamp,
    ) -> Result<bool> {
        // A cap cleared or raised lets jobs start that sort before the
        // resume point of a claim across every queue.
        let _written = self.touched();
        let mut client = self.client().await?;
        queues::set_limit(
            &mut client,
            &self.queries,
            self.now(),
            queue,
            concurrency,
            by,
        )
        .await
    }

    async fn queue_limits(&self) -> Result<Vec<QueueLimit>> {
        let client = self.client().await?;
        queues::limits(&client, &self.queries).await
    }

    async fn count_exactly(&self) -> Result<Vec<errand_core::ExactCount>> {
        let mut client = self.client().await?;
        counts::count_exactly(&mut client, &self.queries, self.now()).await
    }

    async fn stored_values(
        &self,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<errand_core::encryption::ValuePage> {
        let client = self.client().await?;
        crate::rekey::page(&client, &self.queries, after, limit).await
    }

    async fn rewrite_values(&self, rewrites: &[errand_core::encryption::Rewrite]) -> Result<u64> {
        let mut client = self.client().await?;
        crate::rekey::rewrite(&mut client, &self.queries, rewrites).await
    }

    async fn detail(&self, id: &JobId) -> Result<JobDetail> {
        let mut client = self.client().await?;
        reads::detail(&mut client, &self.queries, id).await
    }

    async fn list(&self, filter: &JobFilter) -> Result<Vec<Job>> {
        self.search_candidates(filter, &errand_core::Meta::new())
            .await
    }

    async fn search_candidates(
        &self,
        filter: &JobFilter,
        meta: &errand_core::Meta,
    ) -> Result<Vec<Job>> {
        let mut client = self.client().await?;
        if filter.max_bytes.is_some() {
            return reads::list_within_budget(&mut client, &self.queries, filter, meta).await;
        }
        reads::list(&client, &self.queries, filter, meta).await
    }

    async fn workflow_counts(
        &self,
        workflow: &errand_core::WorkflowId,
    ) -> Result<Vec<(errand_core::JobState, u64)>> {
        let client = self.client().await?;
        workflow::workflow_counts(&client, &self.queries, workflow).await
    }

    async fn dependency_edges(
        &self,
        ids: &[JobId],
        first: u32,
    ) -> Result<Vec<errand_core::StepEdge>> {
        let client = self.client().await?;
        workflow::dependency_edges(&client, &self.queries, ids, first).await
    }

    async fn batch(&self, id: &errand_core::WorkflowId) -> Result<errand_core::Batch> {
        let client = self.client().await?;
        batch::batch(&client, &self.queries, id).await
    }

    async fn paused_queues(&self) -> Result<Vec<PausedQueue>> {
        let client = self.client().await?;
        queues::paused(&client, &self.queries).await
    }

    async fn change_schedule(
        &self,
        change: &errand_core::ScheduleChange,
        by: &AuditStamp,
    ) -> Result<Option<errand_core::StoredSchedule>> {
        let mut client = self.client().await?;
        schedules::change(&mut client, &self.queries, self.now(), change, by).await
    }

    async fn schedules(&self) -> Result<Vec<errand_core::StoredSchedule>> {
        let client = self.client().await?;
        schedules::list(&client, &self.queries).await
    }

    async fn audit_log(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>> {
        let client = self.client().await?;
        audit::audit_log(&client, &self.queries, filter).await
    }

    async fn stats(&self, req: &StatsRequest) -> Result<Stats> {
        let mut client = self.client().await?;
        admin::stats(&mut client, &self.queries, self.now(), req).await
    }

    async fn minutes(
        &self,
        query: &errand_core::MinuteQuery,
    ) -> Result<Vec<errand_core::MinuteRow>> {
        let client = self.client().await?;
        minutes::read(&client, &self.queries, query).await
    }
}
