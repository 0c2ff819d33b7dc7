//! `errand`: the operator's command line.
//!
//! Every command takes `--db` (or `ERRAND_DB`): a file path or
//! `sqlite://PATH` (default `./errand.db`). Output is human-readable, or JSON
//! with `--json`. Exit codes are a stable interface; see `docs/cli.md`.
//! Output goes through the `output` module, never `println!` (which panics
//! when the reader of a pipe has gone).
//!
//! The command is a library with a two-line binary (`src/main.rs`), so the
//! fault harness can build the same command with its crash points
//! installed ([`main_with`] and [`Hooks`]) as a binary of its own.
#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::io::Read;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
use errand::{
    CancelRequest, CopyRequest, Error, ExecHandler, JobFilter, JobId, JobState, Name,
    ReplayRequest, RetryPolicy, Schedule, Store, Timestamp, Worker, WorkerConfig,
};

mod admin;
#[cfg(feature = "bench")]
mod bench;
mod connect;
mod exit;
mod output;
mod progress;
mod schedule;
mod select;
mod serve_loop;
mod stats;
mod telemetry;
mod workflow;

use exit::Failure;
use output::{errln, outln};

#[derive(Parser, Debug)]
#[command(
    name = "errand",
    version,
    about = "Durable background jobs: enqueue, inspect, replay and run them"
)]
struct Cli {
    /// The database: a file path, sqlite://PATH or postgres://USER@HOST:PORT/DB.
    #[arg(long, global = true, env = "ERRAND_DB", default_value = "./errand.db")]
    db: String,

    /// PostgreSQL: the schema holding Errand's tables (not a system schema,
    /// and not `public` without --allow-public-schema).
    #[arg(long, global = true, env = "ERRAND_SCHEMA", default_value = "errand")]
    schema: String,

    /// PostgreSQL: allow --schema public, the database's shared default
    /// schema (refused otherwise, so Errand's tables never land there by a
    /// slip).
    #[arg(long, global = true)]
    allow_public_schema: bool,

    /// SQLite durability: `full` (default; survives power loss) or `normal`
    /// (survives a process crash; the last commits may be lost on power loss).
    #[arg(
        long,
        global = true,
        env = "ERRAND_SQLITE_SYNCHRONOUS",
        default_value = "full"
    )]
    synchronous: errand::Synchronous,

    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Create or upgrade the schema; safe to run repeatedly.
    Migrate(JsonFlag),
    /// Insert a job (an existing --id returns that job and creates nothing).
    Enqueue(Box<EnqueueArgs>),
    /// List jobs, oldest first.
    Jobs(JobsArgs),
    /// Show one job with its attempt history and audit entries.
    Show(ShowArgs),
    /// Replay dead or cancelled jobs (by id, or by filter with a bound).
    Replay(ReplayArgs),
    /// Cancel jobs that are not finished.
    Cancel(CancelArgs),
    /// Move waiting jobs to a new due time or priority (audited).
    Reschedule(RescheduleArgs),
    /// A workflow's steps (show), or an action on all of them (cancel,
    /// replay), audited.
    Workflow(workflow::WorkflowArgs),
    /// Seal a batch, enqueueing its callbacks (seal), or show it (show).
    Batch(workflow::BatchArgs),
    /// Run jobs with an external command (--help: what the command gets
    /// and what its exit status means).
    #[command(after_long_help = WORK_HELP)]
    Work(WorkArgs),
    /// Delete done and cancelled jobs older than an age (dead jobs are kept).
    Prune(PruneArgs),
    /// Delete dead jobs for good (by id, or by filter with a bound), each
    /// with an audit entry that outlives it.
    Purge(admin::PurgeArgs),
    /// The operator signals per queue; with --check, exit 6 when a
    /// threshold is crossed.
    Stats(stats::StatsArgs),
    /// Pause a queue: no worker in any process takes its jobs until it is
    /// resumed (running jobs finish).
    Pause(admin::QueueActionArgs),
    /// Resume a paused queue.
    Resume(admin::QueueActionArgs),
    /// List the queues, paused or active (who paused them, when and why).
    Queues(JsonFlag),
    /// The audit log of operator actions, newest first.
    Audit(admin::AuditArgs),
    /// Periodic jobs: `schedule add|list|remove|pause|resume` keep
    /// schedules in the database, run by every `errand work` service
    /// (exactly one job per tick however many run); `schedule --name N
    /// --cron P --kind K` runs one schedule in this process.
    Schedule(schedule::ScheduleArgs),
    /// Serve the JSON HTTP API (docs/http-api.md) until SIGTERM/SIGINT.
    Serve(ServeArgs),
    /// Measure throughput, latency, commits per job and peak RSS on a fresh
    /// database (a new SQLite file, or a scratch PostgreSQL --schema); the
    /// benchmark's jobs are left in it (docs/performance.md).
    #[cfg(feature = "bench")]
    Bench(bench::BenchArgs),
}

#[derive(Args, Debug)]
struct ServeArgs {
    /// The address to listen on (IP:PORT; port 0 picks a free one). Any
    /// address but a loopback one needs an access token.
    #[arg(long, default_value_t = errand_server::DEFAULT_BIND)]
    bind: SocketAddr,
    /// The access token clients must send as `Authorization: Bearer TOKEN`.
    /// Prefer the environment variable: flags show in process listings.
    #[arg(long, env = "ERRAND_TOKEN", hide_env_values = true, value_parser = parse_token)]
    token: Option<errand_server::AccessToken>,
    /// The largest request body, and the largest job payload, in bytes.
    #[arg(long, default_value_t = errand_server::DEFAULT_MAX_BODY as u64,
          value_parser = clap::value_parser!(u64).range(1024..=64 * 1024 * 1024))]
    max_body: u64,
    /// After SIGTERM/SIGINT, how long in-flight requests may take to finish.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    drain: Duration,
    /// How long a client may take to send a request's head, and then its
    /// body; a slower client is cut off (408 for a body).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    read_timeout: Duration,
    /// How many connections may be open at once; more clients wait until
    /// one closes.
    #[arg(long, default_value_t = errand_server::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    max_connections: u64,
    /// Equal-jitter retry base for failures remote workers report without
    /// a retry time.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    retry_base: Duration,
    /// Equal-jitter retry cap for those failures.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    retry_max: Duration,
}

#[derive(Args, Debug)]
struct PruneArgs {
    /// Delete jobs that finished longer ago than this (e.g. 7d, 12h).
    #[arg(long, value_parser = parse_duration)]
    older_than: Duration,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct JsonFlag {
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct EnqueueArgs {
    /// Job kind (selects the handler).
    #[arg(long)]
    kind: String,
    /// Queue name.
    #[arg(long, default_value = errand::core::DEFAULT_QUEUE)]
    queue: String,
    /// Payload as JSON text, or `-` to read it from stdin.
    #[arg(long, default_value = "{}")]
    payload: String,
    /// A caller-chosen id (one business event, one job). An id already
    /// stored returns that job and creates nothing, for as long as the job
    /// is stored: ready, running and dead jobs (dead until purged); done and
    /// cancelled ones until pruned (`errand prune --older-than`, or a
    /// service worker's retention: 7 days). After that the id creates a new
    /// job.
    #[arg(long)]
    id: Option<String>,
    /// Run after this delay (e.g. 250ms, 5s, 15m).
    #[arg(long, conflicts_with = "run_at", value_parser = parse_duration)]
    delay: Option<Duration>,
    /// Run at this RFC 3339 time.
    #[arg(long)]
    run_at: Option<String>,
    /// Attempt budget.
    #[arg(long, default_value_t = errand::core::DEFAULT_MAX_ATTEMPTS)]
    max_attempts: u32,
    /// Lost-lease budget: after this many expired leases (its worker keeps
    /// dying) the job is quarantined as dead with class lost_lease.
    #[arg(long, default_value_t = errand::core::DEFAULT_MAX_LEASE_EXPIRIES)]
    max_lease_expiries: u32,
    /// Elapsed-time budget: no retry is scheduled later than this after
    /// enqueueing (e.g. 1h).
    #[arg(long, value_parser = parse_duration)]
    give_up_after: Option<Duration>,
    /// Higher runs first.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    priority: i16,
    /// Concurrency key (a tenant, an account): jobs of the queue sharing it
    /// share --key-limit, so one key's backlog cannot take every worker.
    #[arg(long)]
    key: Option<String>,
    /// With --key: at most this many of the key's jobs run at once.
    #[arg(long, requires = "key", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=errand::core::MAX_KEY_LIMIT as i64))]
    key_limit: u32,
    /// With --key: the key's jobs run one at a time, in enqueue order.
    #[arg(long, requires = "key", conflicts_with = "key_limit")]
    ordered: bool,
    /// The business deadline: an RFC 3339 time, or a duration from now
    /// (30m). Only lateness is measured against it; it does not change when
    /// or how the job runs.
    #[arg(long)]
    deadline: Option<String>,
    /// The W3C trace context to carry (00-<trace id>-<parent id>-<flags>);
    /// default: $TRACEPARENT when it holds a valid one.
    #[arg(long)]
    traceparent: Option<String>,
    /// A job that must succeed first (repeatable). The new job waits
    /// `blocked` until every one is done.
    #[arg(long = "depends-on", value_name = "ID")]
    depends_on: Vec<String>,
    /// With --depends-on, when a dependency ends dead or cancelled: `wait`
    /// (stay blocked while it is a dead letter, resume if it is replayed
    /// and succeeds, be cancelled if it is cancelled), `cancel` (be
    /// cancelled at once, and so be the jobs that wait for this one) or
    /// `run` (run anyway).
    #[arg(long, requires = "depends_on", value_parser = ["wait", "cancel", "run"])]
    on_dependency_failure: Option<String>,
    /// Make the job a step of this workflow (`errand workflow show ID`).
    #[arg(long, value_name = "ID")]
    workflow: Option<String>,
    /// A tag to find the job by (`errand jobs --tag T`; repeatable, at most
    /// 20): letters, digits and -_.:/=@+.
    #[arg(long = "tag", value_name = "T")]
    tags: Vec<String>,
    /// Add the job to this open batch (`errand batch seal ID` ends it and
    /// enqueues its callbacks).
    #[arg(long, value_name = "ID")]
    batch: Option<String>,
    /// Metadata shown with the job, as KEY=VALUE (repeatable, at most 32).
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    meta: Vec<String>,
    /// Unique for this period (e.g. 10m): while a job with the same key
    /// (--unique-key) created within it is stored, this enqueue returns it
    /// and creates nothing.
    #[arg(long, value_parser = parse_duration, conflicts_with_all = ["unique_while", "debounce"])]
    unique_for: Option<Duration>,
    /// Unique while a job with the same key is in one of these states
    /// (comma-separated, e.g. ready,running): this enqueue then returns it
    /// and creates nothing.
    #[arg(
        long,
        value_name = "STATES",
        value_delimiter = ',',
        conflicts_with = "debounce"
    )]
    unique_while: Vec<String>,
    /// Debounce (e.g. 30s): while a job with the same key waits to start,
    /// push it to run this long from now with this payload instead of
    /// adding a second; otherwise enqueue it, due after the delay.
    #[arg(long, value_parser = parse_duration, conflicts_with_all = ["delay", "run_at"])]
    debounce: Option<Duration>,
    /// The key --unique-for, --unique-while and --debounce judge by
    /// (default: the kind and a hash of the canonical payload).
    #[arg(long)]
    unique_key: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct JobsArgs {
    /// Only this state: blocked, ready, running, done, dead, cancelled.
    #[arg(long)]
    state: Option<String>,
    /// Only this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Only this kind.
    #[arg(long)]
    kind: Option<String>,
    /// Only jobs carrying this tag.
    #[arg(long)]
    tag: Option<String>,
    /// Only the steps of this workflow.
    #[arg(long)]
    workflow: Option<String>,
    /// At most this many (1–10000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    limit: u32,
    /// Start after this job id (the last one of the previous page): pages
    /// are in creation order (jobs created together: by id, or on SQLite
    /// without --tag or --workflow in the order stored).
    #[arg(long)]
    after: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ShowArgs {
    /// The job id.
    id: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ReplayArgs {
    #[command(flatten)]
    select: select::Selection,
    /// Filter: replay cancelled jobs instead of dead ones.
    #[arg(long)]
    cancelled: bool,
    /// Instead of replaying each job under its own id, enqueue a fresh copy
    /// (same queue, kind, payload, priority, budgets, key, deadline and
    /// trace context) under a new generated id; the original is left as it
    /// is. Each copy is audited (`copy`, naming both jobs) with --by and
    /// --reason.
    #[arg(long)]
    new_key: bool,
    /// Show what would be replayed without changing anything.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    operator: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct CancelArgs {
    /// Job ids (all are cancelled or none).
    #[arg(required = true)]
    ids: Vec<String>,
    #[command(flatten)]
    operator: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct RescheduleArgs {
    /// Job ids, each waiting (ready); all are moved or none.
    #[arg(required = true)]
    ids: Vec<String>,
    /// Due at this time (RFC 3339).
    #[arg(long, group = "when")]
    at: Option<String>,
    /// Due after this delay from now (e.g. 30s, 15m, 2h).
    #[arg(long = "in", group = "when", value_parser = parse_duration)]
    after: Option<Duration>,
    /// Due now.
    #[arg(long, group = "when")]
    now: bool,
    /// The new priority (higher is claimed first).
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i16>,
    #[command(flatten)]
    operator: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// Who acts and why, for the audit log.
#[derive(Args, Debug)]
pub(crate) struct OperatorArgs {
    /// Who is acting (recorded in the audit log); default: the OS user.
    #[arg(long)]
    pub(crate) by: Option<String>,
    /// Why (recorded in the audit log).
    #[arg(long)]
    pub(crate) reason: Option<String>,
}

#[derive(Args, Debug)]
struct WorkArgs {
    /// Claim only from this queue (repeatable); default: every queue.
    #[arg(long)]
    queue: Vec<String>,
    /// Handle at most one job, then exit.
    #[arg(long)]
    once: bool,
    /// Jobs run at once in service mode.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    concurrency: u32,
    /// Lease length; renewed every third of it while the command runs.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    lease: Duration,
    /// Equal-jitter retry base.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    retry_base: Duration,
    /// Equal-jitter retry cap.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    retry_max: Duration,
    /// How often an idle service-mode worker looks for due jobs without a
    /// wake-up signal.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    poll: Duration,
    /// Service mode: after SIGTERM, how long running commands may finish
    /// before they are stopped and their jobs released.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    drain: Duration,
    /// How long a command being stopped has between SIGTERM (to its process
    /// group) and SIGKILL: when its job is cancelled or its lease lost, and
    /// for processes it left running when it exited.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    stop_grace: Duration,
    /// Stop an attempt still running after this long (SIGTERM to its
    /// process group, SIGKILL after --stop-grace) and fail it with class
    /// `timeout`; by default an attempt runs as long as its lease is renewed.
    #[arg(long, value_parser = parse_duration)]
    timeout: Option<Duration>,
    /// Service mode: start at most this many jobs per second per --queue,
    /// across every worker process sharing the database.
    #[arg(long)]
    rate: Option<f64>,
    /// With --rate: how many may start at once after a quiet spell.
    #[arg(long, default_value_t = 1)]
    burst: u32,
    /// Service mode: start at most this many jobs per second per
    /// concurrency key of each --queue, across every worker process.
    #[arg(long)]
    key_rate: Option<f64>,
    /// With --key-rate: how many of a key's jobs may start at once after a
    /// quiet spell.
    #[arg(long, default_value_t = 1)]
    key_burst: u32,
    /// The most bytes a job's $ERRAND_INPUTS file (its dependencies'
    /// outputs) may hold; a fan-in past it fails for good, saying so.
    #[arg(long, value_name = "BYTES", default_value_t = errand::DEFAULT_MAX_INPUTS,
          value_parser = clap::value_parser!(u64).range(2..))]
    max_inputs: u64,
    /// The command run for each job (with `sh -c`).
    #[arg(long)]
    exec: String,
    /// Print JSON (one object per job handled).
    #[arg(long)]
    json: bool,
}

/// What `errand work --help` says after the flags: the contract a command
/// is written against.
const WORK_HELP: &str = "\
The command (--exec) runs under `sh -c` for each job, leading a process group of its own:

  stdin        the job's payload (JSON)
  environment  ERRAND_JOB_ID, ERRAND_ATTEMPT (1 for the first attempt), ERRAND_KIND,
               ERRAND_QUEUE, ERRAND_DEADLINE (when the job has one), TRACEPARENT (when it
               carries one), ERRAND_WORKER_PID, and three file names:
    ERRAND_OUTPUT   where it may write its result, one JSON value of at most 64 KiB,
                    recorded on success and read by the jobs that depend on it
    ERRAND_OUTCOME  where it may write one JSON object that decides the attempt whatever
                    the exit status: {\"snooze\": \"30s\"}, {\"retry_in\": \"5m\"},
                    {\"cancel\": \"why\"}, {\"error\": \"...\", \"class\": \"permanent\"}
    ERRAND_INPUTS   (a job with dependencies) one JSON object of their outputs by id,
                    at most --max-inputs bytes
               The files are in a directory of this worker's own in $TMPDIR, removed
               after each attempt; what a killed worker left is removed by the next.
  stdout       goes to errand's stderr (errand's stdout keeps its reports)
  stderr       its last 2,000 bytes become the recorded error of a failure

Exit status of the command:
  0            success
  65           permanent failure: the job is dead at once
  75, any other non-zero status, or a signal
               retryable failure: tried again (--retry-base, --retry-max) while
               attempts remain, then dead
  126, 127     with the shell saying it cannot find or execute the command itself (its
               first word): a fault of this worker, not of the job. The attempt is
               given back without spending it (the job is due again 30 s later) and
               errand work stops with exit 2, naming the command and the status.
               From deeper inside (a program the command runs) they are a retryable
               failure like any other status.

docs/cli.md (\"work --exec\") says more.";

fn parse_duration(s: &str) -> Result<Duration, String> {
    errand::parse_duration(s).map_err(|e| match e {
        Error::Invalid(m) => m,
        other => other.to_string(),
    })
}

fn parse_token(s: &str) -> Result<errand_server::AccessToken, String> {
    errand_server::AccessToken::new(s).map_err(|e| e.to_string())
}

/// `$TRACEPARENT` (set by tracing-aware tools that run errand), when it is
/// a valid W3C trace context. An invalid one is not the operator's input:
/// it is ignored with a warning rather than refusing the job.
fn traceparent_from_env() -> Option<String> {
    let value = std::env::var("TRACEPARENT").ok()?;
    match errand::TraceParent::parse(value.clone()) {
        Ok(_) => Some(value),
        Err(e) => {
            errln!("errand: warning: ignoring $TRACEPARENT ({e}); pass --traceparent to set one");
            None
        }
    }
}

fn operator(by: Option<String>) -> String {
    by.or_else(|| std::env::var("USER").ok())
        .or_else(|| std::env::var("LOGNAME").ok())
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

fn name(what: &str, s: Option<String>) -> Result<Option<Name>, Error> {
    s.map(|s| Name::parse(what, s)).transpose()
}

fn time_arg(flag: &str, s: Option<String>) -> Result<Option<Timestamp>, Error> {
    s.map(|s| Timestamp::parse_rfc3339(&s).map_err(|e| Error::invalid(format!("--{flag}: {e}"))))
        .transpose()
}

fn ids(raw: Vec<String>) -> Result<Vec<JobId>, Error> {
    raw.into_iter().map(JobId::new).collect()
}

/// The exit code of a refused invocation (bad arguments or environment).
pub const EXIT_INVALID: u8 = exit::INVALID;

/// What a program embedding the command adds to it.
#[derive(Clone, Debug, Default)]
pub struct Hooks {
    /// The clock SQLite stores decide leases and due times with (default:
    /// the host's).
    pub clock: Option<Arc<dyn errand::Clock>>,
}

/// The `errand` command as its binary runs it: refuses the fault harness's
/// variables, which only the harness's own build of the command reads.
pub fn main() -> ExitCode {
    // Arguments first: `--help` and `--version` answer whatever is set.
    let cli = Cli::parse();
    for var in ["ERRAND_FAILPOINTS", "ERRAND_CLOCK_OFFSET_FILE"] {
        if std::env::var_os(var).is_some_and(|v| !v.is_empty()) {
            errln!(
                "errand: {var} is set, but this `errand` has no crash points or test clock; \
                 the fault harness's `errand-crashable` binary has them"
            );
            return ExitCode::from(exit::INVALID);
        }
    }
    run_command_line(cli, Hooks::default())
}

/// Parses the arguments and runs the command with `hooks`.
pub fn main_with(hooks: Hooks) -> ExitCode {
    run_command_line(Cli::parse(), hooks)
}

fn run_command_line(cli: Cli, hooks: Hooks) -> ExitCode {
    let telemetry = telemetry::init();
    let code = run_with_runtime(cli, hooks);
    telemetry.shutdown();
    code
}

fn run_with_runtime(cli: Cli, hooks: Hooks) -> ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("errand: cannot start the async runtime: {e}");
            return ExitCode::from(exit::RUNTIME);
        }
    };
    let result = runtime.block_on(run(cli, hooks));
    let failed = result.is_err();
    let code = match result {
        Ok(code) => code,
        Err(failure) => failure.report(),
    };
    // A reader that closed stdout is not a failure (see output.rs); any
    // other write error is, unless the command failed on its own.
    match output::stdout_failure() {
        Some(e) => {
            errln!("errand: writing the output failed: {e}");
            if failed {
                code
            } else {
                ExitCode::from(exit::RUNTIME)
            }
        }
        None => code,
    }
}

async fn run(cli: Cli, hooks: Hooks) -> Result<ExitCode, Failure> {
    let mut options = errand::ConnectOptions {
        create_and_migrate: false,
        synchronous: cli.synchronous,
        schema: Some(cli.schema.clone()),
        allow_public_schema: cli.allow_public_schema,
        clock: hooks.clock,
    };
    if let Command::Migrate(args) = &cli.command {
        options.create_and_migrate = true;
        let shown = progress::Progress::spinner(args.json, "migrating the schema");
        let connected = errand::connect(&cli.db, &options).await;
        shown.finish();
        connected?;
        let version = match errand::DbTarget::parse(&cli.db)? {
            errand::DbTarget::Sqlite(_) => errand::sqlite::SCHEMA_VERSION,
            errand::DbTarget::Postgres(_) => errand::postgres::SCHEMA_VERSION,
        };
        if args.json {
            output::json(&serde_json::json!({"migrated": true, "schema_version": version}))?;
        } else {
            outln!("schema is at version {version}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    #[cfg(feature = "bench")]
    if let Command::Bench(args) = &cli.command {
        return bench::bench(&cli, args).await;
    }
    // A refused server configuration is reported before the database is
    // opened: the operator's mistake comes first.
    let serve_config = match &cli.command {
        Command::Serve(args) => Some(serve_config(args)?),
        _ => None,
    };
    let named = connect::Named {
        db: &cli.db,
        schema: &cli.schema,
        allow_public_schema: cli.allow_public_schema,
    };
    let store = connect::connect(&named, &options).await?;
    let admin = errand::Admin::new(store.clone());
    match cli.command {
        Command::Migrate(_) => Ok(ExitCode::SUCCESS),
        Command::Enqueue(args) => enqueue(store, *args).await,
        Command::Jobs(args) => jobs(&admin, args).await,
        Command::Show(args) => show(&admin, args).await,
        Command::Replay(args) => replay(&admin, args).await,
        Command::Cancel(args) => cancel(&admin, args).await,
        Command::Reschedule(args) => reschedule(&admin, args).await,
        Command::Workflow(args) => workflow::run(&admin, args).await,
        Command::Batch(args) => workflow::batch(&admin, args).await,
        Command::Work(args) => work(store, args).await,
        Command::Prune(args) => prune(store, args).await,
        Command::Purge(args) => admin::purge(&admin, args).await,
        Command::Stats(args) => stats::run(&admin, args).await,
        Command::Pause(args) => admin::pause(&admin, args).await,
        Command::Resume(args) => admin::resume(&admin, args).await,
        Command::Queues(args) => admin::queues(&admin, args.json).await,
        Command::Audit(args) => admin::audit(&admin, args).await,
        Command::Schedule(args) => schedule::run(store, args).await,
        #[cfg(feature = "bench")]
        Command::Bench(_) => Err(anyhow::anyhow!("errand bench opens its own database").into()),
        Command::Serve(_) => match serve_config {
            Some(config) => serve(store, config).await,
            None => Err(anyhow::anyhow!("the server configuration went missing").into()),
        },
    }
}

async fn enqueue(store: Arc<dyn Store>, a: EnqueueArgs) -> Result<ExitCode, Failure> {
    let text = if a.payload == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .take(errand::core::MAX_PAYLOAD_BYTES as u64 + 1)
            .read_to_string(&mut buf)
            .context("reading the payload from stdin")?;
        buf
    } else {
        a.payload
    };
    let job = errand::JobSpec {
        kind: a.kind,
        queue: Some(a.queue),
        payload: Some(text),
        id: a.id,
        delay: a.delay,
        run_at: a.run_at,
        max_attempts: Some(a.max_attempts),
        max_lease_expiries: Some(a.max_lease_expiries),
        give_up_after: a.give_up_after,
        priority: Some(a.priority),
        key_limit: (a.key.is_some() && !a.ordered).then_some(a.key_limit),
        key: a.key,
        ordered: a.ordered,
        deadline: a.deadline,
        traceparent: a.traceparent.or_else(traceparent_from_env),
        depends_on: a.depends_on,
        on_dependency_failure: a.on_dependency_failure,
        workflow: a.workflow,
        tags: a.tags,
        meta: meta_pairs(&a.meta)?,
        unique_for: a.unique_for,
        unique_while: a.unique_while,
        debounce: a.debounce,
        unique_key: a.unique_key,
        batch: a.batch,
    }
    .build()?;
    let inserted = errand::Client::new(store).enqueue(job).await?;
    if a.json {
        output::json(&output::Enqueued {
            created: inserted.created,
            job: &inserted.job,
        })?;
    } else {
        let verb = if inserted.created {
            "enqueued"
        } else {
            "exists"
        };
        outln!("{verb} {}", output::job_line(&(&inserted.job).into()));
    }
    Ok(ExitCode::SUCCESS)
}

/// `--meta KEY=VALUE` flags as a map; a key given twice is refused.
fn meta_pairs(pairs: &[String]) -> Result<errand::core::Meta, Failure> {
    let mut meta = errand::core::Meta::new();
    for pair in pairs {
        let (key, value) = errand::core::parse_meta_pair(pair)?;
        if meta.insert(key.clone(), value).is_some() {
            return Err(Error::invalid(format!("the metadata key {key:?} is given twice")).into());
        }
    }
    Ok(meta)
}

async fn jobs(admin: &errand::Admin, a: JobsArgs) -> Result<ExitCode, Failure> {
    if let Some(tag) = &a.tag {
        errand::core::check_tag(tag)?;
    }
    let mut filter = JobFilter {
        state: a.state.map(|s| s.parse::<JobState>()).transpose()?,
        queue: name("queue", a.queue)?,
        kind: name("kind", a.kind)?,
        workflow: a.workflow.map(errand::core::WorkflowId::new).transpose()?,
        tag: a.tag,
        limit: Some(a.limit),
        after: a.after.map(JobId::new).transpose()?,
        max_bytes: Some(errand::core::DEFAULT_PAGE_BYTES),
        ..JobFilter::default()
    };
    // Pages bounded by bytes, each printed before the next is read, until
    // --limit jobs are printed.
    let mut listing = output::JobListing::new(a.json);
    let mut left = a.limit;
    while left > 0 && !output::stdout_gone() {
        filter.limit = Some(left);
        let page = admin.list(&filter).await?;
        listing.page(&page)?;
        left = left.saturating_sub(u32::try_from(page.len()).unwrap_or(u32::MAX));
        match filter.next_after(&page) {
            Some(next) => filter.after = Some(next.clone()),
            None => break,
        }
    }
    listing.finish();
    Ok(ExitCode::SUCCESS)
}

async fn show(admin: &errand::Admin, a: ShowArgs) -> Result<ExitCode, Failure> {
    let id = JobId::new(a.id)?;
    let detail = match admin.detail(&id).await {
        Ok(d) => d,
        Err(e @ Error::NotFound(_)) => return Err(admin::not_found(admin, &id, e).await),
        Err(e) => return Err(e.into()),
    };
    if a.json {
        output::json(&detail)?;
    } else {
        output::detail(&detail);
    }
    Ok(ExitCode::SUCCESS)
}

async fn replay(admin: &errand::Admin, a: ReplayArgs) -> Result<ExitCode, Failure> {
    let state = if a.cancelled {
        JobState::Cancelled
    } else {
        JobState::Dead
    };
    let targets = a
        .select
        .resolve(admin, "replay", state, &[("--cancelled", a.cancelled)])
        .await?;
    let replayable = |j: &errand::JobBrief| ReplayRequest::accepts(j.state);
    if a.dry_run {
        if a.json {
            output::json(&output::JobsDone {
                dry_run: true,
                jobs: &targets,
            })?;
        } else if targets.is_empty() {
            outln!("nothing matches; nothing would be replayed");
        } else {
            for j in &targets {
                let verdict = match (replayable(j), a.new_key) {
                    (true, false) => "would replay",
                    (true, true) => "would copy",
                    (false, _) => "would refuse",
                };
                outln!("{verdict} {}", output::job_line(j));
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    if targets.is_empty() {
        if a.json {
            output::json(&output::JobsDone {
                dry_run: false,
                jobs: &[],
            })?;
        } else {
            outln!("nothing matches; nothing replayed");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if a.new_key {
        let req = CopyRequest {
            ids: targets.into_iter().map(|j| j.id).collect(),
            operator: operator(a.operator.by),
            reason: a.operator.reason,
        };
        return copy_jobs(admin, &req, a.json).await;
    }
    let req = ReplayRequest {
        ids: targets.into_iter().map(|j| j.id).collect(),
        operator: operator(a.operator.by),
        reason: a.operator.reason,
    };
    let shown = progress::Progress::spinner(a.json, format!("replaying {} jobs", req.ids.len()));
    let replayed = admin.replay(&req).await;
    shown.finish();
    let replayed = errand::briefs(&replayed?);
    if a.json {
        output::json(&output::JobsDone {
            dry_run: false,
            jobs: &replayed,
        })?;
    } else {
        for j in &replayed {
            outln!(
                "replayed {} (replays={}) by {}",
                j.id,
                j.replays,
                req.operator
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `replay --new-key`: one new job per dead or cancelled original, inserted
/// together with their audit entries (all or none); the originals are not
/// touched.
async fn copy_jobs(
    admin: &errand::Admin,
    req: &CopyRequest,
    as_json: bool,
) -> Result<ExitCode, Failure> {
    let shown = progress::Progress::spinner(as_json, format!("copying {} jobs", req.ids.len()));
    let copied = admin.copy(req).await;
    shown.finish();
    let copied = copied?;
    if as_json {
        let copies: Vec<output::Copy> = copied
            .iter()
            .map(|c| output::Copy {
                from: c.from.clone(),
                job: (&c.job).into(),
            })
            .collect();
        output::json(&output::Copies {
            dry_run: false,
            copies: &copies,
        })?;
    } else {
        for c in &copied {
            outln!(
                "copied job {} to new job {} (queue={} kind={}) by {}",
                c.from,
                c.job.id,
                c.job.queue,
                c.job.kind,
                req.operator
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn cancel(admin: &errand::Admin, a: CancelArgs) -> Result<ExitCode, Failure> {
    let req = CancelRequest {
        ids: ids(a.ids)?,
        operator: operator(a.operator.by),
        reason: a.operator.reason,
    };
    let cancelled = admin.cancel(&req).await?;
    if a.json {
        output::json(&cancelled)?;
    } else {
        for j in &cancelled {
            outln!("cancelled {} by {}", j.id, req.operator);
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn reschedule(admin: &errand::Admin, a: RescheduleArgs) -> Result<ExitCode, Failure> {
    let run = match (time_arg("at", a.at)?, a.after, a.now) {
        (Some(t), _, _) => Some(Schedule::At(t)),
        (None, Some(d), _) => Some(Schedule::After(d)),
        (None, None, true) => Some(Schedule::Now),
        (None, None, false) => None,
    };
    let req = errand::RescheduleRequest {
        ids: ids(a.ids)?,
        run,
        priority: a.priority,
        operator: operator(a.operator.by),
        reason: a.operator.reason,
    };
    let moved = admin.reschedule(&req).await?;
    if a.json {
        output::json(&moved)?;
    } else {
        for j in &moved {
            outln!(
                "rescheduled {} (due {}, priority {}) by {}",
                j.id,
                j.available_at,
                j.priority,
                req.operator
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

async fn prune(store: Arc<dyn Store>, a: PruneArgs) -> Result<ExitCode, Failure> {
    let mut pruner = errand::Pruner::new(store);
    pruner.keep = a.older_than;
    let shown = progress::Progress::counter(a.json, "pruning finished jobs: deleted");
    let deleted = pruner.run_once_with(|n| shown.set(n)).await?;
    shown.finish();
    if a.json {
        output::json(&serde_json::json!({ "deleted": deleted }))?;
    } else {
        outln!(
            "deleted {deleted} finished jobs older than {}",
            humantime::format_duration(a.older_than)
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn work(store: Arc<dyn Store>, a: WorkArgs) -> Result<ExitCode, Failure> {
    let queues: Vec<Name> = a
        .queue
        .into_iter()
        .map(|q| Name::parse("queue", q))
        .collect::<Result<_, _>>()?;
    let retry = RetryPolicy::EqualJitter {
        base: a.retry_base,
        max: a.retry_max,
    };
    let handler = Arc::new(
        ExecHandler::new(a.exec)
            .stop_grace(a.stop_grace)
            .timeout(a.timeout)
            .max_inputs(a.max_inputs),
    );
    // Made now: what killed workers left is removed even if no job comes.
    handler.files_dir()?;
    if a.once {
        let config = WorkerConfig {
            queues,
            lease: a.lease,
            retry,
            ..WorkerConfig::default()
        };
        let report = Worker::new(store, config)
            .run_once_and_report(handler.clone())
            .await?;
        output::report(&report, a.json)?;
        return cannot_run(&handler);
    }
    let rate = match a.rate {
        Some(per_second) => {
            if queues.is_empty() {
                return Err(Error::invalid("--rate limits named queues: add --queue NAME").into());
            }
            let limit = errand::RateLimit {
                per_second,
                burst: a.burst,
            };
            limit.validate()?;
            Some(limit)
        }
        None => None,
    };
    let key_rate = match a.key_rate {
        Some(per_second) => {
            if queues.is_empty() {
                return Err(Error::invalid(
                    "--key-rate limits the keys of named queues: add --queue NAME",
                )
                .into());
            }
            let limit = errand::RateLimit {
                per_second,
                burst: a.key_burst,
            };
            limit.validate()?;
            Some(limit)
        }
        None => None,
    };
    let args = serve_loop::ServiceArgs {
        rate,
        key_rate,
        queues,
        concurrency: usize::try_from(a.concurrency).unwrap_or(1),
        lease: a.lease,
        poll: a.poll,
        drain: a.drain,
        retry,
        json: a.json,
    };
    serve_loop::run(store, handler.clone(), args).await?;
    cannot_run(&handler)
}

/// Exit 2, saying why, when the command could not be run; success
/// otherwise.
fn cannot_run(handler: &ExecHandler) -> Result<ExitCode, Failure> {
    match handler.cannot_run_reason() {
        Some(why) => Err(Failure::Coded(
            exit::INVALID,
            format!("{why}; this worker stopped: fix --exec and start it again"),
        )),
        None => Ok(ExitCode::SUCCESS),
    }
}

fn serve_config(a: &ServeArgs) -> Result<errand_server::ServerConfig, Failure> {
    let max_body = usize::try_from(a.max_body).unwrap_or(usize::MAX);
    let config = errand_server::ServerConfig {
        bind: a.bind,
        token: a.token.clone(),
        max_body,
        max_payload: max_body,
        drain: a.drain,
        read_timeout: a.read_timeout,
        max_connections: usize::try_from(a.max_connections).unwrap_or(usize::MAX),
        retry: RetryPolicy::EqualJitter {
            base: a.retry_base,
            max: a.retry_max,
        },
        ..errand_server::ServerConfig::default()
    };
    config.check().map_err(|e| Failure::Usage(e.to_string()))?;
    if let Some(token) = &config.token
        && token.len() < 16
    {
        errln!(
            "errand: warning: the access token is only {} characters long; use a long random one (openssl rand -hex 32)",
            token.len()
        );
    }
    Ok(config)
}

async fn serve(
    store: Arc<dyn Store>,
    config: errand_server::ServerConfig,
) -> Result<ExitCode, Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    // Installed before the address is announced: a signal sent as soon as
    // the line is read is a graceful stop, not a kill.
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let token = config.token.is_some();
    let server = errand_server::Server::bind(store, config)
        .await
        .map_err(|e| {
            if e.is_config() {
                Failure::Usage(e.to_string())
            } else {
                Failure::Other(e.into())
            }
        })?;
    for line in serve_banner(server.local_addr(), token) {
        outln!("{line}");
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = server.run(async {
        let _ = stopped.await;
    });
    tokio::pin!(run);
    let name = tokio::select! {
        result = &mut run => {
            result.context("the server failed")?;
            return Ok(ExitCode::SUCCESS);
        }
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    let _ = stop.send(());
    errln!("errand: {name} received; finishing in-flight requests (signal again to exit at once)");
    tokio::select! {
        result = &mut run => {
            result.context("the server failed")?;
            Ok(ExitCode::SUCCESS)
        }
        _ = term.recv() => second_signal(),
        _ = int.recv() => second_signal(),
    }
}

/// What `errand serve` prints once it listens: the address bound (first,
/// alone on its line, for scripts), then where a browser finds the
/// dashboard and a client the API, and what they need. An address that
/// means every interface is shown as this machine's loopback one, which a
/// browser here can open.
fn serve_banner(addr: SocketAddr, token: bool) -> [String; 3] {
    use std::net::{Ipv4Addr, Ipv6Addr};
    let mut browse = addr;
    if addr.ip().is_unspecified() {
        browse.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    let (dashboard, api) = if token {
        (
            " (sign in with the access token given with --token or ERRAND_TOKEN)",
            "; send the access token as `Authorization: Bearer TOKEN`",
        )
    } else {
        ("", "")
    };
    [
        format!("listening on http://{addr}"),
        format!("dashboard: http://{browse}/dashboard/{dashboard}"),
        format!("API: http://{browse}/v1/ (described at /v1/openapi.json{api})"),
    ]
}

fn second_signal() -> Result<ExitCode, Failure> {
    errln!("errand: second signal, exiting now; requests still in flight are cut off");
    Ok(ExitCode::from(130))
}
