//! The class of a failed attempt: what kind of failure it was, which
//! decides whether it is retried.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The class of a recorded error. Operators filter and alert on it.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorClass {
    /// A failure that may succeed later (the default).
    Retryable,
    /// A failure that will not succeed by retrying (invalid payload,
    /// missing entity): the job goes to `dead` at once.
    Permanent,
    /// The handler ran past its deadline.
    Timeout,
    /// The worker's lease expired before it settled the attempt (it crashed,
    /// stalled or was partitioned away).
    LeaseExpired,
    /// The lease expired again and again (the lost-lease budget): the job
    /// probably kills its worker, so it is quarantined instead of retried.
    LostLease,
    /// The work was cancelled by the handler or an operator.
    Cancelled,
    /// The job waited for a signal that did not arrive in time, and its
    /// policy was to fail.
    SignalTimeout,
}

impl ErrorClass {
    /// The stable name used in storage and output.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorClass::Retryable => "retryable",
            ErrorClass::Permanent => "permanent",
            ErrorClass::Timeout => "timeout",
            ErrorClass::LeaseExpired => "lease_expired",
            ErrorClass::LostLease => "lost_lease",
            ErrorClass::Cancelled => "cancelled",
            ErrorClass::SignalTimeout => "signal_timeout",
        }
    }
}

impl FromStr for ErrorClass {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        Ok(match s {
            "retryable" => ErrorClass::Retryable,
            "permanent" => ErrorClass::Permanent,
            "timeout" => ErrorClass::Timeout,
            "lease_expired" => ErrorClass::LeaseExpired,
            "lost_lease" => ErrorClass::LostLease,
            "cancelled" => ErrorClass::Cancelled,
            "signal_timeout" => ErrorClass::SignalTimeout,
            other => return Err(Error::storage(format!("unknown error class {other:?}"))),
        })
    }
}

impl fmt::Display for ErrorClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
