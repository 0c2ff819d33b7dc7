//! The operator's commands on queues and the audit log: `pause`, `resume`,
//! `queues`, `purge`, `audit`, and what `show` says about a purged job.

use std::process::ExitCode;

use clap::Args;
use errand::{
    Admin, AuditEntry, AuditFilter, BulkAction, BulkOutcome, BulkRequest, Error, JobId, JobState,
    Name, PausedQueue, QueueAction, StatsRequest, Timestamp,
};
use serde::Serialize;

use crate::exit::{self, Failure};
use crate::output::{self, outln};
use crate::select::Selection;

/// `errand pause` and `errand resume`.
#[derive(Args, Debug)]
pub struct QueueActionArgs {
    /// The queue.
    pub queue: String,
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

/// `errand purge`.
#[derive(Args, Debug)]
pub struct PurgeArgs {
    #[command(flatten)]
    pub select: Selection,
    /// Show what would be purged without changing anything.
    #[arg(long)]
    pub dry_run: bool,
    /// Who is purging (recorded in the audit log).
    #[arg(long)]
    pub by: String,
    /// Why (required: a purge cannot be undone; recorded in the audit log).
    #[arg(long)]
    pub reason: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// `errand audit`.
#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Only entries about this job (it may have been purged since).
    #[arg(long)]
    pub job: Option<String>,
    /// Only entries about this queue or its jobs.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only entries about this stored schedule (`errand schedule`).
    #[arg(long)]
    pub schedule: Option<String>,
    /// At most this many entries, newest first.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    pub limit: u32,
    /// Only entries older than this sequence number: the `seq` of the last
    /// entry of the previous page.
    #[arg(long)]
    pub before: Option<u64>,
    /// Print JSON (an array of entries).
    #[arg(long)]
    pub json: bool,
}

/// A queue as `pause`, `resume` and `queues --json` describe it.
#[derive(Debug, Serialize)]
struct QueueState {
    queue: Name,
    paused: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    changed: Option<bool>,
    paused_by: Option<String>,
    paused_at: Option<Timestamp>,
    reason: Option<String>,
    /// How many of its jobs may run at once (`errand queue limit`); `null`:
    /// no cap. Only `queues` reads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    concurrency_limit: Option<Option<u32>>,
}

impl QueueState {
    fn new(queue: Name, pause: Option<&PausedQueue>, changed: Option<bool>) -> Self {
        QueueState {
            queue,
            paused: pause.is_some(),
            changed,
            paused_by: pause.map(|p| p.operator.clone()),
            paused_at: pause.map(|p| p.paused_at),
            reason: pause.and_then(|p| p.reason.clone()),
            concurrency_limit: None,
        }
    }
}

fn action(a: QueueActionArgs) -> Result<QueueAction, Failure> {
    let action = QueueAction {
        queue: Name::parse("queue", a.queue)?,
        operator: a.by,
        reason: a.reason,
    };
    action.validate()?;
    Ok(action)
}

fn find<'a>(paused: &'a [PausedQueue], queue: &Name) -> Option<&'a PausedQueue> {
    paused.iter().find(|p| &p.queue == queue)
}

/// `: REASON` ([`output::escaped`]), or nothing without a reason.
fn why(reason: Option<&str>) -> String {
    reason
        .map(|r| format!(": {}", output::escaped(r)))
        .unwrap_or_default()
}

/// `errand pause QUEUE`.
pub async fn pause(admin: &Admin, a: QueueActionArgs) -> Result<ExitCode, Failure> {
    let as_json = a.json;
    let action = action(a)?;
    let changed = admin.pause_queue(&action).await?;
    let paused = admin.paused_queues().await?;
    let current = find(&paused, &action.queue);
    if as_json {
        output::json(&QueueState::new(
            action.queue.clone(),
            current,
            Some(changed),
        ))?;
    } else if changed {
        outln!(
            "paused queue {} by {}{}; no worker takes its jobs until `errand resume {}`",
            action.queue,
            action.operator,
            why(action.reason.as_deref()),
            action.queue
        );
    } else {
        match current {
            Some(p) => outln!(
                "queue {} was already paused by {} at {}{}; nothing changed",
                p.queue,
                output::escaped(&p.operator),
                p.paused_at,
                why(p.reason.as_deref())
            ),
            // Resumed by someone else between the two calls.
            None => outln!(
                "queue {} was already paused, and has been resumed since; nothing changed",
                action.queue
            ),
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `errand resume QUEUE`.
pub async fn resume(admin: &Admin, a: QueueActionArgs) -> Result<ExitCode, Failure> {
    let as_json = a.json;
    let action = action(a)?;
    let before = admin.paused_queues().await?;
    let was = find(&before, &action.queue);
    let changed = admin.resume_queue(&action).await?;
    if as_json {
        let after = admin.paused_queues().await?;
        output::json(&QueueState::new(
            action.queue.clone(),
            find(&after, &action.queue),
            Some(changed),
        ))?;
    } else if changed {
        let since = was
            .map(|p| {
                let by = output::escaped(&p.operator);
                format!(" (paused by {by} at {})", p.paused_at)
            })
            .unwrap_or_default();
        outln!(
            "resumed queue {}{since} by {}{}",
            action.queue,
            action.operator,
            why(action.reason.as_deref())
        );
    } else {
        outln!("queue {} was not paused; nothing changed", action.queue);
    }
    Ok(ExitCode::SUCCESS)
}

/// `errand queues`: every queue the statistics know, paused or not.
pub async fn queues(admin: &Admin, as_json: bool) -> Result<ExitCode, Failure> {
    let stats = admin.stats(&StatsRequest::default()).await?;
    let paused = admin.paused_queues().await?;
    let list: Vec<QueueState> = stats
        .queues
        .iter()
        .map(|q| QueueState {
            concurrency_limit: Some(q.concurrency_limit),
            ..QueueState::new(q.queue.clone(), find(&paused, &q.queue), None)
        })
        .collect();
    if as_json {
        output::json(&list)?;
        return Ok(ExitCode::SUCCESS);
    }
    if list.is_empty() {
        outln!("no queues (none has waiting, running or dead jobs, or is paused or capped)");
        return Ok(ExitCode::SUCCESS);
    }
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|q| {
            vec![
                q.queue.to_string(),
                if q.paused { "paused" } else { "active" }.to_owned(),
                q.concurrency_limit
                    .flatten()
                    .map_or_else(|| "-".to_owned(), |n| n.to_string()),
                q.paused_at
                    .map_or_else(|| "-".to_owned(), |t| t.to_rfc3339()),
                q.paused_by.clone().unwrap_or_else(|| "-".to_owned()),
                one_line(q.reason.as_deref()),
            ]
        })
        .collect();
    output::table(&["QUEUE", "STATE", "LIMIT", "SINCE", "BY", "REASON"], &rows);
    Ok(ExitCode::SUCCESS)
}

/// `errand purge`.
pub async fn purge(admin: &Admin, a: PurgeArgs) -> Result<ExitCode, Failure> {
    let req = BulkRequest {
        action: BulkAction::Purge,
        jobs: a.select.selection("purge", JobState::Dead, &[])?,
        operator: a.by,
        reason: Some(a.reason),
        dry_run: a.dry_run,
    };
    let shown = crate::progress::Progress::spinner(
        a.json || a.dry_run,
        output::acting_on("purging", &req.jobs),
    );
    let outcome = admin.act_on_selection(&req).await;
    shown.finish();
    let outcome = outcome.map_err(|e| match e {
        Error::InvalidState { id, state, hint } => Error::InvalidState {
            id,
            state,
            hint: format!("{hint}; nothing was purged"),
        },
        other => other,
    })?;
    let purged = match outcome {
        BulkOutcome::Planned(planned) => {
            let none = "nothing matches; nothing would be purged";
            output::dry_run_lines(&planned, a.json, none, |p| match p.refused {
                Some(why) => format!("would refuse ({why})"),
                None => "would purge".to_owned(),
            })?;
            return Ok(ExitCode::SUCCESS);
        }
        BulkOutcome::Purged(purged) => purged,
        _ => return Err(Error::storage("a purge answered as another action").into()),
    };
    if a.json {
        let ids: Vec<&JobId> = purged.iter().map(|j| &j.id).collect();
        output::json(&serde_json::json!({
            "dry_run": false,
            "purged": ids,
            "operator": req.operator,
            "reason": req.reason,
        }))?;
    } else if purged.is_empty() {
        outln!("nothing matches; nothing purged");
    } else {
        for j in &purged {
            outln!(
                "purged {} (queue={} kind={}) by {}",
                j.id,
                j.queue,
                j.kind,
                req.operator
            );
        }
        outln!(
            "{} dead job(s) purged; the audit log keeps who, when and why (errand audit --job ID)",
            purged.len()
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// `errand audit`.
pub async fn audit(admin: &Admin, a: AuditArgs) -> Result<ExitCode, Failure> {
    let filter = AuditFilter {
        job: a.job.map(JobId::new).transpose()?,
        queue: crate::name("queue", a.queue)?,
        schedule: crate::name("schedule", a.schedule)?,
        before: a.before,
        limit: Some(a.limit),
    };
    let entries = admin.audit_log(&filter).await?;
    if a.json {
        output::json(&entries)?;
        return Ok(ExitCode::SUCCESS);
    }
    audit_table(&entries);
    if entries.len() == filter.effective_limit() as usize
        && let Some(last) = entries.last()
    {
        outln!("(more may follow: add --before {})", last.seq);
    }
    Ok(ExitCode::SUCCESS)
}

fn audit_table(entries: &[AuditEntry]) {
    if entries.is_empty() {
        outln!("no audit entries");
        return;
    }
    let rows: Vec<Vec<String>> = entries
        .iter()
        .map(|e| {
            vec![
                e.seq.to_string(),
                e.at.to_rfc3339(),
                e.action.clone(),
                match (&e.job_id, &e.copy_id, &e.schedule) {
                    (Some(job), Some(copy), _) => format!("{job} -> {copy}"),
                    (None, _, Some(schedule)) => format!("schedule {schedule}"),
                    (job, _, _) => job.as_ref().map_or("-", JobId::as_str).to_owned(),
                },
                e.queue.as_ref().map_or("-", Name::as_str).to_owned(),
                e.operator.clone(),
                one_line(e.reason.as_deref()),
            ]
        })
        .collect();
    output::table(
        &["SEQ", "AT", "ACTION", "JOB", "QUEUE", "OPERATOR", "REASON"],
        &rows,
    );
}

/// A table cell of optional text (the table escapes it).
fn one_line(text: Option<&str>) -> String {
    text.unwrap_or("-").to_owned()
}

/// For `show` of a job that does not exist: when the newest audit entry
/// about its id is a purge, a not-found failure that says who purged it,
/// when and why; otherwise the plain not-found error.
pub async fn not_found(admin: &Admin, id: &JobId, e: Error) -> Failure {
    let filter = AuditFilter {
        job: Some(id.clone()),
        limit: Some(1),
        ..AuditFilter::default()
    };
    match admin.audit_log(&filter).await {
        Ok(entries) => match entries.first() {
            Some(p) if p.action == "purge" => Failure::Coded(
                exit::NOT_FOUND,
                format!(
                    "job `{id}` was purged by {} at {}{}; its audit entries remain (errand audit --job {id})",
                    output::escaped(&p.operator),
                    p.at,
                    why(p.reason.as_deref())
                ),
            ),
            _ => e.into(),
        },
        // The job is missing either way; the lookup's failure is secondary.
        Err(_) => e.into(),
    }
}
