//! Cron schedules, given in code and stored: each due tick enqueued once,
//! however many processes run the same schedules.

use std::time::Duration;

use errand_core::Timestamp;
use tokio::sync::watch;

use crate::cron::CronEnqueuer;

/// The longest a schedule service sleeps between two passes.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// Runs a pass at once, then one at each next tick of the schedules (at
/// least every minute), until `stop` changes.
pub(crate) async fn run(cron: CronEnqueuer, mut stop: watch::Receiver<bool>) {
    loop {
        if let Err(e) = cron.run_once(Timestamp::now()).await {
            tracing::warn!(error = %e, "enqueueing cron ticks failed");
        }
        tokio::select! {
            () = tokio::time::sleep(next_pass(&cron)) => {}
            _ = stop.changed() => return,
        }
    }
}

/// How long until the next pass: the schedules' next tick, at most a
/// minute away.
fn next_pass(cron: &CronEnqueuer) -> Duration {
    let now = Timestamp::now();
    cron.next_wake(now)
        .map_or(MAX_SLEEP, |t| t.since(now))
        .min(MAX_SLEEP)
}
