//! Service mode of `errand work`: the library's [`errand::Runtime`] with the
//! external command as the handler of every kind. The first SIGTERM or
//! SIGINT stops claiming and lets running commands finish within the drain
//! deadline, after which the rest are stopped and released without spending
//! an attempt; a second signal exits at once (unfinished jobs then return
//! after their lease). A command that cannot be run (the shell exits 126
//! or 127) stops the worker the same way as the first signal.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use errand::{Name, RetryPolicy, Runtime, Store};
use errand_exec::ExecHandler;
use tokio::signal::unix::{SignalKind, signal};

use crate::output::{self, errln};

/// Service-mode settings from the command line.
#[derive(Debug)]
pub struct ServiceArgs {
    /// Queues to run (empty: every queue).
    pub queues: Vec<Name>,
    /// Jobs at once per queue.
    pub concurrency: usize,
    /// Lease length.
    pub lease: Duration,
    /// Idle poll interval.
    pub poll: Duration,
    /// Drain deadline.
    pub drain: Duration,
    /// Retry policy of failures.
    pub retry: RetryPolicy,
    /// Print JSON reports.
    pub json: bool,
    /// Start rate per queue, shared across processes.
    pub rate: Option<errand::RateLimit>,
    /// Start rate per concurrency key of each queue, shared across processes.
    pub key_rate: Option<errand::RateLimit>,
}

/// Runs until a signal asks it to stop, or the command cannot be run, then
/// drains.
pub async fn run(
    store: Arc<dyn Store>,
    handler: Arc<ExecHandler>,
    args: ServiceArgs,
) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let json = args.json;
    let mut builder = Runtime::builder(store)
        .fallback(handler.clone())
        .lease(args.lease)
        .poll(args.poll)
        .drain_deadline(args.drain)
        .retry(args.retry, Arc::new(rand_unit))
        .on_report(Arc::new(move |r| {
            if let Err(e) = output::report(r, json) {
                tracing::error!(error = %e, "cannot print the report");
            }
        }));
    builder = if args.queues.is_empty() {
        builder.all_queues(args.concurrency)?
    } else {
        let mut b = builder;
        for q in &args.queues {
            b = b.queue(q.as_str(), args.concurrency)?;
            if let Some(rate) = args.rate {
                b = b.rate_limit(q.as_str(), rate)?;
            }
            if let Some(rate) = args.key_rate {
                b = b.key_rate(q.as_str(), rate)?;
            }
        }
        b
    };
    let runtime = builder.build()?;
    let (first_tx, first_rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        tracing::warn!("stop requested: finishing in-flight jobs; signal again to exit at once");
        let _ = first_tx.send(());
        tokio::select! { _ = term.recv() => {}, _ = int.recv() => {} }
        errln!("errand: second signal, exiting now; unfinished jobs return after their lease");
        std::process::exit(130);
    });
    runtime
        .run_until(async {
            tokio::select! {
                _ = first_rx => {}
                () = handler.until_cannot_run() => {
                    tracing::error!("the command cannot be run: finishing in-flight jobs, then stopping");
                }
            }
        })
        .await?;
    Ok(())
}

fn rand_unit() -> f64 {
    rand::random::<f64>()
}
