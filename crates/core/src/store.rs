//! The storage contract every backend implements.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;
use serde::Serialize;

use crate::clock::Timestamp;
use crate::counted::ExactCount;
use crate::cron::{ScheduleChange, StoredSchedule};
use crate::error::Result;
use crate::error_class::ErrorClass;
use crate::filter::JobFilter;
use crate::ids::{JobId, Name};
use crate::job::{ClaimedJob, Job, JobDetail, Lease, Progress};
use crate::labels::WorkflowId;
use crate::minutes::{MinuteCount, MinuteQuery, MinuteRow};
use crate::new_job::NewJob;
use crate::payload::Payload;
use crate::queue_limit::QueueLimit;
use crate::requests::{AuditEntry, AuditFilter, PausedQueue};
use crate::signal::{Await, NewSignal, ReceivedSignal};
pub use crate::stamp::AuditStamp;
use crate::state::{JobKey, JobState, Schedule};
use crate::stats::{Stats, StatsRequest, WorkerReport};

/// The result of inserting a job.
#[derive(Clone, Debug)]
pub struct Inserted {
    /// The stored job: the new one, or the one that already had this id.
    pub job: Job,
    /// `false` when a job with this id already existed (nothing was created).
    pub created: bool,
}

/// What sending a signal did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Signalled {
    /// The job after the signal: `ready` when it was delivered.
    pub job: Job,
    /// `true`: the job was waiting for it and is ready now. `false`: it
    /// was kept for the job's next wait of this name (buffered).
    pub delivered: bool,
}

/// What to claim.
#[derive(Clone, Debug)]
pub struct ClaimRequest {
    /// Queues to claim from; empty means every queue.
    pub queues: Vec<Name>,
    /// At most this many jobs.
    pub limit: u32,
    /// Length of the lease each claimed job gets.
    pub lease: Duration,
    /// A rate limit the claim spends from: it claims no more jobs than the
    /// bucket holds whole tokens and spends one token per job it claims,
    /// in the claim's own transaction, so a claim that finds nothing due
    /// leaves the bucket as it was. `None`: no rate limit.
    pub rate: Option<ClaimRate>,
    /// Whether the claim also looks for running jobs whose lease expired:
    /// it takes them back first (each a new attempt) and moves those with
    /// no budget left to `dead`. A worker that claims continuously asks
    /// for it about once a second rather than at every claim: the look
    /// reads the lease index, which on PostgreSQL keeps an entry for every
    /// recent attempt until vacuum removes it. `false` claims only ready
    /// jobs. [`JobStore::sweep_expired`] kills the expired jobs with no budget
    /// left whatever the claims ask.
    pub reclaim: bool,
}

/// The shared token bucket a rate-limited claim spends from.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimRate {
    /// The bucket (every process claiming with it shares it).
    pub bucket: RateBucket,
    /// Its rate and burst.
    pub limit: RateLimit,
}

impl ClaimRequest {
    /// Checks the lease length ([`crate::bounds::check_lease`]) and the
    /// rate, if any; stores call it before claiming.
    pub fn validate(&self) -> Result<()> {
        crate::bounds::check_lease("the lease", self.lease)?;
        match &self.rate {
            Some(rate) => rate.limit.validate(),
            None => Ok(()),
        }
    }
}

/// What a reschedule changes on a waiting job: its due time, its
/// priority, or both (`None` keeps it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Reschedule {
    /// When the job becomes due, on the store's clock.
    pub run: Option<Schedule>,
    /// Its new priority (higher is claimed first).
    pub priority: Option<i16>,
}

/// When a failed job should run again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryAt {
    /// After a delay on the store's clock.
    After(Duration),
    /// At a given time.
    At(Timestamp),
}

/// A failed attempt, as the worker reports it.
#[derive(Clone, Debug)]
pub struct Failure {
    /// What went wrong (recorded as `last_error` and in the history).
    pub error: String,
    /// The error's class.
    pub class: ErrorClass,
    /// When to retry if attempts remain; `None` sends the job to `dead` at once.
    pub retry: Option<RetryAt>,
}

impl Failure {
    /// Checks what a store records: a retry delay or time in range
    /// ([`crate::bounds`]) and an error without NUL characters (workers
    /// clean theirs with [`crate::Outcome::into_storable`]). Stores call it
    /// before recording the failure.
    pub fn validate(&self) -> Result<()> {
        match self.retry {
            Some(RetryAt::After(d)) => crate::bounds::check_delay("the retry delay", d)?,
            Some(RetryAt::At(t)) => crate::bounds::check_time("the retry time", t)?,
            None => {}
        }
        check_recorded_text("the error", &self.error)
    }
}

/// Refuses a NUL character in text a store records (an error, a reason):
/// PostgreSQL's text cannot hold it, and both stores answer alike.
pub fn check_recorded_text(what: &str, text: &str) -> Result<()> {
    if text.contains('\0') {
        return Err(crate::Error::invalid(format!(
            "{what} holds a NUL character; remove it (a worker replaces it with U+FFFD)"
        )));
    }
    Ok(())
}

/// One dependency edge as a page of steps reads it: the job, one job it
/// depends on, and how many it depends on in all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StepEdge {
    /// The dependent.
    pub job: JobId,
    /// One of its dependencies.
    pub depends_on: JobId,
    /// How many dependencies the job has in all.
    pub of: u32,
}

/// A token-bucket rate: `per_second` tokens refill continuously, up to
/// `burst` held at once.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RateLimit {
    /// Refill rate (> 0).
    pub per_second: f64,
    /// Bucket size (≥ 1): how many may start at once after a quiet spell.
    pub burst: u32,
}

/// The name of a shared token bucket: one per rate-limited queue, and one
/// per key of a queue whose keys are rate limited.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct RateBucket(String);

impl RateBucket {
    /// The bucket of a queue's rate.
    pub fn queue(queue: &Name) -> Self {
        RateBucket(format!("queue:{queue}"))
    }

    /// The bucket of one key's rate within a queue.
    pub fn key(queue: &Name, key: &JobKey) -> Self {
        RateBucket(format!("key:{queue}:{}", key.name))
    }

    /// The bucket's name as stored.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RateBucket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl RateLimit {
    /// Checks the numbers.
    pub fn validate(&self) -> Result<()> {
        if !(self.per_second.is_finite() && self.per_second > 0.0) || self.burst == 0 {
            return Err(crate::Error::invalid(format!(
                "a rate limit needs a positive rate and a burst of at least 1 (got {}/s, burst {})",
                self.per_second, self.burst
            )));
        }
        Ok(())
    }
}

/// What a sweep of expired leases did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Jobs whose final attempt's lease expired, now `dead`, in id order.
    pub dead: Vec<JobId>,
}

/// Where a failed attempt left the job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailResult {
    /// Back to `ready`, due at the given time.
    Retrying(Timestamp),
    /// Out of attempts or permanent: `dead`.
    Dead,
}

impl FailResult {
    /// Reads the decision off the job the store returned.
    pub fn of(job: &Job) -> Self {
        if job.state == JobState::Dead {
            FailResult::Dead
        } else {
            FailResult::Retrying(job.available_at)
        }
    }
}

/// Wakes an idle worker when new work may be due. Each worker holds its
/// own; a signal sent while the worker was busy is not lost: the next
/// [`WorkSignal::wait`] returns at once.
#[async_trait]
pub trait WorkSignal: Send + fmt::Debug {
    /// Waits until new work may be due or `timeout` passes. Returns `true`
    /// when signalled, `false` on timeout (the caller polls then anyway).
    async fn wait(&mut self, timeout: Duration) -> bool;
}

/// The worker's seam: what enqueueing, claiming, settling and the
/// maintenance loops ask of a backend.
///
/// Every method is atomic. Every settlement (`complete`, `fail`, `snooze`,
/// `cancel_running`, `heartbeat`, `release`) is one conditional statement that
/// changes the job only if it is `running`, its token equals the lease's and
/// `lease_until > now`; otherwise it returns [`crate::Error::LeaseLost`] and
/// changes nothing.
#[async_trait]
pub trait JobStore: Send + Sync + fmt::Debug {
    /// The keys this store seals payloads, outputs and signal payloads
    /// with as it writes them (see [`crate::encryption`]); its reads
    /// return them as stored, and readers open them with these keys.
    fn keyring(&self) -> Option<&crate::encryption::Keyring> {
        None
    }

    /// Inserts a job, or returns the existing job with the same id. An id
    /// is taken while its job's row exists: once [`JobStore::prune`] or
    /// [`AdminStore::purge_jobs`] has deleted the job, the id names a new job.
    async fn insert(&self, job: NewJob) -> Result<Inserted>;

    /// Inserts many jobs atomically (all or none), each like [`JobStore::insert`].
    async fn insert_many(&self, jobs: Vec<NewJob>) -> Result<Vec<Inserted>>;

    /// Claims up to `limit` due jobs in one short transaction. Before
    /// claiming, running jobs whose final attempt's lease expired go to
    /// `dead`. A claimed job has `attempts` incremented, a fresh token and
    /// `lease_until = now + lease`. With `req.rate`, the same transaction
    /// claims at most as many jobs as the bucket holds whole tokens
    /// (refilled on the store's clock; created full on first use) and
    /// spends exactly one token per job claimed: tokens are taken, the jobs
    /// claimed, and the unclaimed remainder given back before the commit.
    /// An invalid rate is refused with [`crate::Error::Invalid`].
    async fn claim(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>>;

    /// Acknowledges success: `running` → `done`.
    async fn complete(&self, lease: &Lease) -> Result<Job>;

    /// Acknowledges success like [`JobStore::complete`] and records
    /// `output` (checked by [`Payload::output`]) with the job, in the same
    /// statement: the job is done with its output or not at all.
    async fn complete_with_output(&self, lease: &Lease, output: &Payload) -> Result<Job>;

    /// Acknowledges success like [`JobStore::complete_with_output`]
    /// (`output` optional) and, in the same transaction, adds `children`
    /// to the step's workflow: each is inserted as a new job, and every
    /// dependent of the step that still waits for it waits for each child
    /// too, under its own failure policy (the rules are in
    /// `crates/core/src/children.rs`). The step is done with its children
    /// or, when its lease is lost ([`crate::Error::LeaseLost`]) or a child
    /// is refused ([`crate::Error::Invalid`]: see [`crate::check_children`],
    /// [`crate::check_outside`], [`crate::child_exists`]), nothing is
    /// written at all. With no children it is a plain completion.
    async fn complete_with_children(
        &self,
        lease: &Lease,
        output: Option<&Payload>,
        children: &[NewJob],
    ) -> Result<crate::children::ChildrenAdded>;

    /// The outputs of the jobs `id` depends on, in the order they were
    /// named: `None` for one that recorded none (or that was pruned).
    async fn dependency_outputs(&self, id: &JobId) -> Result<Vec<(JobId, Option<Payload>)>>;

    /// One page of the outputs of the jobs `id` depends on, ordered by
    /// dependency id (byte order) rather than as named: those whose id
    /// sorts after `after` (from the first when `None`), at most `limit`,
    /// `None` for one that recorded none (or that was pruned). Reading page
    /// after page, each starting after the last id of the one before,
    /// yields every dependency once while holding at most `limit` outputs
    /// (each at most [`crate::MAX_OUTPUT_BYTES`]): how a fan-in of
    /// thousands of steps is read. The default reads them all and keeps
    /// the page; the stores read only the page (one range of the edges'
    /// primary key).
    async fn dependency_outputs_after(
        &self,
        id: &JobId,
        after: Option<&JobId>,
        limit: u32,
    ) -> Result<Vec<(JobId, Option<Payload>)>> {
        let mut all = self.dependency_outputs(id).await?;
        all.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
        Ok(all
            .into_iter()
            .filter(|(dep, _)| after.is_none_or(|a| dep.as_str() > a.as_str()))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .collect())
    }

    /// Acknowledges many jobs in one transaction, each fenced by its own
    /// token and lease exactly like [`JobStore::complete`]. Returns, in input
    /// order, whether each was acknowledged (`false`: its lease was lost and
    /// nothing changed).
    async fn complete_many(&self, leases: &[Lease]) -> Result<Vec<bool>>;

    /// Acknowledges `leases` exactly like [`JobStore::complete_many`], then
    /// claims like [`JobStore::claim`] — in one transaction where the backend
    /// can (PostgreSQL: one commit, two round trips), so a busy worker
    /// settles one batch and takes the next together. The claim may not see
    /// the acknowledgments (a key's running count may still include them).
    ///
    /// `Err` means nothing was acknowledged as far as the store can tell
    /// (a connection lost around the commit leaves it unknown): the
    /// acknowledgments may be sent again, and, fenced, they find an already
    /// acknowledged job done. The claim's own outcome is the inner result.
    /// The default acknowledges, then claims.
    async fn complete_and_claim(
        &self,
        leases: &[Lease],
        req: &ClaimRequest,
    ) -> Result<(Vec<bool>, Result<Vec<ClaimedJob>>)> {
        let acked = if leases.is_empty() {
            Vec::new()
        } else {
            self.complete_many(leases).await?
        };
        Ok((acked, self.claim(req).await))
    }

    /// Records a failure: `running` → `ready` (retry due later) while attempts
    /// remain and `failure.retry` is set, otherwise `running` → `dead`.
    async fn fail(&self, lease: &Lease, failure: Failure) -> Result<Job>;

    /// Records many failures, each fenced by its own token and lease and
    /// judged exactly like [`JobStore::fail`] (retry or dead, the elapsed-time
    /// budget, the history entry). Returns, in input order, the job as
    /// recorded, or `None` where the lease was lost (nothing changed for
    /// that job). PostgreSQL and SQLite record them in one transaction, so
    /// `Err` means none was recorded; the default records them one by one.
    async fn fail_many(&self, items: &[(Lease, Failure)]) -> Result<Vec<Option<Job>>> {
        let mut out = Vec::with_capacity(items.len());
        for (lease, failure) in items {
            match self.fail(lease, failure.clone()).await {
                Ok(job) => out.push(Some(job)),
                Err(crate::Error::LeaseLost { .. }) => out.push(None),
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }

    /// Suspends the job: `running` → `waiting` for the signal `wait.signal`
    /// (timing out `wait.timeout` from now), fenced like every settlement,
    /// without spending the attempt, which the history records as
    /// `awaiting`. When a signal of that name was kept for the job
    /// ([`NewSignal::buffer`]), the same statement delivers it instead:
    /// the job is `ready`, due now, resumed by that signal.
    async fn suspend(&self, lease: &Lease, wait: &Await) -> Result<Job>;

    /// Sends a signal ([`NewSignal`]). Delivered — the job was `waiting`
    /// for this name: in one statement the job becomes `ready`, due now,
    /// its wait cleared and [`Job::resumed_by`] naming the signal, which is
    /// recorded as delivered. Otherwise, with `buffer`, a job that has not
    /// ended keeps the signal for a later wait; without it, nothing is
    /// written and the answer is [`crate::Error::InvalidState`] from
    /// [`crate::signal_refused`]. A signal stamped with a person writes a
    /// `signal` audit entry in the same transaction. A missing job is
    /// [`crate::Error::NotFound`].
    async fn signal(&self, signal: &NewSignal) -> Result<Signalled>;

    /// The signal that ended job `id`'s latest wait (the one
    /// [`Job::resumed_by`] names), with its payload; `None` when none did.
    async fn received_signal(&self, id: &JobId) -> Result<Option<ReceivedSignal>>;

    /// Ends up to `limit` waits whose timeout has passed, each by its
    /// policy in one statement: `run` makes the job `ready` (due now, no
    /// signal), `fail` moves it to `dead` with class `signal_timeout`,
    /// `cancel` to `cancelled`; the dependents of jobs that ended are
    /// released in the same transaction. Returns the jobs as changed.
    async fn expire_waits(&self, limit: u32) -> Result<Vec<Job>>;

    /// Re-schedules after `delay` without spending an attempt.
    async fn snooze(&self, lease: &Lease, delay: Duration) -> Result<Job>;

    /// The handler cancelled its own job: `running` → `cancelled`.
    async fn cancel_running(&self, lease: &Lease, reason: &str) -> Result<Job>;

    /// Extends the lease to `now + extend`; returns the new `lease_until`.
    async fn heartbeat(&self, lease: &Lease, extend: Duration) -> Result<Timestamp>;

    /// Extends the lease like [`JobStore::heartbeat`] and records
    /// `progress` with the job, in the same fenced statement.
    async fn heartbeat_with_progress(
        &self,
        lease: &Lease,
        extend: Duration,
        progress: &Progress,
    ) -> Result<Timestamp>;

    /// Gives the job back (`running` → `ready`, due now) without spending
    /// an attempt, as a draining worker does.
    async fn release(&self, lease: &Lease) -> Result<Job>;

    /// Seals a batch ([`crate::BatchSeal`]): in one transaction, marks it
    /// sealed (no job joins it after) and inserts its callbacks, each a
    /// dependent of every job it holds. Sealing a batch no job joined
    /// creates it sealed, its callbacks due at once; sealing a sealed batch
    /// changes nothing and answers with it as it is.
    async fn seal_batch(&self, seal: &crate::BatchSeal) -> Result<crate::Batch>;

    /// Moves running jobs whose final attempt's lease expired (or whose
    /// lost-lease budget is spent) to `dead`.
    async fn sweep_expired(&self) -> Result<SweepReport>;

    /// Retention: deletes up to `limit` `done` and `cancelled` jobs that
    /// finished more than `older_than` ago, with their attempt history
    /// (audit rows stay). Never deletes `dead` jobs. Returns how many.
    async fn prune(&self, older_than: Duration, limit: u32) -> Result<u64>;

    /// One job, or [`crate::Error::NotFound`].
    async fn get(&self, id: &JobId) -> Result<Job>;

    /// A signal for one who waits for job `id` to end (done, dead or
    /// cancelled): it fires when the job may have ended, and may fire
    /// when it has not (the waiter reads the job again with
    /// [`JobStore::get`]). Every end that commits after this returns
    /// fires it, whichever process ends the job; PostgreSQL hears it
    /// through `LISTEN/NOTIFY`, SQLite from its own writes and, for
    /// other processes' writes, from the file's change counter. A job
    /// that does not exist is not an error here: `get` says so.
    async fn finish_signal(&self, id: &JobId) -> Result<Box<dyn WorkSignal>>;

    /// Records a worker process's report of itself (an upsert by id), which
    /// also tells when it last completed a claim cycle. Reports of workers
    /// silent for a day are deleted.
    async fn report_worker(&self, report: &WorkerReport) -> Result<()>;

    /// Adds per-minute counts for the charts, in one transaction: a
    /// counter's value adds to the stored one, a gauge keeps the larger of
    /// the two. Callers check the rows with [`crate::check_minutes`].
    async fn record_minutes(&self, counts: &[MinuteCount]) -> Result<()>;

    /// Deletes the per-minute counts of minutes before `before` (minutes
    /// since the Unix epoch); returns how many rows.
    async fn prune_minutes(&self, before: i64) -> Result<u64>;

    /// Takes up to `want` tokens from the shared bucket `bucket` (created
    /// full on first use, refilled on the store's clock) in one statement,
    /// and returns how many were granted. Every process using the store
    /// shares the bucket. A claim spends from a bucket itself
    /// ([`ClaimRequest::rate`]); this is for tokens spent on jobs already
    /// claimed (per-key rates).
    async fn take_tokens(&self, bucket: &RateBucket, limit: RateLimit, want: u32) -> Result<u32>;
}

/// The operator's seam: what [`crate::Admin`] asks of a backend.
///
/// Each write is one set-based, all-or-none step in the backend's dialect
/// that writes its own audit entries. The policy around it — validating
/// the request, naming each job once, explaining a refusal, wording the
/// audit entry — is [`crate::Admin`]'s: call that, not these.
#[async_trait]
pub trait AdminStore: Send + Sync + fmt::Debug {
    /// Replays every job in `ids` (distinct ids), each of which must be
    /// dead or cancelled: `ready`, due now, attempts and lost leases reset,
    /// `replays` incremented, the id kept, and a `replay` audit entry
    /// stamped with `by`. All or none: when any named job is missing or in
    /// another state, nothing changes and the answer is empty.
    async fn replay_jobs(&self, ids: &[JobId], by: &AuditStamp) -> Result<Vec<Job>>;

    /// Cancels every job in `ids` (distinct ids), each of which must be
    /// ready or running, with a `cancel` audit entry for each; a running
    /// job's attempt ends in its history as cancelled. All or none, like
    /// [`AdminStore::replay_jobs`].
    async fn cancel_jobs(&self, ids: &[JobId], by: &AuditStamp) -> Result<Vec<Job>>;

    /// Deletes every job in `ids` (distinct ids), each of which must be
    /// dead, with its attempt history, writing a `purge` audit entry for
    /// each (the audit log keeps it after the job is gone). All or none,
    /// like [`AdminStore::replay_jobs`]; returns the ids purged.
    async fn purge_jobs(&self, ids: &[JobId], by: &AuditStamp) -> Result<Vec<JobId>>;

    /// Inserts each copy (built with [`NewJob::copy_of`]) while its
    /// original (the id beside it, distinct) is still dead or cancelled,
    /// with a `copy` audit entry naming both; the originals are not
    /// touched. Answers with the new jobs in the order of `copies`. All or
    /// none, like [`AdminStore::replay_jobs`].
    async fn copy_jobs(&self, copies: &[(JobId, NewJob)], by: &AuditStamp) -> Result<Vec<Job>>;

    /// Moves every job in `ids` (distinct ids), each of which must be
    /// ready, to a new due time and/or priority, with a `reschedule`
    /// audit entry for each; nothing else about the job changes. All or
    /// none, like [`AdminStore::replay_jobs`].
    async fn reschedule_jobs(
        &self,
        ids: &[JobId],
        to: &Reschedule,
        by: &AuditStamp,
    ) -> Result<Vec<Job>>;

    /// Pauses a queue for every process using the store: claims take
    /// nothing from it (neither due jobs nor expired leases) until it is
    /// resumed; running jobs finish. Writes a `pause` audit entry. Returns
    /// `false` (writing nothing) when it was already paused.
    async fn pause_queue(&self, queue: &Name, by: &AuditStamp) -> Result<bool>;

    /// Resumes a paused queue, with a `resume` audit entry. Returns `false`
    /// (writing nothing) when it was not paused.
    async fn resume_queue(&self, queue: &Name, by: &AuditStamp) -> Result<bool>;

    /// Sets a queue's concurrency cap (`Some`), or clears it (`None`): from
    /// the next claim on, claims in every process start one of its jobs
    /// only while fewer than the cap are running (expired leases count
    /// until reclaimed or swept; jobs already running go on). Writes a
    /// `limit` or `unlimit` audit entry. Returns `false` (writing nothing)
    /// when the queue already had that cap, or had none to clear. The cap
    /// was checked by the caller ([`crate::check_concurrency`]).
    async fn set_queue_limit(
        &self,
        queue: &Name,
        concurrency: Option<u32>,
        by: &AuditStamp,
    ) -> Result<bool>;

    /// The queues' concurrency caps, by name.
    async fn queue_limits(&self) -> Result<Vec<QueueLimit>>;

    /// Counts every queue's jobs per state whole (each state of
    /// [`crate::ExactCount::state`] through the index that holds it) and stores the
    /// counts in place of the last ones, for [`AdminStore::stats`] to show
    /// where its live read stops at the cap. Reads every ready, blocked,
    /// waiting, running and dead job's index entry: a running service
    /// calls it once a minute while some count passes the cap, never a
    /// page view.
    async fn count_exactly(&self) -> Result<Vec<ExactCount>>;

    /// The payloads, outputs and signal payloads of at most `limit` jobs
    /// after `after` in id order, as stored (for `errand keys rotate`).
    async fn stored_values(
        &self,
        _after: Option<&JobId>,
        _limit: u32,
    ) -> Result<crate::encryption::ValuePage> {
        Err(crate::Error::invalid(
            "this store cannot re-encrypt its values",
        ))
    }

    /// Replaces stored values in one transaction, each only where it still
    /// holds what was read; returns how many were replaced.
    async fn rewrite_values(&self, _rewrites: &[crate::encryption::Rewrite]) -> Result<u64> {
        Err(crate::Error::invalid(
            "this store cannot re-encrypt its values",
        ))
    }

    /// One job with its attempt history and audit entries.
    async fn detail(&self, id: &JobId) -> Result<JobDetail>;

    /// Jobs matching the filter, oldest first. Jobs created at the same
    /// instant (enqueued in one call, or in the same millisecond) come in
    /// an order the store fixes when it creates them: by id, except
    /// SQLite's listing without a tag or workflow filter, which lists them
    /// in the order they are stored (for one call: the order given, or,
    /// when jobs of the call depend on each other, usually depth by depth
    /// — each after the jobs of the call it depends on — unless that would
    /// reorder a concurrency key's jobs).
    async fn list(&self, filter: &JobFilter) -> Result<Vec<Job>>;

    /// The candidates of a search for jobs carrying every entry of `meta`:
    /// the jobs of [`AdminStore::list`]`(filter)`, of which a store may
    /// leave out any that does not carry all of `meta` (PostgreSQL reads
    /// them through its metadata index). The search checks every term on
    /// what it is given, so the default, which leaves out none, is right.
    async fn search_candidates(&self, filter: &JobFilter, meta: &crate::Meta) -> Result<Vec<Job>> {
        let _ = meta;
        self.list(filter).await
    }

    /// How many steps of `workflow` are in each state (states with none
    /// left out; nothing at all for a workflow no stored job carries).
    async fn workflow_counts(&self, workflow: &WorkflowId) -> Result<Vec<(JobState, u64)>>;

    /// The first `first` dependency edges of each job in `ids`, each job's
    /// in the order its dependencies were named, with how many it has in
    /// all (a page of steps shows a bounded number).
    async fn dependency_edges(&self, ids: &[JobId], first: u32) -> Result<Vec<StepEdge>>;

    /// A batch with its counts by state; [`crate::Error::NoSuchBatch`]
    /// when none has that id.
    async fn batch(&self, id: &WorkflowId) -> Result<crate::Batch>;

    /// The paused queues, by name.
    async fn paused_queues(&self) -> Result<Vec<PausedQueue>>;

    /// Applies one change to the stored schedules if its condition holds
    /// (see [`ScheduleChange`]), writing in the same transaction its audit
    /// entry ([`ScheduleChange::action`], stamped with `by`, naming the
    /// schedule and its queue). Returns the schedule as changed (as it was,
    /// for a removal), or `None` when the condition did not hold and
    /// nothing was written.
    async fn change_schedule(
        &self,
        change: &ScheduleChange,
        by: &AuditStamp,
    ) -> Result<Option<StoredSchedule>>;

    /// The stored schedules, by name.
    async fn schedules(&self) -> Result<Vec<StoredSchedule>>;

    /// Audit entries, newest first.
    async fn audit_log(&self, filter: &AuditFilter) -> Result<Vec<AuditEntry>>;

    /// The operator signals: per queue counts (bounded by `req.cap` rows per
    /// state), oldest due age, leases, retries and dead letters in the
    /// window by error class, paused queues, and the workers' reports.
    async fn stats(&self, req: &StatsRequest) -> Result<Stats>;

    /// The stored per-minute counts of `query.from..query.until`, one row
    /// per minute and series, added over the queue asked for (or over every
    /// queue): the sum and the largest of the queues' values. Ordered by
    /// minute, then series.
    async fn minutes(&self, query: &MinuteQuery) -> Result<Vec<MinuteRow>>;
}

/// The wake-up seam: how an idle worker hears of new work.
pub trait Notifier: Send + Sync + fmt::Debug {
    /// A wake-up signal for an idle worker: in-process for SQLite,
    /// `LISTEN/NOTIFY` for PostgreSQL (polling when notifications do not
    /// arrive).
    fn work_signal(&self) -> Box<dyn WorkSignal>;
}

/// What a worker needs of a backend: the worker's seam and the wake-up
/// notifier, without the operator's reads and actions. The worker path
/// ([`Notifier`] and [`JobStore`]) takes this, so a stand-in for a worker's
/// store implements these two and nothing else. Every type that implements
/// both is one; an `Arc<dyn Store>` converts to an `Arc<dyn WorkerStore>`.
pub trait WorkerStore: JobStore + Notifier {}

impl<T: JobStore + Notifier + ?Sized> WorkerStore for T {}

/// A whole backend: the worker's seam, the operator's seam and the
/// wake-up notifier. Every type that implements the three is a store.
pub trait Store: WorkerStore + AdminStore {}

impl<T: WorkerStore + AdminStore + ?Sized> Store for T {}
