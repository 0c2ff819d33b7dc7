//! `errand schedule`: periodic jobs. `schedule add|list|remove|pause|resume`
//! keep schedules in the database, where every `errand work` service runs
//! them; the flag form (`schedule --name N --cron P --kind K`) runs one
//! schedule in this process only.

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use errand::{
    Admin, Misfire, Name, NewJob, Payload, ScheduleAction, ScheduleAdd, ScheduleAddOutcome,
    ScheduleDefinition, ScheduleView, Store, Timestamp,
};

use crate::exit::Failure;
use crate::flags::OperatorArgs;
use crate::output::{self, outln};

#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
pub struct ScheduleArgs {
    #[command(subcommand)]
    command: Option<ScheduleCommand>,
    #[command(flatten)]
    run: RunArgs,
}

#[derive(Subcommand, Debug)]
enum ScheduleCommand {
    /// Store a schedule in the database: every `errand work` service
    /// enqueues its job at each tick, exactly once per tick however many
    /// run. The same definition again changes nothing; another one under
    /// the name needs --replace.
    Add(AddArgs),
    /// The stored schedules: pattern, kind, queue, misfire policy, next
    /// tick, and who paused them.
    List(ListArgs),
    /// Delete a stored schedule (the jobs it enqueued stay).
    Remove(ActionArgs),
    /// Stop enqueueing a stored schedule's ticks until it is resumed.
    Pause(ActionArgs),
    /// Enqueue a paused schedule's ticks again, from now on (ticks missed
    /// while it was paused are not enqueued).
    Resume(ActionArgs),
}

#[derive(Args, Debug)]
struct AddArgs {
    /// The schedule's name (part of every job id: cron:NAME:TICK).
    name: String,
    /// Cron pattern, 5 fields (minute hour day month weekday) or 6 with
    /// seconds first, read in --tz.
    #[arg(long)]
    cron: String,
    /// The IANA time zone the pattern is read in (Europe/Berlin,
    /// America/New_York). A time a spring-forward day skips runs at the
    /// end of the jump; one a fall-back day repeats runs once.
    #[arg(long, default_value = "UTC", value_name = "ZONE")]
    tz: errand::core::ScheduleZone,
    /// Job kind.
    #[arg(long)]
    kind: String,
    /// Payload as JSON text.
    #[arg(long, default_value = "{}")]
    payload: String,
    /// Queue name.
    #[arg(long, default_value = errand::core::DEFAULT_QUEUE)]
    queue: String,
    /// Attempt budget of each job.
    #[arg(long, default_value_t = errand::core::DEFAULT_MAX_ATTEMPTS)]
    max_attempts: u32,
    /// Ticks missed while no service ran: skip, once (the latest), or
    /// backfill:N.
    #[arg(long, default_value = "skip")]
    misfire: Misfire,
    /// Replace a stored schedule of that name with another definition.
    #[arg(long)]
    replace: bool,
    #[command(flatten)]
    operator: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ListArgs {
    /// Print JSON (an array of schedules).
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ActionArgs {
    /// The schedule's name.
    name: String,
    #[command(flatten)]
    operator: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

/// The flag form: one schedule run by this process.
#[derive(Args, Debug)]
struct RunArgs {
    /// The schedule's name (part of every job id: cron:NAME:TICK).
    #[arg(long, required = true)]
    name: Option<String>,
    /// Cron pattern, 5 fields (minute hour day month weekday) or 6 with
    /// seconds first, read in --tz.
    #[arg(long, required = true)]
    cron: Option<String>,
    /// The IANA time zone the pattern is read in (default UTC).
    #[arg(long, default_value = "UTC", value_name = "ZONE")]
    tz: errand::core::ScheduleZone,
    /// Job kind.
    #[arg(long, required = true)]
    kind: Option<String>,
    /// Queue name.
    #[arg(long, default_value = errand::core::DEFAULT_QUEUE)]
    queue: String,
    /// Payload as JSON text.
    #[arg(long, default_value = "{}")]
    payload: String,
    /// Attempt budget of each job.
    #[arg(long, default_value_t = errand::core::DEFAULT_MAX_ATTEMPTS)]
    max_attempts: u32,
    /// Missed ticks: skip, once (the latest), or backfill:N.
    #[arg(long, default_value = "skip")]
    misfire: Misfire,
    /// Run one pass and exit.
    #[arg(long)]
    once: bool,
    /// Print JSON (one object per job created).
    #[arg(long)]
    json: bool,
}

pub async fn run(store: Arc<dyn Store>, a: ScheduleArgs) -> Result<ExitCode, Failure> {
    let admin = Admin::new(store.clone());
    match a.command {
        None => run_here(store, a.run).await,
        Some(ScheduleCommand::Add(a)) => add(&admin, a).await,
        Some(ScheduleCommand::List(a)) => list(&admin, a).await,
        Some(ScheduleCommand::Remove(a)) => remove(&admin, a).await,
        Some(ScheduleCommand::Pause(a)) => toggle(&admin, a, true).await,
        Some(ScheduleCommand::Resume(a)) => toggle(&admin, a, false).await,
    }
}

async fn add(admin: &Admin, a: AddArgs) -> Result<ExitCode, Failure> {
    let definition = ScheduleDefinition::new(
        &a.name,
        &a.cron,
        &a.kind,
        Payload::from_json_text(a.payload)?,
    )?
    .with_options(Some(&a.queue), Some(a.max_attempts), Some(a.misfire))?
    .in_zone(a.tz);
    let req = ScheduleAdd {
        definition,
        replace: a.replace,
        operator: crate::operator(a.operator.by),
        reason: a.operator.reason,
    };
    let added = admin.add_schedule(&req).await?;
    if a.json {
        output::json(&added)?;
        return Ok(ExitCode::SUCCESS);
    }
    let s = &added.schedule;
    let what = match added.outcome {
        ScheduleAddOutcome::Added => "added",
        ScheduleAddOutcome::Replaced => "replaced",
        ScheduleAddOutcome::Unchanged => "unchanged (the same definition was stored already)",
    };
    outln!(
        "schedule {} {what}: {}",
        s.definition.name,
        s.definition.describe()
    );
    if let Some(p) = &s.paused {
        outln!(
            "it is paused (by {} at {}): `errand schedule resume {}` starts it",
            output::escaped(&p.operator),
            p.at,
            s.definition.name
        );
    } else if let Some(next) = s.next_tick(Timestamp::now()) {
        outln!("next tick {next}; every `errand work` service enqueues it");
    }
    Ok(ExitCode::SUCCESS)
}

async fn list(admin: &Admin, a: ListArgs) -> Result<ExitCode, Failure> {
    let schedules = admin.schedules().await?;
    let now = Timestamp::now();
    if a.json {
        let listed: Vec<ScheduleView> = schedules.into_iter().map(|s| s.view(now)).collect();
        output::json(&listed)?;
        return Ok(ExitCode::SUCCESS);
    }
    if schedules.is_empty() {
        outln!("no stored schedules (add one with `errand schedule add NAME --cron P --kind K`)");
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = schedules
        .iter()
        .map(|s| {
            let d = &s.definition;
            vec![
                d.name.to_string(),
                d.cron.clone(),
                d.tz.to_string(),
                d.kind.to_string(),
                d.queue.to_string(),
                d.misfire.to_string(),
                s.next_tick(now)
                    .map_or_else(|| "-".to_owned(), |t| t.to_rfc3339()),
                match &s.paused {
                    None => "running".to_owned(),
                    Some(p) => format!(
                        "paused by {} at {}{}",
                        p.operator,
                        p.at,
                        p.reason
                            .as_deref()
                            .map(|r| format!(": {r}"))
                            .unwrap_or_default()
                    ),
                },
            ]
        })
        .collect();
    output::table(
        &[
            "NAME",
            "CRON",
            "TZ",
            "KIND",
            "QUEUE",
            "MISFIRE",
            "NEXT TICK",
            "STATE",
        ],
        &rows,
    );
    Ok(ExitCode::SUCCESS)
}

fn action(a: &ActionArgs) -> Result<ScheduleAction, Failure> {
    Ok(ScheduleAction {
        name: Name::parse("schedule", a.name.clone())?,
        operator: crate::operator(a.operator.by.clone()),
        reason: a.operator.reason.clone(),
    })
}

async fn remove(admin: &Admin, a: ActionArgs) -> Result<ExitCode, Failure> {
    let action = action(&a)?;
    let removed = admin.remove_schedule(&action).await?;
    if a.json {
        // As the API answers: no next tick once removed.
        let removed = ScheduleView {
            schedule: removed,
            next_tick: None,
        };
        output::json(&serde_json::json!({ "removed": removed }))?;
    } else {
        outln!(
            "removed schedule {} ({}) by {}; the jobs it enqueued stay",
            removed.definition.name,
            removed.definition.describe(),
            action.operator
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn toggle(admin: &Admin, a: ActionArgs, pause: bool) -> Result<ExitCode, Failure> {
    let action = action(&a)?;
    let acted = if pause {
        admin.pause_schedule(&action).await?
    } else {
        admin.resume_schedule(&action).await?
    };
    if a.json {
        output::json(&acted)?;
        return Ok(ExitCode::SUCCESS);
    }
    let name = &acted.schedule.definition.name;
    match (pause, acted.changed) {
        (true, true) => outln!(
            "paused schedule {name} by {}; no tick is enqueued until `errand schedule resume {name}`",
            action.operator
        ),
        (false, true) => outln!(
            "resumed schedule {name} by {}; ticks from now on are enqueued",
            action.operator
        ),
        (true, false) => outln!("schedule {name} was already paused; nothing changed"),
        (false, false) => outln!("schedule {name} was not paused; nothing changed"),
    }
    Ok(ExitCode::SUCCESS)
}

/// The flag form: runs one schedule in this process until SIGTERM/SIGINT
/// (or one pass with --once).
async fn run_here(store: Arc<dyn Store>, a: RunArgs) -> Result<ExitCode, Failure> {
    let (Some(name), Some(cron), Some(kind)) = (a.name, a.cron, a.kind) else {
        return Err(Failure::Usage(
            "give a subcommand (add, list, remove, pause, resume), or --name, --cron and --kind \
             to run one schedule in this process"
                .to_owned(),
        ));
    };
    let template = NewJob::new(&kind, Payload::from_json_text(a.payload)?)?
        .on_queue(&a.queue)?
        .with_max_attempts(a.max_attempts)?;
    let sched = errand::CronSchedule::new(&name, &cron, template, a.misfire)?.in_zone(a.tz);
    let enqueuer = errand::CronEnqueuer::new(store, vec![sched]);
    let report = |inserted: Vec<errand::Inserted>| -> anyhow::Result<()> {
        for i in inserted.iter().filter(|i| i.created) {
            if a.json {
                output::json(
                    &serde_json::json!({"created": true, "id": i.job.id, "available_at": i.job.available_at}),
                )?;
            } else {
                outln!("enqueued {}", output::job_line(&(&i.job).into()));
            }
        }
        Ok(())
    };
    if a.once {
        report(enqueuer.run_once(Timestamp::now()).await?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;
    let mut int = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
        .context("installing the SIGINT handler")?;
    loop {
        match enqueuer.run_once(Timestamp::now()).await {
            Ok(inserted) => report(inserted)?,
            Err(e) => {
                tracing::warn!(error = %e, "enqueueing the due ticks failed; retrying at the next tick")
            }
        }
        let now = Timestamp::now();
        let wait = enqueuer
            .next_wake(now)
            .map_or(Duration::from_secs(60), |t| t.since(now))
            .min(Duration::from_secs(60));
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = term.recv() => return Ok(ExitCode::SUCCESS),
            _ = int.recv() => return Ok(ExitCode::SUCCESS),
        }
    }
}
