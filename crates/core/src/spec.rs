//! A job described field by field — as `errand enqueue` flags or an HTTP
//! request body give it — and the one place that turns such a description
//! into a validated [`NewJob`], so the command line and `errand serve`
//! accept and refuse exactly the same jobs.

use std::time::Duration;

use crate::{
    DependencyFailure, Error, JobId, KeyLimit, NewJob, Payload, Result, Schedule, Timestamp,
    TraceParent, WorkflowId,
};

/// A job as plain values. `None` means "the default": queue `default`,
/// payload `{}`, a generated id, due now, the library's attempt and
/// lost-lease budgets, priority 0, no concurrency key, no deadline, no
/// trace context, no dependencies.
#[derive(Clone, Debug, Default)]
pub struct JobSpec {
    /// Job kind (selects the handler).
    pub kind: String,
    /// Queue name.
    pub queue: Option<String>,
    /// Payload as JSON text.
    pub payload: Option<String>,
    /// A caller-chosen id (one business event, one job).
    pub id: Option<String>,
    /// Due after this delay (exclusive with `run_at`).
    pub delay: Option<Duration>,
    /// Due at this RFC 3339 time (exclusive with `delay`).
    pub run_at: Option<String>,
    /// Attempt budget (1–1000).
    pub max_attempts: Option<u32>,
    /// Lost-lease budget (1–1000).
    pub max_lease_expiries: Option<u32>,
    /// Elapsed-time budget from insertion.
    pub give_up_after: Option<Duration>,
    /// Higher runs first.
    pub priority: Option<i16>,
    /// Concurrency key.
    pub key: Option<String>,
    /// With `key`: at most this many of the key's jobs run at once (default 1).
    pub key_limit: Option<u32>,
    /// With `key`: the key's jobs run one at a time, in enqueue order.
    pub ordered: bool,
    /// The business deadline: an RFC 3339 time, or a duration from now
    /// (`30m`). It only measures lateness; it changes nothing about when or
    /// how the job runs.
    pub deadline: Option<String>,
    /// The W3C trace context (`00-<trace id>-<parent id>-<flags>`) of the
    /// request that enqueues the job.
    pub traceparent: Option<String>,
    /// Jobs that must succeed before this one runs; each must be stored
    /// (or enqueued in the same call).
    pub depends_on: Vec<String>,
    /// With `depends_on`: `wait` (default), `cancel` or `run` when a
    /// dependency ends dead or cancelled.
    pub on_dependency_failure: Option<String>,
    /// The workflow the job is a step of.
    pub workflow: Option<String>,
    /// Tags to find it by (at most 20).
    pub tags: Vec<String>,
    /// Metadata: short text values by key (at most 32).
    pub meta: crate::Meta,
    /// Unique for this period: a job with the same key created within it
    /// stands in for this one.
    pub unique_for: Option<Duration>,
    /// Unique while a job with the same key is in one of these states
    /// (`ready`, `running`, …).
    pub unique_while: Vec<String>,
    /// Debounced: a waiting job with the same key is pushed to run this
    /// long from now, with this payload, instead of a second being added.
    pub debounce: Option<Duration>,
    /// The key `unique_for`, `unique_while` or `debounce` judge by
    /// (default: the kind and a hash of the canonical payload).
    pub unique_key: Option<String>,
    /// The open batch the job joins.
    pub batch: Option<String>,
    /// The signal the job waits for before it may run (it is stored
    /// `waiting`).
    pub await_signal: Option<String>,
    /// With `await_signal`: how long it waits at most.
    pub await_timeout: Option<Duration>,
    /// With `await_signal`: `fail` (default), `run` or `cancel` when the
    /// wait times out.
    pub on_await_timeout: Option<String>,
}

impl JobSpec {
    /// A job of `kind` with every other field at its default.
    pub fn new(kind: impl Into<String>) -> Self {
        JobSpec {
            kind: kind.into(),
            ..JobSpec::default()
        }
    }

    /// Validates every field against the default payload limit
    /// ([`crate::MAX_PAYLOAD_BYTES`]) and builds the job.
    pub fn build(self) -> Result<NewJob> {
        self.build_limited(crate::MAX_PAYLOAD_BYTES)
    }

    /// Validates every field, with payloads limited to `payload_limit`
    /// bytes of JSON text, and builds the job. Nothing is written.
    pub fn build_limited(self, payload_limit: usize) -> Result<NewJob> {
        let schedule = schedule(self.delay, self.run_at.as_deref())?;
        let payload = match self.payload {
            Some(text) => Payload::from_json_text_limited(text, payload_limit)?,
            None => Payload::default(),
        };
        let mut job = NewJob::new(&self.kind, payload)?.scheduled(schedule);
        if let Some(q) = &self.queue {
            job = job.on_queue(q)?;
        }
        if let Some(n) = self.max_attempts {
            job = job.with_max_attempts(n)?;
        }
        if let Some(n) = self.max_lease_expiries {
            job = job.with_max_lease_expiries(n)?;
        }
        if let Some(d) = self.give_up_after {
            job = job.give_up_after(d);
        }
        if let Some(p) = self.priority {
            job = job.with_priority(p);
        }
        if let Some(id) = self.id {
            job = job.with_id(JobId::new(id)?);
        }
        if let Some((key, limit)) = key_limit(self.key.as_deref(), self.key_limit, self.ordered)? {
            job = job.with_key(key, limit)?;
        }
        if let Some(text) = self.deadline {
            job = job.with_deadline(parse_deadline(&text, Timestamp::now())?);
        }
        if let Some(tp) = self.traceparent {
            job = job.with_traceparent(TraceParent::parse(tp)?);
        }
        // Pushed as given (the builder would drop a repeat silently), so
        // that `validate` below refuses a repeated dependency by name.
        for dep in self.depends_on {
            job.depends_on.push(JobId::new(dep)?);
        }
        let has_dependencies = !job.depends_on.is_empty();
        if let Some(policy) = dependency_policy(self.on_dependency_failure, has_dependencies)? {
            job = job.on_dependency_failure(policy);
        }
        if let Some(w) = self.workflow {
            job = job.in_workflow(WorkflowId::new(w)?);
        }
        if let Some(b) = self.batch {
            job = job.in_batch(batch_id(b)?);
        }
        // As given, so that `validate` refuses a repeated tag by name.
        job.tags = self.tags;
        job.meta = self.meta;
        let uniqueness = Uniqueness {
            unique_for: self.unique_for,
            unique_while: &self.unique_while,
            debounce: self.debounce,
            unique_key: self.unique_key.as_deref(),
        };
        job = uniqueness.apply(job)?;
        job = awaiting(
            job,
            self.await_signal.as_deref(),
            self.await_timeout,
            self.on_await_timeout.as_deref(),
        )?;
        job.validate()?;
        Ok(job)
    }
}

/// Makes `job` wait for a signal, when one is named; a timeout or a
/// policy without a signal is refused.
fn awaiting(
    job: NewJob,
    signal: Option<&str>,
    timeout: Option<Duration>,
    policy: Option<&str>,
) -> Result<NewJob> {
    let Some(signal) = signal else {
        if timeout.is_some() || policy.is_some() {
            return Err(Error::invalid(
                "an await timeout and its policy apply to a wait for a signal: name the signal                  too (--await NAME, or await_signal)",
            ));
        }
        return Ok(job);
    };
    let policy = policy.map(str::parse).transpose()?.unwrap_or_default();
    job.awaiting(signal, timeout, policy)
}

/// Reads when the job is due: after a delay, at a time, or now (not both).
fn schedule(delay: Option<Duration>, run_at: Option<&str>) -> Result<Schedule> {
    match (delay, run_at) {
        (Some(_), Some(_)) => Err(Error::invalid(
            "give either a delay or a run-at time, not both",
        )),
        (Some(d), None) => Ok(Schedule::After(d)),
        (None, Some(t)) => Ok(Schedule::At(Timestamp::parse_rfc3339(t)?)),
        (None, None) => Ok(Schedule::Now),
    }
}

/// Reads the concurrency key and how many of its jobs may run at once, if a key is given.
fn key_limit(
    key: Option<&str>,
    limit: Option<u32>,
    ordered: bool,
) -> Result<Option<(&str, KeyLimit)>> {
    match (key, limit, ordered) {
        (None, None, false) => Ok(None),
        (None, _, _) => Err(Error::invalid(
            "a key limit and ordered apply to a concurrency key: give the key too",
        )),
        (Some(_), Some(_), true) => Err(Error::invalid(
            "an ordered key runs one job at a time: give ordered or a key limit, not both",
        )),
        (Some(key), limit, ordered) => {
            let limit = if ordered {
                KeyLimit::Ordered
            } else {
                KeyLimit::Concurrent(limit.unwrap_or(1))
            };
            Ok(Some((key, limit)))
        }
    }
}

/// Reads the dependency-failure policy, which only a job with dependencies may give.
fn dependency_policy(
    policy: Option<String>,
    has_dependencies: bool,
) -> Result<Option<DependencyFailure>> {
    match policy {
        Some(_) if !has_dependencies => Err(Error::invalid(
            "a dependency-failure policy applies to a job with dependencies: name them too",
        )),
        Some(policy) => Ok(Some(policy.parse::<DependencyFailure>()?)),
        None => Ok(None),
    }
}

/// Reads the id of the batch the job joins, refused with a message that names it a batch id.
fn batch_id(batch: String) -> Result<WorkflowId> {
    WorkflowId::new(batch).map_err(|_| {
        Error::invalid("a batch id may hold only letters, digits and -_.:@/+= (1 to 200 bytes)")
    })
}

/// The uniqueness fields of a spec: at most one rule, and the key it judges by.
struct Uniqueness<'a> {
    /// Unique for this period.
    unique_for: Option<Duration>,
    /// Unique while a job with the same key is in one of these states.
    unique_while: &'a [String],
    /// Debounced by this delay.
    debounce: Option<Duration>,
    /// The key the rule judges by.
    unique_key: Option<&'a str>,
}

impl Uniqueness<'_> {
    /// Checks the rule and its key and applies them to `job`.
    fn apply(self, mut job: NewJob) -> Result<NewJob> {
        let rules = usize::from(self.unique_for.is_some())
            + usize::from(!self.unique_while.is_empty())
            + usize::from(self.debounce.is_some());
        if rules > 1 {
            return Err(Error::invalid(
                "give one of unique for, unique while and debounce, not more",
            ));
        }
        if let Some(d) = self.unique_for {
            job = job.unique_for(d);
        }
        if !self.unique_while.is_empty() {
            let states = self
                .unique_while
                .iter()
                .map(|s| s.trim().parse::<crate::JobState>())
                .collect::<Result<Vec<_>>>()?;
            job = job.unique_while(&states);
        }
        if let Some(d) = self.debounce {
            if job.schedule != Schedule::Now {
                return Err(Error::invalid(
                    "a debounced job is due after its debounce delay: give no delay or run-at \
                     time with it",
                ));
            }
            job = job.debounce(d);
        }
        if let Some(key) = self.unique_key {
            if rules == 0 {
                return Err(Error::invalid(
                    "a unique key applies to a unique or debounced job: give unique for, unique \
                     while or debounce too",
                ));
            }
            job = job.with_unique_key(key);
        }
        Ok(job)
    }
}

/// Reads a deadline: an RFC 3339 time, or a duration (`30m`) from `now`.
pub fn parse_deadline(text: &str, now: Timestamp) -> Result<Timestamp> {
    if let Ok(at) = Timestamp::parse_rfc3339(text) {
        return Ok(at);
    }
    match humantime::parse_duration(text) {
        Ok(d) if !d.is_zero() => Ok(now.plus(d)),
        _ => Err(Error::invalid(format!(
            "the deadline `{}` is neither an RFC 3339 time (2026-11-30T14:05:00Z) nor a duration from now (30m, 2h)",
            text.chars().take(64).collect::<String>()
        ))),
    }
}

/// Parses a duration written like `250ms`, `5s`, `15m` or `1h`; zero is
/// refused, and so is one too long to count.
pub fn parse_duration(text: &str) -> Result<Duration> {
    let mut shown: String = text.chars().take(64).collect();
    if shown.len() < text.len() {
        shown.push('…');
    }
    let d = humantime::parse_duration(text).map_err(|e| {
        Error::invalid(match e {
            humantime::DurationError::NumberOverflow => {
                format!("`{shown}` is too long to be a duration: write at most 36500d (100 years)")
            }
            e => format!("`{shown}` is not a duration ({e}); write it like 250ms, 5s or 15m"),
        })
    })?;
    if d.is_zero() {
        return Err(Error::invalid(format!(
            "`{shown}` must be longer than zero"
        )));
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MAX_PAYLOAD_DEPTH;

    #[test]
    fn a_duration_says_whether_it_is_malformed_zero_or_too_long() {
        let said = |text: &str| parse_duration(text).unwrap_err().to_string();
        assert!(said("99999999999999999999999s").contains("too long"));
        assert!(said("0s").contains("longer than zero"));
        assert!(said("soon").contains("not a duration"));
        assert_eq!(parse_duration("15m").unwrap(), Duration::from_secs(900));
    }

    #[test]
    fn defaults_match_the_library() {
        let job = JobSpec::new("mail").build().unwrap();
        assert_eq!(job.queue.as_str(), crate::DEFAULT_QUEUE);
        assert_eq!(job.payload.as_str(), "{}");
        assert_eq!(job.schedule, Schedule::Now);
        assert_eq!(job.max_attempts, crate::DEFAULT_MAX_ATTEMPTS);
        assert!(job.id.is_none() && job.key.is_none());
    }

    #[test]
    fn a_dependency_named_twice_is_refused_by_name() {
        let spec = JobSpec {
            depends_on: vec!["a".into(), "b".into(), "a".into()],
            ..JobSpec::new("k")
        };
        let err = spec.build().unwrap_err().to_string();
        assert!(err.contains("name job a twice"), "{err}");
        let spec = JobSpec {
            depends_on: vec!["a".into(), "b".into()],
            on_dependency_failure: Some("run".into()),
            ..JobSpec::new("k")
        };
        let job = spec.build().unwrap();
        assert_eq!(job.depends_on.len(), 2);
        assert_eq!(job.on_dependency_failure, DependencyFailure::Run);
    }

    #[test]
    fn every_field_is_validated() {
        let bad = [
            JobSpec::new("bad kind!"),
            JobSpec::new("k\0"),
            JobSpec {
                queue: Some(String::new()),
                ..JobSpec::new("k")
            },
            JobSpec {
                id: Some("a b".into()),
                ..JobSpec::new("k")
            },
            JobSpec {
                payload: Some("{nope".into()),
                ..JobSpec::new("k")
            },
            JobSpec {
                max_attempts: Some(0),
                ..JobSpec::new("k")
            },
            JobSpec {
                run_at: Some("tomorrow".into()),
                ..JobSpec::new("k")
            },
            JobSpec {
                delay: Some(Duration::from_secs(1)),
                run_at: Some("2026-11-30T14:05:00Z".into()),
                ..JobSpec::new("k")
            },
            JobSpec {
                key_limit: Some(2),
                ..JobSpec::new("k")
            },
            JobSpec {
                key: Some("t".into()),
                key_limit: Some(2),
                ordered: true,
                ..JobSpec::new("k")
            },
            JobSpec {
                deadline: Some("next week".into()),
                ..JobSpec::new("k")
            },
            JobSpec {
                deadline: Some("0s".into()),
                ..JobSpec::new("k")
            },
            JobSpec {
                traceparent: Some("00-abc-def-01".into()),
                ..JobSpec::new("k")
            },
        ];
        for spec in bad {
            let shown = format!("{spec:?}");
            assert!(
                matches!(spec.build(), Err(Error::Invalid(_))),
                "accepted {shown}"
            );
        }
        let big = JobSpec {
            payload: Some("[1,2,3]".into()),
            ..JobSpec::new("k")
        };
        assert!(big.build_limited(3).is_err());
    }

    #[test]
    fn deadlines_are_times_or_durations_from_now_and_traceparents_are_kept() {
        let now = Timestamp::parse_rfc3339("2026-01-01T00:00:00Z").unwrap();
        assert_eq!(
            parse_deadline("2026-11-30T14:05:00Z", now).unwrap(),
            Timestamp::parse_rfc3339("2026-11-30T14:05:00Z").unwrap()
        );
        assert_eq!(
            parse_deadline("30m", now).unwrap(),
            now.plus(Duration::from_secs(1800))
        );
        let tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let job = JobSpec {
            deadline: Some("2026-11-30T14:05:00Z".into()),
            traceparent: Some(tp.into()),
            ..JobSpec::new("k")
        }
        .build()
        .unwrap();
        assert_eq!(
            job.deadline,
            Some(Timestamp::parse_rfc3339("2026-11-30T14:05:00Z").unwrap())
        );
        assert_eq!(job.traceparent.map(|t| t.to_string()).as_deref(), Some(tp));
    }

    #[test]
    fn deeply_nested_payloads_are_refused() {
        let nested = |n: usize| JobSpec {
            payload: Some(format!("{}{}", "[".repeat(n), "]".repeat(n))),
            ..JobSpec::new("k")
        };
        assert!(nested(MAX_PAYLOAD_DEPTH).build().is_ok());
        assert!(
            matches!(nested(MAX_PAYLOAD_DEPTH + 1).build(), Err(Error::Invalid(m)) if m.contains("nested"))
        );
        assert!(nested(100_000).build().is_err());
    }

    #[test]
    fn durations_are_written_like_5s_and_never_zero() {
        assert_eq!(
            parse_duration("250ms").ok(),
            Some(Duration::from_millis(250))
        );
        assert!(parse_duration("soon").is_err());
        assert!(parse_duration("0s").is_err());
    }
}
