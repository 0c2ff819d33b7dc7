//! Maintenance services, on by default in the [`crate::Runtime`], one per
//! file, each with its own loop and configuration: the expired-lease sweep
//! ([`Sweeper`]), the waits for signals that time out ([`WaitTimer`]), retention ([`Pruner`]), cron schedules
//! (`schedules.rs`), the worker's reports and chart counts (`reports.rs`)
//! and the queues' depth samples (`charts.rs`). [`Maintainer`] starts the
//! ones a runtime is configured with. The sweep and the pruner are also a
//! config plus `run_once`, which tests and commands call directly.

mod charts;
mod prune;
mod reports;
mod schedules;
mod sweep;
mod waits;

pub(crate) use charts::DepthSampler;
pub use prune::Pruner;
pub(crate) use reports::{Reporter, Reports};
pub use sweep::Sweeper;
pub use waits::WaitTimer;

use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::cron::CronEnqueuer;

/// The services one runtime runs beside its claimers.
pub(crate) struct Maintainer<R> {
    pub(crate) sweeper: Sweeper,
    pub(crate) waits: WaitTimer,
    /// Retention (none: finished jobs are kept).
    pub(crate) pruner: Option<Pruner>,
    /// The cron schedules (none: nothing to enqueue).
    pub(crate) schedules: Option<CronEnqueuer>,
    /// The worker's reports (none: it does not report).
    pub(crate) reports: Option<Reports<R>>,
    /// The queues' depth for the charts (none without the operator's seam
    /// or without reports).
    pub(crate) depth: Option<DepthSampler>,
}

impl<R: Reporter> Maintainer<R> {
    /// Starts every configured service; each stops when `stop` changes (or
    /// when the set is aborted).
    pub(crate) fn start(self, stop: &watch::Receiver<bool>) -> JoinSet<()> {
        let mut services = JoinSet::new();
        services.spawn(self.sweeper.run(stop.clone()));
        services.spawn(self.waits.run(stop.clone()));
        if let Some(pruner) = self.pruner {
            services.spawn(pruner.run(stop.clone()));
        }
        if let Some(cron) = self.schedules {
            services.spawn(schedules::run(cron, stop.clone()));
        }
        if let Some(reports) = self.reports {
            services.spawn(reports.run(stop.clone()));
        }
        if let Some(depth) = self.depth {
            services.spawn(depth.run(stop.clone()));
        }
        services
    }
}
