//! The long-running worker service: handlers by kind, queues with their own
//! concurrency, batch claims, lease renewal, deadlines, graceful draining and
//! the expired-lease sweep.
//!
//! ```
//! # use std::time::Duration;
//! # use errand::{JobContext, KindOptions, Outcome, Runtime};
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let db = dir.path().join("jobs.db").display().to_string();
//! # let options = errand::ConnectOptions { create_and_migrate: true, ..Default::default() };
//! # let store = errand::connect(&db, &options).await?;
//! #[derive(serde::Deserialize)]
//! struct Receipt {
//!     order: u64,
//! }
//!
//! let runtime = Runtime::builder(store)
//!     .handler("receipt", |p: Receipt, ctx: JobContext| async move {
//!         println!("the receipt of order {} (job {})", p.order, ctx.id());
//!         Outcome::Success
//!     })?
//!     .kind_options("receipt", KindOptions { deadline: Some(Duration::from_secs(30)), ..Default::default() })?
//!     .queue("default", 8)?
//!     .build()?;
//! // Runs until the future given completes: a shutdown signal, in a service.
//! runtime.run_until(tokio::time::sleep(Duration::from_millis(50))).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Each queue has one claimer. It waits for a free slot, claims as many
//! due jobs as it has free slots (up to the batch size) in one short
//! transaction, and runs each in its own task. An idle claimer waits on the
//! store's work signal (an insert in this process, `LISTEN/NOTIFY` on
//! PostgreSQL) or the poll interval, whichever comes first.
//!
//! Draining: when `run_until`'s future completes, claimers stop claiming,
//! in-flight jobs get until the drain deadline to finish, and whatever is
//! still running then is stopped and released at once — back to `ready`,
//! due now, without spending its attempt.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use errand_core::{
    AdminStore, ClaimRate, ClaimRequest, ClaimedJob, Error, Failure, Job, JobArgs, JobId, Lease,
    Name, Outcome, RateBucket, RateLimit, Result, RetryPolicy, Store, WorkerMetrics, WorkerReport,
    WorkerStore,
};
use serde::de::DeserializeOwned;
use tokio::sync::{Notify, Semaphore, oneshot, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cron::CronEnqueuer;
use crate::maintenance::{Pruner, Sweeper};
use crate::minutes::MinuteCounter;
use crate::worker::{
    Execution, FailureSink, Handler, JobContext, WorkOutcome, WorkReport, handler_fn, release,
    settle,
};
use errand_core::CronSchedule;

/// Called with the report of every settled attempt.
pub type ReportHook = Arc<dyn Fn(&WorkReport) + Send + Sync>;

/// Per-kind settings.
#[derive(Clone, Debug, Default)]
pub struct KindOptions {
    /// Retry policy of this kind (default: the runtime's).
    pub retry: Option<RetryPolicy>,
    /// How long one attempt may run; past it the attempt is a retryable
    /// `timeout` failure.
    pub deadline: Option<Duration>,
}

#[derive(Clone)]
struct Kind {
    handler: Arc<dyn Handler>,
    options: KindOptions,
}

/// Counts of what a runtime did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Attempts that ended in each outcome.
    pub outcomes: HashMap<&'static str, u64>,
}

impl RunStats {
    /// How many attempts ended in `outcome`.
    pub fn count(&self, outcome: WorkOutcome) -> u64 {
        self.outcomes.get(outcome.as_str()).copied().unwrap_or(0)
    }
}

/// Builds a [`Runtime`].
pub struct RuntimeBuilder {
    settings: Settings,
    queues: Vec<(Option<Name>, usize)>,
    drain: Duration,
}

/// What every claimer and job task of a runtime reads.
struct Settings {
    store: Arc<dyn WorkerStore>,
    /// The operator's seam, for the maintenance that reads it: stored
    /// schedules and the queues' depth on the charts. Without it neither
    /// runs.
    operator: Option<Arc<dyn AdminStore>>,
    kinds: HashMap<String, Kind>,
    fallback: Option<Arc<dyn Handler>>,
    lease: Duration,
    poll: Duration,
    batch: u32,
    sweep_every: Duration,
    retention: Option<Duration>,
    schedules: Vec<CronSchedule>,
    stored_schedules: bool,
    rates: HashMap<Name, RateLimit>,
    key_rates: HashMap<Name, RateLimit>,
    retry: RetryPolicy,
    sampler: crate::Sampler,
    on_report: Option<ReportHook>,
    report_every: Option<Duration>,
}

impl fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RuntimeBuilder")
            .field("kinds", &self.settings.kinds.keys().collect::<Vec<_>>())
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

impl RuntimeBuilder {
    /// Registers a handler for `kind` taking a typed payload. A payload that
    /// does not decode is a permanent failure (dead at once).
    pub fn handler<P, F, Fut>(self, kind: &str, f: F) -> Result<Self>
    where
        P: DeserializeOwned + Send + 'static,
        F: Fn(P, JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let f = Arc::new(f);
        let handler = handler_fn(move |ctx: JobContext| {
            let f = f.clone();
            async move {
                match ctx.payload::<P>() {
                    Ok(p) => f(p, ctx).await,
                    Err(e) => Outcome::permanent(e),
                }
            }
        });
        self.handler_dyn(kind, Arc::new(handler))
    }

    /// Registers the handler of a typed job: its kind is `T::KIND`, its
    /// payload decodes to `T`, and `T::options()`'s retry policy and
    /// attempt timeout become the kind's [`KindOptions`] (a later
    /// [`RuntimeBuilder::kind_options`] replaces them). A payload that
    /// does not decode is a permanent failure (dead at once).
    pub fn register<T, F, Fut>(self, f: F) -> Result<Self>
    where
        T: JobArgs,
        F: Fn(T, JobContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Outcome> + Send + 'static,
    {
        let options = T::options();
        let mut builder = self.handler(T::KIND, f)?;
        // Options set for the kind before keep what the type leaves out.
        if let Some(kind) = builder.settings.kinds.get_mut(T::KIND) {
            if options.retry.is_some() {
                kind.options.retry = options.retry;
            }
            if options.attempt_timeout.is_some() {
                kind.options.deadline = options.attempt_timeout;
            }
        }
        Ok(builder)
    }

    /// Registers any [`Handler`] for `kind`.
    pub fn handler_dyn(mut self, kind: &str, handler: Arc<dyn Handler>) -> Result<Self> {
        let name = Name::parse("kind", kind)?;
        let options = self
            .settings
            .kinds
            .remove(name.as_str())
            .map(|k| k.options)
            .unwrap_or_default();
        self.settings
            .kinds
            .insert(name.to_string(), Kind { handler, options });
        Ok(self)
    }

    /// The handler for kinds with none registered (for example an external
    /// command). Without one, such jobs fail (retryable) with a message
    /// naming the kind.
    pub fn fallback(mut self, handler: Arc<dyn Handler>) -> Self {
        self.settings.fallback = Some(handler);
        self
    }

    /// Sets the options of a registered kind, replacing all of them —
    /// those a typed job's [`JobArgs::options`] gave at
    /// [`RuntimeBuilder::register`] too (set each field you want kept).
    pub fn kind_options(mut self, kind: &str, options: KindOptions) -> Result<Self> {
        match self.settings.kinds.get_mut(kind) {
            Some(k) => {
                k.options = options;
                Ok(self)
            }
            None => Err(Error::invalid(format!(
                "no handler is registered for kind `{kind}`; register it before setting its options"
            ))),
        }
    }

    /// Runs `queue` with at most `concurrency` jobs at once. A slot is
    /// held while the handler runs; the settlement that follows does not
    /// hold it (it rides with the next claim's transaction or the
    /// acknowledgment batcher's), so the next claim can take its place.
    pub fn queue(mut self, queue: &str, concurrency: usize) -> Result<Self> {
        let name = Name::parse("queue", queue)?;
        self.push_queue(Some(name), concurrency)?;
        Ok(self)
    }

    /// Runs every queue together with at most `concurrency` jobs at once
    /// (a slot is held while a handler runs, as for [`Self::queue`]).
    pub fn all_queues(mut self, concurrency: usize) -> Result<Self> {
        self.push_queue(None, concurrency)?;
        Ok(self)
    }

    fn push_queue(&mut self, queue: Option<Name>, concurrency: usize) -> Result<()> {
        if !(1..=10_000).contains(&concurrency) {
            return Err(Error::invalid(format!(
                "queue concurrency must be between 1 and 10000 (got {concurrency})"
            )));
        }
        if self.queues.iter().any(|(q, _)| *q == queue) {
            return Err(Error::invalid("the same queue is configured twice"));
        }
        self.queues.push((queue, concurrency));
        Ok(())
    }

    /// Lease length (default 30 s), renewed every third of it.
    pub fn lease(mut self, lease: Duration) -> Self {
        self.settings.lease = lease;
        self
    }

    /// How often an idle claimer looks for work without a signal (default
    /// 1 s), and how often a claimer also looks for expired leases to take
    /// back.
    pub fn poll(mut self, poll: Duration) -> Self {
        self.settings.poll = poll;
        self
    }

    /// How long in-flight jobs may finish after shutdown (default 30 s).
    pub fn drain_deadline(mut self, drain: Duration) -> Self {
        self.drain = drain;
        self
    }

    /// Most jobs one claim takes (default 32).
    pub fn batch(mut self, batch: u32) -> Self {
        self.settings.batch = batch.max(1);
        self
    }

    /// How often the expired-lease sweep runs (default 30 s).
    pub fn sweep_every(mut self, every: Duration) -> Self {
        self.settings.sweep_every = every;
        self
    }

    /// How long finished (`done`, `cancelled`) jobs are kept before the
    /// pruner deletes them (default 7 days); `None` turns pruning off.
    pub fn retention(mut self, keep: Option<Duration>) -> Self {
        self.settings.retention = keep;
        self
    }

    /// Limits how fast jobs of `queue` start, across every process sharing
    /// the store: a token bucket of `limit.burst` refilled at
    /// `limit.per_second` (kept in the database, so the rate is global).
    pub fn rate_limit(mut self, queue: &str, limit: RateLimit) -> Result<Self> {
        limit.validate()?;
        let name = Name::parse("queue", queue)?;
        self.settings.rates.insert(name, limit);
        Ok(self)
    }

    /// Limits how fast the jobs of each concurrency key of `queue` start
    /// (a token bucket per key, shared by every process through the store).
    /// A claimed job whose key is out of tokens is snoozed — no attempt
    /// spent — until its key's bucket has refilled for it.
    pub fn key_rate(mut self, queue: &str, limit: RateLimit) -> Result<Self> {
        limit.validate()?;
        let name = Name::parse("queue", queue)?;
        self.settings.key_rates.insert(name, limit);
        Ok(self)
    }

    /// Enqueues `schedule`'s job at every tick while the runtime runs
    /// (exactly once per tick across every process running it).
    pub fn cron(mut self, schedule: CronSchedule) -> Self {
        self.settings.schedules.push(schedule);
        self
    }

    /// Whether the runtime also enqueues the schedules stored in the
    /// database (`errand schedule add`, [`crate::Admin::add_schedule`]),
    /// read again at every pass and at least every 10 s (default on). They
    /// are read through the operator's seam, so a runtime built with
    /// [`RuntimeBuilder::new`] from a worker's store alone never runs them.
    pub fn stored_schedules(mut self, on: bool) -> Self {
        self.settings.stored_schedules = on;
        self
    }

    /// The default retry policy and its jitter source.
    pub fn retry(mut self, policy: RetryPolicy, sampler: crate::Sampler) -> Self {
        self.settings.retry = policy;
        self.settings.sampler = sampler;
        self
    }

    /// Calls `hook` with the report of every settled attempt (for logs or
    /// output).
    pub fn on_report(mut self, hook: ReportHook) -> Self {
        self.settings.on_report = Some(hook);
        self
    }

    /// How often this process reports itself to the store (its last
    /// completed claim cycle and its counters, read by `errand stats` and
    /// `/metrics`); `None` never reports. Default: every 5 seconds. A
    /// report is written only when a claim cycle completed since the last
    /// one or jobs are running, so a worker whose claims fail (and that has
    /// nothing running) falls silent and its age shows.
    ///
    /// The same cadence writes the per-minute counts behind the dashboard's
    /// charts (jobs finished, dead, retries by class, lateness and wait from
    /// due to start, per queue), and once a minute each queue's depth and
    /// oldest due age are sampled; `None` writes none of them.
    pub fn report_every(mut self, every: Option<Duration>) -> Self {
        self.settings.report_every = every;
        self
    }

    /// Checks the configuration.
    pub fn build(self) -> Result<Runtime> {
        if self.queues.is_empty() {
            return Err(Error::invalid(
                "configure at least one queue (or all_queues)",
            ));
        }
        for q in self.settings.rates.keys() {
            if !self.queues.iter().any(|(name, _)| name.as_ref() == Some(q)) {
                return Err(Error::invalid(format!(
                    "a rate limit is set for queue `{q}`, which this runtime does not run"
                )));
            }
        }
        for q in self.settings.key_rates.keys() {
            if !self
                .queues
                .iter()
                .any(|(name, _)| name.is_none() || name.as_ref() == Some(q))
            {
                return Err(Error::invalid(format!(
                    "a per-key rate is set for queue `{q}`, which this runtime does not run"
                )));
            }
        }
        if self.settings.kinds.is_empty() && self.settings.fallback.is_none() {
            return Err(Error::invalid("register at least one handler"));
        }
        for d in [
            self.settings.lease,
            self.settings.poll,
            self.settings.sweep_every,
        ] {
            if d.is_zero() {
                return Err(Error::invalid(
                    "lease, poll and sweep intervals must be longer than zero",
                ));
            }
        }
        errand_core::bounds::check_lease("the lease", self.settings.lease)?;
        if self.settings.report_every.is_some_and(|d| d.is_zero()) {
            return Err(Error::invalid(
                "the report interval must be longer than zero (or None)",
            ));
        }
        let named: Vec<Name> = self.queues.iter().filter_map(|(q, _)| q.clone()).collect();
        let all = self.queues.iter().any(|(q, _)| q.is_none());
        Ok(Runtime {
            inner: Arc::new(Inner {
                settings: self.settings,
                me: Me {
                    id: uuid::Uuid::now_v7().to_string(),
                    host: crate::worker::host_name(),
                    pid: std::process::id(),
                    queues: if all { Vec::new() } else { named },
                    started_at: errand_core::Timestamp::now(),
                },
                metrics: Mutex::new(WorkerMetrics::default()),
                minutes: MinuteCounter::new(),
                acks: Arc::new(Acks::default()),
                in_flight: Mutex::new(HashMap::new()),
                stats: Mutex::new(RunStats::default()),
            }),
            queues: self.queues,
            drain: self.drain,
        })
    }
}

/// Who this worker process is, as its reports say.
struct Me {
    id: String,
    host: String,
    pid: u32,
    queues: Vec<Name>,
    started_at: errand_core::Timestamp,
}

struct Inner {
    settings: Settings,
    me: Me,
    /// What this process has counted, reported every few seconds.
    metrics: Mutex<WorkerMetrics>,
    /// The charts' per-minute counts, written with the reports.
    minutes: MinuteCounter,
    /// Acknowledgments waiting to be written.
    acks: Arc<Acks>,
    /// Running jobs: their lease and the token that stops them.
    in_flight: Mutex<HashMap<JobId, (Lease, CancellationToken)>>,
    stats: Mutex<RunStats>,
}

/// The worker service. See the module documentation.
pub struct Runtime {
    inner: Arc<Inner>,
    queues: Vec<(Option<Name>, usize)>,
    drain: Duration,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("queues", &self.queues)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Starts building a runtime over `store`: its worker's seam for the
    /// jobs, its operator's seam for stored schedules and the queues' depth
    /// on the charts.
    pub fn builder(store: Arc<dyn Store>) -> RuntimeBuilder {
        let operator: Arc<dyn AdminStore> = store.clone();
        let mut builder = RuntimeBuilder::new(store);
        builder.settings.operator = Some(operator);
        builder
    }
}

impl RuntimeBuilder {
    /// Starts building a runtime over a worker's store alone: it claims,
    /// runs and settles jobs, sweeps, prunes, enqueues the cron schedules
    /// given in code and reports itself, but reads nothing through the
    /// operator's seam, so stored schedules and the queues' depth samples
    /// are off. [`Runtime::builder`] takes a whole store and runs them too.
    pub fn new(store: Arc<dyn WorkerStore>) -> RuntimeBuilder {
        RuntimeBuilder {
            queues: Vec::new(),
            drain: Duration::from_secs(30),
            settings: Settings {
                store,
                operator: None,
                kinds: HashMap::new(),
                fallback: None,
                lease: Duration::from_secs(30),
                poll: Duration::from_secs(1),
                batch: 32,
                sweep_every: Duration::from_secs(30),
                retention: Some(Duration::from_secs(7 * 86_400)),
                schedules: Vec::new(),
                stored_schedules: true,
                rates: HashMap::new(),
                key_rates: HashMap::new(),
                retry: RetryPolicy::default(),
                sampler: Arc::new(rand::random::<f64>),
                on_report: None,
                report_every: Some(Duration::from_secs(5)),
            },
        }
    }
}

impl Runtime {
    /// Runs until `shutdown` completes, then drains. Returns what it did.
    pub async fn run_until<F: Future<Output = ()>>(self, shutdown: F) -> Result<RunStats> {
        let (stop_tx, stop_rx) = watch::channel(false);
        let completer = {
            let (store, acks) = (self.inner.settings.store.clone(), self.inner.acks.clone());
            tokio::spawn(complete_in_batches(store, acks))
        };
        let mut claimers = JoinSet::new();
        let jobs = Arc::new(Mutex::new(JoinSet::new()));
        for (queue, concurrency) in &self.queues {
            let slots = Arc::new(Semaphore::new(*concurrency));
            let n: usize = std::env::var("ERRAND_CLAIMERS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            for _ in 0..n {
                let inner = self.inner.clone();
                let (queue, slots) = (queue.clone(), slots.clone());
                let (stop, jobs) = (stop_rx.clone(), jobs.clone());
                claimers.spawn(async move { inner.claim_loop(queue, slots, stop, jobs).await });
            }
        }
        let maintenance = {
            let (inner, mut stop) = (self.inner.clone(), stop_rx.clone());
            tokio::spawn(async move {
                let mut sweeper = Sweeper::new(inner.settings.store.clone());
                sweeper.every = inner.settings.sweep_every;
                let pruner = inner.settings.retention.map(|keep| {
                    let mut p = Pruner::new(inner.settings.store.clone());
                    p.keep = keep;
                    p
                });
                let cron = {
                    let mut c = CronEnqueuer::new(
                        inner.settings.store.clone(),
                        inner.settings.schedules.clone(),
                    );
                    if inner.settings.stored_schedules
                        && let Some(operator) = &inner.settings.operator
                    {
                        c = c.with_stored_schedules(operator.clone());
                    }
                    (!c.is_empty()).then_some(c)
                };
                let next_cron = |cron: &Option<CronEnqueuer>| {
                    let now = errand_core::Timestamp::now();
                    cron.as_ref()
                        .and_then(|c| c.next_wake(now))
                        .map_or(Duration::from_secs(60), |t| t.since(now))
                        .min(Duration::from_secs(60))
                };
                if let Some(c) = &cron
                    && let Err(e) = c.run_once(errand_core::Timestamp::now()).await
                {
                    tracing::warn!(error = %e, "enqueueing cron ticks failed");
                }
                let cron_sleep = tokio::time::sleep(next_cron(&cron));
                tokio::pin!(cron_sleep);
                let mut sweep = tokio::time::interval(sweeper.every);
                let mut report = tokio::time::interval(
                    inner
                        .settings
                        .report_every
                        .unwrap_or(Duration::from_secs(3600)),
                );
                let mut reported_cycles = 0;
                // Queue depths are sampled once a minute (first at start).
                let mut sample = tokio::time::interval(Duration::from_secs(60));
                let mut sampled = std::collections::BTreeSet::new();
                let mut prune = tokio::time::interval(
                    pruner
                        .as_ref()
                        .map_or(Duration::from_secs(3600), |p| p.every),
                );
                loop {
                    tokio::select! {
                        _ = sweep.tick() => match sweeper.run_once().await {
                            Ok(dead) if !dead.is_empty() => {
                                tracing::warn!(count = dead.len(), "expired leases with no budget left moved to dead");
                            }
                            Ok(_) => {}
                            Err(e) => tracing::warn!(error = %e, "the expired-lease sweep failed"),
                        },
                        _ = prune.tick(), if pruner.is_some() => {
                            if let Some(p) = &pruner {
                                match p.run_once().await {
                                    Ok(n) if n > 0 => tracing::info!(deleted = n, "pruned finished jobs"),
                                    Ok(_) => {}
                                    Err(e) => tracing::warn!(error = %e, "pruning failed"),
                                }
                            }
                        }
                        () = &mut cron_sleep, if cron.is_some() => {
                            if let Some(c) = &cron
                                && let Err(e) = c.run_once(errand_core::Timestamp::now()).await
                            {
                                tracing::warn!(error = %e, "enqueueing cron ticks failed");
                            }
                            cron_sleep.as_mut().reset(tokio::time::Instant::now() + next_cron(&cron));
                        }
                        _ = report.tick(), if inner.settings.report_every.is_some() => {
                            reported_cycles = inner.report(reported_cycles).await;
                            if let Err(e) = inner.minutes.flush(inner.settings.store.as_ref()).await {
                                tracing::warn!(error = %e, "writing the charts' per-minute counts failed; they are kept for the next report");
                            }
                        }
                        _ = sample.tick(), if inner.settings.report_every.is_some() => {
                            if let Some(operator) = &inner.settings.operator {
                                match crate::minutes::sample_queues(operator.as_ref(), inner.settings.store.as_ref(), &sampled, errand_core::Timestamp::now()).await {
                                    Ok(seen) => sampled = seen,
                                    Err(e) => tracing::warn!(error = %e, "sampling the queues' depth for the charts failed"),
                                }
                            }
                        }
                        _ = stop.changed() => return,
                    }
                }
            })
        };
        shutdown.await;
        tracing::info!("draining: no more claims; waiting for in-flight jobs");
        let _ = stop_tx.send(true);
        while let Some(r) = claimers.join_next().await {
            if let Err(e) = r {
                tracing::error!(error = %e, "a claimer task failed");
            }
        }
        maintenance.abort();
        let mut running = std::mem::take(&mut *lock(&jobs));
        let finished = tokio::time::timeout(self.drain, async {
            while running.join_next().await.is_some() {}
        })
        .await;
        if finished.is_err() {
            let left: Vec<(Lease, CancellationToken)> =
                lock(&self.inner.in_flight).values().cloned().collect();
            tracing::warn!(
                count = left.len(),
                "drain deadline passed: releasing unfinished jobs"
            );
            for (_, token) in &left {
                token.cancel();
            }
            // Each job task releases its own job once stopped.
            while running.join_next().await.is_some() {}
        }
        completer.abort();
        // What was counted since the last report, so a drained worker's
        // last jobs show on the charts too.
        if self.inner.settings.report_every.is_some()
            && let Err(e) = self
                .inner
                .minutes
                .flush(self.inner.settings.store.as_ref())
                .await
        {
            tracing::warn!(error = %e, "writing the charts' last per-minute counts failed");
        }
        Ok(lock(&self.inner.stats).clone())
    }
}

/// The rate limit of a claimer's queue, if it runs exactly one named queue
/// that has one.
fn queue_rate<'a>(
    queues: &'a [Name],
    rates: &HashMap<Name, RateLimit>,
) -> Option<(&'a Name, RateLimit)> {
    match queues {
        [q] => rates.get(q).map(|r| (q, *r)),
        _ => None,
    }
}

/// How long a claimer whose claim came up short waits (unless woken)
/// before claiming again. A rate-limited claim may have come up short
/// because the bucket ran dry rather than the queue: while jobs are
/// starting (this claim or the one before started some), it looks again
/// when the next token is due; after two claims in a row started nothing,
/// the queue is idle and it waits the poll interval, as an unlimited
/// claimer does.
fn idle_wait(rate: Option<&ClaimRate>, starting: bool, poll: Duration) -> Duration {
    match rate {
        Some(rate) if starting => Duration::try_from_secs_f64(1.0 / rate.limit.per_second)
            .unwrap_or(poll)
            .min(poll),
        _ => poll,
    }
}

/// A job's acknowledgment and where to send the verdict.
type Completion = (Lease, oneshot::Sender<Result<bool>>);

/// A failed attempt to record and where to send the job as recorded
/// (`None`: the lease was lost).
type FailureWait = (Lease, Failure, oneshot::Sender<Result<Option<Job>>>);

/// Most settlements of one kind in one statement.
const MAX_COMPLETION_BATCH: usize = 512;

/// A settlement waiting to be written, which can be told it never will be.
trait Waiting {
    fn refuse(self, e: Error);
}

impl Waiting for Completion {
    fn refuse(self, e: Error) {
        let _ = self.1.send(Err(e));
    }
}

impl Waiting for FailureWait {
    fn refuse(self, e: Error) {
        let _ = self.2.send(Err(e));
    }
}

/// Settlements of one kind waiting to be written; `None` once closed.
struct Queue<T>(Mutex<Option<Vec<T>>>);

impl<T: Waiting> Queue<T> {
    fn new() -> Self {
        Queue(Mutex::new(Some(Vec::new())))
    }

    /// Queues `item`; false (and `item` answered `Closed`) once closed.
    fn push(&self, item: T) -> bool {
        match lock(&self.0).as_mut() {
            Some(pending) => {
                pending.push(item);
                true
            }
            None => {
                item.refuse(closed());
                false
            }
        }
    }

    /// Takes up to [`MAX_COMPLETION_BATCH`] waiting items.
    fn take(&self) -> Vec<T> {
        match lock(&self.0).as_mut() {
            Some(pending) => {
                let n = pending.len().min(MAX_COMPLETION_BATCH);
                pending.drain(..n).collect()
            }
            None => Vec::new(),
        }
    }

    /// Puts a batch back in front; false (and each answered `Closed`) once
    /// closed.
    fn requeue(&self, batch: Vec<T>) -> bool {
        match lock(&self.0).as_mut() {
            Some(pending) => {
                pending.splice(0..0, batch);
                true
            }
            None => {
                for item in batch {
                    item.refuse(closed());
                }
                false
            }
        }
    }

    fn close(&self) {
        let left = lock(&self.0).take().unwrap_or_default();
        for item in left {
            item.refuse(closed());
        }
    }
}

/// Settlements waiting to be written. Acknowledgments are taken by the
/// batcher, or by a claimer about to claim, which sends them in the same
/// transaction ([`JobStore::complete_and_claim`](errand_core::JobStore::complete_and_claim)); failures by the batcher,
/// which records those that arrived together in one statement
/// ([`JobStore::fail_many`](errand_core::JobStore::fail_many)). Each is taken by exactly one writer. Once the
/// batcher has stopped (shutdown, or a panic), every waiting and later
/// settlement is answered `Closed` rather than left waiting.
struct Acks {
    acks: Queue<Completion>,
    failures: Queue<FailureWait>,
    arrived: Notify,
}

impl Default for Acks {
    fn default() -> Self {
        Acks {
            acks: Queue::new(),
            failures: Queue::new(),
            arrived: Notify::new(),
        }
    }
}

impl Acks {
    fn push(&self, completion: Completion) {
        if self.acks.push(completion) {
            self.arrived.notify_one();
        }
    }

    fn push_failure(&self, failure: FailureWait) {
        if self.failures.push(failure) {
            self.arrived.notify_one();
        }
    }

    /// Takes up to [`MAX_COMPLETION_BATCH`] waiting acknowledgments.
    fn take(&self) -> Vec<Completion> {
        self.acks.take()
    }

    /// Puts a batch of acknowledgments back in front, for the batcher.
    fn requeue(&self, batch: Vec<Completion>) {
        if self.acks.requeue(batch) {
            self.arrived.notify_one();
        }
    }

    fn close(&self) {
        self.acks.close();
        self.failures.close();
    }
}

fn closed() -> Error {
    Error::Closed("the completion batcher stopped".into())
}

/// Closes the settlement queues when the batcher stops, however it stops.
struct CloseOnDrop(Arc<Acks>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// Takes every settlement waiting and writes them: the acknowledgments in
/// one [`JobStore::complete_many`](errand_core::JobStore::complete_many) call, the failures in one
/// [`JobStore::fail_many`](errand_core::JobStore::fail_many) call.
async fn complete_in_batches(store: Arc<dyn WorkerStore>, acks: Arc<Acks>) {
    let _closing = CloseOnDrop(acks.clone());
    loop {
        let batch = acks.take();
        let failures = acks.failures.take();
        if batch.is_empty() && failures.is_empty() {
            acks.arrived.notified().await;
            continue;
        }
        if !batch.is_empty() {
            let leases: Vec<Lease> = batch.iter().map(|(l, _)| l.clone()).collect();
            crate::probe::acks_sending(&leases);
            let result = store.complete_many(&leases).await;
            answer(batch, &leases, result);
        }
        if !failures.is_empty() {
            let items: Vec<(Lease, Failure)> = failures
                .iter()
                .map(|(l, f, _)| (l.clone(), f.clone()))
                .collect();
            let result = store.fail_many(&items).await;
            answer_failures(failures, result);
        }
    }
}

/// Tells each waiter of a batch of failures the job as recorded.
fn answer_failures(batch: Vec<FailureWait>, result: Result<Vec<Option<Job>>>) {
    match result {
        Ok(jobs) if jobs.len() == batch.len() => {
            for ((_, _, reply), job) in batch.into_iter().zip(jobs) {
                let _ = reply.send(Ok(job));
            }
        }
        Ok(_) => {
            for (_, _, reply) in batch {
                let _ = reply.send(Err(Error::storage(
                    "the store answered a batch of failures with the wrong count",
                )));
            }
        }
        Err(e) => {
            for (_, _, reply) in batch {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

/// Tells each waiter of a batch acknowledgment its verdict.
fn answer(batch: Vec<Completion>, leases: &[Lease], result: Result<Vec<bool>>) {
    match result {
        Ok(acked) if acked.len() == batch.len() => {
            // Committed, and no waiter told yet.
            crate::probe::acks_committed(leases, &acked);
            for ((_, reply), ok) in batch.into_iter().zip(acked) {
                let _ = reply.send(Ok(ok));
            }
        }
        Ok(_) => {
            for (_, reply) in batch {
                let _ = reply.send(Err(Error::storage(
                    "the store answered a batch acknowledgment with the wrong count",
                )));
            }
        }
        Err(e) => {
            // Every waiter gets the error itself, class included (a
            // full disk stays `StorageFull`).
            for (_, reply) in batch {
                let _ = reply.send(Err(e.clone()));
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inner {
    /// Counts a completed claim cycle and the attempts it started.
    fn record_cycle(&self, claimed: &[ClaimedJob]) {
        lock(&self.metrics).record_cycle(claimed);
        if self.settings.report_every.is_some() {
            self.minutes.started(claimed);
        }
    }

    /// Counts a success against the job's business deadline, if it has one.
    fn record_success(&self, deadline: Option<errand_core::Timestamp>) {
        lock(&self.metrics).record_success(deadline, errand_core::Timestamp::now());
    }

    /// Writes this process's report if a claim cycle completed since the
    /// last one or jobs are running; returns the cycle count reported (or
    /// still unreported).
    async fn report(&self, reported_cycles: u64) -> u64 {
        let metrics = lock(&self.metrics).clone();
        // A worker whose every slot is busy claims nothing until one frees
        // up: with jobs in flight it is working, not stalled.
        let busy = !lock(&self.in_flight).is_empty();
        if metrics.cycles == reported_cycles && !busy {
            return reported_cycles;
        }
        let report = WorkerReport {
            id: self.me.id.clone(),
            host: self.me.host.clone(),
            pid: self.me.pid,
            queues: self.me.queues.clone(),
            started_at: self.me.started_at,
            metrics,
            one_shot: false,
        };
        match self.settings.store.report_worker(&report).await {
            Ok(()) => report.metrics.cycles,
            Err(e) => {
                tracing::warn!(error = %e, "writing this worker's report failed");
                reported_cycles
            }
        }
    }

    async fn claim_loop(
        self: Arc<Self>,
        queue: Option<Name>,
        slots: Arc<Semaphore>,
        mut stop: watch::Receiver<bool>,
        jobs: Arc<Mutex<JoinSet<()>>>,
    ) {
        let mut signal = self.settings.store.work_signal();
        let queues: Vec<Name> = queue.into_iter().collect();
        // The claim itself spends the queue's tokens, one per job it
        // claims: a claim that finds nothing due spends none.
        let rate = queue_rate(&queues, &self.settings.rates).map(|(name, limit)| ClaimRate {
            bucket: RateBucket::queue(name),
            limit,
        });
        // Whether the last claim started anything.
        let mut was_starting = false;
        // When a claim last looked for expired leases: a claimer looks once
        // per poll interval (see `ClaimRequest::reclaim`), busy or idle (an
        // idle one wakes at least that often).
        let mut reclaimed_at: Option<tokio::time::Instant> = None;
        while !*stop.borrow() {
            // Wait for one free slot, then take every other free one.
            let first = tokio::select! {
                p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
                _ = stop.changed() => return,
            };
            let mut permits = vec![first];
            while permits.len() < self.settings.batch as usize {
                match slots.clone().try_acquire_owned() {
                    Ok(p) => permits.push(p),
                    Err(_) => break,
                }
            }
            let req = ClaimRequest {
                queues: queues.clone(),
                limit: u32::try_from(permits.len()).unwrap_or(self.settings.batch),
                lease: self.settings.lease,
                rate: rate.clone(),
                reclaim: reclaimed_at.is_none_or(|at| at.elapsed() >= self.settings.poll),
            };
            if req.reclaim {
                reclaimed_at = Some(tokio::time::Instant::now());
            }
            let claimed = match self.claim_with_acks(&req).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "claim failed; retrying after the poll interval");
                    drop(permits);
                    tokio::select! {
                        _ = tokio::time::sleep(self.settings.poll) => {}
                        _ = stop.changed() => {}
                    }
                    continue;
                }
            };
            self.record_cycle(&claimed);
            if !claimed.is_empty() {
                crate::probe::claimed(&claimed);
                crate::probe::at(crate::probe::Point::ClaimCommitted);
            }
            let asked = permits.len();
            let got = claimed.len();
            let claimed = self.hold_back_over_rate_keys(claimed).await;
            // Jobs held back by a key's rate count as idle capacity: wait
            // before claiming again rather than churning through the key.
            let idle = got < asked || claimed.len() < got;
            for claimed in claimed {
                let Some(permit) = permits.pop() else { break };
                let token = CancellationToken::new();
                lock(&self.in_flight).insert(
                    claimed.job.id.clone(),
                    (claimed.lease.clone(), token.clone()),
                );
                let me = self.clone();
                let mut set = lock(&jobs);
                // Reap finished tasks so a long-running service holds none.
                while set.try_join_next().is_some() {}
                // Boxed: the attempt's state machine is large, and tokio
                // moves a task's future by value when it creates and
                // finishes the task; a box makes those moves a pointer's.
                set.spawn(Box::pin(async move {
                    me.run_job(claimed, token, permit).await;
                }));
            }
            drop(permits);
            let starting = got > 0;
            if idle {
                let wait = idle_wait(rate.as_ref(), starting || was_starting, self.settings.poll);
                tokio::select! {
                    _ = signal.wait(wait) => {}
                    _ = stop.changed() => {}
                }
            }
            was_starting = starting;
        }
    }

    /// Claims, sending the acknowledgments waiting (if any) in the same
    /// transaction: a busy worker settles one batch as it takes the next.
    async fn claim_with_acks(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        let store = self.settings.store.as_ref();
        let batch = self.acks.take();
        if batch.is_empty() {
            return store.claim(req).await;
        }
        let leases: Vec<Lease> = batch.iter().map(|(l, _)| l.clone()).collect();
        crate::probe::acks_sending(&leases);
        match store.complete_and_claim(&leases, req).await {
            Ok((acked, claimed)) => {
                answer(batch, &leases, Ok(acked));
                claimed
            }
            Err(e) => {
                // Nothing was acknowledged (or, in a case the store cannot
                // tell, everything was): the batcher writes them again on
                // their own, fenced, so a claim's failure costs them
                // nothing.
                self.acks.requeue(batch);
                Err(e)
            }
        }
    }

    /// Takes one token per claimed job from its key's bucket (for queues
    /// with a per-key rate) and snoozes the jobs their key could not cover,
    /// the k-th of them by k / rate, when the bucket will have refilled
    /// for it. Returns the jobs to run.
    async fn hold_back_over_rate_keys(&self, claimed: Vec<ClaimedJob>) -> Vec<ClaimedJob> {
        let rates = &self.settings.key_rates;
        if rates.is_empty() {
            return claimed;
        }
        let mut buckets: HashMap<RateBucket, (RateLimit, Vec<usize>)> = HashMap::new();
        for (i, c) in claimed.iter().enumerate() {
            if let (Some(key), Some(rate)) = (&c.job.key, rates.get(&c.job.queue)) {
                buckets
                    .entry(RateBucket::key(&c.job.queue, key))
                    .or_insert_with(|| (*rate, Vec::new()))
                    .1
                    .push(i);
            }
        }
        let store = self.settings.store.as_ref();
        let mut held = HashSet::new();
        for (bucket, (rate, jobs)) in buckets {
            let want = u32::try_from(jobs.len()).unwrap_or(u32::MAX);
            let granted = match store.take_tokens(&bucket, rate, want).await {
                Ok(g) => g as usize,
                Err(e) => {
                    tracing::warn!(%bucket, error = %e, "taking key-rate tokens failed; holding the key's jobs back");
                    0
                }
            };
            for (k, &i) in jobs.iter().enumerate().skip(granted) {
                held.insert(i);
                let wait = (k - granted + 1) as f64 / rate.per_second;
                let lease = &claimed[i].lease;
                if let Err(e) = store.snooze(lease, Duration::from_secs_f64(wait)).await {
                    // The lease expires and the job comes back then.
                    tracing::warn!(job = %lease.id, error = %e, "snoozing a job over its key's rate failed");
                }
            }
        }
        claimed
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !held.contains(i))
            .map(|(_, c)| c)
            .collect()
    }

    /// Acknowledges through the completion batcher: the acknowledgments of
    /// jobs finishing together share one statement, each still fenced by
    /// its own token and lease.
    async fn acknowledge(&self, lease: &Lease) -> Result<WorkReport> {
        let (tx, rx) = oneshot::channel();
        self.acks.push((lease.clone(), tx));
        let acked = rx
            .await
            .map_err(|_| Error::Closed("the completion batcher stopped".into()))??;
        Ok(WorkReport {
            outcome: if acked {
                WorkOutcome::Acknowledged
            } else {
                WorkOutcome::LeaseLost
            },
            job_id: Some(lease.id.clone()),
            attempt: Some(lease.attempt),
            acknowledged: acked,
            available_at: None,
            error: None,
        })
    }

    async fn run_job(
        &self,
        claimed: errand_core::ClaimedJob,
        token: CancellationToken,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) {
        let lease = claimed.lease.clone();
        let kind = self.settings.kinds.get(claimed.job.kind.as_str()).cloned();
        let (handler, options) = match (&kind, &self.settings.fallback) {
            (Some(k), _) => (k.handler.clone(), k.options.clone()),
            (None, Some(f)) => (f.clone(), KindOptions::default()),
            (None, None) => {
                let kind = claimed.job.kind.clone();
                let missing: Arc<dyn Handler> = Arc::new(handler_fn(move |_ctx| {
                    let kind = kind.clone();
                    async move {
                        Outcome::retry(format!(
                            "no handler for kind `{kind}` is registered in this worker"
                        ))
                    }
                }));
                (missing, KindOptions::default())
            }
        };
        let run = Execution {
            store: self.settings.store.clone(),
            lease: self.settings.lease,
            heartbeat: true,
            deadline: options.deadline,
        };
        // Only the deadline outlives the attempt (no copy of the job and its
        // payload on every run).
        let deadline = claimed.job.deadline;
        let queue = self
            .settings
            .report_every
            .map(|_| claimed.job.queue.clone());
        let job = &claimed.job;
        let span = crate::spans::attempt_span(job, lease.attempt);
        let outcome =
            tracing::Instrument::instrument(run.execute(handler, claimed, token), span.clone())
                .await;
        let class = outcome.as_ref().and_then(errand_core::Outcome::error_class);
        // The slot is for running handlers: settling waits for the next
        // claim's transaction (or the batcher's), and holding the slot
        // through it would keep the next claim small.
        drop(slot);
        if outcome.is_some() {
            crate::probe::at(crate::probe::Point::BeforeSettle);
        }
        let report = match outcome {
            Some(Outcome::Success) => self.acknowledge(&lease).await,
            Some(outcome) => {
                let policy = options.retry.as_ref().unwrap_or(&self.settings.retry);
                settle(
                    self.settings.store.as_ref(),
                    self,
                    &lease,
                    outcome,
                    policy,
                    self.settings.sampler.as_ref(),
                )
                .await
            }
            None => release(self.settings.store.as_ref(), &lease).await,
        };
        crate::spans::record_attempt(&span, class, &report);
        drop(span);
        lock(&self.in_flight).remove(&lease.id);
        match report {
            Ok(r) => {
                if r.acknowledged {
                    crate::probe::at(crate::probe::Point::SettleCommitted);
                }
                if r.outcome == WorkOutcome::Acknowledged {
                    self.record_success(deadline);
                }
                if let Some(queue) = &queue {
                    self.minutes.settled(queue, r.outcome, class, deadline);
                }
                tracing::debug!(job = %lease.id, attempt = lease.attempt, outcome = r.outcome.as_str(), "attempt settled");
                *lock(&self.stats)
                    .outcomes
                    .entry(r.outcome.as_str())
                    .or_insert(0) += 1;
                if let Some(hook) = &self.settings.on_report {
                    hook(&r);
                }
            }
            Err(e) => {
                // The lease will expire and the job will be reclaimed.
                tracing::warn!(job = %lease.id, error = %e, "settling failed; the job returns after its lease");
                *lock(&self.stats)
                    .outcomes
                    .entry("settle_failed")
                    .or_insert(0) += 1;
            }
        }
    }
}

/// Failures go through the batcher: those that arrive together are
/// recorded in one statement, each still fenced by its own token and lease.
#[async_trait::async_trait]
impl FailureSink for Inner {
    async fn record(&self, lease: &Lease, failure: Failure) -> Result<Job> {
        let (tx, rx) = oneshot::channel();
        self.acks.push_failure((lease.clone(), failure, tx));
        let recorded = rx
            .await
            .map_err(|_| Error::Closed("the completion batcher stopped".into()))??;
        recorded.ok_or_else(|| Error::LeaseLost {
            id: lease.id.to_string(),
            attempt: lease.attempt,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use async_trait::async_trait;
    use errand_core::{
        Failure, Inserted, Job, JobStore, LeaseToken, NewJob, Notifier, SweepReport, Timestamp,
        WorkSignal,
    };

    /// A store on a full disk: every call fails with `StorageFull`.
    #[derive(Debug)]
    struct FullDisk;

    fn full<T>() -> Result<T> {
        Err(Error::StorageFull("database or disk is full".into()))
    }

    #[derive(Debug)]
    struct Never;

    #[async_trait]
    impl WorkSignal for Never {
        async fn wait(&mut self, timeout: Duration) -> bool {
            tokio::time::sleep(timeout).await;
            false
        }
    }

    #[async_trait]
    impl JobStore for FullDisk {
        async fn insert(&self, _: NewJob) -> Result<Inserted> {
            full()
        }
        async fn insert_many(&self, _: Vec<NewJob>) -> Result<Vec<Inserted>> {
            full()
        }
        async fn claim(&self, _: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
            full()
        }
        async fn complete(&self, _: &Lease) -> Result<Job> {
            full()
        }
        async fn complete_many(&self, _: &[Lease]) -> Result<Vec<bool>> {
            full()
        }
        async fn complete_with_output(&self, _: &Lease, _: &errand_core::Payload) -> Result<Job> {
            full()
        }
        async fn dependency_outputs(
            &self,
            _: &JobId,
        ) -> Result<Vec<(JobId, Option<errand_core::Payload>)>> {
            full()
        }
        async fn fail(&self, _: &Lease, _: Failure) -> Result<Job> {
            full()
        }
        async fn snooze(&self, _: &Lease, _: Duration) -> Result<Job> {
            full()
        }
        async fn cancel_running(&self, _: &Lease, _: &str) -> Result<Job> {
            full()
        }
        async fn heartbeat(&self, _: &Lease, _: Duration) -> Result<Timestamp> {
            full()
        }
        async fn heartbeat_with_progress(
            &self,
            _: &Lease,
            _: Duration,
            _: &errand_core::Progress,
        ) -> Result<Timestamp> {
            full()
        }
        async fn seal_batch(&self, _: &errand_core::BatchSeal) -> Result<errand_core::Batch> {
            full()
        }
        async fn release(&self, _: &Lease) -> Result<Job> {
            full()
        }
        async fn sweep_expired(&self) -> Result<SweepReport> {
            full()
        }
        async fn prune(&self, _: Duration, _: u32) -> Result<u64> {
            full()
        }
        async fn get(&self, _: &JobId) -> Result<Job> {
            full()
        }
        async fn take_tokens(&self, _: &RateBucket, _: RateLimit, _: u32) -> Result<u32> {
            full()
        }
        async fn report_worker(&self, _: &errand_core::WorkerReport) -> Result<()> {
            full()
        }
        async fn record_minutes(&self, _: &[errand_core::MinuteCount]) -> Result<()> {
            full()
        }
        async fn prune_minutes(&self, _: i64) -> Result<u64> {
            full()
        }
    }

    impl Notifier for FullDisk {
        fn work_signal(&self) -> Box<dyn WorkSignal> {
            Box::new(Never)
        }
    }

    /// Once the batcher has stopped, however it stopped, no acknowledgment
    /// waits for it: those waiting and those arriving later are answered
    /// `Closed` (a job's task would otherwise wait forever, and a drain
    /// with it).
    #[tokio::test]
    async fn acknowledgments_are_answered_closed_once_the_batcher_stops() {
        let acks = Arc::new(Acks::default());
        let lease = |n: u32| Lease {
            id: JobId::new(format!("job-{n}")).unwrap(),
            token: LeaseToken::generate(),
            attempt: 1,
        };
        let (reply, waiting) = oneshot::channel();
        acks.push((lease(1), reply));
        // A batcher that stops (aborted here; a panic drops it the same way)
        // before writing anything.
        let batcher = tokio::spawn({
            let acks = acks.clone();
            async move {
                let _closing = CloseOnDrop(acks);
                std::future::pending::<()>().await;
            }
        });
        tokio::task::yield_now().await;
        batcher.abort();
        let _ = batcher.await;
        assert!(matches!(waiting.await.unwrap(), Err(Error::Closed(_))));
        let (reply, later) = oneshot::channel();
        acks.push((lease(2), reply));
        assert!(matches!(later.await.unwrap(), Err(Error::Closed(_))));
        assert!(acks.take().is_empty());
    }

    /// Found by the harness's disk-full plan: a batched acknowledgment that
    /// failed reached every waiting job as a generic storage error, so the
    /// worker reported "storage error: the database storage is full" and
    /// the class (`StorageFull`: free space, then retry) was lost.
    #[tokio::test]
    async fn a_batch_acknowledgment_on_a_full_disk_stays_storage_full_for_every_job() {
        let acks = Arc::new(Acks::default());
        let batcher = tokio::spawn(complete_in_batches(Arc::new(FullDisk), acks.clone()));
        let mut waiting = Vec::new();
        for n in 0..3 {
            let (reply, verdict) = oneshot::channel();
            let lease = Lease {
                id: JobId::new(format!("job-{n}")).unwrap(),
                token: LeaseToken::generate(),
                attempt: 1,
            };
            acks.push((lease, reply));
            waiting.push(verdict);
        }
        for verdict in waiting {
            match verdict.await.unwrap() {
                Err(Error::StorageFull(m)) => assert!(m.contains("full"), "{m}"),
                other => panic!("expected StorageFull, got {other:?}"),
            }
        }
        batcher.abort();
    }
}
