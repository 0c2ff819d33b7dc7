//! A job to enqueue: what it runs, where and when, and the checks it must
//! pass before a store takes it.

use std::collections::HashSet;
use std::time::Duration;

use sha2::{Digest, Sha256};

use crate::clock::Timestamp;
use crate::error::Error;
use crate::ids::{JobId, Name, TraceParent};
use crate::job::{
    DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_LEASE_EXPIRIES, DEFAULT_QUEUE, DependencyFailure, Job,
};
use crate::labels::{Meta, WorkflowId};
use crate::payload::Payload;
use crate::state::{JobKey, JobState, KeyLimit, Schedule};
use crate::unique::{MAX_UNIQUE_KEY_BYTES, Unique, UniqueProbe, UniqueRule};

/// A job to insert.
#[derive(Clone, Debug)]
pub struct NewJob {
    /// The id; `None` generates a UUIDv7.
    pub id: Option<JobId>,
    /// The queue (default `default`).
    pub queue: Name,
    /// The job kind, which selects the handler.
    pub kind: Name,
    /// The payload (JSON).
    pub payload: Payload,
    /// When the job becomes due.
    pub schedule: Schedule,
    /// The attempt budget (≥ 1).
    pub max_attempts: u32,
    /// The lost-lease budget (≥ 1).
    pub max_lease_expiries: u32,
    /// The elapsed-time budget, from insertion: no retry is scheduled after it.
    pub give_up_after: Option<Duration>,
    /// Higher runs first among due jobs of a queue.
    pub priority: i16,
    /// The concurrency key, if the job shares a limit with others.
    pub key: Option<JobKey>,
    /// The business deadline: when the work should be done by. Lateness
    /// against it is measured when the job succeeds; it changes nothing
    /// about when or how the job runs.
    pub deadline: Option<Timestamp>,
    /// The W3C trace context of the request that enqueued the job, handed
    /// to every attempt's handler.
    pub traceparent: Option<TraceParent>,
    /// Jobs that must succeed before this one may run: each must be stored
    /// already or be inserted in the same call. The job waits `blocked`
    /// until every one is `done`.
    pub depends_on: Vec<JobId>,
    /// What the job does when a dependency ends `dead` or `cancelled`.
    pub on_dependency_failure: DependencyFailure,
    /// The workflow the job is a step of, if any.
    pub workflow: Option<WorkflowId>,
    /// Tags to find it by (`errand jobs --tag`): at most 20, each 1–100
    /// letters, digits and `-_.:/=@+`.
    pub tags: Vec<String>,
    /// Metadata shown with it: short text values by key.
    pub meta: Meta,
    /// Whether a recent or live job with the same key stands in for it
    /// ([`NewJob::unique_for`], [`NewJob::unique_while`],
    /// [`NewJob::debounce`]).
    pub unique: Option<Unique>,
    /// The open batch the job joins ([`crate::BatchSeal`]); inserting it
    /// into a sealed batch is refused.
    pub batch: Option<WorkflowId>,
    /// A wait for a signal: the job is stored `waiting` and is not claimed
    /// until the signal arrives or the wait times out (see
    /// [`NewJob::awaiting`]).
    pub wait: Option<crate::signal::Await>,
}

impl NewJob {
    /// A job of `kind` with the given payload on the default queue.
    pub fn new(kind: &str, payload: Payload) -> Result<Self, Error> {
        Ok(NewJob {
            id: None,
            queue: Name(DEFAULT_QUEUE.to_owned()),
            kind: Name::parse("kind", kind)?,
            payload,
            schedule: Schedule::Now,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_lease_expiries: DEFAULT_MAX_LEASE_EXPIRIES,
            give_up_after: None,
            priority: 0,
            key: None,
            deadline: None,
            traceparent: None,
            depends_on: Vec::new(),
            on_dependency_failure: DependencyFailure::Wait,
            workflow: None,
            tags: Vec::new(),
            meta: Meta::new(),
            unique: None,
            batch: None,
            wait: None,
        })
    }

    /// Adds the job to the open batch `batch` (created by its first job);
    /// once the batch is sealed no job joins it.
    pub fn in_batch(mut self, batch: WorkflowId) -> Self {
        self.batch = Some(batch);
        self
    }

    /// Makes the job a step of `workflow` (a [`crate::Workflow`] sets it
    /// on each of its steps).
    pub fn in_workflow(mut self, workflow: WorkflowId) -> Self {
        self.workflow = Some(workflow);
        self
    }

    /// Adds a tag (see [`crate::check_tag`]); adding one again changes
    /// nothing.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a tag that is not valid.
    pub fn with_tag(mut self, tag: &str) -> Result<Self, Error> {
        crate::labels::check_tag(tag)?;
        if !self.tags.iter().any(|t| t == tag) {
            self.tags.push(tag.to_owned());
        }
        Ok(self)
    }

    /// Sets a metadata entry (checked by [`NewJob::validate`]).
    pub fn with_meta(mut self, key: &str, value: &str) -> Self {
        self.meta.insert(key.to_owned(), value.to_owned());
        self
    }

    /// Makes the job wait for `id` to succeed (see [`crate::DependencyFailure`]
    /// for what happens if it does not). Naming a dependency again changes
    /// nothing.
    pub fn depends_on(mut self, id: JobId) -> Self {
        if !self.depends_on.contains(&id) {
            self.depends_on.push(id);
        }
        self
    }

    /// Sets what the job does when a dependency ends `dead` or `cancelled`
    /// (default [`DependencyFailure::Wait`]).
    pub fn on_dependency_failure(mut self, policy: DependencyFailure) -> Self {
        self.on_dependency_failure = policy;
        self
    }

    /// Sets the business deadline.
    pub fn with_deadline(mut self, at: Timestamp) -> Self {
        self.deadline = Some(at);
        self
    }

    /// Sets the trace context of the request that enqueues the job.
    pub fn with_traceparent(mut self, tp: TraceParent) -> Self {
        self.traceparent = Some(tp);
        self
    }

    /// Puts the job under a concurrency key (see [`JobKey`]).
    pub fn with_key(mut self, key: &str, limit: KeyLimit) -> Result<Self, Error> {
        self.key = Some(JobKey::new(key, limit)?);
        Ok(self)
    }

    /// Sets a caller-chosen id: inserting a job whose id is already stored
    /// returns the stored job and creates nothing. The id stays taken while
    /// its job is stored — ready, running and dead jobs until purged, done
    /// and cancelled ones until retention prunes them (7 days by default in
    /// the worker runtime) — and after that names a new job.
    ///
    /// Ids that ascend with time, like the UUIDv7 ids Errand makes, keep
    /// PostgreSQL's index writes at the end of the key; random ones cost a
    /// drain about a quarter more server CPU per job.
    pub fn with_id(mut self, id: JobId) -> Self {
        self.id = Some(id);
        self
    }

    /// Sets the queue.
    pub fn on_queue(mut self, queue: &str) -> Result<Self, Error> {
        self.queue = Name::parse("queue", queue)?;
        Ok(self)
    }

    /// Sets the schedule.
    pub fn scheduled(mut self, schedule: Schedule) -> Self {
        self.schedule = schedule;
        self
    }

    /// Sets the attempt budget.
    pub fn with_max_attempts(mut self, n: u32) -> Result<Self, Error> {
        if n == 0 || n > 1000 {
            return Err(Error::invalid(format!(
                "max attempts must be between 1 and 1000 (got {n})"
            )));
        }
        self.max_attempts = n;
        Ok(self)
    }

    /// Sets the lost-lease budget: after `n` expired leases the job is
    /// quarantined as `dead` (class `lost_lease`), whatever attempts remain.
    pub fn with_max_lease_expiries(mut self, n: u32) -> Result<Self, Error> {
        if n == 0 || n > 1000 {
            return Err(Error::invalid(format!(
                "the lost-lease budget must be between 1 and 1000 (got {n})"
            )));
        }
        self.max_lease_expiries = n;
        Ok(self)
    }

    /// Sets the elapsed-time budget: a failure whose retry would fall after
    /// insertion + `d` sends the job to `dead` instead.
    pub fn give_up_after(mut self, d: Duration) -> Self {
        self.give_up_after = Some(d);
        self
    }

    /// Sets the priority.
    pub fn with_priority(mut self, p: i16) -> Self {
        self.priority = p;
        self
    }

    /// A copy of `job` to insert under a new, generated id (the operator's
    /// `replay --new-key`): the same queue, kind, payload, priority, attempt
    /// and lost-lease budgets, elapsed-time budget (its length, counted
    /// again from the copy's insertion), concurrency key, deadline, trace
    /// context, workflow, tags and metadata; depending on `depends_on` (the
    /// original's dependencies, in order) under the original's policy, so
    /// a workflow step's copy waits for, and reads, the same inputs; due
    /// now; nothing of the original's history. The original's dependents
    /// do not depend on the copy.
    pub fn copy_of(job: &Job, depends_on: Vec<JobId>) -> Result<Self, Error> {
        let copy = NewJob {
            id: None,
            queue: job.queue.clone(),
            kind: job.kind.clone(),
            payload: job.payload.clone(),
            schedule: Schedule::Now,
            max_attempts: job.max_attempts,
            max_lease_expiries: job.max_lease_expiries,
            give_up_after: job.give_up_at.map(|at| at.since(job.created_at)),
            priority: job.priority,
            key: job.key.clone(),
            deadline: job.deadline,
            traceparent: job.traceparent.clone(),
            depends_on,
            on_dependency_failure: job.on_dependency_failure.unwrap_or_default(),
            workflow: job.workflow.clone(),
            tags: job.tags.clone(),
            meta: job.meta.clone(),
            unique: None,
            batch: None,
            wait: None,
        };
        copy.validate()?;
        Ok(copy)
    }

    /// Checks the invariants a store relies on.
    pub fn validate(&self) -> Result<(), Error> {
        if let Some(d) = self.deadline {
            crate::bounds::check_time("a deadline", d)?;
        }
        match self.schedule {
            Schedule::Now => {}
            Schedule::After(d) => crate::bounds::check_delay("a delay", d)?,
            Schedule::At(t) => crate::bounds::check_time("a run-at time", t)?,
        }
        if let Some(d) = self.give_up_after {
            crate::bounds::check_delay("an elapsed-time budget (give up after)", d)?;
        }
        if self.max_attempts == 0 || self.max_attempts > 1000 {
            return Err(Error::invalid(format!(
                "max attempts must be between 1 and 1000 (got {})",
                self.max_attempts
            )));
        }
        if self.max_lease_expiries == 0 || self.max_lease_expiries > 1000 {
            return Err(Error::invalid(format!(
                "the lost-lease budget must be between 1 and 1000 (got {})",
                self.max_lease_expiries
            )));
        }
        if let Some(key) = &self.key {
            JobKey::new(key.name.clone(), key.key_limit())?;
            if key.ordered && key.limit != 1 {
                return Err(Error::invalid(
                    "an ordered key runs one job at a time: its limit must be 1",
                ));
            }
        }
        if let Some(wait) = &self.wait {
            crate::signal::check_new_wait(wait, &self.depends_on)?;
        }
        crate::labels::check_tags(&self.tags)?;
        crate::labels::check_meta(&self.meta)?;
        self.check_unique()?;
        check_one(self)
    }
}

/// The most dependencies one job may have.
pub const MAX_DEPENDENCIES: usize = 10_000;

pub(crate) fn check_one(job: &NewJob) -> Result<(), Error> {
    let deps = &job.depends_on;
    if deps.len() > MAX_DEPENDENCIES {
        return Err(Error::invalid(format!(
            "a job may depend on at most {MAX_DEPENDENCIES} jobs (got {}); group the work in \
             stages that each depend on fewer",
            deps.len()
        )));
    }
    let mut seen = HashSet::with_capacity(deps.len());
    for dep in deps {
        if job.id.as_ref() == Some(dep) {
            return Err(Error::invalid(format!("job {dep} cannot depend on itself")));
        }
        if !seen.insert(dep) {
            return Err(Error::invalid(format!(
                "the dependencies name job {dep} twice; name each once"
            )));
        }
    }
    Ok(())
}

impl NewJob {
    /// Makes the job wait for the signal `name` before it may run: it is
    /// stored `waiting`, never claimed, until a signal of that name arrives
    /// for it ([`crate::NewSignal`]), or until `timeout` (from the enqueue)
    /// passes and `policy` applies. A job that waits for a signal cannot
    /// also depend on other jobs (its handler can wait once they are met,
    /// with [`crate::Outcome::Await`]).
    ///
    /// # Errors
    /// [`Error::Invalid`] when the name is not valid.
    pub fn awaiting(
        mut self,
        name: &str,
        timeout: Option<Duration>,
        policy: crate::signal::OnAwaitTimeout,
    ) -> Result<Self, Error> {
        let mut wait = crate::signal::Await::new(name)?;
        wait.timeout = timeout;
        wait.on_timeout = policy;
        self.wait = Some(wait);
        Ok(self)
    }

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
        self.schedule = crate::state::Schedule::After(delay);
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
                if self.schedule != crate::state::Schedule::After(*delay) {
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

    #[test]
    fn keys_and_their_limits_are_validated() {
        let k = JobKey::new("tenant-7", KeyLimit::Concurrent(3)).unwrap();
        assert_eq!((k.limit, k.ordered), (3, false));
        let o = JobKey::new("tenant 7/ü", KeyLimit::Ordered).unwrap();
        assert_eq!((o.limit, o.ordered), (1, true));
        assert!(JobKey::new("", KeyLimit::Ordered).is_err());
        assert!(JobKey::new("a\0b", KeyLimit::Ordered).is_err());
        assert!(JobKey::new("x".repeat(201), KeyLimit::Ordered).is_err());
        assert!(JobKey::new("t", KeyLimit::Concurrent(0)).is_err());
        assert!(JobKey::new("t", KeyLimit::Concurrent(crate::state::MAX_KEY_LIMIT + 1)).is_err());
        let mut job = NewJob::new("k", Payload::default()).unwrap();
        job.key = Some(JobKey::from_stored("t".into(), 2, true));
        assert!(job.validate().is_err(), "ordered with limit 2 is refused");
    }

    #[test]
    fn a_deadline_past_9999_is_refused() {
        let job = NewJob::new("k", Payload::from_json_text("{}").unwrap()).unwrap();
        assert!(
            job.clone()
                .with_deadline(Timestamp::from_millis(253_402_300_799_999))
                .validate()
                .is_ok()
        );
        let err = job
            .with_deadline(Timestamp::from_millis(253_402_300_800_000))
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains("9999"), "{err}");
    }
}

#[cfg(test)]
mod unique_tests {
    use super::*;

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
            .scheduled(crate::state::Schedule::After(Duration::from_secs(1)));
        assert!(
            delayed
                .validate()
                .unwrap_err()
                .to_string()
                .contains("debounce")
        );
        let with_deps = job("k", "{}")
            .unique_for(Duration::from_secs(5))
            .depends_on(crate::ids::JobId::new("a").unwrap());
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
