//! The ranges of times and durations that every store accepts, checked
//! before anything is written, so the same input gets the same answer on
//! SQLite and PostgreSQL (and nothing is stored that a reader cannot parse
//! back).

use std::time::Duration;

use crate::clock::Timestamp;
use crate::error::{Error, Result};

/// 1970-01-01T00:00:00Z, the earliest time a job may name.
pub const EARLIEST_TIME_MS: i64 = 0;
/// 9999-12-31T23:59:59.999Z, the latest time a job may name (RFC 3339
/// writes four-digit years).
pub const LATEST_TIME_MS: i64 = 253_402_300_799_999;
/// The longest delay, snooze, retry delay or elapsed-time budget: 100 years
/// (36,500 days). Further is a time (`run_at`), not a delay.
pub const MAX_DELAY: Duration = Duration::from_secs(36_500 * 86_400);
/// The longest lease (or lease renewal): one day. Longer work renews its
/// lease while it runs.
pub const MAX_LEASE: Duration = Duration::from_secs(86_400);

/// Refuses a time outside 1970 to the end of 9999. `what` names the field.
pub fn check_time(what: &str, t: Timestamp) -> Result<()> {
    if (EARLIEST_TIME_MS..=LATEST_TIME_MS).contains(&t.as_millis()) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} must fall between 1970 and the end of 9999 (got {})",
            t.as_millis()
        )))
    }
}

/// Refuses a delay longer than [`MAX_DELAY`]. `what` names the field.
pub fn check_delay(what: &str, d: Duration) -> Result<()> {
    if d <= MAX_DELAY {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} of {} is too long: at most 36500d (100 years); name a time instead",
            describe(d)
        )))
    }
}

/// Refuses a zero lease or one longer than [`MAX_LEASE`].
pub fn check_lease(what: &str, d: Duration) -> Result<()> {
    if !d.is_zero() && d <= MAX_LEASE {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "{what} of {} is out of range: give more than 0 and at most 24h (renew it while the work runs)",
            describe(d)
        )))
    }
}

fn describe(d: Duration) -> String {
    if d.as_secs() >= 86_400 {
        format!("{}d", d.as_secs() / 86_400)
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations_are_bounded_alike_for_every_store() {
        assert!(check_time("run_at", Timestamp::from_millis(0)).is_ok());
        assert!(check_time("run_at", Timestamp::from_millis(LATEST_TIME_MS)).is_ok());
        assert!(check_time("run_at", Timestamp::from_millis(-1)).is_err());
        assert!(check_time("run_at", Timestamp::from_millis(LATEST_TIME_MS + 1)).is_err());
        assert!(check_delay("delay", Duration::ZERO).is_ok());
        assert!(check_delay("delay", MAX_DELAY).is_ok());
        let e = check_delay("delay", MAX_DELAY + Duration::from_millis(1)).expect_err("too long");
        assert!(e.to_string().contains("delay of 36500d is too long"), "{e}");
        assert!(check_delay("delay", Duration::MAX).is_err());
        assert!(check_lease("lease", Duration::ZERO).is_err());
        assert!(check_lease("lease", Duration::from_millis(1)).is_ok());
        assert!(check_lease("lease", MAX_LEASE).is_ok());
        assert!(check_lease("lease", MAX_LEASE + Duration::from_millis(1)).is_err());
        // Now plus the longest delay is still a time every store holds.
        let far = Timestamp::from_millis(LATEST_TIME_MS - 36_501 * 86_400_000).plus(MAX_DELAY);
        assert!(check_time("t", far).is_ok());
    }
}
