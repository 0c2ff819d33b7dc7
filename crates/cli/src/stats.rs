//! `errand stats`: the operator signals per queue, and `--check`, which
//! compares them with thresholds (flags and/or a TOML file) and exits
//! [`exit::THRESHOLD`] when one is crossed, so any scheduler can alert.

mod check;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use errand::{Admin, Counts, Name, Stats, StatsRequest, Timestamp, WorkerSeen};

use crate::exit::{self, Failure};
use crate::output::{self, age, outln};

use check::{CheckReport, ConfigFile, Limits, Thresholds, evaluate, ms, read_lateness};

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
    /// Count every queue's jobs whole first (what running services do once
    /// a minute while a count passes --cap): counts past the cap show
    /// exactly, marked `*`. Reads every unfinished and dead job's index
    /// entry.
    #[arg(long)]
    count: bool,
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
    if a.count {
        admin.count_exactly().await?;
    }
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
    if let Some(at) = s.queues.iter().filter_map(|q| q.counted_at).min() {
        outln!(
            "*: past the cap of {} rows, counted whole at {at} (by a running service, once a minute while a count passes the cap, or by errand stats --count)",
            s.cap
        );
    }
    print_workers(s);
}

/// How a row's counts were read: the states whose live read stopped at
/// the cap (`cut`), and those shown as a service last counted them whole
/// (`counted`).
struct Marks<'a> {
    cut: &'a [String],
    counted: &'a [String],
}

impl Marks<'_> {
    /// A count as shown: `≥N` when counting `state` stopped at the cap,
    /// `N*` when it was counted whole by a service.
    fn cell(&self, state: &str, v: u64) -> String {
        if self.cut.iter().any(|t| t == state) {
            format!("≥{v}")
        } else if self.counted.iter().any(|t| t == state) {
            format!("{v}*")
        } else {
            v.to_string()
        }
    }
}

/// One row of the queue table: a queue's name, counts and paused cell.
fn queue_row(name: &str, c: &Counts, paused: &str, marks: &Marks<'_>) -> Vec<String> {
    let n = |state: &str, v: u64| marks.cell(state, v);
    vec![
        name.to_owned(),
        n("ready", c.ready),
        n("ready", c.scheduled),
        n("blocked", c.blocked),
        n("waiting", c.waiting),
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
                &Marks {
                    cut: &q.truncated,
                    counted: &q.counted,
                },
            )
        })
        .collect();
    if s.queues.len() > 1 {
        let paused = s.queues.iter().filter(|q| q.paused).count();
        let mut counted: Vec<String> = s.queues.iter().flat_map(|q| q.counted.clone()).collect();
        counted.sort();
        counted.dedup();
        rows.push(queue_row(
            "(all)",
            &s.totals(),
            &format!("{paused} paused"),
            &Marks {
                cut: &s.truncated,
                counted: &counted,
            },
        ));
    }
    output::table(
        &[
            "QUEUE",
            "READY",
            "SCHEDULED",
            "BLOCKED",
            "WAITING",
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
