//! Periodic jobs: cron schedules enqueued exactly once per tick, however
//! many processes run the same schedule.
//!
//! Every tick of a schedule maps to one job id,
//! `cron:<schedule>:<tick in RFC 3339>`, and inserting an existing id creates
//! nothing — so twenty processes enqueueing the same tick produce one job,
//! with no lock and no leader election. The job is due at its tick (on the
//! store's clock), so a process whose clock runs ahead cannot start it early.
//!
//! Schedules come from code ([`CronSchedule`], given to the enqueuer) and,
//! when [`CronEnqueuer::with_stored_schedules`] is on, from the database
//! (`errand schedule add`, [`crate::Admin::add_schedule`]): those are read
//! again at every pass, so a schedule added, paused, resumed or removed
//! takes effect at the next pass of every service.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use errand_core::{AdminStore, CronSchedule, Inserted, JobStore, NewJob, Result, Timestamp};

/// Enqueues the due ticks of a set of schedules. Safe to run in any number
/// of processes at once.
#[derive(Debug)]
pub struct CronEnqueuer {
    store: Arc<dyn JobStore>,
    schedules: Vec<CronSchedule>,
    /// Where the stored schedules are read, when they run too.
    stored: Option<Arc<dyn AdminStore>>,
    /// The stored schedules that ran at the last pass (for the next wake).
    last_stored: Mutex<Vec<CronSchedule>>,
    /// How far back missed ticks are looked for (default 1 h).
    pub lookback: Duration,
    /// How late a tick may be and still count as on time for
    /// [`errand_core::Misfire::Skip`] (default 1 min).
    pub grace: Duration,
    /// With stored schedules: the longest wait between two passes, so a
    /// schedule added meanwhile is noticed (default 10 s, at least 1 s).
    pub refresh: Duration,
}

impl CronEnqueuer {
    /// An enqueuer for `schedules`.
    pub fn new(store: Arc<dyn JobStore>, schedules: Vec<CronSchedule>) -> Self {
        CronEnqueuer {
            store,
            schedules,
            stored: None,
            last_stored: Mutex::new(Vec::new()),
            lookback: Duration::from_secs(3600),
            grace: Duration::from_secs(60),
            refresh: Duration::from_secs(10),
        }
    }

    /// Also runs the schedules stored in the database, read from `admin`
    /// (usually the same store) at every pass: each one that is not paused
    /// enqueues its due ticks from when it was added, replaced or last
    /// resumed.
    pub fn with_stored_schedules(mut self, admin: Arc<dyn AdminStore>) -> Self {
        self.stored = Some(admin);
        self
    }

    /// Whether there is anything to run.
    pub fn is_empty(&self) -> bool {
        self.schedules.is_empty() && self.stored.is_none()
    }

    /// One pass at `now`: inserts every due tick's job (existing ids create
    /// nothing). Returns what was inserted or found.
    ///
    /// A stored schedule that no longer makes valid jobs is left out with a
    /// warning; the others run. When the stored schedules cannot be read,
    /// the schedules given in code still run and the error is returned
    /// after them.
    pub async fn run_once(&self, now: Timestamp) -> Result<Vec<Inserted>> {
        let mut jobs = Vec::new();
        for s in &self.schedules {
            self.push_due(s, now, None, &mut jobs);
        }
        let stored = if let Some(admin) = &self.stored {
            match admin.schedules().await {
                Ok(stored) => Some(stored),
                Err(e) => {
                    if !jobs.is_empty() {
                        self.enqueue(jobs).await?;
                    }
                    return Err(e);
                }
            }
        } else {
            None
        };
        if let Some(stored) = stored {
            let mut running = Vec::new();
            for stored in stored {
                if stored.paused.is_some() {
                    continue;
                }
                match stored.definition.schedule() {
                    Ok(s) => {
                        self.push_due(&s, now, Some(stored.active_since), &mut jobs);
                        running.push(s);
                    }
                    Err(e) => tracing::warn!(
                        schedule = %stored.definition.name,
                        error = %e,
                        "a stored schedule makes no valid job; replace or remove it"
                    ),
                }
            }
            *self.last_stored.lock().unwrap_or_else(|p| p.into_inner()) = running;
        }
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        self.enqueue(jobs).await
    }

    /// Enqueues a pass's ticks as a client does: under one enqueue span,
    /// whose trace the ticks of the pass share.
    async fn enqueue(&self, jobs: Vec<NewJob>) -> Result<Vec<Inserted>> {
        crate::Client::new(self.store.clone())
            .enqueue_many(jobs)
            .await
    }

    fn push_due(
        &self,
        s: &CronSchedule,
        now: Timestamp,
        since: Option<Timestamp>,
        jobs: &mut Vec<NewJob>,
    ) {
        for tick in s.due_ticks(now, self.lookback, self.grace) {
            if since.is_some_and(|since| tick < since) {
                continue;
            }
            match s.job_at(tick) {
                Ok(job) => jobs.push(job),
                Err(e) => tracing::warn!(
                    schedule = %s.name(),
                    error = %e,
                    "a tick's job could not be made"
                ),
            }
        }
    }

    /// When the next pass is worth running: the earliest next tick, and
    /// with stored schedules no later than `refresh` from now.
    pub fn next_wake(&self, now: Timestamp) -> Option<Timestamp> {
        let stored = self.last_stored.lock().unwrap_or_else(|p| p.into_inner());
        let tick = self
            .schedules
            .iter()
            .chain(stored.iter())
            .filter_map(|s| s.next_tick(now))
            .min();
        let refresh = self
            .stored
            .is_some()
            .then(|| now.plus(self.refresh.max(Duration::from_secs(1))));
        match (tick, refresh) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
