//! Building a runtime: handlers by kind, queues, intervals and limits.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use errand_core::{
    AdminStore, CronSchedule, Error, JobArgs, Name, Outcome, RateLimit, Result, RetryPolicy, Store,
    WorkerMetrics, WorkerStore,
};
use serde::de::DeserializeOwned;

use super::acks::Acks;
use super::{Inner, Me, Runtime};
use crate::handler::{Handler, JobContext, handler_fn};
use crate::minutes::MinuteCounter;
use crate::work_report::{WorkOutcome, WorkReport};

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
pub(super) struct Kind {
    pub(super) handler: Arc<dyn Handler>,
    pub(super) options: KindOptions,
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
pub(super) struct Settings {
    pub(super) store: Arc<dyn WorkerStore>,
    /// The operator's seam, for the maintenance that reads it: stored
    /// schedules and the queues' depth on the charts. Without it neither
    /// runs.
    pub(super) operator: Option<Arc<dyn AdminStore>>,
    pub(super) kinds: HashMap<String, Kind>,
    pub(super) fallback: Option<Arc<dyn Handler>>,
    pub(super) lease: Duration,
    pub(super) poll: Duration,
    pub(super) batch: u32,
    pub(super) sweep_every: Duration,
    pub(super) retention: Option<Duration>,
    pub(super) schedules: Vec<CronSchedule>,
    pub(super) stored_schedules: bool,
    pub(super) rates: HashMap<Name, RateLimit>,
    pub(super) key_rates: HashMap<Name, RateLimit>,
    pub(super) retry: RetryPolicy,
    pub(super) sampler: crate::Sampler,
    pub(super) on_report: Option<ReportHook>,
    pub(super) report_every: Option<Duration>,
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
