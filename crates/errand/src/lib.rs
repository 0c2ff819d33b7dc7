//! # errand
//!
//! Durable background jobs for Rust services. A service commits an
//! obligation in the same transaction as its business rows; a worker claims
//! it under a short fenced lease, runs it, and settles it. Failures come back
//! later on a persisted, jittered, bounded schedule; exhausted jobs wait as
//! dead letters until an operator replays them.
//!
//! ## The pieces
//!
//! * [`connect`] opens a store from a `--db` string (a path, `sqlite://PATH`,
//!   `postgres://…`); [`schema_status`] looks at one without changing it.
//! * [`Admin`] carries out every operator action — replay, copy, cancel,
//!   purge, reschedule, pause and resume — with one set of rules and
//!   audit entries, whichever surface (CLI, HTTP API, dashboard, an
//!   application) asks.
//! * [`Workflow`] builds a graph of jobs under one id, enqueued whole by
//!   [`Client::enqueue_workflow`]; [`Admin::workflow`] shows it, and
//!   [`Admin::cancel_workflow`] and [`Admin::replay_workflow`] act on all
//!   its steps. Jobs also carry tags and metadata ([`NewJob::with_tag`],
//!   [`NewJob::with_meta`]) and may be unique or debounced
//!   ([`NewJob::unique_for`], [`NewJob::unique_while`], [`NewJob::debounce`]).
//!   A batch gathers jobs ([`NewJob::in_batch`]) until
//!   [`Client::seal_batch`] enqueues its `on_success` and `on_finish`
//!   callbacks.
//! * [`Client`] enqueues jobs; `enqueue_in(&tx, job)` — the same call on
//!   `SqliteStore` and `PgStore` — enqueues inside a transaction the
//!   application already has open (the outbox pattern), and
//!   `SqliteStore::write` runs application writes in the store's own write
//!   transaction.
//! * [`Worker`] claims and runs jobs with a [`Handler`]: [`Worker::run_once`]
//!   handles at most one job (for a shell or a scheduler).
//! * [`JobArgs`] makes a payload type a kind of job: its kind, queue,
//!   budgets and retry policy written once, used by [`Client::enqueue`]
//!   (`client.enqueue(&Receipt { .. })`) and [`RuntimeBuilder::register`].
//! * [`Runtime`] is the long-running service: handlers by kind with typed
//!   payloads, queues with their own concurrency, batch claims, lease
//!   renewal, per-kind deadlines, graceful draining and the expired-lease
//!   sweep.
//! * `ExecHandler`, in the `errand-exec` crate, runs an external command per
//!   job (`errand work --exec`) through this crate's [`Handler`].
//! * [`probe`] tells a fault harness when a worker passes the moments the
//!   delivery contract is about (nothing is installed by default).
//!
//! ## Features
//!
//! `sqlite` (the embedded backend) and `postgres` are both on by default;
//! a service that uses one turns the other off
//! (`default-features = false, features = ["postgres"]`) and compiles none
//! of its driver. [`connect`] refuses a database whose backend is left out.
//!
//! ## Design decisions
//!
//! Delivery is at-least-once. A handler gets the stable job id and the
//! attempt number so it can make its effect idempotent (for example a sink
//! table keyed by the job id); that is the only way a repeated attempt
//! becomes harmless. The worker never holds a database transaction while a
//! handler runs, renews its lease while the handler works, and settles with
//! the lease token: a settlement refused by the fence is reported as
//! [`WorkOutcome::LeaseLost`] and never retried against another owner.
#![deny(missing_docs)]

mod client;
mod cron;
mod execution;
mod handler;
mod maintenance;
mod minutes;
pub mod probe;
mod runtime;
mod spans;
mod term;
#[cfg(feature = "sqlite")]
pub mod testkit;
mod work_report;
mod worker;

use std::sync::Arc;

pub use errand_core::encryption;
pub use errand_core::{
    self as core, AttemptRecord, AuditRecord, CancelRequest, ClaimRate, ClaimRequest, ClaimedJob,
    Clock, Error, ErrorClass, Failure, Inserted, IntoNewJob, Job, JobArgs, JobDetail, JobFilter,
    JobId, JobKey, JobOptions, JobSearch, JobState, KeyLimit, Lease, MAX_OUTPUT_BYTES,
    MAX_QUEUE_CONCURRENCY, ManualClock, Name, NewJob, Outcome, Payload, PayloadTerm, RateBucket,
    RateLimit, ReplayRequest, Result, RetryAt, RetryPolicy, Schedule, SchemaStatus, SearchPage,
    Store, SweepReport, SystemClock, Timestamp, WorkerStore, bounds,
};
pub use errand_core::{
    Admin, AdminStore, AuditEntry, AuditFilter, AuditStamp, BulkAction, BulkFilter, BulkOutcome,
    BulkRequest, Copied, CopyRequest, Counts, Histogram, JobStore, LATENCY_BUCKETS_MS, Notifier,
    PausedQueue, Planned, PurgeRequest, QueueAction, QueueLimit, QueueLimitRequest, QueueStats,
    Reschedule, RescheduleRequest, Selection, Stats, StatsRequest, TraceParent, WorkerMetrics,
    WorkerReport, WorkerSeen, Workflow, WorkflowAction, WorkflowId, WorkflowStep, WorkflowView,
};
pub use errand_core::{
    Await, Awaiting, MAX_SIGNAL_PAYLOAD_BYTES, NewSignal, OnAwaitTimeout, ReceivedSignal,
    SignalRecord, Signalled,
};
pub use errand_core::{Batch, BatchId, BatchSeal, BatchView, JobBrief, briefs};
pub use errand_core::{
    ChartWindow, Charts, HISTOGRAM_BUCKETS, MINUTES_KEPT, MinuteCount, MinuteQuery, MinuteRow,
    Series, Tally,
};
pub use errand_core::{ChildrenAdded, MAX_CHILDREN};
#[cfg(feature = "postgres")]
pub use errand_postgres::{self as postgres, PgOptions, PgStore};
#[cfg(feature = "sqlite")]
pub use errand_sqlite::{self as sqlite, SqliteOptions, SqliteStore, Synchronous};

pub use client::Client;
pub use cron::CronEnqueuer;
pub use errand_core::{
    CronSchedule, Misfire, ScheduleActed, ScheduleAction, ScheduleAdd, ScheduleAddOutcome,
    ScheduleAdded, ScheduleDefinition, SchedulePause, ScheduleView, StoredSchedule,
};
pub use errand_core::{JobSpec, MAX_PAYLOAD_DEPTH, parse_deadline, parse_duration};
pub use maintenance::{Pruner, Sweeper, WaitTimer};
pub use minutes::{MinuteCounter, sample_queues};
pub use runtime::{KindOptions, ReportHook, RunStats, Runtime, RuntimeBuilder};
pub use term::log_colours;

/// The W3C trace context of the attempt being run, when spans are recorded
/// (the `otel` feature) and this is called inside an attempt's span: what a
/// handler hands on to the work it starts, so that work joins the
/// attempt's trace (the exec handler sets it as `TRACEPARENT`).
pub fn attempt_traceparent() -> Option<TraceParent> {
    spans::current_traceparent()
}
pub use execution::{Sampler, failure_for};
pub use handler::{Handler, JobContext, handler_fn};
pub use work_report::{WorkOutcome, WorkReport};
pub use worker::{Worker, WorkerConfig};

/// Which database a `--db` string names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DbTarget {
    /// A SQLite file.
    Sqlite(std::path::PathBuf),
    /// A PostgreSQL URL.
    Postgres(String),
}

impl DbTarget {
    /// Parses a file path, `sqlite://PATH` or `postgres://…`.
    pub fn parse(db: &str) -> Result<Self> {
        let db = db.trim();
        if db.is_empty() {
            return Err(Error::invalid(
                "the database is empty: pass --db PATH, sqlite://PATH or postgres://…",
            ));
        }
        if db.starts_with("postgres://") || db.starts_with("postgresql://") {
            return Ok(DbTarget::Postgres(db.to_owned()));
        }
        if let Some(path) = db.strip_prefix("sqlite://") {
            if path.is_empty() {
                return Err(Error::invalid(
                    "sqlite:// needs a path, like sqlite://./errand.db",
                ));
            }
            return Ok(DbTarget::Sqlite(path.into()));
        }
        if let Some((scheme, _)) = db.split_once("://") {
            return Err(Error::invalid(format!(
                "unknown database scheme `{scheme}://`: use a file path, sqlite://PATH or postgres://…"
            )));
        }
        Ok(DbTarget::Sqlite(db.into()))
    }
}

/// How [`connect`] opens a store.
#[derive(Clone, Debug, Default)]
pub struct ConnectOptions {
    /// Create the database and apply pending migrations (what `errand
    /// migrate` does). Otherwise the database must exist with an up-to-date
    /// schema.
    pub create_and_migrate: bool,
    /// SQLite only: how durable each commit is (default `FULL`).
    #[cfg(feature = "sqlite")]
    pub synchronous: Synchronous,
    /// PostgreSQL only: the schema holding Errand's tables (default `errand`).
    pub schema: Option<String>,
    /// PostgreSQL only: allow `public` as the schema
    /// ([`PgOptions::allow_public_schema`]).
    pub allow_public_schema: bool,
    /// SQLite only: the clock lease and due decisions use (default: the
    /// host's). PostgreSQL always uses the server's.
    pub clock: Option<Arc<dyn Clock>>,
    /// The keys payloads, outputs and signal payloads are encrypted with
    /// (see [`encryption`]); `None` stores them as given.
    pub keys: Option<Arc<encryption::Keyring>>,
}

/// Opens the store a `--db` string names.
///
/// # Errors
/// [`Error::Invalid`] for a string that names no database, or one whose
/// backend this build leaves out (the `sqlite` and `postgres` features);
/// otherwise what opening the store answers.
pub async fn connect(db: &str, options: &ConnectOptions) -> Result<Arc<dyn Store>> {
    match DbTarget::parse(db)? {
        DbTarget::Sqlite(path) => open_sqlite(path, options),
        DbTarget::Postgres(url) => connect_postgres(&url, options).await,
    }
}

/// Looks at the database a `--db` string names without changing it, and
/// says whether it holds Errand's schema at this program's version:
/// missing, not a database, not Errand's, older, current or newer. On
/// PostgreSQL the schema looked at is `options.schema` (default `errand`).
/// [`SchemaStatus::require_current`] turns a status into the refusal
/// [`connect`] would give.
///
/// # Errors
/// The string names no database or a backend this build leaves out, or
/// the database cannot be read (a directory, permissions, an unreachable
/// server).
pub async fn schema_status(db: &str, options: &ConnectOptions) -> Result<SchemaStatus> {
    match DbTarget::parse(db)? {
        DbTarget::Sqlite(path) => sqlite_status(&path),
        DbTarget::Postgres(url) => postgres_status(&url, options).await,
    }
}

#[cfg(feature = "sqlite")]
fn sqlite_status(path: &std::path::Path) -> Result<SchemaStatus> {
    errand_sqlite::schema_status(path)
}

#[cfg(not(feature = "sqlite"))]
fn sqlite_status(path: &std::path::Path) -> Result<SchemaStatus> {
    Err(no_sqlite(path))
}

#[cfg(feature = "postgres")]
async fn postgres_status(url: &str, options: &ConnectOptions) -> Result<SchemaStatus> {
    let schema = options
        .schema
        .clone()
        .unwrap_or_else(|| PgOptions::default().schema);
    errand_postgres::schema_status(url, &schema).await
}

#[cfg(not(feature = "postgres"))]
async fn postgres_status(_url: &str, _options: &ConnectOptions) -> Result<SchemaStatus> {
    Err(no_postgres())
}

#[cfg(feature = "sqlite")]
fn open_sqlite(path: std::path::PathBuf, options: &ConnectOptions) -> Result<Arc<dyn Store>> {
    let defaults = SqliteOptions::default();
    let sqlite = SqliteOptions {
        create: options.create_and_migrate,
        migrate: options.create_and_migrate,
        synchronous: options.synchronous,
        clock: options.clock.clone().unwrap_or(defaults.clock.clone()),
        keys: options.keys.clone(),
        ..defaults
    };
    Ok(Arc::new(SqliteStore::open(path, sqlite)?))
}

#[cfg(not(feature = "sqlite"))]
fn open_sqlite(path: std::path::PathBuf, _options: &ConnectOptions) -> Result<Arc<dyn Store>> {
    Err(no_sqlite(&path))
}

#[cfg(not(feature = "sqlite"))]
fn no_sqlite(path: &std::path::Path) -> Error {
    Error::invalid(format!(
        "{} names a SQLite file, and this build of errand has no SQLite backend: \
         build it with the `sqlite` feature",
        path.display()
    ))
}

#[cfg(feature = "postgres")]
async fn connect_postgres(url: &str, options: &ConnectOptions) -> Result<Arc<dyn Store>> {
    let defaults = PgOptions::default();
    let pg = PgOptions {
        schema: options.schema.clone().unwrap_or(defaults.schema),
        allow_public_schema: options.allow_public_schema,
        migrate: options.create_and_migrate,
        keys: options.keys.clone(),
        ..defaults
    };
    Ok(Arc::new(PgStore::connect(url, pg).await?))
}

#[cfg(not(feature = "postgres"))]
async fn connect_postgres(_url: &str, _options: &ConnectOptions) -> Result<Arc<dyn Store>> {
    Err(no_postgres())
}

#[cfg(not(feature = "postgres"))]
fn no_postgres() -> Error {
    Error::invalid(
        "the database is a PostgreSQL URL, and this build of errand has no PostgreSQL \
         backend: build it with the `postgres` feature",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_strings_name_their_backend() {
        assert_eq!(
            DbTarget::parse("./e.db").ok(),
            Some(DbTarget::Sqlite("./e.db".into()))
        );
        assert_eq!(
            DbTarget::parse("sqlite:///tmp/e.db").ok(),
            Some(DbTarget::Sqlite("/tmp/e.db".into()))
        );
        assert!(matches!(
            DbTarget::parse("postgres://u@h/db"),
            Ok(DbTarget::Postgres(_))
        ));
        assert!(DbTarget::parse("mysql://x").is_err());
        assert!(DbTarget::parse("sqlite://").is_err());
        assert!(DbTarget::parse("  ").is_err());
    }
}

/// The examples of this crate's README, compiled and run as doctests so
/// that the README stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
