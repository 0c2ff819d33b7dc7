//! Lateness percentiles, outcome counts, and their Prometheus exposition.
//!
//! Lateness is `expired_at - hold_until` of every expired hold, recorded in
//! the transaction that expired it. Percentiles use the nearest-rank method
//! over every recorded value (exact, no sketch: the table is small and
//! `stats` is an operator command).

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use serde::Serialize;

use crate::app::{Figures, RecentLateness, Status};
use crate::error::{Error, Result};

/// The outcomes `stats` always reports, even at zero.
pub const OUTCOMES: [&str; 3] = ["expired", "already-done", "changed"];

/// The lateness histogram's bucket bounds, in seconds.
pub const LATENESS_BUCKETS: [f64; 16] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0,
];

/// Lateness percentiles in milliseconds (`None` with no expiry yet).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Lateness {
    /// How many expiries were measured.
    pub count: u64,
    /// Median.
    pub p50: Option<i64>,
    /// 95th percentile.
    pub p95: Option<i64>,
    /// 99th percentile.
    pub p99: Option<i64>,
    /// Largest.
    pub max: Option<i64>,
}

/// What `stats` reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Stats {
    /// Lateness of expired holds, in milliseconds.
    pub lateness_ms: Lateness,
    /// Handler outcomes: `expired`, `already-done`, `changed`.
    pub outcomes: BTreeMap<String, u64>,
    /// Reservations by status.
    pub reservations: BTreeMap<String, u64>,
    /// Expiry jobs waiting in `dead` for an operator.
    pub dead_jobs: u64,
}

/// The nearest-rank percentile `p` (0–100) of ascending `sorted` values.
pub fn percentile(sorted: &[i64], p: f64) -> Option<i64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len();
    // rank = ceil(p/100 · n), at least 1.
    let rank = ((p / 100.0) * n as f64).ceil().max(1.0) as usize;
    sorted.get(rank.min(n) - 1).copied()
}

impl Stats {
    /// Computes the report from the raw figures.
    pub fn from_figures(f: &Figures) -> Self {
        let mut sorted = f.lateness_ms.clone();
        sorted.sort_unstable();
        let lateness_ms = Lateness {
            count: sorted.len() as u64,
            p50: percentile(&sorted, 50.0),
            p95: percentile(&sorted, 95.0),
            p99: percentile(&sorted, 99.0),
            max: sorted.last().copied(),
        };
        let mut outcomes: BTreeMap<String, u64> =
            OUTCOMES.iter().map(|o| ((*o).to_owned(), 0)).collect();
        for (o, n) in &f.outcomes {
            *outcomes.entry(o.clone()).or_insert(0) += n;
        }
        let mut reservations: BTreeMap<String, u64> = Status::ALL
            .iter()
            .map(|s| (s.as_str().to_owned(), 0))
            .collect();
        for (s, n) in &f.statuses {
            *reservations.entry(s.as_str().to_owned()).or_insert(0) += n;
        }
        Stats {
            lateness_ms,
            outcomes,
            reservations,
            dead_jobs: f.dead_jobs,
        }
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |v: Option<i64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v}ms"));
        let l = &self.lateness_ms;
        writeln!(
            f,
            "lateness over {} expiries: p50={} p95={} p99={} max={}",
            l.count,
            ms(l.p50),
            ms(l.p95),
            ms(l.p99),
            ms(l.max)
        )?;
        let outcomes: Vec<String> = self
            .outcomes
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        writeln!(f, "expiry outcomes: {}", outcomes.join(" "))?;
        let statuses: Vec<String> = Status::ALL
            .iter()
            .map(|s| {
                let n = self.reservations.get(s.as_str()).copied().unwrap_or(0);
                format!("{s}={n}")
            })
            .collect();
        writeln!(f, "reservations: {}", statuses.join(" "))?;
        write!(f, "dead expiry jobs: {}", self.dead_jobs)
    }
}

/// The verdict of `stats --check --max-lateness`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LatenessCheck {
    /// No threshold is crossed.
    pub ok: bool,
    /// The threshold, in milliseconds.
    pub max_lateness_ms: u64,
    /// One line per crossing.
    pub crossed: Vec<String>,
    /// What was compared.
    pub lateness: RecentLateness,
}

fn human_ms(ms: i64) -> String {
    humantime::format_duration(Duration::from_millis(u64::try_from(ms).unwrap_or(0))).to_string()
}

/// Compares the recent lateness with `max`. Crossed (strictly above) when
/// a hold expired in the window more than `max` after its deadline, or when
/// a hold still held is more than `max` past its deadline (no worker has
/// expired it: the alert also fires while the expiry is stuck, not only
/// once it finally happens).
pub fn check_lateness(l: &RecentLateness, max: Duration) -> LatenessCheck {
    let max_ms = i64::try_from(max.as_millis()).unwrap_or(i64::MAX);
    let window = humantime::format_duration(l.window);
    let shown_max = humantime::format_duration(max);
    let mut crossed = Vec::new();
    if let Some(worst) = l.max_expired_ms
        && worst > max_ms
    {
        crossed.push(format!(
            "lateness: a hold expired {} after its deadline in the last {window} (the latest of {} expiries), above --max-lateness {shown_max}",
            human_ms(worst),
            l.expired
        ));
    }
    if let Some(worst) = l.max_overdue_ms
        && worst > max_ms
    {
        crossed.push(format!(
            "lateness: {} hold(s) are past their deadline and not expired, the oldest by {}, above --max-lateness {shown_max} (is an expiry worker running?)",
            l.overdue,
            human_ms(worst)
        ));
    }
    LatenessCheck {
        ok: crossed.is_empty(),
        max_lateness_ms: u64::try_from(max.as_millis()).unwrap_or(u64::MAX),
        crossed,
        lateness: l.clone(),
    }
}

impl fmt::Display for LatenessCheck {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.ok {
            let lines: Vec<String> = self
                .crossed
                .iter()
                .map(|c| format!("CROSSED {c}"))
                .collect();
            return f.write_str(&lines.join("\n"));
        }
        let l = &self.lateness;
        let expired = l.max_expired_ms.map_or_else(
            || "none".to_owned(),
            |ms| format!("the latest {} after its deadline", human_ms(ms)),
        );
        let overdue = l.max_overdue_ms.map_or_else(
            || "none".to_owned(),
            |ms| format!("the oldest by {}", human_ms(ms)),
        );
        write!(
            f,
            "ok: {} expiries in the last {} ({expired}); {} hold(s) past their deadline ({overdue}); none above --max-lateness {}",
            l.expired,
            humantime::format_duration(l.window),
            l.overdue,
            humantime::format_duration(Duration::from_millis(self.max_lateness_ms))
        )
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabel {
    outcome: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabel {
    status: String,
}

/// The figures as a Prometheus (OpenMetrics) text exposition, produced by
/// the `prometheus-client` encoder: a lateness histogram in seconds, the
/// outcome counters and the reservations by status.
pub fn prometheus(f: &Figures) -> Result<String> {
    let mut registry = Registry::with_prefix("reservations");
    let lateness = Histogram::new(LATENESS_BUCKETS);
    for ms in &f.lateness_ms {
        lateness.observe(*ms as f64 / 1000.0);
    }
    registry.register_with_unit(
        "expiry_lateness",
        "Time from a hold's deadline to the moment it actually expired",
        Unit::Seconds,
        lateness,
    );
    let outcomes = Family::<OutcomeLabel, Counter>::default();
    for o in OUTCOMES {
        drop(outcomes.get_or_create(&OutcomeLabel {
            outcome: o.to_owned(),
        }));
    }
    for (o, n) in &f.outcomes {
        outcomes
            .get_or_create(&OutcomeLabel { outcome: o.clone() })
            .inc_by(*n);
    }
    registry.register(
        "expiry_outcomes",
        "Expiry handler runs by what they decided (expired, already-done, changed)",
        outcomes,
    );
    let statuses = Family::<StatusLabel, Gauge>::default();
    for s in Status::ALL {
        drop(statuses.get_or_create(&StatusLabel {
            status: s.as_str().to_owned(),
        }));
    }
    for (s, n) in &f.statuses {
        statuses
            .get_or_create(&StatusLabel {
                status: s.as_str().to_owned(),
            })
            .set(i64::try_from(*n).unwrap_or(i64::MAX));
    }
    registry.register("reservations", "Reservations by status", statuses);
    let dead = Gauge::<i64>::default();
    dead.set(i64::try_from(f.dead_jobs).unwrap_or(i64::MAX));
    registry.register(
        "dead_expiry_jobs",
        "Expiry jobs waiting in dead for an operator",
        dead,
    );
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry)
        .map_err(|e| Error::Invalid(format!("cannot encode the metrics: {e}")))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<i64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 95.0), Some(95));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&[7], 99.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
        assert_eq!(percentile(&[1, 2, 3, 4], 50.0), Some(2));
    }

    #[test]
    fn the_exposition_has_the_histogram_and_the_counters() {
        let f = Figures {
            lateness_ms: vec![3, 40, 1200],
            outcomes: vec![("expired".into(), 3), ("changed".into(), 1)],
            statuses: vec![(Status::Expired, 3), (Status::Paid, 1)],
            dead_jobs: 0,
        };
        let text = prometheus(&f).unwrap();
        assert!(
            text.contains("# TYPE reservations_expiry_lateness_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains("reservations_expiry_lateness_seconds_count 3"),
            "{text}"
        );
        assert!(
            text.contains("reservations_expiry_lateness_seconds_bucket{le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("reservations_expiry_lateness_seconds_bucket{le=\"0.05\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("reservations_expiry_outcomes_total{outcome=\"expired\"} 3"),
            "{text}"
        );
        assert!(
            text.contains("reservations_expiry_outcomes_total{outcome=\"already-done\"} 0"),
            "{text}"
        );
        assert!(
            text.contains("reservations_reservations{status=\"paid\"} 1"),
            "{text}"
        );
    }
}
