//! `errand bench` (the `bench` feature, on by default): the benchmark
//! workloads of `errand-bench` from the command line.

use std::io::IsTerminal as _;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;

use crate::exit::Failure;
use crate::flags::parse_duration;
use crate::output::{self, out, outln};

/// The workloads of `errand bench` (see docs/performance.md).
#[derive(clap::ValueEnum, Clone, Copy, Debug)]
pub(crate) enum BenchWorkload {
    /// Bulk enqueue in batches (1, 100 and 5000 unless --batch is given).
    Enqueue,
    /// Pre-insert --jobs, then drain them with the worker runtime.
    BurnDown,
    /// Drain for --duration while a producer keeps --batch jobs waiting.
    Continuous,
    /// Enqueue-to-start and enqueue-to-finish of one job at a time (or at --rate).
    Latency,
    /// Drain where every second job fails its first attempt.
    RetryHeavy,
    /// Claim latency on an empty table, then next to --rows done and future rows.
    ClaimCost,
    /// Like burn-down, with the --jobs as the steps of one workflow, in
    /// chains of 10, each step waiting for the one before it.
    Workflow,
    /// One acknowledgment releasing --jobs dependents (default 1000),
    /// timed over 5 rounds.
    FanOut,
    /// --jobs clients (default 10000) each waiting for its job to end, idle
    /// for --duration (default 60s), then the jobs acknowledged: how soon
    /// each waiter hears.
    Waiters,
    /// Signal-to-start of single jobs (--jobs samples, default 1000), each
    /// waiting for a signal, timed from the signal to its start.
    Signals,
}

impl From<BenchWorkload> for errand_bench::Workload {
    fn from(w: BenchWorkload) -> Self {
        use errand_bench::Workload;
        match w {
            BenchWorkload::Enqueue => Workload::Enqueue,
            BenchWorkload::BurnDown => Workload::BurnDown,
            BenchWorkload::Continuous => Workload::Continuous,
            BenchWorkload::Latency => Workload::Latency,
            BenchWorkload::RetryHeavy => Workload::RetryHeavy,
            BenchWorkload::ClaimCost => Workload::ClaimCost,
            BenchWorkload::Workflow => Workload::Workflow,
            BenchWorkload::FanOut => Workload::FanOut,
            BenchWorkload::Waiters => Workload::Waiters,
            BenchWorkload::Signals => Workload::Signals,
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct BenchArgs {
    /// What to measure.
    #[arg(value_enum)]
    pub(crate) workload: BenchWorkload,
    /// Jobs (enqueue, burn-down, retry-heavy, workflow; default 100000,
    /// batch-of-one enqueue 10000), samples (latency; default 1000), jobs
    /// claimed per phase (claim-cost; default 2000) or dependents released
    /// (fan-out; default 1000).
    #[arg(long)]
    pub(crate) jobs: Option<u64>,
    /// Enqueue: jobs per call. Continuous: the backlog kept waiting
    /// (default 1000).
    #[arg(long)]
    pub(crate) batch: Option<u32>,
    /// Enqueue: concurrent producers (default 1). Others: the worker
    /// runtime's slots (default 256).
    #[arg(long)]
    pub(crate) concurrency: Option<usize>,
    /// Continuous: how long (default 10s). Claim-cost on PostgreSQL: how
    /// long another session holds a snapshot open (default 30s).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) duration: Option<Duration>,
    /// Latency: jobs arriving per second at a steady rate instead of one
    /// at a time.
    #[arg(long)]
    pub(crate) rate: Option<f64>,
    /// How long each handler works (default: no-op).
    #[arg(long, value_parser = parse_duration)]
    pub(crate) job_time: Option<Duration>,
    /// Claim-cost: finished rows and future rows to load (default 1000000
    /// of each).
    #[arg(long)]
    pub(crate) rows: Option<u64>,
    /// Give up when no job finishes for this long.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub(crate) stall: Duration,
    /// Burn-down, retry-heavy, workflow: a metadata entry every job
    /// carries (repeatable; what metadata costs a drain).
    #[arg(long = "meta", value_name = "KEY=VALUE")]
    pub(crate) meta: Vec<String>,
    /// Print one JSON object.
    #[arg(long)]
    pub(crate) json: bool,
}

/// Runs a workload against `db` (and `schema`, on PostgreSQL), at
/// `synchronous` on SQLite.
pub(crate) async fn bench(
    db: &str,
    schema: &str,
    synchronous: errand::Synchronous,
    keys: Option<std::sync::Arc<errand::encryption::Keyring>>,
    a: &BenchArgs,
) -> Result<ExitCode, Failure> {
    let config = errand_bench::BenchConfig {
        db: db.to_owned(),
        schema: schema.to_owned(),
        synchronous,
        workload: a.workload.into(),
        jobs: a.jobs,
        batch: a.batch,
        concurrency: a.concurrency,
        duration: a.duration,
        rate: a.rate,
        job_time: a.job_time.unwrap_or_default(),
        rows: a.rows,
        stall: a.stall,
        meta: crate::flags::meta_pairs(&a.meta)?,
        keys,
    };
    // On a terminal (stdout and stderr both) the drains draw a bar towards
    // the job count (a count without --jobs), the others a spinner; with
    // stdout redirected, a line per interval (the figures a log keeps);
    // with --json, nothing.
    let workload = errand_bench::Workload::from(a.workload);
    let quiet = a.json || !std::io::stdout().is_terminal();
    let label = format!("bench {}", workload.as_str());
    let bar = Arc::new(match (workload, a.jobs) {
        (
            errand_bench::Workload::BurnDown
            | errand_bench::Workload::RetryHeavy
            | errand_bench::Workload::Workflow,
            Some(total),
        ) => crate::progress::Progress::bar(quiet, total, label),
        (
            errand_bench::Workload::BurnDown
            | errand_bench::Workload::RetryHeavy
            | errand_bench::Workload::Workflow
            | errand_bench::Workload::Continuous,
            _,
        ) => crate::progress::Progress::counter(quiet, format!("{label}: jobs done")),
        _ => crate::progress::Progress::spinner(quiet, format!("{label}: running")),
    });
    let progress: Option<errand_bench::Progress> = if bar.is_shown() {
        let bar = bar.clone();
        Some(Arc::new(move |i: &errand_bench::Interval| bar.set(i.done)) as errand_bench::Progress)
    } else {
        (!a.json).then(|| {
            Arc::new(|i: &errand_bench::Interval| {
                outln!(
                    "  {:>6.1} s  {:>10} done  {:>8} jobs/s",
                    i.at_s,
                    errand_bench::thousands(i.done as f64),
                    errand_bench::thousands(i.jobs_per_sec)
                );
            }) as errand_bench::Progress
        })
    };
    let report = errand_bench::run(&config, progress)
        .await
        .map_err(|e| match e {
            errand_bench::BenchError::Invalid(m) => Failure::Usage(m),
            errand_bench::BenchError::Store(e) => Failure::Errand(e),
            other => Failure::Other(anyhow::anyhow!(other)),
        })?;
    drop(bar);
    if a.json {
        output::json(&report)?;
    } else {
        out!("{}", report.human());
    }
    Ok(ExitCode::SUCCESS)
}
