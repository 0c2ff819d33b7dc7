//! Typed jobs: a payload type that names its kind and its defaults once,
//! so the side that enqueues and the side that handles cannot drift apart.
//!
//! ```
//! use errand_core::{JobArgs, JobOptions, NewJob};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Serialize, Deserialize)]
//! struct Receipt {
//!     payment: String,
//! }
//!
//! impl JobArgs for Receipt {
//!     const KIND: &'static str = "receipt";
//!     fn options() -> JobOptions {
//!         JobOptions {
//!             queue: Some("email"),
//!             max_attempts: Some(8),
//!             ..JobOptions::default()
//!         }
//!     }
//! }
//!
//! let job = NewJob::of(&Receipt { payment: "p-1".into() }).unwrap();
//! assert_eq!((job.kind.as_str(), job.queue.as_str(), job.max_attempts), ("receipt", "email", 8));
//! ```
//!
//! String kinds stay for `errand work --exec`, the HTTP API and programs in
//! other languages: a typed job is stored exactly like an untyped one.

use std::time::Duration;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::Result;
use crate::new_job::NewJob;
use crate::payload::Payload;
use crate::retry::RetryPolicy;

/// A kind of job, described by its payload type.
///
/// `KIND` is stored with each job and selects its handler; `options` are
/// the defaults every job of the kind is enqueued with (a caller may still
/// change one job's, on the [`NewJob`] that [`NewJob::of`] returns) and the
/// way a runtime runs the kind (its retry policy and attempt timeout).
pub trait JobArgs: Serialize + DeserializeOwned + Send + 'static {
    /// The kind: letters, digits and `_ . : -`, 1 to 100 of them.
    const KIND: &'static str;

    /// Where and how jobs of this kind run. The default: the default
    /// queue, priority and budgets, and the runtime's retry policy.
    fn options() -> JobOptions {
        JobOptions::default()
    }
}

/// The defaults of a kind of job ([`JobArgs::options`]); `None` keeps
/// Errand's.
#[derive(Clone, Debug, Default)]
pub struct JobOptions {
    /// The queue its jobs go to.
    pub queue: Option<&'static str>,
    /// Higher runs first among due jobs of a queue.
    pub priority: Option<i16>,
    /// The attempt budget (1 to 1000).
    pub max_attempts: Option<u32>,
    /// The lost-lease budget (1 to 1000).
    pub max_lease_expiries: Option<u32>,
    /// The elapsed-time budget, from insertion.
    pub give_up_after: Option<Duration>,
    /// The retry schedule a runtime uses for the kind.
    pub retry: Option<RetryPolicy>,
    /// How long one attempt may run in a runtime; past it the attempt is a
    /// retryable `timeout` failure.
    pub attempt_timeout: Option<Duration>,
}

impl NewJob {
    /// A job of `T`'s kind carrying `args` as its payload, with `T`'s
    /// options applied.
    ///
    /// # Errors
    /// [`crate::Error::Invalid`] when `args` does not serialize to a
    /// payload Errand accepts, or the kind or an option is out of range.
    pub fn of<T: JobArgs>(args: &T) -> Result<NewJob> {
        let options = T::options();
        let mut job = NewJob::new(T::KIND, Payload::from_value(args)?)?;
        if let Some(queue) = options.queue {
            job = job.on_queue(queue)?;
        }
        if let Some(p) = options.priority {
            job = job.with_priority(p);
        }
        if let Some(n) = options.max_attempts {
            job = job.with_max_attempts(n)?;
        }
        if let Some(n) = options.max_lease_expiries {
            job = job.with_max_lease_expiries(n)?;
        }
        if let Some(d) = options.give_up_after {
            job = job.give_up_after(d);
        }
        Ok(job)
    }
}

/// What can be enqueued: a [`NewJob`] as built, or a reference to a typed
/// job's arguments ([`NewJob::of`]).
pub trait IntoNewJob {
    /// The job to insert.
    ///
    /// # Errors
    /// As [`NewJob::of`].
    fn into_new_job(self) -> Result<NewJob>;
}

impl IntoNewJob for NewJob {
    fn into_new_job(self) -> Result<NewJob> {
        Ok(self)
    }
}

impl IntoNewJob for &NewJob {
    fn into_new_job(self) -> Result<NewJob> {
        Ok(self.clone())
    }
}

impl<T: JobArgs> IntoNewJob for &T {
    fn into_new_job(self) -> Result<NewJob> {
        NewJob::of(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;

    #[derive(Serialize, Deserialize)]
    struct Plain {
        n: u32,
    }

    impl JobArgs for Plain {
        const KIND: &'static str = "plain";
    }

    #[derive(Serialize, Deserialize)]
    struct Tuned;

    impl JobArgs for Tuned {
        const KIND: &'static str = "tuned";
        fn options() -> JobOptions {
            JobOptions {
                queue: Some("slow"),
                priority: Some(-4),
                max_attempts: Some(3),
                max_lease_expiries: Some(2),
                give_up_after: Some(Duration::from_secs(60)),
                ..JobOptions::default()
            }
        }
    }

    #[derive(Serialize, Deserialize)]
    struct BadKind;

    impl JobArgs for BadKind {
        const KIND: &'static str = "no spaces allowed";
    }

    #[test]
    fn a_typed_job_carries_its_kind_payload_and_options() {
        let plain = NewJob::of(&Plain { n: 7 }).unwrap();
        assert_eq!(plain.kind.as_str(), "plain");
        assert_eq!(plain.payload.as_str(), r#"{"n":7}"#);
        assert_eq!(plain.queue.as_str(), crate::DEFAULT_QUEUE);
        assert_eq!(plain.max_attempts, crate::DEFAULT_MAX_ATTEMPTS);

        let tuned = (&Tuned).into_new_job().unwrap();
        assert_eq!(
            (tuned.kind.as_str(), tuned.queue.as_str(), tuned.priority),
            ("tuned", "slow", -4)
        );
        assert_eq!((tuned.max_attempts, tuned.max_lease_expiries), (3, 2));
        assert_eq!(tuned.give_up_after, Some(Duration::from_secs(60)));
    }

    #[test]
    fn a_kind_that_is_not_a_name_is_refused_when_enqueued() {
        let err = NewJob::of(&BadKind).unwrap_err();
        assert!(err.to_string().contains("kind"), "{err}");
    }
}
