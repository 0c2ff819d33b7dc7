//! The one-shot receipt worker.
//!
//! Policy: a 1-second lease (no renewal: the receipt write is short, and the
//! crash exercise relies on the lease running out), 3 attempts per replay
//! cycle, equal jitter with a 250 ms base and a 30 s cap.
//!
//! The handler delivers the receipt first and lets the worker acknowledge
//! afterwards, in a separate transaction. A crash between the two means the
//! job is delivered again after the lease expires; the sink's unique key on
//! the job id makes that repeat harmless.

use std::sync::Arc;
use std::time::Duration;

use errand::{
    Handler, JobArgs, JobContext, Name, Outcome, RetryPolicy, SqliteStore, Store, WorkReport,
    Worker, WorkerConfig, handler_fn,
};

use crate::app::{RECEIPT_QUEUE, ReceiptPayload, deliver_receipt};
use crate::error::Result;

/// The error recorded when the receipt dependency is unavailable.
pub const RECEIPT_UNAVAILABLE: &str = "receipt_unavailable";
/// The lease of each claim.
pub const LEASE: Duration = Duration::from_secs(1);
/// The retry policy of failed deliveries.
pub const RETRY: RetryPolicy = RetryPolicy::EqualJitter {
    base: Duration::from_millis(250),
    max: Duration::from_secs(30),
};

/// How a `work` run behaves.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorkOptions {
    /// Simulate the receipt dependency being down: every attempt fails with
    /// [`RECEIPT_UNAVAILABLE`], a retryable error.
    pub unavailable: bool,
    /// Kill this process with SIGKILL right after the receipt commits and
    /// before the job is acknowledged (the crash exercise). Only for the
    /// command line: it takes the whole process down.
    pub crash_after_effect: bool,
}

/// The worker configuration of the policy above.
pub fn worker_config() -> Result<WorkerConfig> {
    Ok(WorkerConfig {
        queues: vec![Name::parse("queue", RECEIPT_QUEUE)?],
        lease: LEASE,
        retry: RETRY,
        heartbeat: false,
        ..WorkerConfig::default()
    })
}

/// The receipt handler.
pub fn receipt_handler(store: SqliteStore, options: WorkOptions) -> Arc<dyn Handler> {
    Arc::new(handler_fn(move |ctx: JobContext| {
        let store = store.clone();
        async move {
            if ctx.job.kind.as_str() != ReceiptPayload::KIND {
                return Outcome::permanent(format!(
                    "fieldnotes has no handler for jobs of kind `{}`",
                    ctx.job.kind
                ));
            }
            let payload: ReceiptPayload = match ctx.payload() {
                Ok(p) => p,
                Err(e) => return Outcome::permanent(e),
            };
            if payload.payment_id != ctx.id().as_str() {
                return Outcome::permanent(format!(
                    "the payload names payment `{}` but the job id is `{}`",
                    payload.payment_id,
                    ctx.id()
                ));
            }
            if options.unavailable {
                return Outcome::retry(RECEIPT_UNAVAILABLE);
            }
            match deliver_receipt(&store, ctx.id(), ctx.attempt(), &payload).await {
                Ok(true) => {
                    tracing::info!(job = %ctx.id(), attempt = ctx.attempt(), "receipt delivered")
                }
                Ok(false) => tracing::info!(
                    job = %ctx.id(),
                    attempt = ctx.attempt(),
                    "receipt was already delivered by an earlier attempt; nothing written"
                ),
                Err(e) => return Outcome::retry(format!("writing the receipt failed: {e}")),
            }
            if options.crash_after_effect {
                crash_now();
            }
            Outcome::Success
        }
    }))
}

/// Ends this process with SIGKILL, as a power cut or an OOM kill would.
fn crash_now() -> ! {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    eprintln!(
        "fieldnotes: --crash-after-effect: the receipt is committed; killing this worker (SIGKILL) before it acknowledges"
    );
    if let Err(e) = kill(Pid::this(), Signal::SIGKILL) {
        eprintln!("fieldnotes: SIGKILL failed ({e}); aborting instead");
    }
    std::process::abort()
}

/// Claims at most one due receipt job, runs it and settles it, then
/// reports the run to the store as `errand work --once` does
/// ([`Worker::run_once_and_report`]): its claim cycle is what
/// `errand stats` shows as the last worker cycle and what
/// `errand stats --check --max-since-worker-cycle` watches. An idle run
/// reports too: a worker that finds nothing to do is still alive.
pub async fn work_once(store: &SqliteStore, options: WorkOptions) -> Result<WorkReport> {
    let shared: Arc<dyn Store> = Arc::new(store.clone());
    let worker = Worker::new(shared, worker_config()?);
    Ok(worker
        .run_once_and_report(receipt_handler(store.clone(), options))
        .await?)
}
