//! Service mode of `errand work`: a pool of claim-run-settle loops that stops
//! claiming on SIGTERM or SIGINT and lets in-flight commands finish. A second
//! signal exits at once (the leases of unfinished jobs then expire and the
//! jobs are reclaimed). An idle loop waits on the store's work signal
//! (`LISTEN/NOTIFY` on PostgreSQL) with `--poll` as the fallback.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use errand::{Handler, Worker};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;

use crate::{busy, output};

/// Runs `concurrency` loops until a signal asks them to stop.
pub async fn run(
    worker: Worker,
    handler: Arc<dyn Handler>,
    concurrency: u32,
    poll: Duration,
    as_json: bool,
) -> anyhow::Result<()> {
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    tokio::spawn(async move {
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        tracing::warn!("stop requested: finishing in-flight jobs; signal again to exit at once");
        let _ = stop_tx.send(true);
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        eprintln!("errand: second signal, exiting now; unfinished jobs return after their lease");
        std::process::exit(130);
    });
    let mut loops = Vec::new();
    for _ in 0..concurrency {
        let (worker, handler, mut stop) = (worker.clone(), handler.clone(), stop_rx.clone());
        let mut signal = worker.store().work_signal();
        loops.push(tokio::spawn(async move {
            while !*stop.borrow() {
                match worker.run_once(handler.clone()).await {
                    Ok(report) => {
                        if busy(report.outcome) {
                            if let Err(e) = output::report(&report, as_json) {
                                tracing::error!(error = %e, "cannot print the report");
                            }
                            continue;
                        }
                    }
                    Err(e) => tracing::error!(error = %e, "worker cycle failed; retrying after the poll interval"),
                }
                // Idle: wait for a wake-up (an insert in this process on
                // SQLite, a notification on PostgreSQL) or the poll interval.
                tokio::select! {
                    _ = signal.wait(poll) => {}
                    _ = stop.changed() => {}
                }
            }
        }));
    }
    for l in loops {
        l.await.context("a worker loop failed")?;
    }
    Ok(())
}
