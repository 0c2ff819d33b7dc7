//! Where a job stands: its state, when it is due, and the concurrency key
//! it runs under.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::error::Error;
use crate::ids::truncate_for_message;

/// Where a job is in its life. See `docs/state-machine.md`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for its dependencies: not claimable until each is `done`
    /// (or has ended in a way its [`DependencyFailure`](crate::DependencyFailure) policy accepts).
    Blocked,
    /// Waiting for a named signal (see [`crate::Await`]): never claimed
    /// until the signal arrives, or until its wait times out and its
    /// policy applies.
    Waiting,
    /// Waiting to be claimed once `available_at` has passed.
    Ready,
    /// Claimed under a lease; a worker is running it.
    Running,
    /// Finished successfully (terminal).
    Done,
    /// Out of attempts, failed permanently, or its final lease expired:
    /// kept with its history until an operator replays or purges it.
    Dead,
    /// No longer wanted (terminal until replayed).
    Cancelled,
}

impl JobState {
    /// Every state, in display order.
    pub const ALL: [JobState; 7] = [
        JobState::Blocked,
        JobState::Waiting,
        JobState::Ready,
        JobState::Running,
        JobState::Done,
        JobState::Dead,
        JobState::Cancelled,
    ];

    /// Whether the job has ended: done, dead or cancelled (an operator's
    /// replay can still bring a dead or cancelled job back).
    pub fn is_final(self) -> bool {
        matches!(self, JobState::Done | JobState::Dead | JobState::Cancelled)
    }

    /// The stable lowercase name used in storage, CLI output and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Blocked => "blocked",
            JobState::Waiting => "waiting",
            JobState::Ready => "ready",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
        }
    }
}

impl FromStr for JobState {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown state {s:?}: use one of blocked, waiting, ready, running, done, dead, cancelled"
                ))
            })
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// When a new job becomes due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Schedule {
    /// Due at once.
    #[default]
    Now,
    /// Due after a delay, measured on the store's clock.
    After(Duration),
    /// Due at a given time.
    At(Timestamp),
}

/// How jobs that share a key within one queue may run together. See
/// [`JobKey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyLimit {
    /// One at a time, in enqueue order: a job starts only when no job
    /// enqueued before it with the same key is still ready (even if that one
    /// waits for a retry) or running. A `dead` or finished job no longer
    /// blocks its successors.
    Ordered,
    /// At most this many running at once (1–10,000); among due jobs of the
    /// key, the earliest enqueued start first.
    Concurrent(u32),
}

impl KeyLimit {
    /// The most jobs of the key that may run at once.
    pub fn limit(self) -> u32 {
        match self {
            KeyLimit::Ordered => 1,
            KeyLimit::Concurrent(n) => n,
        }
    }

    /// Whether jobs of the key run in enqueue order.
    pub fn is_ordered(self) -> bool {
        matches!(self, KeyLimit::Ordered)
    }
}

/// The largest per-key concurrency limit.
pub const MAX_KEY_LIMIT: u32 = 10_000;
const MAX_KEY_BYTES: usize = 200;

/// A concurrency key: jobs of one queue that carry the same key (a tenant,
/// an account, a document) share its limit, so one key's backlog cannot
/// occupy every worker — a claim passes over a saturated key's jobs and
/// takes other keys' instead. The limit travels with each job; jobs of one
/// key should agree on it (each is admitted by its own).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct JobKey {
    /// The key: 1–200 bytes, no control characters.
    pub name: String,
    /// Whether the key's jobs run one at a time in order.
    pub ordered: bool,
    /// The most of the key's jobs running at once (1 when ordered).
    pub limit: u32,
}

impl JobKey {
    /// Validates a key and its limit.
    pub fn new(name: impl Into<String>, limit: KeyLimit) -> Result<Self, Error> {
        let name = name.into();
        if name.is_empty() || name.len() > MAX_KEY_BYTES {
            return Err(Error::invalid(format!(
                "a concurrency key must be 1 to {MAX_KEY_BYTES} bytes long (got {} bytes)",
                name.len()
            )));
        }
        if name.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
                "a concurrency key may not hold control characters (got {:?})",
                truncate_for_message(&name)
            )));
        }
        let n = limit.limit();
        if n == 0 || n > MAX_KEY_LIMIT {
            return Err(Error::invalid(format!(
                "a per-key concurrency limit must be between 1 and {MAX_KEY_LIMIT} (got {n})"
            )));
        }
        Ok(JobKey {
            name,
            ordered: limit.is_ordered(),
            limit: n,
        })
    }

    /// Trusted constructor for values read back from storage.
    #[doc(hidden)]
    pub fn from_stored(name: String, limit: u32, ordered: bool) -> Self {
        JobKey {
            name,
            ordered,
            limit,
        }
    }

    /// The key's limit as a [`KeyLimit`].
    pub fn key_limit(&self) -> KeyLimit {
        if self.ordered {
            KeyLimit::Ordered
        } else {
            KeyLimit::Concurrent(self.limit)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_their_names() {
        for s in JobState::ALL {
            assert_eq!(s.as_str().parse::<JobState>().ok(), Some(s));
        }
        assert!("stuck".parse::<JobState>().is_err());
    }
}
