//! `errand-harness run`: workers, load, nemesis, heal, drain, check.
//!
//! This file holds the options, the result and the run from start to end;
//! its steps live in the submodules: `plan` (the seeded jobs, actions and
//! crash points), `backend` (where the jobs live), `workers` (the worker
//! processes), `load` (the load generator), `nemesis` (the fault phase)
//! and `history` (what the checker is given).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use errand::ConnectOptions;
use serde::Serialize;

use crate::check::{self, SignalHistory};

mod backend;
mod history;
mod load;
mod nemesis;
mod plan;
mod signaler;
mod workers;
use backend::Backend;
use history::{collect_history, read_finals};
use load::{LoadShared, spawn_load};
use nemesis::Nemesis;
use plan::Plan;
use signaler::Signaler;
use workers::locate_errand;

/// A fault the nemesis can inject.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Fault {
    /// SIGKILL a random worker (its handlers are orphaned, not killed).
    Kill,
    /// SIGSTOP a random worker for 2–3 leases, then SIGCONT: a zombie.
    Pause,
    /// A job whose handler SIGKILLs its worker every time.
    Poison,
    /// `pg_ctl restart -m immediate` of the harness's private cluster.
    Restart,
    /// Workers armed with a crash point (`ERRAND_FAILPOINTS`) that SIGKILL
    /// themselves at a named moment: after a claim commits, at a heartbeat,
    /// after the effect before the settlement, after the acknowledgment.
    Crash,
    /// Fill the small file system the SQLite file lives on (a tmpfs the
    /// harness mounts; root) for a while, then free it.
    #[value(name = "disk-full")]
    #[serde(rename = "disk-full")]
    DiskFull,
    /// Step the workers' clock forward and back (SQLite; the workers read
    /// an offset file through `ERRAND_CLOCK_OFFSET_FILE`).
    Clock,
    /// Enqueue through an `errand serve` process and SIGKILL it mid-enqueue;
    /// clients retry with the same id.
    Http,
    /// Kill the primary of a private primary/standby pair (`--pg-pair`) with
    /// `pg_ctl stop -m immediate`, promote the standby, and rebuild the old
    /// primary as the new one's standby; the workers hold a multi-host URL.
    Failover,
    /// One job in four suspends itself on its first run until a signal;
    /// `errand signal` processes, a third of them SIGKILLed mid-send, send
    /// it until the job is no longer waiting.
    Signals,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::Kill => "kill",
            Fault::Pause => "pause",
            Fault::Poison => "poison",
            Fault::Restart => "restart",
            Fault::Crash => "crash",
            Fault::DiskFull => "disk-full",
            Fault::Clock => "clock",
            Fault::Http => "http",
            Fault::Signals => "signals",
            Fault::Failover => "failover",
        }
    }
}

/// Options of `run` (also what the replay line repeats).
#[derive(Clone, Debug, clap::Args)]
pub struct RunOptions {
    /// SQLite database file (default: jobs.db in the run directory).
    #[arg(long, conflicts_with_all = ["pg", "pg_cluster", "pg_pair"])]
    pub db: Option<PathBuf>,
    /// A PostgreSQL URL; the run uses a fresh schema (dropped at the end).
    #[arg(long, conflicts_with_all = ["pg_cluster", "pg_pair"])]
    pub pg: Option<String>,
    /// Start a private PostgreSQL cluster (root, initdb) and run on it;
    /// required by the restart plan.
    #[arg(long, conflicts_with = "pg_pair")]
    pub pg_cluster: bool,
    /// Start a private primary and streaming standby (root, initdb;
    /// `scripts/pg-pair.sh`) replicating synchronously or asynchronously,
    /// and run on both through a multi-host URL; required by the failover
    /// plan.
    #[arg(long)]
    pub pg_pair: Option<crate::cluster::Replication>,
    /// The PostgreSQL schema (default: a fresh `harness_<seed>_<pid>`).
    #[arg(long)]
    pub schema: Option<String>,
    /// The nemesis seed (random if not given; always printed).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Faults to inject, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "kill,pause,poison")]
    pub plan: Vec<Fault>,
    /// Jobs to enqueue.
    #[arg(long, default_value_t = 400)]
    pub jobs: u32,
    /// Shape the jobs as one fan-out/fan-in: a root, `--jobs` leaves that
    /// depend on it, each recording an output, and a sink that depends on
    /// every leaf and fails for good unless it reads every leaf's output
    /// (so `--jobs` + 2 jobs; `--jobs` at most 10,000).
    #[arg(long)]
    pub fan_in: bool,
    /// The longest a job's handler works, in ms (each works 10..this).
    #[arg(long, default_value_t = 150)]
    pub job_ms_max: u64,
    /// Worker processes.
    #[arg(long, default_value_t = 3)]
    pub workers: u32,
    /// `--concurrency` of each worker.
    #[arg(long, default_value_t = 3)]
    pub concurrency: u32,
    /// The lease, in milliseconds.
    #[arg(long, default_value_t = 2000)]
    pub lease_ms: u64,
    /// Length of the fault phase (load and nemesis), in seconds.
    #[arg(long, default_value_t = 10)]
    pub fault_secs: u64,
    /// SIGKILLs (kill plan).
    #[arg(long, default_value_t = 4)]
    pub kills: u32,
    /// How long a kill or pause waits for its worker to be running a
    /// handler before it strikes anyway, in ms.
    #[arg(long, default_value_t = 1000)]
    pub strike_wait_ms: u64,
    /// SIGSTOP/SIGCONT pauses (pause plan).
    #[arg(long, default_value_t = 3)]
    pub pauses: u32,
    /// Poison jobs (poison plan).
    #[arg(long, default_value_t = 1)]
    pub poison: u32,
    /// Crash-restarts (restart plan).
    #[arg(long, default_value_t = 1)]
    pub restarts: u32,
    /// Failovers (failover plan), each a kill of the primary, a promotion
    /// and a rebuilt standby.
    #[arg(long, default_value_t = 2)]
    pub failovers: u32,
    /// Failover plan: how long the standby stops receiving before each
    /// kill of the primary, in ms (with asynchronous replication the
    /// commits of that time are lost with the primary).
    #[arg(long, default_value_t = 0)]
    pub lag_ms: u64,
    /// Worker spawns armed with a crash point (crash plan); the points are
    /// taken in turn.
    #[arg(long, default_value_t = 8)]
    pub crashes: u32,
    /// Times the file system fills up (disk-full plan).
    #[arg(long, default_value_t = 2)]
    pub fulls: u32,
    /// Clock steps (clock plan): forward, back, forward…
    #[arg(long, default_value_t = 3)]
    pub jumps: u32,
    /// SIGKILLs of the HTTP server (http plan).
    #[arg(long, default_value_t = 4)]
    pub server_kills: u32,
    /// How long heal + drain may take before what is left counts as stuck.
    #[arg(long, default_value_t = 120)]
    pub drain_secs: u64,
    /// The `errand` command the workers run (default: `errand-crashable`,
    /// next to this binary; a plain `errand` refuses the crash plans).
    #[arg(long)]
    pub errand: Option<PathBuf>,
    /// Where logs go (default: a temporary directory, kept on failure).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Keep the run directory and the PostgreSQL schema.
    #[arg(long)]
    pub keep: bool,
    /// Print the figures as JSON (the table goes to stderr).
    #[arg(long)]
    pub json: bool,
}

impl RunOptions {
    fn replay_line(&self, seed: u64) -> String {
        let plan: Vec<&str> = self.plan.iter().map(|f| f.name()).collect();
        let mut line = format!(
            "errand-harness run --seed {seed} --plan {} --jobs {} --job-ms-max {} --strike-wait-ms {} --workers {} --concurrency {} --lease-ms {} --fault-secs {} --kills {} --pauses {} --poison {} --restarts {} --crashes {} --fulls {} --jumps {} --server-kills {}",
            plan.join(","),
            self.jobs,
            self.job_ms_max,
            self.strike_wait_ms,
            self.workers,
            self.concurrency,
            self.lease_ms,
            self.fault_secs,
            self.kills,
            self.pauses,
            self.poison,
            self.restarts,
            self.crashes,
            self.fulls,
            self.jumps,
            self.server_kills
        );
        if self.fan_in {
            line.push_str(" --fan-in");
        }
        if let Some(mode) = self.pg_pair {
            line.push_str(&format!(
                " --pg-pair {mode} --failovers {} --lag-ms {}",
                self.failovers, self.lag_ms
            ));
        } else if self.pg_cluster {
            line.push_str(" --pg-cluster");
        } else if self.pg.is_some() {
            line.push_str(" --pg URL");
        }
        line
    }
}

/// The outcome of a run.
#[derive(Debug, Serialize)]
pub struct RunResult {
    pub seed: u64,
    pub backend: String,
    pub plan: Vec<Fault>,
    pub replay: String,
    pub dir: String,
    pub elapsed_ms: u64,
    pub nemesis: Vec<String>,
    pub figures: check::Figures,
    pub violations: Vec<String>,
}

/// Runs the whole thing.
pub async fn run(opts: &RunOptions) -> Result<RunResult> {
    let started = Instant::now();
    let seed = opts.seed.unwrap_or_else(rand::random);
    eprintln!("errand-harness: seed {seed}");
    let replay = opts.replay_line(seed);
    eprintln!("errand-harness: replay with: {replay}");
    check_plan(opts)?;
    let errand_bin = locate_errand(opts.errand.as_ref())?;
    let (tmp, dir) = run_dir(opts)?;

    let backend = Backend::open(opts, seed, &dir)?;
    let connect = ConnectOptions {
        create_and_migrate: true,
        schema: backend.schema.clone(),
        ..ConnectOptions::default()
    };
    let store = errand::connect(&backend.db, &connect)
        .await
        .context("connect and migrate")?;

    let fault_ms = opts.fault_secs * 1000;
    let plan = Plan::draw(opts, seed, fault_ms)?;
    let awaiting = plan.awaiting();
    let adders = plan.adders();
    let mut nemesis = Nemesis::start(opts, &dir, &backend, errand_bin.clone(), plan.crash_arms)?;
    let shared = LoadShared::default();
    let base = nemesis.server.as_ref().map(crate::http::Server::base);
    let signaler = opts
        .plan
        .contains(&Fault::Signals)
        .then(|| Signaler::start(&store, &errand_bin, &backend, &dir, seed));
    let load = spawn_load(&store, plan.jobs, base, fault_ms, &shared)?;
    nemesis
        .fault_and_drain(&plan.actions, store.as_ref(), &load, &shared)
        .await?;
    nemesis.stop().await?;
    let signals = match signaler {
        Some(s) => s.finish(store.as_ref(), &awaiting).await?,
        None => SignalHistory::default(),
    };
    // Orphaned handlers of killed workers finish within their `ms`.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (listed, finals) = read_finals(store.as_ref()).await?;
    drop(store);
    let mut history = collect_history(&mut nemesis, &shared, listed, finals)?;
    history.signals = signals;
    history::add_children(&dir, adders, &mut history);
    let figures = check::check(&history);
    let violations = figures.violations(&required(opts));
    let log = std::mem::take(&mut nemesis.log);
    drop(nemesis);
    backend.clean_up(opts).await?;
    let keep = opts.keep || !violations.is_empty();
    if keep && opts.dir.is_none() {
        let _ = tmp.keep();
    }
    Ok(RunResult {
        seed,
        backend: backend.name,
        plan: opts.plan.clone(),
        replay,
        dir: dir.display().to_string(),
        elapsed_ms: started.elapsed().as_millis() as u64,
        nemesis: log,
        figures,
        violations,
    })
}

/// Makes the run directory (`--dir`, or a temporary one) and its effects directory.
fn run_dir(opts: &RunOptions) -> Result<(tempfile::TempDir, PathBuf)> {
    let tmp = tempfile::Builder::new()
        .prefix("errand-harness-")
        .tempdir()
        .context("create the run directory")?;
    let dir = match &opts.dir {
        Some(d) => {
            std::fs::create_dir_all(d).context("create --dir")?;
            d.clone()
        }
        None => tmp.path().to_path_buf(),
    };
    std::fs::create_dir_all(dir.join("effects")).context("create the effects directory")?;
    Ok((tmp, dir))
}

/// What the plan's faults require of the run's figures.
pub(crate) fn required(opts: &RunOptions) -> check::Require {
    let has = |f: Fault| opts.plan.contains(&f);
    check::Require {
        stale_tokens: has(Fault::Pause),
        recovery: has(Fault::Kill) || has(Fault::Pause),
        crash_points: has(Fault::Crash),
        storage_full: has(Fault::DiskFull),
        no_live_reclaims: has(Fault::Clock),
        http_failures: has(Fault::Http),
        signals: has(Fault::Signals),
        replication_losses: opts.pg_pair == Some(crate::cluster::Replication::Async),
    }
}

/// Refuses plans that cannot run as asked.
fn check_plan(opts: &RunOptions) -> Result<()> {
    let has = |f: Fault| opts.plan.contains(&f);
    if has(Fault::Restart) && !opts.pg_cluster {
        bail!("the restart plan needs --pg-cluster (a cluster the harness may crash)");
    }
    if has(Fault::Failover) != opts.pg_pair.is_some() {
        bail!(
            "the failover plan and --pg-pair go together (a pair the harness may fail over, and something to do with it)"
        );
    }
    if has(Fault::Restart) && opts.pg_pair.is_some() {
        bail!("the restart plan runs on --pg-cluster, not on a pair: use the failover plan");
    }
    let postgres = opts.pg.is_some() || opts.pg_cluster || opts.pg_pair.is_some();
    if (has(Fault::DiskFull) || has(Fault::Clock)) && postgres {
        bail!(
            "the disk-full and clock plans are SQLite's (PostgreSQL judges leases by the server's clock): drop --pg / --pg-cluster / --pg-pair"
        );
    }
    if opts.workers == 0 || opts.jobs == 0 {
        bail!("--workers and --jobs must be at least 1");
    }
    if opts.fan_in && has(Fault::Http) {
        bail!("--fan-in enqueues through the library (dependencies): drop the http plan");
    }
    if opts.fan_in && opts.jobs as usize > errand::core::MAX_DEPENDENCIES {
        bail!(
            "--fan-in: the sink depends on every leaf, at most {} (got --jobs {})",
            errand::core::MAX_DEPENDENCIES,
            opts.jobs
        );
    }
    Ok(())
}
