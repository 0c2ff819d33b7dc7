//! [`JobStore`] for [`SqliteStore`]: each method checks its arguments,
//! then hands its operation (in insert.rs, claim.rs, settle.rs,
//! maintenance.rs, …) to the writer thread or to a reader.

use std::time::Duration;

use async_trait::async_trait;
use errand_core::{
    ClaimRequest, ClaimedJob, Failure, Inserted, Job, JobId, JobStore, Lease, NewJob, Payload,
    RateBucket, RateLimit, Result, SweepReport, Timestamp, WorkerReport, bounds,
    check_recorded_text,
};

use crate::SqliteStore;
use crate::{claim, insert, maintenance, minutes, reads, rows, seal, settle, stats};

#[async_trait]
impl JobStore for SqliteStore {
    fn keyring(&self) -> Option<&errand_core::encryption::Keyring> {
        self.inner.options.keys.as_deref()
    }

    async fn insert(&self, mut job: NewJob) -> Result<Inserted> {
        self.seal_jobs(std::slice::from_mut(&mut job))?;
        self.write(move |c, now| insert::insert(c, &job, now)).await
    }

    async fn insert_many(&self, mut jobs: Vec<NewJob>) -> Result<Vec<Inserted>> {
        self.seal_jobs(&mut jobs)?;
        self.write(move |c, now| insert::insert_many(c, &jobs, now))
            .await
    }

    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        req.validate()?;
        let req = req.clone();
        self.inner.steps.note_lease(req.lease);
        self.op(move |c, now| claim::claim(c, &req, now)).await
    }

    async fn complete(&self, lease: &Lease) -> Result<Job> {
        let lease = lease.clone();
        self.op(move |c, now| settle::complete_at(c, &lease, None, now))
            .await
    }

    async fn complete_with_output(&self, lease: &Lease, output: &Payload) -> Result<Job> {
        let output = self
            .seal_output(&lease.id, Some(output))?
            .map(std::borrow::Cow::into_owned);
        let lease = lease.clone();
        self.op(move |c, now| settle::complete_at(c, &lease, output.as_ref(), now))
            .await
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
        let output = self
            .seal_output(&lease.id, output)?
            .map(std::borrow::Cow::into_owned);
        let lease = lease.clone();
        let added = self
            .op(move |c, now| {
                crate::children::complete_adding(c, &lease, output.as_ref(), children, now)
            })
            .await?;
        // New children may be due now.
        self.wake();
        Ok(added)
    }

    async fn dependency_outputs(&self, id: &JobId) -> Result<Vec<(JobId, Option<Payload>)>> {
        let id = id.clone();
        self.read(move |c| reads::dependency_outputs(c, &id)).await
    }

    async fn dependency_outputs_after(
        &self,
        id: &JobId,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<(JobId, Option<Payload>)>> {
        let (id, after) = (id.clone(), after.cloned());
        self.read(move |c| reads::dependency_outputs_after(c, &id, after.as_ref(), limit))
            .await
    }

    async fn complete_many(&self, leases: &[Lease]) -> Result<Vec<bool>> {
        let leases = leases.to_vec();
        self.op(move |c, now| settle::complete_many(c, &leases, now))
            .await
    }

    async fn complete_and_claim(
        &self,
        leases: &[Lease],
        req: &ClaimRequest,
    ) -> Result<(Vec<bool>, Result<Vec<ClaimedJob>>)> {
        req.validate()?;
        let (leases, req) = (leases.to_vec(), req.clone());
        self.inner.steps.note_lease(req.lease);
        // One write operation, so one commit for both.
        self.op(move |c, now| claim::complete_and_claim(c, &leases, &req, now))
            .await
    }

    async fn fail(&self, lease: &Lease, failure: Failure) -> Result<Job> {
        failure.validate()?;
        let lease = lease.clone();
        self.op(move |c, now| settle::fail(c, &lease, &failure, now))
            .await
    }

    async fn fail_many(&self, items: &[(Lease, Failure)]) -> Result<Vec<Option<Job>>> {
        for (_, failure) in items {
            failure.validate()?;
        }
        let items = items.to_vec();
        // One write operation: all recorded in one commit, or none.
        self.op(move |c, now| settle::fail_many(c, &items, now))
            .await
    }

    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<Job> {
        bounds::check_delay("a snooze", delay)?;
        let lease = lease.clone();
        self.op(move |c, now| settle::snooze(c, &lease, delay, now, "snoozed"))
            .await
    }

    async fn cancel_running(&self, lease: &Lease, reason: &str) -> Result<Job> {
        check_recorded_text("the reason", reason)?;
        let (lease, reason) = (lease.clone(), reason.to_owned());
        self.op(move |c, now| settle::cancel_running(c, &lease, &reason, now))
            .await
    }

    async fn heartbeat(&self, lease: &Lease, extend: Duration) -> Result<Timestamp> {
        bounds::check_lease("a lease renewal", extend)?;
        let lease = lease.clone();
        self.inner.steps.note_lease(extend);
        self.op(move |c, now| settle::heartbeat(c, &lease, extend, None, now))
            .await
    }

    async fn heartbeat_with_progress(
        &self,
        lease: &Lease,
        extend: Duration,
        progress: &errand_core::Progress,
    ) -> Result<Timestamp> {
        bounds::check_lease("a lease renewal", extend)?;
        let (lease, progress) = (lease.clone(), progress.to_json()?);
        self.inner.steps.note_lease(extend);
        self.op(move |c, now| settle::heartbeat(c, &lease, extend, Some(&progress), now))
            .await
    }

    async fn seal_batch(&self, seal: &errand_core::BatchSeal) -> Result<errand_core::Batch> {
        let seal = seal.clone();
        self.write(move |c, now| seal::seal(c, &seal, now)).await
    }

    async fn release(&self, lease: &Lease) -> Result<Job> {
        let lease = lease.clone();
        let out = self
            .op(move |c, now| settle::snooze(c, &lease, Duration::ZERO, now, "released"))
            .await;
        if out.is_ok() {
            self.wake();
        }
        out
    }

    async fn suspend(&self, lease: &Lease, wait: &errand_core::Await) -> Result<Job> {
        let (lease, wait) = (lease.clone(), wait.clone());
        self.op(move |c, now| crate::signals::suspend(c, &lease, &wait, now))
            .await
    }

    async fn signal(&self, signal: &errand_core::NewSignal) -> Result<errand_core::Signalled> {
        let signal = errand_core::encryption::seal_signal(self.keyring(), signal)?.into_owned();
        self.op(move |c, now| crate::signals::signal(c, &signal, now.at))
            .await
    }

    async fn received_signal(&self, id: &JobId) -> Result<Option<errand_core::ReceivedSignal>> {
        let id = id.clone();
        self.read(move |c| crate::signals::received(c, &id)).await
    }

    async fn expire_waits(&self, limit: u32) -> Result<Vec<Job>> {
        // Looked for on a reader first: every worker looks once a second,
        // and most looks find nothing, which then takes no turn of the
        // writer.
        let now = self.now();
        if !self
            .read(move |c| crate::signals::waits_due(c, now))
            .await?
        {
            return Ok(Vec::new());
        }
        self.op(move |c, now| crate::signals::expire_waits(c, limit, now.at))
            .await
    }

    async fn sweep_expired(&self) -> Result<SweepReport> {
        self.op(|c, now| {
            Ok(SweepReport {
                dead: maintenance::expire_final(c, now)?,
            })
        })
        .await
    }

    async fn prune(&self, older_than: Duration, limit: u32) -> Result<u64> {
        self.op(move |c, now| maintenance::prune(c, older_than, limit, now.at))
            .await
    }

    async fn get(&self, id: &JobId) -> Result<Job> {
        let id = id.clone();
        self.read(move |c| rows::get(c, &id)).await
    }

    async fn finish_signal(&self, id: &JobId) -> Result<Box<dyn errand_core::WorkSignal>> {
        Ok(Box::new(self.finish_signal_of(id)?))
    }

    async fn report_worker(&self, report: &WorkerReport) -> Result<()> {
        let report = report.clone();
        self.submit(move |c, now| stats::report_worker(c, &report, now))
            .await
    }

    async fn take_tokens(&self, bucket: &RateBucket, limit: RateLimit, want: u32) -> Result<u32> {
        let bucket = bucket.clone();
        self.op(move |c, now| claim::take_tokens(c, &bucket, limit, want, now.at))
            .await
    }

    async fn record_minutes(&self, counts: &[errand_core::MinuteCount]) -> Result<()> {
        if counts.is_empty() {
            return Ok(());
        }
        let counts = counts.to_vec();
        self.submit(move |c, _| minutes::record(c, &counts)).await
    }

    async fn prune_minutes(&self, before: i64) -> Result<u64> {
        self.submit(move |c, _| minutes::prune(c, before)).await
    }
}
