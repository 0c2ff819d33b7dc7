//! `errand stats`: the operator signals per queue, and `--check`, which
//! compares them with thresholds (flags and/or a TOML file) and exits
//! [`exit::THRESHOLD`] when one is crossed, so any scheduler can alert.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use errand::{
    Admin, Counts, Error, JobFilter, JobId, JobState, Name, QueueStats, Stats, StatsRequest,
    Timestamp, WorkerSeen,
};
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
    /// With --check: the latest a job with a business deadline may finish
    /// after it (the largest lateness in the window), and the longest an
    /// unfinished one may be past it.
    #[arg(long, requires = "check", value_parser = crate::parse_duration)]
    #[serde(default, deserialize_with = "duration")]
    max_lateness: Option<Duration>,
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
            max_lateness: self.max_lateness.or(other.max_lateness),
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
    #[serde(default, deserialize_with = "duration")]
    max_lateness: Option<Duration>,
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
            max_lateness: self.max_lateness,
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

    /// Whether any queue has a lateness threshold (lateness is read only
    /// then: it lists jobs).
    fn wants_lateness(&self) -> bool {
        [&self.flags, &self.top]
            .into_iter()
            .chain(self.queues.values())
            .any(|l| l.max_lateness.is_some())
    }

    fn is_empty(&self) -> bool {
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
struct QueueLateness {
    /// Jobs with a deadline that finished in the window.
    finished: u64,
    /// The largest `finished_at - deadline` among them (zero when on
    /// time), in milliseconds.
    max_finished_ms: Option<u64>,
    /// Unfinished jobs past their deadline now.
    overdue: u64,
    /// How far past its deadline the oldest of them is, in milliseconds.
    max_overdue_ms: Option<u64>,
}

/// Lateness by queue, and whether a listing stopped at the cap (the
/// figures then cover the oldest jobs of that state only).
#[derive(Debug, Default, Serialize)]
struct Lateness {
    queues: BTreeMap<String, QueueLateness>,
    truncated: Vec<String>,
}

/// Lists up to `cap` jobs of `filter`, page by page.
async fn list_capped(
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
async fn read_lateness(
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
    /// Lateness by queue, when a lateness threshold was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    lateness: Option<&'a Lateness>,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// What `--check` compared: how many thresholds, over which queues, and
/// whether the workers' one.
#[derive(Debug, Default)]
struct Checked {
    thresholds: usize,
    queues: BTreeSet<String>,
    workers: bool,
}

impl Checked {
    /// The line printed when no threshold is crossed.
    fn ok_line(&self) -> String {
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

fn evaluate(stats: &Stats, t: &Thresholds, lateness: Option<&Lateness>) -> (Vec<Crossed>, Checked) {
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
fn evaluate_queue(q: &QueueStats, t: &Thresholds, crossed: &mut Vec<Crossed>) -> usize {
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
fn evaluate_lateness(
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

/// `errand stats`.
pub async fn run(admin: &Admin, a: StatsArgs) -> Result<ExitCode, Failure> {
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
            "--check has no threshold to check: give --max-ready, --max-oldest-due, --max-dead, --max-dead-letters, --max-retries, --max-expired-leases, --max-lateness or --max-since-worker-cycle, or --config FILE with some (docs/cli.md)".to_owned(),
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
    let stats = admin.stats(&req).await?;
    if !a.check {
        if a.json {
            output::json(&stats)?;
        } else {
            print_stats(&stats);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let lateness = if thresholds.wants_lateness() {
        Some(read_lateness(admin, stats.at, req.window, a.cap).await?)
    } else {
        None
    };
    let (crossed, checked) = evaluate(&stats, &thresholds, lateness.as_ref());
    if a.json {
        output::json(&CheckReport {
            ok: crossed.is_empty(),
            checked: checked.thresholds,
            crossed: &crossed,
            stats: &stats,
            lateness: lateness.as_ref(),
        })?;
    } else if crossed.is_empty() {
        outln!("{}", checked.ok_line());
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

/// Prints the signals: a table of queues, the cap note, and the workers.
fn print_stats(s: &Stats) {
    let window = humantime::format_duration(Duration::from_secs(s.window_secs));
    outln!(
        "at {} (retries and dead letters over the last {window})",
        s.at
    );
    print_queues(s);
    if !s.truncated.is_empty() {
        outln!(
            "≥: counts of {} went past the cap of {} rows in some queue and are lower bounds there (raise --cap to count further)",
            s.truncated.join(", "),
            s.cap
        );
    }
    print_workers(s);
}

/// A count as shown: `≥N` when counting `state` stopped at the cap (is in `cut`).
fn count_cell(cut: &[String], state: &str, v: u64) -> String {
    if cut.iter().any(|t| t == state) {
        format!("≥{v}")
    } else {
        v.to_string()
    }
}

/// One row of the queue table: a queue's name, counts and paused cell.
fn queue_row(name: &str, c: &Counts, paused: &str, cut: &[String]) -> Vec<String> {
    let n = |state: &str, v: u64| count_cell(cut, state, v);
    vec![
        name.to_owned(),
        n("ready", c.ready),
        n("ready", c.scheduled),
        n("blocked", c.blocked),
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
}

/// Prints the table of queues (an `(all)` row when there are several), or that there are none.
fn print_queues(s: &Stats) {
    if s.queues.is_empty() {
        outln!("no queues (no waiting, running or dead jobs, no recent failures, none paused)");
        return;
    }
    let mut rows: Vec<Vec<String>> = s
        .queues
        .iter()
        .map(|q| {
            queue_row(
                q.queue.as_str(),
                &q.counts,
                if q.paused { "paused" } else { "-" },
                &q.truncated,
            )
        })
        .collect();
    if s.queues.len() > 1 {
        let paused = s.queues.iter().filter(|q| q.paused).count();
        rows.push(queue_row(
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
            "BLOCKED",
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

/// Prints when a worker last completed a claim cycle, then a table of the workers reporting.
fn print_workers(s: &Stats) {
    match (s.last_worker_cycle_at, s.since_last_worker_cycle_ms) {
        (Some(at), Some(since)) => outln!(
            "workers: {} reporting; last claim cycle {} ago ({at})",
            s.workers.len(),
            age(since)
        ),
        _ => outln!("workers: none has reported a claim cycle"),
    }
    if s.workers.is_empty() {
        return;
    }
    let rows: Vec<Vec<String>> = s.workers.iter().map(|w| worker_row(w, s.at)).collect();
    output::table(
        &["WORKER", "HOST", "PID", "QUEUES", "STARTED", "LAST CYCLE"],
        &rows,
    );
}

/// One row of the workers table, its last cycle's age measured from `at`.
fn worker_row(w: &WorkerSeen, at: Timestamp) -> Vec<String> {
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
        format!("{} ago", age(ms(at.since(w.last_cycle_at)))),
    ]
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
