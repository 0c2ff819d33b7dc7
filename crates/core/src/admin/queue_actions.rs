//! Pausing and resuming queues, and their concurrency caps.

use crate::error::Result;
use crate::queue_limit::{QueueLimit, QueueLimitRequest};
use crate::requests::{PausedQueue, QueueAction};

use super::{Admin, stamp};

impl Admin {
    /// Pauses a queue for every process using the store, with a `pause`
    /// audit entry. Returns `false` (writing nothing) when it was already
    /// paused.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a bad operator or reason.
    pub async fn pause_queue(&self, action: &QueueAction) -> Result<bool> {
        action.validate()?;
        let by = stamp(&action.operator, action.reason.as_deref());
        self.store.pause_queue(&action.queue, &by).await
    }

    /// Resumes a paused queue, with a `resume` audit entry. Returns `false`
    /// (writing nothing) when it was not paused.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a bad operator or reason.
    pub async fn resume_queue(&self, action: &QueueAction) -> Result<bool> {
        action.validate()?;
        let by = stamp(&action.operator, action.reason.as_deref());
        self.store.resume_queue(&action.queue, &by).await
    }

    /// The paused queues, by name.
    pub async fn paused_queues(&self) -> Result<Vec<PausedQueue>> {
        self.store.paused_queues().await
    }

    /// Sets or clears a queue's concurrency cap for every process using
    /// the store (effective at each process's next claim), with a `limit`
    /// or `unlimit` audit entry. Returns `false` (writing nothing) when the
    /// queue already had that cap, or had none to clear.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a cap outside 1 to
    /// [`MAX_QUEUE_CONCURRENCY`](crate::MAX_QUEUE_CONCURRENCY), a bad
    /// operator or reason.
    pub async fn set_queue_limit(&self, request: &QueueLimitRequest) -> Result<bool> {
        request.validate()?;
        let by = stamp(&request.operator, request.reason.as_deref());
        self.store
            .set_queue_limit(&request.queue, request.concurrency, &by)
            .await
    }

    /// The queues' concurrency caps, by name.
    pub async fn queue_limits(&self) -> Result<Vec<QueueLimit>> {
        self.store.queue_limits().await
    }
}
