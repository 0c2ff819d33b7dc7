//! What an attempt came to, as a worker reports it: the outcome and the
//! job's state after it.

use std::fmt;

use errand_core::{JobId, Timestamp};
use serde::Serialize;

/// How an attempt ended, as the worker reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkOutcome {
    /// Nothing was due.
    Idle,
    /// Succeeded and acknowledged.
    Acknowledged,
    /// Failed; due again at `available_at`.
    RetryScheduled,
    /// Failed for good (out of attempts, or permanent).
    Dead,
    /// Re-scheduled without spending an attempt.
    Snoozed,
    /// Cancelled by the handler.
    Cancelled,
    /// Suspended by the handler to wait for a signal, no attempt spent
    /// (or, with the signal already kept for it, ready again at once).
    Awaiting,
    /// Given back unfinished (a drain ran out of time); no attempt spent.
    Released,
    /// The settlement was refused: the lease had expired or another worker
    /// owned the job.
    LeaseLost,
}

impl WorkOutcome {
    /// The stable name used in output.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkOutcome::Idle => "idle",
            WorkOutcome::Acknowledged => "acknowledged",
            WorkOutcome::RetryScheduled => "retry_scheduled",
            WorkOutcome::Dead => "dead",
            WorkOutcome::Snoozed => "snoozed",
            WorkOutcome::Cancelled => "cancelled",
            WorkOutcome::Awaiting => "awaiting",
            WorkOutcome::Released => "released",
            WorkOutcome::LeaseLost => "lease_lost",
        }
    }
}

/// The report of one worker cycle.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkReport {
    /// How it ended.
    pub outcome: WorkOutcome,
    /// The job, unless idle.
    pub job_id: Option<JobId>,
    /// The attempt number, unless idle.
    pub attempt: Option<u32>,
    /// Whether the job was acknowledged as done.
    pub acknowledged: bool,
    /// When the job is due again (retry or snooze).
    pub available_at: Option<Timestamp>,
    /// The recorded error, if the attempt failed.
    pub error: Option<String>,
}

impl WorkReport {
    pub(crate) fn idle() -> Self {
        WorkReport {
            outcome: WorkOutcome::Idle,
            job_id: None,
            attempt: None,
            acknowledged: false,
            available_at: None,
            error: None,
        }
    }
}

impl fmt::Display for WorkReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Some(id), Some(attempt)) = (&self.job_id, self.attempt) else {
            return f.write_str("idle");
        };
        write!(
            f,
            "job {id} attempt {attempt} acknowledged={}",
            self.acknowledged
        )?;
        match self.outcome {
            WorkOutcome::Acknowledged | WorkOutcome::Idle => Ok(()),
            WorkOutcome::RetryScheduled => write!(
                f,
                " retry_scheduled available_at={}",
                self.available_at
                    .map(|t| t.to_rfc3339())
                    .unwrap_or_default()
            ),
            WorkOutcome::Snoozed => write!(
                f,
                " snoozed available_at={}",
                self.available_at
                    .map(|t| t.to_rfc3339())
                    .unwrap_or_default()
            ),
            other => write!(f, " {}", other.as_str()),
        }?;
        if let Some(e) = &self.error {
            write!(f, " error={e:?}")?;
        }
        Ok(())
    }
}
