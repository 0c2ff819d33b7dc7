//! Statistics helpers: percentiles, latency summaries, rates and the
//! process's peak resident set size.

use std::time::Duration;

use serde::Serialize;

/// The `p`-th percentile (0–100) of `sorted` by the nearest-rank method:
/// the smallest sample such that at least `p`% of the samples are at or
/// below it. `None` for no samples; `p` is clamped into 0–100 (a NaN `p`
/// counts as 0).
pub fn percentile(sorted: &[Duration], p: f64) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let p = if p.is_nan() { 0.0 } else { p.clamp(0.0, 100.0) };
    let n = sorted.len();
    // Nearest rank: ceil(p/100 · n), at least 1.
    let rank = ((p / 100.0) * n as f64).ceil() as usize;
    let index = rank.clamp(1, n) - 1;
    sorted.get(index).copied()
}

/// Milliseconds of a duration, as a float.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// Count per second; 0 when no time passed.
pub fn per_second(count: u64, elapsed: Duration) -> f64 {
    let secs = elapsed.as_secs_f64();
    if secs > 0.0 { count as f64 / secs } else { 0.0 }
}

/// A ratio `a / b`; 0 when `b` is 0.
pub fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

/// A latency distribution in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50_ms: f64,
    /// 95th percentile.
    pub p95_ms: f64,
    /// 99th percentile.
    pub p99_ms: f64,
    /// Largest sample.
    pub max_ms: f64,
    /// Arithmetic mean.
    pub mean_ms: f64,
}

impl Summary {
    /// Summarises `samples` (in any order); all zero when there are none.
    pub fn of(samples: &[Duration]) -> Summary {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        let at = |p| percentile(&sorted, p).map_or(0.0, ms);
        let total: Duration = sorted.iter().sum();
        Summary {
            count: sorted.len(),
            p50_ms: at(50.0),
            p95_ms: at(95.0),
            p99_ms: at(99.0),
            max_ms: sorted.last().copied().map_or(0.0, ms),
            mean_ms: if sorted.is_empty() {
                0.0
            } else {
                ms(total) / sorted.len() as f64
            },
        }
    }
}

/// The peak resident set size of this process so far, in MiB (`VmHWM` in
/// `/proc/self/status`); `None` where that file is missing or unreadable
/// (not Linux).
pub fn peak_rss_mb() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    vm_hwm_mb(&status)
}

/// Reads `VmHWM` (kB) out of the text of `/proc/self/status`, in MiB.
pub(crate) fn vm_hwm_mb(status: &str) -> Option<f64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: f64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// A number with thousands separators, for people: `12,345`.
pub fn thousands(n: f64) -> String {
    if !n.is_finite() {
        return n.to_string();
    }
    let rounded = n.round();
    let digits = format!("{}", rounded.abs() as u128);
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if rounded < 0.0 {
        out.insert(0, '-');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn millis(v: &[u64]) -> Vec<Duration> {
        v.iter().map(|&m| Duration::from_millis(m)).collect()
    }

    #[test]
    fn percentiles_use_the_nearest_rank() {
        let s = millis(&(1..=100).collect::<Vec<_>>());
        assert_eq!(percentile(&s, 50.0), Some(Duration::from_millis(50)));
        assert_eq!(percentile(&s, 95.0), Some(Duration::from_millis(95)));
        assert_eq!(percentile(&s, 99.0), Some(Duration::from_millis(99)));
        assert_eq!(percentile(&s, 100.0), Some(Duration::from_millis(100)));
        assert_eq!(percentile(&s, 0.0), Some(Duration::from_millis(1)));
        // 10 samples: p50 is the 5th, p95 and p99 the 10th.
        let s = millis(&[1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
        assert_eq!(percentile(&s, 50.0), Some(Duration::from_millis(5)));
        assert_eq!(percentile(&s, 95.0), Some(Duration::from_millis(10)));
        assert_eq!(percentile(&s, 99.0), Some(Duration::from_millis(10)));
    }

    #[test]
    fn percentiles_of_edge_cases_do_not_panic() {
        assert_eq!(percentile(&[], 50.0), None);
        let one = millis(&[7]);
        for p in [0.0, 50.0, 99.0, 100.0, -5.0, 250.0, f64::NAN] {
            assert_eq!(percentile(&one, p), Some(Duration::from_millis(7)));
        }
    }

    #[test]
    fn a_summary_sorts_its_samples_first() {
        let s = Summary::of(&millis(&[30, 10, 20, 40]));
        assert_eq!(s.count, 4);
        assert_eq!(s.p50_ms, 20.0);
        assert_eq!(s.p99_ms, 40.0);
        assert_eq!(s.max_ms, 40.0);
        assert_eq!(s.mean_ms, 25.0);
        assert_eq!(Summary::of(&[]), Summary::default());
    }

    #[test]
    fn rates_and_ratios_of_nothing_are_zero() {
        assert_eq!(per_second(10, Duration::ZERO), 0.0);
        assert_eq!(per_second(10, Duration::from_millis(500)), 20.0);
        assert_eq!(ratio(3.0, 0.0), 0.0);
        assert_eq!(ratio(3.0, 2.0), 1.5);
    }

    #[test]
    fn vm_hwm_is_read_in_mebibytes() {
        let status = "Name:\terrand\nVmPeak:\t  300000 kB\nVmHWM:\t   20480 kB\nVmRSS:\t 1024 kB\n";
        assert_eq!(vm_hwm_mb(status), Some(20.0));
        assert_eq!(vm_hwm_mb("Name:\terrand\n"), None);
        assert_eq!(vm_hwm_mb("VmHWM:\tlots kB\n"), None);
        if cfg!(target_os = "linux") {
            assert!(peak_rss_mb().is_some_and(|mb| mb > 0.0));
        }
    }

    #[test]
    fn thousands_are_separated() {
        assert_eq!(thousands(0.0), "0");
        assert_eq!(thousands(999.4), "999");
        assert_eq!(thousands(1000.0), "1,000");
        assert_eq!(thousands(1_234_567.0), "1,234,567");
        assert_eq!(thousands(-12_345.0), "-12,345");
    }
}
