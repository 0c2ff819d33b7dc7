//! Signals: a job that waits, never claimed, until a named signal arrives
//! for it (or its wait times out), and the signal that releases it.
//!
//! A job enters the `waiting` state when it is enqueued with a wait
//! ([`crate::NewJob::awaiting`]) or when its handler ends an attempt with
//! [`crate::Outcome::Await`]. A signal of the awaited name delivered to it
//! makes it `ready`, due at once, and the next attempt reads the signal's
//! payload. Each signal is delivered at most once and each wait takes
//! exactly one: the delivery is one conditional change of the job's row,
//! so of two signals sent at once one is delivered and the other is
//! refused (or kept, if it asked to be buffered).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::ids::{JobId, Name};
use crate::payload::Payload;
use crate::stamp::AuditStamp;
use crate::state::JobState;

/// The largest signal payload: 64 KiB of JSON. A signal says what
/// happened; large data belongs elsewhere, with a reference in the signal.
pub const MAX_SIGNAL_PAYLOAD_BYTES: usize = 64 * 1024;

/// What a waiting job does when its wait times out before the signal
/// arrives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnAwaitTimeout {
    /// The job goes to `dead` (class `signal_timeout`), where an operator
    /// sees it and may replay it.
    #[default]
    Fail,
    /// The job becomes `ready` and runs without a signal: its handler sees
    /// none ([`crate::ClaimedJob`]'s job has no `resumed_by`), which is how
    /// it tells a timeout from a signal.
    Run,
    /// The job is `cancelled`.
    Cancel,
}

impl OnAwaitTimeout {
    /// Every policy, in documentation order.
    pub const ALL: [OnAwaitTimeout; 3] = [
        OnAwaitTimeout::Fail,
        OnAwaitTimeout::Run,
        OnAwaitTimeout::Cancel,
    ];

    /// The stable name used in storage, the CLI and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            OnAwaitTimeout::Fail => "fail",
            OnAwaitTimeout::Run => "run",
            OnAwaitTimeout::Cancel => "cancel",
        }
    }
}

impl FromStr for OnAwaitTimeout {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        OnAwaitTimeout::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown await-timeout policy {s:?}: use fail, run or cancel"
                ))
            })
    }
}

impl fmt::Display for OnAwaitTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A wait for a signal, as an enqueue or a suspending handler asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Await {
    /// The signal's name.
    pub signal: Name,
    /// How long to wait at most, from the moment the job starts waiting;
    /// `None` waits until the signal comes or an operator acts.
    pub timeout: Option<Duration>,
    /// What happens when the timeout passes first.
    pub on_timeout: OnAwaitTimeout,
}

impl Await {
    /// A wait for the signal `name` (a name like a queue's: 1–100 letters,
    /// digits or `-_.:`), without a timeout.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the name is not valid.
    pub fn new(name: &str) -> Result<Self> {
        Ok(Await {
            signal: Name::parse("signal", name)?,
            timeout: None,
            on_timeout: OnAwaitTimeout::default(),
        })
    }

    /// Waits at most `timeout`, then follows `policy`.
    #[must_use]
    pub fn timeout(mut self, timeout: Duration, policy: OnAwaitTimeout) -> Self {
        self.timeout = Some(timeout);
        self.on_timeout = policy;
        self
    }

    /// Checks the timeout's range ([`crate::bounds::check_delay`]).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a timeout longer than 100 years.
    pub fn validate(&self) -> Result<()> {
        match self.timeout {
            Some(d) => crate::bounds::check_delay("an await timeout", d),
            None => Ok(()),
        }
    }
}

/// The wait a job is in (or was in when an operator cancelled it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Awaiting {
    /// The signal it waits for.
    pub signal: Name,
    /// When its wait times out, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Timestamp>,
    /// What happens then.
    pub on_timeout: OnAwaitTimeout,
}

impl Awaiting {
    /// The wait as a store reads it back: the signal's name, the timeout
    /// and the policy's stored name; `None` when the job waits for none.
    ///
    /// # Errors
    /// [`Error::Storage`] when a stored value does not parse.
    pub fn from_stored(
        signal: Option<String>,
        until: Option<Timestamp>,
        policy: Option<String>,
    ) -> Result<Option<Self>> {
        let Some(signal) = signal else {
            return Ok(None);
        };
        let stored = |e: Error| Error::storage(format!("a stored wait does not parse: {e}"));
        Ok(Some(Awaiting {
            signal: Name::parse("signal", signal).map_err(stored)?,
            until,
            on_timeout: policy
                .as_deref()
                .unwrap_or("fail")
                .parse()
                .map_err(stored)?,
        }))
    }
}

/// A signal to send to a job.
#[derive(Clone, Debug)]
pub struct NewSignal {
    /// The job it is for.
    pub job: JobId,
    /// Its name: delivered to a job waiting for this name.
    pub name: Name,
    /// What it carries to the job's handler (at most
    /// [`MAX_SIGNAL_PAYLOAD_BYTES`]).
    pub payload: Option<Payload>,
    /// When the job is not waiting for it: keep it, undelivered, for the
    /// job's next wait of this name, instead of refusing it. A job that
    /// has ended is refused either way.
    pub buffer: bool,
    /// The person who sent it: recorded as an operator action (`signal`)
    /// in the audit log. `None` for a program's own signal.
    pub by: Option<AuditStamp>,
}

impl NewSignal {
    /// A signal named `name` for job `job`, without payload.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the name is not valid.
    pub fn new(job: JobId, name: &str) -> Result<Self> {
        Ok(NewSignal {
            job,
            name: Name::parse("signal", name)?,
            payload: None,
            buffer: false,
            by: None,
        })
    }

    /// Carries `payload` (JSON text) to the handler.
    ///
    /// # Errors
    /// [`Error::Invalid`] when it is not JSON or is larger than
    /// [`MAX_SIGNAL_PAYLOAD_BYTES`].
    pub fn with_payload_text(mut self, payload: impl Into<String>) -> Result<Self> {
        self.payload = Some(signal_payload(payload.into())?);
        Ok(self)
    }

    /// Carries `value`, serialized as JSON, to the handler.
    ///
    /// # Errors
    /// As [`NewSignal::with_payload_text`].
    pub fn with_payload<T: Serialize + ?Sized>(self, value: &T) -> Result<Self> {
        let text = serde_json::to_string(value).map_err(|e| {
            Error::invalid(format!("the signal's payload cannot be serialized: {e}"))
        })?;
        self.with_payload_text(text)
    }

    /// Keeps the signal for a later wait when the job is not waiting for
    /// it now.
    #[must_use]
    pub fn buffered(mut self) -> Self {
        self.buffer = true;
        self
    }

    /// Records `stamp` as the person who sent it.
    #[must_use]
    pub fn sent_by(mut self, stamp: AuditStamp) -> Self {
        self.by = Some(stamp);
        self
    }

    /// Checks the payload's size and the stamp, as every store does before
    /// writing.
    ///
    /// # Errors
    /// [`Error::Invalid`] saying what to change.
    pub fn validate(&self) -> Result<()> {
        if let Some(p) = &self.payload
            && p.as_str().len() > MAX_SIGNAL_PAYLOAD_BYTES
        {
            return Err(too_large(p.as_str().len()));
        }
        if let Some(stamp) = &self.by {
            crate::stamp::check_operator(&stamp.operator)?;
            stamp
                .reason
                .as_deref()
                .map_or(Ok(()), crate::stamp::check_reason)?;
        }
        Ok(())
    }

    /// The payload as stored (JSON text), if any.
    pub fn payload_text(&self) -> Option<&str> {
        self.payload.as_ref().map(Payload::as_str)
    }
}

fn signal_payload(text: String) -> Result<Payload> {
    if text.len() > MAX_SIGNAL_PAYLOAD_BYTES {
        return Err(too_large(text.len()));
    }
    Payload::from_json_text(text).map_err(|e| match e {
        Error::Invalid(m) => Error::Invalid(m.replacen("the payload", "the signal's payload", 1)),
        other => other,
    })
}

fn too_large(len: usize) -> Error {
    Error::invalid(format!(
        "the signal's payload is {len} bytes; the limit is {MAX_SIGNAL_PAYLOAD_BYTES} bytes — \
         store large data elsewhere and send a reference"
    ))
}

/// A signal in a job's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SignalRecord {
    /// Its number: signals are numbered in the order they were sent.
    pub seq: i64,
    /// Its name.
    pub name: Name,
    /// When it was sent.
    pub sent_at: Timestamp,
    /// When it ended a wait of the job; `None` while it is kept for a
    /// later wait.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delivered_at: Option<Timestamp>,
    /// The size of its payload in bytes (0 without one).
    pub payload_bytes: u64,
}

/// The signal that ended a job's latest wait, as its handler receives it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReceivedSignal {
    /// Its name.
    pub name: Name,
    /// What it carried, if anything.
    pub payload: Option<Payload>,
    /// When it was sent.
    pub sent_at: Timestamp,
}

impl ReceivedSignal {
    /// Decodes the payload into `T`.
    ///
    /// # Errors
    /// [`Error::Invalid`] when there is none or it has another shape.
    pub fn decode<'a, T: Deserialize<'a>>(&'a self) -> Result<T> {
        match &self.payload {
            Some(p) => p.decode(),
            None => Err(Error::invalid(format!(
                "the signal {} carried no payload",
                self.name
            ))),
        }
    }
}

/// The refusal of a signal from the job's id, state and the signal it waits for
/// (for a caller that read only those).
pub fn refusal(id: &str, state: JobState, awaits: Option<&Name>, name: &Name) -> Error {
    let hint = match (state, awaits) {
        (JobState::Waiting, Some(awaited)) => format!(
            "it waits for the signal {awaited}, not {name}; send that one, or pass --buffer \
             (buffer: true) to keep {name} for a later wait"
        ),
        (state, _) if state.is_final() => {
            format!("it has ended and waits for no signal; the signal {name} was not kept")
        }
        _ => format!(
            "it waits for no signal now; pass --buffer (buffer: true) to keep {name} for its \
             next wait of that name"
        ),
    };
    Error::InvalidState {
        id: id.to_owned(),
        state: state.to_string(),
        hint,
    }
}

/// Checks an `Await` and, for a new job, that it does not also depend on
/// other jobs (a job waits for its dependencies or for a signal; a step
/// that must do both suspends itself once it runs, with
/// [`crate::Outcome::Await`]).
pub(crate) fn check_new_wait(wait: &Await, depends_on: &[JobId]) -> Result<()> {
    wait.validate()?;
    if !depends_on.is_empty() {
        return Err(Error::invalid(format!(
            "a job cannot both depend on other jobs and wait for the signal {} at enqueue; let its \
             handler wait once its dependencies are met (Outcome::Await, or {{\"await\": …}} in \
             $ERRAND_OUTCOME)",
            wait.signal
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_signal_payload_is_json_of_at_most_64_kib() {
        let id = JobId::new("j-1").unwrap();
        let ok = NewSignal::new(id.clone(), "paid")
            .unwrap()
            .with_payload_text(r#"{"amount": 12}"#)
            .unwrap();
        assert_eq!(ok.payload_text(), Some(r#"{"amount": 12}"#));
        let e = NewSignal::new(id.clone(), "paid")
            .unwrap()
            .with_payload_text("{")
            .expect_err("not JSON");
        assert!(
            e.to_string()
                .contains("the signal's payload is not valid JSON"),
            "{e}"
        );
        let big = format!("\"{}\"", "x".repeat(MAX_SIGNAL_PAYLOAD_BYTES));
        let e = NewSignal::new(id.clone(), "paid")
            .unwrap()
            .with_payload_text(big)
            .expect_err("too large");
        assert!(e.to_string().contains("the limit is 65536 bytes"), "{e}");
        let e = NewSignal::new(id, "no spaces").expect_err("bad name");
        assert!(e.to_string().contains("signal name"), "{e}");
    }

    #[test]
    fn await_policies_parse_and_a_wait_cannot_also_have_dependencies() {
        for p in OnAwaitTimeout::ALL {
            assert_eq!(p.as_str().parse::<OnAwaitTimeout>().unwrap(), p);
        }
        assert!("later".parse::<OnAwaitTimeout>().is_err());
        let wait = Await::new("paid").unwrap();
        assert!(check_new_wait(&wait, &[]).is_ok());
        let e = check_new_wait(&wait, &[JobId::new("a").unwrap()]).expect_err("deps");
        assert!(e.to_string().contains("Outcome::Await"), "{e}");
        let long = wait.timeout(crate::bounds::MAX_DELAY * 2, OnAwaitTimeout::Run);
        assert!(long.validate().is_err());
    }
}
