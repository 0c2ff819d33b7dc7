//! `errand queue limit QUEUE --concurrency N | --clear`: how many of a
//! queue's jobs may run at once across every worker process and host.

use std::process::ExitCode;

use clap::{ArgGroup, Args, Subcommand};
use errand::{Admin, Name, QueueLimit, QueueLimitRequest, Timestamp};
use serde::Serialize;

use crate::exit::Failure;
use crate::output::{self, outln};

/// `errand queue …`.
#[derive(Args, Debug)]
pub struct QueueArgs {
    #[command(subcommand)]
    pub command: QueueCommand,
}

/// The `errand queue` subcommands.
#[derive(Subcommand, Debug)]
pub enum QueueCommand {
    /// Cap how many of a queue's jobs run at once across every worker
    /// process and host, from each worker's next claim (no restart), or
    /// clear the cap. Each worker's --concurrency still applies beneath it.
    /// Audited.
    Limit(LimitArgs),
}

/// `errand queue limit`.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("cap").required(true).args(["concurrency", "clear"])))]
pub struct LimitArgs {
    /// The queue.
    pub queue: String,
    /// At most this many of the queue's jobs run at once (1 to 100000).
    #[arg(long)]
    pub concurrency: Option<u32>,
    /// Remove the queue's cap.
    #[arg(long)]
    pub clear: bool,
    /// Who is acting (recorded in the audit log).
    #[arg(long)]
    pub by: String,
    /// Why (recorded in the audit log).
    #[arg(long)]
    pub reason: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// A queue's cap as `queue limit --json` describes it.
#[derive(Debug, Serialize)]
struct LimitState {
    queue: Name,
    /// The cap now; `null`: none.
    concurrency_limit: Option<u32>,
    changed: bool,
    set_by: Option<String>,
    set_at: Option<Timestamp>,
    reason: Option<String>,
}

/// Runs an `errand queue` subcommand.
pub async fn run(admin: &Admin, args: QueueArgs) -> Result<ExitCode, Failure> {
    match args.command {
        QueueCommand::Limit(a) => limit(admin, a).await,
    }
}

async fn limit(admin: &Admin, a: LimitArgs) -> Result<ExitCode, Failure> {
    let request = QueueLimitRequest {
        queue: Name::parse("queue", a.queue)?,
        concurrency: a.concurrency,
        operator: a.by,
        reason: a.reason,
    };
    request.validate()?;
    let before = limit_of(admin, &request.queue).await?;
    let changed = admin.set_queue_limit(&request).await?;
    let now = limit_of(admin, &request.queue).await?;
    if a.json {
        output::json(&LimitState {
            queue: request.queue.clone(),
            concurrency_limit: now.as_ref().map(|l| l.concurrency),
            changed,
            set_by: now.as_ref().map(|l| l.operator.clone()),
            set_at: now.as_ref().map(|l| l.set_at),
            reason: now.and_then(|l| l.reason),
        })?;
        return Ok(ExitCode::SUCCESS);
    }
    let q = &request.queue;
    let why = request
        .reason
        .as_deref()
        .map(|r| format!(": {}", output::escaped(r)))
        .unwrap_or_default();
    match (request.concurrency, changed, before) {
        (Some(n), true, _) => outln!(
            "queue {q}: at most {n} of its jobs run at once across every worker, from each \
             worker's next claim; set by {}{why}",
            request.operator
        ),
        (Some(n), false, _) => {
            outln!("queue {q} already has a cap of {n}; nothing changed");
        }
        (None, true, Some(was)) => outln!(
            "queue {q}: its cap of {} is cleared by {}{why}; workers take its jobs as their \
             own concurrency allows",
            was.concurrency,
            request.operator
        ),
        (None, true, None) => outln!("queue {q}: its cap is cleared by {}{why}", request.operator),
        (None, false, _) => outln!("queue {q} has no cap; nothing changed"),
    }
    Ok(ExitCode::SUCCESS)
}

async fn limit_of(admin: &Admin, queue: &Name) -> Result<Option<QueueLimit>, Failure> {
    Ok(admin
        .queue_limits()
        .await?
        .into_iter()
        .find(|l| &l.queue == queue))
}
