//! What an operator asks for: replaying, cancelling, purging, copying and
//! rescheduling jobs, pausing queues, bulk selections and the audit log,
//! each request checked before a store sees it.

use std::time::Duration;

use serde::Serialize;

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::ids::{JobId, Name};
use crate::job::Job;
use crate::stamp::{check_operator, check_reason};
use crate::state::{JobState, Schedule};

/// An operator's request to replay dead or cancelled jobs.
#[derive(Clone, Debug)]
pub struct ReplayRequest {
    /// The jobs; all are replayed or none.
    pub ids: Vec<JobId>,
    /// Who asked.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

impl ReplayRequest {
    /// The states a job can be replayed from.
    pub const ACCEPTS: &[JobState] = &[JobState::Dead, JobState::Cancelled];
    /// What a store says when a named job is not dead or cancelled.
    pub const REFUSED: &str = "only dead or cancelled jobs can be replayed";

    /// Whether a job in `state` can be replayed (what a dry run shows).
    pub fn accepts(state: JobState) -> bool {
        Self::ACCEPTS.contains(&state)
    }

    /// Checks the operator and reason.
    pub fn validate(&self) -> Result<()> {
        check_operator(&self.operator)?;
        self.reason.as_deref().map_or(Ok(()), check_reason)
    }
}

/// An operator's request to cancel unfinished jobs.
#[derive(Clone, Debug)]
pub struct CancelRequest {
    /// The jobs; all are cancelled or none.
    pub ids: Vec<JobId>,
    /// Who asked.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

impl CancelRequest {
    /// The states a job can be cancelled from.
    pub const ACCEPTS: &[JobState] = &[
        JobState::Blocked,
        JobState::Waiting,
        JobState::Ready,
        JobState::Running,
    ];
    /// What a store says when a named job has finished.
    pub const REFUSED: &str = "only blocked, waiting, ready or running jobs can be cancelled";

    /// Whether a job in `state` can be cancelled.
    pub fn accepts(state: JobState) -> bool {
        Self::ACCEPTS.contains(&state)
    }

    /// Checks the operator and reason.
    pub fn validate(&self) -> Result<()> {
        check_operator(&self.operator)?;
        self.reason.as_deref().map_or(Ok(()), check_reason)
    }
}

/// An operator pausing or resuming a queue.
#[derive(Clone, Debug)]
pub struct QueueAction {
    /// The queue.
    pub queue: Name,
    /// Who asked.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

impl QueueAction {
    /// Checks the operator and reason.
    pub fn validate(&self) -> Result<()> {
        check_operator(&self.operator)?;
        self.reason.as_deref().map_or(Ok(()), check_reason)
    }
}

/// A paused queue: workers claim nothing from it until it is resumed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PausedQueue {
    /// The queue.
    pub queue: Name,
    /// Who paused it.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
    /// When.
    pub paused_at: Timestamp,
}

/// An operator's request to delete dead jobs for good.
#[derive(Clone, Debug)]
pub struct PurgeRequest {
    /// The jobs; all are purged or none.
    pub ids: Vec<JobId>,
    /// Who asked.
    pub operator: String,
    /// Why (required: a purge cannot be undone).
    pub reason: String,
}

impl PurgeRequest {
    /// The states a job can be purged from.
    pub const ACCEPTS: &[JobState] = &[JobState::Dead];
    /// What a store says when a named job is not dead.
    pub const REFUSED: &str = "only dead jobs can be purged";

    /// Whether a job in `state` can be purged (what a dry run shows).
    pub fn accepts(state: JobState) -> bool {
        Self::ACCEPTS.contains(&state)
    }

    /// Checks the operator and reason.
    pub fn validate(&self) -> Result<()> {
        check_operator(&self.operator)?;
        check_reason(&self.reason)
    }
}

/// An operator's request to copy dead or cancelled jobs under new ids
/// (`replay --new-key`): the originals stay as they are.
#[derive(Clone, Debug)]
pub struct CopyRequest {
    /// The jobs; all are copied or none. One named twice is copied once.
    pub ids: Vec<JobId>,
    /// Who asked.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

impl CopyRequest {
    /// The states a job can be copied from.
    pub const ACCEPTS: &[JobState] = &[JobState::Dead, JobState::Cancelled];

    /// Whether a job in `state` can be copied (what a dry run shows).
    pub fn accepts(state: JobState) -> bool {
        Self::ACCEPTS.contains(&state)
    }

    /// What a store says when a named job is not dead or cancelled.
    pub const REFUSED: &str =
        "only dead or cancelled jobs can be copied under a new id; nothing was copied";

    /// Checks the operator and reason.
    pub fn validate(&self) -> Result<()> {
        check_operator(&self.operator)?;
        self.reason.as_deref().map_or(Ok(()), check_reason)
    }
}

/// An operator's request to move waiting (`ready`) jobs to a new due time
/// or priority: a job parked far in the future brought forward, an urgent
/// one put ahead of its queue, a burst spread out.
#[derive(Clone, Debug)]
pub struct RescheduleRequest {
    /// The jobs; all are moved or none. One named twice is moved once.
    pub ids: Vec<JobId>,
    /// When they become due (on the store's clock); `None` keeps each
    /// job's own due time.
    pub run: Option<Schedule>,
    /// Their new priority; `None` keeps each job's own.
    pub priority: Option<i16>,
    /// Who asked.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

impl RescheduleRequest {
    /// The states a job can be rescheduled from.
    pub const ACCEPTS: &[JobState] = &[JobState::Blocked, JobState::Ready];

    /// Whether a job in `state` can be rescheduled.
    pub fn accepts(state: JobState) -> bool {
        Self::ACCEPTS.contains(&state)
    }

    /// What [`crate::Admin`] says when a named job is not waiting.
    pub const REFUSED: &str =
        "only waiting (ready or blocked) jobs can be rescheduled; nothing was changed";

    /// Checks the operator, the reason and the change: a due time and a
    /// delay in range ([`crate::bounds`]), and at least one of the two
    /// changes asked for.
    pub fn validate(&self) -> Result<()> {
        check_operator(&self.operator)?;
        self.reason.as_deref().map_or(Ok(()), check_reason)?;
        match self.run {
            Some(Schedule::After(d)) => crate::bounds::check_delay("the new due time", d)?,
            Some(Schedule::At(t)) => crate::bounds::check_time("the new due time", t)?,
            Some(Schedule::Now) | None => {}
        }
        if self.run.is_none() && self.priority.is_none() {
            return Err(Error::invalid(
                "a reschedule needs a new due time or a new priority (the CLI's --at, --in, --now or \
                 --priority; the API's run_at, delay, now or priority)",
            ));
        }
        Ok(())
    }

    /// The change as the audit entry words it, before the reason: `run at
    /// 2026-12-02T10:00:00.000Z, priority 5`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match self.run {
            Some(Schedule::Now) => parts.push("run now".to_owned()),
            Some(Schedule::After(d)) => parts.push(format!("run in {}", describe_delay(d))),
            Some(Schedule::At(t)) => parts.push(format!("run at {}", t.to_rfc3339())),
            None => {}
        }
        if let Some(p) = self.priority {
            parts.push(format!("priority {p}"));
        }
        parts.join(", ")
    }
}

fn describe_delay(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// One job copied by [`CopyRequest`].
#[derive(Clone, Debug, Serialize)]
pub struct Copied {
    /// The original, left as it was.
    pub from: JobId,
    /// The new job.
    pub job: Job,
}

/// The jobs a bulk operator action names: by id (each must exist), or by
/// a filter with a bound. The CLI, the API and the dashboard build one from
/// their own input and hand it to [`crate::Admin::act_on_selection`] (or
/// read it with [`crate::Admin::selected`]).
#[derive(Clone, Debug)]
pub enum Selection {
    /// These jobs, in this order.
    Ids(Vec<JobId>),
    /// The jobs a filter matches, at most its limit.
    Filter(BulkFilter),
}

/// The jobs a bulk replay or purge takes by filter: those in `state` that
/// match every filter given, oldest first, at most `limit`.
#[derive(Clone, Debug)]
pub struct BulkFilter {
    /// `dead` (replay, purge) or `cancelled` (replay).
    pub state: JobState,
    /// Only this queue.
    pub queue: Option<Name>,
    /// Only this kind.
    pub kind: Option<Name>,
    /// Only jobs whose last error contains this text.
    pub error_contains: Option<String>,
    /// Only jobs that ended at or after this time.
    pub since: Option<Timestamp>,
    /// Only jobs that ended before this time.
    pub until: Option<Timestamp>,
    /// At most this many (1 to 10,000).
    pub limit: u32,
}

impl BulkFilter {
    /// The most jobs one bulk action takes.
    pub const MAX_LIMIT: u32 = 10_000;

    /// Whether any filter is given beyond the state.
    pub fn narrows(&self) -> bool {
        self.queue.is_some()
            || self.kind.is_some()
            || self.error_contains.is_some()
            || self.since.is_some()
            || self.until.is_some()
    }

    /// Checks the bound.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a limit outside 1–10,000.
    pub fn validate(&self) -> Result<()> {
        if !(1..=Self::MAX_LIMIT).contains(&self.limit) {
            return Err(Error::invalid(format!(
                "the limit of a bulk action must be between 1 and {} (got {})",
                Self::MAX_LIMIT,
                self.limit
            )));
        }
        Ok(())
    }

    /// As a listing filter.
    pub fn to_job_filter(&self) -> crate::filter::JobFilter {
        crate::filter::JobFilter {
            state: Some(self.state),
            queue: self.queue.clone(),
            kind: self.kind.clone(),
            error_contains: self.error_contains.clone(),
            updated_since: self.since,
            updated_before: self.until,
            limit: Some(self.limit),
            ..crate::filter::JobFilter::default()
        }
    }
}

/// Which audit entries to read.
#[derive(Clone, Debug, Default)]
pub struct AuditFilter {
    /// Only entries about this job (it may no longer exist), including a
    /// copy that made it.
    pub job: Option<JobId>,
    /// Only entries about jobs of, or actions on, this queue.
    pub queue: Option<Name>,
    /// Only entries about this stored schedule.
    pub schedule: Option<Name>,
    /// Keyset pagination: only entries older than this sequence number.
    pub before: Option<u64>,
    /// At most this many (default 100, at most 10,000).
    pub limit: Option<u32>,
}

impl AuditFilter {
    /// The effective limit.
    pub fn effective_limit(&self) -> u32 {
        self.limit.unwrap_or(100).clamp(1, 10_000)
    }
}

/// One entry of the audit log: an operator's action.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditEntry {
    /// Its place in the log (increasing).
    pub seq: u64,
    /// When it happened.
    pub at: Timestamp,
    /// `replay`, `copy`, `cancel`, `purge`, `reschedule`, `pause`,
    /// `resume`, or a change to a stored schedule: `schedule_add`,
    /// `schedule_replace`, `schedule_remove`, `schedule_pause`,
    /// `schedule_resume`.
    pub action: String,
    /// The job acted on (none for a queue's or a schedule's action).
    pub job_id: Option<JobId>,
    /// For a schedule's action: the schedule.
    pub schedule: Option<Name>,
    /// For a `copy`: the new job.
    pub copy_id: Option<JobId>,
    /// The queue of the job, the queue paused or resumed, or the queue of
    /// the schedule's jobs.
    pub queue: Option<Name>,
    /// Who did it.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stamp::is_audit_text;

    #[test]
    fn operator_and_reason_are_checked() {
        assert!(check_operator("alice").is_ok());
        assert!(check_operator(" ").is_err());
        assert!(check_operator("a\u{0}b").is_err());
        assert!(check_operator(&"x".repeat(201)).is_err());
        assert!(check_reason("line one\nline two\tend").is_ok());
        assert!(check_reason("").is_err());
        assert!(check_reason("bell\u{7}").is_err());
        assert!(check_reason(&"x".repeat(2001)).is_err());
        // The one rule, as the HTTP API applies it with its own limits.
        assert!(is_audit_text("a\nb", 3, true));
        assert!(!is_audit_text("a\nb", 3, false));
        assert!(!is_audit_text("abcd", 3, true));
        assert!(!is_audit_text(" \t", 3, true));
        // Every request type of an audited action applies it.
        let replay = ReplayRequest {
            ids: Vec::new(),
            operator: "ops".into(),
            reason: Some("esc\u{1b}".into()),
        };
        assert!(replay.validate().is_err());
        let cancel = CancelRequest {
            ids: Vec::new(),
            operator: "ops\n".into(),
            reason: None,
        };
        assert!(cancel.validate().is_err());
        assert!(
            CancelRequest {
                operator: "ops".into(),
                ..cancel
            }
            .validate()
            .is_ok()
        );
    }
}
