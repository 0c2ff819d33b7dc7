//! # errand-core
//!
//! The vocabulary of Errand, with no database or runtime dependency:
//!
//! * [`Job`], [`JobState`] and the validated names and ids that describe a job;
//! * [`JobArgs`]: a typed job, whose payload type names its kind and defaults;
//! * [`LeaseToken`]: the fresh, unguessable proof of ownership of one attempt;
//! * [`RetryPolicy`]: how long a failed attempt waits before the next one;
//! * [`Outcome`]: what a handler says about the attempt it ran;
//! * [`Store`]: the storage contract every backend implements, in three
//!   seams — [`JobStore`] (the worker's path), [`AdminStore`] (the
//!   operator's) and [`Notifier`] (wake-ups); a worker takes a
//!   [`WorkerStore`] (the first and the last), an operator's surface an
//!   [`AdminStore`];
//! * [`Admin`]: every operator action over any store, with its policy.
//!
//! ## Design decisions
//!
//! The storage seam is drawn at *domain operations* — claim, complete, fail,
//! snooze, heartbeat, release, replay, cancel — not at a generic SQL executor.
//! Each backend implements every operation atomically in its own dialect, and
//! every transition after a claim is a single conditional statement guarded by
//! the job id, `state = 'running'`, the lease token and `lease_until > now`.
//! A settlement that changes no row is reported as [`Error::LeaseLost`]; the
//! caller never overwrites another owner's state.
//!
//! Time is an input. Stores read the current time from a [`Clock`] (SQLite)
//! or from the database server (PostgreSQL), and tests inject a
//! [`ManualClock`]. Retry delays are computed from an injected uniform sample
//! so that a test can pin the exact bounds of every policy.
#![deny(missing_docs)]

mod admin;
mod args;
mod batch;
pub mod bounds;
mod brief;
mod children;
mod clock;
mod counted;
mod cron;
mod deps;
pub mod encryption;
mod error;
mod error_class;
mod filter;
mod ids;
mod job;
mod job_json;
mod labels;
mod minutes;
mod new_job;
mod outcome;
mod payload;
mod queue_limit;
mod requests;
mod retry;
mod schema;
mod search;
mod signal;
mod spec;
mod stamp;
mod state;
mod stats;
mod step;
mod store;
mod unique;
mod workflow;
mod zone;

pub use admin::{Admin, BulkAction, BulkOutcome, BulkRequest, MAX_ROTATE_BATCH, Planned, Rotation};
pub use args::{IntoNewJob, JobArgs, JobOptions};
pub use batch::{
    Batch, BatchId, BatchSeal, BatchView, Callbacks, MAX_BATCH_JOBS, check_batch_size,
    check_callbacks_created, check_found_in_batch, check_open,
};
pub use brief::{JobBrief, briefs};
pub use children::{
    ChildrenAdded, MAX_CHILDREN, adopt, check_children, check_outside, child_exists,
    outside_dependencies,
};
pub use clock::{Clock, ManualClock, SystemClock, Timestamp};
pub use counted::ExactCount;
pub use cron::{
    CronSchedule, MAX_CRON_BYTES, MAX_SCHEDULE_PAYLOAD_BYTES, Misfire, ScheduleActed,
    ScheduleAction, ScheduleAdd, ScheduleAddOutcome, ScheduleAdded, ScheduleChange,
    ScheduleDefinition, SchedulePause, ScheduleRow, ScheduleView, StoredSchedule,
};
pub use deps::{
    Edge, LinkPlan, check_dependencies, plan_links, storage_order, wanted_dependencies,
};
pub use error::{Cause, Error, Result};
pub use error_class::ErrorClass;
pub use filter::{DEFAULT_PAGE_BYTES, JobFilter, PageBudget, listed_bytes};
pub use ids::{JobId, LeaseToken, Name, TraceParent};
pub use job::{
    AttemptRecord, AuditRecord, ClaimedJob, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_LEASE_EXPIRIES,
    DEFAULT_QUEUE, Dependency, DependencyFailure, JOB_COLUMNS, Job, JobDetail, Lease, Progress,
    signal_refused,
};
pub use job_json::{AwaitJson, JobJson, duration_field, jobs_from_json_lines};
pub use labels::{
    MAX_META_ENTRIES, MAX_META_KEY_BYTES, MAX_META_VALUE_BYTES, MAX_TAG_BYTES, MAX_TAGS, Meta,
    WorkflowId, check_meta, check_tag, check_tags, meta_from_pairs, meta_from_stored,
    meta_to_stored, parse_meta_pair, tags_from_stored, tags_to_stored,
};
pub use minutes::{
    ChartWindow, Charts, HISTOGRAM_BUCKETS, MINUTES_KEPT, MinuteCount, MinuteQuery, MinuteRow,
    Series, Tally, check_minutes, minute_of,
};
pub use new_job::{MAX_DEPENDENCIES, NewJob, check_unique_batch};
pub use outcome::{MAX_RECORDED_TEXT_BYTES, Outcome, storable_text};
pub use payload::{MAX_OUTPUT_BYTES, MAX_PAYLOAD_BYTES, MAX_PAYLOAD_DEPTH, Payload};
pub use queue_limit::{MAX_QUEUE_CONCURRENCY, QueueLimit, QueueLimitRequest, check_concurrency};
pub use requests::{
    AuditEntry, AuditFilter, BulkFilter, CancelRequest, Copied, CopyRequest, PausedQueue,
    PurgeRequest, QueueAction, ReplayRequest, RescheduleRequest, Selection,
};
pub use retry::RetryPolicy;
pub use schema::{BASELINE_NAME, SCHEMA_VERSION, SchemaStatus};
pub use search::{
    DEFAULT_SCAN, JobSearch, MAX_PAYLOAD_TERMS, MAX_SCAN, PathStep, PayloadTerm, SearchPage,
    parse_search_box,
};
pub use signal::{
    Await, Awaiting, MAX_SIGNAL_PAYLOAD_BYTES, NewSignal, OnAwaitTimeout, ReceivedSignal,
    SignalRecord, refusal as signal_refusal,
};
pub use spec::{JobSpec, parse_deadline, parse_duration};
pub use stamp::{
    MAX_OPERATOR_BYTES, MAX_REASON_BYTES, check_operator, check_reason, is_audit_text,
};
pub use state::{JobKey, JobState, KeyLimit, MAX_KEY_LIMIT, Schedule};
pub use stats::{
    Counts, Histogram, LATENCY_BUCKETS_MS, QueueSample, QueueStats, Stats, StatsRead, StatsRequest,
    WindowRow, WorkerMetrics, WorkerReport, WorkerSeen, assemble_stats,
};
pub use step::StepGuard;
pub use store::{
    AdminStore, AuditStamp, ClaimRate, ClaimRequest, FailResult, Failure, Inserted, JobStore,
    Notifier, RateBucket, RateLimit, Reschedule, RetryAt, Signalled, StepEdge, Store, SweepReport,
    WorkSignal, WorkerStore, check_recorded_text,
};
pub use unique::{MAX_UNIQUE_KEY_BYTES, Unique, UniqueProbe, UniqueRule};
pub use workflow::{
    StateCount, Workflow, WorkflowActed, WorkflowAction, WorkflowStep, WorkflowView,
};
pub use zone::{MAX_ZONE_BYTES, ScheduleZone};

/// The examples of this crate's README, compiled and run as doctests so
/// that the README stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
