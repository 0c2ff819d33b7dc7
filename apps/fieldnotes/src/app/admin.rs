//! The operator's view of the queue: jobs as the operator sees them, and
//! the replay of a dead job.

use errand::{Admin, Job, JobFilter, JobId, ReplayRequest, SqliteStore, Timestamp};
use serde::Serialize;

use crate::error::{Error, Result};

/// A job as the operator sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobView {
    /// The stable id (the payment id).
    pub id: String,
    /// The queue.
    pub queue: String,
    /// The kind.
    pub kind: String,
    /// `ready`, `running`, `done`, `dead` or `cancelled`.
    pub state: String,
    /// Attempts started in the current replay cycle.
    pub attempts: u32,
    /// The attempt budget.
    pub max_attempts: u32,
    /// How many times an operator replayed it.
    pub replays: u32,
    /// When it is (or was) due (RFC 3339).
    pub available_at: String,
    /// End of the current lease, while running (RFC 3339).
    pub lease_until: Option<String>,
    /// The last recorded error.
    pub last_error: Option<String>,
    /// The class of the last error.
    pub last_error_class: Option<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When it reached done, dead or cancelled (RFC 3339).
    pub finished_at: Option<String>,
}

impl From<&Job> for JobView {
    fn from(j: &Job) -> Self {
        JobView {
            id: j.id.to_string(),
            queue: j.queue.to_string(),
            kind: j.kind.to_string(),
            state: j.state.as_str().to_owned(),
            attempts: j.attempts,
            max_attempts: j.max_attempts,
            replays: j.replays,
            available_at: j.available_at.to_rfc3339(),
            lease_until: j.lease_until.map(Timestamp::to_rfc3339),
            last_error: j.last_error.clone(),
            last_error_class: j.last_error_class.map(|c| c.as_str().to_owned()),
            created_at: j.created_at.to_rfc3339(),
            finished_at: j.finished_at.map(Timestamp::to_rfc3339),
        }
    }
}

impl std::fmt::Display for JobView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} state={} attempts={} max_attempts={} replays={} available_at={} lease_until={}",
            self.id,
            self.state,
            self.attempts,
            self.max_attempts,
            self.replays,
            self.available_at,
            self.lease_until.as_deref().unwrap_or("-"),
        )?;
        match &self.last_error {
            Some(e) => write!(f, " last_error={e:?}"),
            None => f.write_str(" last_error=-"),
        }
    }
}

/// The operator's actions on the store.
fn admin(store: &SqliteStore) -> Admin {
    Admin::new(std::sync::Arc::new(store.clone()))
}

/// Every job (up to 10,000), oldest first.
pub async fn jobs(store: &SqliteStore) -> Result<Vec<JobView>> {
    let filter = JobFilter {
        limit: Some(10_000),
        ..JobFilter::default()
    };
    Ok(admin(store)
        .list(&filter)
        .await?
        .iter()
        .map(JobView::from)
        .collect())
}

/// The operator name used when `--by` is not given: `$USER`, then
/// `$LOGNAME`, else `unknown`.
pub fn default_operator() -> String {
    ["USER", "LOGNAME"]
        .into_iter()
        .filter_map(|v| std::env::var(v).ok())
        .map(|s| s.trim().to_owned())
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Replays one dead job: a fresh attempt budget, `replays` + 1, same id,
/// with the operator and reason in Errand's audit log. Refuses a job that
/// is not dead, and an unknown id, changing nothing.
pub async fn replay(
    store: &SqliteStore,
    job_id: &str,
    operator: &str,
    reason: Option<String>,
) -> Result<JobView> {
    let id = JobId::new(job_id).map_err(|e| match e {
        errand::Error::Invalid(m) => Error::Invalid(m),
        other => Error::Errand(other),
    })?;
    let admin = admin(store);
    let job = match admin.job(&id).await {
        Ok(job) => job,
        Err(errand::Error::NotFound(_)) => return Err(Error::JobNotFound(job_id.to_owned())),
        Err(e) => return Err(e.into()),
    };
    if job.state != errand::JobState::Dead {
        return Err(Error::NotReplayable {
            id: job_id.to_owned(),
            state: job.state.as_str().to_owned(),
        });
    }
    let request = ReplayRequest {
        ids: vec![id],
        operator: operator.to_owned(),
        reason,
    };
    match admin.replay_jobs(&request).await {
        Ok(jobs) => jobs
            .first()
            .map(JobView::from)
            .ok_or_else(|| Error::JobNotFound(job_id.to_owned())),
        // The state may have changed between the look and the replay; the
        // store's conditional update is the authority.
        Err(errand::Error::InvalidState { id, state, .. }) => {
            Err(Error::NotReplayable { id, state })
        }
        Err(errand::Error::NotFound(_)) => Err(Error::JobNotFound(job_id.to_owned())),
        Err(e) => Err(e.into()),
    }
}
