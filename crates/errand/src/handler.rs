//! What a handler is and what it gets: the job's context (its lease's
//! progress, cancellation, and its dependencies' outputs) and the handler
//! trait with its closure form.

use errand_core::encryption::{Field, open_in_place, open_signal};
use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;
use errand_core::{Error, Job, JobId, JobStore, Lease, Outcome, Result};
use serde::de::DeserializeOwned;
use tokio_util::sync::CancellationToken;

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
    /// The children this attempt added, stored if it succeeds.
    pub(crate) children: ChildSlot,
}

/// The children a handler added ([`JobContext::add_children`]), taken by
/// the settlement once the handler returns.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChildSlot(Arc<std::sync::Mutex<Vec<errand_core::NewJob>>>);

impl ChildSlot {
    fn push(&self, jobs: impl IntoIterator<Item = errand_core::NewJob>) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .extend(jobs);
    }

    /// The children added, leaving none.
    pub(crate) fn take(&self) -> Vec<errand_core::NewJob> {
        std::mem::take(
            &mut *self
                .0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        )
    }
}

/// The progress a handler reported since the last lease renewal, which
/// takes it along.
#[derive(Clone, Debug, Default)]
pub(crate) struct ProgressSlot(Arc<std::sync::Mutex<Option<Reported>>>);

/// A report not yet sent: percent and message.
type Reported = (u8, Option<String>);

impl ProgressSlot {
    pub(crate) fn put(&self, percent: u8, message: Option<String>) {
        if let Ok(mut slot) = self.0.lock() {
            *slot = Some((percent, message));
        }
    }

    pub(crate) fn take(&self, attempt: u32) -> Option<errand_core::Progress> {
        let (percent, message) = self.0.lock().ok()?.take()?;
        Some(errand_core::Progress::new(percent, message, attempt))
    }

    /// Puts back a report a failed renewal did not store, unless the
    /// handler has made a newer one since.
    pub(crate) fn restore(&self, report: errand_core::Progress) {
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
            Some(store) => opened_outputs(store, store.dependency_outputs(&self.job.id).await?),
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
                let outputs = store
                    .dependency_outputs_after(&self.job.id, after, limit)
                    .await?;
                opened_outputs(store, outputs)
            }
            None => Ok(Vec::new()),
        }
    }

    /// The signal that ended this job's latest wait — it was enqueued to
    /// wait for one ([`errand_core::NewJob::awaiting`]), or an earlier
    /// attempt suspended it ([`Outcome::Await`]) — with its payload; `None`
    /// when no signal did (it never waited, or its wait timed out under
    /// the `run` policy). Read from the store only when there is one.
    ///
    /// # Errors
    /// The store cannot be read.
    pub async fn signal(&self) -> Result<Option<errand_core::ReceivedSignal>> {
        if self.job.resumed_by.is_none() {
            return Ok(None);
        }
        match &self.reader.0 {
            Some(store) => {
                let mut signal = store.received_signal(&self.job.id).await?;
                open_signal(store.keyring(), &self.job.id, &mut signal)?;
                Ok(signal)
            }
            None => Err(Error::invalid(
                "this context has no store to read the job's signal from",
            )),
        }
    }

    /// The payload of the signal that ended this job's latest wait
    /// ([`JobContext::signal`]), decoded into `T`; `None` when no signal
    /// did, or it carried no payload.
    ///
    /// # Errors
    /// The store cannot be read, or the payload has another shape.
    pub async fn signal_payload<T: DeserializeOwned>(&self) -> Result<Option<T>> {
        match self.signal().await? {
            Some(signal) => match &signal.payload {
                Some(p) => serde_json::from_str(p.as_str()).map(Some).map_err(|e| {
                    Error::invalid(format!(
                        "the payload of the signal {} to job `{}` does not match the expected \
                         shape: {e}",
                        signal.name, self.job.id
                    ))
                }),
                None => Ok(None),
            },
            None => Ok(None),
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

    /// Adds jobs to this step's workflow, stored in the transaction that
    /// completes this attempt — only if it succeeds ([`Outcome::Success`]
    /// or [`Outcome::success_with`]); an attempt that fails, snoozes,
    /// waits or is cancelled adds none, and a retry starts with none. The
    /// step's dependents that wait for it then wait for these children
    /// too, under their own failure policies: a step lists the pages of a
    /// report, adds one child per page, and the step that depends on it
    /// joins them all. Returns each child's id (generated now for one
    /// without), so later children can depend on earlier ones.
    ///
    /// A child joins this job's workflow (none if it has none), must be a
    /// new job (not unique, not debounced, its id not stored), and may
    /// depend on other children, on this job, and on stored jobs that are
    /// not blocked. A child that breaks a rule makes the attempt a
    /// permanent failure that says which and why, and none is stored. At
    /// most [`errand_core::MAX_CHILDREN`] per attempt.
    pub fn add_children(&self, jobs: impl IntoIterator<Item = errand_core::NewJob>) -> Vec<JobId> {
        let jobs: Vec<errand_core::NewJob> = jobs
            .into_iter()
            .map(|mut job| {
                job.id.get_or_insert_with(JobId::generate);
                job
            })
            .collect();
        let ids = jobs.iter().filter_map(|j| j.id.clone()).collect();
        self.children.push(jobs);
        ids
    }

    /// Adds one child ([`JobContext::add_children`]) and returns its id.
    pub fn add_child(&self, job: errand_core::NewJob) -> JobId {
        let mut job = job;
        let id = job.id.get_or_insert_with(JobId::generate).clone();
        self.children.push([job]);
        id
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
/// Dependencies' outputs opened with the store's keys.
fn opened_outputs(
    store: &Arc<dyn JobStore>,
    mut outputs: Vec<(JobId, Option<errand_core::Payload>)>,
) -> Result<Vec<(JobId, Option<errand_core::Payload>)>> {
    for (id, output) in &mut outputs {
        if let Some(output) = output {
            open_in_place(store.keyring(), Field::Output, id, output).map_err(|why| {
                Error::invalid(format!(
                    "the output of dependency `{id}` cannot be read: {why}"
                ))
            })?;
        }
    }
    Ok(outputs)
}
