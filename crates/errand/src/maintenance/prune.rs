//! Retention: finished jobs deleted once they are older than the window.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{JobStore, Result};
use tokio::sync::watch;

/// Retention: deletes `done` and `cancelled` jobs older than `keep`, in
/// batches. Dead jobs stay until an operator purges them.
#[derive(Clone, Debug)]
pub struct Pruner {
    store: Arc<dyn JobStore>,
    /// How long finished jobs are kept (default 7 days).
    pub keep: Duration,
    /// Most rows deleted per statement (default 1,000).
    pub batch: u32,
    /// How often the runtime runs it (default every minute).
    pub every: Duration,
}

impl Pruner {
    /// A pruner over `store` with the defaults.
    pub fn new(store: Arc<dyn JobStore>) -> Self {
        Pruner {
            store,
            keep: Duration::from_secs(7 * 86_400),
            batch: 1_000,
            every: Duration::from_secs(60),
        }
    }

    /// One pass: deletes batches until none is full; returns how many rows.
    pub async fn run_once(&self) -> Result<u64> {
        self.run_once_with(|_| {}).await
    }

    /// One pass, telling `deleted` the running total after each batch (a
    /// command's progress display).
    pub async fn run_once_with(&self, mut deleted: impl FnMut(u64)) -> Result<u64> {
        let mut total = 0;
        loop {
            let n = self.store.prune(self.keep, self.batch).await?;
            total += n;
            deleted(total);
            if n < u64::from(self.batch) {
                return Ok(total);
            }
        }
    }
}

impl Pruner {
    /// Prunes at once, then every [`Pruner::every`], until `stop` changes.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.every);
        loop {
            tokio::select! {
                _ = tick.tick() => match self.run_once().await {
                    Ok(n) if n > 0 => tracing::info!(deleted = n, "pruned finished jobs"),
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "pruning failed"),
                },
                _ = stop.changed() => return,
            }
        }
    }
}
