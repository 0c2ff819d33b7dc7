//! Claiming, running and settling jobs.

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use errand_core::{
    ClaimRequest, ClaimedJob, Error, ErrorClass, Failure, Job, JobId, JobState, JobStore, Lease,
    Name, Outcome, Result, RetryAt, RetryPolicy, Timestamp, WorkerMetrics, WorkerReport,
};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

use crate::work_report::{WorkOutcome, WorkReport};

/// A source of uniform samples in `[0, 1)` for retry jitter. Tests inject a
/// fixed one so delays are exact.
pub type Sampler = Arc<dyn Fn() -> f64 + Send + Sync>;

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

/// What a handler sees of the job it runs.
#[derive(Clone, Debug)]
pub struct JobContext {
    /// The job as claimed (`attempts` is this attempt's number).
    pub job: Job,
    /// The fencing pair of this attempt.
    pub lease: Lease,
    /// Fired when a lease renewal is refused: another worker or the sweep
    /// owns the job now, and this attempt's settlement will be refused.
    pub lease_lost: CancellationToken,
    /// Where the dependencies' outputs are read from.
    pub(crate) reader: OutputReader,
    /// The latest progress reported and not yet sent.
    pub(crate) progress: ProgressSlot,
}

/// The progress a handler reported since the last lease renewal, which
/// takes it along.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProgressSlot(Arc<std::sync::Mutex<Option<Reported>>>);

/// A report not yet sent: percent and message.
type Reported = (u8, Option<String>);

impl ProgressSlot {
    fn put(&self, percent: u8, message: Option<String>) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some((percent, message));
        }
    }

    fn take(&self, attempt: u32) -> Option<errand_core::Progress> {
        let (percent, message) = self.0.lock().ok()?.take()?;
        Some(errand_core::Progress::new(percent, message, attempt))
    }

    /// Puts back a report a failed renewal did not store, unless the
    /// handler has made a newer one since.
    fn restore(&self, report: errand_core::Progress) {
        if let Ok(mut slot) = self.0.lock()
            && slot.is_none()
        {
            *slot = Some((report.percent, report.message));
        }
    }
}

/// The store a context reads dependencies' outputs from (none in a
/// handler's unit test, whose job has no dependencies).
#[derive(Clone, Default)]
pub(crate) struct OutputReader(pub(crate) Option<Arc<dyn JobStore>>);

impl fmt::Debug for OutputReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_some() {
            "OutputReader(store)"
        } else {
            "OutputReader(none)"
        })
    }
}

impl JobContext {
    /// The stable job id: key idempotent effects on it.
    pub fn id(&self) -> &JobId {
        &self.job.id
    }

    /// This attempt's number (1 for the first).
    pub fn attempt(&self) -> u32 {
        self.lease.attempt
    }

    /// The W3C trace context of the request that enqueued the job, if it
    /// carried one: a handler continues that trace (as the parent of its
    /// own spans), so the request and every attempt share one trace id.
    /// With the `otel` feature and an OpenTelemetry layer, the handler
    /// already runs inside the attempt's span, a child of this context:
    /// its own `tracing` spans nest under the attempt without this.
    pub fn traceparent(&self) -> Option<&errand_core::TraceParent> {
        self.job.traceparent.as_ref()
    }

    /// Completes when this attempt's lease is lost; a long handler selects
    /// on it to stop early.
    pub async fn lease_lost(&self) {
        self.lease_lost.cancelled().await;
    }

    /// Whether this attempt's lease is known to be lost.
    pub fn is_lease_lost(&self) -> bool {
        self.lease_lost.is_cancelled()
    }

    /// The outputs of this job's dependencies, in the order they were
    /// named: each the JSON its handler recorded on success
    /// ([`Outcome::success_with`]), or `None` if it recorded none (or was
    /// pruned since, or ended in a way this job's `run` policy let pass).
    /// Empty for a job without dependencies (no read).
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn dependency_outputs(&self) -> Result<Vec<(JobId, Option<errand_core::Payload>)>> {
        match self.outputs_store()? {
            Some(store) => store.dependency_outputs(&self.job.id).await,
            None => Ok(Vec::new()),
        }
    }

    /// Where the dependencies' outputs are read from: `None` for a job
    /// without dependencies (nothing to read).
    fn outputs_store(&self) -> Result<Option<&Arc<dyn JobStore>>> {
        if self.job.on_dependency_failure.is_none() {
            return Ok(None);
        }
        match &self.reader.0 {
            Some(store) => Ok(Some(store)),
            None => Err(Error::invalid(
                "this context has no store to read the dependencies' outputs from",
            )),
        }
    }

    /// One page of this job's dependencies' outputs, by dependency id:
    /// those after `after`, at most `limit`
    /// ([`JobStore::dependency_outputs_after`](errand_core::JobStore::dependency_outputs_after)).
    /// Empty for a job without dependencies (no read).
    pub async fn dependency_outputs_after(
        &self,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<(JobId, Option<errand_core::Payload>)>> {
        match self.outputs_store()? {
            Some(store) => {
                store
                    .dependency_outputs_after(&self.job.id, after, limit)
                    .await
            }
            None => Ok(Vec::new()),
        }
    }

    /// Reports how far this attempt has got: `percent` (0–100; more counts
    /// as 100) and an optional short message (at most 200 bytes kept, each
    /// control character — ESC, a line break — replaced by U+FFFD). It
    /// is stored by the next lease renewal (every third of the lease), not
    /// by a write of its own: call it as often as you like; the latest
    /// report wins. `errand show`, the API and the dashboard show it.
    pub fn set_progress(&self, percent: u8, message: Option<&str>) {
        self.progress.put(percent, message.map(str::to_owned));
    }

    /// Decodes the payload.
    pub fn payload<T: DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_str(self.job.payload.as_str()).map_err(|e| {
            Error::invalid(format!(
                "the payload of job `{}` does not match the expected shape: {e}",
                self.job.id
            ))
        })
    }
}

/// Runs one attempt of a job and says how it went.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Runs the job. A panic is caught and recorded as a retryable failure.
    async fn handle(&self, ctx: JobContext) -> Outcome;
}

/// A handler made from an async closure.
pub struct FnHandler<F, Fut> {
    f: F,
    _fut: PhantomData<fn() -> Fut>,
}

impl<F, Fut> fmt::Debug for FnHandler<F, Fut> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FnHandler")
    }
}

/// Wraps an async closure `Fn(JobContext) -> Outcome` as a [`Handler`].
pub fn handler_fn<F, Fut>(f: F) -> FnHandler<F, Fut>
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    FnHandler {
        f,
        _fut: PhantomData,
    }
}

#[async_trait]
impl<F, Fut> Handler for FnHandler<F, Fut>
where
    F: Fn(JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Outcome> + Send + 'static,
{
    async fn handle(&self, ctx: JobContext) -> Outcome {
        (self.f)(ctx).await
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
    async fn claim_one(&self) -> Result<Option<ClaimedJob>> {
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
        let class = outcome.as_ref().and_then(Outcome::error_class);
        let report = match outcome {
            Some(outcome) => {
                crate::probe::at(crate::probe::Point::BeforeSettle);
                let report = self.settle(&lease, outcome).await;
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
        settle(
            self.store.as_ref(),
            &Direct(self.store.as_ref()),
            lease,
            outcome,
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
        claimed: ClaimedJob,
        abort: CancellationToken,
    ) -> Option<Outcome> {
        let lease = claimed.lease.clone();
        let lost = CancellationToken::new();
        let progress = ProgressSlot::default();
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
        outcome
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
/// where every worker (the [`Worker`], the [`crate::Runtime`], `errand work`
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
    outcome: Outcome,
    policy: &RetryPolicy,
    sampler: &(dyn Fn() -> f64 + Send + Sync),
) -> Result<WorkReport> {
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
    let result = match outcome.into_storable() {
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
        Outcome::Retry { error } => {
            fail_attempt(
                failures,
                lease,
                &mut report,
                failure(error, ErrorClass::Retryable, None),
            )
            .await
        }
        Outcome::Timeout => {
            let error = "the handler ran past its deadline".to_owned();
            fail_attempt(
                failures,
                lease,
                &mut report,
                failure(error, ErrorClass::Timeout, None),
            )
            .await
        }
        Outcome::TimedOut { error } => {
            fail_attempt(
                failures,
                lease,
                &mut report,
                failure(error, ErrorClass::Timeout, None),
            )
            .await
        }
        Outcome::RetryAt { error, at } => {
            fail_attempt(
                failures,
                lease,
                &mut report,
                failure(error, ErrorClass::Retryable, Some(RetryAt::At(at))),
            )
            .await
        }
        Outcome::Permanent { error } => {
            fail_attempt(
                failures,
                lease,
                &mut report,
                failure(error, ErrorClass::Permanent, None),
            )
            .await
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

#[cfg(test)]
mod tests {
    use super::*;

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
