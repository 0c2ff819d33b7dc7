//! Lease decisions that survive a step of the host's wall clock.
//!
//! SQLite stores judge leases by the host's wall clock, which an operator or
//! NTP may step. A step *forward* by `J` makes every lease look `J` older:
//! without care, the next claim would reclaim jobs whose workers are alive
//! and renewing — a premature reclaim, so a second execution — and those
//! workers' renewals and settlements would be refused. A step *backward*
//! only makes leases look longer (a crashed worker's job is reclaimed
//! later), which is safe.
//!
//! A [`StepGuard`] compares how far the wall clock moved between two
//! readings with how far the monotonic clock moved. When the wall clock
//! jumped ahead by more than [`StepGuard::TOLERANCE`], leases are judged on
//! the old timeline — `now − J` — until every live holder has had time to
//! renew (twice the longest lease this process has granted or renewed);
//! renewals and claims still *write* leases on the new timeline. A backward
//! step cancels what is left of an earlier forward one.
//!
//! The guard is per process: a process that starts after a step cannot see
//! it, and judges leases by the new time at once. `docs/guarantees.md` says
//! what that means.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::clock::Timestamp;

/// Detects wall-clock steps and says which time leases are judged by.
#[derive(Debug, Default)]
pub struct StepGuard {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    last: Option<(Timestamp, Instant)>,
    /// How far behind the wall clock leases are judged, in ms.
    debt_ms: i64,
    /// Until when the debt applies.
    until: Option<Instant>,
    longest_lease: Duration,
}

impl StepGuard {
    /// Wall-clock movement beyond the monotonic clock's that counts as a step.
    pub const TOLERANCE: Duration = Duration::from_millis(500);

    /// The shortest time a forward step is remembered.
    pub const MIN_WINDOW: Duration = Duration::from_secs(1);

    /// A guard that has seen nothing yet.
    pub fn new() -> Self {
        StepGuard::default()
    }

    /// Notes a lease length this process grants or renews (the window after
    /// a step is twice the longest one).
    pub fn note_lease(&self, lease: Duration) {
        let mut s = self.lock();
        s.longest_lease = s.longest_lease.max(lease);
    }

    /// The time leases are judged by, given the wall clock now and the
    /// monotonic clock now.
    pub fn leases_now(&self, wall: Timestamp, mono: Instant) -> Timestamp {
        let mut s = self.lock();
        if let Some((last_wall, last_mono)) = s.last {
            let expected = last_wall.plus(mono.saturating_duration_since(last_mono));
            let step = wall.as_millis() - expected.as_millis();
            let tolerance = i64::try_from(Self::TOLERANCE.as_millis()).unwrap_or(i64::MAX);
            if step > tolerance {
                s.debt_ms = s.debt_ms.saturating_add(step);
                let window = (s.longest_lease * 2).max(Self::MIN_WINDOW);
                s.until = Some(mono + window);
            } else if step < -tolerance {
                s.debt_ms = (s.debt_ms + step).max(0);
            }
        }
        if s.until.is_some_and(|u| mono >= u) {
            s.debt_ms = 0;
            s.until = None;
        }
        s.last = Some((wall, mono));
        Timestamp::from_millis(wall.as_millis().saturating_sub(s.debt_ms))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_795_996_800_000;

    fn at(ms: i64) -> Timestamp {
        Timestamp::from_millis(T0 + ms)
    }

    #[test]
    fn a_steady_clock_judges_leases_by_now() {
        let g = StepGuard::new();
        let m = Instant::now();
        for i in 0..10 {
            let t = at(i * 100);
            assert_eq!(
                g.leases_now(t, m + Duration::from_millis(i as u64 * 100)),
                t
            );
        }
        // Drift under the tolerance is not a step.
        let t = at(1_300);
        assert_eq!(g.leases_now(t, m + Duration::from_millis(1_000)), t);
    }

    #[test]
    fn a_forward_step_is_judged_on_the_old_timeline_for_two_leases() {
        let g = StepGuard::new();
        g.note_lease(Duration::from_secs(2));
        let m = Instant::now();
        let ms = |n: u64| m + Duration::from_millis(n);
        assert_eq!(g.leases_now(at(0), ms(0)), at(0));
        // One second later the wall clock says an hour and a second.
        assert_eq!(g.leases_now(at(3_601_000), ms(1_000)), at(1_000));
        assert_eq!(g.leases_now(at(3_602_000), ms(2_000)), at(2_000));
        // Four seconds (two leases) after the step, the new time counts.
        assert_eq!(g.leases_now(at(3_605_000), ms(5_000)), at(3_605_000));
    }

    #[test]
    fn a_backward_step_cancels_a_forward_one_and_is_otherwise_taken_as_is() {
        let g = StepGuard::new();
        g.note_lease(Duration::from_secs(10));
        let m = Instant::now();
        let ms = |n: u64| m + Duration::from_millis(n);
        g.leases_now(at(0), ms(0));
        assert_eq!(g.leases_now(at(60_000), ms(0)), at(0));
        // Back by 45 s: 15 s of the forward step are left.
        assert_eq!(g.leases_now(at(15_000), ms(0)), at(0));
        // Back by more than is left: no debt, the clock is taken as it is.
        assert_eq!(g.leases_now(at(-20_000), ms(0)), at(-20_000));
        assert_eq!(g.leases_now(at(-19_000), ms(1_000)), at(-19_000));
    }
}
