//! The command line as clap reads it: every command, its flags and their
//! help.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

#[cfg(feature = "bench")]
use crate::bench;
use crate::flags::{OperatorArgs, parse_duration};
use crate::{admin, keys, queue, schedule, select, stats, transfer, workflow};

#[derive(Parser, Debug)]
#[command(
    name = "errand",
    version,
    about = "Durable background jobs: enqueue, inspect, replay and run them"
)]
pub(crate) struct Cli {
    /// The database: a file path, sqlite://PATH or postgres://USER@HOST:PORT/DB.
    #[arg(long, global = true, env = "ERRAND_DB", default_value = "./errand.db")]
    pub(crate) db: String,

    /// PostgreSQL: the schema holding Errand's tables (not a system schema,
    /// and not `public` without --allow-public-schema).
    #[arg(long, global = true, env = "ERRAND_SCHEMA", default_value = "errand")]
    pub(crate) schema: String,

    /// PostgreSQL: allow --schema public, the database's shared default
    /// schema (refused otherwise, so Errand's tables never land there by a
    /// slip).
    #[arg(long, global = true)]
    pub(crate) allow_public_schema: bool,

    /// SQLite durability: `full` (default; survives power loss) or `normal`
    /// (survives a process crash; the last commits may be lost on power loss).
    #[arg(
        long,
        global = true,
        env = "ERRAND_SQLITE_SYNCHRONOUS",
        default_value = "full"
    )]
    pub(crate) synchronous: errand::Synchronous,

    /// Encryption keys, one `ID:BASE64` a line, the first one encrypting
    /// (read instead of ERRAND_ENCRYPTION_KEYS, `k1:BASE64,k2:BASE64`):
    /// payloads, outputs and signal payloads are stored encrypted and read
    /// back decrypted (docs/encryption.md).
    #[arg(long, global = true, value_name = "PATH")]
    pub(crate) keys_file: Option<std::path::PathBuf>,

    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Command {
    /// Create or upgrade the schema; safe to run repeatedly.
    Migrate(JsonFlag),
    /// Insert a job (an existing --id returns that job and creates nothing).
    Enqueue(Box<EnqueueArgs>),
    /// List jobs, oldest first.
    Jobs(JobsArgs),
    /// Show one job with its attempt history and audit entries.
    Show(ShowArgs),
    /// Wait for jobs to end (done, dead or cancelled); the exit code says
    /// how they ended.
    Wait(WaitArgs),
    /// Send a signal to a job that waits for it (`errand enqueue --await`,
    /// or a handler that suspended itself).
    Signal(SignalArgs),
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
    /// List the queues, paused or active (who paused them, when and why),
    /// with their concurrency caps.
    Queues(JsonFlag),
    /// A queue's settings: `queue limit QUEUE --concurrency N` caps how
    /// many of its jobs run at once across every worker (`--clear` lifts
    /// it).
    Queue(queue::QueueArgs),
    /// The audit log of operator actions, newest first.
    Audit(admin::AuditArgs),
    /// Encryption keys: `keys generate` prints a fresh one, `keys rotate
    /// --to KEY` re-encrypts everything stored under it.
    Keys(keys::KeysArgs),
    /// Move this SQLite database to PostgreSQL: `transfer --from PATH.db
    /// --to postgres://… [--schema S] [--dry-run]` copies every table while
    /// no worker runs (resumable after a kill), then compares both sides.
    Transfer(transfer::TransferArgs),
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
pub(crate) struct ServeArgs {
    /// The address to listen on (IP:PORT; port 0 picks a free one). Any
    /// address but a loopback one needs an access token.
    #[arg(long, default_value_t = errand_server::DEFAULT_BIND)]
    pub(crate) bind: SocketAddr,
    /// The access token clients must send as `Authorization: Bearer TOKEN`.
    /// Prefer the environment variable: flags show in process listings.
    #[arg(long, env = "ERRAND_TOKEN", hide_env_values = true, value_parser = parse_token)]
    pub(crate) token: Option<errand_server::AccessToken>,
    /// The largest request body, and the largest job payload, in bytes.
    #[arg(long, default_value_t = errand_server::DEFAULT_MAX_BODY as u64,
          value_parser = clap::value_parser!(u64).range(1024..=64 * 1024 * 1024))]
    pub(crate) max_body: u64,
    /// After SIGTERM/SIGINT, how long in-flight requests may take to finish.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub(crate) drain: Duration,
    /// How long a client may take to send a request's head, and then its
    /// body; a slower client is cut off (408 for a body).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub(crate) read_timeout: Duration,
    /// How many connections may be open at once; more clients wait until
    /// one closes.
    #[arg(long, default_value_t = errand_server::DEFAULT_MAX_CONNECTIONS as u64,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) max_connections: u64,
    /// How many `GET /v1/jobs/{id}?wait=` requests may wait for their job
    /// at once, fewer than --max-connections (default 256, or one fewer
    /// than the connections when they are fewer); one more is told to
    /// retry (503). 0: none may wait.
    #[arg(long, value_parser = clap::value_parser!(u64).range(0..=1_000_000))]
    pub(crate) max_job_waits: Option<u64>,
    /// Equal-jitter retry base for failures remote workers report without
    /// a retry time.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(crate) retry_base: Duration,
    /// Equal-jitter retry cap for those failures.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub(crate) retry_max: Duration,
}

#[derive(Args, Debug)]
pub(crate) struct PruneArgs {
    /// Delete jobs that finished longer ago than this (e.g. 7d, 12h).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) older_than: Duration,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct JsonFlag {
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct EnqueueArgs {
    /// Job kind (selects the handler).
    #[arg(long)]
    pub(crate) kind: String,
    /// Queue name.
    #[arg(long, default_value = errand::core::DEFAULT_QUEUE)]
    pub(crate) queue: String,
    /// Payload as JSON text, or `-` to read it from stdin.
    #[arg(long, default_value = "{}")]
    pub(crate) payload: String,
    /// A caller-chosen id (one business event, one job). An id already
    /// stored returns that job and creates nothing, for as long as the job
    /// is stored: ready, running and dead jobs (dead until purged); done and
    /// cancelled ones until pruned (`errand prune --older-than`, or a
    /// service worker's retention: 7 days). After that the id creates a new
    /// job.
    #[arg(long)]
    pub(crate) id: Option<String>,
    /// Run after this delay (e.g. 250ms, 5s, 15m).
    #[arg(long, conflicts_with = "run_at", value_parser = parse_duration)]
    pub(crate) delay: Option<Duration>,
    /// Run at this RFC 3339 time.
    #[arg(long)]
    pub(crate) run_at: Option<String>,
    /// Attempt budget.
    #[arg(long, default_value_t = errand::core::DEFAULT_MAX_ATTEMPTS)]
    pub(crate) max_attempts: u32,
    /// Lost-lease budget: after this many expired leases (its worker keeps
    /// dying) the job is quarantined as dead with class lost_lease.
    #[arg(long, default_value_t = errand::core::DEFAULT_MAX_LEASE_EXPIRIES)]
    pub(crate) max_lease_expiries: u32,
    /// Elapsed-time budget: no retry is scheduled later than this after
    /// enqueueing (e.g. 1h).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) give_up_after: Option<Duration>,
    /// Higher runs first.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true)]
    pub(crate) priority: i16,
    /// Concurrency key (a tenant, an account): jobs of the queue sharing it
    /// share --key-limit, so one key's backlog cannot take every worker.
    #[arg(long)]
    pub(crate) key: Option<String>,
    /// With --key: at most this many of the key's jobs run at once.
    #[arg(long, requires = "key", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=errand::core::MAX_KEY_LIMIT as i64))]
    pub(crate) key_limit: u32,
    /// With --key: the key's jobs run one at a time, in enqueue order.
    #[arg(long, requires = "key", conflicts_with = "key_limit")]
    pub(crate) ordered: bool,
    /// The business deadline: an RFC 3339 time, or a duration from now
    /// (30m). Only lateness is measured against it; it does not change when
    /// or how the job runs.
    #[arg(long)]
    pub(crate) deadline: Option<String>,
    /// The W3C trace context to carry (00-<trace id>-<parent id>-<flags>);
    /// default: $TRACEPARENT when it holds a valid one.
    #[arg(long)]
    pub(crate) traceparent: Option<String>,
    /// A job that must succeed first (repeatable). The new job waits
    /// `blocked` until every one is done.
    #[arg(long = "depends-on", value_name = "ID")]
    pub(crate) depends_on: Vec<String>,
    /// With --depends-on, when a dependency ends dead or cancelled: `wait`
    /// (stay blocked while it is a dead letter, resume if it is replayed
    /// and succeeds, be cancelled if it is cancelled), `cancel` (be
    /// cancelled at once, and so be the jobs that wait for this one) or
    /// `run` (run anyway).
    #[arg(long, requires = "depends_on", value_parser = ["wait", "cancel", "run"])]
    pub(crate) on_dependency_failure: Option<String>,
    /// Make the job a step of this workflow (`errand workflow show ID`).
    #[arg(long, value_name = "ID")]
    pub(crate) workflow: Option<String>,
    /// A tag to find the job by (`errand jobs --tag T`; repeatable, at most
    /// 20): letters, digits and -_.:/=@+.
    #[arg(long = "tag", value_name = "T")]
    pub(crate) tags: Vec<String>,
    /// Add the job to this open batch (`errand batch seal ID` ends it and
    /// enqueues its callbacks).
    #[arg(long, value_name = "ID")]
    pub(crate) batch: Option<String>,
    /// Metadata shown with the job, as KEY=VALUE (repeatable, at most 32).
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub(crate) meta: Vec<String>,
    /// Unique for this period (e.g. 10m): while a job with the same key
    /// (--unique-key) created within it is stored, this enqueue returns it
    /// and creates nothing.
    #[arg(long, value_parser = parse_duration, conflicts_with_all = ["unique_while", "debounce"])]
    pub(crate) unique_for: Option<Duration>,
    /// Unique while a job with the same key is in one of these states
    /// (comma-separated, e.g. ready,running): this enqueue then returns it
    /// and creates nothing.
    #[arg(
        long,
        value_name = "STATES",
        value_delimiter = ',',
        conflicts_with = "debounce"
    )]
    pub(crate) unique_while: Vec<String>,
    /// Debounce (e.g. 30s): while a job with the same key waits to start,
    /// push it to run this long from now with this payload instead of
    /// adding a second; otherwise enqueue it, due after the delay.
    #[arg(long, value_parser = parse_duration, conflicts_with_all = ["delay", "run_at"])]
    pub(crate) debounce: Option<Duration>,
    /// The key --unique-for, --unique-while and --debounce judge by
    /// (default: the kind and a hash of the canonical payload).
    #[arg(long)]
    pub(crate) unique_key: Option<String>,
    /// Wait for this signal before running: the job is stored `waiting`,
    /// never claimed, until `errand signal ID SIGNAL` (or the API, or
    /// `signal_in` in the application's transaction) delivers it.
    #[arg(long = "await", value_name = "SIGNAL", conflicts_with = "depends_on")]
    pub(crate) await_signal: Option<String>,
    /// With --await: wait at most this long (e.g. 30m), then follow
    /// --on-await-timeout.
    #[arg(long, requires = "await_signal", value_parser = parse_duration)]
    pub(crate) await_timeout: Option<Duration>,
    /// With --await, when the wait times out: `fail` (dead, class
    /// signal_timeout), `run` (run without a signal) or `cancel`.
    #[arg(long, requires = "await_signal", value_parser = ["fail", "run", "cancel"])]
    pub(crate) on_await_timeout: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct JobsArgs {
    /// Only this state: blocked, waiting, ready, running, done, dead,
    /// cancelled.
    #[arg(long)]
    pub(crate) state: Option<String>,
    /// Only this queue.
    #[arg(long)]
    pub(crate) queue: Option<String>,
    /// Only this kind.
    #[arg(long)]
    pub(crate) kind: Option<String>,
    /// Only jobs carrying this tag.
    #[arg(long)]
    pub(crate) tag: Option<String>,
    /// Only the steps of this workflow.
    #[arg(long)]
    pub(crate) workflow: Option<String>,
    /// At most this many (1–10000).
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub(crate) limit: u32,
    /// Start after this job id (the last one of the previous page): pages
    /// are in creation order (jobs created together: by id, or on SQLite
    /// without --tag or --workflow in the order stored).
    #[arg(long)]
    pub(crate) after: Option<String>,
    /// Only jobs carrying this metadata entry, exactly (repeat for more:
    /// all must hold).
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub(crate) meta: Vec<String>,
    /// Only jobs whose payload holds VALUE at PATH: `payload.customer=42`,
    /// `payload.items[0].sku="A-1"`, `payload["odd name"]=true`. VALUE is
    /// JSON, or else the text as a string (repeat for more: all must hold).
    #[arg(long = "where", value_name = "payload.PATH=VALUE")]
    pub(crate) terms: Vec<String>,
    /// With --meta or --where: read at most this many jobs (default
    /// 100000), then say where the search stopped.
    #[arg(long)]
    pub(crate) scan: Option<u32>,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ShowArgs {
    /// The job id.
    pub(crate) id: String,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct WaitArgs {
    /// The job ids (each waited for in turn, within one --timeout).
    #[arg(required = true)]
    pub(crate) ids: Vec<String>,
    /// Give up after this long (exit 9); without it, wait as long as it
    /// takes.
    #[arg(long, value_parser = parse_duration)]
    pub(crate) timeout: Option<std::time::Duration>,
    /// Print the jobs as JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct SignalArgs {
    /// The job.
    pub(crate) id: String,
    /// The signal's name (what the job waits for).
    pub(crate) name: String,
    /// JSON the job's next attempt reads (at most 64 KiB).
    #[arg(long)]
    pub(crate) payload: Option<String>,
    /// When the job is not waiting for this signal now, keep it for its
    /// next wait of that name instead of refusing it.
    #[arg(long)]
    pub(crate) buffer: bool,
    #[command(flatten)]
    pub(crate) operator: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    #[command(flatten)]
    pub(crate) select: select::Selection,
    /// Filter: replay cancelled jobs instead of dead ones.
    #[arg(long)]
    pub(crate) cancelled: bool,
    /// Instead of replaying each job under its own id, enqueue a fresh copy
    /// (same queue, kind, payload, priority, budgets, key, deadline and
    /// trace context) under a new generated id; the original is left as it
    /// is. Each copy is audited (`copy`, naming both jobs) with --by and
    /// --reason.
    #[arg(long)]
    pub(crate) new_key: bool,
    /// Show what would be replayed without changing anything.
    #[arg(long)]
    pub(crate) dry_run: bool,
    #[command(flatten)]
    pub(crate) operator: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct CancelArgs {
    /// Job ids (all are cancelled or none).
    #[arg(required = true)]
    pub(crate) ids: Vec<String>,
    #[command(flatten)]
    pub(crate) operator: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct RescheduleArgs {
    /// Job ids, each waiting (ready); all are moved or none.
    #[arg(required = true)]
    pub(crate) ids: Vec<String>,
    /// Due at this time (RFC 3339).
    #[arg(long, group = "when")]
    pub(crate) at: Option<String>,
    /// Due after this delay from now (e.g. 30s, 15m, 2h).
    #[arg(long = "in", group = "when", value_parser = parse_duration)]
    pub(crate) after: Option<Duration>,
    /// Due now.
    #[arg(long, group = "when")]
    pub(crate) now: bool,
    /// The new priority (higher is claimed first).
    #[arg(long, allow_negative_numbers = true)]
    pub(crate) priority: Option<i16>,
    #[command(flatten)]
    pub(crate) operator: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    pub(crate) json: bool,
}

#[derive(Args, Debug)]
pub(crate) struct WorkArgs {
    /// Claim only from this queue (repeatable); default: every queue.
    #[arg(long)]
    pub(crate) queue: Vec<String>,
    /// Handle at most one job, then exit.
    #[arg(long)]
    pub(crate) once: bool,
    /// Jobs run at once in service mode.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub(crate) concurrency: u32,
    /// Lease length; renewed every third of it while the command runs.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub(crate) lease: Duration,
    /// Equal-jitter retry base.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(crate) retry_base: Duration,
    /// Equal-jitter retry cap.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub(crate) retry_max: Duration,
    /// How often an idle service-mode worker looks for due jobs without a
    /// wake-up signal.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub(crate) poll: Duration,
    /// Service mode: after SIGTERM, how long running commands may finish
    /// before they are stopped and their jobs released.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub(crate) drain: Duration,
    /// How long a command being stopped has between SIGTERM (to its process
    /// group) and SIGKILL: when its job is cancelled or its lease lost, and
    /// for processes it left running when it exited.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub(crate) stop_grace: Duration,
    /// Stop an attempt still running after this long (SIGTERM to its
    /// process group, SIGKILL after --stop-grace) and fail it with class
    /// `timeout`; by default an attempt runs as long as its lease is renewed.
    #[arg(long, value_parser = parse_duration)]
    pub(crate) timeout: Option<Duration>,
    /// Service mode: start at most this many jobs per second per --queue,
    /// across every worker process sharing the database.
    #[arg(long)]
    pub(crate) rate: Option<f64>,
    /// With --rate: how many may start at once after a quiet spell.
    #[arg(long, default_value_t = 1)]
    pub(crate) burst: u32,
    /// Service mode: start at most this many jobs per second per
    /// concurrency key of each --queue, across every worker process.
    #[arg(long)]
    pub(crate) key_rate: Option<f64>,
    /// With --key-rate: how many of a key's jobs may start at once after a
    /// quiet spell.
    #[arg(long, default_value_t = 1)]
    pub(crate) key_burst: u32,
    /// The most bytes a job's $ERRAND_INPUTS file (its dependencies'
    /// outputs) may hold; a fan-in past it fails for good, saying so.
    #[arg(long, value_name = "BYTES", default_value_t = errand_exec::DEFAULT_MAX_INPUTS,
          value_parser = clap::value_parser!(u64).range(2..))]
    pub(crate) max_inputs: u64,
    /// The command run for each job (with `sh -c`).
    #[arg(long)]
    pub(crate) exec: String,
    /// Print JSON (one object per job handled).
    #[arg(long)]
    pub(crate) json: bool,
}

/// What `errand work --help` says after the flags: the contract a command
/// is written against.
pub(crate) const WORK_HELP: &str = "\
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

pub(crate) fn parse_token(s: &str) -> Result<errand_server::AccessToken, String> {
    errand_server::AccessToken::new(s).map_err(|e| e.to_string())
}
