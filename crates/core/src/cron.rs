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
//! first), read in UTC or in the schedule's time zone
//! ([`crate::ScheduleZone`], whose notes say how daylight-saving
//! transitions are handled).
//!
//! A schedule may live in code ([`CronSchedule`]) or in the database
//! ([`ScheduleDefinition`], stored and changed through [`crate::Admin`] with
//! an audit entry for every change, read back as [`StoredSchedule`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use chrono::{DateTime, TimeZone, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use serde::Serialize;

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::ids::{JobId, Name};
use crate::job::{DEFAULT_MAX_ATTEMPTS, DEFAULT_QUEUE};
use crate::new_job::NewJob;
use crate::payload::Payload;
use crate::stamp::{check_operator, check_reason};
use crate::state::Schedule;
use crate::zone::{ScheduleZone, next_after, ticks_back};

/// The longest cron pattern accepted, in bytes.
pub const MAX_CRON_BYTES: usize = 200;

/// The largest payload a stored schedule keeps, in bytes: every service
/// reads every stored schedule at each pass.
pub const MAX_SCHEDULE_PAYLOAD_BYTES: usize = 64 * 1024;

/// What to do with ticks missed while no enqueuer ran.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Misfire {
    #[default]
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

impl fmt::Display for Misfire {
    /// The form [`Misfire::from_str`] reads: `skip`, `once`, `backfill:N`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Misfire::Skip => f.write_str("skip"),
            Misfire::RunOnce => f.write_str("once"),
            Misfire::Backfill(n) => write!(f, "backfill:{n}"),
        }
    }
}

impl Serialize for Misfire {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
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
    zone: ScheduleZone,
}

impl fmt::Debug for CronSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CronSchedule")
            .field("name", &self.name)
            .field("pattern", &self.pattern)
            .field("misfire", &self.misfire)
            .field("zone", &self.zone)
            .finish_non_exhaustive()
    }
}

impl CronSchedule {
    /// A schedule named `name` (part of every job id) enqueueing `template`
    /// (its id and schedule are replaced per tick) on `pattern`.
    pub fn new(name: &str, pattern: &str, template: NewJob, misfire: Misfire) -> Result<Self> {
        let name = Name::parse("schedule", name)?;
        let cron = parse_pattern(pattern)?;
        Ok(CronSchedule {
            name,
            pattern: pattern.to_owned(),
            cron,
            template,
            misfire,
            zone: ScheduleZone::UTC,
        })
    }

    /// Reads the pattern in `zone` instead of UTC: `0 9 * * *` in
    /// `Europe/Berlin` is nine in the morning in Berlin, summer and winter.
    pub fn in_zone(mut self, zone: ScheduleZone) -> Self {
        self.zone = zone;
        self
    }

    /// The schedule's name.
    pub fn name(&self) -> &Name {
        &self.name
    }

    /// The job id of the tick at `tick`.
    pub fn job_id(&self, tick: Timestamp) -> Result<JobId> {
        JobId::new(format!("cron:{}:{}", self.name, tick.to_rfc3339()))
    }

    /// The job of the tick at `tick`: the template under the tick's id,
    /// due at the tick.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the id would not be valid.
    pub fn job_at(&self, tick: Timestamp) -> Result<NewJob> {
        let mut job = self.template.clone().with_id(self.job_id(tick)?);
        job.schedule = Schedule::At(tick);
        Ok(job)
    }

    /// The ticks to enqueue at `now`: most recent first, within `lookback`.
    pub fn due_ticks(&self, now: Timestamp, lookback: Duration, grace: Duration) -> Vec<Timestamp> {
        let want = match self.misfire {
            Misfire::Skip | Misfire::RunOnce => 1,
            Misfire::Backfill(n) => n as usize,
        };
        let oldest = Utc
            .timestamp_millis_opt(now.minus(lookback).as_millis())
            .single();
        let (Some(at), Some(oldest)) = (to_chrono(now), oldest) else {
            return Vec::new();
        };
        let mut ticks: Vec<Timestamp> = ticks_back(&self.cron, self.zone, at, oldest, want)
            .iter()
            .map(from_chrono)
            .collect();
        if self.misfire == Misfire::Skip {
            ticks.retain(|t| now.since(*t) <= grace);
        }
        ticks
    }

    /// The next tick strictly after `now`.
    pub fn next_tick(&self, now: Timestamp) -> Option<Timestamp> {
        next_after(&self.cron, self.zone, to_chrono(now)?).map(|t| from_chrono(&t))
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

/// Parses a cron pattern: 5 fields (minute hour day month weekday) or 6
/// with seconds first, at most [`MAX_CRON_BYTES`].
fn parse_pattern(pattern: &str) -> Result<Cron> {
    if pattern.len() > MAX_CRON_BYTES {
        return Err(Error::invalid(format!(
            "the cron pattern is {} bytes; the limit is {MAX_CRON_BYTES}",
            pattern.len()
        )));
    }
    // croner also takes a seventh field, a year, unless told not to.
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(pattern)
        .map_err(|e| {
            Error::invalid(format!(
                "cron pattern {pattern:?} is not valid ({e}); use 5 fields (minute hour day month weekday) or 6 with seconds first"
            ))
        })
}

/// A periodic job stored in the database: what `errand schedule add`
/// records, and every running service enqueues at each tick.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScheduleDefinition {
    /// The schedule's name (part of every job id: `cron:NAME:TICK`).
    pub name: Name,
    /// The cron pattern, read in `tz`.
    pub cron: String,
    /// The time zone the pattern is read in (default UTC).
    pub tz: ScheduleZone,
    /// The kind of each job.
    pub kind: Name,
    /// The queue of each job.
    pub queue: Name,
    /// The payload of each job.
    pub payload: Payload,
    /// The attempt budget of each job.
    pub max_attempts: u32,
    /// What happens to ticks missed while no service ran.
    pub misfire: Misfire,
}

impl ScheduleDefinition {
    /// A schedule named `name` enqueueing `kind` with `payload` on the
    /// `cron` pattern: queue `default`, the default attempt budget, missed
    /// ticks skipped.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name, pattern or kind.
    pub fn new(name: &str, cron: &str, kind: &str, payload: Payload) -> Result<Self> {
        let definition = ScheduleDefinition {
            name: Name::parse("schedule", name)?,
            cron: cron.to_owned(),
            tz: ScheduleZone::UTC,
            kind: Name::parse("kind", kind)?,
            queue: Name::parse("queue", DEFAULT_QUEUE)?,
            payload,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            misfire: Misfire::Skip,
        };
        definition.validate()?;
        Ok(definition)
    }

    /// On `queue`.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad queue name.
    pub fn on_queue(mut self, queue: &str) -> Result<Self> {
        self.queue = Name::parse("queue", queue)?;
        Ok(self)
    }

    /// With an attempt budget of `n` per job.
    ///
    /// # Errors
    /// [`Error::Invalid`] outside 1–1000.
    pub fn with_max_attempts(mut self, n: u32) -> Result<Self> {
        self.max_attempts = n;
        self.validate()?;
        Ok(self)
    }

    /// With the misfire policy `misfire`.
    pub fn with_misfire(mut self, misfire: Misfire) -> Self {
        self.misfire = misfire;
        self
    }

    /// With the pattern read in `tz` (`errand schedule add --tz`).
    pub fn in_zone(mut self, tz: ScheduleZone) -> Self {
        self.tz = tz;
        self
    }

    /// Checks that the pattern parses and the jobs it makes are valid.
    ///
    /// # Errors
    /// [`Error::Invalid`], saying what to change.
    pub fn validate(&self) -> Result<()> {
        let len = self.payload.as_str().len();
        if len > MAX_SCHEDULE_PAYLOAD_BYTES {
            return Err(Error::invalid(format!(
                "the schedule's payload is {len} bytes; a stored schedule keeps at most \
                 {MAX_SCHEDULE_PAYLOAD_BYTES} — pass a reference to larger data"
            )));
        }
        if self.schedule()?.next_tick(Timestamp::now()).is_none() {
            return Err(Error::invalid(format!(
                "cron pattern {:?} never matches (a day that no month has?); fix the pattern",
                self.cron
            )));
        }
        Ok(())
    }

    /// With the options a request may leave out: `queue`, `max_attempts`
    /// and `misfire` (each keeps its default when `None`).
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad queue name or attempt budget.
    pub fn with_options(
        mut self,
        queue: Option<&str>,
        max_attempts: Option<u32>,
        misfire: Option<Misfire>,
    ) -> Result<Self> {
        if let Some(queue) = queue {
            self = self.on_queue(queue)?;
        }
        if let Some(n) = max_attempts {
            self = self.with_max_attempts(n)?;
        }
        if let Some(misfire) = misfire {
            self = self.with_misfire(misfire);
        }
        Ok(self)
    }

    /// The job every tick enqueues (its id and due time set per tick).
    ///
    /// # Errors
    /// [`Error::Invalid`] when a stored field no longer makes a valid job.
    pub fn template(&self) -> Result<NewJob> {
        NewJob::new(self.kind.as_str(), self.payload.clone())?
            .on_queue(self.queue.as_str())?
            .with_max_attempts(self.max_attempts)
    }

    /// The schedule to run.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a pattern that does not parse or a job that
    /// is not valid.
    pub fn schedule(&self) -> Result<CronSchedule> {
        CronSchedule::new(
            self.name.as_str(),
            &self.cron,
            self.template()?,
            self.misfire,
        )
        .map(|s| s.in_zone(self.tz))
    }

    /// Whether `other` enqueues the same jobs at the same ticks (payloads
    /// compared as JSON values, so spacing and key order do not matter).
    pub fn same_as(&self, other: &ScheduleDefinition) -> bool {
        let payload = |p: &Payload| serde_json::from_str::<serde_json::Value>(p.as_str()).ok();
        self.name == other.name
            && self.cron == other.cron
            && self.tz == other.tz
            && self.kind == other.kind
            && self.queue == other.queue
            && self.max_attempts == other.max_attempts
            && self.misfire == other.misfire
            && payload(&self.payload) == payload(&other.payload)
    }

    /// The definition as an audit entry words it (the payload left out).
    pub fn describe(&self) -> String {
        let zone = if self.tz.is_utc() {
            String::new()
        } else {
            format!(" in {}", self.tz)
        };
        format!(
            "cron {:?}{zone}, kind {}, queue {}, max attempts {}, misfire {}",
            self.cron, self.kind, self.queue, self.max_attempts, self.misfire
        )
    }
}

/// Who paused a stored schedule, when and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SchedulePause {
    /// When.
    pub at: Timestamp,
    /// Who.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

/// A stored schedule as the database holds it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StoredSchedule {
    /// What it enqueues, and when.
    #[serde(flatten)]
    pub definition: ScheduleDefinition,
    /// When it was added.
    pub created_at: Timestamp,
    /// When it was added or last replaced.
    pub updated_at: Timestamp,
    /// Ticks before this are never enqueued: when it was added, replaced or
    /// last resumed (ticks missed while paused are dropped whatever the
    /// misfire policy).
    pub active_since: Timestamp,
    /// Set while it is paused: no tick is enqueued.
    pub paused: Option<SchedulePause>,
}

/// A stored schedule's row as a backend reads it, turned into a
/// [`StoredSchedule`] by [`ScheduleRow::into_schedule`] — one reading for
/// every backend.
#[derive(Clone, Debug)]
pub struct ScheduleRow {
    /// `name`.
    pub name: String,
    /// `cron`.
    pub cron: String,
    /// `tz`.
    pub tz: String,
    /// `kind`.
    pub kind: String,
    /// `queue`.
    pub queue: String,
    /// `payload` (JSON text).
    pub payload: String,
    /// `max_attempts`.
    pub max_attempts: i64,
    /// `misfire`.
    pub misfire: String,
    /// `created_at`.
    pub created_at: Timestamp,
    /// `updated_at`.
    pub updated_at: Timestamp,
    /// `active_since`.
    pub active_since: Timestamp,
    /// `paused_at`.
    pub paused_at: Option<Timestamp>,
    /// `paused_by`.
    pub paused_by: Option<String>,
    /// `paused_reason`.
    pub paused_reason: Option<String>,
}

impl ScheduleRow {
    /// The schedule the row holds.
    ///
    /// # Errors
    /// [`Error::Storage`] naming the schedule and the field that does not
    /// read (a row written by something other than this library).
    pub fn into_schedule(self) -> Result<StoredSchedule> {
        let name = self.name;
        let bad = |field: &str, e: &dyn fmt::Display| {
            Error::storage(format!(
                "the stored schedule {name:?} has an unreadable {field} ({e}): it was not written \
                 by errand; delete its row from errand_schedules and add it again with \
                 `errand schedule add`"
            ))
        };
        let definition = ScheduleDefinition {
            name: Name::parse("schedule", name.clone()).map_err(|e| bad("name", &e))?,
            kind: Name::parse("kind", self.kind).map_err(|e| bad("kind", &e))?,
            queue: Name::parse("queue", self.queue).map_err(|e| bad("queue", &e))?,
            payload: Payload::from_stored(self.payload),
            max_attempts: u32::try_from(self.max_attempts)
                .map_err(|e| bad("attempt budget", &e))?,
            misfire: self
                .misfire
                .parse()
                .map_err(|e: Error| bad("misfire policy", &e))?,
            cron: self.cron,
            tz: self.tz.parse().map_err(|e: Error| bad("time zone", &e))?,
        };
        let paused = match (self.paused_at, self.paused_by) {
            (Some(at), Some(operator)) => Some(SchedulePause {
                at,
                operator,
                reason: self.paused_reason,
            }),
            _ => None,
        };
        Ok(StoredSchedule {
            definition,
            created_at: self.created_at,
            updated_at: self.updated_at,
            active_since: self.active_since,
            paused,
        })
    }
}

impl StoredSchedule {
    /// When it next enqueues a job after `now`: none while it is paused,
    /// or when its stored definition no longer makes a schedule.
    pub fn next_tick(&self, now: Timestamp) -> Option<Timestamp> {
        if self.paused.is_some() {
            return None;
        }
        self.definition.schedule().ok()?.next_tick(now)
    }

    /// As the CLI and the API show it: with its next tick after `now`.
    pub fn view(self, now: Timestamp) -> ScheduleView {
        ScheduleView {
            next_tick: self.next_tick(now),
            schedule: self,
        }
    }
}

/// A stored schedule as shown: as stored, with `next_tick` (none while
/// paused, or once removed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ScheduleView {
    /// The schedule.
    #[serde(flatten)]
    pub schedule: StoredSchedule,
    /// When it next enqueues a job.
    pub next_tick: Option<Timestamp>,
}

/// One change to the stored schedules, applied by
/// [`crate::AdminStore::change_schedule`] only if its condition holds.
#[derive(Clone, Debug)]
pub enum ScheduleChange {
    /// Store a new schedule, if none has its name.
    Add(ScheduleDefinition),
    /// Replace the definition of the schedule with its name, if there is
    /// one (a paused schedule stays paused); ticks before now are dropped.
    Replace(ScheduleDefinition),
    /// Delete the schedule, if it is stored with this very definition (the
    /// one its audit entry records).
    Remove(ScheduleDefinition),
    /// Pause the schedule, if it runs.
    Pause(Name),
    /// Resume the schedule, if it is paused; ticks before now are dropped.
    Resume(Name),
}

impl ScheduleChange {
    /// The schedule changed.
    pub fn name(&self) -> &Name {
        match self {
            ScheduleChange::Add(d) | ScheduleChange::Replace(d) | ScheduleChange::Remove(d) => {
                &d.name
            }
            ScheduleChange::Pause(n) | ScheduleChange::Resume(n) => n,
        }
    }

    /// The audit log's action for it.
    pub fn action(&self) -> &'static str {
        match self {
            ScheduleChange::Add(_) => "schedule_add",
            ScheduleChange::Replace(_) => "schedule_replace",
            ScheduleChange::Remove(_) => "schedule_remove",
            ScheduleChange::Pause(_) => "schedule_pause",
            ScheduleChange::Resume(_) => "schedule_resume",
        }
    }
}

/// An operator storing a schedule ([`crate::Admin::add_schedule`]).
#[derive(Clone, Debug)]
pub struct ScheduleAdd {
    /// The schedule.
    pub definition: ScheduleDefinition,
    /// Whether a stored schedule of that name with another definition is
    /// replaced (otherwise the add is refused).
    pub replace: bool,
    /// Who asked.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

/// What [`crate::Admin::add_schedule`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScheduleAddOutcome {
    /// It was stored.
    Added,
    /// The same definition was stored already; nothing was written.
    Unchanged,
    /// Another definition under its name was replaced.
    Replaced,
}

/// The answer of [`crate::Admin::add_schedule`].
#[derive(Clone, Debug, Serialize)]
pub struct ScheduleAdded {
    /// What happened.
    pub outcome: ScheduleAddOutcome,
    /// The schedule as stored now.
    pub schedule: StoredSchedule,
}

/// An operator removing, pausing or resuming a stored schedule.
#[derive(Clone, Debug)]
pub struct ScheduleAction {
    /// The schedule.
    pub name: Name,
    /// Who asked.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
}

impl ScheduleAction {
    /// Checks the operator and reason.
    ///
    /// # Errors
    /// [`Error::Invalid`], saying what to change.
    pub fn validate(&self) -> Result<()> {
        check_operator(&self.operator)?;
        self.reason.as_deref().map_or(Ok(()), check_reason)
    }
}

impl ScheduleAdd {
    /// Checks the definition, the operator and the reason.
    ///
    /// # Errors
    /// [`Error::Invalid`], saying what to change.
    pub fn validate(&self) -> Result<()> {
        self.definition.validate()?;
        check_operator(&self.operator)?;
        self.reason.as_deref().map_or(Ok(()), check_reason)
    }
}

/// The answer of a pause or resume: whether it changed anything, and the
/// schedule as it is now.
#[derive(Clone, Debug, Serialize)]
pub struct ScheduleActed {
    /// `false` when it was already so (paused, running): nothing written.
    pub changed: bool,
    /// The schedule.
    pub schedule: StoredSchedule,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        Timestamp::parse_rfc3339(text).unwrap_or(Timestamp::EPOCH)
    }

    fn schedule(pattern: &str, misfire: Misfire) -> CronSchedule {
        let t = NewJob::new("report", Payload::default()).unwrap();
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
        let t = NewJob::new("k", Payload::default()).unwrap();
        let err = CronSchedule::new("x", "every day", t, Misfire::Skip).unwrap_err();
        assert!(err.to_string().contains("cron pattern"), "{err}");
        let t = NewJob::new("k", Payload::default()).unwrap();
        let seven = CronSchedule::new("x", "0 0 12 * * * 2030", t, Misfire::Skip).unwrap_err();
        assert!(
            seven.to_string().contains("6 with seconds first"),
            "{seven}"
        );
        assert!("backfill:0".parse::<Misfire>().is_err());
        assert_eq!(
            "backfill:5".parse::<Misfire>().ok(),
            Some(Misfire::Backfill(5))
        );
    }

    #[test]
    fn misfire_reads_back_what_it_writes() {
        for m in [Misfire::Skip, Misfire::RunOnce, Misfire::Backfill(7)] {
            assert_eq!(m.to_string().parse::<Misfire>().ok(), Some(m));
        }
        assert_eq!(
            serde_json::to_string(&Misfire::Backfill(3)).ok().as_deref(),
            Some("\"backfill:3\"")
        );
    }

    #[test]
    fn a_definition_is_checked_whole_and_compared_by_meaning() {
        let p = |t: &str| Payload::from_json_text(t).unwrap();
        let d = ScheduleDefinition::new("nightly", "0 3 * * *", "report", p(r#"{"a":1,"b":2}"#))
            .unwrap();
        assert_eq!(d.queue.as_str(), DEFAULT_QUEUE);
        let spaced = ScheduleDefinition {
            payload: p(r#"{ "b": 2, "a": 1 }"#),
            ..d.clone()
        };
        assert!(d.same_as(&spaced), "spacing and key order do not matter");
        let other = ScheduleDefinition {
            payload: p(r#"{"a":2,"b":2}"#),
            ..d.clone()
        };
        assert!(!d.same_as(&other));
        assert!(!d.same_as(&d.clone().with_misfire(Misfire::RunOnce)));
        let e = ScheduleDefinition::new("nightly", "at three", "report", p("{}")).unwrap_err();
        assert!(e.to_string().contains("cron pattern"), "{e}");
        let long = "0 ".repeat(150);
        let e = ScheduleDefinition::new("nightly", &long, "report", p("{}")).unwrap_err();
        assert!(e.to_string().contains("the limit is 200"), "{e}");
        assert!(d.clone().with_max_attempts(0).is_err());
        let e = ScheduleDefinition::new("feb", "0 0 30 2 *", "report", p("{}")).unwrap_err();
        assert!(e.to_string().contains("never matches"), "{e}");
        let big = format!(r#"{{"x":"{}"}}"#, "a".repeat(MAX_SCHEDULE_PAYLOAD_BYTES));
        let e = ScheduleDefinition::new("big", "* * * * *", "report", p(&big)).unwrap_err();
        assert!(e.to_string().contains("at most 65536"), "{e}");
        let d2 = d
            .clone()
            .with_options(Some("mail"), Some(3), Some(Misfire::RunOnce))
            .unwrap();
        assert_eq!(
            (d2.queue.as_str(), d2.max_attempts, d2.misfire),
            ("mail", 3, Misfire::RunOnce)
        );
        assert_eq!(d.clone().with_options(None, None, None).unwrap(), d);
        assert!(ScheduleDefinition::new("bad name", "* * * * *", "k", p("{}")).is_err());
        assert_eq!(
            d.describe(),
            r#"cron "0 3 * * *", kind report, queue default, max attempts 25, misfire skip"#
        );
    }

    #[test]
    fn a_stored_schedule_renders_its_definition_inline() {
        let d = ScheduleDefinition::new(
            "n",
            "* * * * *",
            "k",
            Payload::from_json_text(r#"{"x":[1]}"#).unwrap(),
        )
        .unwrap();
        let s = StoredSchedule {
            definition: d,
            created_at: Timestamp::EPOCH,
            updated_at: Timestamp::EPOCH,
            active_since: Timestamp::EPOCH,
            paused: None,
        };
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["name"], "n");
        assert_eq!(v["payload"]["x"][0], 1);
        assert_eq!(v["misfire"], "skip");
        assert!(v["paused"].is_null());
    }
}
