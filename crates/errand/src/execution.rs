//! One attempt under its lease: the handler run with lease renewals and a
//! deadline, then its outcome settled (acknowledged, retried on the
//! persisted schedule, dead, snoozed, cancelled or released).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use errand_core::{
    ClaimedJob, Error, ErrorClass, Failure, Job, JobState, JobStore, Lease, NewJob, Outcome,
    Payload, Result, RetryAt, RetryPolicy,
};
use tokio_util::sync::CancellationToken;

use crate::handler::{ChildSlot, Handler, JobContext, OutputReader, ProgressSlot};
use crate::work_report::{WorkOutcome, WorkReport};

/// A source of uniform samples in `[0, 1)` for retry jitter. Tests inject a
/// fixed one so delays are exact.
pub type Sampler = Arc<dyn Fn() -> f64 + Send + Sync>;

/// What a handler's run gave: its outcome and the children it added
/// ([`JobContext::add_children`]), stored only with a success.
#[derive(Debug)]
pub(crate) struct Attempted {
    pub(crate) outcome: Outcome,
    pub(crate) children: Vec<NewJob>,
}

/// How one claimed job is run: lease renewal and deadline.
#[derive(Clone, Debug)]
pub(crate) struct Execution {
    pub(crate) store: Arc<dyn JobStore>,
    pub(crate) lease: Duration,
    pub(crate) heartbeat: bool,
    pub(crate) deadline: Option<Duration>,
}

impl Execution {
    /// Runs the handler: the lease is renewed every third of its length; a
    /// renewal refused by the fence fires the job's lease-lost token; a
    /// panic becomes a retryable failure; the deadline becomes
    /// [`Outcome::Timeout`]; `abort` (a drain past its deadline) stops it
    /// and returns `None`: the caller releases the job.
    pub(crate) async fn execute(
        &self,
        handler: Arc<dyn Handler>,
        mut claimed: ClaimedJob,
        abort: CancellationToken,
    ) -> Option<Attempted> {
        let handler = opened(self.store.keyring(), &mut claimed, handler);
        let lease = claimed.lease.clone();
        let lost = CancellationToken::new();
        let progress = ProgressSlot::default();
        let children = ChildSlot::default();
        // The lease is renewed by this task, which waits for the handler;
        // the handler runs in a task of its own, so a handler that holds
        // its thread (blocking work) cannot keep the renewal from running.
        // (The renewal was a third task per attempt: spawning and aborting
        // it cost more than a no-op job's handler.) It never finishes: on
        // a lost lease it tells the handler and waits for it to return.
        let heartbeat = async {
            if !self.heartbeat {
                return std::future::pending().await;
            }
            loop {
                tokio::time::sleep(self.lease / 3).await;
                crate::probe::at(crate::probe::Point::Heartbeat);
                let renewed = match progress.take(lease.attempt) {
                    Some(report) => {
                        let renewed = self
                            .store
                            .heartbeat_with_progress(&lease, self.lease, &report)
                            .await;
                        if renewed.is_err() {
                            progress.restore(report);
                        }
                        renewed
                    }
                    None => self.store.heartbeat(&lease, self.lease).await,
                };
                match renewed {
                    Ok(_) => {}
                    Err(Error::LeaseLost { .. }) => {
                        tracing::warn!(job = %lease.id, attempt = lease.attempt, "lease lost while the handler runs; telling it to stop");
                        lost.cancel();
                        return std::future::pending().await;
                    }
                    Err(e) => {
                        tracing::warn!(job = %lease.id, error = %e, "heartbeat failed; will retry")
                    }
                }
            }
        };
        let ctx = JobContext {
            job: claimed.job,
            lease: lease.clone(),
            lease_lost: lost.clone(),
            reader: OutputReader(Some(self.store.clone())),
            progress: progress.clone(),
            children: children.clone(),
        };
        // The handler runs in the attempt's span (the caller's current
        // one): its logs, and its own spans, belong to the attempt.
        let task = tokio::spawn(tracing::Instrument::instrument(
            async move { handler.handle(ctx).await },
            tracing::Span::current(),
        ));
        let abort_handle = task.abort_handle();
        let joined = async {
            match task.await {
                Ok(outcome) => outcome,
                Err(e) if e.is_panic() => Outcome::Retry {
                    error: format!("handler panicked: {}", panic_message(e.into_panic())),
                },
                Err(e) => Outcome::Retry {
                    error: format!("handler task failed: {e}"),
                },
            }
        };
        let outcome = tokio::select! {
            outcome = async {
                match self.deadline {
                    Some(d) => tokio::time::timeout(d, joined).await.unwrap_or(Outcome::Timeout),
                    None => joined.await,
                }
            } => Some(outcome),
            () = abort.cancelled() => None,
            () = heartbeat => None,
        };
        abort_handle.abort();
        outcome.map(|outcome| Attempted {
            outcome,
            children: children.take(),
        })
    }
}

/// Gives an unfinished job back without spending its attempt.
pub(crate) async fn release(store: &dyn JobStore, lease: &Lease) -> Result<WorkReport> {
    let mut report = WorkReport {
        outcome: WorkOutcome::Released,
        job_id: Some(lease.id.clone()),
        attempt: Some(lease.attempt),
        acknowledged: false,
        available_at: None,
        error: None,
    };
    match store.release(lease).await {
        Ok(job) => report.available_at = Some(job.available_at),
        Err(Error::LeaseLost { .. }) => report.outcome = WorkOutcome::LeaseLost,
        Err(e) => return Err(e),
    }
    Ok(report)
}

/// The failure a worker records for a failed attempt — the one place
/// where every worker (the [`Worker`](crate::Worker), the [`crate::Runtime`], `errand work`
/// and the HTTP API's remote workers) decides when a failure runs again.
///
/// A [`ErrorClass::Permanent`] failure gets no retry: the store sends the
/// job to `dead`. Any other class retries at `retry` when the handler named
/// a time (a provider's Retry-After), or else after `policy`'s delay for
/// attempt `attempt` with one jitter sample drawn from `sample`. The store
/// still sends the job to `dead` when no attempt is left.
pub fn failure_for(
    error: String,
    class: ErrorClass,
    retry: Option<RetryAt>,
    attempt: u32,
    policy: &RetryPolicy,
    sample: impl FnOnce() -> f64,
) -> Failure {
    let retry = match class {
        ErrorClass::Permanent => None,
        _ => Some(retry.unwrap_or_else(|| RetryAt::After(policy.delay_for(attempt, sample())))),
    };
    Failure {
        error,
        class,
        retry,
    }
}

/// Records `outcome` against `lease`; retryable failures wait on `policy`.
/// Where failed attempts are recorded: the store itself, one call each, or
/// the runtime's batcher, which writes the failures that arrive together
/// in one statement.
#[async_trait]
pub(crate) trait FailureSink: Send + Sync {
    /// Records `failure` like [`JobStore::fail`](errand_core::JobStore::fail).
    async fn record(&self, lease: &Lease, failure: Failure) -> Result<Job>;
}

/// Records each failure with its own [`JobStore::fail`](errand_core::JobStore::fail) call.
pub(crate) struct Direct<'a>(pub(crate) &'a dyn JobStore);

#[async_trait]
impl FailureSink for Direct<'_> {
    async fn record(&self, lease: &Lease, failure: Failure) -> Result<Job> {
        self.0.fail(lease, failure).await
    }
}

pub(crate) async fn settle(
    store: &dyn JobStore,
    failures: &dyn FailureSink,
    lease: &Lease,
    attempted: Attempted,
    policy: &RetryPolicy,
    sampler: &(dyn Fn() -> f64 + Send + Sync),
) -> Result<WorkReport> {
    let Attempted { outcome, children } = attempted;
    let mut report = WorkReport {
        outcome: WorkOutcome::Acknowledged,
        job_id: Some(lease.id.clone()),
        attempt: Some(lease.attempt),
        acknowledged: false,
        available_at: None,
        error: None,
    };
    let failure = |error: String, class: ErrorClass, retry: Option<RetryAt>| {
        failure_for(error, class, retry, lease.attempt, policy, sampler)
    };
    let result = match outcome.into_storable().into_failure() {
        Ok((error, class, at)) => {
            let failed = failure(error, class, at.map(RetryAt::At));
            fail_attempt(failures, lease, &mut report, failed).await
        }
        Err(Outcome::Success) if !children.is_empty() => {
            complete_adding(store, failures, lease, None, &children, &mut report).await
        }
        Err(Outcome::Output { output }) if !children.is_empty() => {
            let output = Some(&output);
            complete_adding(store, failures, lease, output, &children, &mut report).await
        }
        Err(other) => {
            if !children.is_empty() {
                dropped_children(lease, &other, children.len());
            }
            settle_other(store, lease, other, &mut report).await
        }
    };
    match result {
        Ok(()) => Ok(report),
        Err(Error::LeaseLost { .. }) => {
            report.outcome = WorkOutcome::LeaseLost;
            report.acknowledged = false;
            report.available_at = None;
            Ok(report)
        }
        Err(e) => Err(e),
    }
}

/// Settles an attempt that did not fail: acknowledged, snoozed, cancelled
/// or suspended.
async fn settle_other(
    store: &dyn JobStore,
    lease: &Lease,
    outcome: Outcome,
    report: &mut WorkReport,
) -> Result<()> {
    match outcome {
        Outcome::Success => store.complete(lease).await.map(|_| {
            report.acknowledged = true;
        }),
        Outcome::Output { output } => store.complete_with_output(lease, &output).await.map(|_| {
            report.acknowledged = true;
        }),
        Outcome::Completed => {
            report.acknowledged = true;
            Ok(())
        }
        Outcome::Snooze { delay } => store.snooze(lease, delay).await.map(|job| {
            report.outcome = WorkOutcome::Snoozed;
            report.available_at = Some(job.available_at);
        }),
        Outcome::Cancel { reason } => {
            report.error = Some(reason.clone());
            store
                .cancel_running(lease, &reason)
                .await
                .map(|_| report.outcome = WorkOutcome::Cancelled)
        }
        Outcome::Await { wait } => store.suspend(lease, &wait).await.map(|job| {
            report.outcome = WorkOutcome::Awaiting;
            report.available_at = (job.state == JobState::Ready).then_some(job.available_at);
        }),
        // Failures were taken apart by `Outcome::into_failure` before.
        failed @ (Outcome::Retry { .. }
        | Outcome::RetryAt { .. }
        | Outcome::Permanent { .. }
        | Outcome::Timeout
        | Outcome::TimedOut { .. }) => Err(Error::storage(format!(
            "the failure {failed:?} was not recorded as one"
        ))),
    }
}

/// Completes the step with the children its handler added. Children a
/// store refuses (a rule of theirs broken: [`Error::Invalid`]) would be
/// refused again by every retry: the attempt fails for good, saying why,
/// and nothing of it is stored.
async fn complete_adding(
    store: &dyn JobStore,
    failures: &dyn FailureSink,
    lease: &Lease,
    output: Option<&Payload>,
    children: &[NewJob],
    report: &mut WorkReport,
) -> Result<()> {
    match store.complete_with_children(lease, output, children).await {
        Ok(_) => {
            report.acknowledged = true;
            Ok(())
        }
        Err(Error::Invalid(why)) => {
            let failed = Failure {
                error: format!(
                    "the {} child job(s) the handler added were refused, so none was stored \
                     and the step did not complete: {why}",
                    children.len()
                ),
                class: ErrorClass::Permanent,
                retry: None,
            };
            fail_attempt(failures, lease, report, failed).await
        }
        Err(e) => Err(e),
    }
}

/// Children are stored only with a success; says so when an attempt that
/// did not succeed had added some.
fn dropped_children(lease: &Lease, outcome: &Outcome, n: usize) {
    let why = match outcome {
        Outcome::Completed => {
            "the handler completed the job itself (complete_in); to add children in that \
             transaction, call complete_with_children_in there instead"
        }
        _ => "the attempt did not succeed",
    };
    tracing::warn!(job = %lease.id, attempt = lease.attempt, children = n, "the children the handler added were not stored: {why}");
}

/// Records a failed attempt and what became of the job.
async fn fail_attempt(
    failures: &dyn FailureSink,
    lease: &Lease,
    report: &mut WorkReport,
    failure: Failure,
) -> Result<()> {
    report.error = Some(failure.error.clone());
    let job = failures.record(lease, failure).await?;
    record_failure(report, &job);
    Ok(())
}

fn record_failure(report: &mut WorkReport, job: &Job) {
    if job.state == JobState::Dead {
        report.outcome = WorkOutcome::Dead;
    } else {
        report.outcome = WorkOutcome::RetryScheduled;
        report.available_at = Some(job.available_at);
    }
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-text panic payload".to_owned()
    }
}

/// The claimed job's payload opened with the store's keys, and the handler
/// to run: `handler`, or, when the payload does not open, one that fails
/// the attempt for good saying why (no later attempt could read it either).
fn opened(
    keys: Option<&errand_core::encryption::Keyring>,
    claimed: &mut ClaimedJob,
    handler: Arc<dyn Handler>,
) -> Arc<dyn Handler> {
    let job = &mut claimed.job;
    match errand_core::encryption::open_in_place(
        keys,
        errand_core::encryption::Field::Payload,
        &job.id,
        &mut job.payload,
    ) {
        Ok(()) => handler,
        Err(why) => {
            let message = format!("the payload of job `{}` cannot be read: {why}", job.id);
            Arc::new(crate::handler::handler_fn(move |_ctx| {
                let message = message.clone();
                async move { Outcome::permanent(message) }
            }))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use errand_core::Timestamp;

    #[test]
    fn failures_retry_at_the_hint_or_on_the_policy_and_permanent_ones_never() {
        let policy = RetryPolicy::EqualJitter {
            base: Duration::from_secs(2),
            max: Duration::from_secs(60),
        };
        // Attempt 3: cap = 8 s, the sample 0.5 lands at 6 s.
        let f = failure_for("x".into(), ErrorClass::Retryable, None, 3, &policy, || 0.5);
        assert_eq!(f.retry, Some(RetryAt::After(Duration::from_secs(6))));
        let f = failure_for("x".into(), ErrorClass::Timeout, None, 1, &policy, || 0.0);
        assert_eq!(f.retry, Some(RetryAt::After(Duration::from_secs(1))));
        let hint = RetryAt::At(Timestamp::from_millis(42));
        let f = failure_for(
            "x".into(),
            ErrorClass::Retryable,
            Some(hint),
            3,
            &policy,
            || unreachable!("no sample is drawn when the handler named the time"),
        );
        assert_eq!(f.retry, Some(hint));
        let f = failure_for(
            "bad payload".into(),
            ErrorClass::Permanent,
            Some(hint),
            1,
            &policy,
            || 0.5,
        );
        assert_eq!((f.retry, f.class), (None, ErrorClass::Permanent));
        assert_eq!(f.error, "bad payload");
    }
}
