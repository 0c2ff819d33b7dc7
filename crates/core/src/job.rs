//! Jobs as stored: the row, its lease, its attempts and audit records,
//! and what an operator sees of one.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::error::Error;
use crate::error_class::ErrorClass;
use crate::ids::{JobId, LeaseToken, Name, TraceParent};
use crate::labels::{Meta, WorkflowId};
use crate::payload::Payload;
use crate::signal::{Awaiting, SignalRecord};
use crate::state::{JobKey, JobState};

/// The queue a job goes to when none is named.
pub const DEFAULT_QUEUE: &str = "default";
/// The attempt budget of a job when none is given.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 25;
/// The lost-lease budget of a job when none is given: after this many
/// expired leases the job is quarantined as `dead` (class `lost_lease`).
pub const DEFAULT_MAX_LEASE_EXPIRIES: u32 = 5;

/// What a dependent does when one of its dependencies ends `dead` or
/// `cancelled`. Whatever ends a dependency releases its dependents in the
/// same transaction, by one rule:
///
/// | the dependency ends | `Wait` (default) | `Cancel`  | `Run`     |
/// |---------------------|------------------|-----------|-----------|
/// | `done`              | met              | met       | met       |
/// | `dead`              | still waiting    | cancelled | met       |
/// | `cancelled`         | cancelled        | cancelled | met       |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DependencyFailure {
    /// Keep waiting while the dependency is a dead letter (an operator may
    /// replay it); be cancelled if the dependency is cancelled.
    #[default]
    Wait,
    /// Be cancelled as soon as a dependency is dead or cancelled.
    Cancel,
    /// Run anyway: a dependency that ended, however it ended, is met.
    Run,
}

impl DependencyFailure {
    /// Every policy, in documentation order.
    pub const ALL: [DependencyFailure; 3] = [
        DependencyFailure::Wait,
        DependencyFailure::Cancel,
        DependencyFailure::Run,
    ];

    /// The stable name used in storage, the CLI and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            DependencyFailure::Wait => "wait",
            DependencyFailure::Cancel => "cancel",
            DependencyFailure::Run => "run",
        }
    }
}

impl FromStr for DependencyFailure {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        DependencyFailure::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown dependency-failure policy {s:?}: use wait, cancel or run"
                ))
            })
    }
}

impl DependencyFailure {
    /// Whether a dependent under this policy may wait (`blocked`) for a
    /// dependency it has not yet met that is now in `state` (`None`: gone,
    /// purged or pruned). It may wait for one that has not ended — its
    /// ending will judge the dependent — and, under `wait`, for a dead
    /// one, which an operator may replay. It may not wait for one that is
    /// gone, nor for one whose ending the rule turns into a cancellation:
    /// nothing would ever release it. A replay refuses to put a job back
    /// in that position, and a purge refuses to create it.
    pub fn may_wait_for(self, state: Option<JobState>) -> bool {
        match state {
            None => false,
            Some(JobState::Cancelled) => self == DependencyFailure::Run,
            Some(JobState::Dead) => self != DependencyFailure::Cancel,
            Some(_) => true,
        }
    }
}

impl fmt::Display for DependencyFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One dependency of a job, as shown to an operator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Dependency {
    /// The job depended on.
    pub id: JobId,
    /// Its state now, or `None` if it was purged or pruned since.
    pub state: Option<JobState>,
    /// Whether it is met (the dependency succeeded, or ended in a way the
    /// dependent's policy accepts).
    pub met: bool,
}

/// The columns of the job table that make a [`Job`] (with `lease_token`),
/// in the order of SQLite's table, which reads them by position; the
/// PostgreSQL store looks each up by name.
pub const JOB_COLUMNS: [&str; 41] = [
    "id",
    "queue",
    "kind",
    "state",
    "payload",
    "priority",
    "attempts",
    "max_attempts",
    "replays",
    "lease_expiries",
    "max_lease_expiries",
    "give_up_at",
    "available_at",
    "created_at",
    "updated_at",
    "lease_token",
    "lease_until",
    "last_error",
    "last_error_class",
    "finished_at",
    "key_name",
    "key_limit",
    "key_ordered",
    "attempt_started_at",
    "deadline",
    "traceparent",
    "waiting_on",
    "on_dependency_failure",
    "has_dependents",
    "output",
    "progress",
    "workflow",
    "tags",
    "meta",
    "unique_key",
    "batch",
    "await_signal",
    "await_until",
    "on_await_timeout",
    "signal_seq",
    "added_by",
];

/// A job as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Job {
    /// Stable identity.
    pub id: JobId,
    /// Queue name.
    pub queue: Name,
    /// Kind name.
    pub kind: Name,
    /// Current state.
    pub state: JobState,
    /// JSON payload.
    pub payload: Payload,
    /// Higher runs first.
    pub priority: i16,
    /// Attempts started in the current replay cycle.
    pub attempts: u32,
    /// Attempt budget of a replay cycle.
    pub max_attempts: u32,
    /// How many times an operator replayed the job.
    pub replays: u32,
    /// Leases that expired unsettled in the current replay cycle.
    pub lease_expiries: u32,
    /// The lost-lease budget.
    pub max_lease_expiries: u32,
    /// The end of the elapsed-time budget, if any.
    pub give_up_at: Option<Timestamp>,
    /// When the job is (or was) due.
    pub available_at: Timestamp,
    /// When the job was inserted.
    pub created_at: Timestamp,
    /// When the job last changed.
    pub updated_at: Timestamp,
    /// End of the current lease, while running.
    pub lease_until: Option<Timestamp>,
    /// When the current attempt began (while running), or the last one.
    /// The attempt the job row holds — running, or the one that succeeded —
    /// is not yet in the history table; [`JobDetail::history`] shows it.
    pub attempt_started_at: Option<Timestamp>,
    /// The last recorded error.
    pub last_error: Option<String>,
    /// The class of the last recorded error.
    pub last_error_class: Option<ErrorClass>,
    /// When the job reached done, dead or cancelled.
    pub finished_at: Option<Timestamp>,
    /// The concurrency key, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<JobKey>,
    /// The business deadline, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// The trace context of the request that enqueued it, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<TraceParent>,
    /// Dependencies not yet met: above zero while the job is `blocked` (and
    /// for a job cancelled before they were).
    pub waiting_on: u32,
    /// Its policy when a dependency fails, if it has dependencies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_dependency_failure: Option<DependencyFailure>,
    /// Whether some job depends on this one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub has_dependents: bool,
    /// What the job's handler recorded when it succeeded (JSON), if it did:
    /// its dependents read it.
    pub output: Option<Payload>,
    /// The latest progress a handler reported, if any (carried by a lease
    /// renewal, so it lags the handler by up to a third of the lease).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// The workflow the job is a step of, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowId>,
    /// Its tags, in the order given.
    pub tags: Vec<String>,
    /// Its metadata, by key.
    pub meta: Meta,
    /// The key it was made unique or debounced by, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<String>,
    /// The batch it belongs to, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<WorkflowId>,
    /// The signal it waits for while `waiting` (kept, for the record, by
    /// an operator's cancel of a waiting job).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub awaiting: Option<Awaiting>,
    /// The signal that ended its latest wait ([`SignalRecord::seq`]), whose
    /// payload its next attempts read ([`crate::JobStore::received_signal`]);
    /// `None` when no signal did (it never waited, or its wait timed out
    /// under the `run` policy).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed_by: Option<i64>,
    /// The step that added it as it completed (a child added at run
    /// time: [`crate::JobStore::complete_with_children`]); `None` for a
    /// job enqueued otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub added_by: Option<JobId>,
}

/// How far an attempt has got, as its handler reported it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Done so far, 0–100.
    pub percent: u8,
    /// What it is doing, if it said (at most [`Progress::MAX_MESSAGE_BYTES`],
    /// no control character).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The attempt that reported it (a retry starts without a report of
    /// its own, and the last one's stays until it makes one).
    pub attempt: u32,
}

impl Progress {
    /// The longest message kept (its beginning is kept, `…` after it).
    pub const MAX_MESSAGE_BYTES: usize = 200;

    /// A report of `percent` (more than 100 counts as 100) and an
    /// optional message (each control character — ESC, a line break, NUL,
    /// DEL, a C1 character — replaced by U+FFFD, as metadata refuses them;
    /// cut to [`Progress::MAX_MESSAGE_BYTES`]), by attempt `attempt`. Every
    /// report passes here: the library's `set_progress`, the HTTP API's
    /// heartbeat, and one read back from the store.
    #[must_use]
    pub fn new(percent: u8, message: Option<String>, attempt: u32) -> Self {
        let message = message.map(|m| {
            let mut m = crate::labels::without_controls(m);
            if m.len() > Self::MAX_MESSAGE_BYTES {
                let mut end = Self::MAX_MESSAGE_BYTES;
                while !m.is_char_boundary(end) {
                    end -= 1;
                }
                m.truncate(end);
                m.push('…');
            }
            m
        });
        Progress {
            percent: percent.min(100),
            message,
            attempt,
        }
    }

    /// The report as stored: JSON text.
    ///
    /// # Errors
    /// Never in practice (the fields always serialize).
    pub fn to_json(&self) -> Result<String, Error> {
        serde_json::to_string(self)
            .map_err(|e| Error::storage(format!("cannot encode a progress report: {e}")))
    }

    /// A stored report.
    ///
    /// # Errors
    /// [`Error::Storage`] if the stored text is not a report.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        let p: Progress = serde_json::from_str(text)
            .map_err(|e| Error::storage(format!("a stored progress report is malformed: {e}")))?;
        Ok(Progress::new(p.percent, p.message, p.attempt))
    }
}

/// The fencing pair a worker presents to settle an attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The job.
    pub id: JobId,
    /// The token written by the claim.
    pub token: LeaseToken,
    /// The attempt number the claim started.
    pub attempt: u32,
}

/// A job handed to a worker by a claim.
#[derive(Clone, Debug)]
pub struct ClaimedJob {
    /// The job as the claim left it (`state = running`, `attempts` incremented).
    pub job: Job,
    /// The fencing pair to present when settling.
    pub lease: Lease,
}

/// One attempt in a job's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AttemptRecord {
    /// Which replay cycle (0 before any replay).
    pub cycle: u32,
    /// Attempt number within the cycle.
    pub attempt: u32,
    /// When the claim started it.
    pub started_at: Timestamp,
    /// When it was settled or found expired.
    pub finished_at: Option<Timestamp>,
    /// `succeeded`, `retry`, `dead`, `snoozed`, `cancelled`, `released`,
    /// `lease_expired`, or `None` while running.
    pub outcome: Option<String>,
    /// The error, if the attempt failed.
    pub error: Option<String>,
    /// The error's class.
    pub error_class: Option<ErrorClass>,
}

/// One operator action on a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    /// When it happened.
    pub at: Timestamp,
    /// `replay`, `cancel`, `copy`, …
    pub action: String,
    /// Who did it.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
    /// For a `copy` of this job: the new job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied_to: Option<JobId>,
    /// When this job is itself a copy: the job it was copied from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied_from: Option<JobId>,
}

impl AuditRecord {
    /// Fills in a `copy` entry's other job, as the history of job `of`
    /// tells it: the entry names the original (`job`) and the new job
    /// (`copy`); the original's history says where it was copied to, the
    /// copy's where it came from.
    pub fn with_copy(mut self, of: &JobId, job: Option<JobId>, copy: Option<JobId>) -> Self {
        match copy {
            Some(c) if &c == of => self.copied_from = job,
            c => self.copied_to = c,
        }
        self
    }
}

/// A job with its attempt history and audit entries.
#[derive(Clone, Debug, Serialize)]
pub struct JobDetail {
    /// The job.
    #[serde(flatten)]
    pub job: Job,
    /// Every attempt, oldest first.
    pub history: Vec<AttemptRecord>,
    /// Every operator action, oldest first.
    pub audit: Vec<AuditRecord>,
    /// The jobs it depends on, in the order they were named.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<Dependency>,
    /// The first jobs (at most [`JobDetail::DEPENDENTS_SHOWN`]: blocked
    /// ones first, then by id) that depend on it, each with its state and
    /// whether this job's edge to it is met.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<Dependency>,
    /// The signals sent to it, oldest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub signals: Vec<SignalRecord>,
}

impl JobDetail {
    /// How many dependents a detail lists.
    pub const DEPENDENTS_SHOWN: usize = 100;
}

/// The refusal of a signal the job is not waiting for (and that did not
/// ask to be kept), worded alike by every store: what the job is doing and
/// what the sender can do.
pub fn signal_refused(job: &Job, name: &Name) -> Error {
    crate::signal::refusal(
        job.id.as_str(),
        job.state,
        job.awaiting.as_ref().map(|a| &a.signal),
        name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_progress_message_keeps_no_control_character() {
        let p = Progress::new(40, Some("a\u{1b}[31m\n\0b\u{9b}2J\u{7f}".to_owned()), 1);
        assert_eq!(
            p.message.as_deref(),
            Some("a\u{fffd}[31m\u{fffd}\u{fffd}b\u{fffd}2J\u{fffd}")
        );
        // A report stored before (read back) is cleaned the same way.
        let stored = r#"{"percent":5,"message":"x\u001b]0;title\u0007","attempt":2}"#;
        let read = Progress::from_json(stored).unwrap();
        assert_eq!(read.message.as_deref(), Some("x\u{fffd}]0;title\u{fffd}"));
        // Plain text, accents and emoji pass as they are.
        let plain = Progress::new(1, Some("copying rows – 40 % ✓".to_owned()), 1);
        assert_eq!(plain.message.as_deref(), Some("copying rows – 40 % ✓"));
    }
}
