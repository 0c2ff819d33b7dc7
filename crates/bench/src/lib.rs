//! # errand-bench
//!
//! The measuring tool behind `errand bench`: how fast Errand enqueues and
//! drains jobs, how long one job waits, what a claim costs next to a large
//! table, how many database commits each job takes and how much memory
//! the process needed — on SQLite and on PostgreSQL, through the same
//! public paths an application uses, so the figures describe the product
//! and not a special fast path.
//!
//! ## The database
//!
//! A benchmark writes jobs (kind `bench`, queue `default`) into the
//! database it measures and leaves them there for inspection. It starts
//! from an empty job table and refuses a database that already holds jobs:
//! pass a new SQLite file (created and migrated) or, on PostgreSQL, a
//! scratch schema with `--schema` (created and migrated; drop it
//! afterwards). It never uses the `errand` schema workers use by default.
//!
//! ## Workloads
//!
//! * **`enqueue`** — inserts N jobs in batches of B (1, 100 and 5,000 unless
//!   one is given), each batch one [`errand::JobStore::insert_many`] call (a
//!   batch of one is one [`errand::JobStore::insert`]), from C concurrent
//!   producers (default 1). Timed from the first call to the last reply;
//!   building the jobs is inside the timing, as it is in an application.
//! * **`burn-down`** — inserts N jobs (default 100,000) in batches of
//!   5,000, untimed, then drains them with one [`errand::Runtime`] in this
//!   process (every queue, C slots, default 256; each claim takes as many
//!   jobs as there are free slots) and a no-op handler. Timed from the
//!   runtime's start to the acknowledgment of the last job; jobs/s is also
//!   reported for every 2 s.
//! * **`continuous`** — the runtime drains while a producer keeps about B
//!   jobs (default 1,000) waiting, topping the backlog up with
//!   `insert_many` whenever it falls below B, for a duration (default
//!   10 s). Jobs/s counts the jobs acknowledged within the duration; then
//!   the producer stops and what is left is drained (untimed).
//! * **`latency`** — one job at a time into an idle runtime: the job is
//!   inserted with [`errand::JobStore::insert`], the next one 10 ms after the
//!   previous one was acknowledged. Enqueue-to-start runs from just before
//!   the insert call to the handler's first instruction; enqueue-to-finish
//!   to the moment the runtime reports the acknowledgment committed. With a
//!   rate R, jobs arrive every 1/R s whether or not the previous ones
//!   finished. The top-level `p50_ms`/`p95_ms`/`p99_ms` are enqueue-to-start.
//! * **`retry-heavy`** — like `burn-down`, but every second job fails its
//!   first attempt (a retryable failure) and comes back at once (retry
//!   policy `Fixed(0)`); jobs/s counts jobs done, `attempts` every attempt.
//! * **`claim-cost`** — claim latency: each round inserts 10 due jobs, times
//!   one [`errand::JobStore::claim`] of 10 and acknowledges them with
//!   [`errand::JobStore::complete_many`]. First on the empty table, then after
//!   bulk loading 1,000,000 finished jobs and 1,000,000 jobs scheduled a day
//!   ahead (direct SQL that writes the rows the store would have left; see
//!   the report's `load` note), and on PostgreSQL once more while another
//!   session holds a `REPEATABLE READ` snapshot open for the duration
//!   (default 30 s), which keeps vacuum from removing the rows each round
//!   leaves dead. Its `jobs_per_sec` is jobs claimed per second of claim
//!   time with the rows loaded (10 / the mean claim), and its commits per
//!   job count the rounds' inserts and acknowledgments too.
//!
//! ## Commits per job
//!
//! The database transactions committed during the measured phase, divided
//! by the jobs it processed. On SQLite it is the store's writer-thread
//! counter ([`errand::SqliteStore::commits`]): one per group commit however
//! many operations it carried (reads are not counted; other processes on
//! the file are not counted). On PostgreSQL it is the growth of
//! `xact_commit` in `pg_stat_database` for the database: every committed
//! transaction, read-only ones included (an idle poll; the `LISTEN`
//! session's read of each notification it receives, one per insert that
//! wakes a worker), of every session, so other sessions working on the same
//! database count too, and so do the few transactions the benchmark's own
//! statistics reads and connection start-ups make. PostgreSQL flushes a session's
//! statistics at most once a second, or when it ends; each phase therefore
//! uses a store of its own, closes it, and waits (up to 5 s) until the
//! sessions it opened have ended before reading the counter. The report
//! carries a note when that wait ran out.
//!
//! ## Peak RSS
//!
//! `VmHWM` from `/proc/self/status`: the most resident memory this process
//! has used since it started, the set-up phases included.
#![deny(missing_docs)]

mod profile;
mod stats;
mod target;
mod workloads;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

pub use profile::{Profile, StatementCost};
pub use stats::{Summary, ms, peak_rss_mb, per_second, percentile, ratio, thousands};

/// The benchmark's result type.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;

/// Why a benchmark could not run or finish.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// A parameter or the database was not acceptable; the message says
    /// what to change.
    #[error("{0}")]
    Invalid(String),
    /// The store refused or failed.
    #[error(transparent)]
    Store(#[from] errand::Error),
    /// A direct PostgreSQL statement (statistics, bulk load, snapshot) failed.
    #[error("PostgreSQL: {0}")]
    Postgres(String),
    /// The workload did not complete (no progress, jobs left unfinished).
    #[error("{0}")]
    Failed(String),
}

/// What to measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Bulk enqueue in batches.
    Enqueue,
    /// Pre-insert, then drain with the runtime.
    BurnDown,
    /// Drain while a producer keeps a backlog topped up.
    Continuous,
    /// Enqueue-to-start and enqueue-to-finish of single jobs.
    Latency,
    /// Drain where half the jobs fail their first attempt.
    RetryHeavy,
    /// Claim latency next to many finished and future rows.
    ClaimCost,
    /// Burn-down of a workflow: chains of 10 jobs, each waiting for the one
    /// before it, built with the workflow builder (generated step ids, one
    /// workflow id), as an application enqueues them.
    Workflow,
    /// How long one acknowledgment takes that releases many dependents.
    FanOut,
    /// Many clients waiting for their jobs to end: what they cost idle,
    /// and how soon each hears once its job is acknowledged.
    Waiters,
    /// Signal-to-start of single jobs: each sample waits for a signal
    /// (enqueued `waiting` before the run), and is timed from the signal
    /// call to its start and acknowledgment, on an idle worker.
    Signals,
}

impl Workload {
    /// Every workload, in the order `errand bench --help` lists them.
    pub const ALL: [Workload; 10] = [
        Workload::Enqueue,
        Workload::BurnDown,
        Workload::Continuous,
        Workload::Latency,
        Workload::RetryHeavy,
        Workload::ClaimCost,
        Workload::Workflow,
        Workload::FanOut,
        Workload::Waiters,
        Workload::Signals,
    ];

    /// The name on the command line and in reports.
    pub fn as_str(self) -> &'static str {
        match self {
            Workload::Enqueue => "enqueue",
            Workload::BurnDown => "burn-down",
            Workload::Continuous => "continuous",
            Workload::Latency => "latency",
            Workload::RetryHeavy => "retry-heavy",
            Workload::ClaimCost => "claim-cost",
            Workload::Workflow => "workflow",
            Workload::FanOut => "fan-out",
            Workload::Waiters => "waiters",
            Workload::Signals => "signals",
        }
    }
}

impl FromStr for Workload {
    type Err = BenchError;

    fn from_str(s: &str) -> Result<Self> {
        Workload::ALL
            .into_iter()
            .find(|w| w.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Workload::ALL.iter().map(|w| w.as_str()).collect();
                BenchError::Invalid(format!(
                    "unknown workload {s:?}: use one of {}",
                    names.join(", ")
                ))
            })
    }
}

/// A benchmark run as asked for; `None` takes the workload's default.
#[derive(Clone, Debug)]
pub struct BenchConfig {
    /// A SQLite path, `sqlite://PATH` or `postgres://…`.
    pub db: String,
    /// PostgreSQL: the scratch schema to create and write to.
    pub schema: String,
    /// SQLite: durability of commits.
    pub synchronous: errand::Synchronous,
    /// What to measure.
    pub workload: Workload,
    /// Jobs (enqueue, burn-down, retry-heavy), samples (latency) or jobs
    /// claimed per phase (claim-cost).
    pub jobs: Option<u64>,
    /// Enqueue: the batch size (default: 1, 100 and 5,000 in turn).
    /// Continuous: the backlog kept waiting.
    pub batch: Option<u32>,
    /// Enqueue: concurrent producers (default 1). Runtime workloads: the
    /// runtime's slots (default 256).
    pub concurrency: Option<usize>,
    /// Continuous: how long (default 10 s). Claim-cost on PostgreSQL: how
    /// long the snapshot is held (default 30 s).
    pub duration: Option<Duration>,
    /// Latency: jobs per second arriving at a steady rate.
    pub rate: Option<f64>,
    /// How long each handler takes (default 0: a no-op).
    pub job_time: Duration,
    /// Claim-cost: finished rows and future rows to load (default
    /// 1,000,000 each).
    pub rows: Option<u64>,
    /// Give up when no job finishes for this long (default 60 s).
    pub stall: Duration,
    /// Burn-down, retry-heavy, workflow: metadata every job carries (what
    /// metadata costs a drain; none by default).
    pub meta: errand::core::Meta,
    /// The keys the benchmark's stores encrypt payloads and outputs with
    /// (what encryption costs; none by default).
    pub keys: Option<std::sync::Arc<errand::encryption::Keyring>>,
}

impl BenchConfig {
    /// A configuration with every default, for `workload` on `db`.
    pub fn new(db: impl Into<String>, workload: Workload) -> Self {
        BenchConfig {
            db: db.into(),
            schema: "errand_bench".to_owned(),
            synchronous: errand::Synchronous::Full,
            workload,
            jobs: None,
            batch: None,
            concurrency: None,
            duration: None,
            rate: None,
            job_time: Duration::ZERO,
            rows: None,
            stall: Duration::from_secs(60),
            meta: errand::core::Meta::new(),
            keys: None,
        }
    }
}

/// The parameters a run used, defaults filled in.
#[derive(Clone, Debug, Serialize)]
pub struct Params {
    /// Jobs, samples or jobs claimed per phase.
    pub jobs: u64,
    /// Enqueue batch sizes (one or all three), or the continuous backlog.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    /// Producers (enqueue) or runtime slots.
    pub concurrency: usize,
    /// Continuous duration or claim-cost snapshot hold, in milliseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
    /// Latency: arrival rate in jobs per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
    /// Handler time in milliseconds.
    pub job_time_ms: f64,
    /// Claim-cost: rows loaded of each kind.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rows: Option<u64>,
    /// PostgreSQL: the schema written to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schema: Option<String>,
}

/// One batch size of the enqueue workload.
#[derive(Clone, Debug, Serialize)]
pub struct EnqueueRun {
    /// Jobs per call.
    pub batch: u32,
    /// Jobs inserted.
    pub jobs: u64,
    /// Wall time.
    pub elapsed_ms: f64,
    /// Jobs inserted per second.
    pub jobs_per_sec: f64,
    /// Database commits during the run.
    pub commits: u64,
    /// Commits per job.
    pub commits_per_job: f64,
    /// Where the run spent its resources, per job.
    pub profile: Profile,
}

/// Jobs acknowledged per second over one reporting interval.
#[derive(Clone, Debug, Serialize)]
pub struct Interval {
    /// End of the interval, seconds since the drain started.
    pub at_s: f64,
    /// Jobs acknowledged by then.
    pub done: u64,
    /// Jobs acknowledged per second during the interval.
    pub jobs_per_sec: f64,
}

/// Latency distributions of the latency workload.
#[derive(Clone, Debug, Serialize)]
pub struct LatencyReport {
    /// From the enqueue call to the handler's start.
    pub start: Summary,
    /// From the enqueue call to the committed acknowledgment.
    pub finish: Summary,
    /// The enqueue call itself (insert committed).
    pub enqueue: Summary,
}

/// Claim latency while another session holds a snapshot (PostgreSQL).
#[derive(Clone, Debug, Serialize)]
pub struct SnapshotReport {
    /// How long the snapshot was held.
    pub held_ms: f64,
    /// Claims of 10 while it was held.
    pub claims: Summary,
    /// Median claim in the first 5 s.
    pub first_5s_p50_ms: f64,
    /// Median claim in the last 5 s.
    pub last_5s_p50_ms: f64,
}

/// Claim-cost details.
#[derive(Clone, Debug, Serialize)]
pub struct ClaimReport {
    /// Claims of 10 on the empty table.
    pub empty: Summary,
    /// Claims of 10 with the rows loaded.
    pub loaded: Summary,
    /// Loaded p50 / empty p50.
    pub p50_ratio: f64,
    /// Loaded p99 / empty p99.
    pub p99_ratio: f64,
    /// Finished rows loaded.
    pub rows_done: u64,
    /// Future-scheduled rows loaded.
    pub rows_future: u64,
    /// How the rows were loaded.
    pub load: String,
    /// Wall time of the load.
    pub load_ms: f64,
    /// PostgreSQL: with a snapshot held open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<SnapshotReport>,
}

/// The result of one benchmark run (`errand bench --json` prints it).
#[derive(Clone, Debug, Serialize)]
pub struct Report {
    /// What was measured.
    pub workload: Workload,
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// SQLite: `full` or `normal`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub synchronous: Option<&'static str>,
    /// The parameters, defaults filled in.
    pub params: Params,
    /// Jobs processed in the measured phase (enqueue with every batch
    /// size: those of the largest batch).
    pub jobs: u64,
    /// Wall time of the measured phase.
    pub elapsed_ms: f64,
    /// Jobs per second of the measured phase (see the workload's notes).
    pub jobs_per_sec: f64,
    /// Database commits during the measured phase.
    pub commits: u64,
    /// Commits per job.
    pub commits_per_job: f64,
    /// Peak resident set size of this process, MiB.
    pub peak_rss_mb: Option<f64>,
    /// Where the measured phase spent its resources, per job.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub profile: Option<Profile>,
    /// Latency p50 (enqueue-to-start; claim-cost: claim with the rows loaded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p50_ms: Option<f64>,
    /// Latency p95.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p95_ms: Option<f64>,
    /// Latency p99.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p99_ms: Option<f64>,
    /// Latency workload: every distribution.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency: Option<LatencyReport>,
    /// Enqueue: one entry per batch size.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub runs: Vec<EnqueueRun>,
    /// Drains: jobs/s every 2 s.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub intervals: Vec<Interval>,
    /// Burn-down and retry-heavy: how fast the untimed pre-insert went.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub preinsert_jobs_per_sec: Option<f64>,
    /// Retry-heavy: every attempt settled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<u64>,
    /// Continuous: jobs inserted within the duration.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enqueued: Option<u64>,
    /// Runtime workloads: most handlers started and not yet settled at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_in_flight: Option<u64>,
    /// Claim-cost details.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim: Option<ClaimReport>,
    /// Jobs by state at the end, read from the database.
    pub states: BTreeMap<String, u64>,
    /// Caveats about this run's figures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl Report {
    /// A short summary for people.
    pub fn human(&self) -> String {
        let mut out = String::new();
        let backend = match self.synchronous {
            Some(s) => format!("{} (synchronous={s})", self.backend),
            None => self.backend.to_owned(),
        };
        let _ = writeln!(out, "{} on {backend}", self.workload.as_str());
        self.write_throughput(&mut out);
        if let Some(p) = &self.profile {
            let _ = writeln!(out, "  per job: {}", p.human());
        }
        if let Some(l) = &self.latency {
            for (name, s) in [
                ("enqueue-to-start", &l.start),
                ("enqueue-to-finish", &l.finish),
                ("enqueue call", &l.enqueue),
            ] {
                let _ = writeln!(
                    out,
                    "  {name}: p50 {:.2} ms, p95 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
                    s.p50_ms, s.p95_ms, s.p99_ms, s.max_ms
                );
            }
        }
        if let Some(c) = &self.claim {
            write_claim(&mut out, c);
        }
        if let Some(a) = self.attempts {
            let _ = writeln!(out, "  attempts: {}", thousands(a as f64));
        }
        if let Some(m) = self.max_in_flight {
            let _ = writeln!(
                out,
                "  most jobs in flight at once: {}",
                thousands(m as f64)
            );
        }
        match self.peak_rss_mb {
            Some(mb) => {
                let _ = writeln!(out, "  peak RSS: {mb:.1} MiB");
            }
            None => {
                let _ = writeln!(out, "  peak RSS: unknown (no /proc/self/status)");
            }
        }
        let states: Vec<String> = self
            .states
            .iter()
            .map(|(s, n)| format!("{s}={}", thousands(*n as f64)))
            .collect();
        let _ = writeln!(out, "  jobs in the database: {}", states.join(" "));
        for note in &self.notes {
            let _ = writeln!(out, "  note: {note}");
        }
        out
    }

    /// Writes the throughput lines: one per enqueue batch size, or the whole run's.
    fn write_throughput(&self, out: &mut String) {
        for run in &self.runs {
            let _ = writeln!(
                out,
                "  batch {:>5}: {} jobs in {:.2} s = {} jobs/s, {:.4} commits/job",
                run.batch,
                thousands(run.jobs as f64),
                run.elapsed_ms / 1000.0,
                thousands(run.jobs_per_sec),
                run.commits_per_job
            );
        }
        if self.runs.is_empty() {
            let _ = writeln!(
                out,
                "  {} jobs in {:.2} s = {} jobs/s",
                thousands(self.jobs as f64),
                self.elapsed_ms / 1000.0,
                thousands(self.jobs_per_sec)
            );
            let _ = writeln!(
                out,
                "  commits: {} ({:.4} per job)",
                thousands(self.commits as f64),
                self.commits_per_job
            );
        }
    }
}

/// Writes the claim-cost lines: empty table, loaded table and any snapshot held.
fn write_claim(out: &mut String, c: &ClaimReport) {
    let _ = writeln!(
        out,
        "  claim of 10, empty table: p50 {:.2} ms, p99 {:.2} ms",
        c.empty.p50_ms, c.empty.p99_ms
    );
    let _ = writeln!(
        out,
        "  claim of 10, {} done + {} future rows: p50 {:.2} ms, p99 {:.2} ms ({:.2}× / {:.2}× the empty table)",
        thousands(c.rows_done as f64),
        thousands(c.rows_future as f64),
        c.loaded.p50_ms,
        c.loaded.p99_ms,
        c.p50_ratio,
        c.p99_ratio
    );
    if let Some(s) = &c.snapshot {
        let _ = writeln!(
            out,
            "  claim of 10, snapshot held {:.0} s: p50 {:.2} ms, p99 {:.2} ms (first 5 s p50 {:.2} ms, last 5 s p50 {:.2} ms)",
            s.held_ms / 1000.0,
            s.claims.p50_ms,
            s.claims.p99_ms,
            s.first_5s_p50_ms,
            s.last_5s_p50_ms
        );
    }
}

/// Called every 2 s while a drain runs.
pub type Progress = Arc<dyn Fn(&Interval) + Send + Sync>;

/// Runs one benchmark. `progress`, if given, hears every 2-second interval
/// of a drain as it happens.
pub async fn run(config: &BenchConfig, progress: Option<Progress>) -> Result<Report> {
    workloads::run(config, progress).await
}
