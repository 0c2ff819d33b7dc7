//! A queue's concurrency cap: at most so many of its jobs running at once,
//! across every process and host that serves it, changed at run time.

use serde::Serialize;

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::ids::Name;
use crate::stamp::{check_operator, check_reason};

/// The largest cap a queue can have.
pub const MAX_QUEUE_CONCURRENCY: u32 = 100_000;

/// A queue's cap as stored: claims in every process start a job of the
/// queue only while fewer than `concurrency` of its jobs are running.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueueLimit {
    /// The queue.
    pub queue: Name,
    /// How many of its jobs may run at once.
    pub concurrency: u32,
    /// Who set it.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
    /// When.
    pub set_at: Timestamp,
}

/// An operator setting (`Some`) or clearing (`None`) a queue's cap.
#[derive(Clone, Debug)]
pub struct QueueLimitRequest {
    /// The queue.
    pub queue: Name,
    /// The new cap; `None` clears it.
    pub concurrency: Option<u32>,
    /// Who asked.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

impl QueueLimitRequest {
    /// The audit action of setting a cap.
    pub const SET: &str = "limit";
    /// The audit action of clearing one.
    pub const CLEAR: &str = "unlimit";

    /// Checks the cap, the operator and the reason.
    pub fn validate(&self) -> Result<()> {
        if let Some(n) = self.concurrency {
            check_concurrency(n)?;
        }
        check_operator(&self.operator)?;
        self.reason.as_deref().map_or(Ok(()), check_reason)
    }
}

/// Checks a queue's cap: 1 to [`MAX_QUEUE_CONCURRENCY`].
pub fn check_concurrency(n: u32) -> Result<()> {
    if n == 0 || n > MAX_QUEUE_CONCURRENCY {
        return Err(Error::invalid(format!(
            "a queue's concurrency must be 1 to {MAX_QUEUE_CONCURRENCY}, not {n} \
             (to stop its jobs from starting, pause the queue; to lift the cap, clear it)"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(concurrency: Option<u32>) -> QueueLimitRequest {
        QueueLimitRequest {
            queue: Name::parse("queue", "mail".to_owned()).expect("name"),
            concurrency,
            operator: "ops".to_owned(),
            reason: None,
        }
    }

    #[test]
    fn the_cap_is_one_to_the_maximum() {
        for n in [1, 5, MAX_QUEUE_CONCURRENCY] {
            assert!(request(Some(n)).validate().is_ok(), "{n}");
        }
        for n in [0, MAX_QUEUE_CONCURRENCY + 1, 1_000_000_000] {
            let err = request(Some(n)).validate().expect_err("refused");
            assert!(err.to_string().contains("1 to 100000"), "{err}");
        }
        assert!(request(None).validate().is_ok());
    }

    #[test]
    fn an_operator_is_required() {
        let mut r = request(Some(3));
        r.operator = " ".to_owned();
        assert!(r.validate().is_err());
    }
}
