//! The queues' depth on the charts: sampled once a minute, by whichever
//! process gets there first.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use errand_core::{AdminStore, JobStore, Name, Timestamp};
use tokio::sync::watch;

/// Samples every queue's depth and oldest due age for the charts: reads
/// through the operator's seam, writes through the worker's.
pub(crate) struct DepthSampler {
    pub(crate) reads: Arc<dyn AdminStore>,
    pub(crate) store: Arc<dyn JobStore>,
}

impl DepthSampler {
    /// Samples at once, then every minute, until `stop` changes.
    pub(crate) async fn run(self, mut stop: watch::Receiver<bool>) {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        let mut sampled = BTreeSet::<Name>::new();
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    let sample = crate::minutes::sample_queues(
                        self.reads.as_ref(),
                        self.store.as_ref(),
                        &sampled,
                        Timestamp::now(),
                    );
                    match sample.await {
                        Ok(seen) => sampled = seen,
                        Err(e) => tracing::warn!(error = %e, "sampling the queues' depth for the charts failed"),
                    }
                }
                _ = stop.changed() => return,
            }
        }
    }
}
