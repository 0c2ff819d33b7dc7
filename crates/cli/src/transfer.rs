//! `errand transfer --from PATH.db --to postgres://… [--schema S]
//! [--dry-run]`: moves an embedded database to PostgreSQL and checks
//! every table on both sides (the errand-transfer crate).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use errand_transfer::{Report, TransferOptions};

use crate::exit::Failure;
use crate::output::{self, outln};
use crate::progress::Progress;

/// `errand transfer`.
#[derive(Args, Debug)]
pub struct TransferArgs {
    /// The SQLite database to move (read, never written).
    #[arg(long)]
    pub from: PathBuf,
    /// The PostgreSQL database to move it to (postgres://USER@HOST:PORT/DB);
    /// the schema is --schema, new or empty.
    #[arg(long)]
    pub to: String,
    /// Check and count only: write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Rows per page, each page one transaction (1 to 10000).
    #[arg(long, default_value_t = 1000)]
    pub batch: usize,
    /// Print the report as JSON (no progress bar).
    #[arg(long)]
    pub json: bool,
}

/// Runs the transfer; exit 1 when the check at the end finds a difference.
pub(crate) async fn run(
    args: &TransferArgs,
    schema: &str,
    allow_public_schema: bool,
) -> Result<ExitCode, Failure> {
    let options = TransferOptions {
        from: args.from.clone(),
        to: args.to.clone(),
        schema: schema.to_owned(),
        allow_public_schema,
        dry_run: args.dry_run,
        batch: args.batch,
    };
    let bar = if crate::progress::shown(args.json) && !args.dry_run {
        Progress::bar(args.json, 0, format!("moving into schema {schema}"))
    } else {
        Progress::none()
    };
    let report = errand_transfer::transfer(&options, |a| {
        bar.set_length(a.total);
        bar.set(a.copied);
    })
    .await?;
    bar.finish();
    if args.json {
        output::json(&report)?;
    } else {
        print(&report);
    }
    if report.dry_run || report.verified {
        return Ok(ExitCode::SUCCESS);
    }
    let differ: Vec<&str> = report
        .tables
        .iter()
        .filter(|t| !t.matches)
        .map(|t| t.table.as_str())
        .collect();
    Err(Failure::Coded(
        crate::exit::RUNTIME,
        format!(
            "the two sides differ ({}): was the SQLite database written to while it was \
             moved? Stop every process using it, drop schema {schema} and transfer again",
            if differ.is_empty() {
                "jobs per state".to_owned()
            } else {
                differ.join(", ")
            }
        ),
    ))
}

fn print(r: &Report) {
    let head = if r.dry_run {
        "would move"
    } else if r.resumed {
        "moved (resumed)"
    } else {
        "moved"
    };
    outln!("{head} {} into schema {}", r.from, r.schema);
    outln!(
        "{:<24} {:>10} {:>10}  {:<32}  {:<32}",
        "table",
        "source",
        "target",
        "source checksum",
        "target checksum"
    );
    for t in &r.tables {
        outln!(
            "{:<24} {:>10} {:>10}  {:<32}  {:<32}{}",
            t.table,
            t.source_rows,
            t.target_rows.map_or("-".to_owned(), |n| n.to_string()),
            t.source_checksum.as_deref().unwrap_or("-"),
            t.target_checksum.as_deref().unwrap_or("-"),
            if r.dry_run || t.matches {
                ""
            } else {
                "  DIFFERS"
            }
        );
    }
    outln!("{:<24} {:>10} {:>10}", "jobs by state", "source", "target");
    for s in &r.states {
        outln!(
            "{:<24} {:>10} {:>10}",
            s.state,
            s.source,
            s.target.map_or("-".to_owned(), |n| n.to_string())
        );
    }
    if r.dry_run {
        outln!("dry run: nothing was written");
    } else if r.verified {
        outln!(
            "{} rows written by this run; every table and state matches",
            r.copied
        );
    }
}
