//! A worker process's reports (what `errand stats` and the dashboard show
//! of each worker) and its charts' per-minute counts, written together.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use errand_core::JobStore;
use tokio::sync::watch;

use crate::minutes::MinuteCounter;

/// What a worker process reports of itself.
pub(crate) trait Reporter: Send + Sync + 'static {
    /// Writes the report if there is news since `reported_cycles` claim
    /// cycles were reported; returns the cycle count reported (or still
    /// unreported).
    fn report(&self, reported_cycles: u64) -> impl Future<Output = u64> + Send;

    /// The charts' counts of this process, written after each report.
    fn minutes(&self) -> &MinuteCounter;
}

/// Reports at once, then every `every`, until `stop` changes.
pub(crate) struct Reports<R> {
    pub(crate) reporter: Arc<R>,
    pub(crate) store: Arc<dyn JobStore>,
    pub(crate) every: Duration,
}

impl<R: Reporter> Reports<R> {
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.every);
        let mut reported_cycles = 0;
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    reported_cycles = self.reporter.report(reported_cycles).await;
                    if let Err(e) = self.reporter.minutes().flush(self.store.as_ref()).await {
                        tracing::warn!(error = %e, "writing the charts' per-minute counts failed; they are kept for the next report");
                    }
                }
                _ = stop.changed() => return,
            }
        }
    }
}
