//! Exact counts past the statistics' cap: each queue's jobs per state as a
//! running service last counted them whole ([`crate::AdminStore::count_exactly`],
//! once a minute while some count passes the cap), shown where the live
//! read stops at the cap.

use serde::Serialize;

use crate::clock::Timestamp;
use crate::stats::QueueStats;

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

/// Where a queue's live count of a state stopped at the cap (`truncated`),
/// puts the stored exact count in its place — unless it is below the cap
/// (then it is older than the live read) — naming the state in `counted`
/// instead and the count's time in `counted_at`. Each pass replaces every
/// stored count, so a state absent from a pass counted none.
pub(crate) fn apply_counted(queues: &mut [QueueStats], counted: &[ExactCount], cap: u64) {
    let Some(at) = counted.iter().map(|c| c.counted_at).min() else {
        return;
    };
    for q in queues {
        let stored = |state: &str| {
            counted
                .iter()
                .find(|c| c.queue == q.queue.as_str() && c.state == state)
                .map_or(0, |c| c.n)
        };
        let mut taken = Vec::new();
        for state in &q.truncated {
            // The live read of `ready` covers the due and the scheduled.
            let parts: &[&str] = match state.as_str() {
                "ready" => &["ready", "scheduled"],
                other => &[other][..],
            };
            if parts.iter().map(|p| stored(p)).sum::<u64>() < cap {
                continue;
            }
            for part in parts {
                let n = stored(part);
                let counts = &mut q.counts;
                match *part {
                    "ready" => counts.ready = n,
                    "scheduled" => counts.scheduled = n,
                    "blocked" => counts.blocked = n,
                    "waiting" => counts.waiting = n,
                    "running" => counts.running = n,
                    "dead" => counts.dead = n,
                    _ => {}
                }
            }
            taken.push(state.clone());
        }
        q.truncated.retain(|s| !taken.contains(s));
        q.counted_at = (!taken.is_empty()).then_some(at);
        q.counted = taken;
    }
}
