//! The operator's actions on named jobs: replay, cancel, purge, copy and
//! reschedule, each all or none.

use crate::error::Result;
use crate::ids::JobId;
use crate::job::Job;
use crate::requests::{
    CancelRequest, Copied, CopyRequest, PurgeRequest, ReplayRequest, RescheduleRequest,
};
use crate::store::Reschedule;

use super::{
    Admin, Guard, RACES_TOLERATED, distinct, in_order, partial, raced, reason_after, stamp,
};

impl Admin {
    /// Replays dead or cancelled jobs: `ready` and due now, attempts reset,
    /// `replays` incremented, the id kept, a `replay` audit entry each.
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) for a bad operator or reason;
    /// [`Error::NotFound`](crate::Error::NotFound) or [`Error::InvalidState`](crate::Error::InvalidState) naming the first job
    /// that stopped it (nothing changed).
    pub async fn replay_jobs(&self, req: &ReplayRequest) -> Result<Vec<Job>> {
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
        Ok(self.opened(in_order(&ids, jobs, |j| &j.id)))
    }

    /// Cancels ready or running jobs, a `cancel` audit entry each; a
    /// running job's attempt ends in its history as cancelled, and its
    /// worker's settlement is refused.
    ///
    /// # Errors
    /// As [`Admin::replay_jobs`].
    pub async fn cancel_jobs(&self, req: &CancelRequest) -> Result<Vec<Job>> {
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
        Ok(self.opened(in_order(&ids, jobs, |j| &j.id)))
    }

    /// Deletes dead jobs for good, with their attempt history; the audit
    /// log keeps a `purge` entry for each. Returns the ids purged.
    ///
    /// # Errors
    /// As [`Admin::replay_jobs`]; the reason is required.
    pub async fn purge_jobs(&self, req: &PurgeRequest) -> Result<Vec<JobId>> {
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

    /// Copies dead or cancelled jobs under new ids ([`NewJob::copy_of`](crate::NewJob::copy_of)):
    /// the originals stay as they are, and a `copy` audit entry names
    /// both. A copy depends on what its original depends on, so a
    /// workflow step's copy reads the same inputs (it is judged against
    /// them at once, as any enqueue is). Results follow the request's
    /// order.
    ///
    /// # Errors
    /// As [`Admin::replay_jobs`]; also [`Error::InvalidState`](crate::Error::InvalidState) when an
    /// original depends on a job that is gone (its copy could never have
    /// its inputs).
    pub async fn copy_jobs(&self, req: &CopyRequest) -> Result<Vec<Copied>> {
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
                    .map(|(from, job)| Copied {
                        from,
                        job: self.opened_one(job),
                    })
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
    /// As [`Admin::replay_jobs`]; also [`Error::Invalid`](crate::Error::Invalid) when neither a due
    /// time nor a priority is given, or the due time is out of range.
    pub async fn reschedule_jobs(&self, req: &RescheduleRequest) -> Result<Vec<Job>> {
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
        Ok(self.opened(in_order(&ids, jobs, |j| &j.id)))
    }
}
