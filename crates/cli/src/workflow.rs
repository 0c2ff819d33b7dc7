//! `errand workflow show|cancel|replay ID`: a workflow's steps, and the
//! operator's actions on all of them at once.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use errand::{Admin, JobId, JobState, WorkflowAction, WorkflowId, WorkflowView};

use crate::exit::Failure;
use crate::flags::OperatorArgs;
use crate::output::{self, outln};

#[derive(Args, Debug)]
pub struct WorkflowArgs {
    #[command(subcommand)]
    command: WorkflowCommand,
}

#[derive(Subcommand, Debug)]
enum WorkflowCommand {
    /// Every step of a workflow with its state and dependencies, oldest
    /// first, and how many steps are in each state.
    Show(ShowArgs),
    /// Cancel every unfinished step (blocked, ready or running), each with
    /// an audit entry naming the workflow.
    Cancel(ActionArgs),
    /// Replay every dead step, each with an audit entry naming the
    /// workflow; steps waiting for them run once they succeed.
    Replay(ActionArgs),
}

#[derive(Args, Debug)]
struct ShowArgs {
    /// The workflow id.
    id: String,
    /// At most this many steps (1–10000).
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    limit: u32,
    /// Start after this step id (the last one of the previous page).
    #[arg(long)]
    after: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ActionArgs {
    /// The workflow id.
    id: String,
    #[command(flatten)]
    operator: OperatorArgs,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub async fn run(admin: &Admin, a: WorkflowArgs) -> Result<ExitCode, Failure> {
    match a.command {
        WorkflowCommand::Show(a) => show(admin, a).await,
        WorkflowCommand::Cancel(a) => act(admin, a, "cancelled").await,
        WorkflowCommand::Replay(a) => act(admin, a, "replayed").await,
    }
}

async fn show(admin: &Admin, a: ShowArgs) -> Result<ExitCode, Failure> {
    let id = WorkflowId::new(a.id)?;
    let after = a.after.map(JobId::new).transpose()?;
    let view = admin.workflow(&id, after, a.limit).await?;
    if a.json {
        output::json(&view)?;
    } else {
        print_view(&view);
    }
    Ok(ExitCode::SUCCESS)
}

fn print_view(view: &WorkflowView) {
    let counts: Vec<String> = JobState::ALL
        .iter()
        .filter(|s| view.count(**s) > 0)
        .map(|s| format!("{} {}", s.as_str(), view.count(*s)))
        .collect();
    let status = if view.finished() {
        "finished"
    } else {
        "unfinished"
    };
    outln!(
        "workflow {}: {} step(s), {status} ({})",
        view.id,
        view.total,
        counts.join(", ")
    );
    let idw = view
        .steps
        .iter()
        .map(|s| s.job.id.as_str().len())
        .max()
        .unwrap_or(2)
        .max(2);
    outln!(
        "{:idw$}  {:9}  {:16}  {:8}  DEPENDS_ON",
        "ID",
        "STATE",
        "KIND",
        "ATTEMPTS"
    );
    for step in &view.steps {
        let deps: Vec<&str> = step.depends_on.iter().map(JobId::as_str).collect();
        let more = (step.depends_on_count as usize).saturating_sub(deps.len());
        outln!(
            "{:idw$}  {:9}  {:16}  {:8}  {}{}",
            step.job.id.as_str(),
            step.job.state.as_str(),
            step.job.kind.as_str(),
            format!("{}/{}", step.job.attempts, step.job.max_attempts),
            if deps.is_empty() {
                "-".to_owned()
            } else {
                deps.join(",")
            },
            if more > 0 {
                format!(
                    " and {more} more (all {}: errand show {})",
                    step.depends_on_count, step.job.id
                )
            } else {
                String::new()
            }
        );
    }
    if let Some(next) = &view.next_after {
        outln!(
            "more steps: errand workflow show {} --after {next}",
            view.id
        );
    }
}

async fn act(admin: &Admin, a: ActionArgs, verb: &str) -> Result<ExitCode, Failure> {
    let action = WorkflowAction {
        id: WorkflowId::new(a.id)?,
        operator: crate::operator(a.operator.by),
        reason: a.operator.reason,
    };
    let acted = if verb == "cancelled" {
        admin.cancel_workflow(&action).await?
    } else {
        admin.replay_workflow(&action).await?
    };
    if a.json {
        output::json(&acted)?;
    } else {
        outln!(
            "{verb} {} step(s) of workflow {}",
            acted.jobs.len(),
            acted.workflow
        );
        for job in &acted.jobs {
            outln!("{verb} {}", output::job_line(&job.into()));
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct BatchArgs {
    #[command(subcommand)]
    command: BatchCommand,
}

#[derive(Subcommand, Debug)]
enum BatchCommand {
    /// Seal a batch: no job joins it after (`enqueue --batch`), and its
    /// callbacks are enqueued, each running once — on success when every
    /// job is done, on finish when every job has ended.
    Seal(SealArgs),
    /// A batch: sealed or open, how many of its jobs are in each state,
    /// and its callbacks.
    Show(BatchShowArgs),
}

#[derive(Args, Debug)]
struct SealArgs {
    /// The batch id.
    id: String,
    /// The kind of the job to run once every job of the batch is done.
    #[arg(long, value_name = "KIND")]
    on_success: Option<String>,
    /// Its payload (JSON).
    #[arg(long, requires = "on_success", value_name = "JSON")]
    on_success_payload: Option<String>,
    /// The kind of the job to run once every job of the batch has ended
    /// (done, dead or cancelled).
    #[arg(long, value_name = "KIND")]
    on_finish: Option<String>,
    /// Its payload (JSON).
    #[arg(long, requires = "on_finish", value_name = "JSON")]
    on_finish_payload: Option<String>,
    /// The callbacks' queue.
    #[arg(long, default_value = errand::core::DEFAULT_QUEUE)]
    queue: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct BatchShowArgs {
    /// The batch id.
    id: String,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

fn callback(
    kind: Option<String>,
    payload: Option<String>,
    queue: &str,
) -> Result<Option<errand::NewJob>, Failure> {
    let Some(kind) = kind else { return Ok(None) };
    let spec = errand::JobSpec {
        kind,
        queue: Some(queue.to_owned()),
        payload,
        ..errand::JobSpec::default()
    };
    Ok(Some(spec.build()?))
}

pub async fn batch(admin: &Admin, a: BatchArgs) -> Result<ExitCode, Failure> {
    let (id, json) = match a.command {
        BatchCommand::Seal(a) => {
            let seal = errand::BatchSeal {
                batch: WorkflowId::new(a.id)?,
                on_success: callback(a.on_success, a.on_success_payload, &a.queue)?,
                on_finish: callback(a.on_finish, a.on_finish_payload, &a.queue)?,
            };
            let sealed = errand::Client::new(admin.jobs().clone())
                .seal_batch(&seal)
                .await?;
            (sealed.id, a.json)
        }
        BatchCommand::Show(a) => (WorkflowId::new(a.id)?, a.json),
    };
    let view = admin.batch(&id).await?;
    if json {
        output::json(&view)?;
        return Ok(ExitCode::SUCCESS);
    }
    let b = &view.batch;
    let counts: Vec<String> = b
        .states
        .iter()
        .map(|c| format!("{} {}", c.state.as_str(), c.count))
        .collect();
    outln!(
        "batch {}: {} job(s){}, {}",
        b.id,
        b.total,
        if counts.is_empty() {
            String::new()
        } else {
            format!(" ({})", counts.join(", "))
        },
        match b.sealed_at {
            Some(at) => format!("sealed at {at}"),
            None => "open".to_owned(),
        }
    );
    for (what, job) in [
        ("on_success", &view.on_success_job),
        ("on_finish", &view.on_finish_job),
    ] {
        if let Some(job) = job {
            outln!("{what}: {}", output::job_line(&job.into()));
        }
    }
    Ok(ExitCode::SUCCESS)
}
