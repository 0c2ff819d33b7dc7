//! Retry policies: how long a failed attempt waits before the next one.
//!
//! Every policy maps an attempt number (1 for the first attempt) and a
//! uniform sample `u ∈ [0, 1)` to a delay. The sample is an argument so
//! that tests pin it exactly; [`RetryPolicy::delay`] draws it from a
//! random number generator in production.
//!
//! | policy | delay after attempt `n` |
//! |---|---|
//! | equal jitter (default) | `cap = min(max, base·2^(n−1))`, delay = `cap/2 + u·cap/2` ∈ `[cap/2, cap)` |
//! | full jitter | `cap` as above, delay = `u·cap` ∈ `[0, cap)` |
//! | exponential + proportional jitter | `d = min(max, base·2^(n−1))`, delay = `d + u·(p/100)·d` |
//! | fixed | `delay` |
//! | custom | a function of the attempt and the sample |

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use rand::Rng;

/// A function computing a delay from the attempt number and a uniform
/// sample in `[0, 1)`.
pub type CustomDelay = Arc<dyn Fn(u32, f64) -> Duration + Send + Sync>;

/// How long to wait before the next attempt.
#[derive(Clone)]
pub enum RetryPolicy {
    /// `cap = min(max, base·2^(attempt−1))`; delay uniform in `[cap/2, cap)`.
    EqualJitter {
        /// Cap of the first retry.
        base: Duration,
        /// Upper bound of any cap.
        max: Duration,
    },
    /// `cap` as in equal jitter; delay uniform in `[0, cap)`.
    FullJitter {
        /// Cap of the first retry.
        base: Duration,
        /// Upper bound of any cap.
        max: Duration,
    },
    /// `d = min(max, base·2^(attempt−1))` plus up to `percent`% of `d`: the
    /// first retry waits `base` (plus jitter), each later one twice as long.
    ExponentialProportional {
        /// Base delay.
        base: Duration,
        /// Upper bound before jitter.
        max: Duration,
        /// Jitter as a percentage of the delay.
        percent: u32,
    },
    /// The same delay every time.
    Fixed(Duration),
    /// A caller-supplied function.
    Custom(CustomDelay),
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryPolicy::EqualJitter { base, max } => {
                write!(f, "EqualJitter {{ base: {base:?}, max: {max:?} }}")
            }
            RetryPolicy::FullJitter { base, max } => {
                write!(f, "FullJitter {{ base: {base:?}, max: {max:?} }}")
            }
            RetryPolicy::ExponentialProportional { base, max, percent } => write!(
                f,
                "ExponentialProportional {{ base: {base:?}, max: {max:?}, percent: {percent} }}"
            ),
            RetryPolicy::Fixed(d) => write!(f, "Fixed({d:?})"),
            RetryPolicy::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl Default for RetryPolicy {
    /// Equal jitter with a 1 s base and a 1 h cap.
    fn default() -> Self {
        RetryPolicy::EqualJitter {
            base: Duration::from_secs(1),
            max: Duration::from_secs(3600),
        }
    }
}

/// `min(max, base·2^exp)` without overflow.
fn capped_exponential(base: Duration, max: Duration, exp: u32) -> Duration {
    let factor = 2u32.checked_pow(exp.min(62)).unwrap_or(u32::MAX);
    base.checked_mul(factor).map_or(max, |d| d.min(max))
}

impl RetryPolicy {
    /// The delay after attempt `attempt` (1-based) for the uniform sample
    /// `u`, which is clamped into `[0, 1)`.
    pub fn delay_for(&self, attempt: u32, u: f64) -> Duration {
        let u = if u.is_finite() {
            u.clamp(0.0, 1.0 - f64::EPSILON)
        } else {
            0.0
        };
        let attempt = attempt.max(1);
        match self {
            RetryPolicy::EqualJitter { base, max } => {
                let cap = capped_exponential(*base, *max, attempt - 1);
                let half = cap / 2;
                // [cap/2, cap): never reaches cap because u < 1.
                half + (cap - half).mul_f64(u)
            }
            RetryPolicy::FullJitter { base, max } => {
                capped_exponential(*base, *max, attempt - 1).mul_f64(u)
            }
            RetryPolicy::ExponentialProportional { base, max, percent } => {
                let d = capped_exponential(*base, *max, attempt - 1);
                d + d.mul_f64(f64::from(*percent) / 100.0 * u)
            }
            RetryPolicy::Fixed(d) => *d,
            RetryPolicy::Custom(f) => f(attempt, u),
        }
    }

    /// The delay after attempt `attempt`, with a sample drawn from `rng`.
    pub fn delay<R: Rng + ?Sized>(&self, attempt: u32, rng: &mut R) -> Duration {
        self.delay_for(attempt, rng.random::<f64>())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn equal_jitter_matches_the_receipt_policy() {
        let p = RetryPolicy::EqualJitter {
            base: ms(250),
            max: ms(30_000),
        };
        assert_eq!(p.delay_for(1, 0.0), ms(125));
        assert!(p.delay_for(1, 0.999_999) < ms(250));
        assert_eq!(p.delay_for(2, 0.0), ms(250));
        assert_eq!(p.delay_for(3, 0.5), ms(750));
        // Capped: attempt 20 would be far above 30 s.
        assert_eq!(p.delay_for(20, 0.0), ms(15_000));
        assert!(p.delay_for(20, 0.999_999) < ms(30_000));
    }

    #[test]
    fn other_policies_follow_their_formulas() {
        let full = RetryPolicy::FullJitter {
            base: ms(100),
            max: ms(1000),
        };
        assert_eq!(full.delay_for(1, 0.0), ms(0));
        assert_eq!(full.delay_for(3, 0.5), ms(200));
        let prop = RetryPolicy::ExponentialProportional {
            base: ms(5000),
            max: ms(900_000),
            percent: 20,
        };
        assert_eq!(prop.delay_for(1, 0.0), ms(5_000));
        assert_eq!(prop.delay_for(1, 0.5), ms(5_500));
        assert_eq!(prop.delay_for(2, 0.0), ms(10_000));
        assert_eq!(prop.delay_for(30, 0.0), ms(900_000));
        assert_eq!(RetryPolicy::Fixed(ms(7)).delay_for(9, 0.3), ms(7));
        let custom = RetryPolicy::Custom(Arc::new(|n, _| Duration::from_secs(u64::from(n))));
        assert_eq!(custom.delay_for(4, 0.9), Duration::from_secs(4));
    }

    proptest! {
        #[test]
        fn equal_jitter_stays_in_half_open_cap_range(
            base_ms in 1u64..10_000, max_ms in 1u64..10_000_000,
            attempt in 1u32..200, u in 0.0f64..1.0,
        ) {
            let p = RetryPolicy::EqualJitter { base: ms(base_ms), max: ms(max_ms) };
            let cap = capped_exponential(ms(base_ms), ms(max_ms), attempt - 1);
            let d = p.delay_for(attempt, u);
            prop_assert!(d >= cap / 2);
            prop_assert!(d < cap || cap.is_zero());
        }

        #[test]
        fn equal_jitter_floor_grows_with_the_attempt_until_capped(
            base_ms in 1u64..1000, attempt in 1u32..40,
        ) {
            let p = RetryPolicy::EqualJitter { base: ms(base_ms), max: Duration::from_secs(86_400) };
            prop_assert!(p.delay_for(attempt + 1, 0.0) >= p.delay_for(attempt, 0.0));
        }
    }
}
