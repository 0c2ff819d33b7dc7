//! One attempt in its own task: the handler run under its lease, then
//! settled through the batcher.

use std::sync::Arc;

use errand_core::{ClaimedJob, Error, Failure, Job, Lease, Outcome, Result};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::builder::KindOptions;
use super::{Inner, lock};
use crate::execution::{Attempted, Execution, FailureSink, release, settle};
use crate::handler::{Handler, handler_fn};
use crate::work_report::{WorkOutcome, WorkReport};

impl Inner {
    /// Counts a completed claim cycle and the attempts it started.
    pub(super) fn record_cycle(&self, claimed: &[ClaimedJob]) {
        lock(&self.metrics).record_cycle(claimed);
        if self.settings.report_every.is_some() {
            self.minutes.started(claimed);
        }
    }

    /// Counts a success against the job's business deadline, if it has one.
    pub(super) fn record_success(&self, deadline: Option<errand_core::Timestamp>) {
        lock(&self.metrics).record_success(deadline, errand_core::Timestamp::now());
    }

    /// Acknowledges through the completion batcher: the acknowledgments of
    /// jobs finishing together share one statement, each still fenced by
    /// its own token and lease.
    async fn acknowledge(&self, lease: &Lease) -> Result<WorkReport> {
        let (tx, rx) = oneshot::channel();
        self.acks.push((lease.clone(), tx));
        let acked = rx
            .await
            .map_err(|_| Error::Closed("the completion batcher stopped".into()))??;
        Ok(WorkReport {
            outcome: if acked {
                WorkOutcome::Acknowledged
            } else {
                WorkOutcome::LeaseLost
            },
            job_id: Some(lease.id.clone()),
            attempt: Some(lease.attempt),
            acknowledged: acked,
            available_at: None,
            error: None,
        })
    }

    /// The handler of `kind` and its options: the registered one, the
    /// fallback, or one that retries saying no handler is registered.
    fn handler_for(&self, kind: &errand_core::Name) -> (Arc<dyn Handler>, KindOptions) {
        match (
            self.settings.kinds.get(kind.as_str()),
            &self.settings.fallback,
        ) {
            (Some(k), _) => (k.handler.clone(), k.options.clone()),
            (None, Some(f)) => (f.clone(), KindOptions::default()),
            (None, None) => {
                let kind = kind.clone();
                let missing: Arc<dyn Handler> = Arc::new(handler_fn(move |_ctx| {
                    let kind = kind.clone();
                    async move {
                        Outcome::retry(format!(
                            "no handler for kind `{kind}` is registered in this worker"
                        ))
                    }
                }));
                (missing, KindOptions::default())
            }
        }
    }

    pub(super) async fn run_job(
        &self,
        claimed: errand_core::ClaimedJob,
        token: CancellationToken,
        slot: tokio::sync::OwnedSemaphorePermit,
    ) {
        let lease = claimed.lease.clone();
        let (handler, options) = self.handler_for(&claimed.job.kind);
        let run = Execution {
            store: self.settings.store.clone(),
            lease: self.settings.lease,
            heartbeat: true,
            deadline: options.deadline,
        };
        // Only the deadline outlives the attempt (no copy of the job and its
        // payload on every run).
        let deadline = claimed.job.deadline;
        let queue = self
            .settings
            .report_every
            .map(|_| claimed.job.queue.clone());
        let job = &claimed.job;
        let span = crate::spans::attempt_span(job, lease.attempt);
        let outcome =
            tracing::Instrument::instrument(run.execute(handler, claimed, token), span.clone())
                .await;
        let class = outcome.as_ref().and_then(|a| a.outcome.error_class());
        // The slot is for running handlers: settling waits for the next
        // claim's transaction (or the batcher's), and holding the slot
        // through it would keep the next claim small.
        drop(slot);
        if outcome.is_some() {
            crate::probe::at(crate::probe::Point::BeforeSettle);
        }
        let report = match outcome {
            Some(Attempted {
                outcome: Outcome::Success,
                children,
            }) if children.is_empty() => self.acknowledge(&lease).await,
            Some(outcome) => {
                let policy = options.retry.as_ref().unwrap_or(&self.settings.retry);
                settle(
                    self.settings.store.as_ref(),
                    self,
                    &lease,
                    outcome,
                    policy,
                    self.settings.sampler.as_ref(),
                )
                .await
            }
            None => release(self.settings.store.as_ref(), &lease).await,
        };
        crate::spans::record_attempt(&span, class, &report);
        drop(span);
        lock(&self.in_flight).remove(&lease.id);
        match report {
            Ok(r) => {
                if r.acknowledged {
                    crate::probe::at(crate::probe::Point::SettleCommitted);
                }
                if r.outcome == WorkOutcome::Acknowledged {
                    self.record_success(deadline);
                }
                if let Some(queue) = &queue {
                    self.minutes.settled(queue, r.outcome, class, deadline);
                }
                tracing::debug!(job = %lease.id, attempt = lease.attempt, outcome = r.outcome.as_str(), "attempt settled");
                *lock(&self.stats)
                    .outcomes
                    .entry(r.outcome.as_str())
                    .or_insert(0) += 1;
                if let Some(hook) = &self.settings.on_report {
                    hook(&r);
                }
            }
            Err(e) => {
                // The lease will expire and the job will be reclaimed.
                tracing::warn!(job = %lease.id, error = %e, "settling failed; the job returns after its lease");
                *lock(&self.stats)
                    .outcomes
                    .entry("settle_failed")
                    .or_insert(0) += 1;
            }
        }
    }
}

/// Failures go through the batcher: those that arrive together are
/// recorded in one statement, each still fenced by its own token and lease.
#[async_trait::async_trait]
impl FailureSink for Inner {
    async fn record(&self, lease: &Lease, failure: Failure) -> Result<Job> {
        let (tx, rx) = oneshot::channel();
        self.acks.push_failure((lease.clone(), failure, tx));
        let recorded = rx
            .await
            .map_err(|_| Error::Closed("the completion batcher stopped".into()))??;
        recorded.ok_or_else(|| Error::LeaseLost {
            id: lease.id.to_string(),
            attempt: lease.attempt,
        })
    }
}
