//! Settlements batched: acknowledgments and failures that arrive together
//! are written in one statement each, still fenced job by job.

use std::sync::{Arc, Mutex};

use errand_core::{Error, Failure, Job, Lease, Result, WorkerStore};
use tokio::sync::{Notify, oneshot};

use super::lock;

/// A job's acknowledgment and where to send the verdict.
pub(super) type Completion = (Lease, oneshot::Sender<Result<bool>>);

/// A failed attempt to record and where to send the job as recorded
/// (`None`: the lease was lost).
pub(super) type FailureWait = (Lease, Failure, oneshot::Sender<Result<Option<Job>>>);

/// Most settlements of one kind in one statement.
const MAX_COMPLETION_BATCH: usize = 512;

/// A settlement waiting to be written, which can be told it never will be.
trait Waiting {
    fn refuse(self, e: Error);
}

impl Waiting for Completion {
    fn refuse(self, e: Error) {
        let _ = self.1.send(Err(e));
    }
}

impl Waiting for FailureWait {
    fn refuse(self, e: Error) {
        let _ = self.2.send(Err(e));
    }
}

/// Settlements of one kind waiting to be written; `None` once closed.
struct Queue<T>(Mutex<Option<Vec<T>>>);

impl<T: Waiting> Queue<T> {
    fn new() -> Self {
        Queue(Mutex::new(Some(Vec::new())))
    }

    /// Queues `item`; false (and `item` answered `Closed`) once closed.
    pub(super) fn push(&self, item: T) -> bool {
        match lock(&self.0).as_mut() {
            Some(pending) => {
                pending.push(item);
                true
            }
            None => {
                item.refuse(closed());
                false
            }
        }
    }

    /// Takes up to [`MAX_COMPLETION_BATCH`] waiting items.
    pub(super) fn take(&self) -> Vec<T> {
        match lock(&self.0).as_mut() {
            Some(pending) => {
                let n = pending.len().min(MAX_COMPLETION_BATCH);
                pending.drain(..n).collect()
            }
            None => Vec::new(),
        }
    }

    /// Puts a batch back in front; false (and each answered `Closed`) once
    /// closed.
    pub(super) fn requeue(&self, batch: Vec<T>) -> bool {
        match lock(&self.0).as_mut() {
            Some(pending) => {
                pending.splice(0..0, batch);
                true
            }
            None => {
                for item in batch {
                    item.refuse(closed());
                }
                false
            }
        }
    }

    pub(super) fn close(&self) {
        let left = lock(&self.0).take().unwrap_or_default();
        for item in left {
            item.refuse(closed());
        }
    }
}

/// Settlements waiting to be written. Acknowledgments are taken by the
/// batcher, or by a claimer about to claim, which sends them in the same
/// transaction ([`JobStore::complete_and_claim`](errand_core::JobStore::complete_and_claim)); failures by the batcher,
/// which records those that arrived together in one statement
/// ([`JobStore::fail_many`](errand_core::JobStore::fail_many)). Each is taken by exactly one writer. Once the
/// batcher has stopped (shutdown, or a panic), every waiting and later
/// settlement is answered `Closed` rather than left waiting.
pub(super) struct Acks {
    acks: Queue<Completion>,
    failures: Queue<FailureWait>,
    arrived: Notify,
}

impl Default for Acks {
    fn default() -> Self {
        Acks {
            acks: Queue::new(),
            failures: Queue::new(),
            arrived: Notify::new(),
        }
    }
}

impl Acks {
    pub(super) fn push(&self, completion: Completion) {
        if self.acks.push(completion) {
            self.arrived.notify_one();
        }
    }

    pub(super) fn push_failure(&self, failure: FailureWait) {
        if self.failures.push(failure) {
            self.arrived.notify_one();
        }
    }

    /// Takes up to [`MAX_COMPLETION_BATCH`] waiting acknowledgments.
    pub(super) fn take(&self) -> Vec<Completion> {
        self.acks.take()
    }

    /// Puts a batch of acknowledgments back in front, for the batcher.
    pub(super) fn requeue(&self, batch: Vec<Completion>) {
        if self.acks.requeue(batch) {
            self.arrived.notify_one();
        }
    }

    pub(super) fn close(&self) {
        self.acks.close();
        self.failures.close();
    }
}

fn closed() -> Error {
    Error::Closed("the completion batcher stopped".into())
}

/// Closes the settlement queues when the batcher stops, however it stops.
struct CloseOnDrop(Arc<Acks>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Takes every settlement waiting and writes them: the acknowledgments in
/// one [`JobStore::complete_many`](errand_core::JobStore::complete_many) call, the failures in one
/// [`JobStore::fail_many`](errand_core::JobStore::fail_many) call.
pub(super) async fn complete_in_batches(store: Arc<dyn WorkerStore>, acks: Arc<Acks>) {
    let _closing = CloseOnDrop(acks.clone());
    loop {
        let batch = acks.take();
        let failures = acks.failures.take();
        if batch.is_empty() && failures.is_empty() {
            acks.arrived.notified().await;
            continue;
        }
        if !batch.is_empty() {
            let leases: Vec<Lease> = batch.iter().map(|(l, _)| l.clone()).collect();
            crate::probe::acks_sending(&leases);
            let result = store.complete_many(&leases).await;
            answer(batch, &leases, result);
        }
        if !failures.is_empty() {
            let items: Vec<(Lease, Failure)> = failures
                .iter()
                .map(|(l, f, _)| (l.clone(), f.clone()))
                .collect();
            let result = store.fail_many(&items).await;
            answer_failures(failures, result);
        }
    }
}

/// Tells each waiter of a batch of failures the job as recorded.
fn answer_failures(batch: Vec<FailureWait>, result: Result<Vec<Option<Job>>>) {
    match result {
        Ok(jobs) if jobs.len() == batch.len() => {
            for ((_, _, reply), job) in batch.into_iter().zip(jobs) {
                let _ = reply.send(Ok(job));
            }
        }
        Ok(_) => {
            for (_, _, reply) in batch {
                let _ = reply.send(Err(Error::storage(
                    "the store answered a batch of failures with the wrong count",
                )));
            }
        }
        Err(e) => {
            for (_, _, reply) in batch {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

/// Tells each waiter of a batch acknowledgment its verdict.
pub(super) fn answer(batch: Vec<Completion>, leases: &[Lease], result: Result<Vec<bool>>) {
    match result {
        Ok(acked) if acked.len() == batch.len() => {
            // Committed, and no waiter told yet.
            crate::probe::acks_committed(leases, &acked);
            for ((_, reply), ok) in batch.into_iter().zip(acked) {
                let _ = reply.send(Ok(ok));
            }
        }
        Ok(_) => {
            for (_, reply) in batch {
                let _ = reply.send(Err(Error::storage(
                    "the store answered a batch acknowledgment with the wrong count",
                )));
            }
        }
        Err(e) => {
            // Every waiter gets the error itself, class included (a
            // full disk stays `StorageFull`).
            for (_, reply) in batch {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

#[cfg(test)]
mod tests;
