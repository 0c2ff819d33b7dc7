//! `reservations`: the command line of the reservation-hold application.

use std::fmt::Display;
use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Parser, Subcommand};
use reservations::app::{self, App, Replay};
use reservations::expiry::{self, WorkLine, WorkOptions};
use reservations::stats::{self, Stats};
use reservations::{EXIT_RUNTIME, EXIT_THRESHOLD, Error};
use serde::Serialize;

/// Reservation holds: a hold reserves a unit until its deadline; an expiry
/// job scheduled in the same transaction expires it unless it is paid,
/// cancelled or extended first.
///
/// DB is a SQLite file path (or sqlite://PATH) or a postgres:// URL.
#[derive(Debug, Parser)]
#[command(name = "reservations", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Parses a duration like `250ms`, `5s`, `15m` or `1h 30m`.
fn duration(s: &str) -> Result<Duration, String> {
    humantime::parse_duration(s.trim()).map_err(|e| {
        format!("`{s}` is not a duration ({e}); write durations like 250ms, 5s, 15m or 1h30m")
    })
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Create the schema and a few units. Safe to run again.
    Init {
        /// SQLite file or postgres:// URL.
        db: String,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Hold a unit for a guest; schedules the hold's expiry in the same
    /// transaction.
    Hold {
        /// SQLite file or postgres:// URL.
        db: String,
        /// The unit to hold (see `init`).
        #[arg(long)]
        unit: String,
        /// The guest's name.
        #[arg(long)]
        guest: String,
        /// The first night of the stay, YYYY-MM-DD (default: today, in UTC).
        #[arg(long, value_parser = app::parse_date)]
        from: Option<time::Date>,
        /// The day the stay ends, YYYY-MM-DD: its last night is the one
        /// before (default: the day after --from).
        #[arg(long, value_parser = app::parse_date)]
        to: Option<time::Date>,
        /// How long the hold lasts.
        #[arg(long, value_parser = duration, default_value = "15m")]
        window: Duration,
        /// The expiry job waits for the payment (`pay` signals it, in the
        /// payment's transaction) instead of sleeping until the deadline:
        /// a paid hold's job ends at once; an unpaid one expires the hold
        /// when the wait times out at the deadline.
        #[arg(long)]
        await_payment: bool,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Pay a held reservation before its deadline.
    Pay {
        /// SQLite file or postgres:// URL.
        db: String,
        /// The reservation id.
        id: String,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Move a held reservation's deadline later; schedules the new
    /// deadline's expiry in the same transaction.
    Extend {
        /// SQLite file or postgres:// URL.
        db: String,
        /// The reservation id.
        id: String,
        /// How much later.
        #[arg(long, value_parser = duration)]
        by: Duration,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a held reservation before its deadline.
    Cancel {
        /// SQLite file or postgres:// URL.
        db: String,
        /// The reservation id.
        id: String,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Run expiry jobs: one with --once, else as a service until
    /// SIGTERM/SIGINT (then it drains).
    Work {
        /// SQLite file or postgres:// URL.
        db: String,
        /// Claim at most one due job, run it, settle it and exit.
        #[arg(long)]
        once: bool,
        /// Service mode: most expiries running at once.
        #[arg(long, default_value_t = 4)]
        concurrency: usize,
        /// The lease of each claim (renewed while the handler runs).
        #[arg(long, value_parser = duration, default_value = "30s")]
        lease: Duration,
        /// Service mode: how often an idle worker looks for due work.
        #[arg(long, value_parser = duration, default_value = "1s")]
        poll: Duration,
        /// Make every expiry transaction fail with a real database timeout
        /// (a retryable failure).
        #[arg(long, env = "RESERVATIONS_SIMULATE_DB_TIMEOUT", value_parser = clap::builder::BoolishValueParser::new())]
        simulate_db_timeout: bool,
        /// Test switch: pause this many milliseconds in the handler before
        /// the transition.
        #[arg(long, env = "RESERVATIONS_HANDLER_PAUSE_MS", hide = true)]
        handler_pause_ms: Option<u64>,
        /// Test switch: SIGKILL this worker right after a transition
        /// commits, before it acknowledges.
        #[arg(long, env = "RESERVATIONS_CRASH_AFTER_TRANSITION", hide = true, value_parser = clap::builder::BoolishValueParser::new())]
        crash_after_transition: bool,
        /// Print one JSON object per settled attempt.
        #[arg(long)]
        json: bool,
    },
    /// The reservations.
    List {
        /// SQLite file or postgres:// URL.
        db: String,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// The expiry jobs (operator view).
    Jobs {
        /// SQLite file or postgres:// URL.
        db: String,
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
    /// Lateness percentiles and expiry outcome counts; with --check, a
    /// lateness alert.
    Stats {
        /// SQLite file or postgres:// URL.
        db: String,
        /// Print a JSON object.
        #[arg(long, conflicts_with = "prometheus")]
        json: bool,
        /// Print Prometheus (OpenMetrics) text: a lateness histogram and
        /// the outcome counters.
        #[arg(long)]
        prometheus: bool,
        /// Compare the recent lateness with --max-lateness: print each
        /// crossing and exit 6, or print `ok` and exit 0.
        #[arg(long, requires = "max_lateness", conflicts_with = "prometheus")]
        check: bool,
        /// With --check: the most a hold may expire after its deadline (the
        /// largest lateness of the holds expired in the window), and the
        /// longest a hold may wait past its deadline unexpired.
        #[arg(long, requires = "check", value_parser = duration)]
        max_lateness: Option<Duration>,
        /// With --check: count the holds expired over this recent window.
        #[arg(long, requires = "check", value_parser = duration, default_value = "15m")]
        window: Duration,
    },
    /// Delete a reservation and its recorded expiry, whatever its status.
    /// Its expiry jobs stay: one still pending finds no reservation and
    /// goes dead at once (a permanent failure, shown by `reservations
    /// jobs`).
    PurgeReservation {
        /// SQLite file or postgres:// URL.
        db: String,
        /// The reservation id.
        id: String,
        /// Print a JSON object.
        #[arg(long)]
        json: bool,
    },
    /// Replay a dead expiry job: a fresh attempt budget, the same id and
    /// the same idempotency key, audited.
    Replay {
        /// SQLite file or postgres:// URL.
        db: String,
        /// The job id (from `reservations jobs`).
        job_id: String,
        /// Mint a new idempotency key (needs --confirm-eligible).
        #[arg(long)]
        new_key: bool,
        /// Confirm that the reservation is still eligible to expire (goes
        /// with --new-key).
        #[arg(long)]
        confirm_eligible: bool,
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
}

/// `stats --check` found a threshold crossed: it printed why on stdout and
/// exits 6.
#[derive(Debug)]
struct ThresholdCrossed;

impl std::fmt::Display for ThresholdCrossed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a threshold is crossed")
    }
}

impl std::error::Error for ThresholdCrossed {}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_tracing();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.is::<ThresholdCrossed>() => ExitCode::from(EXIT_THRESHOLD),
        Err(e) => {
            eprintln!("reservations: {e:#}");
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

fn print_reservation(verb: &str, r: &app::Reservation, json: bool) -> anyhow::Result<()> {
    if json {
        print_json(r)
    } else {
        print_line(&format!(
            "{verb} reservation {} unit={} guest={:?} from={} to={} status={} hold_until={} job_id={}",
            r.id,
            r.unit,
            r.guest,
            app::iso_date(r.stay_from),
            app::iso_date(r.stay_to),
            r.status,
            r.hold_until,
            r.job_id
        ))
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let rt = runtime(matches!(cli.command, Command::Work { once: false, .. }))?;
    rt.block_on(run_command(cli.command))
}

async fn run_command(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Init { db, json } => init(&db, json).await,
        Command::Hold {
            db,
            unit,
            guest,
            from,
            to,
            window,
            await_payment,
            json,
        } => {
            let app = App::open(&db).await?;
            let expiry = if await_payment {
                app::Expiry::AwaitingPayment
            } else {
                app::Expiry::AtDeadline
            };
            let r = app
                .hold_with(&unit, &guest, app::StayRequest { from, to }, window, expiry)
                .await?;
            print_reservation("held", &r, json)
        }
        Command::Pay { db, id, json } => {
            let r = App::open(&db).await?.pay(&id).await?;
            print_reservation("paid", &r, json)
        }
        Command::Extend { db, id, by, json } => {
            let r = App::open(&db).await?.extend(&id, by).await?;
            print_reservation("extended", &r, json)
        }
        Command::Cancel { db, id, json } => {
            let r = App::open(&db).await?.cancel(&id).await?;
            print_reservation("cancelled", &r, json)
        }
        Command::Work {
            db,
            once,
            concurrency,
            lease,
            poll,
            simulate_db_timeout,
            handler_pause_ms,
            crash_after_transition,
            json,
        } => {
            let options = work_options(
                lease,
                poll,
                concurrency,
                simulate_db_timeout,
                handler_pause_ms,
                crash_after_transition,
            )?;
            work(&db, once, &options, json).await
        }
        Command::List { db, json } => print_rows(
            &App::open(&db).await?.list().await?,
            "no reservations",
            json,
        ),
        Command::Jobs { db, json } => {
            print_rows(&App::open(&db).await?.jobs().await?, "no expiry jobs", json)
        }
        Command::Stats {
            db,
            json,
            prometheus,
            check,
            max_lateness,
            window,
        } => stats(&db, check, prometheus, max_lateness, window, json).await,
        Command::PurgeReservation { db, id, json } => purge_reservation(&db, &id, json).await,
        Command::Replay {
            db,
            job_id,
            new_key,
            confirm_eligible,
            by,
            reason,
            json,
        } => {
            let request = Replay {
                job_id,
                operator: by.unwrap_or_else(app::default_operator),
                reason,
                new_key,
                confirm_eligible,
            };
            replay(&db, &request, json).await
        }
    }
}

/// `reservations init`: creates or prepares the database and says what it made.
async fn init(db: &str, json: bool) -> anyhow::Result<()> {
    let report = App::init(db).await?;
    if json {
        return print_json(&report);
    }
    let created = if report.created_units.is_empty() {
        "no new units".to_owned()
    } else {
        format!("created units {}", report.created_units.join(", "))
    };
    print_line(&format!(
        "initialised the {} database: {created}; units {}",
        report.backend,
        report.units.join(", ")
    ))
}

/// Prints `rows` as a JSON array, else one line each (`empty` when there are none).
fn print_rows<T: Serialize + Display>(rows: &[T], empty: &str, json: bool) -> anyhow::Result<()> {
    if json {
        print_json(rows)
    } else if rows.is_empty() {
        print_line(empty)
    } else {
        rows.iter().try_for_each(|r| print_line(&r.to_string()))
    }
}

/// `reservations purge-reservation`: deletes it and says what becomes of its expiry job.
async fn purge_reservation(db: &str, id: &str, json: bool) -> anyhow::Result<()> {
    let r = App::open(db).await?.purge_reservation(id).await?;
    if json {
        print_json(&r)
    } else {
        print_line(&format!(
            "purged reservation {r}; its expiry job {} is left as it is: if it is still pending it finds no reservation and goes dead at once (a permanent failure; see `reservations jobs`)",
            r.job_id
        ))
    }
}

/// The worker's options, checked.
fn work_options(
    lease: Duration,
    poll: Duration,
    concurrency: usize,
    simulate_db_timeout: bool,
    handler_pause_ms: Option<u64>,
    crash_after_transition: bool,
) -> Result<WorkOptions, Error> {
    if lease < Duration::from_millis(100) {
        return Err(Error::Invalid("--lease must be at least 100ms".into()));
    }
    if poll.is_zero() {
        return Err(Error::Invalid("--poll must be longer than zero".into()));
    }
    if !(1..=1000).contains(&concurrency) {
        return Err(Error::Invalid(
            "--concurrency must be between 1 and 1000".into(),
        ));
    }
    Ok(WorkOptions {
        lease,
        poll,
        concurrency,
        simulate_db_timeout,
        pause: handler_pause_ms.map(Duration::from_millis),
        crash_after_transition,
    })
}

/// `reservations work`: one job (`--once`) or the service until a signal.
async fn work(db: &str, once: bool, options: &WorkOptions, json: bool) -> anyhow::Result<()> {
    let app = App::open(db).await?;
    let show = move |line: &WorkLine| {
        let printed = if json {
            print_json(line)
        } else {
            print_line(&line.to_string())
        };
        if let Err(e) = printed {
            tracing::warn!(error = %e, "cannot print a work report");
        }
    };
    if once {
        let line = expiry::work_once(&app, options).await?;
        show(&line);
    } else {
        let stats = expiry::work_service(&app, options, Arc::new(show), shutdown_signal()).await?;
        tracing::info!(?stats, "drained");
    }
    Ok(())
}

/// `reservations stats`: the figures, or with `--check` the verdict on recent lateness.
async fn stats(
    db: &str,
    check: bool,
    prometheus: bool,
    max_lateness: Option<Duration>,
    window: Duration,
    json: bool,
) -> anyhow::Result<()> {
    let app = App::open(db).await?;
    if check {
        check_lateness(&app, max_lateness, window, json).await
    } else {
        print_stats(&app, prometheus, json).await
    }
}

/// `reservations stats --check`: the verdict on recent expiry lateness.
async fn check_lateness(
    app: &App,
    max_lateness: Option<Duration>,
    window: Duration,
    json: bool,
) -> anyhow::Result<()> {
    let Some(max) = max_lateness else {
        return Err(
            Error::Invalid("--check needs a threshold: give --max-lateness DUR".into()).into(),
        );
    };
    let verdict = stats::check_lateness(&app.recent_lateness(window).await?, max);
    if json {
        print_json(&verdict)?;
    } else {
        print_line(&verdict.to_string())?;
    }
    if verdict.ok {
        Ok(())
    } else {
        Err(ThresholdCrossed.into())
    }
}

/// `reservations stats`: the figures, as text, JSON or Prometheus.
async fn print_stats(app: &App, prometheus: bool, json: bool) -> anyhow::Result<()> {
    let figures = app.figures().await?;
    if prometheus {
        let text = stats::prometheus(&figures)?;
        let mut out = std::io::stdout().lock();
        out.write_all(text.as_bytes())
            .and_then(|()| out.flush())
            .context("cannot write to stdout")
    } else if json {
        print_json(&Stats::from_figures(&figures))
    } else {
        print_line(&Stats::from_figures(&figures).to_string())
    }
}

/// `reservations replay`: flags checked before the database is touched.
async fn replay(db: &str, request: &Replay, json: bool) -> anyhow::Result<()> {
    // Refuse a lone --new-key or --confirm-eligible before touching the
    // database.
    app::check_replay_flags(request.new_key, request.confirm_eligible)?;
    let report = App::open(db).await?.replay(request).await?;
    if json {
        return print_json(&report);
    }
    let key = match &report.previous_key {
        Some(old) => format!("new idempotency key {} (was {old})", report.idempotency_key),
        None => format!("idempotency key kept: {}", report.idempotency_key),
    };
    print_line(&format!(
        "replayed {} by {}: state={} attempts={} replays={}; {key}",
        report.job.id, report.operator, report.job.state, report.job.attempts, report.job.replays
    ))
}

async fn shutdown_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let terminate = async {
        match signal(SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = terminate => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reservations::app::DEFAULT_WINDOW;
    use reservations::expiry::{DEFAULT_LEASE, DEFAULT_POLL};

    #[test]
    fn durations_parse_with_humantime() {
        assert_eq!(duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(duration("15m"), Ok(Duration::from_secs(900)));
        assert!(
            duration("5 parsecs")
                .unwrap_err()
                .contains("unknown time unit")
        );
        assert!(duration("soon").is_err());
    }

    #[test]
    fn the_defaults_match_the_library_constants() {
        assert_eq!(duration("30s"), Ok(DEFAULT_LEASE));
        assert_eq!(duration("1s"), Ok(DEFAULT_POLL));
        assert_eq!(duration("15m"), Ok(DEFAULT_WINDOW));
    }
}
