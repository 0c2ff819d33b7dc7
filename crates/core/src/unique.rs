//! Unique jobs beyond the id: a job whose key matches a recent or a live
//! job is not enqueued again — that job stands in for it — and a debounced
//! job pushes its waiting twin later instead of adding a second.

use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::clock::Timestamp;
use crate::error::Error;
use crate::job::{JobState, NewJob};

/// The longest unique key, in bytes.
pub const MAX_UNIQUE_KEY_BYTES: usize = 200;

/// When a job with the same unique key stands in for a new one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UniqueRule {
    /// One created within this period (any state): the new job is not
    /// enqueued.
    For(Duration),
    /// One in any of these states: the new job is not enqueued.
    While(Vec<JobState>),
    /// One still waiting to start (ready, no attempt yet): it is pushed to
    /// run after this delay from now and takes the new payload. Otherwise
    /// the job is enqueued, due after the delay.
    Debounce(Duration),
}

/// A job's uniqueness: its rule, and the key it is judged by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unique {
    /// The rule.
    pub rule: UniqueRule,
    /// The key; `None`: the job's kind and a hash of its canonical payload.
    pub key: Option<String>,
}

/// What a store looks for before inserting a unique job: the newest job
/// with `key` created after `created_after` (when set), in one of `states`
/// (any when empty), and, when `unstarted`, ready without an attempt yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UniqueProbe {
    /// The unique key.
    pub key: String,
    /// Only jobs created after this time.
    pub created_after: Option<Timestamp>,
    /// Only jobs in these states (empty: any).
    pub states: Vec<JobState>,
    /// Only jobs waiting to start (ready, no attempt in this cycle).
    pub unstarted: bool,
    /// For a debounce: the stand-in is pushed to this due time and takes
    /// the new payload.
    pub push_to: Option<Timestamp>,
}

impl NewJob {
    /// Makes the job unique for `period`: while a job with the same key
    /// (see [`NewJob::with_unique_key`]) created within the period is
    /// stored, enqueueing returns it and creates nothing.
    pub fn unique_for(mut self, period: Duration) -> Self {
        self.set_rule(UniqueRule::For(period));
        self
    }

    /// Makes the job unique while a job with the same key is in one of
    /// `states` (for example ready and running): enqueueing then returns it
    /// and creates nothing.
    pub fn unique_while(mut self, states: &[JobState]) -> Self {
        self.set_rule(UniqueRule::While(states.to_vec()));
        self
    }

    /// Debounces the job: while a job with the same key waits to start,
    /// enqueueing pushes it to run `delay` from now with this job's
    /// payload instead of adding a second; otherwise the job is enqueued,
    /// due after `delay` (this sets its schedule).
    pub fn debounce(mut self, delay: Duration) -> Self {
        self.set_rule(UniqueRule::Debounce(delay));
        self.schedule = crate::job::Schedule::After(delay);
        self
    }

    /// Sets the key a unique or debounced job is judged by (default: its
    /// kind and a hash of its canonical payload). Jobs of any kind and
    /// queue with the same key are judged together.
    pub fn with_unique_key(mut self, key: &str) -> Self {
        match &mut self.unique {
            Some(u) => u.key = Some(key.to_owned()),
            None => {
                self.unique = Some(Unique {
                    rule: UniqueRule::For(Duration::ZERO),
                    key: Some(key.to_owned()),
                });
            }
        }
        self
    }

    fn set_rule(&mut self, rule: UniqueRule) {
        match &mut self.unique {
            Some(u) => u.rule = rule,
            None => self.unique = Some(Unique { rule, key: None }),
        }
    }

    /// The key the job is judged by, if it is unique: the one given, or
    /// `KIND:` and the SHA-256 of its canonical payload (object keys
    /// sorted, no insignificant space).
    pub fn unique_key(&self) -> Option<String> {
        let unique = self.unique.as_ref()?;
        Some(match &unique.key {
            Some(key) => key.clone(),
            None => format!("{}:{}", self.kind, payload_digest(self.payload.as_str())),
        })
    }

    /// What a store looks for before inserting this job, at `now`; `None`
    /// when the job is not unique.
    pub fn unique_probe(&self, now: Timestamp) -> Option<UniqueProbe> {
        let unique = self.unique.as_ref()?;
        let key = self.unique_key()?;
        Some(match &unique.rule {
            UniqueRule::For(period) => UniqueProbe {
                key,
                created_after: Some(Timestamp::from_millis(
                    now.as_millis()
                        .saturating_sub(i64::try_from(period.as_millis()).unwrap_or(i64::MAX)),
                )),
                states: Vec::new(),
                unstarted: false,
                push_to: None,
            },
            UniqueRule::While(states) => UniqueProbe {
                key,
                created_after: None,
                states: states.clone(),
                unstarted: false,
                push_to: None,
            },
            UniqueRule::Debounce(delay) => UniqueProbe {
                key,
                created_after: None,
                states: vec![JobState::Ready],
                unstarted: true,
                push_to: Some(now.plus(*delay)),
            },
        })
    }

    /// Checks the uniqueness settings ([`NewJob::validate`] calls it).
    pub(crate) fn check_unique(&self) -> Result<(), Error> {
        let Some(unique) = &self.unique else {
            return Ok(());
        };
        if let Some(key) = &unique.key
            && (key.is_empty()
                || key.len() > MAX_UNIQUE_KEY_BYTES
                || key.chars().any(char::is_control))
        {
            return Err(Error::invalid(format!(
                "a unique key must be 1 to {MAX_UNIQUE_KEY_BYTES} bytes of printable text (got {} bytes)",
                key.len()
            )));
        }
        match &unique.rule {
            UniqueRule::For(period) if period.is_zero() => {
                return Err(Error::invalid(
                    "a unique key applies to a unique or debounced job: give a period \
                     (unique for), states (unique while) or a debounce delay too",
                ));
            }
            UniqueRule::For(period) => crate::bounds::check_delay("a unique period", *period)?,
            UniqueRule::While(states) if states.is_empty() => {
                return Err(Error::invalid(
                    "unique while needs at least one state (for example ready,running)",
                ));
            }
            UniqueRule::While(_) => {}
            UniqueRule::Debounce(delay) => {
                crate::bounds::check_delay("a debounce delay", *delay)?;
                if self.schedule != crate::job::Schedule::After(*delay) {
                    return Err(Error::invalid(
                        "a debounced job is due after its debounce delay: give no delay or \
                         run-at time with it",
                    ));
                }
            }
        }
        if !self.depends_on.is_empty() {
            return Err(Error::invalid(
                "a unique or debounced job cannot have dependencies (a stand-in job would not \
                 wait for them): enqueue it without them",
            ));
        }
        Ok(())
    }
}

/// Refuses a unique or debounced job enqueued together with others: each
/// is judged against the stored jobs on its own.
///
/// # Errors
/// [`Error::Invalid`] saying so.
pub fn check_unique_batch(jobs: &[NewJob]) -> Result<(), Error> {
    if jobs.len() > 1 && jobs.iter().any(|j| j.unique.is_some()) {
        return Err(Error::invalid(
            "a unique or debounced job is enqueued on its own, not with other jobs in one call",
        ));
    }
    Ok(())
}

/// The SHA-256 of a payload's canonical JSON, in hex.
fn payload_digest(text: &str) -> String {
    let canonical = serde_json::from_str::<serde_json::Value>(text)
        .map(|v| canonical(&v))
        .unwrap_or_else(|_| text.to_owned());
    let digest = Sha256::digest(canonical.as_bytes());
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

/// JSON text with object keys sorted at every level.
fn canonical(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Object(map) => {
            let mut entries: Vec<(&String, &serde_json::Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            let inner: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{}:{}", serde_json::Value::from(k.as_str()), canonical(v)))
                .collect();
            format!("{{{}}}", inner.join(","))
        }
        serde_json::Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(canonical).collect();
            format!("[{}]", inner.join(","))
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::job::Payload;

    fn job(kind: &str, payload: &str) -> NewJob {
        NewJob::new(kind, Payload::from_json_text(payload).unwrap()).unwrap()
    }

    #[test]
    fn the_default_key_is_the_kind_and_the_canonical_payload() {
        let a =
            job("mail", r#"{"to":"a","n":[1,{"y":1,"x":2}]}"#).unique_for(Duration::from_secs(60));
        let b = job("mail", r#"{ "n": [1, {"x": 2, "y": 1}], "to": "a" }"#)
            .unique_for(Duration::from_secs(60));
        assert_eq!(
            a.unique_key(),
            b.unique_key(),
            "key order and spaces do not count"
        );
        let key = a.unique_key().unwrap();
        assert!(key.starts_with("mail:") && key.len() == 5 + 64, "{key}");
        let other_kind =
            job("sms", r#"{"to":"a","n":[1,{"y":1,"x":2}]}"#).unique_for(Duration::from_secs(1));
        assert_ne!(a.unique_key(), other_kind.unique_key());
        let other_payload = job("mail", r#"{"to":"b"}"#).unique_for(Duration::from_secs(1));
        assert_ne!(a.unique_key(), other_payload.unique_key());
        let keyed = job("mail", "{}")
            .with_unique_key("user:7")
            .debounce(Duration::from_secs(5));
        assert_eq!(keyed.unique_key().as_deref(), Some("user:7"));
        assert_eq!(job("mail", "{}").unique_key(), None);
    }

    #[test]
    fn probes_follow_the_rule() {
        let now = Timestamp::from_millis(100_000);
        let p = job("k", "{}")
            .unique_for(Duration::from_secs(60))
            .unique_probe(now)
            .unwrap();
        assert_eq!(p.created_after, Some(Timestamp::from_millis(40_000)));
        assert!(p.states.is_empty() && !p.unstarted && p.push_to.is_none());
        let p = job("k", "{}")
            .unique_while(&[JobState::Ready, JobState::Running])
            .unique_probe(now)
            .unwrap();
        assert_eq!(p.states, [JobState::Ready, JobState::Running]);
        assert_eq!(p.created_after, None);
        let p = job("k", "{}")
            .debounce(Duration::from_secs(5))
            .unique_probe(now)
            .unwrap();
        assert!(p.unstarted);
        assert_eq!(p.push_to, Some(Timestamp::from_millis(105_000)));
    }

    #[test]
    fn bad_settings_are_refused_with_what_to_do() {
        let key_only = job("k", "{}").with_unique_key("x");
        assert!(
            key_only
                .validate()
                .unwrap_err()
                .to_string()
                .contains("give a period")
        );
        let empty = job("k", "{}").unique_while(&[]);
        assert!(empty.validate().is_err());
        let delayed = job("k", "{}")
            .debounce(Duration::from_secs(5))
            .scheduled(crate::job::Schedule::After(Duration::from_secs(1)));
        assert!(
            delayed
                .validate()
                .unwrap_err()
                .to_string()
                .contains("debounce")
        );
        let with_deps = job("k", "{}")
            .unique_for(Duration::from_secs(5))
            .depends_on(crate::job::JobId::new("a").unwrap());
        assert!(
            with_deps
                .validate()
                .unwrap_err()
                .to_string()
                .contains("dependencies")
        );
        let long = job("k", "{}")
            .unique_for(Duration::from_secs(5))
            .with_unique_key(&"x".repeat(201));
        assert!(long.validate().is_err());
    }
}
