//! Unique jobs beyond the id: a job whose key matches a recent or a live
//! job is not enqueued again — that job stands in for it — and a debounced
//! job pushes its waiting twin later instead of adding a second.

use std::time::Duration;

use crate::clock::Timestamp;
use crate::state::JobState;

/// The longest unique key, in bytes.
pub const MAX_UNIQUE_KEY_BYTES: usize = 200;

/// When a job with the same unique key stands in for a new one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UniqueRule {
    /// One created within this period (any state): the new job is not
    /// enqueued.
    For(Duration),
    /// One in any of these states: the new job is not enqueued.
    While(Vec<JobState>),
    /// One still waiting to start (ready, no attempt yet): it is pushed to
    /// run after this delay from now and takes the new payload. Otherwise
    /// the job is enqueued, due after the delay.
    Debounce(Duration),
}

/// A job's uniqueness: its rule, and the key it is judged by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unique {
    /// The rule.
    pub rule: UniqueRule,
    /// The key; `None`: the job's kind and a hash of its canonical payload.
    pub key: Option<String>,
}

/// What a store looks for before inserting a unique job: the newest job
/// with `key` created after `created_after` (when set), in one of `states`
/// (any when empty), and, when `unstarted`, ready without an attempt yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniqueProbe {
    /// The unique key.
    pub key: String,
    /// Only jobs created after this time.
    pub created_after: Option<Timestamp>,
    /// Only jobs in these states (empty: any).
    pub states: Vec<JobState>,
    /// Only jobs waiting to start (ready, no attempt in this cycle).
    pub unstarted: bool,
    /// For a debounce: the stand-in is pushed to this due time and takes
    /// the new payload.
    pub push_to: Option<Timestamp>,
}
