//! The waits that time out: a job waiting for a signal whose timeout has
//! passed follows its policy (run, fail or cancel).

use std::sync::Arc;
use std::time::Duration;

use errand_core::{Job, JobStore, Result};
use tokio::sync::watch;

/// Ends the waits whose timeout has passed
/// ([`JobStore::expire_waits`]). Every worker runs it; a wait is ended
/// once whichever runs first (the others skip the jobs it holds).
#[derive(Clone, Debug)]
pub struct WaitTimer {
    store: Arc<dyn JobStore>,
    /// How often the runtime looks (each look reads an index of the waits
    /// that time out, empty most of the time).
    pub every: Duration,
    /// The most waits one statement ends; a pass repeats while it fills.
    pub batch: u32,
}

impl WaitTimer {
    /// A timer over `store`, every second, 500 waits a statement.
    pub fn new(store: Arc<dyn JobStore>) -> Self {
        WaitTimer {
            store,
            every: Duration::from_secs(1),
            batch: 500,
        }
    }

    /// One pass: ends every wait that has timed out; returns the jobs as
    /// their policies left them.
    pub async fn run_once(&self) -> Result<Vec<Job>> {
        let mut ended = Vec::new();
        loop {
            let batch = self.store.expire_waits(self.batch).await?;
            let full = batch.len() >= self.batch as usize;
            ended.extend(batch);
            if !full {
                return Ok(ended);
            }
        }
    }

    /// Looks at once, then every [`WaitTimer::every`], until `stop` changes.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(self.every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = tick.tick() => match self.run_once().await {
                    Ok(ended) if !ended.is_empty() => {
                        tracing::info!(count = ended.len(), "waits for signals timed out and followed their policies");
                    }
                    Ok(_) => {}
                    Err(e) => tracing::warn!(error = %e, "ending the waits that timed out failed"),
                },
                _ = stop.changed() => return,
            }
        }
    }
}
