//! Periodic jobs: cron schedules enqueued exactly once per tick, however
//! many processes run the same schedule.
//!
//! Every tick of a schedule maps to one job id,
//! `cron:<schedule>:<tick in RFC 3339>`, and inserting an existing id creates
//! nothing — so twenty processes enqueueing the same tick produce one job,
//! with no lock and no leader election. The job is due at its tick (on the
//! store's clock), so a process whose clock runs ahead cannot start it early.
//!
//! The misfire policy says what happens to ticks that passed while no
//! enqueuer ran (within the look-back window):
//!
//! * [`Misfire::Skip`] — only a tick at most `grace` old is enqueued; missed
//!   ones are dropped.
//! * [`Misfire::RunOnce`] — the most recent tick is enqueued, however late.
//! * [`Misfire::Backfill`]`(n)` — the `n` most recent ticks are enqueued.
//!
//! Patterns are parsed by the `croner` crate (5 fields, or 6 with seconds
//! first), evaluated in UTC.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds};
use errand_core::{Error, Inserted, JobId, Name, NewJob, Result, Schedule, Store, Timestamp};

/// What to do with ticks missed while no enqueuer ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Misfire {
    /// Drop missed ticks; enqueue a tick only while it is at most `grace` old.
    Skip,
    /// Enqueue the most recent tick, however late.
    RunOnce,
    /// Enqueue up to this many of the most recent ticks.
    Backfill(u32),
}

impl FromStr for Misfire {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "skip" => Ok(Misfire::Skip),
            "once" | "run-once" => Ok(Misfire::RunOnce),
            _ => s
                .strip_prefix("backfill:")
                .and_then(|n| n.parse::<u32>().ok())
                .filter(|n| (1..=1000).contains(n))
                .map(Misfire::Backfill)
                .ok_or_else(|| {
                    Error::invalid(format!(
                        "misfire policy {s:?} is not valid: use skip, once, or backfill:N (N from 1 to 1000)"
                    ))
                }),
        }
    }
}

/// One periodic job.
#[derive(Clone)]
pub struct CronSchedule {
    name: Name,
    pattern: String,
    cron: Cron,
    template: NewJob,
    misfire: Misfire,
}

impl fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSchedule")
            .field("name", &self.name)
            .field("pattern", &self.pattern)
            .field("misfire", &self.misfire)
            .finish_non_exhaustive()
    }
}

impl CronSchedule {
    /// A schedule named `name` (part of every job id) enqueueing `template`
    /// (its id and schedule are replaced per tick) on `pattern`.
    pub fn new(name: &str, pattern: &str, template: NewJob, misfire: Misfire) -> Result<Self> {
        let name = Name::parse("schedule", name)?;
        let cron = CronParser::builder()
            .seconds(Seconds::Optional)
            .build()
            .parse(pattern)
            .map_err(|e| {
                Error::invalid(format!(
                    "cron pattern {pattern:?} is not valid ({e}); use 5 fields (minute hour day month weekday) or 6 with seconds first"
                ))
            })?;
        Ok(CronSchedule {
            name,
            pattern: pattern.to_owned(),
            cron,
            template,
            misfire,
        })
    }

    /// The job id of the tick at `tick`.
    pub fn job_id(&self, tick: Timestamp) -> Result<JobId> {
        JobId::new(format!("cron:{}:{}", self.name, tick.to_rfc3339()))
    }

    /// The ticks to enqueue at `now`: most recent first, within `lookback`.
    pub fn due_ticks(&self, now: Timestamp, lookback: Duration, grace: Duration) -> Vec<Timestamp> {
        let want = match self.misfire {
            Misfire::Skip | Misfire::RunOnce => 1,
            Misfire::Backfill(n) => n as usize,
        };
        let oldest = now.minus(lookback);
        let mut ticks = Vec::new();
        let Some(mut at) = to_chrono(now) else {
            return ticks;
        };
        let mut inclusive = true;
        while ticks.len() < want {
            let Ok(prev) = self.cron.find_previous_occurrence(&at, inclusive) else {
                break;
            };
            let tick = from_chrono(&prev);
            if tick < oldest {
                break;
            }
            ticks.push(tick);
            at = prev;
            inclusive = false;
        }
        if self.misfire == Misfire::Skip {
            ticks.retain(|t| now.since(*t) <= grace);
        }
        ticks
    }

    /// The next tick strictly after `now`.
    pub fn next_tick(&self, now: Timestamp) -> Option<Timestamp> {
        let at = to_chrono(now)?;
        self.cron
            .find_next_occurrence(&at, false)
            .ok()
            .map(|t| from_chrono(&t))
    }
}

/// Cron ticks fall on whole seconds: the search starts from `t` truncated
/// to its second, so every process computes the same tick (and job id).
fn to_chrono(t: Timestamp) -> Option<DateTime<Utc>> {
    let ms = t.as_millis();
    Utc.timestamp_millis_opt(ms - ms.rem_euclid(1000)).single()
}

fn from_chrono(t: &DateTime<Utc>) -> Timestamp {
    Timestamp::from_millis(t.timestamp_millis())
}

/// Enqueues the due ticks of a set of schedules. Safe to run in any number
/// of processes at once.
#[derive(Clone, Debug)]
pub struct CronEnqueuer {
    store: Arc<dyn Store>,
    schedules: Vec<CronSchedule>,
    /// How far back missed ticks are looked for (default 1 h).
    pub lookback: Duration,
    /// How late a tick may be and still count as on time for
    /// [`Misfire::Skip`] (default 1 min).
    pub grace: Duration,
}

impl CronEnqueuer {
    /// An enqueuer for `schedules`.
    pub fn new(store: Arc<dyn Store>, schedules: Vec<CronSchedule>) -> Self {
        CronEnqueuer {
            store,
            schedules,
            lookback: Duration::from_secs(3600),
            grace: Duration::from_secs(60),
        }
    }

    /// One pass at `now`: inserts every due tick's job (existing ids create
    /// nothing). Returns what was inserted or found.
    pub async fn run_once(&self, now: Timestamp) -> Result<Vec<Inserted>> {
        let mut jobs = Vec::new();
        for s in &self.schedules {
            for tick in s.due_ticks(now, self.lookback, self.grace) {
                let mut job = s.template.clone().with_id(s.job_id(tick)?);
                job.schedule = Schedule::At(tick);
                jobs.push(job);
            }
        }
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        self.store.insert_many(jobs).await
    }

    /// When the next pass is worth running (the earliest next tick).
    pub fn next_wake(&self, now: Timestamp) -> Option<Timestamp> {
        self.schedules.iter().filter_map(|s| s.next_tick(now)).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap_or(Timestamp::EPOCH)
    }

    fn schedule(pattern: &str, misfire: Misfire) -> CronSchedule {
        let t = NewJob::new("report", errand_core::Payload::default()).unwrap();
        CronSchedule::new("nightly", pattern, t, misfire).unwrap()
    }

    const HOUR: Duration = Duration::from_secs(3600);
    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn ticks_map_to_stable_ids() {
        let s = schedule("0 * * * *", Misfire::RunOnce);
        let id = s.job_id(at("2026-11-30T10:00:00Z")).unwrap();
        assert_eq!(id.as_str(), "cron:nightly:2026-11-30T10:00:00.000Z");
    }

    #[test]
    fn skip_enqueues_only_an_on_time_tick() {
        let s = schedule("0 * * * *", Misfire::Skip);
        assert_eq!(
            s.due_ticks(at("2026-11-30T10:00:30Z"), 5 * HOUR, MIN),
            vec![at("2026-11-30T10:00:00Z")]
        );
        // Down for 3 hours, back 20 minutes past the hour: nothing.
        assert!(
            s.due_ticks(at("2026-11-30T10:20:00Z"), 5 * HOUR, MIN)
                .is_empty()
        );
    }

    #[test]
    fn run_once_enqueues_the_latest_tick_however_late() {
        let s = schedule("0 * * * *", Misfire::RunOnce);
        assert_eq!(
            s.due_ticks(at("2026-11-30T10:20:00Z"), 5 * HOUR, MIN),
            vec![at("2026-11-30T10:00:00Z")]
        );
    }

    #[test]
    fn backfill_enqueues_the_last_n_ticks_within_the_lookback() {
        let s = schedule("0 * * * *", Misfire::Backfill(3));
        assert_eq!(
            s.due_ticks(at("2026-11-30T10:20:00Z"), 5 * HOUR, MIN),
            vec![
                at("2026-11-30T10:00:00Z"),
                at("2026-11-30T09:00:00Z"),
                at("2026-11-30T08:00:00Z")
            ]
        );
        assert_eq!(
            s.due_ticks(at("2026-11-30T10:20:00Z"), 90 * MIN, MIN).len(),
            2,
            "the lookback bounds it"
        );
    }

    #[test]
    fn ticks_fall_on_whole_seconds_whenever_they_are_computed() {
        let s = schedule("* * * * * *", Misfire::RunOnce);
        for now in [
            "2026-11-30T10:00:00.000Z",
            "2026-11-30T10:00:00.001Z",
            "2026-11-30T10:00:00.999Z",
        ] {
            assert_eq!(
                s.due_ticks(at(now), HOUR, MIN),
                vec![at("2026-11-30T10:00:00Z")],
                "{now}"
            );
        }
    }

    #[test]
    fn seconds_are_optional_and_bad_patterns_say_so() {
        let s = schedule("*/10 * * * * *", Misfire::RunOnce);
        assert_eq!(
            s.next_tick(at("2026-11-30T10:00:01Z")),
            Some(at("2026-11-30T10:00:10Z"))
        );
        let t = NewJob::new("k", errand_core::Payload::default()).unwrap();
        let err = CronSchedule::new("x", "every day", t, Misfire::Skip).unwrap_err();
        assert!(err.to_string().contains("cron pattern"), "{err}");
        assert!("backfill:0".parse::<Misfire>().is_err());
        assert_eq!(
            "backfill:5".parse::<Misfire>().ok(),
            Some(Misfire::Backfill(5))
        );
    }
}
