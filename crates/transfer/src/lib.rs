//! Moves an Errand database from SQLite to PostgreSQL: every table, every
//! row — jobs in every state with their attempts, outputs, dependencies,
//! signals, tags and metadata, workflows, batches, schedules, the audit
//! log, paused and capped queues, rate-limit buckets, worker reports and
//! the charts' minutes — while no worker runs.
//!
//! * **Refusals.** The source must be at this program's schema version and
//!   hold no live lease (a worker may be at work); the target schema must
//!   be new, empty, or hold this same source's unfinished transfer.
//! * **Resumable.** Rows are copied a page at a time in key order; each
//!   page is written in one PostgreSQL transaction together with the
//!   transfer's progress (`errand_transfer` in the target schema), so a
//!   transfer killed at any point goes on from the last page written.
//! * **Checked.** At the end every table is summed on both sides (row
//!   count and a checksum over canonical values, independent of row
//!   order) and the jobs are counted per state; the progress table is
//!   dropped only when everything matches.
//!
//! Encrypted payloads and outputs travel as they are stored: the same keys
//! read them on PostgreSQL.

mod digest;
mod source;
mod tables;
mod target;

use std::collections::BTreeMap;
use std::path::PathBuf;

use errand_core::{Error, Result, Timestamp};
use serde::Serialize;
use serde_json::Value;

use source::Source;
use tables::{JOBS, TABLES, Table};
use target::{Found, Target};

/// The most rows a page may hold.
pub const MAX_BATCH: usize = 10_000;

/// What to move and where.
#[derive(Debug, Clone)]
pub struct TransferOptions {
    /// The SQLite database to read (never written).
    pub from: PathBuf,
    /// The PostgreSQL database, `postgres://…`.
    pub to: String,
    /// The schema to write to.
    pub schema: String,
    /// Whether the schema may be `public`.
    pub allow_public_schema: bool,
    /// Look and count only: nothing is written.
    pub dry_run: bool,
    /// Rows per page, each page one transaction (1 to [`MAX_BATCH`]).
    pub batch: usize,
}

/// How far a transfer has come: rows copied of the rows to copy.
#[derive(Debug, Clone, Copy)]
pub struct Advance {
    /// Rows copied, counting those an earlier, stopped run copied.
    pub copied: u64,
    /// Rows the source holds.
    pub total: u64,
}

/// One table on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct TableReport {
    /// The table's name.
    pub table: String,
    /// Rows in the source.
    pub source_rows: u64,
    /// Rows in the target (none in a dry run).
    pub target_rows: Option<u64>,
    /// The source's checksum (none in a dry run).
    pub source_checksum: Option<String>,
    /// The target's checksum (none in a dry run).
    pub target_checksum: Option<String>,
    /// Whether both rows and checksums are equal.
    pub matches: bool,
}

/// Jobs in one state on both sides.
#[derive(Debug, Clone, Serialize)]
pub struct StateReport {
    /// The state.
    pub state: String,
    /// Jobs in that state in the source.
    pub source: u64,
    /// Jobs in that state in the target (none in a dry run).
    pub target: Option<u64>,
}

/// What a transfer did and found.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The source's path.
    pub from: String,
    /// The target schema.
    pub schema: String,
    /// A dry run: nothing was written.
    pub dry_run: bool,
    /// It went on from an earlier run's progress.
    pub resumed: bool,
    /// Rows this run wrote.
    pub copied: u64,
    /// Every table, the workflow steps (PostgreSQL's index of them,
    /// derived from the jobs) among them.
    pub tables: Vec<TableReport>,
    /// Jobs per state.
    pub states: Vec<StateReport>,
    /// Every table and state matches (never in a dry run).
    pub verified: bool,
}

/// Moves the database `options.from` names into `options.to`, or, in a
/// dry run, checks that it could and counts what it would move.
/// `advance` is told after every page.
///
/// # Errors
/// Bad options; a source that is not at this program's schema version or
/// holds a live lease; a target schema that holds other data; a failure of
/// either database. A transfer that ran to its end but whose sums differ
/// is not an error: the report says `verified: false`.
pub async fn transfer(
    options: &TransferOptions,
    mut advance: impl FnMut(Advance),
) -> Result<Report> {
    check(options)?;
    let source = Source::open(&options.from)?;
    if let Some(live) = source.live_lease(Timestamp::now().as_millis()).await? {
        return Err(Error::invalid(format!(
            "job {} holds a lease until {}{}: a worker is at work on {}. Stop every process that \
             works on it, wait for the leases to end, then transfer again",
            live.job,
            Timestamp::from_millis(live.until_ms),
            match live.others {
                0 => String::new(),
                n => format!(" (and {n} other running jobs hold live leases)"),
            },
            options.from.display()
        )));
    }
    let found = target::inspect(&options.to, &options.schema, source.path()).await?;
    let counts = source.counts().await?;
    if options.dry_run {
        return dry_run(options, &source, &counts, &found).await;
    }
    let target = Target::open(
        &options.to,
        &options.schema,
        options.allow_public_schema,
        &found,
        source.path(),
    )
    .await?;
    let copied = copy(&source, &target, options.batch, &counts, &mut advance).await?;
    target.continue_sequences().await?;
    let report = compare(options, &source, &target, found, copied).await?;
    if report.verified {
        target.finish().await?;
    }
    Ok(report)
}

fn check(options: &TransferOptions) -> Result<()> {
    if !(1..=MAX_BATCH).contains(&options.batch) {
        return Err(Error::invalid(format!(
            "a batch of {} rows: give 1 to {MAX_BATCH}",
            options.batch
        )));
    }
    // The schema's name and `public` refused as every command refuses
    // them, dry runs included.
    errand_postgres::PgOptions {
        schema: options.schema.clone(),
        allow_public_schema: options.allow_public_schema,
        ..errand_postgres::PgOptions::default()
    }
    .quoted_schema()?;
    if !(options.to.starts_with("postgres://") || options.to.starts_with("postgresql://")) {
        return Err(Error::invalid(format!(
            "--to {:?} is not a PostgreSQL URL: give postgres://USER@HOST:PORT/DATABASE",
            options.to
        )));
    }
    Ok(())
}

async fn dry_run(
    options: &TransferOptions,
    source: &Source,
    counts: &BTreeMap<&'static str, u64>,
    found: &Found,
) -> Result<Report> {
    let states = source.states().await?;
    Ok(Report {
        from: source.path().display().to_string(),
        schema: options.schema.clone(),
        dry_run: true,
        resumed: *found == Found::Unfinished,
        copied: 0,
        tables: counts
            .iter()
            .map(|(t, n)| TableReport {
                table: (*t).to_owned(),
                source_rows: *n,
                target_rows: None,
                source_checksum: None,
                target_checksum: None,
                matches: false,
            })
            .collect(),
        states: states
            .into_iter()
            .map(|(state, n)| StateReport {
                state,
                source: n,
                target: None,
            })
            .collect(),
        verified: false,
    })
}

/// Copies every table not yet done, page by page, in one snapshot of the
/// source; returns the rows written.
async fn copy(
    source: &Source,
    target: &Target,
    batch: usize,
    counts: &BTreeMap<&'static str, u64>,
    advance: &mut impl FnMut(Advance),
) -> Result<u64> {
    let progress = target.progress().await?;
    let total: u64 = TABLES.iter().filter_map(|t| counts.get(t.name)).sum();
    let mut so_far: u64 = progress.values().map(|p| p.copied).sum();
    advance(Advance {
        copied: so_far,
        total,
    });
    source.snapshot(true).await?;
    let mut written = 0;
    for table in TABLES {
        let done = progress.get(table.name).cloned().unwrap_or_default();
        if done.done {
            continue;
        }
        let mut after = done.after;
        loop {
            let rows = source.page(table, after.clone(), batch).await?;
            let Some(last) = rows.last() else { break };
            let key = key_of(table, last);
            let steps = if table.name == JOBS.name {
                source::steps_of(&rows)
            } else {
                Vec::new()
            };
            target.write_page(table, &rows, &steps, &key).await?;
            let n = rows.len() as u64;
            written += n;
            so_far += n;
            advance(Advance {
                copied: so_far,
                total,
            });
            after = Some(key);
        }
        target.finish_table(table).await?;
    }
    source.snapshot(false).await?;
    Ok(written)
}

/// A row's key values.
fn key_of(table: &Table, row: &[Value]) -> Vec<Value> {
    table
        .key
        .iter()
        .filter_map(|k| table.columns.iter().position(|c| c.name == *k))
        .map(|i| row[i].clone())
        .collect()
}

/// Sums both sides (the source in a new snapshot: a change made while the
/// copy ran shows) and counts the jobs per state.
async fn compare(
    options: &TransferOptions,
    source: &Source,
    target: &Target,
    found: Found,
    copied: u64,
) -> Result<Report> {
    let (theirs, ours) = (source.checksums().await?, target.checksums().await?);
    let tables: Vec<TableReport> = theirs
        .iter()
        .map(|(t, s)| {
            let o = ours.get(t).copied().unwrap_or_default();
            TableReport {
                table: (*t).to_owned(),
                source_rows: s.rows,
                target_rows: Some(o.rows),
                source_checksum: Some(s.hex()),
                target_checksum: Some(o.hex()),
                matches: *s == o,
            }
        })
        .collect();
    let (from_states, to_states) = (source.states().await?, target.states().await?);
    let mut names: Vec<&String> = from_states.keys().chain(to_states.keys()).collect();
    names.sort_unstable();
    names.dedup();
    let states: Vec<StateReport> = names
        .into_iter()
        .map(|s| StateReport {
            state: s.clone(),
            source: from_states.get(s).copied().unwrap_or(0),
            target: Some(to_states.get(s).copied().unwrap_or(0)),
        })
        .collect();
    let verified =
        tables.iter().all(|t| t.matches) && states.iter().all(|s| s.target == Some(s.source));
    Ok(Report {
        from: source.path().display().to_string(),
        schema: options.schema.clone(),
        dry_run: false,
        resumed: found == Found::Unfinished,
        copied,
        tables,
        states,
        verified,
    })
}
