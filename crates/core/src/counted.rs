//! Exact counts past the statistics' cap: each queue's jobs per state as a
//! running service last counted them whole ([`crate::AdminStore::count_exactly`],
//! once a minute while some count passes the cap), shown where the live
//! read stops at the cap (`apply_counted` in stats.rs).

use serde::Serialize;

use crate::clock::Timestamp;

/// One queue's count of one state, counted whole.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ExactCount {
    /// The queue.
    pub queue: String,
    /// `ready` (due now), `scheduled` (due later), `blocked`, `waiting`,
    /// `running` or `dead`.
    pub state: String,
    /// How many.
    pub n: u64,
    /// When they were counted (the store's clock).
    pub counted_at: Timestamp,
}
