//! [`JobStore`] for [`PgStore`]: each method takes a pooled connection
//! and calls the function that does the work (insert.rs, claim.rs,
//! settle.rs, reads.rs, maintenance.rs, minutes.rs).

use std::time::Duration;

use async_trait::async_trait;
use errand_core::{
    ClaimRequest, ClaimedJob, Error, Failure, Inserted, Job, JobId, JobStore, Lease, NewJob,
    Payload, RateBucket, RateLimit, Result, SweepReport, Timestamp, WorkerReport, bounds,
    check_recorded_text,
};

use crate::error::map_err;
use crate::{
    Param, PgStore, admin, claim, conn, insert, maintenance, minutes, reads, settle, workflow,
};

#[async_trait]
impl JobStore for PgStore {
    fn keyring(&self) -> Option<&errand_core::encryption::Keyring> {
        self.keys.as_deref()
    }

    async fn insert(&self, mut job: NewJob) -> Result<Inserted> {
        self.seal_jobs(std::slice::from_mut(&mut job))?;
        let _written = self.touched();
        // Dependencies and uniqueness are judged inside a transaction.
        if !job.depends_on.is_empty() || job.unique.is_some() || job.batch.is_some() {
            return self
                .insert_linked(std::slice::from_ref(&job))
                .await?
                .pop()
                .ok_or_else(|| Error::storage("inserting one job answered with none"));
        }
        let client = self.client().await?;
        insert::insert(&client, &self.queries, self.now(), &job).await
    }

    async fn insert_many(&self, mut jobs: Vec<NewJob>) -> Result<Vec<Inserted>> {
        self.seal_jobs(&mut jobs)?;
        let _written = self.touched();
        if jobs
            .iter()
            .any(|j| !j.depends_on.is_empty() || j.unique.is_some() || j.batch.is_some())
        {
            return self.insert_linked(&jobs).await;
        }
        let client = self.client().await?;
        insert::insert_many_in_chunks(&client, &self.queries, self.now(), &jobs).await
    }

    async fn seal_batch(&self, seal: &errand_core::BatchSeal) -> Result<errand_core::Batch> {
        let _written = self.touched();
        let mut client = self.client().await?;
        let tx = conn::read_committed(&mut client).await?;
        let out = workflow::seal(&tx, &self.queries, self.now(), seal).await?;
        tx.commit().await.map_err(map_err)?;
        Ok(out)
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        let (_, claimed) = self.claim_resuming(&[], req).await?;
        Ok(claimed)
    }

    async fn complete(&self, lease: &Lease) -> Result<Job> {
        let mut client = self.client().await?;
        let q = &self.queries;
        let no_output: Option<&str> = None;
        settle::settle(
            &mut client,
            q,
            self.now(),
            &q.complete,
            lease,
            &[&no_output],
        )
        .await
    }

    async fn complete_with_output(&self, lease: &Lease, output: &Payload) -> Result<Job> {
        let mut client = self.client().await?;
        let q = &self.queries;
        let sealed = self.seal_output(&lease.id, Some(output))?;
        let output = sealed.as_deref().map(Payload::as_str);
        settle::settle(&mut client, q, self.now(), &q.complete, lease, &[&output]).await
    }

    async fn complete_with_children(
        &self,
        lease: &Lease,
        output: Option<&Payload>,
        children: &[NewJob],
    ) -> Result<errand_core::ChildrenAdded> {
        let mut children = children.to_vec();
        errand_core::check_children(&mut children)?;
        self.seal_jobs(&mut children)?;
        let output = self.seal_output(&lease.id, output)?;
        let _written = self.touched();
        let mut client = self.client().await?;
        // Read committed: the edges are added on a snapshot taken after
        // the dependents' locks, which sees what their releases committed.
        let tx = conn::read_committed(&mut client).await?;
        let added = crate::children::complete_adding(
            &tx,
            &self.queries,
            self.now(),
            lease,
            output.as_deref(),
            children,
        )
        .await?;
        tx.commit().await.map_err(map_err)?;
        Ok(added)
    }

    async fn dependency_outputs(&self, id: &JobId) -> Result<Vec<(JobId, Option<Payload>)>> {
        let client = self.client().await?;
        reads::dependency_outputs(&client, &self.queries, id).await
    }

    async fn dependency_outputs_after(
        &self,
        id: &JobId,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<(JobId, Option<Payload>)>> {
        let client = self.client().await?;
        reads::dependency_outputs_after(&client, &self.queries, id, after, limit).await
    }

    async fn complete_many(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        let mut client = self.client().await?;
        settle::complete_leases(&mut client, &self.queries, self.now(), leases).await
    }

    async fn complete_and_claim(
        &self,
        leases: &[Lease],
        req: &ClaimRequest,
    ) -> Result<(Vec<bool>, Result<Vec<ClaimedJob>>)> {
        let (acked, claimed) = self.claim_resuming(leases, req).await?;
        Ok((acked, Ok(claimed)))
    }

    async fn fail(&self, lease: &Lease, failure: Failure) -> Result<Job> {
        let _written = self.touched();
        failure.validate()?;
        let mut client = self.client().await?;
        let q = &self.queries;
        let (at, delay) = settle::retry_params(&failure);
        let class = failure.class.as_str();
        let extra: [Param<'_>; 4] = [&failure.error, &class, &at, &delay];
        settle::settle(&mut client, q, self.now(), &q.fail, lease, &extra).await
    }

    async fn fail_many(&self, items: &[(Lease, Failure)]) -> Result<Vec<Option<Job>>> {
        let _written = self.touched();
        for (_, failure) in items {
            failure.validate()?;
        }
        if items.is_empty() {
            return Ok(Vec::new());
        }
        let mut client = self.client().await?;
        settle::fail_leases(&mut client, &self.queries, self.now(), items).await
    }

    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<Job> {
        let _written = self.touched();
        bounds::check_delay("a snooze", delay)?;
        let client = self.client().await?;
        settle::snooze(&client, &self.queries, self.now(), lease, delay, "snoozed").await
    }

    async fn cancel_running(&self, lease: &Lease, reason: &str) -> Result<Job> {
        check_recorded_text("the reason", reason)?;
        let mut client = self.client().await?;
        let q = &self.queries;
        let reason = reason.to_owned();
        settle::settle(
            &mut client,
            q,
            self.now(),
            &q.cancel_running,
            lease,
            &[&reason],
        )
        .await
    }

    async fn heartbeat(&self, lease: &Lease, extend: Duration) -> Result<Timestamp> {
        bounds::check_lease("a lease renewal", extend)?;
        let client = self.client().await?;
        settle::heartbeat(&client, &self.queries, self.now(), lease, extend, None).await
    }

    async fn heartbeat_with_progress(
        &self,
        lease: &Lease,
        extend: Duration,
        progress: &errand_core::Progress,
    ) -> Result<Timestamp> {
        bounds::check_lease("a lease renewal", extend)?;
        let client = self.client().await?;
        let progress = progress.to_json()?;
        settle::heartbeat(
            &client,
            &self.queries,
            self.now(),
            lease,
            extend,
            Some(&progress),
        )
        .await
    }

    async fn release(&self, lease: &Lease) -> Result<Job> {
        let _written = self.touched();
        let client = self.client().await?;
        settle::snooze(
            &client,
            &self.queries,
            self.now(),
            lease,
            Duration::ZERO,
            "released",
        )
        .await
    }

    async fn suspend(&self, lease: &Lease, wait: &errand_core::Await) -> Result<Job> {
        let _written = self.touched();
        let mut client = self.client().await?;
        // Read committed: the suspend's statement reads what a signal
        // committed while it waited for the job's lock.
        let tx = conn::read_committed(&mut client).await?;
        let job = crate::signals::suspend(&tx, &self.queries, self.now(), lease, wait).await?;
        tx.commit().await.map_err(map_err)?;
        Ok(job)
    }

    async fn signal(&self, signal: &errand_core::NewSignal) -> Result<errand_core::Signalled> {
        let signal = &*errand_core::encryption::seal_signal(self.keyring(), signal)?;
        let _written = self.touched();
        let mut client = self.client().await?;
        if !signal.buffer {
            // One statement, in autocommit (see signals.rs).
            return crate::signals::signal(&client, &self.queries, self.now(), signal).await;
        }
        let tx = conn::read_committed(&mut client).await?;
        let out = crate::signals::signal(&tx, &self.queries, self.now(), signal).await?;
        tx.commit().await.map_err(map_err)?;
        Ok(out)
    }

    async fn received_signal(&self, id: &JobId) -> Result<Option<errand_core::ReceivedSignal>> {
        let client = self.client().await?;
        reads::received_signal(&client, &self.queries, id).await
    }

    async fn expire_waits(&self, limit: u32) -> Result<Vec<Job>> {
        let _written = self.touched();
        let mut client = self.client().await?;
        let tx = conn::read_committed(&mut client).await?;
        let jobs = crate::signals::expire_waits(&tx, &self.queries, self.now(), limit).await?;
        tx.commit().await.map_err(map_err)?;
        Ok(jobs)
    }

    async fn sweep_expired(&self) -> Result<SweepReport> {
        let mut client = self.client().await?;
        maintenance::sweep(&mut client, &self.queries, self.now()).await
    }

    async fn prune(&self, older_than: Duration, limit: u32) -> Result<u64> {
        let client = self.client().await?;
        maintenance::prune(&client, &self.queries, self.now(), older_than, limit).await
    }

    async fn get(&self, id: &JobId) -> Result<Job> {
        let client = self.client().await?;
        reads::get(&client, &self.queries, id).await
    }

    async fn finish_signal(&self, id: &JobId) -> Result<Box<dyn errand_core::WorkSignal>> {
        // Listening before the job is marked: an end that commits after
        // the mark is notified to a connection already listening, or, if
        // the listener is (re)connecting, found when it wakes every
        // waiter on its return. The first waiter of a process waits for
        // the listener to start (its self-test, a few milliseconds; at
        // most its probe's timeout, after which the waiter looks every
        // second until notifications arrive).
        let listener = self.listener();
        listener.until_healthy(crate::listen::PROBE_TIMEOUT).await;
        let signal = listener.finish_signal(id.as_str());
        let client = self.client().await?;
        let marked = client.prepare_cached(&self.queries.mark_awaited).await;
        client
            .execute(&marked.map_err(map_err)?, &[&id.as_str()])
            .await
            .map_err(map_err)?;
        Ok(Box::new(signal))
    }

    async fn report_worker(&self, report: &WorkerReport) -> Result<()> {
        let mut client = self.client().await?;
        if report.one_shot {
            return admin::report_one_shot(&mut client, &self.queries, self.now(), report).await;
        }
        admin::report_worker(&client, &self.queries, self.now(), report).await
    }

    async fn take_tokens(&self, bucket: &RateBucket, limit: RateLimit, want: u32) -> Result<u32> {
        let client = self.client().await?;
        claim::take_tokens(&client, &self.queries, self.now(), bucket, limit, want).await
    }

    async fn record_minutes(&self, counts: &[errand_core::MinuteCount]) -> Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        let client = self.client().await?;
        minutes::record(&client, &self.queries, counts).await
    }

    async fn prune_minutes(&self, before: i64) -> Result<u64> {
        let client = self.client().await?;
        minutes::prune(&client, &self.queries, before).await
    }
}
