//! A job as a bulk operator action names it: who it is and where it
//! stands, without its payload, output or progress, so an answer about
//! thousands of jobs stays small whatever their payloads weigh.

use serde::Serialize;

use crate::clock::Timestamp;
use crate::ids::{JobId, Name};
use crate::job::Job;
use crate::state::JobState;

/// A job without its payload, output or progress (see the module docs).
/// Its payload is read with the job itself (`errand show`,
/// `GET /v1/jobs/{id}`) or a listing, whose pages have a byte budget.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobBrief {
    /// The job's id.
    pub id: JobId,
    /// Its queue.
    pub queue: Name,
    /// Its kind.
    pub kind: Name,
    /// Its state.
    pub state: JobState,
    /// Attempts started in the current replay cycle.
    pub attempts: u32,
    /// The attempt budget of a replay cycle.
    pub max_attempts: u32,
    /// How many times an operator replayed it.
    pub replays: u32,
    /// When it is (or was) due.
    pub available_at: Timestamp,
    /// The last recorded error, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// How many bytes its payload holds.
    pub payload_bytes: usize,
}

impl From<&Job> for JobBrief {
    fn from(job: &Job) -> Self {
        JobBrief {
            id: job.id.clone(),
            queue: job.queue.clone(),
            kind: job.kind.clone(),
            state: job.state,
            attempts: job.attempts,
            max_attempts: job.max_attempts,
            replays: job.replays,
            available_at: job.available_at,
            last_error: job.last_error.clone(),
            payload_bytes: job.payload.as_str().len(),
        }
    }
}

/// The briefs of `jobs`, in order.
pub fn briefs(jobs: &[Job]) -> Vec<JobBrief> {
    jobs.iter().map(JobBrief::from).collect()
}
