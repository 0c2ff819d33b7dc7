//! The outcome file of `errand work --exec`: a command says more than its
//! exit status can by writing one JSON object to the file named by
//! `$ERRAND_OUTCOME`:
//!
//! * `{"cancel": "REASON"}` — the work is no longer wanted (`cancelled`);
//! * `{"snooze": "DUR"}` — run again after DUR, spending no attempt;
//! * `{"await": {"signal": "NAME", "timeout": "DUR", "on_timeout":
//!   "fail|run|cancel"}}` — suspend: wait for the signal NAME (at most DUR,
//!   then the policy, `fail` when left out), spending no attempt and
//!   holding no worker; the next attempt finds the signal in
//!   `$ERRAND_SIGNAL`;
//! * `{"retry_at": "RFC3339"}` or `{"retry_in": "DUR"}` — a failure to try
//!   again at that time, optionally with `"error"`;
//! * `{"error": "TEXT", "class": "retryable|permanent|timeout"}` — a
//!   failure of that class (`retryable` when left out).
//!
//! A file holding an outcome decides the attempt, whatever the exit status.
//! A file that cannot be used (not JSON, unknown fields, two outcomes at
//! once, a bad duration or time) is a retryable failure saying why; no file,
//! or one holding only whitespace, leaves the decision to the exit status.

use std::path::Path;
use std::time::Duration;

use errand_core::bounds::{check_delay, check_time};
use errand_core::{Outcome, Timestamp};
use serde::Deserialize;
use tokio::io::AsyncReadExt;

/// The most bytes of an outcome file read.
const MAX_OUTCOME_BYTES: u64 = 64 * 1024;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OutcomeFile {
    cancel: Option<String>,
    snooze: Option<String>,
    #[serde(rename = "await")]
    wait: Option<AwaitFile>,
    retry_at: Option<String>,
    retry_in: Option<String>,
    error: Option<String>,
    class: Option<String>,
}

/// The `await` of an outcome file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AwaitFile {
    signal: String,
    timeout: Option<String>,
    on_timeout: Option<String>,
}

impl AwaitFile {
    fn outcome(&self) -> Result<Outcome, String> {
        let mut wait =
            errand_core::Await::new(&self.signal).map_err(|e| format!("await: {}", plain(e)))?;
        if let Some(text) = &self.timeout {
            wait.timeout = Some(duration("await timeout", text)?);
        }
        if let Some(policy) = &self.on_timeout {
            wait.on_timeout = policy
                .parse()
                .map_err(|e| format!("await on_timeout: {}", plain(e)))?;
        }
        Ok(Outcome::Await { wait })
    }
}

fn plain(e: errand_core::Error) -> String {
    match e {
        errand_core::Error::Invalid(why) => why,
        other => other.to_string(),
    }
}

/// What the command's outcome file at `path` says at `now`: `None` when it
/// wrote none.
pub(crate) async fn read(path: &Path, now: Timestamp) -> Option<Outcome> {
    let unusable = |why: String| {
        Some(Outcome::retry(format!(
            "the command's outcome file cannot be used: {why}; write one JSON object such as \
             {{\"snooze\": \"30s\"}} or {{\"error\": \"…\", \"class\": \"permanent\"}} to \
             $ERRAND_OUTCOME"
        )))
    };
    match tokio::fs::metadata(path).await {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => return unusable(format!("{}: {e}", path.display())),
        Ok(meta) if !meta.is_file() => return unusable("it is not a regular file".to_owned()),
        Ok(meta) if meta.len() > MAX_OUTCOME_BYTES => {
            return unusable(format!(
                "it holds {} bytes; the limit is {MAX_OUTCOME_BYTES}",
                meta.len()
            ));
        }
        Ok(_) => {}
    }
    let mut bytes = Vec::new();
    let read = async {
        let file = tokio::fs::File::open(path).await?;
        file.take(MAX_OUTCOME_BYTES + 1)
            .read_to_end(&mut bytes)
            .await
    };
    if let Err(e) = read.await {
        return unusable(format!("{}: {e}", path.display()));
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return unusable("it is not UTF-8 text".to_owned());
    };
    if text.trim().is_empty() {
        return None;
    }
    match parse(text, now) {
        Ok(outcome) => Some(outcome),
        Err(why) => unusable(why),
    }
}

/// At most the first 40 characters of a value the command wrote, for a
/// message that must keep its advice after it.
fn clip(value: &str) -> String {
    let mut chars = value.chars();
    let head: String = chars.by_ref().take(40).collect();
    if chars.next().is_some() {
        format!("{head:?}…")
    } else {
        format!("{head:?}")
    }
}

/// The outcome `text` names, or why it names none that can be used.
fn parse(text: &str, now: Timestamp) -> Result<Outcome, String> {
    let mut file: OutcomeFile = serde_json::from_str(text).map_err(|e| {
        format!(
            "it is not a JSON object of cancel, snooze, await, retry_at, retry_in, error and class ({e})"
        )
    })?;
    // An empty error says nothing: as if none were given.
    if file.error.as_deref().is_some_and(|e| e.trim().is_empty()) {
        file.error = None;
    }
    if file.outcomes_named() > 1 {
        return Err(
            "it names more than one of cancel, snooze, await, retry_at and retry_in".to_owned(),
        );
    }
    if let Some(reason) = &file.cancel {
        file.alone("cancel")?;
        let reason = if reason.trim().is_empty() {
            "the command cancelled the job".to_owned()
        } else {
            reason.clone()
        };
        return Ok(Outcome::Cancel { reason });
    }
    if let Some(text) = &file.snooze {
        file.alone("snooze")?;
        return Ok(Outcome::Snooze {
            delay: duration("snooze", text)?,
        });
    }
    if let Some(wait) = &file.wait {
        file.alone("await")?;
        return wait.outcome();
    }
    if let Some(at) = file.retry_time(now)? {
        return file.retry_at(at);
    }
    file.failure()
}

impl OutcomeFile {
    /// How many of cancel, snooze, await, retry_at and retry_in the file names.
    fn outcomes_named(&self) -> usize {
        [
            self.cancel.is_some(),
            self.snooze.is_some(),
            self.wait.is_some(),
            self.retry_at.is_some(),
            self.retry_in.is_some(),
        ]
        .iter()
        .filter(|x| **x)
        .count()
    }

    /// Refuses an error or class given with `what`, which takes neither.
    fn alone(&self, what: &str) -> Result<(), String> {
        if self.error.is_some() || self.class.is_some() {
            return Err(format!("{what} takes no error or class"));
        }
        Ok(())
    }

    /// When the file asks to be tried again (retry_at, or retry_in from `now`), if it does.
    fn retry_time(&self, now: Timestamp) -> Result<Option<Timestamp>, String> {
        match (&self.retry_at, &self.retry_in) {
            (Some(text), _) => Ok(Some(retry_at_time(text)?)),
            (None, Some(text)) => Ok(Some(now.plus(duration("retry_in", text)?))),
            (None, None) => Ok(None),
        }
    }

    /// A retryable failure to try again at `at`, refused with any other class.
    fn retry_at(self, at: Timestamp) -> Result<Outcome, String> {
        if self.class.as_deref().is_some_and(|c| c != "retryable") {
            return Err(
                "retry_at and retry_in are retryable failures: leave out class (or give \
                 \"retryable\"); for a permanent failure or a timeout give error and class alone"
                    .to_owned(),
            );
        }
        let error = self
            .error
            .unwrap_or_else(|| format!("the command asked to be tried again at {at}"));
        Ok(Outcome::RetryAt { error, at })
    }

    /// The failure error and class name (`retryable` when only an error is given), or why none.
    fn failure(self) -> Result<Outcome, String> {
        let Some(class) = self
            .class
            .as_deref()
            .or(self.error.as_ref().map(|_| "retryable"))
        else {
            return Err("it names no outcome".to_owned());
        };
        let error = |default: &str| self.error.clone().unwrap_or_else(|| default.to_owned());
        match class {
            "retryable" => Ok(Outcome::Retry {
                error: error("the command reported a failure"),
            }),
            "permanent" => Ok(Outcome::Permanent {
                error: error("the command reported a permanent failure"),
            }),
            "timeout" => Ok(Outcome::TimedOut {
                error: error("the command reported a timeout"),
            }),
            other => Err(format!(
                "class {} is not one of retryable, permanent and timeout",
                clip(other)
            )),
        }
    }
}

/// Reads the duration `field` gives (`30s`), which must be a delay within bounds.
fn duration(field: &str, text: &str) -> Result<Duration, String> {
    let d = errand::parse_duration(text).map_err(|e| match e {
        errand_core::Error::Invalid(why) => format!("{field}: {why}"),
        other => format!("{field}: {other}"),
    })?;
    check_delay(field, d).map_err(|e| e.to_string())?;
    Ok(d)
}

/// Reads the time retry_at gives, which must be an RFC 3339 time within bounds.
fn retry_at_time(text: &str) -> Result<Timestamp, String> {
    Timestamp::parse_rfc3339(text)
        .map_err(|_| {
            format!(
                "retry_at: {} is not an RFC 3339 time (write it like 2026-12-02T10:00:00Z)",
                clip(text)
            )
        })
        .and_then(|t| {
            check_time("retry_at", t)
                .map(|()| t)
                .map_err(|e| e.to_string())
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Timestamp {
        Timestamp::parse_rfc3339("2026-12-02T10:00:00Z").unwrap_or(Timestamp::EPOCH)
    }

    fn ok(text: &str) -> Outcome {
        parse(text, now()).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    fn refused(text: &str) -> String {
        match parse(text, now()) {
            Err(why) => why,
            Ok(o) => panic!("{text} was taken as {o:?}"),
        }
    }

    #[test]
    fn each_form_names_its_outcome() {
        assert!(matches!(ok(r#"{"cancel": "order withdrawn"}"#),
            Outcome::Cancel { reason } if reason == "order withdrawn"));
        assert!(matches!(ok(r#"{"snooze": "90s"}"#),
            Outcome::Snooze { delay } if delay == Duration::from_secs(90)));
        assert!(
            matches!(ok(r#"{"retry_in": "5m", "error": "rate limited"}"#),
            Outcome::RetryAt { error, at } if error == "rate limited"
                && at == now().plus(Duration::from_secs(300)))
        );
        assert!(matches!(ok(r#"{"retry_at": "2026-12-02T11:00:00Z"}"#),
            Outcome::RetryAt { at, .. } if at == now().plus(Duration::from_secs(3600))));
        assert!(
            matches!(ok(r#"{"error": "no such user", "class": "permanent"}"#),
            Outcome::Permanent { error } if error == "no such user")
        );
        assert!(matches!(ok(r#"{"error": "db slow", "class": "timeout"}"#),
            Outcome::TimedOut { error } if error == "db slow"));
        assert!(matches!(ok(r#"{"error": "flaky"}"#),
            Outcome::Retry { error } if error == "flaky"));
        assert!(matches!(
            ok(r#"{"class": "permanent"}"#),
            Outcome::Permanent { .. }
        ));
    }

    #[test]
    fn an_await_suspends_for_a_signal_with_its_timeout_and_policy() {
        match ok(r#"{"await": {"signal": "approved", "timeout": "2h", "on_timeout": "run"}}"#) {
            Outcome::Await { wait } => {
                assert_eq!(wait.signal.as_str(), "approved");
                assert_eq!(wait.timeout, Some(Duration::from_secs(7200)));
                assert_eq!(wait.on_timeout, errand_core::OnAwaitTimeout::Run);
            }
            other => panic!("{other:?}"),
        }
        match ok(r#"{"await": {"signal": "approved"}}"#) {
            Outcome::Await { wait } => {
                assert_eq!(wait.timeout, None);
                assert_eq!(wait.on_timeout, errand_core::OnAwaitTimeout::Fail);
            }
            other => panic!("{other:?}"),
        }
        assert!(refused(r#"{"await": {"signal": "a b"}}"#).contains("signal name"));
        assert!(
            refused(r#"{"await": {"signal": "a", "on_timeout": "later"}}"#)
                .contains("fail, run or cancel")
        );
        assert!(refused(r#"{"await": {"signal": "a"}, "snooze": "1s"}"#).contains("more than one"));
        assert!(
            refused(r#"{"await": {"signal": "a"}, "error": "x"}"#).contains("await takes no error")
        );
        assert!(refused(r#"{"await": {"sig": "a"}}"#).contains("not a JSON object"));
    }

    #[test]
    fn an_unusable_file_says_why() {
        assert!(refused("snooze 30s").contains("not a JSON object"));
        assert!(refused(r#"{"snoze": "30s"}"#).contains("unknown field"));
        assert!(refused(r#"{"snooze": "30s", "cancel": "x"}"#).contains("more than one"));
        assert!(refused(r#"{"snooze": "soon"}"#).contains("snooze"));
        assert!(refused(r#"{"snooze": "0s"}"#).contains("longer than zero"));
        let long = format!(r#"{{"snooze": "{}"}}"#, "x".repeat(5000));
        let why = refused(&long);
        assert!(
            why.len() < 200 && why.contains("…"),
            "the value is clipped: {why}"
        );
        assert!(matches!(ok(r#"{"error": " ", "class": "permanent"}"#),
            Outcome::Permanent { error } if error == "the command reported a permanent failure"));
        assert!(refused(r#"{"retry_in": "500000d"}"#).contains("too long"));
        let huge = refused(r#"{"retry_in": "99999999999999999999999s"}"#);
        assert!(
            huge.contains("too long") && !huge.contains("longer than zero"),
            "{huge}"
        );
        assert!(refused(r#"{"retry_at": "tomorrow"}"#).contains("retry_at"));
        assert!(refused(r#"{"cancel": "x", "class": "permanent"}"#).contains("no error or class"));
        assert!(refused(r#"{"retry_in": "1m", "class": "permanent"}"#).contains("leave out class"));
        assert!(refused(r#"{"error": "x", "class": "fatal"}"#).contains("not one of"));
        assert!(refused("{}").contains("no outcome"));
        assert!(refused("[1]").contains("not a JSON object"));
    }
}
