//! Enqueueing jobs, signalling them, and waiting for one to end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use errand_core::{
    Batch, BatchSeal, Error, Inserted, IntoNewJob, Job, JobId, JobStore, NewJob, NewSignal, Result,
    Signalled, Workflow,
};
use tracing::Instrument;

use crate::spans;

/// Enqueues jobs into a store (through its worker's seam: a whole
/// `Arc<dyn Store>` converts to the `Arc<dyn JobStore>` it takes).
#[derive(Clone, Debug)]
pub struct Client {
    store: Arc<dyn JobStore>,
}

impl Client {
    /// A client over `store`.
    pub fn new(store: Arc<dyn JobStore>) -> Self {
        Client { store }
    }

    /// Inserts a job — a [`NewJob`], or a typed job's arguments
    /// (`client.enqueue(&Receipt { .. })`, see [`errand_core::JobArgs`]); an
    /// existing id returns the existing job unchanged and creates nothing.
    ///
    /// An id de-duplicates exactly as long as its job is stored: ready,
    /// running and dead jobs keep it (a dead one until an operator purges
    /// it); done and cancelled ones until retention deletes them — the
    /// [`crate::Runtime`]'s pruner after 7 days by default
    /// ([`crate::RuntimeBuilder::retention`]), or `errand prune
    /// --older-than`. After that, enqueueing the same id creates a new job.
    /// Keep retention longer than the longest time an id may be sent again.
    ///
    /// The call runs in an `enqueue` span (see the crate's `otel` feature).
    pub async fn enqueue(&self, job: impl IntoNewJob) -> Result<Inserted> {
        let mut jobs = [job.into_new_job()?];
        let span = spans::enqueue_span(jobs[0].queue.as_str(), 1);
        spans::link_jobs(&span, &mut jobs);
        let [job] = jobs;
        let result = self.store.insert(job).instrument(span.clone()).await;
        spans::record_enqueued(&span, result.as_ref().map(Some));
        let mut inserted = result?;
        self.opened(&mut inserted);
        Ok(inserted)
    }

    /// The job as enqueued, its payload opened with the store's keys (a
    /// store that encrypts answers with what it stored).
    fn opened(&self, inserted: &mut Inserted) {
        errand_core::encryption::open_job(self.store.keyring(), &mut inserted.job);
    }

    /// Inserts many jobs in one transaction (in one `enqueue` span).
    pub async fn enqueue_many(&self, mut jobs: Vec<NewJob>) -> Result<Vec<Inserted>> {
        let queue = jobs.first().map_or("", |j| j.queue.as_str()).to_owned();
        let span = spans::enqueue_span(&queue, jobs.len());
        spans::link_jobs(&span, &mut jobs);
        let result = self.store.insert_many(jobs).instrument(span.clone()).await;
        spans::record_enqueued(&span, result.as_ref().map(|v| v.first()));
        let mut inserted = result?;
        for one in &mut inserted {
            self.opened(one);
        }
        Ok(inserted)
    }

    /// Inserts every step of a workflow in one transaction: all or none
    /// (a cycle, an unknown dependency or a bad step refuses the whole).
    /// Results follow the order the steps were added. To enqueue it inside
    /// a transaction the application holds, pass `workflow.into_jobs()` to
    /// `SqliteStore::enqueue_many_in` or `PgStore::enqueue_many_in`.
    pub async fn enqueue_workflow(&self, workflow: Workflow) -> Result<Vec<Inserted>> {
        self.enqueue_many(workflow.into_jobs()).await
    }

    /// Seals a batch: no job joins it after ([`NewJob::in_batch`]), and
    /// its `on_success` / `on_finish` callbacks are enqueued, each
    /// depending on every job of the batch, so each runs exactly once.
    /// Sealing it again answers with the batch as it is.
    pub async fn seal_batch(&self, seal: &BatchSeal) -> Result<Batch> {
        self.store.seal_batch(seal).await
    }

    /// Waits for job `id` to end — done (with its output), dead (with its
    /// last error) or cancelled — and returns it as it ended; a job that
    /// has already ended is returned at once. Waiting holds no connection
    /// and polls nothing: the store tells the waiter when the job may have
    /// ended ([`JobStore::finish_signal`]), whichever process ends it, and
    /// the job is read again then (and, in case a notification was lost,
    /// every [`Client::WAIT_RECHECK`]).
    ///
    /// A dead or cancelled job can still be replayed by an operator; the
    /// wait ends at the first end it sees.
    ///
    /// The job's payload and output come opened with the store's keys
    /// (see [`crate::encryption`]) where it holds them.
    ///
    /// # Errors
    /// [`Error::TimedOut`] when `timeout` passes first (the job is not
    /// changed), [`Error::NotFound`] when no job has that id (or it was
    /// purged while waited for), or a storage error.
    pub async fn wait(&self, id: &JobId, timeout: Duration) -> Result<Job> {
        // No deadline when it lies past what the clock can say (a
        // `Duration::MAX` timeout: wait as long as it takes).
        let until = Instant::now().checked_add(timeout);
        let mut signal = self.store.finish_signal(id).await?;
        loop {
            let mut job = self.store.get(id).await?;
            if job.state.is_final() {
                // Its payload and output opened with the store's keys.
                errand_core::encryption::open_job(self.store.keyring(), &mut job);
                return Ok(job);
            }
            let left = until.map_or(Duration::MAX, |u| {
                u.saturating_duration_since(Instant::now())
            });
            if left.is_zero() {
                return Err(Error::TimedOut(format!(
                    "job {id} is still {} after {timeout:?}; nothing was changed (wait longer, or look at it with `errand show {id}`)",
                    job.state
                )));
            }
            signal.wait(left.min(Self::WAIT_RECHECK)).await;
        }
    }

    /// Sends a signal to a job ([`NewSignal`]): delivered when the job is
    /// `waiting` for that name (it becomes `ready`, due now, and its next
    /// attempt reads the payload with [`crate::JobContext::signal`]); kept
    /// for a later wait when the job is not waiting for it and the signal
    /// asks to be buffered; otherwise refused. A signal is delivered at
    /// most once and each wait takes exactly one, however many senders
    /// race. To send it with the application's own rows, in one
    /// transaction, use the store's `signal_in`.
    ///
    /// # Errors
    /// [`Error::InvalidState`] when the job is not waiting for it (the
    /// message says what the job is doing), [`Error::NotFound`] for an
    /// unknown job, [`Error::Invalid`] for a payload too large.
    pub async fn signal(&self, signal: &NewSignal) -> Result<Signalled> {
        self.store.signal(signal).await
    }

    /// How often a waiting [`Client::wait`] reads its job again when it
    /// has heard nothing: the store's signal is the way it hears, and this
    /// only bounds the cost of one that was lost. (A PostgreSQL store whose
    /// notifications are known not to arrive wakes its waiters every
    /// second instead.)
    pub const WAIT_RECHECK: Duration = Duration::from_secs(60);

    /// The underlying store.
    pub fn store(&self) -> &Arc<dyn JobStore> {
        &self.store
    }
}
