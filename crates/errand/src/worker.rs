//! Claiming, running and settling jobs.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use errand_core::{
    ClaimRequest, ClaimedJob, JobStore, Lease, Name, Outcome, Result, RetryPolicy, Timestamp,
    WorkerMetrics, WorkerReport,
};
use tokio_util::sync::CancellationToken;

use crate::execution::{Attempted, Direct, Execution, Sampler, release, settle};
use crate::handler::Handler;
use crate::work_report::{WorkOutcome, WorkReport};

/// How a worker claims and settles.
#[derive(Clone)]
pub struct WorkerConfig {
    /// Queues to claim from; empty means every queue.
    pub queues: Vec<Name>,
    /// Lease length of each claim.
    pub lease: Duration,
    /// Delay policy for retryable failures and timeouts.
    pub retry: RetryPolicy,
    /// Jitter source.
    pub sampler: Sampler,
    /// Renew the lease every third of its length while the handler runs.
    pub heartbeat: bool,
}

impl fmt::Debug for WorkerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WorkerConfig")
            .field("queues", &self.queues)
            .field("lease", &self.lease)
            .field("retry", &self.retry)
            .field("heartbeat", &self.heartbeat)
            .finish_non_exhaustive()
    }
}

impl Default for WorkerConfig {
    fn default() -> Self {
        WorkerConfig {
            queues: Vec::new(),
            lease: Duration::from_secs(30),
            retry: RetryPolicy::default(),
            sampler: Arc::new(rand::random::<f64>),
            heartbeat: true,
        }
    }
}

/// Claims jobs and runs them with a handler.
#[derive(Clone, Debug)]
pub struct Worker {
    store: Arc<dyn JobStore>,
    config: WorkerConfig,
}

impl Worker {
    /// A worker over `store`.
    pub fn new(store: Arc<dyn JobStore>, config: WorkerConfig) -> Self {
        Worker { store, config }
    }

    /// The store.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.store
    }

    /// The configuration.
    pub fn config(&self) -> &WorkerConfig {
        &self.config
    }

    /// Claims at most one due job, runs it and settles it.
    pub async fn run_once(&self, handler: Arc<dyn Handler>) -> Result<WorkReport> {
        match self.claim_one().await? {
            None => Ok(WorkReport::idle()),
            Some(claimed) => self.run_claimed(handler, claimed).await,
        }
    }

    /// [`Worker::run_once`], then a report of the run to the store, as a
    /// long-running worker reports itself: the claim cycle (what the signal
    /// "time since the last worker cycle" and `stats --check
    /// --max-since-worker-cycle` read), the attempt started and its wait from due to
    /// start, and a success against the job's business deadline. The runs
    /// of one host and queue list report under one id and their counts add
    /// up ([`WorkerReport::one_shot`]). A report that cannot be written is
    /// logged, not returned: the job's outcome is what the caller needs.
    pub async fn run_once_and_report(&self, handler: Arc<dyn Handler>) -> Result<WorkReport> {
        let started_at = Timestamp::now();
        let claimed = self.claim_one().await?;
        let mut metrics = WorkerMetrics::default();
        metrics.record_cycle(claimed.as_slice());
        let report = match claimed {
            None => WorkReport::idle(),
            Some(claimed) => {
                let deadline = claimed.job.deadline;
                let report = self.run_claimed(handler, claimed).await?;
                if report.outcome == WorkOutcome::Acknowledged {
                    metrics.record_success(deadline, Timestamp::now());
                }
                report
            }
        };
        let host = host_name();
        let me = WorkerReport {
            id: one_shot_id(&host, &self.config.queues),
            host,
            pid: std::process::id(),
            queues: self.config.queues.clone(),
            started_at,
            metrics,
            one_shot: true,
        };
        if let Err(e) = self.store.report_worker(&me).await {
            tracing::warn!(error = %e, "writing this run's worker report failed");
        }
        Ok(report)
    }

    /// Claims at most one due job.
    /// Claims one job, after taking back expired leases (the claim's
    /// `reclaim`) and ending the waits for signals that timed out (a
    /// one-shot worker runs no [`crate::WaitTimer`]).
    async fn claim_one(&self) -> Result<Option<ClaimedJob>> {
        crate::maintenance::WaitTimer::new(self.store.clone())
            .run_once()
            .await?;
        let req = ClaimRequest {
            queues: self.config.queues.clone(),
            limit: 1,
            lease: self.config.lease,
            rate: None,
            reclaim: true,
        };
        let claimed = self.store.claim(&req).await?.pop();
        if claimed.is_some() {
            crate::probe::at(crate::probe::Point::ClaimCommitted);
        }
        Ok(claimed)
    }

    /// Runs a claimed job (renewing its lease meanwhile) and settles it.
    pub async fn run_claimed(
        &self,
        handler: Arc<dyn Handler>,
        claimed: ClaimedJob,
    ) -> Result<WorkReport> {
        let lease = claimed.lease.clone();
        let run = Execution {
            store: self.store.clone(),
            lease: self.config.lease,
            heartbeat: self.config.heartbeat,
            deadline: None,
        };
        let span = crate::spans::attempt_span(&claimed.job, lease.attempt);
        let outcome = tracing::Instrument::instrument(
            run.execute(handler, claimed, CancellationToken::new()),
            span.clone(),
        )
        .await;
        let class = outcome.as_ref().and_then(|a| a.outcome.error_class());
        let report = match outcome {
            Some(attempted) => {
                crate::probe::at(crate::probe::Point::BeforeSettle);
                let report = self.settle_attempted(&lease, attempted).await;
                if report.as_ref().is_ok_and(|r| r.acknowledged) {
                    crate::probe::at(crate::probe::Point::SettleCommitted);
                }
                report
            }
            None => release(self.store.as_ref(), &lease).await,
        };
        crate::spans::record_attempt(&span, class, &report);
        report
    }

    /// Records a handler's outcome against the lease.
    pub async fn settle(&self, lease: &Lease, outcome: Outcome) -> Result<WorkReport> {
        let attempted = Attempted {
            outcome,
            children: Vec::new(),
        };
        self.settle_attempted(lease, attempted).await
    }

    /// Records a handler's outcome, and the children it added, against
    /// the lease.
    async fn settle_attempted(&self, lease: &Lease, attempted: Attempted) -> Result<WorkReport> {
        settle(
            self.store.as_ref(),
            &Direct(self.store.as_ref()),
            lease,
            attempted,
            &self.config.retry,
            self.config.sampler.as_ref(),
        )
        .await
    }
}

/// This host's name as worker reports give it ("unknown" when it cannot be
/// read or is not printable text of at most 255 bytes).
pub(crate) fn host_name() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty() && h.len() <= 255 && !h.chars().any(char::is_control))
        .unwrap_or_else(|| "unknown".to_owned())
}

/// The id one-shot runs on `host` for `queues` report under: readable, and
/// the same for every such run (cut to the 200 characters an id may hold).
fn one_shot_id(host: &str, queues: &[Name]) -> String {
    let queues = if queues.is_empty() {
        "*".to_owned()
    } else {
        queues
            .iter()
            .map(Name::as_str)
            .collect::<Vec<_>>()
            .join(",")
    };
    format!("once@{host}/{queues}").chars().take(200).collect()
}
