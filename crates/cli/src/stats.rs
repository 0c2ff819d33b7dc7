//! `errand stats`: the operator signals per queue, and `--check`, which
//! compares them with thresholds (flags and/or a TOML file) and exits
//! [`exit::THRESHOLD`] when one is crossed, so any scheduler can alert.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use errand::{Counts, Error, Name, Stats, StatsRequest, Store};
use serde::{Deserialize, Deserializer, Serialize};

use crate::exit::{self, Failure};
use crate::output::{self, age, outln};

/// The default window of retries and dead letters.
const DEFAULT_WINDOW: Duration = Duration::from_secs(15 * 60);

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Count retries and dead letters over this recent window (default
    /// 15m, or the config file's `window`).
    #[arg(long, value_parser = crate::parse_duration)]
    window: Option<Duration>,
    /// Count at most this many jobs per queue and state; a count past it
    /// is a lower bound, shown as ≥N.
    #[arg(long, default_value_t = 10_000,
          value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    cap: u32,
    /// Compare the signals with the thresholds given (flags and/or
    /// --config): print each crossed one and exit 6, or print `ok` and exit 0.
    #[arg(long)]
    check: bool,
    /// With --check: a TOML file of thresholds, overall and per queue
    /// (docs/cli.md); a flag overrides the file's value everywhere.
    #[arg(long, requires = "check")]
    config: Option<PathBuf>,
    #[command(flatten)]
    limits: Limits,
    /// With --check: the longest time since any worker completed a claim
    /// cycle; no worker ever reporting counts as crossed.
    #[arg(long, requires = "check", value_parser = crate::parse_duration)]
    max_since_worker_cycle: Option<Duration>,
    /// Print JSON (with --check: the verdict, the crossed thresholds and
    /// the signals).
    #[arg(long)]
    json: bool,
}

/// Per-queue thresholds: from flags (every queue), the config file's top
/// level (every queue) or one of its `[queues.NAME]` tables. A value is
/// crossed when the signal is strictly above it.
#[derive(Args, Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limits {
    /// With --check: the most due jobs waiting in a queue.
    #[arg(long, requires = "check")]
    max_ready: Option<u64>,
    /// With --check: the longest a queue's oldest due job may wait.
    #[arg(long, requires = "check", value_parser = crate::parse_duration)]
    #[serde(default, deserialize_with = "duration")]
    max_oldest_due: Option<Duration>,
    /// With --check: the most dead jobs in a queue.
    #[arg(long, requires = "check")]
    max_dead: Option<u64>,
    /// With --check: the most jobs of a queue that went dead in the window.
    #[arg(long, requires = "check")]
    max_dead_letters: Option<u64>,
    /// With --check: the most failed attempts of a queue scheduled for a
    /// retry in the window.
    #[arg(long, requires = "check")]
    max_retries: Option<u64>,
    /// With --check: the most running jobs of a queue whose lease expired.
    #[arg(long, requires = "check")]
    max_expired_leases: Option<u64>,
}

impl Limits {
    /// Each threshold from `self`, else from `other`.
    fn or(&self, other: &Limits) -> Limits {
        Limits {
            max_ready: self.max_ready.or(other.max_ready),
            max_oldest_due: self.max_oldest_due.or(other.max_oldest_due),
            max_dead: self.max_dead.or(other.max_dead),
            max_dead_letters: self.max_dead_letters.or(other.max_dead_letters),
            max_retries: self.max_retries.or(other.max_retries),
            max_expired_leases: self.max_expired_leases.or(other.max_expired_leases),
        }
    }

    /// The largest count threshold set (due, dead, dead letters, retries,
    /// expired leases).
    fn largest_count(&self) -> Option<u64> {
        [
            self.max_ready,
            self.max_dead,
            self.max_dead_letters,
            self.max_retries,
            self.max_expired_leases,
        ]
        .into_iter()
        .flatten()
        .max()
    }

    fn count(&self) -> usize {
        [
            self.max_ready,
            self.max_oldest_due.map(|_| 0),
            self.max_dead,
            self.max_dead_letters,
            self.max_retries,
            self.max_expired_leases,
        ]
        .iter()
        .flatten()
        .count()
    }
}

/// The thresholds file (`--config`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigFile {
    /// The window of retries and dead letters (`--window` overrides it).
    #[serde(default, deserialize_with = "duration")]
    window: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    max_since_worker_cycle: Option<Duration>,
    max_ready: Option<u64>,
    #[serde(default, deserialize_with = "duration")]
    max_oldest_due: Option<Duration>,
    max_dead: Option<u64>,
    max_dead_letters: Option<u64>,
    max_retries: Option<u64>,
    max_expired_leases: Option<u64>,
    /// Per queue: replaces the top level's thresholds for that queue.
    #[serde(default)]
    queues: BTreeMap<String, Limits>,
}

impl ConfigFile {
    fn read(path: &std::path::Path) -> Result<ConfigFile, Failure> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Failure::Usage(format!(
                "cannot read the thresholds file {}: {e}",
                path.display()
            ))
        })?;
        let file: ConfigFile = toml::from_str(&text).map_err(|e| {
            Failure::Usage(format!(
                "the thresholds file {} is not valid ({}); see docs/cli.md for its keys",
                path.display(),
                e.to_string().trim_end()
            ))
        })?;
        for name in file.queues.keys() {
            Name::parse("queue", name.as_str()).map_err(|e| {
                Failure::Usage(format!(
                    "the thresholds file {}: [queues.{name}]: {e}",
                    path.display()
                ))
            })?;
        }
        Ok(file)
    }

    fn top(&self) -> Limits {
        Limits {
            max_ready: self.max_ready,
            max_oldest_due: self.max_oldest_due,
            max_dead: self.max_dead,
            max_dead_letters: self.max_dead_letters,
            max_retries: self.max_retries,
            max_expired_leases: self.max_expired_leases,
        }
    }
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    errand::parse_duration(&text)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(message(e)))
}

fn message(e: Error) -> String {
    match e {
        Error::Invalid(m) => m,
        other => other.to_string(),
    }
}

/// Every threshold in force: flags over the file.
#[derive(Debug)]
struct Thresholds {
    flags: Limits,
    top: Limits,
    queues: BTreeMap<String, Limits>,
    max_since_worker_cycle: Option<Duration>,
}

impl Thresholds {
    /// The thresholds for one queue: a flag, else the queue's table, else
    /// the file's top level.
    fn for_queue(&self, queue: &str) -> Limits {
        let file = match self.queues.get(queue) {
            Some(q) => q.or(&self.top),
            None => self.top.clone(),
        };
        self.flags.or(&file)
    }

    fn is_empty(&self) -> bool {
        self.flags.count() == 0
            && self.top.count() == 0
            && self.queues.values().all(|q| q.count() == 0)
            && self.max_since_worker_cycle.is_none()
    }
}

/// One crossed threshold.
#[derive(Debug, Serialize)]
struct Crossed {
    /// The queue, or none for the workers' threshold.
    queue: Option<Name>,
    /// The threshold's name, as in the file (`max_dead`).
    threshold: &'static str,
    /// The signal: a count, or milliseconds for ages (none: no worker
    /// ever reported).
    value: Option<u64>,
    /// The threshold's value: a count, or milliseconds for ages.
    max: u64,
    /// The line printed for it.
    message: String,
}

/// What `stats --check --json` prints.
#[derive(Debug, Serialize)]
struct CheckReport<'a> {
    /// No threshold is crossed.
    ok: bool,
    /// How many (queue, threshold) pairs were compared.
    checked: usize,
    crossed: &'a [Crossed],
    stats: &'a Stats,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn evaluate(stats: &Stats, t: &Thresholds) -> (Vec<Crossed>, usize) {
    let mut crossed = Vec::new();
    let mut checked = 0;
    for q in &stats.queues {
        let limits = t.for_queue(q.queue.as_str());
        let c = &q.counts;
        let counts: [(&'static str, &str, Option<u64>, u64); 5] = [
            ("max_ready", "due jobs waiting", limits.max_ready, c.ready),
            ("max_dead", "dead jobs", limits.max_dead, c.dead),
            (
                "max_dead_letters",
                "jobs gone dead in the window",
                limits.max_dead_letters,
                c.dead_letters.values().sum(),
            ),
            (
                "max_retries",
                "retries in the window",
                limits.max_retries,
                c.retries.values().sum(),
            ),
            (
                "max_expired_leases",
                "expired leases",
                limits.max_expired_leases,
                c.expired_leases,
            ),
        ];
        for (threshold, what, max, value) in counts {
            let Some(max) = max else { continue };
            checked += 1;
            if value > max {
                crossed.push(Crossed {
                    queue: Some(q.queue.clone()),
                    threshold,
                    value: Some(value),
                    max,
                    message: format!(
                        "queue {}: {what} = {value}, above {threshold} = {max}",
                        q.queue
                    ),
                });
            }
        }
        if let Some(max) = limits.max_oldest_due {
            checked += 1;
            if let Some(waited) = c.oldest_due_age_ms
                && waited > ms(max)
            {
                crossed.push(Crossed {
                    queue: Some(q.queue.clone()),
                    threshold: "max_oldest_due",
                    value: Some(waited),
                    max: ms(max),
                    message: format!(
                        "queue {}: the oldest due job has waited {}, above max_oldest_due = {}",
                        q.queue,
                        age(waited),
                        humantime::format_duration(max)
                    ),
                });
            }
        }
    }
    if let Some(max) = t.max_since_worker_cycle {
        checked += 1;
        let message = match stats.since_last_worker_cycle_ms {
            None => Some(format!(
                "workers: no worker has reported a claim cycle (max_since_worker_cycle = {})",
                humantime::format_duration(max)
            )),
            Some(since) if since > ms(max) => Some(format!(
                "workers: the last claim cycle was {} ago, above max_since_worker_cycle = {}",
                age(since),
                humantime::format_duration(max)
            )),
            Some(_) => None,
        };
        if let Some(message) = message {
            crossed.push(Crossed {
                queue: None,
                threshold: "max_since_worker_cycle",
                value: stats.since_last_worker_cycle_ms,
                max: ms(max),
                message,
            });
        }
    }
    (crossed, checked)
}

/// `errand stats`.
pub async fn run(store: &dyn Store, a: StatsArgs) -> Result<ExitCode, Failure> {
    let file = match &a.config {
        Some(path) => ConfigFile::read(path)?,
        None => ConfigFile::default(),
    };
    let thresholds = Thresholds {
        top: file.top(),
        flags: a.limits,
        max_since_worker_cycle: a.max_since_worker_cycle.or(file.max_since_worker_cycle),
        queues: file.queues,
    };
    if a.check && thresholds.is_empty() {
        return Err(Failure::Usage(
            "--check has no threshold to check: give --max-ready, --max-oldest-due, --max-dead, --max-dead-letters, --max-retries, --max-expired-leases or --max-since-worker-cycle, or --config FILE with some (docs/cli.md)".to_owned(),
        ));
    }
    // A count stops just past the cap: a threshold at or above it could
    // never be crossed, so it would pass whatever the queue holds.
    let largest = [&thresholds.flags, &thresholds.top]
        .into_iter()
        .chain(thresholds.queues.values())
        .filter_map(Limits::largest_count)
        .max();
    if let Some(max) = largest
        && max >= u64::from(a.cap)
    {
        return Err(Failure::Usage(format!(
            "a count threshold of {max} is not below --cap {}: counts stop just past the cap, so it could never be crossed; raise --cap above it (at most 1000000)",
            a.cap
        )));
    }
    let req = StatsRequest {
        window: a.window.or(file.window).unwrap_or(DEFAULT_WINDOW),
        cap: a.cap,
    };
    let stats = store.stats(&req).await?;
    if !a.check {
        if a.json {
            output::json(&stats)?;
        } else {
            print_stats(&stats);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let (crossed, checked) = evaluate(&stats, &thresholds);
    if a.json {
        output::json(&CheckReport {
            ok: crossed.is_empty(),
            checked,
            crossed: &crossed,
            stats: &stats,
        })?;
    } else if crossed.is_empty() {
        outln!(
            "ok: {checked} threshold check(s) over {} queue(s), none crossed",
            stats.queues.len()
        );
    } else {
        for c in &crossed {
            outln!("CROSSED {}", c.message);
        }
    }
    Ok(if crossed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(exit::THRESHOLD)
    })
}

fn by_class(m: &BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "-".to_owned();
    }
    m.iter()
        .map(|(class, n)| format!("{class}={n}"))
        .collect::<Vec<_>>()
        .join(" ")
}

fn print_stats(s: &Stats) {
    let window = humantime::format_duration(Duration::from_secs(s.window_secs));
    let n = |cut: &[String], state: &str, v: u64| {
        if cut.iter().any(|t| t == state) {
            format!("≥{v}")
        } else {
            v.to_string()
        }
    };
    let row = |name: &str, c: &Counts, paused: &str, cut: &[String]| {
        let n = |state: &str, v: u64| n(cut, state, v);
        vec![
            name.to_owned(),
            n("ready", c.ready),
            n("ready", c.scheduled),
            n("running", c.running),
            format!(
                "{}/{}",
                n("running", c.active_leases),
                n("running", c.expired_leases)
            ),
            n("dead", c.dead),
            c.oldest_due_age_ms.map_or_else(|| "-".to_owned(), age),
            by_class(&c.retries),
            by_class(&c.dead_letters),
            paused.to_owned(),
        ]
    };
    outln!(
        "at {} (retries and dead letters over the last {window})",
        s.at
    );
    if s.queues.is_empty() {
        outln!("no queues (no waiting, running or dead jobs, no recent failures, none paused)");
    } else {
        let mut rows: Vec<Vec<String>> = s
            .queues
            .iter()
            .map(|q| {
                row(
                    q.queue.as_str(),
                    &q.counts,
                    if q.paused { "paused" } else { "-" },
                    &q.truncated,
                )
            })
            .collect();
        if s.queues.len() > 1 {
            let paused = s.queues.iter().filter(|q| q.paused).count();
            rows.push(row(
                "(all)",
                &s.totals(),
                &format!("{paused} paused"),
                &s.truncated,
            ));
        }
        output::table(
            &[
                "QUEUE",
                "READY",
                "SCHEDULED",
                "RUNNING",
                "LEASES LIVE/EXPIRED",
                "DEAD",
                "OLDEST DUE",
                "RETRIES",
                "DEAD LETTERS",
                "PAUSED",
            ],
            &rows,
        );
    }
    if !s.truncated.is_empty() {
        outln!(
            "≥: counts of {} went past the cap of {} rows in some queue and are lower bounds there (raise --cap to count further)",
            s.truncated.join(", "),
            s.cap
        );
    }
    match (s.last_worker_cycle_at, s.since_last_worker_cycle_ms) {
        (Some(at), Some(since)) => outln!(
            "workers: {} reporting; last claim cycle {} ago ({at})",
            s.workers.len(),
            age(since)
        ),
        _ => outln!("workers: none has reported a claim cycle"),
    }
    if !s.workers.is_empty() {
        let rows: Vec<Vec<String>> = s
            .workers
            .iter()
            .map(|w| {
                let queues = if w.queues.is_empty() {
                    "(all)".to_owned()
                } else {
                    w.queues
                        .iter()
                        .map(Name::as_str)
                        .collect::<Vec<_>>()
                        .join(",")
                };
                vec![
                    w.id.clone(),
                    w.host.clone(),
                    w.pid.to_string(),
                    queues,
                    w.started_at.to_rfc3339(),
                    format!("{} ago", age(ms(s.at.since(w.last_cycle_at)))),
                ]
            })
            .collect();
        output::table(
            &["WORKER", "HOST", "PID", "QUEUES", "STARTED", "LAST CYCLE"],
            &rows,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(max_dead: Option<u64>, max_ready: Option<u64>) -> Limits {
        Limits {
            max_dead,
            max_ready,
            ..Limits::default()
        }
    }

    #[test]
    fn a_flag_wins_over_the_queue_table_which_wins_over_the_top_level() {
        let t = Thresholds {
            flags: limits(Some(5), None),
            top: limits(Some(1), Some(10)),
            queues: BTreeMap::from([("mail".to_owned(), limits(Some(0), Some(3)))]),
            max_since_worker_cycle: None,
        };
        let mail = t.for_queue("mail");
        assert_eq!((mail.max_dead, mail.max_ready), (Some(5), Some(3)));
        let other = t.for_queue("bulk");
        assert_eq!((other.max_dead, other.max_ready), (Some(5), Some(10)));
        assert!(!t.is_empty());
    }

    #[test]
    fn the_file_reads_durations_and_refuses_unknown_keys() {
        let file: ConfigFile = toml::from_str(
            "window = \"1h\"\nmax_dead = 0\n[queues.mail]\nmax_oldest_due = \"5m\"\n",
        )
        .expect("valid");
        assert_eq!(file.window, Some(Duration::from_secs(3600)));
        assert_eq!(
            file.queues["mail"].max_oldest_due,
            Some(Duration::from_secs(300))
        );
        assert!(toml::from_str::<ConfigFile>("max_deadd = 1\n").is_err());
        assert!(toml::from_str::<ConfigFile>("[queues.mail]\nmax_ready = -1\n").is_err());
        assert!(toml::from_str::<ConfigFile>("max_oldest_due = \"soon\"\n").is_err());
    }
}
