//! Human and JSON output.
//!
//! Everything the command prints goes through [`stdout`] and [`stderr`]
//! (the [`outln!`] and [`errln!`] macros), never `println!`, which panics
//! when the reader has gone. A reader that closes stdout early (`errand jobs
//! | head -1`) ends the output quietly: the rest is dropped and the command
//! finishes as it would have, with its own exit status. Any other failure
//! to write stdout (a full disk) is reported when the command ends, with
//! exit 1 if the command had succeeded.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::Context;
use errand::{Job, JobDetail, JobState, WorkReport};
use serde::Serialize;

/// Set once stdout cannot be written (its reader closed the pipe, or it
/// failed): later output is dropped.
static STDOUT_GONE: AtomicBool = AtomicBool::new(false);

/// The first failure to write stdout other than a closed pipe.
static STDOUT_FAILURE: OnceLock<String> = OnceLock::new();

/// Writes to stdout (and flushes). See the module documentation for what
/// happens when stdout cannot be written.
pub fn stdout(text: std::fmt::Arguments<'_>) {
    if STDOUT_GONE.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out.write_fmt(text).and_then(|()| out.flush()) {
        STDOUT_GONE.store(true, Ordering::Relaxed);
        if e.kind() != std::io::ErrorKind::BrokenPipe {
            let _ = STDOUT_FAILURE.set(e.to_string());
        }
    }
}

/// Writes to stderr; a stderr that cannot be written is ignored (there is
/// nowhere left to say so).
pub fn stderr(text: std::fmt::Arguments<'_>) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_fmt(text).and_then(|()| err.flush());
}

/// Why stdout could not be written, unless its reader simply closed it.
pub fn stdout_failure() -> Option<&'static str> {
    STDOUT_FAILURE.get().map(String::as_str)
}

/// `println!` through [`stdout`].
macro_rules! outln {
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` through [`stdout`].
macro_rules! out {
    ($($arg:tt)*) => {
        $crate::output::stdout(format_args!($($arg)*))
    };
}

/// `eprintln!` through [`stderr`].
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::stderr(format_args!("{}\n", format_args!($($arg)*)))
    };
}

#[cfg(feature = "bench")]
pub(crate) use out;
pub(crate) use {errln, outln};

/// Prints `v` as one line of JSON.
pub fn json<T: Serialize + ?Sized>(v: &T) -> anyhow::Result<()> {
    outln!(
        "{}",
        serde_json::to_string(v).context("encoding JSON output")?
    );
    Ok(())
}

/// `text` as every text printer shows stored text (a job's last error, a
/// payload, an output, a progress message, metadata, an operator's name or
/// reason, a worker's host): each control character — C0 such as ESC or a
/// line break, DEL, C1 — written as an escape (`\n`, `\r`, `\t`, or
/// `\u{1b}` by its code in hex), so what a job, its command or an HTTP
/// client stored can neither drive the reader's terminal nor start a line
/// of its own. Everything else, a backslash too, is shown as it is. (JSON
/// output needs none of this: JSON escapes control characters itself.)
pub fn escaped(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn opt_time(t: Option<errand::Timestamp>) -> String {
    t.map_or_else(|| "-".to_owned(), |t| t.to_rfc3339())
}

/// One job on one line.
pub fn job_line(j: &errand::JobBrief) -> String {
    format!(
        "{} state={} queue={} kind={} attempts={}/{} replays={} available_at={}",
        j.id, j.state, j.queue, j.kind, j.attempts, j.max_attempts, j.replays, j.available_at
    )
}

/// Jobs printed a page at a time as they are read (so memory holds one
/// page, whatever `--limit` says): a table whose column widths come from
/// the first page, or one JSON array, the same text as encoding the whole
/// list at once.
pub struct JobListing {
    json: bool,
    started: bool,
    idw: usize,
}

impl JobListing {
    /// A listing in JSON or as a table.
    pub fn new(json: bool) -> Self {
        JobListing {
            json,
            started: false,
            idw: 2,
        }
    }

    /// Prints the next page.
    pub fn page(&mut self, jobs: &[Job]) -> anyhow::Result<()> {
        if jobs.is_empty() {
            return Ok(());
        }
        if self.json {
            for j in jobs {
                let text = serde_json::to_string(j).context("encoding JSON output")?;
                let sep = if self.started { "," } else { "[" };
                out!("{sep}{text}");
                self.started = true;
            }
            return Ok(());
        }
        if !self.started {
            self.started = true;
            self.idw = jobs
                .iter()
                .map(|j| j.id.as_str().len())
                .max()
                .unwrap_or(2)
                .max(2);
            outln!(
                "{:idw$}  {:9}  {:12}  {:16}  {:8}  {:7}  {:24}  {:24}  LAST_ERROR",
                "ID",
                "STATE",
                "QUEUE",
                "KIND",
                "ATTEMPTS",
                "REPLAYS",
                "AVAILABLE_AT",
                "LEASE_UNTIL",
                idw = self.idw
            );
        }
        for j in jobs {
            outln!(
                "{:idw$}  {:9}  {:12}  {:16}  {:8}  {:7}  {:24}  {:24}  {}",
                j.id.as_str(),
                j.state.as_str(),
                j.queue.as_str(),
                j.kind.as_str(),
                format!("{}/{}", j.attempts, j.max_attempts),
                j.replays,
                j.available_at.to_rfc3339(),
                opt_time(j.lease_until),
                escaped(j.last_error.as_deref().unwrap_or("-")),
                idw = self.idw
            );
        }
        Ok(())
    }

    /// Ends the listing.
    pub fn finish(self) {
        match (self.json, self.started) {
            (true, true) => outln!("]"),
            (true, false) => outln!("[]"),
            (false, false) => outln!("no jobs"),
            (false, true) => {}
        }
    }
}

/// Whether stdout can no longer be written (its reader is gone): a command
/// printing page after page stops reading.
pub fn stdout_gone() -> bool {
    STDOUT_GONE.load(Ordering::Relaxed)
}

/// One job in full.
pub fn detail(d: &JobDetail) {
    let j = &d.job;
    job_fields(j);
    job_labels(j);
    job_content(j);
    job_dependencies(d);
    job_signals(d);
    attempt_history(&d.history);
    audit_trail(&d.audit);
}

/// Prints a job's identity, counters and times, and its deadline if it has one.
fn job_fields(j: &Job) {
    outln!("id:           {}", j.id);
    outln!("state:        {}", j.state);
    outln!("queue:        {}", j.queue);
    outln!("kind:         {}", j.kind);
    outln!("priority:     {}", j.priority);
    outln!("attempts:     {} of {}", j.attempts, j.max_attempts);
    outln!("replays:      {}", j.replays);
    outln!("available_at: {}", j.available_at);
    outln!("lease_until:  {}", opt_time(j.lease_until));
    outln!("created_at:   {}", j.created_at);
    outln!("updated_at:   {}", j.updated_at);
    outln!("finished_at:  {}", opt_time(j.finished_at));
    if let Some(deadline) = j.deadline {
        outln!("deadline:     {deadline}{}", deadline_lateness(j, deadline));
    }
}

/// How a done job met its deadline (` (finished 3s late)`), empty for a job not done.
fn deadline_lateness(j: &Job, deadline: errand::Timestamp) -> String {
    match j.finished_at {
        Some(done) if j.state == JobState::Done && done > deadline => {
            format!(" (finished {} late)", age(ms(done.since(deadline))))
        }
        Some(_) if j.state == JobState::Done => " (finished on time)".to_owned(),
        _ => String::new(),
    }
}

/// Prints a job's traceparent, workflow, tags and metadata, those it has.
fn job_labels(j: &Job) {
    if let Some(tp) = &j.traceparent {
        outln!("traceparent:  {tp}");
    }
    if let Some(w) = &j.workflow {
        outln!("workflow:     {w}");
    }
    if let Some(step) = &j.added_by {
        outln!("added_by:     {step} (added as it completed)");
    }
    if !j.tags.is_empty() {
        outln!("tags:         {}", j.tags.join(", "));
    }
    for (key, value) in &j.meta {
        outln!("meta:         {}={}", escaped(key), escaped(value));
    }
}

/// Prints a job's last error, payload, output and progress.
fn job_content(j: &Job) {
    outln!(
        "last_error:   {}{}",
        escaped(j.last_error.as_deref().unwrap_or("-")),
        j.last_error_class
            .map(|c| format!(" ({c})"))
            .unwrap_or_default()
    );
    outln!("payload:      {}", escaped(&j.payload.shown()));
    if let Some(output) = &j.output {
        outln!("output:       {}", escaped(&output.shown()));
    }
    if let Some(p) = &j.progress {
        outln!(
            "progress:     {}% (attempt {}){}",
            p.percent,
            p.attempt,
            p.message
                .as_deref()
                .map(|m| format!(" {}", escaped(m)))
                .unwrap_or_default()
        );
    }
}

/// Prints the jobs a job depends on and the jobs that depend on it, if any.
fn job_dependencies(d: &JobDetail) {
    let j = &d.job;
    if !d.dependencies.is_empty() {
        let policy = j
            .on_dependency_failure
            .map(|p| p.as_str())
            .unwrap_or("wait");
        outln!(
            "depends on:   {} job(s), {} not yet met; if one fails: {policy}",
            d.dependencies.len(),
            j.waiting_on
        );
        for dep in &d.dependencies {
            outln!("  {}", dependency_line(dep));
        }
    }
    if !d.dependents.is_empty() {
        let more = if d.dependents.len() >= JobDetail::DEPENDENTS_SHOWN {
            " (the first ones)"
        } else {
            ""
        };
        outln!("dependents:   {}{more}", d.dependents.len());
        for dep in &d.dependents {
            outln!("  {}", dependency_line(dep));
        }
    }
}

/// Prints the wait a job is in and the signals sent to it, if any.
fn job_signals(d: &JobDetail) {
    if let Some(a) = &d.job.awaiting {
        let until = a.until.map_or_else(
            || "no timeout".to_owned(),
            |t| format!("until {t}, then {}", a.on_timeout),
        );
        outln!("awaiting:     signal {} ({until})", a.signal);
    }
    if d.signals.is_empty() {
        return;
    }
    outln!("signals:");
    for s in &d.signals {
        let delivered = match s.delivered_at {
            Some(t) if d.job.resumed_by == Some(s.seq) => format!("delivered {t}, resumed the job"),
            Some(t) => format!("delivered {t}"),
            None => "kept for a later wait".to_owned(),
        };
        outln!(
            "  {} {} sent {} ({} payload bytes): {delivered}",
            s.seq,
            s.name,
            s.sent_at,
            s.payload_bytes
        );
    }
}

/// Prints the `history:` section: one line per attempt.
fn attempt_history(history: &[errand::AttemptRecord]) {
    outln!("history:");
    if history.is_empty() {
        outln!("  (no attempts yet)");
    }
    for h in history {
        outln!(
            "  cycle {} attempt {}: started {} finished {} outcome {}{}",
            h.cycle,
            h.attempt,
            h.started_at,
            opt_time(h.finished_at),
            h.outcome.as_deref().unwrap_or("running"),
            h.error
                .as_deref()
                .map(|e| format!(" error \"{}\"", escaped(e)))
                .unwrap_or_default()
        );
    }
}

/// Prints the `audit:` section: one line per operator action.
fn audit_trail(audit: &[errand::AuditRecord]) {
    outln!("audit:");
    if audit.is_empty() {
        outln!("  (no operator actions)");
    }
    for a in audit {
        let copy = match (&a.copied_to, &a.copied_from) {
            (Some(to), _) => format!(" (to new job {to})"),
            (None, Some(from)) => format!(" (this job, from job {from})"),
            (None, None) => String::new(),
        };
        outln!(
            "  {} {}{} by {}{}",
            a.at,
            a.action,
            copy,
            escaped(&a.operator),
            a.reason
                .as_deref()
                .map(|r| format!(": {}", escaped(r)))
                .unwrap_or_default()
        );
    }
}

fn dependency_line(dep: &errand::core::Dependency) -> String {
    let state = dep
        .state
        .map_or("gone (purged or pruned)", JobState::as_str);
    let met = if dep.met { "met" } else { "not met" };
    format!("{} {state}, {met}", dep.id)
}

fn ms(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// An age for people: whole seconds from a second up (`6m 2s`).
pub fn age(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms}ms")
    } else {
        humantime::format_duration(std::time::Duration::from_secs(ms / 1000)).to_string()
    }
}

/// A table: a header and rows of cells, each column as wide as its widest
/// cell (the last one unpadded), each cell [`escaped`].
pub fn table(header: &[&str], rows: &[Vec<String>]) {
    let rows: Vec<Vec<Cow<'_, str>>> = rows
        .iter()
        .map(|row| row.iter().map(|cell| escaped(cell)).collect())
        .collect();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let text: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| {
                if i == last {
                    (*c).to_owned()
                } else {
                    format!("{c:w$}", w = widths.get(i).copied().unwrap_or(0))
                }
            })
            .collect();
        outln!("{}", text.join("  "));
    };
    line(header.to_vec());
    for row in &rows {
        line(row.iter().map(AsRef::as_ref).collect());
    }
}

/// A worker cycle's report.
pub fn report(r: &WorkReport, as_json: bool) -> anyhow::Result<()> {
    if as_json {
        json(r)
    } else {
        outln!("{r}");
        Ok(())
    }
}

// What `--json` prints when the answer carries jobs: typed structs written
// straight to text, so a payload goes out as it was stored and is never
// parsed again (a stored payload such as `[1e400]` would fail a
// `serde_json::Value`, and `json!` would panic on it).

/// Jobs an operator command acted on or would act on.
#[derive(Serialize)]
pub struct JobsDone<'a, T: Serialize> {
    /// Whether nothing was changed.
    pub dry_run: bool,
    /// The jobs, without their payloads (in a dry run, each with why it
    /// would be refused, if it would).
    pub jobs: &'a [T],
}

/// The copies `replay --new-key` made.
#[derive(Serialize)]
pub struct Copies<'a> {
    /// Always false: a dry run prints [`JobsDone`].
    pub dry_run: bool,
    /// The copies: each original's id and its new job, without payloads.
    pub copies: &'a [Copy],
}

/// One copy `replay --new-key` made.
#[derive(Serialize)]
pub struct Copy {
    /// The original's id.
    pub from: errand::JobId,
    /// The new job.
    pub job: errand::JobBrief,
}

/// `enqueue --json`: the job's fields and whether it was created.
#[derive(Serialize)]
pub struct Enqueued<'a> {
    /// False when the id already existed (the stored job is printed).
    pub created: bool,
    /// The job.
    #[serde(flatten)]
    pub job: &'a Job,
}

/// A dry run's lines: each job with what the action would do to it
/// (`verdict`), or its JSON; `none` when nothing matches.
pub(crate) fn dry_run_lines(
    planned: &[errand::Planned],
    as_json: bool,
    none: &str,
    verdict: impl Fn(&errand::Planned) -> String,
) -> anyhow::Result<()> {
    if as_json {
        json(&JobsDone {
            dry_run: true,
            jobs: planned,
        })?;
    } else if planned.is_empty() {
        outln!("{none}");
    } else {
        for p in planned {
            outln!("{} {}", verdict(p), job_line(&p.job));
        }
    }
    Ok(())
}

/// What a progress spinner says while a bulk action runs: how many jobs
/// when they are named by id (a filter's count is known only at the end).
pub(crate) fn acting_on(verb: &str, jobs: &errand::Selection) -> String {
    match jobs {
        errand::Selection::Ids(ids) => format!("{verb} {} jobs", ids.len()),
        errand::Selection::Filter(_) => format!("{verb} jobs"),
    }
}

#[cfg(test)]
mod tests {
    use super::escaped;

    #[test]
    fn escaped_text_holds_no_control_character() {
        assert_eq!(
            escaped("a\u{1b}[31mred\nline 2\r\tx\0\u{7f}\u{9b}2J"),
            "a\\u{1b}[31mred\\nline 2\\r\\tx\\u{0}\\u{7f}\\u{9b}2J"
        );
        // Plain text is borrowed as it is, a backslash and non-ASCII too.
        let plain = "C:\\temp – ünï ✓ \"quoted\"";
        assert!(matches!(escaped(plain), std::borrow::Cow::Borrowed(p) if p == plain));
        // Escaping twice changes nothing more.
        let once = escaped("\u{1b}]0;title\u{7}").into_owned();
        assert_eq!(once, "\\u{1b}]0;title\\u{7}");
        assert_eq!(escaped(&once), once);
    }
}
