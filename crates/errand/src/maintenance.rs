//! Maintenance services, on by default in the [`crate::Runtime`]. Each is a
//! config plus `run_once`, which tests call directly with seeded rows; the
//! runtime only ticks them.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{JobId, JobStore, Result};

/// Moves running jobs whose lease expired with no budget left to `dead`
/// (claims do this too; the sweep makes it happen when nobody claims).
#[derive(Clone, Debug)]
pub struct Sweeper {
    store: Arc<dyn JobStore>,
    /// How often the runtime runs it.
    pub every: Duration,
}

impl Sweeper {
    /// A sweeper over `store`, every 30 s.
    pub fn new(store: Arc<dyn JobStore>) -> Self {
        Sweeper {
            store,
            every: Duration::from_secs(30),
        }
    }

    /// One pass; returns the jobs it moved to `dead`.
    pub async fn run_once(&self) -> Result<Vec<JobId>> {
        Ok(self.store.sweep_expired().await?.dead)
    }
}

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
