//! Worker reports and the queue statistics behind `errand stats`,
//! `/metrics` and the dashboard.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::clock::Timestamp;
use crate::counted::ExactCount;
use crate::error::{Error, Result};
use crate::ids::Name;
use crate::job::ClaimedJob;
use crate::queue_limit::QueueLimit;
use crate::requests::PausedQueue;

/// The upper bounds, in milliseconds, of the latency histograms' buckets
/// (the last bucket, `+Inf`, is implicit).
pub const LATENCY_BUCKETS_MS: [u64; 14] = [
    1, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 60_000, 300_000,
];

/// The bucket of [`LATENCY_BUCKETS_MS`] a duration in milliseconds falls
/// in: the first whose bound it does not pass, or the last (above every
/// bound).
pub fn latency_bucket(ms: u64) -> usize {
    LATENCY_BUCKETS_MS
        .iter()
        .position(|&b| ms <= b)
        .unwrap_or(LATENCY_BUCKETS_MS.len())
}

/// A cumulative histogram of durations over [`LATENCY_BUCKETS_MS`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Histogram {
    /// Observations per bucket (not cumulative), one more than the bounds:
    /// the last counts observations above every bound.
    pub counts: Vec<u64>,
    /// The sum of the observations in milliseconds.
    pub sum_ms: u64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&mut self, d: Duration) {
        let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        if self.counts.len() != LATENCY_BUCKETS_MS.len() + 1 {
            self.counts.resize(LATENCY_BUCKETS_MS.len() + 1, 0);
        }
        let i = latency_bucket(ms);
        if let Some(c) = self.counts.get_mut(i) {
            *c += 1;
        }
        self.sum_ms = self.sum_ms.saturating_add(ms);
    }

    /// How many observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Adds another histogram's observations to this one.
    pub fn add_all(&mut self, other: &Histogram) {
        if self.counts.len() < other.counts.len() {
            self.counts.resize(other.counts.len(), 0);
        }
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.sum_ms = self.sum_ms.saturating_add(other.sum_ms);
    }
}

/// What one worker process has counted since it started (cumulative).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerMetrics {
    /// Claim cycles that reached the store and succeeded.
    pub cycles: u64,
    /// Attempts started.
    pub started: u64,
    /// From when a job was due to when its attempt started.
    pub start_latency: Histogram,
    /// For jobs with a deadline that succeeded: how late past the deadline
    /// (zero when on time).
    pub lateness: Histogram,
    /// Jobs finished on time, of those with a deadline.
    pub on_time: u64,
    /// Jobs finished after their deadline.
    pub late: u64,
}

impl WorkerMetrics {
    /// Counts a completed claim cycle and the attempts it started: how long
    /// each waited from due to start (the store's times).
    pub fn record_cycle(&mut self, claimed: &[ClaimedJob]) {
        self.cycles += 1;
        for c in claimed {
            self.started += 1;
            let started = c.job.attempt_started_at.unwrap_or_else(Timestamp::now);
            self.start_latency
                .observe(started.since(c.job.available_at));
        }
    }

    /// Counts a success at `now` against the job's business deadline, if it
    /// has one.
    pub fn record_success(&mut self, deadline: Option<Timestamp>, now: Timestamp) {
        if let Some(deadline) = deadline {
            let late = now.since(deadline);
            self.lateness.observe(late);
            if late.is_zero() {
                self.on_time += 1;
            } else {
                self.late += 1;
            }
        }
    }

    /// Adds another's counts to these.
    pub fn add_all(&mut self, other: &WorkerMetrics) {
        self.cycles = self.cycles.saturating_add(other.cycles);
        self.started = self.started.saturating_add(other.started);
        self.start_latency.add_all(&other.start_latency);
        self.lateness.add_all(&other.lateness);
        self.on_time = self.on_time.saturating_add(other.on_time);
        self.late = self.late.saturating_add(other.late);
    }
}

/// A worker process's report of itself, written every few seconds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerReport {
    /// Unique per process (a UUID).
    pub id: String,
    /// The host it runs on.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// The queues it works (empty: every queue).
    pub queues: Vec<Name>,
    /// When it started.
    pub started_at: Timestamp,
    /// Its counters.
    pub metrics: WorkerMetrics,
    /// A one-shot run (`errand work --once`): `metrics` are this run's
    /// counts, added to those stored under `id` (an id the runs of one host
    /// and queue list share, so their counters keep growing). Otherwise they
    /// are the process's totals since it started and replace the stored
    /// ones.
    pub one_shot: bool,
}

impl WorkerReport {
    /// Checks the free-text fields' sizes.
    pub fn validate(&self) -> Result<()> {
        if self.id.is_empty() || self.id.len() > 200 || self.id.chars().any(char::is_control) {
            return Err(Error::invalid(
                "a worker id must be 1 to 200 printable characters",
            ));
        }
        if self.host.len() > 255 || self.host.chars().any(char::is_control) {
            return Err(Error::invalid(
                "a worker's host name must be at most 255 printable characters",
            ));
        }
        Ok(())
    }
}

/// A worker as the store last heard from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WorkerSeen {
    /// Its id.
    pub id: String,
    /// Its host.
    pub host: String,
    /// Its process id.
    pub pid: u32,
    /// Its queues (empty: every queue).
    pub queues: Vec<Name>,
    /// When it started.
    pub started_at: Timestamp,
    /// When it last completed a claim cycle (when it last reported).
    pub last_cycle_at: Timestamp,
    /// Its counters.
    pub metrics: WorkerMetrics,
}

/// What to compute statistics over.
#[derive(Clone, Copy, Debug)]
pub struct StatsRequest {
    /// Retries and dead letters are counted over this recent window.
    pub window: Duration,
    /// Each queue's count of each state, and the window's failed attempts,
    /// stop at this many rows (then they are marked `truncated`): no page
    /// view or scrape walks a million-row table.
    pub cap: u32,
}

impl Default for StatsRequest {
    fn default() -> Self {
        StatsRequest {
            window: Duration::from_secs(15 * 60),
            cap: 10_000,
        }
    }
}

/// One queue's signals.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct QueueStats {
    /// The queue.
    pub queue: Name,
    /// Its counts.
    #[serde(flatten)]
    pub counts: Counts,
    /// Whether an operator paused it.
    pub paused: bool,
    /// Its concurrency cap across every process, if an operator set one.
    pub concurrency_limit: Option<u32>,
    /// States in which this queue holds more rows than the cap: its counts
    /// of them are lower bounds.
    pub truncated: Vec<String>,
    /// States in which this queue holds more rows than the cap, shown as a
    /// running service last counted them whole, at `counted_at`.
    pub counted: Vec<String>,
    /// When the `counted` states were counted (the earliest, if several).
    pub counted_at: Option<Timestamp>,
}

/// The counts of one queue, or of all.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    /// Blocked: waiting for dependencies.
    pub blocked: u64,
    /// Waiting for a signal.
    pub waiting: u64,
    /// Ready and due now.
    pub ready: u64,
    /// Ready but due later (delayed or waiting for a retry).
    pub scheduled: u64,
    /// Running.
    pub running: u64,
    /// Running with a live lease.
    pub active_leases: u64,
    /// Running with a lease that has expired (the worker is gone or stalled).
    pub expired_leases: u64,
    /// Dead.
    pub dead: u64,
    /// When the oldest due ready job became due.
    pub oldest_due_at: Option<Timestamp>,
    /// Its age now, in milliseconds.
    pub oldest_due_age_ms: Option<u64>,
    /// Failed attempts that will be retried, in the window, by error class.
    pub retries: BTreeMap<String, u64>,
    /// Jobs that went dead in the window, by error class.
    pub dead_letters: BTreeMap<String, u64>,
}

/// The operator signals, per queue and overall.
#[derive(Clone, Debug, Serialize)]
pub struct Stats {
    /// When they were read (the store's clock).
    pub at: Timestamp,
    /// The window of `retries` and `dead_letters`, in seconds.
    pub window_secs: u64,
    /// The row cap of each state's count.
    pub cap: u32,
    /// States in which some queue held more rows than the cap: that queue's
    /// count is a lower bound; and `window` when the window held more
    /// failed attempts than the cap (retries and dead letters then count
    /// the newest ones).
    pub truncated: Vec<String>,
    /// Per queue, by name.
    pub queues: Vec<QueueStats>,
    /// Workers that reported, most recent first.
    pub workers: Vec<WorkerSeen>,
    /// When any worker last completed a claim cycle.
    pub last_worker_cycle_at: Option<Timestamp>,
    /// How long ago that was, in milliseconds.
    pub since_last_worker_cycle_ms: Option<u64>,
}

impl Stats {
    /// The workers that reported within the window (`window_secs` before
    /// `at`): those still at work. A worker that stopped for good drops out
    /// of this list a window after its last report, though its report is
    /// kept (and listed in `workers`) for a day.
    pub fn recent_workers(&self) -> impl Iterator<Item = &WorkerSeen> {
        let since = self.at.minus(Duration::from_secs(self.window_secs));
        self.workers
            .iter()
            .filter(move |w| w.last_cycle_at >= since)
    }

    /// Sums over every queue (the oldest due age is the largest).
    pub fn totals(&self) -> Counts {
        let mut t = Counts::default();
        for q in self.queues.iter().map(|q| &q.counts) {
            t.oldest_due_at = match (t.oldest_due_at, q.oldest_due_at) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            t.blocked += q.blocked;
            t.waiting += q.waiting;
            t.ready += q.ready;
            t.scheduled += q.scheduled;
            t.running += q.running;
            t.active_leases += q.active_leases;
            t.expired_leases += q.expired_leases;
            t.dead += q.dead;
            t.oldest_due_age_ms = t.oldest_due_age_ms.max(q.oldest_due_age_ms);
            for (k, v) in &q.retries {
                *t.retries.entry(k.clone()).or_default() += v;
            }
            for (k, v) in &q.dead_letters {
                *t.dead_letters.entry(k.clone()).or_default() += v;
            }
        }
        t
    }
}

/// One queue's counts as a backend reads them for the statistics: each
/// state's rows read at most `cap + 1` times through that queue's index
/// range (reading more than the cap means the figure is truncated).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueSample {
    /// The queue.
    pub queue: String,
    /// Ready jobs due now.
    pub due: u64,
    /// Ready jobs due later.
    pub scheduled: u64,
    /// The earliest due time among the due ones.
    pub oldest_due_at: Option<Timestamp>,
    /// Ready rows read in the largest single range read (what the cap is
    /// held against).
    pub ready_read: u64,
    /// Running jobs.
    pub running: u64,
    /// Live leases among them (the rest have expired).
    pub live: u64,
    /// Dead jobs.
    pub dead: u64,
    /// Blocked jobs (waiting for dependencies).
    pub blocked: u64,
    /// Jobs waiting for a signal.
    pub waiting: u64,
}

/// A count of attempts that ended in the window, as a backend reads it.
#[derive(Clone, Debug)]
pub struct WindowRow {
    /// The job's queue.
    pub queue: String,
    /// `true`: the job went dead; `false`: it will be retried.
    pub dead: bool,
    /// The error class (`unknown` when none was recorded).
    pub class: String,
    /// How many.
    pub n: u64,
}

/// What a backend read for the statistics.
#[derive(Clone, Debug, Default)]
pub struct StatsRead {
    /// Each queue's sample.
    pub samples: Vec<QueueSample>,
    /// The window's counts of failed attempts.
    pub window: Vec<WindowRow>,
    /// The paused queues.
    pub paused: Vec<PausedQueue>,
    /// The queues' concurrency caps.
    pub limits: Vec<QueueLimit>,
    /// The exact counts a running service last stored.
    pub counted: Vec<ExactCount>,
    /// The workers' reports.
    pub workers: Vec<WorkerSeen>,
}

/// Assembles [`Stats`] from what a backend read. A state whose rows read
/// exceed the cap in some queue is shown with the exact count a running
/// service last stored for it (named in [`QueueStats::counted`]) or, with
/// none, as the cap's lower bound (named in [`QueueStats::truncated`] and
/// [`Stats::truncated`], like a window whose counts exceed the cap).
pub fn assemble_stats(req: &StatsRequest, now: Timestamp, read: StatsRead) -> Result<Stats> {
    let StatsRead {
        samples,
        window,
        paused,
        limits,
        counted,
        mut workers,
    } = read;
    let cap = u64::from(req.cap);
    let mut truncated: Vec<String> = Vec::new();
    let mut cut = |state: &str| {
        if !truncated.iter().any(|t| t == state) {
            truncated.push(state.to_owned());
        }
    };
    for s in &samples {
        for (state, n) in [
            ("blocked", s.blocked),
            ("waiting", s.waiting),
            ("ready", s.ready_read),
            ("running", s.running),
            ("dead", s.dead),
        ] {
            if n > cap {
                cut(state);
            }
        }
    }
    if window.iter().map(|w| w.n).sum::<u64>() > cap {
        cut("window");
    }
    let mut queues: BTreeMap<String, QueueStats> = BTreeMap::new();
    for s in samples {
        let q = &mut entry(&mut queues, &s.queue)?.counts;
        q.ready += s.due;
        q.oldest_due_at = match (q.oldest_due_at, s.oldest_due_at) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        q.scheduled += s.scheduled;
        q.running += s.running;
        q.active_leases += s.live;
        q.expired_leases += s.running.saturating_sub(s.live);
        q.dead += s.dead;
        q.blocked += s.blocked;
        q.waiting += s.waiting;
    }
    for w in window {
        let q = &mut entry(&mut queues, &w.queue)?.counts;
        let map = if w.dead {
            &mut q.dead_letters
        } else {
            &mut q.retries
        };
        *map.entry(w.class).or_default() += w.n;
    }
    mark_settings(&mut queues, &paused, &limits)?;
    let mut queues: Vec<QueueStats> = queues.into_values().collect();
    for q in &mut queues {
        let c = &q.counts;
        for (state, n) in [
            ("blocked", c.blocked),
            ("waiting", c.waiting),
            ("ready", c.ready + c.scheduled),
            ("running", c.running),
            ("dead", c.dead),
        ] {
            if n > cap {
                q.truncated.push(state.to_owned());
                if !truncated.iter().any(|t| t == state) {
                    truncated.push(state.to_owned());
                }
            }
        }
    }
    apply_counted(&mut queues, &counted, cap);
    truncated.retain(|t| t == "window" || queues.iter().any(|q| q.truncated.contains(t)));
    for q in queues.iter_mut().map(|q| &mut q.counts) {
        q.oldest_due_age_ms = q
            .oldest_due_at
            .map(|t| u64::try_from(now.since(t).as_millis()).unwrap_or(u64::MAX));
    }
    workers.sort_by_key(|w| std::cmp::Reverse(w.last_cycle_at));
    let last = workers.first().map(|w| w.last_cycle_at);
    Ok(Stats {
        at: now,
        window_secs: req.window.as_secs(),
        cap: req.cap,
        truncated,
        queues,
        workers,
        last_worker_cycle_at: last,
        since_last_worker_cycle_ms: last
            .map(|t| u64::try_from(now.since(t).as_millis()).unwrap_or(u64::MAX)),
    })
}

/// Where a queue's live count of a state stopped at the cap (`truncated`),
/// puts the stored exact count in its place — unless it is below the cap
/// (then it is older than the live read) — naming the state in `counted`
/// instead and the count's time in `counted_at`. Each pass replaces every
/// stored count, so a state absent from a pass counted none.
fn apply_counted(queues: &mut [QueueStats], counted: &[ExactCount], cap: u64) {
    let Some(at) = counted.iter().map(|c| c.counted_at).min() else {
        return;
    };
    for q in queues {
        let stored = |state: &str| {
            counted
                .iter()
                .find(|c| c.queue == q.queue.as_str() && c.state == state)
                .map_or(0, |c| c.n)
        };
        let mut taken = Vec::new();
        for state in &q.truncated {
            // The live read of `ready` covers the due and the scheduled.
            let parts: &[&str] = match state.as_str() {
                "ready" => &["ready", "scheduled"],
                other => &[other][..],
            };
            if parts.iter().map(|p| stored(p)).sum::<u64>() < cap {
                continue;
            }
            for part in parts {
                let n = stored(part);
                let counts = &mut q.counts;
                match *part {
                    "ready" => counts.ready = n,
                    "scheduled" => counts.scheduled = n,
                    "blocked" => counts.blocked = n,
                    "waiting" => counts.waiting = n,
                    "running" => counts.running = n,
                    "dead" => counts.dead = n,
                    _ => {}
                }
            }
            taken.push(state.clone());
        }
        q.truncated.retain(|s| !taken.contains(s));
        q.counted_at = (!taken.is_empty()).then_some(at);
        q.counted = taken;
    }
}

/// Marks the queues an operator paused or capped (listing them even with
/// no jobs).
fn mark_settings(
    queues: &mut BTreeMap<String, QueueStats>,
    paused: &[PausedQueue],
    limits: &[QueueLimit],
) -> Result<()> {
    for p in paused {
        entry(queues, p.queue.as_str())?.paused = true;
    }
    for l in limits {
        entry(queues, l.queue.as_str())?.concurrency_limit = Some(l.concurrency);
    }
    Ok(())
}

fn entry<'a>(
    queues: &'a mut BTreeMap<String, QueueStats>,
    name: &str,
) -> Result<&'a mut QueueStats> {
    if !queues.contains_key(name) {
        let queue = Name::parse("queue", name)?;
        queues.insert(
            name.to_owned(),
            QueueStats {
                queue,
                counts: Counts::default(),
                paused: false,
                concurrency_limit: None,
                truncated: Vec::new(),
                counted: Vec::new(),
                counted_at: None,
            },
        );
    }
    queues
        .get_mut(name)
        .ok_or_else(|| Error::invalid("queue statistics lost a queue"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_by_upper_bound_and_merges() {
        let mut h = Histogram::default();
        h.observe(Duration::from_millis(1));
        h.observe(Duration::from_millis(2));
        h.observe(Duration::from_secs(3600));
        assert_eq!(h.counts.len(), LATENCY_BUCKETS_MS.len() + 1);
        assert_eq!(h.counts[0], 1, "1 ms is within the first bound");
        assert_eq!(h.counts[1], 1, "2 ms falls in the 5 ms bucket");
        assert_eq!(
            h.counts[LATENCY_BUCKETS_MS.len()],
            1,
            "an hour is above every bound"
        );
        assert_eq!(h.sum_ms, 3_600_003);
        let mut total = Histogram::default();
        total.add_all(&h);
        total.add_all(&h);
        assert_eq!(total.count(), 6);
        assert_eq!(total.sum_ms, 7_200_006);
    }

    #[test]
    fn stats_split_ready_from_scheduled_and_live_from_expired_leases() {
        let now = Timestamp::from_millis(100_000);
        let samples = vec![
            QueueSample {
                queue: "mail".into(),
                due: 3,
                scheduled: 2,
                oldest_due_at: Some(Timestamp::from_millis(40_000)),
                ready_read: 5,
                running: 4,
                live: 3,
                dead: 0,
                blocked: 6,
                waiting: 8,
            },
            QueueSample {
                queue: "bulk".into(),
                dead: 7,
                ..QueueSample::default()
            },
        ];
        let window = vec![
            WindowRow {
                queue: "mail".into(),
                dead: false,
                class: "retryable".into(),
                n: 5,
            },
            WindowRow {
                queue: "bulk".into(),
                dead: true,
                class: "permanent".into(),
                n: 2,
            },
        ];
        let paused = [PausedQueue {
            queue: Name::parse("queue", "idle").expect("valid"),
            operator: "op".into(),
            reason: None,
            paused_at: now,
        }];
        // A cap on a queue with no jobs still lists it, as a pause does.
        let limits = [QueueLimit {
            queue: Name::parse("queue", "capped").expect("valid"),
            concurrency: 5,
            operator: "op".into(),
            reason: None,
            set_at: now,
        }];
        let read = StatsRead {
            samples,
            window,
            paused: paused.to_vec(),
            limits: limits.to_vec(),
            ..StatsRead::default()
        };
        let stats = assemble_stats(&StatsRequest::default(), now, read).expect("assembles");
        let names: Vec<&str> = stats.queues.iter().map(|q| q.queue.as_str()).collect();
        assert_eq!(names, ["bulk", "capped", "idle", "mail"]);
        assert_eq!(stats.queues[1].concurrency_limit, Some(5));
        assert_eq!(stats.queues[3].concurrency_limit, None);
        let mail = &stats.queues[3].counts;
        assert_eq!((mail.ready, mail.scheduled, mail.running), (3, 2, 4));
        assert_eq!(mail.blocked, 6);
        assert_eq!(stats.totals().blocked, 6);
        assert_eq!((mail.waiting, stats.totals().waiting), (8, 8));
        assert_eq!((mail.active_leases, mail.expired_leases), (3, 1));
        assert_eq!(mail.oldest_due_age_ms, Some(60_000));
        assert_eq!(mail.retries.get("retryable"), Some(&5));
        assert!(stats.queues[2].paused);
        assert_eq!(
            stats.queues[0].counts.dead_letters.get("permanent"),
            Some(&2)
        );
        let t = stats.totals();
        assert_eq!((t.ready, t.running, t.dead), (3, 4, 7));
        assert_eq!(stats.since_last_worker_cycle_ms, None);
        assert!(stats.truncated.is_empty(), "{:?}", stats.truncated);
    }

    /// Past the cap, a queue's state shows the exact count a service
    /// stored for it, named `counted` with its time instead of
    /// `truncated`; a stored count below the cap is older than the live
    /// read and is not used, and a state without one stays truncated.
    #[test]
    fn a_stored_exact_count_stands_in_past_the_cap() {
        let now = Timestamp::from_millis(120_000);
        let at = Timestamp::from_millis(60_000);
        let req = StatsRequest {
            cap: 10,
            ..StatsRequest::default()
        };
        let exact = |queue: &str, state: &str, n| ExactCount {
            queue: queue.into(),
            state: state.into(),
            n,
            counted_at: at,
        };
        let sample = |queue: &str| QueueSample {
            queue: queue.into(),
            due: 11,
            ready_read: 11,
            running: 2,
            live: 2,
            dead: 11,
            blocked: 11,
            ..QueueSample::default()
        };
        let read = StatsRead {
            samples: vec![sample("a"), sample("b")],
            counted: vec![
                exact("a", "ready", 1_000_000),
                exact("a", "scheduled", 5),
                exact("a", "dead", 12),
                exact("a", "blocked", 3),
                exact("b", "ready", 40),
            ],
            ..StatsRead::default()
        };
        let stats = assemble_stats(&req, now, read).expect("assembles");
        let a = &stats.queues[0];
        assert_eq!(
            (a.counts.ready, a.counts.scheduled, a.counts.dead),
            (1_000_000, 5, 12)
        );
        assert_eq!(a.counts.blocked, 11, "a count below the cap is stale");
        assert_eq!(a.counted, ["ready", "dead"]);
        assert_eq!(a.truncated, ["blocked"]);
        assert_eq!(a.counted_at, Some(at));
        let b = &stats.queues[1];
        assert_eq!(
            (b.counts.ready, b.counts.scheduled),
            (40, 0),
            "a state a pass did not list counted none"
        );
        assert_eq!(b.counted, ["ready"]);
        assert_eq!(b.truncated, ["blocked", "dead"]);
        assert_eq!(stats.truncated, ["blocked", "dead"]);
    }

    /// A state read past the cap in any queue, and a window counted past
    /// it, are named once each, whichever backend read them.

    #[test]
    fn figures_read_past_the_cap_are_named_truncated() {
        let sample = |queue: &str, ready_read, running, dead| QueueSample {
            queue: queue.into(),
            due: ready_read,
            ready_read,
            running,
            live: running,
            dead,
            ..QueueSample::default()
        };
        let window = |n| WindowRow {
            queue: "a".into(),
            dead: false,
            class: "retryable".into(),
            n,
        };
        let req = StatsRequest {
            cap: 4,
            ..StatsRequest::default()
        };
        let now = Timestamp::from_millis(0);
        let samples = vec![sample("a", 5, 4, 0), sample("b", 9, 0, 5)];
        let read = |samples, window| StatsRead {
            samples,
            window,
            ..StatsRead::default()
        };
        let stats = assemble_stats(&req, now, read(samples, vec![window(3), window(2)]))
            .expect("assembles");
        assert_eq!(stats.truncated, ["ready", "dead", "window"]);
        assert_eq!(stats.queues[0].truncated, ["ready"]);
        assert_eq!(stats.queues[1].truncated, ["ready", "dead"]);
        let samples = vec![sample("a", 4, 4, 4)];
        let stats = assemble_stats(&req, now, read(samples, vec![window(4)])).expect("assembles");
        assert!(stats.truncated.is_empty(), "{:?}", stats.truncated);
    }
}
