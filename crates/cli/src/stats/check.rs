//! `errand stats --check`: the thresholds (flags, then a queue's table in
//! the TOML file, then its top level), the lateness the check reads, and
//! the judgement of each queue against them.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use clap::Args;
use errand::{Admin, Error, JobFilter, JobId, JobState, Name, QueueStats, Stats, Timestamp};
use serde::{Deserialize, Deserializer, Serialize};

use crate::exit::Failure;
use crate::output::age;

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
    /// With --check: the latest a job with a business deadline may finish
    /// after it (the largest lateness in the window), and the longest an
    /// unfinished one may be past it.
    #[arg(long, requires = "check", value_parser = crate::parse_duration)]
    #[serde(default, deserialize_with = "duration")]
    max_lateness: Option<Duration>,
}

impl Limits {
    /// Each threshold from `self`, else from `other`.
    pub(super) fn or(&self, other: &Limits) -> Limits {
        Limits {
            max_ready: self.max_ready.or(other.max_ready),
            max_oldest_due: self.max_oldest_due.or(other.max_oldest_due),
            max_dead: self.max_dead.or(other.max_dead),
            max_dead_letters: self.max_dead_letters.or(other.max_dead_letters),
            max_retries: self.max_retries.or(other.max_retries),
            max_expired_leases: self.max_expired_leases.or(other.max_expired_leases),
            max_lateness: self.max_lateness.or(other.max_lateness),
        }
    }

    /// The largest count threshold set (due, dead, dead letters, retries,
    /// expired leases).
    pub(super) fn largest_count(&self) -> Option<u64> {
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

    pub(super) fn count(&self) -> usize {
        [
            self.max_ready,
            self.max_oldest_due.map(|_| 0),
            self.max_dead,
            self.max_dead_letters,
            self.max_retries,
            self.max_expired_leases,
            self.max_lateness.map(|_| 0),
        ]
        .iter()
        .flatten()
        .count()
    }
}

/// The thresholds file (`--config`).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ConfigFile {
    /// The window of retries and dead letters (`--window` overrides it).
    #[serde(default, deserialize_with = "duration")]
    pub(super) window: Option<Duration>,
    #[serde(default, deserialize_with = "duration")]
    pub(super) max_since_worker_cycle: Option<Duration>,
    pub(super) max_ready: Option<u64>,
    #[serde(default, deserialize_with = "duration")]
    pub(super) max_oldest_due: Option<Duration>,
    pub(super) max_dead: Option<u64>,
    pub(super) max_dead_letters: Option<u64>,
    pub(super) max_retries: Option<u64>,
    pub(super) max_expired_leases: Option<u64>,
    #[serde(default, deserialize_with = "duration")]
    pub(super) max_lateness: Option<Duration>,
    /// Per queue: replaces the top level's thresholds for that queue.
    #[serde(default)]
    pub(super) queues: BTreeMap<String, Limits>,
}

impl ConfigFile {
    pub(super) fn read(path: &std::path::Path) -> Result<ConfigFile, Failure> {
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

    pub(super) fn top(&self) -> Limits {
        Limits {
            max_ready: self.max_ready,
            max_oldest_due: self.max_oldest_due,
            max_dead: self.max_dead,
            max_dead_letters: self.max_dead_letters,
            max_retries: self.max_retries,
            max_expired_leases: self.max_expired_leases,
            max_lateness: self.max_lateness,
        }
    }
}

pub(super) fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    let text = String::deserialize(d)?;
    errand::parse_duration(&text)
        .map(Some)
        .map_err(|e| serde::de::Error::custom(message(e)))
}

pub(super) fn message(e: Error) -> String {
    match e {
        Error::Invalid(m) => m,
        other => other.to_string(),
    }
}

/// Every threshold in force: flags over the file.
#[derive(Debug)]
pub(super) struct Thresholds {
    pub(super) flags: Limits,
    pub(super) top: Limits,
    pub(super) queues: BTreeMap<String, Limits>,
    pub(super) max_since_worker_cycle: Option<Duration>,
}

impl Thresholds {
    /// The thresholds for one queue: a flag, else the queue's table, else
    /// the file's top level.
    pub(super) fn for_queue(&self, queue: &str) -> Limits {
        let file = match self.queues.get(queue) {
            Some(q) => q.or(&self.top),
            None => self.top.clone(),
        };
        self.flags.or(&file)
    }

    /// Whether any queue has a lateness threshold (lateness is read only
    /// then: it lists jobs).
    pub(super) fn wants_lateness(&self) -> bool {
        [&self.flags, &self.top]
            .into_iter()
            .chain(self.queues.values())
            .any(|l| l.max_lateness.is_some())
    }

    pub(super) fn is_empty(&self) -> bool {
        self.flags.count() == 0
            && self.top.count() == 0
            && self.queues.values().all(|q| q.count() == 0)
            && self.max_since_worker_cycle.is_none()
    }
}

/// One queue's lateness against business deadlines: of the jobs with a
/// deadline, those that finished (`done`) in the window, and those not
/// finished yet (`ready` or `running`) whose deadline has passed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub(super) struct QueueLateness {
    /// Jobs with a deadline that finished in the window.
    pub(super) finished: u64,
    /// The largest `finished_at - deadline` among them (zero when on
    /// time), in milliseconds.
    pub(super) max_finished_ms: Option<u64>,
    /// Unfinished jobs past their deadline now.
    pub(super) overdue: u64,
    /// How far past its deadline the oldest of them is, in milliseconds.
    pub(super) max_overdue_ms: Option<u64>,
}

/// Lateness by queue, and whether a listing stopped at the cap (the
/// figures then cover the oldest jobs of that state only).
#[derive(Debug, Default, Serialize)]
pub(super) struct Lateness {
    pub(super) queues: BTreeMap<String, QueueLateness>,
    pub(super) truncated: Vec<String>,
}

/// Lists up to `cap` jobs of `filter`, page by page.
pub(super) async fn list_capped(
    admin: &Admin,
    mut filter: JobFilter,
    cap: u32,
) -> Result<(Vec<errand::Job>, bool), Error> {
    let mut jobs = Vec::new();
    loop {
        let left = cap.saturating_sub(u32::try_from(jobs.len()).unwrap_or(u32::MAX));
        if left == 0 {
            return Ok((jobs, true));
        }
        filter.limit = Some(left.min(10_000));
        let page = admin.list(&filter).await?;
        let full = page.len() == filter.effective_limit() as usize;
        let last: Option<JobId> = page.last().map(|j| j.id.clone());
        jobs.extend(page);
        match last {
            Some(id) if full => filter.after = Some(id),
            _ => return Ok((jobs, false)),
        }
    }
}

/// Reads the lateness of every queue: the `done` jobs changed in the
/// window, and every `ready` and `running` job (each state up to `cap`).
pub(super) async fn read_lateness(
    admin: &Admin,
    at: Timestamp,
    window: Duration,
    cap: u32,
) -> Result<Lateness, Error> {
    let mut out = Lateness::default();
    let since = at.minus(window);
    let done = JobFilter {
        state: Some(JobState::Done),
        updated_since: Some(since),
        ..JobFilter::default()
    };
    let (jobs, cut) = list_capped(admin, done, cap).await?;
    if cut {
        out.truncated.push("done".to_owned());
    }
    for j in &jobs {
        let (Some(deadline), Some(finished)) = (j.deadline, j.finished_at) else {
            continue;
        };
        if finished < since {
            continue;
        }
        let q = out.queues.entry(j.queue.to_string()).or_default();
        q.finished += 1;
        q.max_finished_ms = q.max_finished_ms.max(Some(ms(finished.since(deadline))));
    }
    for state in [JobState::Ready, JobState::Running] {
        let filter = JobFilter {
            state: Some(state),
            ..JobFilter::default()
        };
        let (jobs, cut) = list_capped(admin, filter, cap).await?;
        if cut {
            out.truncated.push(state.as_str().to_owned());
        }
        for j in &jobs {
            let Some(deadline) = j.deadline.filter(|d| *d < at) else {
                continue;
            };
            let q = out.queues.entry(j.queue.to_string()).or_default();
            q.overdue += 1;
            q.max_overdue_ms = q.max_overdue_ms.max(Some(ms(at.since(deadline))));
        }
    }
    Ok(out)
}

/// One crossed threshold.
#[derive(Debug, Serialize)]
pub(super) struct Crossed {
    /// The queue, or none for the workers' threshold.
    pub(super) queue: Option<Name>,
    /// The threshold's name, as in the file (`max_dead`).
    pub(super) threshold: &'static str,
    /// The signal: a count, or milliseconds for ages (none: no worker
    /// ever reported).
    pub(super) value: Option<u64>,
    /// The threshold's value: a count, or milliseconds for ages.
    pub(super) max: u64,
    /// The line printed for it.
    pub(super) message: String,
}

/// What `stats --check --json` prints.
#[derive(Debug, Serialize)]
pub(super) struct CheckReport<'a> {
    /// No threshold is crossed.
    pub(super) ok: bool,
    /// How many (queue, threshold) pairs were compared.
    pub(super) checked: usize,
    pub(super) crossed: &'a [Crossed],
    pub(super) stats: &'a Stats,
    /// Lateness by queue, when a lateness threshold was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) lateness: Option<&'a Lateness>,
}

pub(super) fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What `--check` compared: how many thresholds, over which queues, and
/// whether the workers' one.
#[derive(Debug, Default)]
pub(super) struct Checked {
    pub(super) thresholds: usize,
    pub(super) queues: BTreeSet<String>,
    pub(super) workers: bool,
}

impl Checked {
    /// The line printed when no threshold is crossed.
    pub(super) fn ok_line(&self) -> String {
        let mut over = Vec::new();
        if !self.queues.is_empty() {
            over.push(format!("{} queue(s)", self.queues.len()));
        }
        if self.workers {
            over.push("the workers' claim cycles".to_owned());
        }
        if over.is_empty() {
            return format!(
                "ok: {} threshold check(s): no queue has waiting, running or dead jobs, recent failures or a pause",
                self.thresholds
            );
        }
        format!(
            "ok: {} threshold check(s) over {}, none crossed",
            self.thresholds,
            over.join(" and ")
        )
    }
}

pub(super) fn evaluate(
    stats: &Stats,
    t: &Thresholds,
    lateness: Option<&Lateness>,
) -> (Vec<Crossed>, Checked) {
    let mut crossed = Vec::new();
    let mut checked = 0;
    let mut queues = BTreeSet::new();
    if let Some(lateness) = lateness {
        checked += evaluate_lateness(stats, t, lateness, &mut crossed, &mut queues);
    }
    for q in &stats.queues {
        let compared = evaluate_queue(q, t, &mut crossed);
        if compared > 0 {
            checked += compared;
            queues.insert(q.queue.as_str().to_owned());
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
    let checked = Checked {
        thresholds: checked,
        queues,
        workers: t.max_since_worker_cycle.is_some(),
    };
    (crossed, checked)
}

/// Compares one queue's counts with its thresholds; how many it compared.
pub(super) fn evaluate_queue(q: &QueueStats, t: &Thresholds, crossed: &mut Vec<Crossed>) -> usize {
    let mut checked = 0;
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
    checked
}

/// Compares each queue's lateness (every queue with waiting, running or
/// dead jobs, or with a job that has a deadline) with its `max_lateness`.
pub(super) fn evaluate_lateness(
    stats: &Stats,
    t: &Thresholds,
    lateness: &Lateness,
    crossed: &mut Vec<Crossed>,
    compared: &mut BTreeSet<String>,
) -> usize {
    let mut queues: BTreeMap<&str, Option<&QueueLateness>> = stats
        .queues
        .iter()
        .map(|q| (q.queue.as_str(), None))
        .collect();
    for (name, l) in &lateness.queues {
        queues.insert(name.as_str(), Some(l));
    }
    let cut = if lateness.truncated.is_empty() {
        String::new()
    } else {
        format!(
            " (read from the oldest {} {} jobs only; raise --cap to read further)",
            stats.cap,
            lateness.truncated.join("/")
        )
    };
    let mut checked = 0;
    for (name, l) in queues {
        let Some(max) = t.for_queue(name).max_lateness else {
            continue;
        };
        checked += 1;
        compared.insert(name.to_owned());
        let Some(l) = l else { continue };
        let Ok(queue) = Name::parse("queue", name) else {
            continue;
        };
        let shown_max = humantime::format_duration(max);
        if let Some(late) = l.max_finished_ms
            && late > ms(max)
        {
            crossed.push(Crossed {
                queue: Some(queue.clone()),
                threshold: "max_lateness",
                value: Some(late),
                max: ms(max),
                message: format!(
                    "queue {name}: a job finished {} after its deadline in the window (the latest of {} with a deadline), above max_lateness = {shown_max}{cut}",
                    age(late),
                    l.finished
                ),
            });
        }
        if let Some(late) = l.max_overdue_ms
            && late > ms(max)
        {
            crossed.push(Crossed {
                queue: Some(queue),
                threshold: "max_lateness",
                value: Some(late),
                max: ms(max),
                message: format!(
                    "queue {name}: {} unfinished job(s) are past their deadline, the oldest by {}, above max_lateness = {shown_max}{cut}",
                    l.overdue,
                    age(late)
                ),
            });
        }
    }
    checked
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
        let file: ConfigFile =
            toml::from_str("max_lateness = \"2m\"\n[queues.mail]\nmax_lateness = \"10s\"\n")
                .expect("valid");
        assert_eq!(file.top().max_lateness, Some(Duration::from_secs(120)));
        assert_eq!(
            file.queues["mail"].max_lateness,
            Some(Duration::from_secs(10))
        );
        assert!(toml::from_str::<ConfigFile>("max_lateness = 5\n").is_err());
    }
}
