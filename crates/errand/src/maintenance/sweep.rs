//! The expired-lease sweep.

use std::sync::Arc;
use std::time::Duration;

use errand_core::{JobId, JobStore, Result};
use tokio::sync::watch;

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

impl Sweeper {
    /// Sweeps at once, then every [`Sweeper::every`], until `stop` changes.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.every);
        loop {
            tokio::select! {
                _ = tick.tick() => match self.run_once().await {
                    Ok(dead) if !dead.is_empty() => {
                        tracing::warn!(count = dead.len(), "expired leases with no budget left moved to dead");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "the expired-lease sweep failed"),
                },
                _ = stop.changed() => return,
            }
        }
    }
}
