//! Per-minute counters behind the dashboard's charts.
//!
//! Workers (and the server, for the jobs remote workers settle over HTTP)
//! count what they settle per queue and minute in memory and add the counts
//! to the store every few seconds ([`crate::JobStore::record_minutes`]); a
//! running service samples each queue's depth and oldest due age once a
//! minute. The store keeps one row per queue, minute and [`Series`] with a
//! value, so what it holds is bounded by queues × minutes × series — not by
//! the number of jobs — and minutes older than [`MINUTES_KEPT`] are pruned.
//!
//! [`Charts::from_minutes`] turns the stored minutes of a window into the
//! slots a chart draws: the policy of how minutes add up (counters sum,
//! gauges keep their peak) lives here, not in the backends.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::error_class::ErrorClass;
use crate::ids::Name;
use crate::stats::LATENCY_BUCKETS_MS;

/// How many minutes of counts a store keeps (two days: a day's chart is
/// always whole).
pub const MINUTES_KEPT: i64 = 2 * 24 * 60;

/// The number of buckets of a latency histogram series (the bounds of
/// [`LATENCY_BUCKETS_MS`] and one above them all).
pub const HISTOGRAM_BUCKETS: usize = LATENCY_BUCKETS_MS.len() + 1;

/// The minute (since the Unix epoch) a time falls in.
pub fn minute_of(t: Timestamp) -> i64 {
    t.as_millis().div_euclid(60_000)
}

/// What a per-minute row counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Series {
    /// Jobs acknowledged as done.
    Finished,
    /// Attempts that ended their job `dead` (a permanent failure, or the
    /// last attempt of the budget).
    Dead,
    /// Failed attempts that scheduled a retry, by error class.
    Retry(ErrorClass),
    /// Jobs with a deadline that succeeded, by how late past the deadline
    /// (the bucket of [`LATENCY_BUCKETS_MS`]; 0 also counts on-time jobs).
    Late(u8),
    /// Attempts started, by how long they waited from due to start (the
    /// bucket of [`LATENCY_BUCKETS_MS`]).
    Wait(u8),
    /// Gauge: ready jobs that were due when sampled (the peak of the
    /// minute's samples).
    Depth,
    /// Gauge: how long the oldest due ready job had waited when sampled, in
    /// milliseconds (the peak of the minute's samples).
    OldestDueMs,
}

impl Series {
    /// A gauge keeps the largest value sampled in its minute; every other
    /// series adds up.
    pub fn is_gauge(self) -> bool {
        matches!(self, Series::Depth | Series::OldestDueMs)
    }

    /// The bucket of [`LATENCY_BUCKETS_MS`] a duration in milliseconds falls
    /// in.
    pub fn bucket_of(ms: u64) -> u8 {
        u8::try_from(crate::stats::latency_bucket(ms)).unwrap_or(u8::MAX)
    }
}

impl fmt::Display for Series {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Series::Finished => f.write_str("finished"),
            Series::Dead => f.write_str("dead"),
            Series::Retry(class) => write!(f, "retry.{class}"),
            Series::Late(b) => write!(f, "late.{b}"),
            Series::Wait(b) => write!(f, "wait.{b}"),
            Series::Depth => f.write_str("depth"),
            Series::OldestDueMs => f.write_str("oldest_due_ms"),
        }
    }
}

impl FromStr for Series {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        let bucket = |b: &str| {
            b.parse::<u8>()
                .ok()
                .filter(|&b| usize::from(b) < HISTOGRAM_BUCKETS)
                .ok_or_else(|| Error::storage(format!("unknown chart series {s:?}")))
        };
        Ok(match s {
            "finished" => Series::Finished,
            "dead" => Series::Dead,
            "depth" => Series::Depth,
            "oldest_due_ms" => Series::OldestDueMs,
            _ => match s.split_once('.') {
                Some(("retry", class)) => Series::Retry(class.parse()?),
                Some(("late", b)) => Series::Late(bucket(b)?),
                Some(("wait", b)) => Series::Wait(bucket(b)?),
                _ => return Err(Error::storage(format!("unknown chart series {s:?}"))),
            },
        })
    }
}

/// One count to add to a queue's minute.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MinuteCount {
    /// The queue.
    pub queue: Name,
    /// The minute since the Unix epoch ([`minute_of`]).
    pub minute: i64,
    /// What it counts.
    pub series: Series,
    /// How many (a counter's increment, or a gauge's sample).
    pub value: u64,
}

/// What to read: the minutes `from..until` of one queue or of all, added
/// up in slots of `slot` minutes starting at `from`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MinuteQuery {
    /// One queue, or every queue added together.
    pub queue: Option<Name>,
    /// The first minute (inclusive).
    pub from: i64,
    /// The end (exclusive).
    pub until: i64,
    /// The minutes of each slot (at least 1).
    pub slot: i64,
}

/// One slot of one series, over the queues asked for. Sums saturate at
/// the largest value a store keeps (`i64::MAX`) instead of failing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MinuteRow {
    /// The slot's first minute since the Unix epoch
    /// (`from + k * slot`).
    pub minute: i64,
    /// The series as stored (a name this version does not know is skipped
    /// by [`Charts::from_minutes`], not refused).
    pub series: String,
    /// The sum of every value of the slot (every queue, every minute).
    pub sum: u64,
    /// The largest of the slot's per-minute totals (each minute's values
    /// added over the queues).
    pub peak_sum: u64,
    /// The largest single value of the slot (one queue, one minute).
    pub max: u64,
}

/// The time span a chart covers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChartWindow {
    /// The last 60 minutes, a point per minute.
    #[default]
    Hour,
    /// The last 24 hours, a point per 15 minutes.
    Day,
}

impl ChartWindow {
    /// The window's length in minutes.
    pub fn minutes(self) -> i64 {
        match self {
            ChartWindow::Hour => 60,
            ChartWindow::Day => 24 * 60,
        }
    }

    /// The minutes each point of the chart adds up.
    pub fn slot_minutes(self) -> i64 {
        match self {
            ChartWindow::Hour => 1,
            ChartWindow::Day => 15,
        }
    }

    /// The stable name (`hour`, `day`).
    pub fn as_str(self) -> &'static str {
        match self {
            ChartWindow::Hour => "hour",
            ChartWindow::Day => "day",
        }
    }
}

impl FromStr for ChartWindow {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "hour" => Ok(ChartWindow::Hour),
            "day" => Ok(ChartWindow::Day),
            other => Err(Error::invalid(format!(
                "chart window {:?} is not known: use `hour` or `day`",
                crate::ids::truncate_for_message(other)
            ))),
        }
    }
}

/// The data of a queue's charts (or of every queue's), a value per slot
/// of [`ChartWindow::slot_minutes`] minutes, oldest first; the last slot is
/// the one in progress.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Charts {
    /// The window.
    pub window: ChartWindow,
    /// The queue, or `None` for every queue added together.
    pub queue: Option<Name>,
    /// When the first slot starts.
    pub start: Timestamp,
    /// The minutes of each slot.
    pub slot_minutes: i64,
    /// Jobs acknowledged as done, per slot.
    pub finished: Vec<u64>,
    /// Jobs that ended dead, per slot.
    pub dead: Vec<u64>,
    /// Retries scheduled, per error class, per slot.
    pub retries: BTreeMap<String, Vec<u64>>,
    /// Ready due jobs (the peak sampled in the slot; for every queue, the
    /// peak of the queues' per-minute total); `None` where no sample was
    /// taken.
    pub depth: Vec<Option<u64>>,
    /// How long the oldest due job had waited, in milliseconds (the peak of
    /// the slot, over every queue asked for); `None` where no sample was
    /// taken.
    pub oldest_due_ms: Vec<Option<u64>>,
    /// Jobs with a deadline that succeeded in the window, per bucket of
    /// [`LATENCY_BUCKETS_MS`] of their lateness (bucket 0 holds the on-time
    /// ones).
    pub lateness: Vec<u64>,
    /// Attempts started in the window, per bucket of [`LATENCY_BUCKETS_MS`]
    /// of their wait from due to start.
    pub wait: Vec<u64>,
    /// Stored rows whose series this version does not know (skipped).
    pub skipped: u64,
}

impl Charts {
    /// The query that reads what a window's charts ending in the minute of
    /// `now` need.
    pub fn query(queue: Option<Name>, window: ChartWindow, now: Timestamp) -> MinuteQuery {
        let (from, until) = Charts::span(window, now);
        MinuteQuery {
            queue,
            from,
            until,
            slot: window.slot_minutes(),
        }
    }

    /// The first minute and the end (exclusive) of the window ending in the
    /// minute of `now`, aligned to whole slots.
    fn span(window: ChartWindow, now: Timestamp) -> (i64, i64) {
        let slot = window.slot_minutes();
        let until = (minute_of(now).div_euclid(slot) + 1) * slot;
        (until - window.minutes(), until)
    }

    /// Puts the slots a store read for [`Charts::query`] into charts (rows
    /// of single minutes, as a store answers for a one-minute slot, add up
    /// the same way).
    pub fn from_minutes(
        queue: Option<Name>,
        window: ChartWindow,
        now: Timestamp,
        rows: &[MinuteRow],
    ) -> Charts {
        let (from, until) = Charts::span(window, now);
        let slot = window.slot_minutes();
        let slots = usize::try_from(window.minutes() / slot).unwrap_or(0);
        let mut c = Charts {
            window,
            queue,
            start: Timestamp::from_millis(from.saturating_mul(60_000)),
            slot_minutes: slot,
            finished: vec![0; slots],
            dead: vec![0; slots],
            retries: BTreeMap::new(),
            depth: vec![None; slots],
            oldest_due_ms: vec![None; slots],
            lateness: vec![0; HISTOGRAM_BUCKETS],
            wait: vec![0; HISTOGRAM_BUCKETS],
            skipped: 0,
        };
        for row in rows {
            if row.minute < from || row.minute >= until {
                continue;
            }
            let Ok(i) = usize::try_from((row.minute - from) / slot) else {
                continue;
            };
            let Ok(series) = row.series.parse::<Series>() else {
                c.skipped += 1;
                continue;
            };
            let add = |v: &mut u64| *v = v.saturating_add(row.sum);
            let peak = |v: &mut Option<u64>, x: u64| *v = Some(v.map_or(x, |old| old.max(x)));
            match series {
                Series::Finished => c.finished.get_mut(i).map(add),
                Series::Dead => c.dead.get_mut(i).map(add),
                Series::Retry(class) => c
                    .retries
                    .entry(class.as_str().to_owned())
                    .or_insert_with(|| vec![0; slots])
                    .get_mut(i)
                    .map(add),
                Series::Late(b) => c.lateness.get_mut(usize::from(b)).map(add),
                Series::Wait(b) => c.wait.get_mut(usize::from(b)).map(add),
                // Queues' depths at one minute add up; a slot keeps the
                // peak of those totals.
                Series::Depth => c.depth.get_mut(i).map(|v| peak(v, row.peak_sum)),
                // The oldest job of several queues is the oldest of theirs.
                Series::OldestDueMs => c.oldest_due_ms.get_mut(i).map(|v| peak(v, row.max)),
            };
        }
        c
    }

    /// The number of slots.
    pub fn slots(&self) -> usize {
        self.finished.len()
    }

    /// When slot `i` starts.
    pub fn slot_start(&self, i: usize) -> Timestamp {
        let i = i64::try_from(i).unwrap_or(i64::MAX);
        Timestamp::from_millis(
            self.start
                .as_millis()
                .saturating_add(i.saturating_mul(self.slot_minutes).saturating_mul(60_000)),
        )
    }
}

/// Per-queue, per-minute counts kept in memory until they are written.
/// Adding is cheap (a map look-up); [`Tally::take`] empties it into the
/// rows to add to the store.
#[derive(Debug, Default)]
pub struct Tally {
    queues: BTreeMap<Name, BTreeMap<(i64, Series), u64>>,
}

impl Tally {
    /// An empty tally.
    pub fn new() -> Self {
        Tally::default()
    }

    /// Adds `n` to a counter (or raises a gauge to `n`).
    pub fn add(&mut self, queue: &Name, at: Timestamp, series: Series, n: u64) {
        // Found by reference: the common case allocates nothing.
        let cells = match self.queues.get_mut(queue) {
            Some(cells) => cells,
            None => self.queues.entry(queue.clone()).or_default(),
        };
        let cell = cells.entry((minute_of(at), series)).or_insert(0);
        *cell = if series.is_gauge() {
            (*cell).max(n)
        } else {
            cell.saturating_add(n)
        };
    }

    /// Whether nothing was counted since the last [`Tally::take`].
    pub fn is_empty(&self) -> bool {
        self.queues.is_empty()
    }

    /// Empties the tally into rows to add.
    pub fn take(&mut self) -> Vec<MinuteCount> {
        std::mem::take(&mut self.queues)
            .into_iter()
            .flat_map(|(queue, cells)| {
                cells
                    .into_iter()
                    // A gauge's zero is a sample; a counter's is nothing.
                    .filter(|((_, series), v)| *v > 0 || series.is_gauge())
                    .map(move |((minute, series), value)| MinuteCount {
                        queue: queue.clone(),
                        minute,
                        series,
                        value,
                    })
            })
            .collect()
    }

    /// Puts rows back after a failed write (their counts add to whatever
    /// was counted since).
    pub fn restore(&mut self, rows: Vec<MinuteCount>) {
        for r in rows {
            let at = Timestamp::from_millis(r.minute.saturating_mul(60_000));
            self.add(&r.queue, at, r.series, r.value);
        }
    }
}

/// Checks rows before a store writes them: values fit a signed 64-bit
/// column.
pub fn check_minutes(rows: &[MinuteCount]) -> Result<()> {
    match rows.iter().find(|r| i64::try_from(r.value).is_err()) {
        Some(r) => Err(Error::invalid(format!(
            "a per-minute count of queue {} ({}) is too large to store: {}",
            r.queue.as_str(),
            r.series,
            r.value
        ))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn q(s: &str) -> Name {
        Name::parse("queue", s).unwrap()
    }

    #[test]
    fn series_names_round_trip_and_unknown_ones_are_refused() {
        let all = [
            Series::Finished,
            Series::Dead,
            Series::Retry(ErrorClass::Timeout),
            Series::Retry(ErrorClass::LeaseExpired),
            Series::Late(0),
            Series::Late(14),
            Series::Wait(3),
            Series::Depth,
            Series::OldestDueMs,
        ];
        for s in all {
            assert_eq!(s.to_string().parse::<Series>().unwrap(), s);
        }
        for bad in [
            "",
            "finish",
            "retry.",
            "retry.nope",
            "late.15",
            "wait.-1",
            "wait.x",
            "depth.1",
        ] {
            assert!(bad.parse::<Series>().is_err(), "{bad:?} was accepted");
        }
        assert_eq!(Series::bucket_of(0), 0);
        assert_eq!(Series::bucket_of(1), 0);
        assert_eq!(Series::bucket_of(2), 1);
        assert_eq!(Series::bucket_of(300_000), 13);
        assert_eq!(Series::bucket_of(300_001), 14);
    }

    #[test]
    fn a_tally_adds_counters_keeps_gauge_peaks_and_empties_on_take() {
        let mut t = Tally::new();
        let at = Timestamp::from_millis(60_000 * 100 + 5);
        t.add(&q("a"), at, Series::Finished, 2);
        t.add(&q("a"), at, Series::Finished, 3);
        t.add(
            &q("a"),
            Timestamp::from_millis(60_000 * 101),
            Series::Finished,
            1,
        );
        t.add(&q("a"), at, Series::Depth, 7);
        t.add(&q("a"), at, Series::Depth, 4);
        t.add(&q("b"), at, Series::Dead, 1);
        let rows = t.take();
        assert!(t.is_empty());
        let find = |queue: &str, minute: i64, s: Series| {
            rows.iter()
                .find(|r| r.queue.as_str() == queue && r.minute == minute && r.series == s)
                .map(|r| r.value)
        };
        assert_eq!(find("a", 100, Series::Finished), Some(5));
        assert_eq!(find("a", 101, Series::Finished), Some(1));
        assert_eq!(find("a", 100, Series::Depth), Some(7));
        assert_eq!(find("b", 100, Series::Dead), Some(1));
        assert_eq!(rows.len(), 4);
        t.add(&q("a"), at, Series::Finished, 1);
        t.restore(rows);
        let again = t.take();
        assert_eq!(
            again
                .iter()
                .find(|r| r.minute == 100 && r.series == Series::Finished)
                .map(|r| r.value),
            Some(6)
        );
    }

    fn row(minute: i64, series: &str, sum: u64, max: u64) -> MinuteRow {
        MinuteRow {
            minute,
            series: series.into(),
            sum,
            peak_sum: sum,
            max,
        }
    }

    #[test]
    fn a_day_adds_minutes_into_fifteen_minute_slots() {
        // now is minute 10,000 + 7: the day's last slot is 9,990..10,005
        // (slots are aligned to multiples of 15 minutes).
        let now = Timestamp::from_millis((10_007) * 60_000 + 30_000);
        let (from, until) = Charts::span(ChartWindow::Day, now);
        assert_eq!(until, 10_020);
        assert_eq!(from, 10_020 - 1440);
        let rows = [
            row(from, "finished", 3, 2),
            row(from + 14, "finished", 4, 4),
            row(from + 15, "finished", 1, 1),
            row(until - 1, "dead", 2, 1),
            row(from + 1, "retry.timeout", 5, 5),
            row(from + 2, "depth", 10, 6),
            row(from + 3, "depth", 12, 12),
            row(from + 3, "oldest_due_ms", 900, 700),
            row(from + 4, "late.2", 3, 3),
            row(from + 4, "wait.14", 1, 1),
            row(from + 4, "colour.blue", 1, 1),
            // Outside the window: ignored.
            row(from - 1, "finished", 100, 100),
            row(until, "finished", 100, 100),
        ];
        let c = Charts::from_minutes(None, ChartWindow::Day, now, &rows);
        assert_eq!(c.slots(), 96);
        assert_eq!(c.finished[0], 7);
        assert_eq!(c.finished[1], 1);
        assert_eq!(c.finished.iter().sum::<u64>(), 8);
        assert_eq!(c.dead[95], 2);
        assert_eq!(c.retries["timeout"][0], 5);
        assert_eq!(c.depth[0], Some(12));
        assert_eq!(c.depth[1], None);
        assert_eq!(c.oldest_due_ms[0], Some(700));
        assert_eq!(c.lateness[2], 3);
        assert_eq!(c.wait[14], 1);
        assert_eq!(c.skipped, 1);
        assert_eq!(c.start.as_millis(), from * 60_000);
        assert_eq!(c.slot_start(1).as_millis(), (from + 15) * 60_000);
    }

    #[test]
    fn an_hour_has_a_slot_per_minute_ending_with_the_current_one() {
        let now = Timestamp::from_millis(500 * 60_000 + 59_999);
        let q = Charts::query(Some(q("a")), ChartWindow::Hour, now);
        assert_eq!((q.from, q.until, q.slot), (441, 501, 1));
        let c = Charts::from_minutes(None, ChartWindow::Hour, now, &[row(500, "finished", 1, 1)]);
        assert_eq!(c.slots(), 60);
        assert_eq!(c.finished[59], 1);
        assert_eq!("day".parse::<ChartWindow>().unwrap(), ChartWindow::Day);
        assert!("week".parse::<ChartWindow>().is_err());
    }

    #[test]
    fn oversized_values_are_refused_before_a_write() {
        let r = MinuteCount {
            queue: q("a"),
            minute: 1,
            series: Series::Finished,
            value: u64::MAX,
        };
        assert!(check_minutes(&[r]).is_err());
    }
}
