//! `fieldnotes`: the command line of the Field Notes receipts application.

use std::io::Write;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use errand_server::http::{DEFAULT_MAX_CONNECTIONS, Limits};
use fieldnotes::app::{self, DEFAULT_DOCUMENT};
use fieldnotes::work::{self, WorkOptions};
use fieldnotes::{EXIT_RUNTIME, Error};
use serde::Serialize;

/// Field Notes receipts: pay to publish a document; a background job
/// delivers the receipt, with retries, dead letters and replay.
#[derive(Debug, Parser)]
#[command(name = "fieldnotes", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create the database (schema and seed data). Safe to run again: it
    /// never resets money.
    Init {
        /// The SQLite file.
        db: PathBuf,
    },
    /// Pay for a document, as the API does: debit, publish and enqueue the
    /// receipt job in one transaction.
    Pay {
        /// The SQLite file.
        db: PathBuf,
        /// The document to pay for.
        #[arg(long, default_value = DEFAULT_DOCUMENT)]
        document: String,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Claim at most one due receipt job, run it, settle it and exit.
    Work {
        /// The SQLite file.
        db: PathBuf,
        /// Simulate the receipt dependency failing (error `receipt_unavailable`).
        #[arg(long)]
        unavailable: bool,
        /// SIGKILL this process after the receipt commits, before acknowledging.
        #[arg(long)]
        crash_after_effect: bool,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// The operator's view of the jobs.
    Jobs {
        /// The SQLite file.
        db: PathBuf,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// The rows of the receipt sink.
    Receipts {
        /// The SQLite file.
        db: PathBuf,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Replay a dead job: a fresh attempt budget, same id, audited.
    Replay {
        /// The SQLite file.
        db: PathBuf,
        /// The job id (from `fieldnotes jobs`).
        job_id: String,
        /// Who replays it (default: the OS user).
        #[arg(long)]
        by: Option<String>,
        /// Why.
        #[arg(long)]
        reason: Option<String>,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Serve the HTTP API on 127.0.0.1.
    Serve {
        /// The SQLite file.
        db: PathBuf,
        /// The port (0 picks a free one).
        #[arg(long, default_value_t = 4318)]
        port: u16,
        /// How long a client may take to send a request's head (and how
        /// long a kept-alive connection may stay idle), and then its body
        /// (408 past it).
        #[arg(long, default_value = "10s", value_parser = parse_duration)]
        read_timeout: Duration,
        /// How many connections may be open at once; more clients wait
        /// until one closes.
        #[arg(long, default_value_t = DEFAULT_MAX_CONNECTIONS as u64,
              value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
        max_connections: u64,
    },
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    errand::parse_duration(s).map_err(|e| match e {
        errand::Error::Invalid(m) => m,
        other => other.to_string(),
    })
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fieldnotes: {e:#}");
            let code = e
                .downcast_ref::<Error>()
                .map_or(EXIT_RUNTIME, Error::exit_code);
            ExitCode::from(code)
        }
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(errand::log_colours())
        .init();
}

fn runtime(multi_thread: bool) -> anyhow::Result<tokio::runtime::Runtime> {
    let mut builder = if multi_thread {
        tokio::runtime::Builder::new_multi_thread()
    } else {
        tokio::runtime::Builder::new_current_thread()
    };
    builder
        .enable_all()
        .build()
        .context("cannot start the async runtime")
}

fn print_json<T: Serialize + ?Sized>(value: &T) -> anyhow::Result<()> {
    let text = serde_json::to_string(value).context("cannot encode the output")?;
    print_line(&text)
}

fn print_line(text: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")
        .and_then(|()| out.flush())
        .context("cannot write to stdout")
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Init { db } => init(&db),
        Command::Pay { db, document, json } => {
            let store = app::open(&db)?;
            let payment = runtime(false)?.block_on(app::pay(&store, &document))?;
            if json {
                print_json(&payment)
            } else {
                print_line(&format!(
                    "paid {} cents for {}: payment_id={} job_id={} balance_cents={}",
                    payment.amount_cents,
                    payment.document_id,
                    payment.payment_id,
                    payment.job_id,
                    payment.balance_cents
                ))
            }
        }
        Command::Work {
            db,
            unavailable,
            crash_after_effect,
            json,
        } => {
            let store = app::open(&db)?;
            let options = WorkOptions {
                unavailable,
                crash_after_effect,
            };
            let report = runtime(false)?.block_on(work::work_once(&store, options))?;
            if json {
                print_json(&report)
            } else {
                print_line(&report.to_string())
            }
        }
        Command::Jobs { db, json } => {
            let store = app::open(&db)?;
            let jobs = runtime(false)?.block_on(app::jobs(&store))?;
            if json {
                print_json(&jobs)
            } else if jobs.is_empty() {
                print_line("no jobs")
            } else {
                jobs.iter().try_for_each(|j| print_line(&j.to_string()))
            }
        }
        Command::Receipts { db, json } => receipts(&db, json),
        Command::Replay {
            db,
            job_id,
            by,
            reason,
            json,
        } => {
            let store = app::open(&db)?;
            let operator = by.unwrap_or_else(app::default_operator);
            let job = runtime(false)?.block_on(app::replay(&store, &job_id, &operator, reason))?;
            if json {
                print_json(&job)
            } else {
                print_line(&format!(
                    "replayed {} by {operator}: state={} attempts={} replays={}",
                    job.id, job.state, job.attempts, job.replays
                ))
            }
        }
        Command::Serve {
            db,
            port,
            read_timeout,
            max_connections,
        } => serve(&db, port, read_timeout, max_connections),
    }
}

/// `fieldnotes init`: creates the database and describes its wallet and documents.
fn init(db: &Path) -> anyhow::Result<()> {
    let report = app::init(db)?;
    let docs: Vec<String> = report
        .documents
        .iter()
        .map(|d| {
            let state = if d.published {
                "published"
            } else {
                "unpublished"
            };
            format!("{} ({} cents, {state})", d.id, d.price_cents)
        })
        .collect();
    print_line(&format!(
        "initialised {}: wallet {} cents{}; documents {}",
        db.display(),
        report.wallet.balance_cents,
        if report.created_wallet {
            ""
        } else {
            " (existing, left as it was)"
        },
        docs.join(", ")
    ))
}

/// `fieldnotes receipts`: prints the rows of the receipt sink.
fn receipts(db: &Path, json: bool) -> anyhow::Result<()> {
    let store = app::open(db)?;
    let receipts = runtime(false)?.block_on(app::receipts(&store))?;
    if json {
        print_json(&receipts)
    } else if receipts.is_empty() {
        print_line("no receipts")
    } else {
        receipts.iter().try_for_each(|r| {
            print_line(&format!(
                "{} payment_id={} document={} amount_cents={} attempt={} created_at={}",
                r.job_id, r.payment_id, r.document_id, r.amount_cents, r.attempt, r.created_at
            ))
        })
    }
}

/// `fieldnotes serve`: serves the HTTP API on 127.0.0.1 until SIGTERM or SIGINT.
fn serve(db: &Path, port: u16, read_timeout: Duration, max_connections: u64) -> anyhow::Result<()> {
    let limits = Limits {
        read_timeout,
        max_connections: usize::try_from(max_connections).unwrap_or(usize::MAX),
        ..Limits::default()
    };
    limits.check().map_err(|e| Error::Invalid(e.to_string()))?;
    let store = app::open(db)?;
    runtime(true)?.block_on(async move {
        // Installed before the address is announced: a signal sent
        // as soon as the line is read is a graceful stop, not a kill.
        let stop = shutdown_signal()?;
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .await
            .with_context(|| format!("cannot listen on 127.0.0.1:{port}"))?;
        let addr = listener
            .local_addr()
            .context("cannot read the listening address")?;
        print_line(&format!("listening on http://{addr} (Ctrl-C stops)"))?;
        fieldnotes::http::serve(store, listener, limits, stop)
            .await
            .context("the server failed")?;
        eprintln!("fieldnotes: stopped");
        Ok(())
    })
}

/// Installs the SIGTERM and SIGINT handlers now, and returns what
/// completes at the first of those signals, after saying so on stderr.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()> + Send + 'static> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    Ok(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        eprintln!("fieldnotes: {name} received; finishing in-flight requests");
    })
}
