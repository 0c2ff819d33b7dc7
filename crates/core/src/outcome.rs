//! What a handler says about the attempt it ran.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

use crate::clock::Timestamp;
use crate::error::Error;
use crate::error_class::ErrorClass;

/// The result of running a handler once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The work is done: acknowledge.
    Success,
    /// The work is done, with a result: acknowledge and record `output`
    /// with the job (at most [`crate::MAX_OUTPUT_BYTES`]), where its
    /// dependents read it. Made by [`Outcome::success_with`].
    Output {
        /// The result, as JSON.
        output: crate::payload::Payload,
    },
    /// A failure that may succeed later: retry on the job's policy while
    /// attempts remain, otherwise `dead`.
    Retry {
        /// What went wrong.
        error: String,
    },
    /// A failure with a hint of when to try again (a provider's
    /// Retry-After). Counts an attempt; `dead` if none remain.
    RetryAt {
        /// What went wrong.
        error: String,
        /// When to try again.
        at: Timestamp,
    },
    /// Not now: run again after `delay` without spending an attempt.
    Snooze {
        /// How long to wait.
        delay: Duration,
    },
    /// A failure that retrying cannot fix: `dead` at once.
    Permanent {
        /// What went wrong.
        error: String,
    },
    /// The work is no longer wanted: terminal `cancelled`.
    Cancel {
        /// Why.
        reason: String,
    },
    /// The handler ran past its deadline: a retryable failure of its own
    /// class.
    Timeout,
    /// Something the handler waited for (a database, a remote service) did
    /// not answer in time: a retryable failure recorded under the `timeout`
    /// class with the handler's own message, so retries by class tell
    /// timeouts apart from other failures.
    TimedOut {
        /// What timed out.
        error: String,
    },
    /// Suspend: end this attempt without spending it and wait, holding no
    /// worker, for the signal `wait.signal` (at most `wait.timeout`, then
    /// `wait.on_timeout`). The job is `waiting` until the signal arrives;
    /// then it is claimable again and its next attempt reads the signal's
    /// payload. A signal already kept for it (sent with `buffer`) is taken
    /// at once. Made by [`Outcome::await_signal`].
    Await {
        /// What to wait for.
        wait: crate::signal::Await,
    },
    /// The handler already acknowledged the job itself, inside the same
    /// database transaction as its own writes (transactional completion:
    /// `SqliteStore::complete_in`, `PgStore::complete_in`). The fence still
    /// applied there: had the lease been lost, that transaction would have
    /// failed and rolled back with the handler's writes.
    Completed,
}

impl Outcome {
    /// The class a failure is recorded under; `None` for outcomes that are
    /// not failures (success, snooze, cancel, transactional completion).
    pub fn error_class(&self) -> Option<ErrorClass> {
        match self {
            Outcome::Retry { .. } | Outcome::RetryAt { .. } => Some(ErrorClass::Retryable),
            Outcome::Permanent { .. } => Some(ErrorClass::Permanent),
            Outcome::Timeout | Outcome::TimedOut { .. } => Some(ErrorClass::Timeout),
            Outcome::Success
            | Outcome::Output { .. }
            | Outcome::Snooze { .. }
            | Outcome::Cancel { .. }
            | Outcome::Await { .. }
            | Outcome::Completed => None,
        }
    }

    /// A failure's parts — its error, class and the retry time the handler
    /// asked for — or, for an outcome that is not a failure, the outcome
    /// itself back.
    ///
    /// # Errors
    /// `Err(self)` for success, output, snooze, cancel, await and a
    /// transactional completion.
    pub fn into_failure(self) -> Result<(String, ErrorClass, Option<Timestamp>), Outcome> {
        match self {
            Outcome::Retry { error } => Ok((error, ErrorClass::Retryable, None)),
            Outcome::RetryAt { error, at } => Ok((error, ErrorClass::Retryable, Some(at))),
            Outcome::Permanent { error } => Ok((error, ErrorClass::Permanent, None)),
            Outcome::Timeout => Ok((
                "the handler ran past its deadline".to_owned(),
                ErrorClass::Timeout,
                None,
            )),
            Outcome::TimedOut { error } => Ok((error, ErrorClass::Timeout, None)),
            other => Err(other),
        }
    }

    /// Success with a result: `output` serialized as JSON and recorded with
    /// the job. An output that cannot be serialized, or is larger than
    /// [`crate::MAX_OUTPUT_BYTES`], makes the attempt a permanent failure
    /// that says so (retrying would produce it again).
    pub fn success_with<T: Serialize + ?Sized>(output: &T) -> Self {
        match crate::payload::Payload::output_from_value(output) {
            Ok(output) => Outcome::Output { output },
            Err(e) => {
                Outcome::permanent(format!("the handler's output was refused: {}", plain(&e)))
            }
        }
    }

    /// Suspends the job until the signal `name` arrives, at most
    /// `timeout` (then `policy`); see [`Outcome::Await`]. A name that is
    /// not valid makes the attempt a permanent failure that says so.
    pub fn await_signal(
        name: &str,
        timeout: Option<Duration>,
        policy: crate::signal::OnAwaitTimeout,
    ) -> Self {
        match crate::signal::Await::new(name) {
            Ok(mut wait) => {
                wait.timeout = timeout;
                wait.on_timeout = policy;
                Outcome::Await { wait }
            }
            Err(e) => Outcome::permanent(format!("the handler's wait was refused: {}", plain(&e))),
        }
    }

    /// A retryable failure.
    pub fn retry(error: impl fmt::Display) -> Self {
        Outcome::Retry {
            error: error.to_string(),
        }
    }

    /// A permanent failure.
    pub fn permanent(error: impl fmt::Display) -> Self {
        Outcome::Permanent {
            error: error.to_string(),
        }
    }

    /// A retryable failure of class `timeout`: what the handler waited for
    /// did not answer in time.
    pub fn timed_out(error: impl fmt::Display) -> Self {
        Outcome::TimedOut {
            error: error.to_string(),
        }
    }

    /// The outcome as a store can record it, whatever the handler said: a
    /// snooze or retry time out of range ([`crate::bounds`]) becomes a
    /// retryable failure that says so (a handler's mistake, recorded, rather
    /// than a settlement every store refuses and the job left to its lease);
    /// a NUL character in an error or reason (PostgreSQL's text cannot hold
    /// it) becomes U+FFFD; an error or reason longer than
    /// [`MAX_RECORDED_TEXT_BYTES`] keeps its beginning.
    pub fn into_storable(self) -> Outcome {
        match self {
            Outcome::Snooze { delay } => match crate::bounds::check_delay("a snooze", delay) {
                Ok(()) => Outcome::Snooze { delay },
                Err(e) => Outcome::retry(format!("the handler asked for {e}")),
            },
            Outcome::RetryAt { error, at } => match crate::bounds::check_time("a retry time", at) {
                Ok(()) => Outcome::RetryAt {
                    error: storable_text(error),
                    at,
                },
                Err(e) => Outcome::retry(format!(
                    "{} (and the handler's retry time was refused: {e})",
                    storable_text(error)
                )),
            },
            Outcome::Retry { error } => Outcome::Retry {
                error: storable_text(error),
            },
            Outcome::Permanent { error } => Outcome::Permanent {
                error: storable_text(error),
            },
            Outcome::TimedOut { error } => Outcome::TimedOut {
                error: storable_text(error),
            },
            Outcome::Cancel { reason } => Outcome::Cancel {
                reason: storable_text(reason),
            },
            // An output made any other way than `success_with` is checked
            // here, so an oversized one fails the attempt the same way.
            Outcome::Output { output } => match crate::payload::Payload::output(output.as_str()) {
                Ok(output) => Outcome::Output { output },
                Err(e) => {
                    Outcome::permanent(format!("the handler's output was refused: {}", plain(&e)))
                }
            },
            Outcome::Await { wait } => match wait.validate() {
                Ok(()) => Outcome::Await { wait },
                Err(e) => Outcome::retry(format!("the handler asked for {}", plain(&e))),
            },
            other @ (Outcome::Success | Outcome::Timeout | Outcome::Completed) => other,
        }
    }
}

/// An error's message without the kind prefix its display adds.
fn plain(e: &Error) -> String {
    match e {
        Error::Invalid(m) => m.clone(),
        other => other.to_string(),
    }
}

/// The longest error or reason text a worker records (its beginning is
/// kept, with `…` after it).
pub const MAX_RECORDED_TEXT_BYTES: usize = 8 * 1024;

/// `text` without NUL characters (each becomes U+FFFD) and cut to
/// [`MAX_RECORDED_TEXT_BYTES`] at a character boundary.
pub fn storable_text(text: String) -> String {
    let mut text = if text.contains('\0') {
        text.replace('\0', "\u{fffd}")
    } else {
        text
    };
    if text.len() > MAX_RECORDED_TEXT_BYTES {
        let mut end = MAX_RECORDED_TEXT_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bounds::MAX_DELAY;

    #[test]
    fn an_outcome_no_store_can_record_becomes_one_it_can() {
        let snooze = Outcome::Snooze {
            delay: MAX_DELAY + Duration::from_secs(1),
        };
        match snooze.into_storable() {
            Outcome::Retry { error } => assert!(error.contains("snooze"), "{error}"),
            other => panic!("{other:?}"),
        }
        let ok = Outcome::Snooze { delay: MAX_DELAY };
        assert_eq!(ok.clone().into_storable(), ok);
        let late = Outcome::RetryAt {
            error: "busy".into(),
            at: Timestamp::from_millis(crate::bounds::LATEST_TIME_MS + 1),
        };
        match late.into_storable() {
            Outcome::Retry { error } => assert!(error.starts_with("busy (and"), "{error}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            Outcome::retry("a\0b").into_storable(),
            Outcome::retry("a\u{fffd}b")
        );
        let long = "é".repeat(MAX_RECORDED_TEXT_BYTES);
        match (Outcome::Cancel { reason: long }).into_storable() {
            Outcome::Cancel { reason } => {
                assert!(reason.len() <= MAX_RECORDED_TEXT_BYTES + '…'.len_utf8());
                assert!(reason.ends_with('…'));
            }
            other => panic!("{other:?}"),
        }
    }
}
