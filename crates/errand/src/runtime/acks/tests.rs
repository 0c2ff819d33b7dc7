#![allow(clippy::unwrap_used, clippy::expect_used)]
use super::*;
use async_trait::async_trait;
use std::time::Duration;

use errand_core::{
    ClaimRequest, ClaimedJob, Inserted, JobId, JobStore, LeaseToken, NewJob, Notifier, RateBucket,
    RateLimit, SweepReport, Timestamp, WorkSignal,
};

/// A store on a full disk: every call fails with `StorageFull`.
#[derive(Debug)]
struct FullDisk;

fn full<T>() -> Result<T> {
    Err(Error::StorageFull("database or disk is full".into()))
}

#[derive(Debug)]
struct Never;

#[async_trait]
impl WorkSignal for Never {
    async fn wait(&mut self, timeout: Duration) -> bool {
        tokio::time::sleep(timeout).await;
        false
    }
}

#[async_trait]
impl JobStore for FullDisk {
    async fn insert(&self, _: NewJob) -> Result<Inserted> {
        full()
    }
    async fn insert_many(&self, _: Vec<NewJob>) -> Result<Vec<Inserted>> {
        full()
    }
    async fn claim(&self, _: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        full()
    }
    async fn complete(&self, _: &Lease) -> Result<Job> {
        full()
    }
    async fn complete_many(&self, _: &[Lease]) -> Result<Vec<bool>> {
        full()
    }
    async fn complete_with_output(&self, _: &Lease, _: &errand_core::Payload) -> Result<Job> {
        full()
    }
    async fn complete_with_children(
        &self,
        _: &Lease,
        _: Option<&errand_core::Payload>,
        _: &[NewJob],
    ) -> Result<errand_core::ChildrenAdded> {
        full()
    }
    async fn dependency_outputs(
        &self,
        _: &JobId,
    ) -> Result<Vec<(JobId, Option<errand_core::Payload>)>> {
        full()
    }
    async fn fail(&self, _: &Lease, _: Failure) -> Result<Job> {
        full()
    }
    async fn snooze(&self, _: &Lease, _: Duration) -> Result<Job> {
        full()
    }
    async fn cancel_running(&self, _: &Lease, _: &str) -> Result<Job> {
        full()
    }
    async fn heartbeat(&self, _: &Lease, _: Duration) -> Result<Timestamp> {
        full()
    }
    async fn heartbeat_with_progress(
        &self,
        _: &Lease,
        _: Duration,
        _: &errand_core::Progress,
    ) -> Result<Timestamp> {
        full()
    }
    async fn seal_batch(&self, _: &errand_core::BatchSeal) -> Result<errand_core::Batch> {
        full()
    }
    async fn release(&self, _: &Lease) -> Result<Job> {
        full()
    }
    async fn suspend(&self, _: &Lease, _: &errand_core::Await) -> Result<Job> {
        full()
    }
    async fn signal(&self, _: &errand_core::NewSignal) -> Result<errand_core::Signalled> {
        full()
    }
    async fn received_signal(&self, _: &JobId) -> Result<Option<errand_core::ReceivedSignal>> {
        full()
    }
    async fn expire_waits(&self, _: u32) -> Result<Vec<Job>> {
        full()
    }
    async fn sweep_expired(&self) -> Result<SweepReport> {
        full()
    }
    async fn prune(&self, _: Duration, _: u32) -> Result<u64> {
        full()
    }
    async fn get(&self, _: &JobId) -> Result<Job> {
        full()
    }
    async fn finish_signal(&self, _: &JobId) -> Result<Box<dyn errand_core::WorkSignal>> {
        full()
    }
    async fn take_tokens(&self, _: &RateBucket, _: RateLimit, _: u32) -> Result<u32> {
        full()
    }
    async fn report_worker(&self, _: &errand_core::WorkerReport) -> Result<()> {
        full()
    }
    async fn record_minutes(&self, _: &[errand_core::MinuteCount]) -> Result<()> {
        full()
    }
    async fn prune_minutes(&self, _: i64) -> Result<u64> {
        full()
    }
}

impl Notifier for FullDisk {
    fn work_signal(&self) -> Box<dyn WorkSignal> {
        Box::new(Never)
    }
}

/// Once the batcher has stopped, however it stopped, no acknowledgment
/// waits for it: those waiting and those arriving later are answered
/// `Closed` (a job's task would otherwise wait forever, and a drain
/// with it).
#[tokio::test]
async fn acknowledgments_are_answered_closed_once_the_batcher_stops() {
    let acks = Arc::new(Acks::default());
    let lease = |n: u32| Lease {
        id: JobId::new(format!("job-{n}")).unwrap(),
        token: LeaseToken::generate(),
        attempt: 1,
    };
    let (reply, waiting) = oneshot::channel();
    acks.push((lease(1), reply));
    // A batcher that stops (aborted here; a panic drops it the same way)
    // before writing anything.
    let batcher = tokio::spawn({
        let acks = acks.clone();
        async move {
            let _closing = CloseOnDrop(acks);
            std::future::pending::<()>().await;
        }
    });
    tokio::task::yield_now().await;
    batcher.abort();
    let _ = batcher.await;
    assert!(matches!(waiting.await.unwrap(), Err(Error::Closed(_))));
    let (reply, later) = oneshot::channel();
    acks.push((lease(2), reply));
    assert!(matches!(later.await.unwrap(), Err(Error::Closed(_))));
    assert!(acks.take().is_empty());
}

/// Found by the harness's disk-full plan: a batched acknowledgment that
/// failed reached every waiting job as a generic storage error, so the
/// worker reported "storage error: the database storage is full" and
/// the class (`StorageFull`: free space, then retry) was lost.
#[tokio::test]
async fn a_batch_acknowledgment_on_a_full_disk_stays_storage_full_for_every_job() {
    let acks = Arc::new(Acks::default());
    let batcher = tokio::spawn(complete_in_batches(Arc::new(FullDisk), acks.clone()));
    let mut waiting = Vec::new();
    for n in 0..3 {
        let (reply, verdict) = oneshot::channel();
        let lease = Lease {
            id: JobId::new(format!("job-{n}")).unwrap(),
            token: LeaseToken::generate(),
            attempt: 1,
        };
        acks.push((lease, reply));
        waiting.push(verdict);
    }
    for verdict in waiting {
        match verdict.await.unwrap() {
            Err(Error::StorageFull(m)) => assert!(m.contains("full"), "{m}"),
            other => panic!("expected StorageFull, got {other:?}"),
        }
    }
    batcher.abort();
}
