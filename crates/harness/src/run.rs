//! `errand-harness run`: workers, load, nemesis, heal, drain, check.

use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use errand::{ConnectOptions, Error, JobFilter, JobId, JobState, NewJob, Payload, Store};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::Serialize;

use crate::check::{self, Enqueue, Intent};
use crate::cluster::Cluster;

mod history;
use history::{collect_history, read_finals};

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
        }
    }
}

/// Options of `run` (also what the replay line repeats).
#[derive(Clone, Debug, clap::Args)]
pub struct RunOptions {
    /// SQLite database file (default: jobs.db in the run directory).
    #[arg(long, conflicts_with_all = ["pg", "pg_cluster"])]
    pub db: Option<PathBuf>,
    /// A PostgreSQL URL; the run uses a fresh schema (dropped at the end).
    #[arg(long, conflicts_with = "pg_cluster")]
    pub pg: Option<String>,
    /// Start a private PostgreSQL cluster (root, initdb) and run on it;
    /// required by the restart plan.
    #[arg(long)]
    pub pg_cluster: bool,
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
        if self.pg_cluster {
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

#[derive(Clone, Copy, Debug)]
enum Action {
    Kill(usize),
    Pause(usize, u64),
    Restart,
    Fill(u64),
    Jump(i64),
    KillServer,
}

struct Slot {
    child: Option<Child>,
    killed: bool,
    respawn_at: Option<Instant>,
    paused_until: Option<Instant>,
}

/// Every worker process of the run; kills them all on drop (a panic, an
/// early error), so a failed run leaves nothing behind.
struct Workers {
    errand: PathBuf,
    db_args: Vec<String>,
    exec: String,
    dir: PathBuf,
    concurrency: u32,
    lease_ms: u64,
    /// The clock plan's offset file (`ERRAND_CLOCK_OFFSET_FILE`).
    clock_file: Option<PathBuf>,
    slots: Vec<Slot>,
}

impl Workers {
    fn spawn(&self, failpoints: Option<&str>) -> Result<Child> {
        // The file names need the pid: spawn into a temporary name, rename.
        let tmp_out = self
            .dir
            .join(format!("spawn-{}.out", rand::random::<u64>()));
        let tmp_err = tmp_out.with_extension("err");
        let out = std::fs::File::create(&tmp_out).context("create a worker's stdout file")?;
        let err = std::fs::File::create(&tmp_err).context("create a worker's stderr file")?;
        // A worker's `--exec` exchange files (outputs, inputs) go under the
        // run directory, which goes with the run: a worker killed mid-attempt
        // cannot remove its own.
        let scratch = self.dir.join("tmp");
        std::fs::create_dir_all(&scratch).context("create the workers' temporary directory")?;
        let child = Command::new(&self.errand)
            .args(&self.db_args)
            .args(["work", "--json", "--poll", "100ms", "--drain", "5s"])
            .args(["--retry-base", "100ms", "--retry-max", "500ms"])
            .args(["--concurrency", &self.concurrency.to_string()])
            .args(["--lease", &format!("{}ms", self.lease_ms)])
            .args(["--exec", &self.exec])
            .env("ERRAND_LOG", "warn")
            .env("TMPDIR", &scratch)
            .env("ERRAND_FAILPOINTS", failpoints.unwrap_or_default())
            .env(
                "ERRAND_CLOCK_OFFSET_FILE",
                self.clock_file.as_deref().unwrap_or(Path::new("")),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("spawn {}", self.errand.display()))?;
        let pid = child.id();
        std::fs::rename(&tmp_out, self.dir.join(format!("worker-{pid}.out")))
            .context("rename a worker's stdout file")?;
        std::fs::rename(&tmp_err, self.dir.join(format!("worker-{pid}.err")))
            .context("rename a worker's stderr file")?;
        Ok(child)
    }

    fn signal(&self, slot: usize, sig: Signal) -> Option<i32> {
        let child = self.slots.get(slot)?.child.as_ref()?;
        let pid = i32::try_from(child.id()).ok()?;
        kill(Pid::from_raw(pid), sig).ok()?;
        Some(pid)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for slot in &mut self.slots {
            if let Some(mut child) = slot.child.take() {
                if let Ok(pid) = i32::try_from(child.id()) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The `errand` command the workers run: `errand-crashable` (the command
/// with the crash points and the steppable clock), next to this binary.
fn locate_errand(given: Option<&PathBuf>) -> Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.clone());
    }
    let me = std::env::current_exe().context("locate this executable")?;
    // target/debug/errand-harness, or target/debug/deps/plans-… under tests.
    for dir in me.ancestors().skip(1).take(3) {
        let candidate = dir.join("errand-crashable");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "no `errand-crashable` binary next to {}: build it with `cargo build -p errand-harness` (`cargo test --workspace` builds it) or pass --errand PATH",
        me.display()
    )
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

async fn drop_schema(url: &str, schema: &str) -> Result<()> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connect to drop the schema")?;
    let task = tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            schema.replace('"', "\"\"")
        ))
        .await
        .context("drop the schema")?;
    drop(client);
    let _ = task.await;
    Ok(())
}

/// What the HTTP clients saw (http plan).
#[derive(Debug, Default)]
struct HttpStats {
    requests_failed: u64,
    found_existing: u64,
}

/// Inserts `batch`, retrying the same ids while the outcome is unknown;
/// counts the "storage full" refusals.
async fn enqueue_batch(store: &dyn Store, batch: Vec<NewJob>, full: &AtomicU64) -> Enqueue {
    for _ in 0..40 {
        match store.insert_many(batch.clone()).await {
            Ok(_) => return Enqueue::Ok,
            Err(Error::Invalid(_)) => return Enqueue::Failed,
            Err(e) => {
                if matches!(e, Error::StorageFull(_)) {
                    full.fetch_add(1, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
    }
    Enqueue::Ambiguous
}

/// Whether worker `pid` has a handler running (a `start` without its `end`
/// in the log's last 512 KiB: handlers are short, and big runs must not
/// re-read a log of millions of lines before every fault).
fn in_flight(dir: &Path, pid: u32) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 512 * 1024;
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(dir.join("exec.log")) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(TAIL)));
        let mut bytes = Vec::new();
        let _ = f.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let pid = pid.to_string();
    let mut open: i64 = 0;
    // The first line of a tail may be cut: lines are matched by shape.
    for l in text.lines() {
        let mut w = l.split(' ');
        let word = w.next();
        if w.nth(2) != Some(pid.as_str()) {
            continue;
        }
        match word {
            Some("start") => open += 1,
            Some("end") => open -= 1,
            _ => {}
        }
    }
    open > 0
}

async fn unfinished(store: &dyn Store) -> Result<usize> {
    let mut n = 0;
    for state in [JobState::Ready, JobState::Running] {
        let filter = JobFilter {
            state: Some(state),
            limit: Some(10_000),
            ..JobFilter::default()
        };
        n += store.list(&filter).await?.len();
    }
    Ok(n)
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
    let mut nemesis = Nemesis::start(opts, &dir, &backend, errand_bin, plan.crash_arms)?;
    let shared = LoadShared::default();
    let base = nemesis.server.as_ref().map(crate::http::Server::base);
    let load = spawn_load(&store, plan.jobs, base, fault_ms, &shared)?;
    nemesis
        .fault_and_drain(&plan.actions, store.as_ref(), &load, &shared)
        .await?;
    nemesis.stop().await?;
    // Orphaned handlers of killed workers finish within their `ms`.
    tokio::time::sleep(Duration::from_millis(300)).await;

    let (listed, finals) = read_finals(store.as_ref()).await?;
    drop(store);
    let history = collect_history(&mut nemesis, &shared, listed, finals)?;
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
fn required(opts: &RunOptions) -> check::Require {
    let has = |f: Fault| opts.plan.contains(&f);
    check::Require {
        stale_tokens: has(Fault::Pause),
        recovery: has(Fault::Kill) || has(Fault::Pause),
        crash_points: has(Fault::Crash),
        storage_full: has(Fault::DiskFull),
        no_live_reclaims: has(Fault::Clock),
        http_failures: has(Fault::Http),
    }
}

/// Refuses plans that cannot run as asked.
fn check_plan(opts: &RunOptions) -> Result<()> {
    let has = |f: Fault| opts.plan.contains(&f);
    if has(Fault::Restart) && !opts.pg_cluster {
        bail!("the restart plan needs --pg-cluster (a cluster the harness may crash)");
    }
    if (has(Fault::DiskFull) || has(Fault::Clock)) && (opts.pg.is_some() || opts.pg_cluster) {
        bail!(
            "the disk-full and clock plans are SQLite's (PostgreSQL judges leases by the server's clock): drop --pg / --pg-cluster"
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

/// Where the run's jobs live: a SQLite file (on a small file system of its
/// own for the disk-full plan), a PostgreSQL schema, or a private cluster.
struct Backend {
    disk: Option<crate::disk::SmallDisk>,
    cluster: Option<Cluster>,
    pg_url: Option<String>,
    /// The `--db` string.
    db: String,
    schema: Option<String>,
    /// How the report names it.
    name: String,
}

impl Backend {
    fn open(opts: &RunOptions, seed: u64, dir: &Path) -> Result<Backend> {
        let disk = if opts.plan.contains(&Fault::DiskFull) {
            Some(crate::disk::SmallDisk::mount(&dir.join("fs"), 64)?)
        } else {
            None
        };
        let cluster = if opts.pg_cluster {
            Some(Cluster::start()?)
        } else {
            None
        };
        let pg_url = cluster.as_ref().map(Cluster::url).or(opts.pg.clone());
        let (db, schema, name) = match &pg_url {
            Some(url) => {
                let schema = opts.schema.clone().unwrap_or_else(|| {
                    format!("harness_{}_{}", seed % 1_000_000, std::process::id())
                });
                let name = if cluster.is_some() {
                    "postgres (private cluster)"
                } else {
                    "postgres"
                };
                (url.clone(), Some(schema), name.to_owned())
            }
            None => {
                let path = match &disk {
                    Some(d) => d.path().join("jobs.db"),
                    None => opts.db.clone().unwrap_or_else(|| dir.join("jobs.db")),
                };
                (path.display().to_string(), None, "sqlite".to_owned())
            }
        };
        Ok(Backend {
            disk,
            cluster,
            pg_url,
            db,
            schema,
            name,
        })
    }

    /// The `--db` (and `--schema`) arguments of every `errand` process.
    fn db_args(&self) -> Vec<String> {
        let mut args = vec!["--db".to_owned(), self.db.clone()];
        if let Some(s) = &self.schema {
            args.extend(["--schema".to_owned(), s.clone()]);
        }
        args
    }

    /// SQLite's `PRAGMA integrity_check` of the final file (`None` on
    /// PostgreSQL).
    fn integrity(&self) -> Result<Option<String>> {
        if self.pg_url.is_some() {
            return Ok(None);
        }
        let conn = rusqlite::Connection::open(&self.db).context("open the SQLite file")?;
        let rows: Vec<String> = conn
            .prepare("PRAGMA integrity_check")
            .and_then(|mut s| {
                s.query_map([], |r| r.get::<_, String>(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()
            })
            .context("PRAGMA integrity_check")?;
        Ok(Some(rows.join("; ")))
    }

    /// Drops the run's schema on a shared server (unless kept), and stops a
    /// private cluster.
    async fn clean_up(&self, opts: &RunOptions) -> Result<()> {
        if let (Some(url), Some(s)) = (&self.pg_url, &self.schema)
            && !opts.keep
            && self.cluster.is_none()
        {
            drop_schema(url, s).await?;
        }
        Ok(())
    }
}

/// The seeded schedule: the jobs, the nemesis's actions in time order, and
/// the crash points armed in turn. Drawn in this order from one generator,
/// so a seed replays the same run.
struct Plan {
    jobs: Vec<(String, bool, NewJob)>,
    actions: Vec<(u64, Action)>,
    crash_arms: VecDeque<String>,
}

impl Plan {
    fn draw(opts: &RunOptions, seed: u64, fault_ms: u64) -> Result<Plan> {
        let mut rng = StdRng::seed_from_u64(seed);
        let jobs = plan_jobs(opts, &mut rng)?;
        let actions = plan_actions(opts, &mut rng, fault_ms);
        let crash_arms = plan_crash_arms(opts, &mut rng);
        Ok(Plan {
            jobs,
            actions,
            crash_arms,
        })
    }
}

/// The jobs: poison ones first, then `--jobs` ordinary ones.
fn plan_jobs(opts: &RunOptions, rng: &mut StdRng) -> Result<Vec<(String, bool, NewJob)>> {
    let has = |f: Fault| opts.plan.contains(&f);
    let mut jobs: Vec<(String, bool, NewJob)> = Vec::new();
    if has(Fault::Poison) {
        for n in 0..opts.poison {
            let job = NewJob::new("poison", Payload::default())?
                .with_id(JobId::new(format!("poison-{n}"))?)
                .with_max_lease_expiries(3)?;
            jobs.push((format!("poison-{n}"), true, job));
        }
    }
    for n in 0..opts.jobs {
        // The crash plan needs handlers that outlive a heartbeat (a third
        // of the lease): one job in ten works for 0.4–0.75 of a lease.
        let long = has(Fault::Crash) && rng.random_bool(0.1);
        let ms: u64 = if long {
            rng.random_range(opts.lease_ms * 2 / 5..opts.lease_ms * 3 / 4)
        } else {
            rng.random_range(10..opts.job_ms_max.max(11))
        };
        let fail_first = u32::from(rng.random_bool(0.05));
        let payload =
            Payload::from_value(&serde_json::json!({"ms": ms, "fail_first": fail_first}))?;
        let id = format!("j{n:06}");
        let mut job = NewJob::new("work", payload)?.with_id(JobId::new(id.clone())?);
        if opts.fan_in {
            job = job.depends_on(JobId::new(FAN_ROOT)?);
        }
        // The clock plan schedules one job in five up to 1.5 leases ahead:
        // the steps must lose no schedule.
        if has(Fault::Clock) && rng.random_bool(0.2) {
            let ms = rng.random_range(100..opts.lease_ms * 3 / 2);
            job = job.scheduled(errand::Schedule::After(Duration::from_millis(ms)));
        }
        jobs.push((id, false, job));
    }
    if opts.fan_in {
        // The root goes first and the sink last: the load enqueues in
        // order, so every dependency is stored before its dependents.
        let at = jobs.iter().position(|(_, poison, _)| !poison).unwrap_or(0);
        let root = NewJob::new("work", Payload::from_value(&serde_json::json!({"ms": 10}))?)?
            .with_id(JobId::new(FAN_ROOT)?);
        jobs.insert(at, (FAN_ROOT.to_owned(), false, root));
        let leaves: Vec<JobId> = jobs
            .iter()
            .filter(|(id, poison, _)| !poison && id != FAN_ROOT)
            .map(|(id, _, _)| JobId::new(id.clone()))
            .collect::<errand::Result<_>>()?;
        let expect = leaves.len();
        let sink = leaves.into_iter().fold(
            NewJob::new(
                "sink",
                Payload::from_value(&serde_json::json!({"expect": expect}))?,
            )?
            .with_id(JobId::new(FAN_SINK)?),
            NewJob::depends_on,
        );
        jobs.push((FAN_SINK.to_owned(), false, sink));
    }
    Ok(jobs)
}

/// The fan-out/fan-in's root and sink (`--fan-in`).
const FAN_ROOT: &str = "root";
const FAN_SINK: &str = "sink";

/// The nemesis's actions, each at a time within the fault phase.
fn plan_actions(opts: &RunOptions, rng: &mut StdRng, fault_ms: u64) -> Vec<(u64, Action)> {
    let has = |f: Fault| opts.plan.contains(&f);
    let mut actions: Vec<(u64, Action)> = Vec::new();
    let at =
        |rng: &mut StdRng, lo: f64, hi: f64| (rng.random_range(lo..hi) * fault_ms as f64) as u64;
    if has(Fault::Kill) {
        for _ in 0..opts.kills {
            let t = at(rng, 0.1, 0.7);
            actions.push((t, Action::Kill(rng.random_range(0..opts.workers as usize))));
        }
    }
    if has(Fault::Pause) {
        for _ in 0..opts.pauses {
            let t = at(rng, 0.1, 0.7);
            let len = (opts.lease_ms as f64 * rng.random_range(2.0..3.0)) as u64;
            actions.push((
                t,
                Action::Pause(rng.random_range(0..opts.workers as usize), len),
            ));
        }
    }
    if has(Fault::DiskFull) {
        // Disjoint slots over 10–70% of the fault phase, full for about
        // half of each.
        let n = f64::from(opts.fulls.max(1));
        for i in 0..opts.fulls {
            let slot = 0.6 / n;
            let start = 0.1 + slot * f64::from(i);
            let t = at(rng, start, start + slot * 0.3);
            let len = (rng.random_range(0.4..0.6) * slot * fault_ms as f64) as u64;
            actions.push((t, Action::Fill(len)));
        }
    }
    if has(Fault::Clock) {
        // Disjoint slots over 15–75% of the fault phase: forward 3–6 leases,
        // back 1–2 leases (less than the step before, so the workers' clock
        // never ends behind the load generator's), forward again…
        let n = f64::from(opts.jumps.max(1));
        let lease = opts.lease_ms as f64;
        for i in 0..opts.jumps {
            let slot = 0.6 / n;
            let start = 0.15 + slot * f64::from(i);
            let t = at(rng, start, start + slot * 0.5);
            let step = if i % 2 == 0 {
                (lease * rng.random_range(3.0..6.0)) as i64
            } else {
                -((lease * rng.random_range(1.0..2.0)) as i64)
            };
            actions.push((t, Action::Jump(step)));
        }
    }
    if has(Fault::Http) {
        for _ in 0..opts.server_kills {
            actions.push((at(rng, 0.05, 0.65), Action::KillServer));
        }
    }
    if has(Fault::Restart) {
        for _ in 0..opts.restarts {
            actions.push((at(rng, 0.15, 0.5), Action::Restart));
        }
    }
    actions.sort_by_key(|(t, _)| *t);
    actions
}

/// Crash points for worker spawns in the fault phase, in turn: the point,
/// after how many passes it fires.
fn plan_crash_arms(opts: &RunOptions, rng: &mut StdRng) -> VecDeque<String> {
    let mut arms = VecDeque::new();
    if !opts.plan.contains(&Fault::Crash) {
        return arms;
    }
    let points = errand_harness::crash::FAILPOINTS;
    for i in 0..opts.crashes as usize {
        let point = points[i % points.len()];
        let passes: u32 = match point {
            "heartbeat" => rng.random_range(0..2),
            "claim-committed" => rng.random_range(0..4),
            _ => rng.random_range(0..6),
        };
        arms.push_back(if passes == 0 {
            format!("{point}=return")
        } else {
            format!("{point}={passes}*off->return")
        });
    }
    arms
}

/// What the load generator shares with the nemesis and the checker.
#[derive(Default)]
struct LoadShared {
    intents: Arc<Mutex<BTreeMap<String, Intent>>>,
    /// "Storage full" refusals the load generator met.
    full: Arc<AtomicU64>,
    http_stats: Arc<Mutex<HttpStats>>,
    /// HTTP enqueues in flight, and the signal a new one started (the
    /// server kill waits for one).
    http_in_flight: Arc<AtomicU64>,
    request_started: Arc<tokio::sync::Notify>,
}

/// The load generator: batches of 25 spread over the first 70% of the
/// fault phase, through the library or (http plan) through `errand serve`
/// at `base`, one request per job.
fn spawn_load(
    store: &Arc<dyn Store>,
    jobs: Vec<(String, bool, NewJob)>,
    base: Option<String>,
    fault_ms: u64,
    shared: &LoadShared,
) -> Result<tokio::task::JoinHandle<()>> {
    let store = Arc::clone(store);
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .context("build the HTTP client")?;
    let (intents, full) = (Arc::clone(&shared.intents), Arc::clone(&shared.full));
    let http_stats = Arc::clone(&shared.http_stats);
    let http_in_flight = Arc::clone(&shared.http_in_flight);
    let request_started = Arc::clone(&shared.request_started);
    let batches: Vec<Vec<(String, bool, NewJob)>> = jobs.chunks(25).map(<[_]>::to_vec).collect();
    let spread = fault_ms * 7 / 10 / batches.len().max(1) as u64;
    Ok(tokio::spawn(async move {
        let t0 = Instant::now();
        for (i, batch) in batches.into_iter().enumerate() {
            let due = t0 + Duration::from_millis(spread * i as u64);
            tokio::time::sleep_until(due.into()).await;
            if let Some(base) = &base {
                // One request per job, the batch's requests at once.
                let mut set = tokio::task::JoinSet::new();
                for (id, poison, job) in batch {
                    let (client, base) = (client.clone(), base.clone());
                    let in_flight = Arc::clone(&http_in_flight);
                    let started = Arc::clone(&request_started);
                    set.spawn(async move {
                        let kind = job.kind.as_str().to_owned();
                        let posted = crate::http::enqueue(
                            &client,
                            &base,
                            &id,
                            &kind,
                            &job.payload,
                            &in_flight,
                            &started,
                        )
                        .await;
                        (id, poison, posted)
                    });
                }
                while let Some(Ok((id, poison, posted))) = set.join_next().await {
                    if let Ok(mut s) = http_stats.lock() {
                        s.requests_failed += posted.errors;
                        s.found_existing += u64::from(posted.found_existing);
                    }
                    if let Ok(mut map) = intents.lock() {
                        let status = posted.status;
                        map.insert(id, Intent { status, poison });
                    }
                }
                continue;
            }
            let ids: Vec<(String, bool)> =
                batch.iter().map(|(id, p, _)| (id.clone(), *p)).collect();
            let jobs = batch.into_iter().map(|(_, _, j)| j).collect();
            let status = enqueue_batch(store.as_ref(), jobs, &full).await;
            if let Ok(mut map) = intents.lock() {
                for (id, poison) in ids {
                    map.insert(id, Intent { status, poison });
                }
            }
        }
    }))
}

/// What a nemesis action did: struck (or was skipped), or is to be tried
/// again at the next pass (its target was not yet in the state that makes
/// the strike prove something).
enum Strike {
    Done,
    Wait,
}

/// The fault phase: the workers, the server of the http plan, and what the
/// nemesis did to them.
struct Nemesis<'a> {
    opts: &'a RunOptions,
    dir: &'a Path,
    backend: &'a Backend,
    workers: Workers,
    server: Option<crate::http::Server>,
    /// Crash points still to arm, one per worker spawn in the fault phase.
    crash_arms: VecDeque<String>,
    fault_phase: bool,
    full_until: Option<Instant>,
    clock_offset: i64,
    /// `(pid, ms)` of each kill and pause: when a worker stopped serving.
    outages: Vec<(i32, i64)>,
    forward_steps_over_leases: u64,
    kills_mid_request: u64,
    /// What happened, line by line, for the report.
    log: Vec<String>,
}

impl<'a> Nemesis<'a> {
    /// Spawns the workers (the first ones armed with crash points) and the
    /// http plan's server.
    fn start(
        opts: &'a RunOptions,
        dir: &'a Path,
        backend: &'a Backend,
        errand_bin: PathBuf,
        crash_arms: VecDeque<String>,
    ) -> Result<Nemesis<'a>> {
        let harness = std::env::current_exe().context("locate this executable")?;
        let harness = if harness.file_name().is_some_and(|n| n == "errand-harness") {
            harness
        } else {
            errand_bin.with_file_name("errand-harness")
        };
        let exec = format!(
            "exec {} handle --dir {}",
            shell_quote(&harness.display().to_string()),
            shell_quote(&dir.display().to_string())
        );
        let workers = Workers {
            errand: errand_bin,
            db_args: backend.db_args(),
            exec,
            dir: dir.to_path_buf(),
            concurrency: opts.concurrency,
            lease_ms: opts.lease_ms,
            clock_file: opts
                .plan
                .contains(&Fault::Clock)
                .then(|| dir.join("clock-offset")),
            slots: Vec::new(),
        };
        let mut me = Nemesis {
            opts,
            dir,
            backend,
            workers,
            server: None,
            crash_arms,
            fault_phase: true,
            full_until: None,
            clock_offset: 0,
            outages: Vec::new(),
            forward_steps_over_leases: 0,
            kills_mid_request: 0,
            log: Vec::new(),
        };
        for i in 0..opts.workers {
            let arm = me.crash_arms.pop_front();
            let child = me.workers.spawn(arm.as_deref())?;
            if let Some(arm) = arm {
                me.log.push(format!(
                    "0 ms: worker {i} (pid {}) armed: {arm}",
                    child.id()
                ));
            }
            me.workers.slots.push(Slot {
                child: Some(child),
                killed: false,
                respawn_at: None,
                paused_until: None,
            });
        }
        // The HTTP plan's server (on its own port, restarted after each kill).
        if opts.plan.contains(&Fault::Http) {
            me.server = Some(crate::http::Server::start(
                &me.workers.errand,
                &me.workers.db_args,
                dir,
            )?);
        }
        Ok(me)
    }

    /// Strikes as planned while the load runs, heals, and waits for the
    /// queue to drain (the log says how many jobs were left unfinished).
    async fn fault_and_drain(
        &mut self,
        actions: &[(u64, Action)],
        store: &dyn Store,
        load: &tokio::task::JoinHandle<()>,
        shared: &LoadShared,
    ) -> Result<()> {
        let t0 = Instant::now();
        let fault_ms = self.opts.fault_secs * 1000;
        let mut next = 0;
        let mut drain_until: Option<Instant> = None;
        let left = loop {
            let now = Instant::now();
            let elapsed = now.duration_since(t0).as_millis() as u64;
            // Nemesis actions that are due.
            while self.fault_phase
                && let Some((t, action)) = actions.get(next).copied()
                && t <= elapsed
            {
                match self.strike(t, action, elapsed, now, shared).await? {
                    Strike::Done => next += 1,
                    Strike::Wait => break,
                }
            }
            self.tend(now, elapsed)?;
            if self.fault_phase && elapsed >= fault_ms && load.is_finished() {
                self.fault_phase = false;
                drain_until = Some(now + Duration::from_secs(self.opts.drain_secs));
                self.log.push(format!("{elapsed} ms: heal and drain"));
                continue;
            }
            if let Some(until) = drain_until {
                let left = unfinished(store).await.unwrap_or(usize::MAX);
                if left == 0 || now >= until {
                    break left;
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            } else {
                tokio::time::sleep(Duration::from_millis(25)).await;
            }
        };
        let ms = t0.elapsed().as_millis();
        self.log
            .push(format!("{ms} ms: drained ({left} unfinished)"));
        Ok(())
    }

    /// One planned action, due at `t`.
    async fn strike(
        &mut self,
        t: u64,
        action: Action,
        elapsed: u64,
        now: Instant,
        shared: &LoadShared,
    ) -> Result<Strike> {
        match action {
            Action::Kill(chosen) => Ok(self.kill(t, chosen, elapsed)),
            Action::Pause(slot, len) => Ok(self.pause(t, slot, len, elapsed, now)),
            Action::Fill(len) => {
                if let Some(d) = &self.backend.disk {
                    let n = tokio::task::block_in_place(|| d.fill())?;
                    self.full_until = Some(now + Duration::from_millis(len));
                    self.log.push(format!(
                        "{t} ms: file system full ({n} bytes of ballast) for {len} ms"
                    ));
                }
                Ok(Strike::Done)
            }
            Action::Jump(step) => self.jump(t, step, elapsed),
            Action::KillServer => {
                self.kill_server(t, shared).await;
                Ok(Strike::Done)
            }
            Action::Restart => {
                if let Some(c) = &self.backend.cluster {
                    let r = tokio::task::block_in_place(|| c.crash_restart());
                    self.log
                        .push(format!("{t} ms: pg_ctl restart -m immediate: {r:?}"));
                    r?;
                }
                Ok(Strike::Done)
            }
        }
    }

    /// Whether worker `slot` is up: spawned, not killed, not paused.
    fn up(&self, slot: usize) -> bool {
        self.workers
            .slots
            .get(slot)
            .is_some_and(|s| s.child.is_some() && !s.killed && s.paused_until.is_none())
    }

    /// Whether a strike at worker `slot` should wait (at most
    /// `--strike-wait-ms` past its time) for the worker to be running a
    /// handler: a strike at an idle worker proves nothing.
    fn idle_worth_waiting(&self, slot: usize, t: u64, elapsed: u64) -> bool {
        let pid = self
            .workers
            .slots
            .get(slot)
            .and_then(|s| s.child.as_ref())
            .map(Child::id);
        pid.is_some_and(|pid| !in_flight(self.dir, pid)) && elapsed < t + self.opts.strike_wait_ms
    }

    /// SIGKILL: the chosen worker, or when it is down (killed, not yet
    /// respawned) or paused, the next one that is up; all down: skip.
    fn kill(&mut self, t: u64, chosen: usize, elapsed: u64) -> Strike {
        let n = self.workers.slots.len().max(1);
        let slot = (0..n)
            .map(|i| (chosen + i) % n)
            .find(|&i| self.up(i))
            .unwrap_or(chosen);
        let paused = self
            .workers
            .slots
            .get(slot)
            .is_some_and(|s| s.paused_until.is_some() || s.killed);
        if !paused && self.idle_worth_waiting(slot, t, elapsed) {
            return Strike::Wait;
        }
        match (!paused)
            .then(|| self.workers.signal(slot, Signal::SIGKILL))
            .flatten()
        {
            Some(pid) => {
                self.outages.push((pid, crate::handle::now_ms()));
                if let Some(s) = self.workers.slots.get_mut(slot) {
                    s.killed = true;
                }
                self.log
                    .push(format!("{t} ms: SIGKILL worker {slot} (pid {pid})"));
            }
            None => self.log.push(format!(
                "{t} ms: kill of worker {slot} skipped (down or paused)"
            )),
        }
        Strike::Done
    }

    /// SIGSTOP worker `slot` for `len` ms, mid-handler when it can be.
    fn pause(&mut self, t: u64, slot: usize, len: u64, elapsed: u64, now: Instant) -> Strike {
        let paused = self
            .workers
            .slots
            .get(slot)
            .is_some_and(|s| s.paused_until.is_some());
        if !paused && self.idle_worth_waiting(slot, t, elapsed) {
            return Strike::Wait;
        }
        match (!paused)
            .then(|| self.workers.signal(slot, Signal::SIGSTOP))
            .flatten()
        {
            Some(pid) => {
                self.outages.push((pid, crate::handle::now_ms()));
                if let Some(s) = self.workers.slots.get_mut(slot) {
                    s.paused_until = Some(now + Duration::from_millis(len));
                }
                self.log.push(format!(
                    "{t} ms: SIGSTOP worker {slot} (pid {pid}) for {len} ms"
                ));
            }
            None => self.log.push(format!(
                "{t} ms: pause of worker {slot} skipped (down or paused)"
            )),
        }
        Strike::Done
    }

    /// Steps the workers' clock by `step` ms while some worker holds a
    /// lease (waiting at most a second for one: a step with no lease held
    /// proves nothing).
    fn jump(&mut self, t: u64, step: i64, elapsed: u64) -> Result<Strike> {
        let busy = self
            .workers
            .slots
            .iter()
            .filter_map(|s| s.child.as_ref())
            .any(|c| in_flight(self.dir, c.id()));
        if !busy && elapsed < t + 1000 {
            return Ok(Strike::Wait);
        }
        if busy && step > 0 {
            self.forward_steps_over_leases += 1;
        }
        if let Some(file) = &self.workers.clock_file {
            self.clock_offset += step;
            let tmp = file.with_extension("tmp");
            std::fs::write(&tmp, self.clock_offset.to_string())
                .context("write the clock offset")?;
            std::fs::rename(&tmp, file).context("write the clock offset")?;
            self.log.push(format!(
                "{t} ms: workers' clock stepped {step:+} ms (offset {:+} ms)",
                self.clock_offset
            ));
        }
        Ok(Strike::Done)
    }

    /// SIGKILL the http plan's server mid-request: wait (at most a second)
    /// for a request to start — woken by the client, not by polling, since
    /// a request lasts milliseconds — then strike at once.
    async fn kill_server(&mut self, t: u64, shared: &LoadShared) {
        let by = Instant::now() + Duration::from_millis(1000);
        let mut requests = shared.http_in_flight.load(Ordering::SeqCst);
        while requests == 0 && Instant::now() < by {
            let _ = tokio::time::timeout_at(by.into(), shared.request_started.notified()).await;
            // A moment more, so the burst reaches the server and some
            // requests are being committed when it dies (a burst of 25
            // enqueues on SQLite can be answered within 3 ms, so no longer
            // than 1).
            tokio::time::sleep(Duration::from_millis(1)).await;
            requests = shared.http_in_flight.load(Ordering::SeqCst);
        }
        match self.server.as_mut().and_then(crate::http::Server::kill) {
            Some(pid) => {
                self.kills_mid_request += u64::from(requests > 0);
                self.log.push(format!(
                    "{t} ms: SIGKILL server (pid {pid}) with {requests} requests in flight"
                ));
            }
            None => self.log.push(format!("{t} ms: server kill skipped (down)")),
        }
    }

    /// Between strikes: restarts a killed server, frees the file system
    /// and resumes paused workers when their time is up (everything on
    /// heal), reaps dead workers and respawns them after a short delay.
    fn tend(&mut self, now: Instant, elapsed: u64) -> Result<()> {
        if let Some(s) = self.server.as_mut()
            && let Some(line) = s.tick(now)?
        {
            self.log.push(format!("{elapsed} ms: {line}"));
        }
        let fault_phase = self.fault_phase;
        if self.full_until.is_some_and(|u| !fault_phase || u <= now)
            && let Some(d) = &self.backend.disk
        {
            self.full_until = None;
            d.free()?;
            self.log
                .push(format!("{elapsed} ms: file system space returned"));
        }
        for (i, slot) in self.workers.slots.iter_mut().enumerate() {
            if slot.paused_until.is_some_and(|u| !fault_phase || u <= now) {
                slot.paused_until = None;
                if let Some(c) = &slot.child
                    && let Ok(pid) = i32::try_from(c.id())
                {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
                    self.log
                        .push(format!("{elapsed} ms: SIGCONT worker {i} (pid {pid})"));
                }
            }
        }
        for slot_index in 0..self.workers.slots.len() {
            self.reap_and_respawn(slot_index, now, elapsed)?;
        }
        Ok(())
    }

    /// Notes worker `slot_index`'s exit (killed by the nemesis or by a
    /// poison job) and respawns it 300 ms later, armed with the next crash
    /// point while the fault phase lasts.
    fn reap_and_respawn(&mut self, slot_index: usize, now: Instant, elapsed: u64) -> Result<()> {
        let exited = match self
            .workers
            .slots
            .get_mut(slot_index)
            .and_then(|s| s.child.as_mut())
        {
            Some(c) => c
                .try_wait()
                .context("wait for a worker")?
                .map(|st| (c.id(), st)),
            None => None,
        };
        if let Some((pid, status)) = exited
            && let Some(slot) = self.workers.slots.get_mut(slot_index)
        {
            slot.child = None;
            slot.killed = false;
            slot.respawn_at = Some(now + Duration::from_millis(300));
            self.log.push(format!(
                "{elapsed} ms: worker {slot_index} (pid {pid}) exited: {status}"
            ));
        }
        let due = self
            .workers
            .slots
            .get(slot_index)
            .is_some_and(|s| s.child.is_none() && s.respawn_at.is_some_and(|r| r <= now));
        if due {
            let arm = self
                .fault_phase
                .then(|| self.crash_arms.pop_front())
                .flatten();
            let child = self.workers.spawn(arm.as_deref())?;
            if let Some(arm) = arm {
                self.log.push(format!(
                    "{elapsed} ms: worker {slot_index} (pid {}) armed: {arm}",
                    child.id()
                ));
            }
            if let Some(slot) = self.workers.slots.get_mut(slot_index) {
                slot.child = Some(child);
                slot.respawn_at = None;
            }
        }
        Ok(())
    }

    /// Stops the server, then the workers: SIGTERM, and SIGKILL for any
    /// still running 15 s later.
    async fn stop(&mut self) -> Result<()> {
        if let Some(s) = self.server.as_mut() {
            tokio::task::block_in_place(|| s.stop());
        }
        for i in 0..self.workers.slots.len() {
            self.workers.signal(i, Signal::SIGTERM);
        }
        let stop_by = Instant::now() + Duration::from_secs(15);
        for slot in &mut self.workers.slots {
            if let Some(child) = slot.child.as_mut() {
                while child.try_wait().context("wait for a worker")?.is_none() {
                    if Instant::now() > stop_by {
                        let _ = child.kill();
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                slot.child = None;
            }
        }
        Ok(())
    }
}
