//! Exact counts past the statistics' cap: each queue's jobs per state as a
//! running service last counted them whole ([`crate::AdminStore::count_exactly`],
//! once a minute while some count passes the cap), shown where the live
//! read stops at the cap (`apply_counted` in stats.rs).

use serde::Serialize;

use crate::clock::Timestamp;

/// What an exact count counts: a state of a queue's jobs, with `ready`
/// split as the statistics split it.
pub const COUNTED: [&str; 6] = [
    "ready",
    "scheduled",
    "blocked",
    "waiting",
    "running",
    "dead",
];

/// One queue's count of one state, counted whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExactCount {
    /// The queue.
    pub queue: String,
    /// One of [`COUNTED`]: `ready` is due now, `scheduled` due later.
    pub state: String,
    /// How many.
    pub n: u64,
    /// When they were counted (the store's clock).
    pub counted_at: Timestamp,
}
