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

mod acks;
mod attempt;
mod builder;
mod claimer;

pub use builder::{KindOptions, ReportHook, RunStats, RuntimeBuilder};

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use errand_core::{JobId, Lease, Name, Result, WorkerMetrics, WorkerReport};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::cron::CronEnqueuer;
use crate::maintenance::{DepthSampler, Maintainer, Pruner, Reporter, Reports, Sweeper, WaitTimer};
use crate::minutes::MinuteCounter;
use acks::{Acks, complete_in_batches};
use builder::Settings;

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
    /// Runs until `shutdown` completes, then drains. Returns what it did.
    pub async fn run_until<F: Future<Output = ()>>(self, shutdown: F) -> Result<RunStats> {
        let (stop_tx, stop) = watch::channel(false);
        let settings = &self.inner.settings;
        let completer = tokio::spawn(complete_in_batches(
            settings.store.clone(),
            self.inner.acks.clone(),
        ));
        let jobs = Arc::new(Mutex::new(JoinSet::new()));
        let mut claimers = self.inner.start_claimers(&self.queues, &stop, &jobs);
        let mut maintenance = self.inner.maintainer().start(&stop);
        shutdown.await;
        tracing::info!("draining: no more claims; waiting for in-flight jobs");
        let _ = stop_tx.send(true);
        while let Some(r) = claimers.join_next().await {
            if let Err(e) = r {
                tracing::error!(error = %e, "a claimer task failed");
            }
        }
        maintenance.abort_all();
        self.drain(&jobs).await;
        completer.abort();
        self.inner.flush_last_minutes().await;
        Ok(lock(&self.inner.stats).clone())
    }

    /// Waits for the running jobs until the drain deadline; then stops
    /// those still running, each of which releases its job.
    async fn drain(&self, jobs: &Mutex<JoinSet<()>>) {
        let mut running = std::mem::take(&mut *lock(jobs));
        let finished = tokio::time::timeout(self.drain, async {
            while running.join_next().await.is_some() {}
        })
        .await;
        if finished.is_ok() {
            return;
        }
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
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Inner {
    /// The maintenance services this runtime's settings ask for.
    fn maintainer(self: &Arc<Self>) -> Maintainer<Inner> {
        let s = &self.settings;
        let mut sweeper = Sweeper::new(s.store.clone());
        sweeper.every = s.sweep_every;
        let pruner = s.retention.map(|keep| {
            let mut p = Pruner::new(s.store.clone());
            p.keep = keep;
            p
        });
        let mut cron = CronEnqueuer::new(s.store.clone(), s.schedules.clone());
        if s.stored_schedules
            && let Some(operator) = &s.operator
        {
            cron = cron.with_stored_schedules(operator.clone());
        }
        let reports = s.report_every.map(|every| Reports {
            reporter: self.clone(),
            store: s.store.clone(),
            every,
        });
        let depth = match (&s.operator, s.report_every) {
            (Some(reads), Some(_)) => Some(DepthSampler {
                reads: reads.clone(),
                store: s.store.clone(),
            }),
            _ => None,
        };
        Maintainer {
            sweeper,
            waits: WaitTimer::new(s.store.clone()),
            pruner,
            schedules: (!cron.is_empty()).then_some(cron),
            reports,
            depth,
        }
    }

    /// Writes what was counted since the last report, so a drained
    /// worker's last jobs show on the charts too.
    async fn flush_last_minutes(&self) {
        if self.settings.report_every.is_some()
            && let Err(e) = self.minutes.flush(self.settings.store.as_ref()).await
        {
            tracing::warn!(error = %e, "writing the charts' last per-minute counts failed");
        }
    }
}

impl Reporter for Inner {
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

    fn minutes(&self) -> &MinuteCounter {
        &self.minutes
    }
}
