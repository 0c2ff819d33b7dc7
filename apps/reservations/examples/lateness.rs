//! Measures expiry lateness on an idle system.
//!
//! Creates `--holds` holds whose deadlines are spread evenly over
//! `--spread`, runs the expiry worker with the production defaults (1 s
//! poll, 30 s lease, or the values given) until every hold has expired,
//! and prints the lateness percentiles that `reservations stats` reports.
//!
//! ```sh
//! cargo run --release -p reservations --example lateness -- /tmp/lateness.sqlite
//! cargo run --release -p reservations --example lateness -- postgres://postgres@127.0.0.1:5432/lateness
//! ```
//!
//! The database must be new (or hold no other reservations): the figures
//! are read from it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use errand::Timestamp;
use reservations::app::{App, SEED_UNITS, Status, StayRequest, utc_date};
use reservations::expiry::{WorkOptions, work_service};
use reservations::stats::Stats;

/// Measures expiry lateness on an idle system.
#[derive(Debug, Parser)]
struct Args {
    /// A new SQLite file or a postgres:// URL of an empty database.
    db: String,
    /// How many holds.
    #[arg(long, default_value_t = 60)]
    holds: u32,
    /// Deadlines are spread evenly over this span, starting 1 s from now.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    spread: Duration,
    /// The worker's poll interval.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "1s")]
    poll: Duration,
    /// The worker's lease.
    #[arg(long, value_parser = humantime::parse_duration, default_value = "30s")]
    lease: Duration,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    App::init(&args.db).await?;
    let app = App::open(&args.db).await?;
    if !app.list().await?.is_empty() {
        bail!("{} already has reservations; use a new database", args.db);
    }
    let step = args.spread / args.holds.max(1);
    // Each hold of a unit asks for a night of its own (from tomorrow on,
    // UTC): two holds of one unit may not share a night.
    let tomorrow = utc_date(Timestamp::now())?
        .next_day()
        .context("no date after today")?;
    for i in 0..args.holds {
        let window = Duration::from_secs(1) + step * i;
        let unit = SEED_UNITS[i as usize % SEED_UNITS.len()].0;
        let from = tomorrow + time::Duration::days(i64::from(i));
        let to = from + time::Duration::days(1);
        app.hold(unit, "Lateness probe", StayRequest::dates(from, to), window)
            .await?;
    }
    let options = WorkOptions {
        poll: args.poll,
        lease: args.lease,
        ..WorkOptions::default()
    };
    let started = Instant::now();
    let watcher = app.clone();
    let all_expired = async move {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            match watcher.list().await {
                Ok(list) if list.iter().all(|r| r.status == Status::Expired) => return,
                Ok(_) => {}
                Err(e) => eprintln!("lateness: listing failed: {e}"),
            }
        }
    };
    let quiet: Arc<dyn Fn(&reservations::expiry::WorkLine) + Send + Sync> = Arc::new(|_| {});
    work_service(&app, &options, quiet, all_expired)
        .await
        .context("the worker failed")?;
    let stats = Stats::from_figures(&app.figures().await?);
    println!(
        "{} holds on {} expired in {:.1} s with poll {} and lease {}:",
        args.holds,
        app.backend_name(),
        started.elapsed().as_secs_f64(),
        humantime::format_duration(args.poll),
        humantime::format_duration(args.lease)
    );
    println!("{stats}");
    let bound = args.poll + args.lease;
    if let Some(max) = stats.lateness_ms.max {
        println!(
            "max lateness {max} ms against one poll plus one lease = {} ms",
            bound.as_millis()
        );
    }
    Ok(())
}
