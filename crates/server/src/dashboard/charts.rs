//! The charts of a queue (or of every queue): server-rendered inline SVG
//! drawn from an [`errand::Charts`], with no script and no inline style
//! (the Content-Security-Policy forbids both). Colours and text anchors come
//! from classes in `style.css`.
//!
//! Every chart is a `<figure class="chart">` with a visible `<h3>` caption
//! and an `<svg role="img">` labelled by its `<title>` (a one-sentence
//! summary for screen readers). Each has both axis titles, y ticks at 0, the
//! middle and a "nice" maximum, and x ticks (`HH:MM` UTC at the start, middle
//! and end of the window for the time charts, the bucket bounds for the
//! histograms). A chart with nothing to draw keeps its axes and says so.
//!
//! Coordinates are integers in tenths of a viewBox unit, written with at
//! most one decimal, so the SVG of the day window (96 slots) stays small;
//! no floating point is involved. Only non-zero slots get a bar.

use std::fmt;

use errand::{ChartWindow, Charts, LATENCY_BUCKETS_MS, Timestamp};
use maud::{Markup, html};

/// The viewBox, in whole units.
const VIEW_BOX: &str = "0 0 560 200";
/// The plot area, in tenths of a unit: left, right, top and bottom edges.
const X0: i64 = 600;
const X1: i64 = 5320;
const Y_TOP: i64 = 140;
const Y_BOT: i64 = 1560;
const PLOT_W: i64 = X1 - X0;
const PLOT_H: i64 = Y_BOT - Y_TOP;
/// Baselines of the x tick labels and of the x-axis title, the x of the
/// right edge of the y tick labels and of the (rotated) y-axis title.
const X_TICK_Y: i64 = 1710;
const X_TITLE_Y: i64 = 1910;
const Y_TICK_X: i64 = 550;
const Y_TITLE_X: i64 = 150;
/// How many colours `style.css` has for the retry classes (`series-0`…).
const SERIES_COLOURS: usize = 6;
/// Nice maxima of the duration axis, in milliseconds (each one's half is a
/// clean label too); above the last, whole hours.
const DURATION_STEPS_MS: [u64; 23] = [
    10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 30_000, 60_000, 120_000,
    300_000, 600_000, 1_200_000, 1_800_000, 3_600_000, 7_200_000, 21_600_000, 43_200_000,
    86_400_000,
];
const HOUR_MS: u64 = 3_600_000;
const NOTHING: &str = "nothing in this window";

/// A coordinate in tenths of a unit, written with at most one decimal.
#[derive(Clone, Copy, Debug)]
struct T(i64);

impl fmt::Display for T {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.0 < 0 { "-" } else { "" };
        let (whole, tenth) = (self.0.unsigned_abs() / 10, self.0.unsigned_abs() % 10);
        if tenth == 0 {
            write!(f, "{sign}{whole}")
        } else {
            write!(f, "{sign}{whole}.{tenth}")
        }
    }
}

/// The charts of a window: jobs finished, dead letters, retries by error
/// class, queue depth, the oldest due job's wait, and the lateness and
/// wait histograms.
pub(super) fn panel(c: &Charts) -> Markup {
    let n = c.slots();
    let per = per_slot(c.slot_minutes);
    let times = TimeAxis::new(c);
    html! {
        section.charts {
            (counts_chart(&CountsSpec {
                id: "finished",
                caption: "Jobs finished",
                what: "jobs finished",
                y_title: format!("jobs {per}"),
                per: &per,
                bar_class: "bar",
                values: &c.finished,
            }, &times, n))
            (counts_chart(&CountsSpec {
                id: "dead",
                caption: "Dead letters",
                what: "jobs that ended dead",
                y_title: format!("jobs {per}"),
                per: &per,
                bar_class: "bar dead",
                values: &c.dead,
            }, &times, n))
            (retries_chart(c, &times, n, &per))
            (gauge_chart(&GaugeSpec {
                id: "depth",
                caption: "Queue depth (ready and due)",
                y_title: "due jobs (peak)",
                line_class: "line depth",
                values: &c.depth,
                durations: false,
            }, &times, n))
            (gauge_chart(&GaugeSpec {
                id: "oldest",
                caption: "Oldest due job's wait",
                y_title: "wait (peak)",
                line_class: "line oldest",
                values: &c.oldest_due_ms,
                durations: true,
            }, &times, n))
            (histogram_chart(&HistogramSpec {
                id: "lateness",
                caption: "Lateness past deadline",
                x_title: "lateness (on time counts as ≤1ms)",
                y_title: "jobs",
                what: "jobs with a deadline that succeeded",
                bar_class: "bar late",
                values: &c.lateness,
            }, c.window))
            (histogram_chart(&HistogramSpec {
                id: "wait",
                caption: "Wait from due to start",
                x_title: "wait from due to start",
                y_title: "attempts",
                what: "attempts started",
                bar_class: "bar wait",
                values: &c.wait,
            }, c.window))
            @if c.skipped > 0 {
                p.muted.charts-note {
                    (c.skipped) " stored rows of a series this version does not know were left out."
                }
            }
        }
    }
}

/// Links to the hour and day windows of the page at `base`, the current one
/// marked (`aria-current="page"` and the `active` class of `nav.tabs`).
pub(super) fn window_links(base: &str, current: ChartWindow) -> Markup {
    let sep = if base.contains('?') { '&' } else { '?' };
    html! {
        nav.tabs.windows aria-label="Chart window" {
            @for (w, label) in [(ChartWindow::Hour, "Last hour"), (ChartWindow::Day, "Last day")] {
                @let href = format!("{base}{sep}window={}", w.as_str());
                @if w == current {
                    a.active href=(href) aria-current="page" { (label) }
                } @else {
                    a href=(href) { (label) }
                }
            }
        }
    }
}

/// A duration in milliseconds, short: `250ms`, `2.5s`, `1.5min`, `3h`
/// (one decimal at most, none from 100 units up).
pub(super) fn duration_label(ms: u64) -> String {
    if ms < 1_000 {
        return format!("{ms}ms");
    }
    for (unit, limit, suffix) in [(1_000, 60, "s"), (60_000, 60, "min")] {
        let tenths = tenths_of(ms, unit);
        if tenths < limit * 10 {
            return format!("{}{suffix}", tenths_text(tenths));
        }
    }
    format!("{}h", tenths_text(tenths_of(ms, HOUR_MS)))
}

/// A count, compact: `999`, `1.2k`, `25k`, `3M` (one decimal at most, none
/// from 100 units up).
fn compact(v: u64) -> String {
    if v < 1_000 {
        return v.to_string();
    }
    let units = [
        (1_000, "k"),
        (1_000_000, "M"),
        (1_000_000_000, "G"),
        (1_000_000_000_000, "T"),
        (1_000_000_000_000_000, "P"),
    ];
    for (unit, suffix) in units {
        let tenths = tenths_of(v, unit);
        // Rounded up to 1000 of this unit: the next one reads better.
        if tenths < 9_995 {
            return format!("{}{suffix}", tenths_text(tenths));
        }
    }
    format!("{}E", tenths_text(tenths_of(v, 1_000_000_000_000_000_000)))
}

/// `v / unit` in tenths, rounded to the nearest.
fn tenths_of(v: u64, unit: u64) -> u128 {
    let unit = u128::from(unit.max(1));
    (u128::from(v) * 10 + unit / 2) / unit
}

/// Tenths as text: one decimal below 100 (none when it is 0), whole above.
fn tenths_text(tenths: u128) -> String {
    if tenths >= 1_000 {
        ((tenths + 5) / 10).to_string()
    } else if tenths.is_multiple_of(10) {
        (tenths / 10).to_string()
    } else {
        format!("{}.{}", tenths / 10, tenths % 10)
    }
}

/// The top of a count axis: the smallest of 2, 10, 20, 50, 100, 200, 500…
/// (1, 2 or 5 × 10^k) at least `v`, so that the middle tick is a whole
/// number too (which rules out 1 and 5).
fn nice_max(v: u64) -> u64 {
    if v <= 2 {
        return 2;
    }
    let mut decade: u64 = 10;
    loop {
        for m in [1, 2, 5] {
            match decade.checked_mul(m) {
                Some(n) if n >= v => return n,
                Some(_) => {}
                None => return u64::MAX,
            }
        }
        match decade.checked_mul(10) {
            Some(d) => decade = d,
            None => return u64::MAX,
        }
    }
}

/// The top of a duration axis, in milliseconds: a step of
/// [`DURATION_STEPS_MS`], or a nice number of hours above a day.
fn nice_duration_max(ms: u64) -> u64 {
    DURATION_STEPS_MS
        .iter()
        .copied()
        .find(|&s| s >= ms)
        .unwrap_or_else(|| nice_max(ms.div_ceil(HOUR_MS)).saturating_mul(HOUR_MS))
}

/// "per minute", "per 15 min".
fn per_slot(slot_minutes: i64) -> String {
    if slot_minutes == 1 {
        "per minute".to_owned()
    } else {
        format!("per {slot_minutes} min")
    }
}

fn window_text(w: ChartWindow) -> &'static str {
    match w {
        ChartWindow::Hour => "the last hour",
        ChartWindow::Day => "the last 24 hours",
    }
}

/// `HH:MM` of a time, in UTC.
fn hhmm(t: Timestamp) -> String {
    let minute = t.as_millis().rem_euclid(86_400_000) / 60_000;
    format!("{:02}:{:02}", minute / 60, minute % 60)
}

/// `MM-DD HH:MM` (UTC): a day's window starts and ends at the same time
/// of day, so its ends carry their dates.
fn dated(t: Timestamp) -> String {
    let text = t.to_rfc3339();
    match text.get(5..10) {
        Some(day) => format!("{day} {}", hhmm(t)),
        None => hhmm(t),
    }
}

fn to_i64(i: usize) -> i64 {
    i64::try_from(i).unwrap_or(i64::MAX)
}

/// The left and right edges of slot `i` of `n` across the plot.
fn slot_edges(i: usize, n: usize) -> (i64, i64) {
    let n = to_i64(n.max(1));
    let i = to_i64(i);
    (
        X0 + i.saturating_mul(PLOT_W) / n,
        X0 + i.saturating_add(1).saturating_mul(PLOT_W) / n,
    )
}

/// The centre of slot `i` of `n`.
fn slot_centre(i: usize, n: usize) -> i64 {
    let n = to_i64(n.max(1));
    X0 + to_i64(i)
        .saturating_mul(2)
        .saturating_add(1)
        .saturating_mul(PLOT_W)
        / (2 * n)
}

/// The y of a value on an axis from 0 to `max`.
fn y_of(v: u64, max: u64) -> i64 {
    let max = max.max(1);
    let h = i128::from(v.min(max)) * i128::from(PLOT_H) / i128::from(max);
    Y_BOT - i64::try_from(h).unwrap_or(PLOT_H)
}

/// The x ticks of the time charts: the window's start, middle and end.
#[derive(Debug)]
struct TimeAxis {
    ticks: Vec<(i64, String)>,
    /// "from 09:31 to 10:31 UTC"
    span: String,
}

impl TimeAxis {
    fn new(c: &Charts) -> TimeAxis {
        let n = c.slots();
        let label = match c.window {
            ChartWindow::Hour => hhmm,
            ChartWindow::Day => dated,
        };
        let (start, end) = (label(c.start), label(c.slot_start(n)));
        let mid = n / 2;
        let ticks = vec![
            (X0, start.clone()),
            (slot_edges(mid, n).0, hhmm(c.slot_start(mid))),
            (X1, end.clone()),
        ];
        let span = format!("{} ({start} to {end} UTC)", window_text(c.window));
        TimeAxis { ticks, span }
    }
}

/// What every chart has around its data.
#[derive(Debug)]
struct Frame<'a> {
    id: &'a str,
    caption: &'a str,
    /// The `<title>`: what the chart shows, in a sentence.
    summary: String,
    x_title: &'a str,
    y_title: &'a str,
    /// The labels of the y ticks at the middle and the top (0 is "0").
    y_mid: String,
    y_max: String,
    x_ticks: &'a [(i64, String)],
    /// The note drawn over an empty plot.
    empty: Option<&'a str>,
}

/// A chart's figure: caption, svg with axes, ticks and titles around
/// `plot`, and an optional legend under it.
fn figure(f: &Frame<'_>, plot: Markup, legend: Option<Markup>) -> Markup {
    let title_id = format!("chart-{}-title", f.id);
    let y_mid = (Y_TOP + Y_BOT) / 2;
    let x_mid = (X0 + X1) / 2;
    let rotate = format!("rotate(-90 {} {})", T(Y_TITLE_X), T(y_mid));
    html! {
        figure.chart {
            h3 { (f.caption) }
            svg.plot viewBox=(VIEW_BOX) role="img" aria-labelledby=(title_id) {
                title id=(title_id) { (f.summary) }
                @for y in [Y_TOP, y_mid] {
                    line.grid x1=(T(X0)) y1=(T(y)) x2=(T(X1)) y2=(T(y)) {}
                }
                @for (y, label) in [(Y_BOT, "0"), (y_mid, f.y_mid.as_str()), (Y_TOP, f.y_max.as_str())] {
                    text.tick.tick-y x=(T(Y_TICK_X)) y=(T(y + 35)) { (label) }
                }
                @for (x, label) in f.x_ticks {
                    line.tick-mark x1=(T(*x)) y1=(T(Y_BOT)) x2=(T(*x)) y2=(T(Y_BOT + 40)) {}
                    // The labels at the plot's ends grow inwards, so that
                    // none is cut off at the picture's edge.
                    text.tick.tick-x.from-edge[*x == X0].to-edge[*x == X1] x=(T(*x)) y=(T(X_TICK_Y)) { (label) }
                }
                (plot)
                line.axis x1=(T(X0)) y1=(T(Y_TOP)) x2=(T(X0)) y2=(T(Y_BOT)) {}
                line.axis x1=(T(X0)) y1=(T(Y_BOT)) x2=(T(X1)) y2=(T(Y_BOT)) {}
                text.axis-title.x-title x=(T(x_mid)) y=(T(X_TITLE_Y)) { (f.x_title) }
                text.axis-title.y-title x=(T(Y_TITLE_X)) y=(T(y_mid)) transform=(rotate) { (f.y_title) }
                @if let Some(note) = f.empty {
                    text.empty x=(T(x_mid)) y=(T(y_mid - 60)) { (note) }
                }
            }
            @if let Some(legend) = legend { (legend) }
        }
    }
}

/// A bar per non-zero value, value `i` in slot `i` of `n`.
fn bars(values: &[u64], n: usize, max: u64, class: &str) -> Markup {
    html! {
        @for (i, &v) in values.iter().enumerate().take(n) {
            @if v > 0 {
                @let (left, right) = slot_edges(i, n);
                @let inset = (right - left) / 8;
                @let top = y_of(v, max).min(Y_BOT - 10);
                rect class=(class) x=(T(left + inset)) y=(T(top))
                    width=(T(right - left - 2 * inset)) height=(T(Y_BOT - top)) {}
            }
        }
    }
}

/// A line through the samples at the slot centres, split where a sample is
/// missing; a sample alone between gaps is a dot.
fn lines(values: &[Option<u64>], n: usize, max: u64, class: &str) -> Markup {
    let mut runs: Vec<Vec<(i64, i64)>> = Vec::new();
    let mut run = Vec::new();
    for (i, v) in values.iter().enumerate().take(n) {
        match v {
            Some(v) => run.push((slot_centre(i, n), y_of(*v, max))),
            None if run.is_empty() => {}
            None => runs.push(std::mem::take(&mut run)),
        }
    }
    if !run.is_empty() {
        runs.push(run);
    }
    html! {
        @for run in &runs {
            @if let [(x, y)] = run.as_slice() {
                circle class={ (class) " dot" } cx=(T(*x)) cy=(T(*y)) r="2" {}
            } @else {
                @let points = run
                    .iter()
                    .map(|(x, y)| format!("{},{}", T(*x), T(*y)))
                    .collect::<Vec<_>>()
                    .join(" ");
                polyline class=(class) points=(points) {}
            }
        }
    }
}

#[derive(Debug)]
struct CountsSpec<'a> {
    id: &'a str,
    caption: &'a str,
    /// What is counted, for the summary ("jobs finished").
    what: &'a str,
    y_title: String,
    /// "per minute", "per 15 min".
    per: &'a str,
    bar_class: &'a str,
    values: &'a [u64],
}

/// Bars of a count per slot.
fn counts_chart(s: &CountsSpec<'_>, times: &TimeAxis, n: usize) -> Markup {
    let values = s.values.get(..n).unwrap_or(s.values);
    let peak = values.iter().copied().max().unwrap_or(0);
    let total = values.iter().fold(0u64, |a, &v| a.saturating_add(v));
    let max = nice_max(peak);
    let summary = if peak == 0 {
        format!("{}, {}: no {}.", s.caption, times.span, s.what)
    } else {
        format!(
            "{}, {}: {total} in total, at most {peak} {}.",
            s.caption, times.span, s.per
        )
    };
    figure(
        &Frame {
            id: s.id,
            caption: s.caption,
            summary,
            x_title: "time (UTC)",
            y_title: &s.y_title,
            y_mid: compact(max / 2),
            y_max: compact(max),
            x_ticks: &times.ticks,
            empty: (peak == 0).then_some(NOTHING),
        },
        bars(values, n, max, s.bar_class),
        None,
    )
}

/// A line per error class, with a legend; with no retries at all, the
/// axes and a note.
fn retries_chart(c: &Charts, times: &TimeAxis, n: usize, per: &str) -> Markup {
    let peak = c
        .retries
        .values()
        .flat_map(|v| v.iter().take(n))
        .copied()
        .max()
        .unwrap_or(0);
    let max = nice_max(peak);
    let y_title = format!("retries {per}");
    let classes: Vec<(usize, &str, u64)> = c
        .retries
        .iter()
        .enumerate()
        .map(|(k, (name, v))| {
            let total = v.iter().take(n).fold(0u64, |a, &x| a.saturating_add(x));
            (k % SERIES_COLOURS, name.as_str(), total)
        })
        .collect();
    let summary = if peak == 0 {
        format!(
            "Retries by error class, {}: no retries in this window.",
            times.span
        )
    } else {
        let parts: Vec<String> = classes
            .iter()
            .map(|(_, name, total)| format!("{name} {total}"))
            .collect();
        format!(
            "Retries {per} by error class, {}: {}.",
            times.span,
            parts.join(", ")
        )
    };
    let plot = html! {
        @if peak > 0 {
            @for ((k, _, _), values) in classes.iter().zip(c.retries.values()) {
                (lines(&values.iter().copied().map(Some).collect::<Vec<_>>(), n, max, &format!("line series-{k}")))
            }
        }
    };
    let legend = (peak > 0).then(|| {
        html! {
            ul.legend {
                @for (k, name, total) in &classes {
                    li {
                        span class={ "swatch series-" (k) } {}
                        (name) " " span.muted { (compact(*total)) }
                    }
                }
            }
        }
    });
    figure(
        &Frame {
            id: "retries",
            caption: "Retries by error class",
            summary,
            x_title: "time (UTC)",
            y_title: &y_title,
            y_mid: compact(max / 2),
            y_max: compact(max),
            x_ticks: &times.ticks,
            empty: (peak == 0).then_some("no retries in this window"),
        },
        plot,
        legend,
    )
}

#[derive(Debug)]
struct GaugeSpec<'a> {
    id: &'a str,
    caption: &'a str,
    y_title: &'a str,
    line_class: &'a str,
    values: &'a [Option<u64>],
    /// Milliseconds, labelled as durations.
    durations: bool,
}

/// A line of a sampled gauge, with gaps where nothing was sampled.
fn gauge_chart(s: &GaugeSpec<'_>, times: &TimeAxis, n: usize) -> Markup {
    let peak = s
        .values
        .iter()
        .take(n)
        .flatten()
        .copied()
        .max()
        .unwrap_or(0);
    let (max, label): (u64, fn(u64) -> String) = if s.durations {
        (nice_duration_max(peak), duration_label)
    } else {
        (nice_max(peak), compact)
    };
    let sampled = s.values.iter().take(n).flatten().count();
    let summary = if sampled == 0 {
        format!("{}, {}: no samples.", s.caption, times.span)
    } else {
        format!(
            "{}, {}: at most {} ({} of {} slots sampled).",
            s.caption,
            times.span,
            label(peak),
            sampled,
            n
        )
    };
    figure(
        &Frame {
            id: s.id,
            caption: s.caption,
            summary,
            x_title: "time (UTC)",
            y_title: s.y_title,
            y_mid: label(max / 2),
            y_max: label(max),
            x_ticks: &times.ticks,
            empty: (peak == 0).then_some(NOTHING),
        },
        html! {
            @if peak > 0 { (lines(s.values, n, max, s.line_class)) }
        },
        None,
    )
}

#[derive(Debug)]
struct HistogramSpec<'a> {
    id: &'a str,
    caption: &'a str,
    x_title: &'a str,
    y_title: &'a str,
    what: &'a str,
    bar_class: &'a str,
    values: &'a [u64],
}

/// The label of histogram bucket `i`: `≤1ms` … `≤300s`, then `>300s`.
fn bucket_label(i: usize) -> String {
    let seconds = |ms: u64| {
        if ms < 1_000 {
            format!("{ms}ms")
        } else {
            format!("{}s", tenths_text(tenths_of(ms, 1_000)))
        }
    };
    match LATENCY_BUCKETS_MS.get(i) {
        Some(&b) => format!("≤{}", seconds(b)),
        None => format!(
            ">{}",
            seconds(LATENCY_BUCKETS_MS.last().copied().unwrap_or(0))
        ),
    }
}

/// Bars per bucket; every other bucket labelled (counted from the last, so
/// the open one is always labelled) when there are more than 8.
fn histogram_chart(s: &HistogramSpec<'_>, window: ChartWindow) -> Markup {
    let n = s.values.len();
    let peak = s.values.iter().copied().max().unwrap_or(0);
    let total = s.values.iter().fold(0u64, |a, &v| a.saturating_add(v));
    let max = nice_max(peak);
    let step = if n > 8 { 2 } else { 1 };
    let ticks: Vec<(i64, String)> = (0..n)
        .filter(|i| (n - 1 - i).is_multiple_of(step))
        .map(|i| (slot_centre(i, n), bucket_label(i)))
        .collect();
    let summary = if peak == 0 {
        format!("{}, {}: no {}.", s.caption, window_text(window), s.what)
    } else {
        let parts: Vec<String> = s
            .values
            .iter()
            .enumerate()
            .filter(|(_, v)| **v > 0)
            .map(|(i, v)| format!("{} {v}", bucket_label(i)))
            .collect();
        format!(
            "{}, {}: {} {} ({}).",
            s.caption,
            window_text(window),
            total,
            s.what,
            parts.join(", ")
        )
    };
    figure(
        &Frame {
            id: s.id,
            caption: s.caption,
            summary,
            x_title: s.x_title,
            y_title: s.y_title,
            y_mid: compact(max / 2),
            y_max: compact(max),
            x_ticks: &ticks,
            empty: (peak == 0).then_some(NOTHING),
        },
        bars(s.values, n, max, s.bar_class),
        None,
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use std::collections::BTreeMap;

    use errand::{HISTOGRAM_BUCKETS, MinuteRow, Name};

    use super::*;

    /// 2024-10-04 (day 20,000 since the epoch) at 10:30 UTC, in minutes.
    const TEN_THIRTY: i64 = 20_000 * 1_440 + 10 * 60 + 30;

    fn row(minute: i64, series: &str, sum: u64) -> MinuteRow {
        MinuteRow {
            minute,
            series: series.into(),
            sum,
            peak_sum: sum,
            max: sum,
        }
    }

    fn now() -> Timestamp {
        Timestamp::from_millis(TEN_THIRTY * 60_000 + 30_000)
    }

    fn render(c: &Charts) -> String {
        let out = panel(c).into_string();
        assert_well_formed(&out);
        out
    }

    /// The figure whose svg is labelled `chart-{id}-title`.
    fn figure_of<'a>(html: &'a str, id: &str) -> &'a str {
        let at = html
            .find(&format!("aria-labelledby=\"chart-{id}-title\""))
            .unwrap_or_else(|| panic!("no chart {id}"));
        let start = html[..at].rfind("<figure").unwrap();
        let end = at + html[at..].find("</figure>").unwrap();
        &html[start..end]
    }

    /// Every tag is closed, in order (SVG in HTML is foreign content: an
    /// element written like an HTML void element would swallow the next).
    fn assert_well_formed(s: &str) {
        let mut stack: Vec<&str> = Vec::new();
        let mut rest = s;
        while let Some(i) = rest.find('<') {
            rest = &rest[i + 1..];
            let end = rest.find('>').expect("a tag is not closed by >");
            let tag = &rest[..end];
            rest = &rest[end + 1..];
            if let Some(name) = tag.strip_prefix('/') {
                assert_eq!(stack.pop(), Some(name), "unbalanced </{name}> in {s}");
            } else if !tag.ends_with('/') {
                stack.push(tag.split_whitespace().next().unwrap());
            }
        }
        assert!(stack.is_empty(), "unclosed {stack:?}");
        assert_eq!(s.matches("<svg").count(), s.matches("</svg>").count());
    }

    fn count(haystack: &str, needle: &str) -> usize {
        haystack.matches(needle).count()
    }

    /// The text of every `<text class="...{class}...">` element.
    fn texts<'a>(figure: &'a str, class: &str) -> Vec<&'a str> {
        figure
            .split("<text ")
            .skip(1)
            .filter(|t| t.split('>').next().unwrap().contains(class))
            .map(|t| {
                let body = &t[t.find('>').unwrap() + 1..];
                &body[..body.find("</text>").unwrap()]
            })
            .collect()
    }

    fn hour() -> Charts {
        let from = TEN_THIRTY + 1 - 60;
        let mut rows = vec![
            row(from, "finished", 3),
            row(from + 10, "finished", 7),
            row(TEN_THIRTY, "finished", 120),
            row(from + 20, "dead", 2),
            row(from + 2, "retry.timeout", 4),
            row(from + 3, "retry.lease_expired", 1),
            row(from + 30, "oldest_due_ms", 45_000),
            row(from + 31, "oldest_due_ms", 2_000),
            row(from, "late.0", 5),
            row(from, "late.14", 1),
            row(from, "wait.3", 40),
            row(from, "wait.10", 2),
            row(from, "wait.14", 1),
        ];
        // Depth sampled in minutes 0..5 and 10..20: one gap between.
        rows.extend(
            (0..5)
                .chain(10..20)
                .map(|m| row(from + m, "depth", 30 + m.unsigned_abs())),
        );
        Charts::from_minutes(None, ChartWindow::Hour, now(), &rows)
    }

    #[test]
    fn an_hour_renders_seven_labelled_charts() {
        let c = hour();
        let out = render(&c);
        assert!(out.starts_with("<section class=\"charts\">"));
        assert_eq!(count(&out, "<svg"), 7);
        assert_eq!(count(&out, "<figure"), 7);
        assert_eq!(count(&out, "role=\"img\""), 7);
        for (id, caption, x_title, y_title, y_labels, x_labels) in [
            (
                "finished",
                "Jobs finished",
                "time (UTC)",
                "jobs per minute",
                ["0", "100", "200"],
                &["09:31", "10:01", "10:31"][..],
            ),
            (
                "dead",
                "Dead letters",
                "time (UTC)",
                "jobs per minute",
                ["0", "1", "2"],
                &["09:31", "10:01", "10:31"],
            ),
            (
                "retries",
                "Retries by error class",
                "time (UTC)",
                "retries per minute",
                ["0", "5", "10"],
                &["09:31", "10:01", "10:31"],
            ),
            (
                "depth",
                "Queue depth (ready and due)",
                "time (UTC)",
                "due jobs (peak)",
                ["0", "25", "50"],
                &["09:31", "10:01", "10:31"],
            ),
            (
                "oldest",
                "Oldest due job's wait",
                "time (UTC)",
                "wait (peak)",
                ["0", "30s", "1min"],
                &["09:31", "10:01", "10:31"],
            ),
            (
                "lateness",
                "Lateness past deadline",
                "lateness (on time counts as ≤1ms)",
                "jobs",
                ["0", "5", "10"],
                &[
                    "≤1ms", "≤10ms", "≤50ms", "≤250ms", "≤1s", "≤5s", "≤60s", "&gt;300s",
                ],
            ),
            (
                "wait",
                "Wait from due to start",
                "wait from due to start",
                "attempts",
                ["0", "25", "50"],
                &[
                    "≤1ms", "≤10ms", "≤50ms", "≤250ms", "≤1s", "≤5s", "≤60s", "&gt;300s",
                ],
            ),
        ] {
            let f = figure_of(&out, id);
            assert!(
                f.contains(&format!("<h3>{caption}</h3>")),
                "{id}: caption in {f}"
            );
            assert!(
                f.contains(&format!("<title id=\"chart-{id}-title\">")),
                "{id}: title"
            );
            assert_eq!(texts(f, "x-title"), [x_title], "{id}");
            assert_eq!(texts(f, "y-title"), [y_title], "{id}");
            assert_eq!(texts(f, "tick-y"), y_labels, "{id}");
            assert_eq!(texts(f, "tick-x"), x_labels, "{id}");
            assert!(!f.contains(NOTHING), "{id} says it is empty");
            assert!(!f.contains("style="), "{id} has an inline style");
        }
        // A bar per non-zero slot or bucket, exactly.
        assert_eq!(count(figure_of(&out, "finished"), "<rect class=\"bar\""), 3);
        assert_eq!(count(figure_of(&out, "dead"), "<rect "), 1);
        assert_eq!(count(figure_of(&out, "dead"), "class=\"bar dead\""), 1);
        assert_eq!(
            count(figure_of(&out, "lateness"), "<rect class=\"bar late\""),
            2
        );
        assert_eq!(
            count(figure_of(&out, "wait"), "<rect class=\"bar wait\""),
            3
        );
        // The tallest bar (120 of 200) is 60% of the plot height: 85.2 of 142.
        assert!(figure_of(&out, "finished").contains("height=\"85.2\""));
        // A line per retry class, coloured by series, with a legend.
        let retries = figure_of(&out, "retries");
        assert_eq!(count(retries, "<polyline"), 2);
        assert!(retries.contains("class=\"line series-0\""));
        assert!(retries.contains("class=\"line series-1\""));
        assert!(retries.contains("<ul class=\"legend\">"));
        assert!(retries.contains("lease_expired"));
        assert!(retries.contains("timeout"));
        // The depth gap splits its line in two; the two adjacent samples of
        // the oldest due wait make one.
        let depth = figure_of(&out, "depth");
        assert_eq!(count(depth, "<polyline"), 2);
        assert_eq!(count(depth, "<circle"), 0);
        assert_eq!(count(figure_of(&out, "oldest"), "<polyline"), 1);
        // The first depth run has 5 points, the second 10.
        let points: Vec<usize> = depth
            .split("points=\"")
            .skip(1)
            .map(|p| p[..p.find('"').unwrap()].split(' ').count())
            .collect();
        assert_eq!(points, [5, 10]);
        // Every chart is labelled by its own title.
        let mut ids: Vec<&str> = out
            .split("<title id=\"")
            .skip(1)
            .map(|t| &t[..t.find('"').unwrap()])
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 7);
        assert!(!out.contains("charts-note"));
    }

    #[test]
    fn a_day_has_fifteen_minute_slots_and_a_bar_for_each() {
        // now is 10:30: the day's slots end at 10:45.
        let until = TEN_THIRTY + 15;
        let rows: Vec<MinuteRow> = (0..96)
            .map(|s| row(until - 1_440 + s * 15, "finished", 1 + s.unsigned_abs()))
            .collect();
        let c = Charts::from_minutes(None, ChartWindow::Day, now(), &rows);
        let out = render(&c);
        let f = figure_of(&out, "finished");
        assert_eq!(count(f, "<rect class=\"bar\""), 96);
        assert_eq!(texts(f, "y-title"), ["jobs per 15 min"]);
        assert_eq!(texts(f, "tick-x"), ["10-03 10:45", "22:45", "10-04 10:45"]);
        assert!(f.contains("class=\"tick tick-x from-edge\""), "{f}");
        assert!(f.contains("class=\"tick tick-x to-edge\""), "{f}");
        assert_eq!(texts(f, "tick-y"), ["0", "50", "100"]);
        assert_eq!(
            texts(figure_of(&out, "retries"), "y-title"),
            ["retries per 15 min"]
        );
        assert!(f.contains(
            "Jobs finished, the last 24 hours (10-03 10:45 to 10-04 10:45 UTC): 4656 in total, at most 96 per 15 min."
        ));
    }

    #[test]
    fn an_empty_window_keeps_its_axes_and_says_so() {
        let c = Charts::from_minutes(None, ChartWindow::Hour, now(), &[]);
        let out = render(&c);
        assert_eq!(count(&out, "<svg"), 7);
        assert_eq!(count(&out, NOTHING), 6);
        assert_eq!(
            count(&out, "no retries in this window"),
            2,
            "note and title"
        );
        assert_eq!(count(&out, "<rect"), 0);
        assert_eq!(count(&out, "<polyline"), 0);
        assert_eq!(count(&out, "<circle"), 0);
        assert_eq!(count(&out, "<ul class=\"legend\">"), 0);
        assert_eq!(count(&out, "<line class=\"axis\""), 14);
        for id in ["finished", "dead", "retries", "depth", "lateness", "wait"] {
            assert_eq!(
                texts(figure_of(&out, id), "tick-y"),
                ["0", "1", "2"],
                "{id}"
            );
        }
        assert_eq!(
            texts(figure_of(&out, "oldest"), "tick-y"),
            ["0", "5ms", "10ms"]
        );
        assert_eq!(
            texts(figure_of(&out, "depth"), "tick-x"),
            ["09:31", "10:01", "10:31"]
        );
    }

    #[test]
    fn a_lone_sample_is_a_dot_and_skipped_rows_are_noted() {
        let from = TEN_THIRTY + 1 - 60;
        let rows = [
            row(from + 1, "depth", 4),
            row(from + 3, "depth", 5),
            row(from + 4, "depth", 6),
            row(from, "colour.blue", 1),
        ];
        let c = Charts::from_minutes(None, ChartWindow::Hour, now(), &rows);
        let out = render(&c);
        let depth = figure_of(&out, "depth");
        assert_eq!(count(depth, "<circle class=\"line depth dot\""), 1);
        assert_eq!(count(depth, "<polyline"), 1);
        assert!(out.contains("1 stored rows of a series this version does not know"));
    }

    #[test]
    fn retry_class_names_are_escaped() {
        let mut c = Charts::from_minutes(
            Some(Name::parse("queue", "q").unwrap()),
            ChartWindow::Hour,
            now(),
            &[],
        );
        let mut retries = BTreeMap::new();
        let mut v = vec![0; c.slots()];
        v[3] = 2;
        retries.insert("<script>alert(1)</script>".to_owned(), v);
        c.retries = retries;
        let out = render(&c);
        assert!(!out.contains("<script"), "{out}");
        assert!(out.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert_eq!(count(figure_of(&out, "retries"), "<polyline"), 1);
    }

    #[test]
    fn hand_built_series_of_odd_lengths_do_not_draw_outside_the_plot() {
        let mut c = Charts::from_minutes(None, ChartWindow::Hour, now(), &[]);
        // slots() is the length of `finished`: a longer `dead` is cut.
        c.dead = vec![1; 70];
        c.depth = vec![Some(1); 3];
        c.lateness = vec![1; HISTOGRAM_BUCKETS];
        let out = render(&c);
        assert_eq!(count(figure_of(&out, "dead"), "<rect"), 60);
        assert_eq!(
            count(figure_of(&out, "lateness"), "<rect"),
            HISTOGRAM_BUCKETS
        );
    }

    #[test]
    fn nice_maxima_leave_whole_middle_ticks() {
        for (v, max) in [
            (0, 2),
            (1, 2),
            (2, 2),
            (3, 10),
            (5, 10),
            (10, 10),
            (11, 20),
            (21, 50),
            (50, 50),
            (51, 100),
            (120, 200),
            (999, 1_000),
            (1_001, 2_000),
            (4_999, 5_000),
            (7_000_000, 10_000_000),
            (10_000_000_000_000_000_000, 10_000_000_000_000_000_000),
            (u64::MAX, u64::MAX),
        ] {
            assert_eq!(nice_max(v), max, "{v}");
        }
        for (ms, max) in [
            (0, 10),
            (7, 10),
            (150, 200),
            (1_001, 2_000),
            (25_000, 30_000),
            (45_000, 60_000),
            (4_000_000, 7_200_000),
            (86_400_000, 86_400_000),
            (90_000_000, 50 * HOUR_MS),
        ] {
            assert_eq!(nice_duration_max(ms), max, "{ms}");
        }
    }

    #[test]
    fn numbers_and_durations_are_compact() {
        for (v, text) in [
            (0, "0"),
            (999, "999"),
            (1_000, "1k"),
            (1_200, "1.2k"),
            (2_500, "2.5k"),
            (12_345, "12.3k"),
            (250_000, "250k"),
            (999_400, "999k"),
            (999_960, "1M"),
            (3_000_000, "3M"),
            (1_500_000_000, "1.5G"),
            (u64::MAX, "18.4E"),
        ] {
            assert_eq!(compact(v), text, "{v}");
        }
        for (ms, text) in [
            (0, "0ms"),
            (5, "5ms"),
            (999, "999ms"),
            (1_000, "1s"),
            (2_500, "2.5s"),
            (30_000, "30s"),
            (59_999, "1min"),
            (90_000, "1.5min"),
            (150_000, "2.5min"),
            (3_600_000, "1h"),
            (5_400_000, "1.5h"),
            (180_000_000, "50h"),
        ] {
            assert_eq!(duration_label(ms), text, "{ms}");
        }
        let labels: Vec<String> = (0..HISTOGRAM_BUCKETS).map(bucket_label).collect();
        assert_eq!(labels.first().map(String::as_str), Some("≤1ms"));
        assert_eq!(labels[9], "≤2.5s");
        assert_eq!(labels.last().map(String::as_str), Some(">300s"));
        assert_eq!(T(-865).to_string(), "-86.5");
        assert_eq!(T(1_560).to_string(), "156");
    }

    #[test]
    fn window_links_mark_the_current_window() {
        let out = window_links("/dashboard/queues/q", ChartWindow::Day).into_string();
        assert_well_formed(&out);
        assert!(out.contains("<a href=\"/dashboard/queues/q?window=hour\">Last hour</a>"));
        assert!(out.contains(
            "<a class=\"active\" href=\"/dashboard/queues/q?window=day\" aria-current=\"page\">Last day</a>"
        ));
        assert_eq!(count(&out, "aria-current"), 1);
        let out = window_links("/dashboard/queues?state=ready", ChartWindow::Hour).into_string();
        assert!(out.contains(
            "href=\"/dashboard/queues?state=ready&amp;window=hour\" aria-current=\"page\""
        ));
    }
}
