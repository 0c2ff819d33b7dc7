//! Which jobs a listing reads, and how a page of it is cut: by rows and by
//! bytes.

use crate::clock::Timestamp;
use crate::ids::{JobId, Name};
use crate::job::Job;
use crate::labels::WorkflowId;
use crate::state::JobState;

/// Which jobs to list.
#[derive(Clone, Debug, Default)]
pub struct JobFilter {
    /// Only this state.
    pub state: Option<JobState>,
    /// Only this queue.
    pub queue: Option<Name>,
    /// Only this kind.
    pub kind: Option<Name>,
    /// Only jobs whose last error contains this text.
    pub error_contains: Option<String>,
    /// Only jobs last changed at or after this time.
    pub updated_since: Option<Timestamp>,
    /// Only jobs last changed before this time.
    pub updated_before: Option<Timestamp>,
    /// Only the steps of this workflow.
    pub workflow: Option<WorkflowId>,
    /// Only jobs carrying this tag.
    pub tag: Option<String>,
    /// At most this many (default 100, at most 10,000).
    pub limit: Option<u32>,
    /// Keyset pagination: only jobs after this one in the listing's order
    /// (see [`crate::AdminStore::list`]). Pass the last id of the previous page.
    pub after: Option<JobId>,
    /// A byte budget as well as a row limit: the page ends after the job
    /// that brings the [`listed_bytes`] of its jobs to this many (so a page
    /// holds at least one job, and passes the budget by at most one job).
    /// `None`: rows only. Answers that go over a network or into a page
    /// set it ([`DEFAULT_PAGE_BYTES`]); stores stop reading when it is spent.
    pub max_bytes: Option<usize>,
}

/// The byte budget of a listing page in the API, the dashboard and the CLI:
/// 4 MiB of payloads and errors.
pub const DEFAULT_PAGE_BYTES: usize = 4 * 1024 * 1024;

/// What a job weighs in a page's byte budget: its payload and last error as
/// stored, and 512 bytes for every other field.
pub fn listed_bytes(job: &Job) -> usize {
    job.payload.as_str().len() + job.last_error.as_deref().map_or(0, str::len) + 512
}

impl JobFilter {
    /// The effective limit.
    pub fn effective_limit(&self) -> u32 {
        self.limit.unwrap_or(100).clamp(1, 10_000)
    }

    /// Where the next page starts, when `page` (a store's answer to this
    /// filter) may not be the last: it is full by rows, or its byte budget
    /// is spent. (A page that ends exactly with the last job still names
    /// it; the next page is then empty.)
    pub fn next_after<'a>(&self, page: &'a [Job]) -> Option<&'a JobId> {
        let full = page.len() >= self.effective_limit() as usize
            || self
                .max_bytes
                .is_some_and(|budget| page.iter().map(listed_bytes).sum::<usize>() >= budget);
        if full {
            page.last().map(|j| &j.id)
        } else {
            None
        }
    }

    /// A budget for a store reading this filter's page row by row.
    pub fn page_budget(&self) -> PageBudget {
        PageBudget {
            left: self.max_bytes,
        }
    }
}

/// A page's byte budget as a store spends it, row by row
/// ([`JobFilter::max_bytes`]).
#[derive(Clone, Copy, Debug)]
pub struct PageBudget {
    left: Option<usize>,
}

impl PageBudget {
    /// Counts `job` into the page; `true` when the page must end after it.
    pub fn spend(&mut self, job: &Job) -> bool {
        match &mut self.left {
            None => false,
            Some(left) => {
                *left = left.saturating_sub(listed_bytes(job));
                *left == 0
            }
        }
    }
}
