//! Pausing and resuming queues.

use crate::error::Result;
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
}
