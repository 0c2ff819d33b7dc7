//! A job as one JSON object — the body of `POST /v1/jobs`, each child of
//! a lease's completion, each line of an `--exec` command's
//! `$ERRAND_CHILDREN` file — read into a [`JobSpec`], so every surface
//! that takes a job as JSON accepts and refuses exactly the same ones.

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::error::{Error, Result};
use crate::spec::{JobSpec, parse_duration};

/// A job as JSON: the fields of [`JobSpec`], durations as text (`30s`,
/// `5m`), the payload any JSON value, and the wait as
/// `"await": {"signal", "timeout", "on_timeout"}`. Unknown fields are
/// refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)] // each field is the JobSpec field of its name
pub struct JobJson {
    pub kind: String,
    pub queue: Option<String>,
    #[serde(default, deserialize_with = "raw_json")]
    pub payload: Option<Box<RawValue>>,
    pub id: Option<String>,
    pub delay: Option<String>,
    pub run_at: Option<String>,
    pub max_attempts: Option<u32>,
    pub max_lease_expiries: Option<u32>,
    pub give_up_after: Option<String>,
    pub priority: Option<i16>,
    pub key: Option<String>,
    pub key_limit: Option<u32>,
    #[serde(default)]
    pub ordered: bool,
    pub deadline: Option<String>,
    pub traceparent: Option<String>,
    #[serde(default)]
    pub depends_on: Vec<String>,
    pub on_dependency_failure: Option<String>,
    pub workflow: Option<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(default)]
    pub meta: crate::Meta,
    pub unique_for: Option<String>,
    #[serde(default)]
    pub unique_while: Vec<String>,
    pub debounce: Option<String>,
    pub unique_key: Option<String>,
    pub batch: Option<String>,
    #[serde(rename = "await")]
    pub wait: Option<AwaitJson>,
}

/// A wait for a signal as JSON: `{"signal", "timeout", "on_timeout"}`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AwaitJson {
    /// The signal's name.
    pub signal: String,
    /// At most this long (`30m`); none waits for ever.
    pub timeout: Option<String>,
    /// `fail` (default), `run` or `cancel`.
    pub on_timeout: Option<String>,
}

/// A present value, even `null`, as its JSON text.
fn raw_json<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

/// A duration field's text read, or a refusal naming the field.
pub fn duration_field(field: &str, text: Option<String>) -> Result<Option<std::time::Duration>> {
    text.map(|t| {
        parse_duration(&t).map_err(|e| {
            let detail = match e {
                Error::Invalid(m) => m,
                other => other.to_string(),
            };
            Error::invalid(format!("`{field}`: {detail}"))
        })
    })
    .transpose()
}

impl JobJson {
    /// The payload's size as given, in bytes (0 for none).
    pub fn payload_bytes(&self) -> usize {
        self.payload.as_ref().map_or(0, |p| p.get().len())
    }

    /// The job as plain values, durations read.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming a duration field that does not parse.
    pub fn into_spec(self) -> Result<JobSpec> {
        let (await_signal, await_timeout, on_await_timeout) = match self.wait {
            None => (None, None, None),
            Some(w) => (
                Some(w.signal),
                duration_field("await.timeout", w.timeout)?,
                w.on_timeout,
            ),
        };
        Ok(JobSpec {
            kind: self.kind,
            queue: self.queue,
            payload: self.payload.map(|raw| String::from(raw.get())),
            id: self.id,
            delay: duration_field("delay", self.delay)?,
            run_at: self.run_at,
            max_attempts: self.max_attempts,
            max_lease_expiries: self.max_lease_expiries,
            give_up_after: duration_field("give_up_after", self.give_up_after)?,
            priority: self.priority,
            key: self.key,
            key_limit: self.key_limit,
            ordered: self.ordered,
            deadline: self.deadline,
            traceparent: self.traceparent,
            depends_on: self.depends_on,
            on_dependency_failure: self.on_dependency_failure,
            workflow: self.workflow,
            tags: self.tags,
            meta: self.meta,
            unique_for: duration_field("unique_for", self.unique_for)?,
            unique_while: self.unique_while,
            debounce: duration_field("debounce", self.debounce)?,
            unique_key: self.unique_key,
            batch: self.batch,
            await_signal,
            await_timeout,
            on_await_timeout,
        })
    }
}

/// Reads jobs given one JSON object a line (blank lines skipped), each
/// checked like an enqueue with payloads of at most `max_payload` bytes:
/// the children an `--exec` command wrote to `$ERRAND_CHILDREN`.
///
/// # Errors
/// [`Error::Invalid`] naming the line and what is wrong with it.
pub fn jobs_from_json_lines(text: &str, max_payload: usize) -> Result<Vec<crate::NewJob>> {
    let mut jobs = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |e: &dyn std::fmt::Display| Error::invalid(format!("line {}: {e}", n + 1));
        let json: JobJson = serde_json::from_str(line).map_err(|e| at(&e))?;
        let job = json.into_spec().and_then(|s| s.build_limited(max_payload));
        jobs.push(job.map_err(|e| match e {
            Error::Invalid(m) => at(&m),
            other => at(&other),
        })?);
        if jobs.len() > crate::children::MAX_CHILDREN {
            return Err(Error::invalid(format!(
                "more than {} jobs; add them in stages",
                crate::children::MAX_CHILDREN
            )));
        }
    }
    Ok(jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_become_jobs_and_a_bad_line_is_named() {
        let text = r#"{"kind": "page", "id": "p-1", "payload": {"page": 1}}

{"kind": "page", "depends_on": ["p-1"], "delay": "5s"}
{"kind": "page", "await": {"signal": "go", "timeout": "1h"}}
"#;
        let jobs = jobs_from_json_lines(text, 1024).unwrap();
        assert_eq!(jobs.len(), 3);
        assert_eq!(
            jobs[2]
                .wait
                .as_ref()
                .map(|w| (w.signal.as_str(), w.timeout)),
            Some(("go", Some(std::time::Duration::from_secs(3600))))
        );
        assert_eq!(jobs[0].id.as_ref().map(crate::JobId::as_str), Some("p-1"));
        assert_eq!(jobs[0].payload.as_str(), r#"{"page": 1}"#);
        assert_eq!(jobs[1].depends_on.len(), 1);
        let e = jobs_from_json_lines("{\"kind\": \"a\"}\n{\"kind\": \"b\", \"colour\": 1}", 1024)
            .unwrap_err();
        assert!(
            e.to_string().contains("line 2: unknown field `colour`"),
            "{e}"
        );
        let e = jobs_from_json_lines(r#"{"kind": "a", "delay": "soon"}"#, 1024).unwrap_err();
        assert!(e.to_string().contains("line 1: `delay`"), "{e}");
        let e = jobs_from_json_lines(r#"{"kind": "a", "payload": [1, 2, 3]}"#, 4).unwrap_err();
        assert!(e.to_string().starts_with("invalid input: line 1:"), "{e}");
    }
}
