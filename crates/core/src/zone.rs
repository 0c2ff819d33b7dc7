//! The time zone a schedule's pattern is read in (IANA names, from the
//! `chrono-tz` crate's compiled-in tz database; default UTC), and how ticks
//! are found across daylight-saving transitions.
//!
//! The rule, as users of cron expect it:
//! - a time that a spring-forward day skips (02:30 when clocks jump from
//!   02:00 to 03:00) runs once, at the first time after the jump (03:00);
//! - a time that a fall-back day repeats (02:30 when clocks go back from
//!   03:00 to 02:00) runs once, at its first occurrence; a pattern that
//!   matches every hour runs at the hours as the wall clock shows them, so
//!   the repeated hour's second pass is not run again.
//!
//! Every process computes the same tick instants, so a tick's job id
//! (`cron:NAME:TICK`, the tick in UTC) is the same everywhere.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use croner::Cron;
use serde::Serialize;

use crate::error::{Error, Result};

/// The longest time zone name accepted, in bytes.
pub const MAX_ZONE_BYTES: usize = 64;

/// The time zone a schedule's pattern is read in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScheduleZone(Tz);

impl Default for ScheduleZone {
    fn default() -> Self {
        ScheduleZone(Tz::UTC)
    }
}

impl ScheduleZone {
    /// UTC, the default.
    pub const UTC: ScheduleZone = ScheduleZone(Tz::UTC);

    /// The zone's IANA name (`Europe/Berlin`, `UTC`).
    pub fn name(&self) -> &'static str {
        self.0.name()
    }

    /// Whether this is UTC.
    pub fn is_utc(&self) -> bool {
        self.0 == Tz::UTC
    }
}

impl FromStr for ScheduleZone {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        if s.len() > MAX_ZONE_BYTES {
            return Err(Error::invalid(format!(
                "the time zone name is {} bytes; the limit is {MAX_ZONE_BYTES}",
                s.len()
            )));
        }
        s.parse::<Tz>().map(ScheduleZone).map_err(|_| {
            Error::invalid(format!(
                "time zone {s:?} does not exist: use an IANA name such as Europe/Berlin or \
                 America/New_York (case matters), or UTC"
            ))
        })
    }
}

impl fmt::Display for ScheduleZone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for ScheduleZone {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// The first tick strictly after `at`, read in `zone`.
pub(crate) fn next_after(
    cron: &Cron,
    zone: ScheduleZone,
    at: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    let local = at.with_timezone(&zone.0);
    cron.find_next_occurrence(&local, false)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// Up to `want` ticks at or before `at` and not before `oldest`, most
/// recent first, read in `zone`. A backward search can land on the last
/// second before a skipped hour instead of the time after it; each tick it
/// finds is therefore taken as the first tick after the second before it,
/// the same instant a forward search gives, and one that is still after
/// `at` is not yet due.
pub(crate) fn ticks_back(
    cron: &Cron,
    zone: ScheduleZone,
    at: DateTime<Utc>,
    oldest: DateTime<Utc>,
    want: usize,
) -> Vec<DateTime<Utc>> {
    let mut ticks: Vec<DateTime<Utc>> = Vec::new();
    let mut cursor = at.with_timezone(&zone.0);
    let mut inclusive = true;
    // Bounded: each step moves the cursor back, and a step that finds a
    // tick already taken (or not yet due) still moves it.
    for _ in 0..want.saturating_mul(4).max(4) {
        if ticks.len() >= want {
            break;
        }
        let Ok(found) = cron.find_previous_occurrence(&cursor, inclusive) else {
            break;
        };
        inclusive = false;
        cursor = found;
        let found = found.with_timezone(&Utc);
        if found < oldest {
            break;
        }
        let tick = next_after(cron, zone, found - chrono::Duration::seconds(1)).unwrap_or(found);
        if tick <= at && !ticks.contains(&tick) {
            ticks.push(tick);
        }
    }
    ticks
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use croner::parser::{CronParser, Seconds, Year};

    fn cron(p: &str) -> Cron {
        CronParser::builder()
            .seconds(Seconds::Optional)
            .year(Year::Disallowed)
            .build()
            .parse(p)
            .unwrap()
    }

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
    }

    /// Every tick from `from` up to `to`, forward.
    fn run(
        c: &Cron,
        zone: ScheduleZone,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut at = from;
        while let Some(t) = next_after(c, zone, at) {
            if t > to {
                break;
            }
            out.push(t);
            at = t;
        }
        out
    }

    #[test]
    fn names_parse_and_unknown_ones_are_refused() {
        assert_eq!(
            "Europe/Berlin".parse::<ScheduleZone>().unwrap().name(),
            "Europe/Berlin"
        );
        assert!(ScheduleZone::default().is_utc());
        for bad in ["Mars/Olympus", "europe/berlin", "", "CEST+1"] {
            let e = bad.parse::<ScheduleZone>().unwrap_err();
            assert!(e.to_string().contains("does not exist"), "{bad}: {e}");
        }
        assert!("x".repeat(65).parse::<ScheduleZone>().is_err());
    }

    /// Spring forward: 02:30 does not exist that night; the job runs once,
    /// at 03:00, and the day before and after at 02:30 — forward and
    /// backward searches agree (Berlin 2026-03-29, New York 2026-03-08).
    #[test]
    fn a_skipped_time_runs_once_at_the_end_of_the_jump() {
        let daily = cron("30 2 * * *");
        for (zone, day, jump_utc, before_utc, after_utc) in [
            (
                "Europe/Berlin",
                utc(2026, 3, 28, 12, 0),
                utc(2026, 3, 29, 1, 0),
                utc(2026, 3, 28, 1, 30),
                utc(2026, 3, 30, 0, 30),
            ),
            (
                "America/New_York",
                utc(2026, 3, 7, 12, 0),
                utc(2026, 3, 8, 7, 0),
                utc(2026, 3, 7, 7, 30),
                utc(2026, 3, 9, 6, 30),
            ),
        ] {
            let zone: ScheduleZone = zone.parse().unwrap();
            let ticks = run(
                &daily,
                zone,
                day - chrono::Duration::days(1),
                day + chrono::Duration::days(2),
            );
            assert_eq!(ticks, [before_utc, jump_utc, after_utc], "{zone}");
            let local = jump_utc.with_timezone(&zone.0).format("%H:%M").to_string();
            assert_eq!(local, "03:00", "{zone}");
            // Looking back from just after each, the same instants.
            let back = ticks_back(&daily, zone, after_utc, before_utc, 3);
            assert_eq!(back, [after_utc, jump_utc, before_utc], "{zone}");
            let back = ticks_back(
                &daily,
                zone,
                jump_utc + chrono::Duration::minutes(10),
                before_utc,
                1,
            );
            assert_eq!(back, [jump_utc], "{zone}");
            // Before the jump's tick, the jump's tick is not yet due.
            let back = ticks_back(
                &daily,
                zone,
                jump_utc - chrono::Duration::minutes(10),
                before_utc,
                1,
            );
            assert_eq!(back, [before_utc], "{zone}");
        }
    }

    /// Fall back: the repeated time runs once, at its first occurrence
    /// (Berlin repeats 02:00–03:00 on 2026-10-25; New York repeats
    /// 01:00–02:00 on 2026-11-01).
    #[test]
    fn a_repeated_time_runs_once() {
        for (zone, pattern, first_utc) in [
            ("Europe/Berlin", "30 2 * * *", utc(2026, 10, 25, 0, 30)),
            ("America/New_York", "30 1 * * *", utc(2026, 11, 1, 5, 30)),
        ] {
            let zone: ScheduleZone = zone.parse().unwrap();
            let daily = cron(pattern);
            let day = first_utc - chrono::Duration::hours(12);
            let ticks = run(&daily, zone, day, day + chrono::Duration::hours(24));
            assert_eq!(ticks, [first_utc], "{zone}: once");
            let later = first_utc + chrono::Duration::hours(3);
            assert_eq!(
                ticks_back(&daily, zone, later, day, 3),
                [first_utc],
                "{zone}"
            );
        }
    }

    #[test]
    fn utc_is_the_default_and_reads_the_pattern_as_utc() {
        let daily = cron("30 2 * * *");
        let next = next_after(&daily, ScheduleZone::default(), utc(2026, 3, 28, 12, 0));
        assert_eq!(next, Some(utc(2026, 3, 29, 2, 30)));
    }
}
