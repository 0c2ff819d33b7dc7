//! Jobs, their states, ids, names and lease tokens.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::deps::DependencyFailure;
use crate::error::Error;
use crate::labels::{Meta, WorkflowId};
use crate::outcome::ErrorClass;

/// The queue a job goes to when none is named.
pub const DEFAULT_QUEUE: &str = "default";
/// The attempt budget of a job when none is given.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 25;
/// The lost-lease budget of a job when none is given: after this many
/// expired leases the job is quarantined as `dead` (class `lost_lease`).
pub const DEFAULT_MAX_LEASE_EXPIRIES: u32 = 5;
/// The largest payload accepted by default (1 MiB of JSON text).
pub const MAX_PAYLOAD_BYTES: usize = 1024 * 1024;
/// The deepest nesting of arrays and objects accepted in a payload. Deeper
/// JSON is valid but no database stores it (SQLite's JSON functions stop at
/// 1,000 levels, PostgreSQL at its stack depth), and no real payload needs it.
pub const MAX_PAYLOAD_DEPTH: usize = 128;

/// The largest output a job may record (JSON text, in bytes): what its
/// dependents read, not a place for bulk results.
pub const MAX_OUTPUT_BYTES: usize = 64 * 1024;
const MAX_ID_BYTES: usize = 200;
const MAX_NAME_BYTES: usize = 100;

/// A job's stable identity. It never changes across retries, lease expiries
/// and replays. Callers may choose it (one business event, one job id);
/// otherwise a time-ordered UUIDv7 is generated.
///
/// Accepted: 1–200 bytes of letters, digits and `-_.:@/+=`.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

impl JobId {
    /// A fresh, time-ordered id (UUIDv7).
    pub fn generate() -> Self {
        JobId(uuid::Uuid::now_v7().to_string())
    }

    /// Validates a caller-chosen id.
    pub fn new(id: impl Into<String>) -> Result<Self, Error> {
        let id = id.into();
        if id.is_empty() || id.len() > MAX_ID_BYTES {
            return Err(Error::invalid(format!(
                "a job id must be 1 to {MAX_ID_BYTES} bytes long (got {} bytes)",
                id.len()
            )));
        }
        if let Some(c) = id
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || "-_.:@/+=".contains(*c)))
        {
            return Err(Error::invalid(format!(
                "a job id may hold only letters, digits and -_.:@/+= (found {c:?} in {:?})",
                truncate_for_message(&id)
            )));
        }
        Ok(JobId(id))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

pub(crate) fn truncate_for_message(s: &str) -> String {
    let mut out: String = s.chars().take(40).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

impl TryFrom<String> for JobId {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        JobId::new(s)
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0
    }
}

impl FromStr for JobId {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        JobId::new(s)
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JobId({})", self.0)
    }
}

/// A queue or job-kind name: 1–100 bytes of letters, digits and `-_.:`,
/// starting with a letter or digit.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Name(String);

impl Name {
    /// Validates a name; `what` ("queue", "kind") appears in the error.
    pub fn parse(what: &str, s: impl Into<String>) -> Result<Self, Error> {
        let s = s.into();
        let ok_len = !s.is_empty() && s.len() <= MAX_NAME_BYTES;
        let ok_first = s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric());
        let ok_chars = s
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.:".contains(c));
        if ok_len && ok_first && ok_chars {
            Ok(Name(s))
        } else {
            Err(Error::invalid(format!(
                "{what} name {:?} is not valid: use 1 to {MAX_NAME_BYTES} letters, digits or -_.: starting with a letter or digit",
                truncate_for_message(&s)
            )))
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for Name {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        Name::parse("the", s)
    }
}

impl From<Name> for String {
    fn from(n: Name) -> String {
        n.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.0)
    }
}

/// A job's payload: JSON text, validated and size-limited when created.
/// It serializes as the JSON value itself, not as a string.
#[derive(Clone, PartialEq, Eq)]
pub struct Payload(String);

impl Serialize for Payload {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // The stored text goes out as it is (serde_json writes a raw value
        // without parsing it again), so whatever was stored renders.
        match serde_json::from_str::<&serde_json::value::RawValue>(&self.0) {
            Ok(raw) => raw.serialize(s),
            Err(e) => Err(serde::ser::Error::custom(format!(
                "a stored payload is not JSON: {e}"
            ))),
        }
    }
}

impl<'de> Deserialize<'de> for Payload {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = Box::<serde_json::value::RawValue>::deserialize(d)?;
        Payload::from_json_text(raw.get().to_owned()).map_err(serde::de::Error::custom)
    }
}

impl Payload {
    /// Validates JSON text against the default size limit.
    pub fn from_json_text(text: impl Into<String>) -> Result<Self, Error> {
        Self::from_json_text_limited(text, MAX_PAYLOAD_BYTES)
    }

    /// Validates JSON text against `limit` bytes.
    pub fn from_json_text_limited(text: impl Into<String>, limit: usize) -> Result<Self, Error> {
        Self::checked("payload", text.into(), limit)
    }

    /// Validates a job's output: JSON text of at most
    /// [`MAX_OUTPUT_BYTES`].
    ///
    /// # Errors
    /// [`Error::Invalid`], saying what is wrong with the output.
    pub fn output(text: impl Into<String>) -> Result<Self, Error> {
        Self::checked("output", text.into(), MAX_OUTPUT_BYTES)
    }

    /// Serializes a value as a job's output ([`Payload::output`]).
    ///
    /// # Errors
    /// [`Error::Invalid`] if it cannot be serialized or is too large.
    pub fn output_from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, Error> {
        let text = serde_json::to_string(value)
            .map_err(|e| Error::invalid(format!("the output cannot be serialized: {e}")))?;
        Self::output(text)
    }

    /// JSON text checked as `what` (a payload, an output) against `limit`.
    fn checked(what: &str, text: String, limit: usize) -> Result<Self, Error> {
        if text.len() > limit {
            return Err(Error::invalid(format!(
                "the {what} is {} bytes; the limit is {limit} bytes — store large data elsewhere and pass a reference",
                text.len()
            )));
        }
        if nesting_depth(&text) > MAX_PAYLOAD_DEPTH {
            return Err(Error::invalid(format!(
                "the {what} is nested more than {MAX_PAYLOAD_DEPTH} levels deep; flatten it"
            )));
        }
        if let Err(e) = check_storable(&text) {
            // Valid JSON skipped without decoding passes this: then the
            // value is JSON no store can hold.
            let syntax = serde_json::from_str::<serde::de::IgnoredAny>(&text).err();
            return Err(Error::invalid(if let Some(e) = syntax {
                format!("the {what} is not valid JSON: {e}")
            } else {
                format!(
                    "the {what} cannot be stored: {e}; send JSON whose strings are valid Unicode \
                     without NUL characters and whose numbers fit a 64-bit float (pass larger \
                     numbers as strings)"
                )
            }));
        }
        Ok(Payload(text))
    }

    /// Serializes a value as the payload.
    pub fn from_value<T: Serialize + ?Sized>(value: &T) -> Result<Self, Error> {
        let text = serde_json::to_string(value)
            .map_err(|e| Error::invalid(format!("the payload cannot be serialized: {e}")))?;
        Self::from_json_text(text)
    }

    /// Trusted constructor for text read back from storage.
    #[doc(hidden)]
    pub fn from_stored(text: String) -> Self {
        Payload(text)
    }

    /// The JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Deserializes the payload into `T`.
    pub fn decode<'a, T: Deserialize<'a>>(&'a self) -> Result<T, Error> {
        serde_json::from_str(&self.0).map_err(|e| {
            Error::invalid(format!(
                "the payload does not match the expected shape: {e}"
            ))
        })
    }
}

/// How deeply arrays and objects nest in valid JSON text (0 for a scalar).
/// Counts without recursing, so any depth is measured safely.
fn nesting_depth(json: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for b in json.bytes() {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// JSON that every store can hold and every reader can render: it parses
/// (within serde_json's nesting limit of 128), every string and key is
/// valid Unicode (no lone UTF-16 surrogate escapes such as `"\ud800"`) with
/// no NUL character (PostgreSQL's `jsonb`, which its SQL enqueue function
/// takes, cannot hold `\u0000`), and every
/// number fits a finite 64-bit float (`1e400` does not). Anything else is
/// refused when the payload is made, so a stored payload never fails a
/// reader later.
struct Storable;

/// Checks that `text` is one [`Storable`] JSON value. Its nesting was
/// measured first (at most [`MAX_PAYLOAD_DEPTH`]), so the recursion is
/// bounded without serde_json's own limit, which stops one level short.
fn check_storable(text: &str) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.disable_recursion_limit();
    Storable::deserialize(&mut de)?;
    de.end()
}

impl<'de> Deserialize<'de> for Storable {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Storable)
    }
}

impl<'de> serde::de::Visitor<'de> for Storable {
    type Value = Storable;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<Storable, E> {
        if v.is_finite() {
            Ok(Storable)
        } else {
            Err(E::custom("a number is too large for a 64-bit float"))
        }
    }

    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Storable, E> {
        if v.contains('\0') {
            Err(E::custom("a string holds a NUL character (\\u0000)"))
        } else {
            Ok(Storable)
        }
    }

    fn visit_unit<E>(self) -> Result<Storable, E> {
        Ok(Storable)
    }

    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Storable, A::Error> {
        while seq.next_element::<Storable>()?.is_some() {}
        Ok(Storable)
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Storable, A::Error> {
        while map.next_entry::<Storable, Storable>()?.is_some() {}
        Ok(Storable)
    }
}

impl Default for Payload {
    fn default() -> Self {
        Payload("{}".to_owned())
    }
}

impl fmt::Debug for Payload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Payload({})", truncate_for_message(&self.0))
    }
}

/// Where a job is in its life. See `docs/state-machine.md`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting for its dependencies: not claimable until each is `done`
    /// (or has ended in a way its [`DependencyFailure`] policy accepts).
    Blocked,
    /// Waiting to be claimed once `available_at` has passed.
    Ready,
    /// Claimed under a lease; a worker is running it.
    Running,
    /// Finished successfully (terminal).
    Done,
    /// Out of attempts, failed permanently, or its final lease expired:
    /// kept with its history until an operator replays or purges it.
    Dead,
    /// No longer wanted (terminal until replayed).
    Cancelled,
}

impl JobState {
    /// Every state, in display order.
    pub const ALL: [JobState; 6] = [
        JobState::Blocked,
        JobState::Ready,
        JobState::Running,
        JobState::Done,
        JobState::Dead,
        JobState::Cancelled,
    ];

    /// The stable lowercase name used in storage, CLI output and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Blocked => "blocked",
            JobState::Ready => "ready",
            JobState::Running => "running",
            JobState::Done => "done",
            JobState::Dead => "dead",
            JobState::Cancelled => "cancelled",
        }
    }
}

impl FromStr for JobState {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        JobState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                Error::invalid(format!(
                    "unknown state {s:?}: use one of blocked, ready, running, done, dead, cancelled"
                ))
            })
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Proof of ownership of one attempt: 128 bits from the operating system's
/// random source, written fresh by every claim. It is never derived from the
/// job id, so a stale worker cannot guess the current owner's token.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct LeaseToken(String);

impl LeaseToken {
    /// A fresh token: 128 random bits as 32 lowercase hex digits.
    pub fn generate() -> Self {
        let bits: u128 = rand::random();
        LeaseToken(format!("{bits:032x}"))
    }

    /// Wraps a token read from storage or received from a remote worker.
    pub fn from_string(s: String) -> Self {
        LeaseToken(s)
    }

    /// The token as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for LeaseToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Enough to correlate in logs, not enough to forge.
        write!(f, "LeaseToken({}…)", &self.0.get(..6).unwrap_or(""))
    }
}

/// When a new job becomes due.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Schedule {
    /// Due at once.
    #[default]
    Now,
    /// Due after a delay, measured on the store's clock.
    After(Duration),
    /// Due at a given time.
    At(Timestamp),
}

/// How jobs that share a key within one queue may run together. See
/// [`JobKey`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyLimit {
    /// One at a time, in enqueue order: a job starts only when no job
    /// enqueued before it with the same key is still ready (even if that one
    /// waits for a retry) or running. A `dead` or finished job no longer
    /// blocks its successors.
    Ordered,
    /// At most this many running at once (1–10,000); among due jobs of the
    /// key, the earliest enqueued start first.
    Concurrent(u32),
}

impl KeyLimit {
    /// The most jobs of the key that may run at once.
    pub fn limit(self) -> u32 {
        match self {
            KeyLimit::Ordered => 1,
            KeyLimit::Concurrent(n) => n,
        }
    }

    /// Whether jobs of the key run in enqueue order.
    pub fn is_ordered(self) -> bool {
        matches!(self, KeyLimit::Ordered)
    }
}

/// The largest per-key concurrency limit.
pub const MAX_KEY_LIMIT: u32 = 10_000;
const MAX_KEY_BYTES: usize = 200;

/// A concurrency key: jobs of one queue that carry the same key (a tenant,
/// an account, a document) share its limit, so one key's backlog cannot
/// occupy every worker — a claim passes over a saturated key's jobs and
/// takes other keys' instead. The limit travels with each job; jobs of one
/// key should agree on it (each is admitted by its own).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct JobKey {
    /// The key: 1–200 bytes, no control characters.
    pub name: String,
    /// Whether the key's jobs run one at a time in order.
    pub ordered: bool,
    /// The most of the key's jobs running at once (1 when ordered).
    pub limit: u32,
}

impl JobKey {
    /// Validates a key and its limit.
    pub fn new(name: impl Into<String>, limit: KeyLimit) -> Result<Self, Error> {
        let name = name.into();
        if name.is_empty() || name.len() > MAX_KEY_BYTES {
            return Err(Error::invalid(format!(
                "a concurrency key must be 1 to {MAX_KEY_BYTES} bytes long (got {} bytes)",
                name.len()
            )));
        }
        if name.chars().any(char::is_control) {
            return Err(Error::invalid(format!(
                "a concurrency key may not hold control characters (got {:?})",
                truncate_for_message(&name)
            )));
        }
        let n = limit.limit();
        if n == 0 || n > MAX_KEY_LIMIT {
            return Err(Error::invalid(format!(
                "a per-key concurrency limit must be between 1 and {MAX_KEY_LIMIT} (got {n})"
            )));
        }
        Ok(JobKey {
            name,
            ordered: limit.is_ordered(),
            limit: n,
        })
    }

    /// Trusted constructor for values read back from storage.
    #[doc(hidden)]
    pub fn from_stored(name: String, limit: u32, ordered: bool) -> Self {
        JobKey {
            name,
            ordered,
            limit,
        }
    }

    /// The key's limit as a [`KeyLimit`].
    pub fn key_limit(&self) -> KeyLimit {
        if self.ordered {
            KeyLimit::Ordered
        } else {
            KeyLimit::Concurrent(self.limit)
        }
    }
}

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
    pub unique: Option<crate::unique::Unique>,
    /// The open batch the job joins ([`crate::BatchSeal`]); inserting it
    /// into a sealed batch is refused.
    pub batch: Option<WorkflowId>,
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
        crate::labels::check_tags(&self.tags)?;
        crate::labels::check_meta(&self.meta)?;
        self.check_unique()?;
        crate::deps::check_one(self)
    }
}

/// The columns of the job table that make a [`Job`] (with `lease_token`),
/// in the order of SQLite's table, which reads them by position; the
/// PostgreSQL store looks each up by name.
pub const JOB_COLUMNS: [&str; 36] = [
    "id",
    "queue",
    "kind",
    "state",
    "payload",
    "priority",
    "attempts",
    "max_attempts",
    "replays",
    "lease_expiries",
    "max_lease_expiries",
    "give_up_at",
    "available_at",
    "created_at",
    "updated_at",
    "lease_token",
    "lease_until",
    "last_error",
    "last_error_class",
    "finished_at",
    "key_name",
    "key_limit",
    "key_ordered",
    "attempt_started_at",
    "deadline",
    "traceparent",
    "waiting_on",
    "on_dependency_failure",
    "has_dependents",
    "output",
    "progress",
    "workflow",
    "tags",
    "meta",
    "unique_key",
    "batch",
];

/// A W3C trace context (`traceparent` header, version 00):
/// `00-<32 hex trace id>-<16 hex parent id>-<2 hex flags>`, lowercase, with
/// neither id all zeros.
#[derive(Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TraceParent(String);

impl TraceParent {
    /// Validates a `traceparent` value.
    pub fn parse(s: impl Into<String>) -> Result<Self, Error> {
        let s = s.into();
        let parts: Vec<&str> = s.split('-').collect();
        let hex = |p: &str, n: usize| {
            p.len() == n
                && p.bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        };
        let ok = parts.len() == 4
            && parts[0] == "00"
            && hex(parts[1], 32)
            && hex(parts[2], 16)
            && hex(parts[3], 2)
            && parts[1].bytes().any(|b| b != b'0')
            && parts[2].bytes().any(|b| b != b'0');
        if ok {
            Ok(TraceParent(s))
        } else {
            Err(Error::invalid(format!(
                "traceparent {:?} is not a W3C trace context: expected 00-<32 lowercase hex trace id>-<16 hex parent id>-<2 hex flags>, ids not all zeros",
                truncate_for_message(&s)
            )))
        }
    }

    /// The value as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The 32-hex-digit trace id.
    pub fn trace_id(&self) -> &str {
        self.0.get(3..35).unwrap_or("")
    }
}

impl TryFrom<String> for TraceParent {
    type Error = Error;
    fn try_from(s: String) -> Result<Self, Error> {
        TraceParent::parse(s)
    }
}

impl From<TraceParent> for String {
    fn from(t: TraceParent) -> String {
        t.0
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TraceParent({})", self.0)
    }
}

/// A job as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Job {
    /// Stable identity.
    pub id: JobId,
    /// Queue name.
    pub queue: Name,
    /// Kind name.
    pub kind: Name,
    /// Current state.
    pub state: JobState,
    /// JSON payload.
    pub payload: Payload,
    /// Higher runs first.
    pub priority: i16,
    /// Attempts started in the current replay cycle.
    pub attempts: u32,
    /// Attempt budget of a replay cycle.
    pub max_attempts: u32,
    /// How many times an operator replayed the job.
    pub replays: u32,
    /// Leases that expired unsettled in the current replay cycle.
    pub lease_expiries: u32,
    /// The lost-lease budget.
    pub max_lease_expiries: u32,
    /// The end of the elapsed-time budget, if any.
    pub give_up_at: Option<Timestamp>,
    /// When the job is (or was) due.
    pub available_at: Timestamp,
    /// When the job was inserted.
    pub created_at: Timestamp,
    /// When the job last changed.
    pub updated_at: Timestamp,
    /// End of the current lease, while running.
    pub lease_until: Option<Timestamp>,
    /// When the current attempt began (while running), or the last one.
    /// The attempt the job row holds — running, or the one that succeeded —
    /// is not yet in the history table; [`JobDetail::history`] shows it.
    pub attempt_started_at: Option<Timestamp>,
    /// The last recorded error.
    pub last_error: Option<String>,
    /// The class of the last recorded error.
    pub last_error_class: Option<ErrorClass>,
    /// When the job reached done, dead or cancelled.
    pub finished_at: Option<Timestamp>,
    /// The concurrency key, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<JobKey>,
    /// The business deadline, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<Timestamp>,
    /// The trace context of the request that enqueued it, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub traceparent: Option<TraceParent>,
    /// Dependencies not yet met: above zero while the job is `blocked` (and
    /// for a job cancelled before they were).
    pub waiting_on: u32,
    /// Its policy when a dependency fails, if it has dependencies.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_dependency_failure: Option<DependencyFailure>,
    /// Whether some job depends on this one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub has_dependents: bool,
    /// What the job's handler recorded when it succeeded (JSON), if it did:
    /// its dependents read it.
    pub output: Option<Payload>,
    /// The latest progress a handler reported, if any (carried by a lease
    /// renewal, so it lags the handler by up to a third of the lease).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub progress: Option<Progress>,
    /// The workflow the job is a step of, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workflow: Option<WorkflowId>,
    /// Its tags, in the order given.
    pub tags: Vec<String>,
    /// Its metadata, by key.
    pub meta: Meta,
    /// The key it was made unique or debounced by, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unique_key: Option<String>,
    /// The batch it belongs to, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<WorkflowId>,
}

/// How far an attempt has got, as its handler reported it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Progress {
    /// Done so far, 0–100.
    pub percent: u8,
    /// What it is doing, if it said (at most [`Progress::MAX_MESSAGE_BYTES`],
    /// no control character).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The attempt that reported it (a retry starts without a report of
    /// its own, and the last one's stays until it makes one).
    pub attempt: u32,
}

impl Progress {
    /// The longest message kept (its beginning is kept, `…` after it).
    pub const MAX_MESSAGE_BYTES: usize = 200;

    /// A report of `percent` (more than 100 counts as 100) and an
    /// optional message (each control character — ESC, a line break, NUL,
    /// DEL, a C1 character — replaced by U+FFFD, as metadata refuses them;
    /// cut to [`Progress::MAX_MESSAGE_BYTES`]), by attempt `attempt`. Every
    /// report passes here: the library's `set_progress`, the HTTP API's
    /// heartbeat, and one read back from the store.
    #[must_use]
    pub fn new(percent: u8, message: Option<String>, attempt: u32) -> Self {
        let message = message.map(|m| {
            let mut m = crate::labels::without_controls(m);
            if m.len() > Self::MAX_MESSAGE_BYTES {
                let mut end = Self::MAX_MESSAGE_BYTES;
                while !m.is_char_boundary(end) {
                    end -= 1;
                }
                m.truncate(end);
                m.push('…');
            }
            m
        });
        Progress {
            percent: percent.min(100),
            message,
            attempt,
        }
    }

    /// The report as stored: JSON text.
    ///
    /// # Errors
    /// Never in practice (the fields always serialize).
    pub fn to_json(&self) -> Result<String, Error> {
        serde_json::to_string(self)
            .map_err(|e| Error::storage(format!("cannot encode a progress report: {e}")))
    }

    /// A stored report.
    ///
    /// # Errors
    /// [`Error::Storage`] if the stored text is not a report.
    pub fn from_json(text: &str) -> Result<Self, Error> {
        let p: Progress = serde_json::from_str(text)
            .map_err(|e| Error::storage(format!("a stored progress report is malformed: {e}")))?;
        Ok(Progress::new(p.percent, p.message, p.attempt))
    }
}

/// The fencing pair a worker presents to settle an attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The job.
    pub id: JobId,
    /// The token written by the claim.
    pub token: LeaseToken,
    /// The attempt number the claim started.
    pub attempt: u32,
}

/// A job handed to a worker by a claim.
#[derive(Clone, Debug)]
pub struct ClaimedJob {
    /// The job as the claim left it (`state = running`, `attempts` incremented).
    pub job: Job,
    /// The fencing pair to present when settling.
    pub lease: Lease,
}

/// One attempt in a job's history.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AttemptRecord {
    /// Which replay cycle (0 before any replay).
    pub cycle: u32,
    /// Attempt number within the cycle.
    pub attempt: u32,
    /// When the claim started it.
    pub started_at: Timestamp,
    /// When it was settled or found expired.
    pub finished_at: Option<Timestamp>,
    /// `succeeded`, `retry`, `dead`, `snoozed`, `cancelled`, `released`,
    /// `lease_expired`, or `None` while running.
    pub outcome: Option<String>,
    /// The error, if the attempt failed.
    pub error: Option<String>,
    /// The error's class.
    pub error_class: Option<ErrorClass>,
}

/// One operator action on a job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AuditRecord {
    /// When it happened.
    pub at: Timestamp,
    /// `replay`, `cancel`, `copy`, …
    pub action: String,
    /// Who did it.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
    /// For a `copy` of this job: the new job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied_to: Option<JobId>,
    /// When this job is itself a copy: the job it was copied from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub copied_from: Option<JobId>,
}

impl AuditRecord {
    /// Fills in a `copy` entry's other job, as the history of job `of`
    /// tells it: the entry names the original (`job`) and the new job
    /// (`copy`); the original's history says where it was copied to, the
    /// copy's where it came from.
    pub fn with_copy(mut self, of: &JobId, job: Option<JobId>, copy: Option<JobId>) -> Self {
        match copy {
            Some(c) if &c == of => self.copied_from = job,
            c => self.copied_to = c,
        }
        self
    }
}

/// A job with its attempt history and audit entries.
#[derive(Clone, Debug, Serialize)]
pub struct JobDetail {
    /// The job.
    #[serde(flatten)]
    pub job: Job,
    /// Every attempt, oldest first.
    pub history: Vec<AttemptRecord>,
    /// Every operator action, oldest first.
    pub audit: Vec<AuditRecord>,
    /// The jobs it depends on, in the order they were named.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependencies: Vec<crate::deps::Dependency>,
    /// The first jobs (at most [`JobDetail::DEPENDENTS_SHOWN`]: blocked
    /// ones first, then by id) that depend on it, each with its state and
    /// whether this job's edge to it is met.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub dependents: Vec<crate::deps::Dependency>,
}

impl JobDetail {
    /// How many dependents a detail lists.
    pub const DEPENDENTS_SHOWN: usize = 100;
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn traceparents_follow_the_w3c_format() {
        let ok = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
        let tp = TraceParent::parse(ok).unwrap();
        assert_eq!(tp.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        for bad in [
            "",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1\u{0}",
        ] {
            let err = TraceParent::parse(bad).unwrap_err().to_string();
            assert!(err.contains("W3C trace context"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn lease_tokens_carry_128_bits_and_differ() {
        let a = LeaseToken::generate();
        let b = LeaseToken::generate();
        assert_eq!(a.as_str().len(), 32);
        assert!(a.as_str().chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
        assert!(!format!("{a:?}").contains(a.as_str()));
    }

    #[test]
    fn ids_and_names_are_validated() {
        assert!(JobId::new("pay_01H:x-y").is_ok());
        assert!(JobId::new("").is_err());
        assert!(JobId::new("a b").is_err());
        assert!(JobId::new("nul\0").is_err());
        assert!(JobId::new("x".repeat(201)).is_err());
        assert!(Name::parse("queue", "mail.high").is_ok());
        assert!(Name::parse("queue", "-x").is_err());
        assert!(Name::parse("kind", "").is_err());
    }

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
        assert!(JobKey::new("t", KeyLimit::Concurrent(MAX_KEY_LIMIT + 1)).is_err());
        let mut job = NewJob::new("k", Payload::default()).unwrap();
        job.key = Some(JobKey::from_stored("t".into(), 2, true));
        assert!(job.validate().is_err(), "ordered with limit 2 is refused");
    }

    #[test]
    fn payload_must_be_json_within_the_limit() {
        assert!(Payload::from_json_text(r#"{"a":1}"#).is_ok());
        assert!(Payload::from_json_text("{").is_err());
        assert!(Payload::from_json_text_limited("[1,2,3]", 3).is_err());
    }

    #[test]
    fn payloads_a_store_cannot_hold_or_a_reader_cannot_render_are_refused() {
        for bad in [
            r#"{"a":"\ud800"}"#, // a lone leading surrogate
            r#"["x\udc00y"]"#,   // a lone trailing surrogate
            r#"{"\ud800":1}"#,   // ... in a key
            "[1e400]",           // beyond a 64-bit float
            "-1e999999",
            &format!("1{}", "0".repeat(400)),
            r#""a\u0000b""#, // NUL: PostgreSQL's jsonb refuses it
            r#"{"a\u0000":true}"#,
            &format!("{}1{}", "[".repeat(200), "]".repeat(200)), // deeper than 128
        ] {
            let e = Payload::from_json_text(bad).expect_err(bad);
            assert!(matches!(e, Error::Invalid(_)), "{bad}: {e}");
        }
        let msg = Payload::from_json_text("[1e400]")
            .expect_err("refused")
            .to_string();
        assert!(msg.contains("64-bit float"), "{msg}");
        for good in [
            r#"{"a":"\ud83d\ude00","b":"é\n\t"}"#, // a surrogate pair is one character
            "[1.7976931348623157e308, -0, 1e-400, 18446744073709551615, -9223372036854775808]",
            r#""\u0001 control characters other than NUL""#,
            "null",
        ] {
            Payload::from_json_text(good).expect(good);
        }
    }

    #[test]
    fn a_stored_payload_renders_as_it_was_stored() {
        // Text stored before payloads were checked (or written by SQL) still
        // renders, byte for byte, inside a larger answer.
        for stored in [r#"{"a":"\ud800"}"#, "[1e400]", r#""a\u0000b""#] {
            let p = Payload::from_stored(stored.to_owned());
            let out = serde_json::to_string(&[&p]).expect("renders");
            assert_eq!(out, format!("[{stored}]"));
        }
        assert_eq!(nesting_depth(r#"{"a":[1,{"b":"]]}}[[\\\"{{"}]}"#), 3);
        assert_eq!(nesting_depth("7"), 0);
    }

    #[test]
    fn payload_serializes_as_json_not_as_a_string() {
        let p = Payload::from_json_text(r#"{"to":"x"}"#).unwrap();
        assert_eq!(serde_json::to_string(&p).unwrap(), r#"{"to":"x"}"#);
        let back: Payload = serde_json::from_str(r#"{"to":"x"}"#).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn states_round_trip_through_their_names() {
        for s in JobState::ALL {
            assert_eq!(s.as_str().parse::<JobState>().ok(), Some(s));
        }
        assert!("stuck".parse::<JobState>().is_err());
    }

    #[test]
    fn a_progress_message_keeps_no_control_character() {
        let p = Progress::new(40, Some("a\u{1b}[31m\n\0b\u{9b}2J\u{7f}".to_owned()), 1);
        assert_eq!(
            p.message.as_deref(),
            Some("a\u{fffd}[31m\u{fffd}\u{fffd}b\u{fffd}2J\u{fffd}")
        );
        // A report stored before (read back) is cleaned the same way.
        let stored = r#"{"percent":5,"message":"x\u001b]0;title\u0007","attempt":2}"#;
        let read = Progress::from_json(stored).unwrap();
        assert_eq!(read.message.as_deref(), Some("x\u{fffd}]0;title\u{fffd}"));
        // Plain text, accents and emoji pass as they are.
        let plain = Progress::new(1, Some("copying rows – 40 % ✓".to_owned()), 1);
        assert_eq!(plain.message.as_deref(), Some("copying rows – 40 % ✓"));
    }
}
