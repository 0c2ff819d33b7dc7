//! What a process counts for the dashboard's charts, and when it writes it.
//!
//! One rule for every process that settles jobs — a [`crate::Runtime`], or
//! the server settling for remote workers over HTTP: an acknowledged job
//! counts as finished (and, with a deadline, in the lateness histogram), a
//! failure that scheduled a retry counts under its error class, a failure
//! that ended the job counts as dead, and each attempt started counts in the
//! wait histogram (from due to start). Counts stay in memory and are added
//! to the store every few seconds; a failed write keeps them for the next.
//!
//! Not counted, because no worker settles them: leases that expire and are
//! reclaimed (or swept dead) and operator actions. The queues page's table
//! shows those from the attempt history.

use std::collections::BTreeSet;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use errand_core::{
    AdminStore, ClaimedJob, Error, ErrorClass, JobStore, MINUTES_KEPT, Name, Result, Series,
    StatsRequest, Tally, Timestamp, minute_of,
};

use crate::work_report::WorkOutcome;

/// A process's per-minute counts, waiting to be written.
#[derive(Debug, Default)]
pub struct MinuteCounter {
    tally: Mutex<Tally>,
    /// When [`MinuteCounter::write_due`] last said yes.
    last_write: Mutex<Option<Instant>>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl MinuteCounter {
    /// An empty counter.
    pub fn new() -> Self {
        MinuteCounter::default()
    }

    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Counts the attempts a claim started, by their wait from due to
    /// start (the store's times).
    pub fn started(&self, claimed: &[ClaimedJob]) {
        if claimed.is_empty() {
            return;
        }
        let now = Timestamp::now();
        let mut tally = self.tally();
        for c in claimed {
            let started = c.job.attempt_started_at.unwrap_or(now);
            let wait = Series::Wait(Series::bucket_of(ms(started.since(c.job.available_at))));
            tally.add(&c.job.queue, now, wait, 1);
        }
    }

    /// Counts a settled attempt of a job of `queue`: what it ended in, the
    /// class of its failure (if it failed) and, for a success, its
    /// business deadline.
    pub fn settled(
        &self,
        queue: &Name,
        outcome: WorkOutcome,
        class: Option<ErrorClass>,
        deadline: Option<Timestamp>,
    ) {
        let now = Timestamp::now();
        let mut tally = self.tally();
        match outcome {
            WorkOutcome::Acknowledged => {
                tally.add(queue, now, Series::Finished, 1);
                if let Some(deadline) = deadline {
                    let late = Series::Late(Series::bucket_of(ms(now.since(deadline))));
                    tally.add(queue, now, late, 1);
                }
            }
            WorkOutcome::RetryScheduled => {
                let class = class.unwrap_or(ErrorClass::Retryable);
                tally.add(queue, now, Series::Retry(class), 1);
            }
            WorkOutcome::Dead => tally.add(queue, now, Series::Dead, 1),
            WorkOutcome::Idle
            | WorkOutcome::Snoozed
            | WorkOutcome::Cancelled
            | WorkOutcome::Awaiting
            | WorkOutcome::Released
            | WorkOutcome::LeaseLost => {}
        }
    }

    /// Whether `every` has passed since this last said yes (the first call
    /// says yes): for a process with no timer of its own, which writes its
    /// counts when a settlement finds them due.
    pub fn write_due(&self, every: Duration) -> bool {
        let mut last = self
            .last_write
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let now = Instant::now();
        if last.is_some_and(|at| now.duration_since(at) < every) {
            return false;
        }
        *last = Some(now);
        true
    }

    /// Adds what was counted to the store, in calls of at most
    /// `WRITE_CHUNK` (5,000) rows (after a long outage a tally holds many
    /// minutes; one call per chunk keeps each write short). When a write
    /// fails for a reason that may pass (the store unreachable, busy, its
    /// disk full), the rows not yet written are kept for the next flush,
    /// except those of minutes the store no longer keeps; rows the store
    /// refuses are dropped, so one bad row cannot block every later write.
    pub async fn flush(&self, store: &dyn JobStore) -> Result<()> {
        let rows = self.tally().take();
        let mut done = 0;
        let mut refused = None;
        for chunk in rows.chunks(WRITE_CHUNK) {
            match store.record_minutes(chunk).await {
                Ok(()) => {}
                Err(e @ Error::Invalid(_)) => refused = Some(e),
                Err(e) => {
                    let oldest = minute_of(Timestamp::now()) - MINUTES_KEPT;
                    let left = rows.into_iter().skip(done);
                    self.tally()
                        .restore(left.filter(|r| r.minute >= oldest).collect());
                    return Err(e);
                }
            }
            done += chunk.len();
        }
        refused.map_or(Ok(()), Err)
    }
}

/// The most rows [`MinuteCounter::flush`] writes in one call.
pub const WRITE_CHUNK: usize = 5_000;

/// Samples every queue's depth (ready and due) and oldest due age into the
/// current minute, counts every queue's jobs whole when some count passes
/// the statistics' cap ([`AdminStore::count_exactly`]), and prunes minutes
/// older than [`MINUTES_KEPT`] — unless
/// another process (a worker, a server) already sampled this minute: then
/// it does nothing, so that many processes cost one statistics read a
/// minute between them, not one each. A queue this call sampled last time
/// and gone from the statistics now (nothing ready, running or dead) is
/// sampled as empty, so its chart falls to zero instead of stopping.
/// Returns the queues sampled, for the next call.
///
/// The minutes and statistics are read from `reads`, the sample written to
/// `store` (one backend seen through its two seams).
///
/// `now` is the minute to file the sample under: the caller's clock, as for
/// every count (a store's own clock, which the statistics read, is the
/// same one outside tests).
pub async fn sample_queues(
    reads: &dyn AdminStore,
    store: &dyn JobStore,
    last: &BTreeSet<Name>,
    now: Timestamp,
) -> Result<BTreeSet<Name>> {
    let minute = minute_of(now);
    let this_minute = reads
        .minutes(&errand_core::MinuteQuery {
            queue: None,
            from: minute,
            until: minute + 1,
            slot: 1,
        })
        .await?;
    let depth = Series::Depth.to_string();
    if this_minute.iter().any(|r| r.series == depth) {
        return Ok(last.clone());
    }
    let req = StatsRequest {
        window: Duration::from_secs(60),
        ..StatsRequest::default()
    };
    let mut stats = reads.stats(&req).await?;
    // A count past the cap is counted whole, once a minute between all
    // the processes, for the statistics to show (and this sample to
    // chart) until the next.
    if stats
        .queues
        .iter()
        .any(|q| !q.truncated.is_empty() || !q.counted.is_empty())
    {
        reads.count_exactly().await?;
        stats = reads.stats(&req).await?;
    }
    let mut tally = Tally::new();
    let mut seen = BTreeSet::new();
    for q in &stats.queues {
        tally.add(&q.queue, now, Series::Depth, q.counts.ready);
        let oldest = q.counts.oldest_due_age_ms.unwrap_or(0);
        tally.add(&q.queue, now, Series::OldestDueMs, oldest);
        seen.insert(q.queue.clone());
    }
    let mut rows = tally.take();
    for gone in last.difference(&seen) {
        for series in [Series::Depth, Series::OldestDueMs] {
            rows.push(errand_core::MinuteCount {
                queue: gone.clone(),
                minute,
                series,
                value: 0,
            });
        }
    }
    store.record_minutes(&rows).await?;
    store.prune_minutes(minute - MINUTES_KEPT).await?;
    Ok(seen)
}
