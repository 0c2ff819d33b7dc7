//! The commands on jobs: `enqueue`, `jobs`, `show`, `replay` (and copies),
//! `cancel`, `reschedule` and `prune`.

use std::io::Read;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use errand::{
    BulkAction, BulkOutcome, BulkRequest, CancelRequest, Error, JobFilter, JobId, JobSearch,
    JobState, PayloadTerm, Schedule, Store,
};

use crate::args::{
    CancelArgs, EnqueueArgs, JobsArgs, PruneArgs, ReplayArgs, RescheduleArgs, ShowArgs,
};
use crate::exit::Failure;
use crate::output::{errln, outln};
use crate::{admin, output, progress};
use crate::{ids, name, operator, time_arg, traceparent_from_env};

pub(crate) async fn enqueue(store: Arc<dyn Store>, a: EnqueueArgs) -> Result<ExitCode, Failure> {
    let text = if a.payload == "-" {
        let mut buf = String::new();
        std::io::stdin()
            .take(errand::core::MAX_PAYLOAD_BYTES as u64 + 1)
            .read_to_string(&mut buf)
            .context("reading the payload from stdin")?;
        buf
    } else {
        a.payload
    };
    let job = errand::JobSpec {
        kind: a.kind,
        queue: Some(a.queue),
        payload: Some(text),
        id: a.id,
        delay: a.delay,
        run_at: a.run_at,
        max_attempts: Some(a.max_attempts),
        max_lease_expiries: Some(a.max_lease_expiries),
        give_up_after: a.give_up_after,
        priority: Some(a.priority),
        key_limit: (a.key.is_some() && !a.ordered).then_some(a.key_limit),
        key: a.key,
        ordered: a.ordered,
        deadline: a.deadline,
        traceparent: a.traceparent.or_else(traceparent_from_env),
        depends_on: a.depends_on,
        on_dependency_failure: a.on_dependency_failure,
        workflow: a.workflow,
        tags: a.tags,
        meta: crate::flags::meta_pairs(&a.meta)?,
        unique_for: a.unique_for,
        unique_while: a.unique_while,
        debounce: a.debounce,
        unique_key: a.unique_key,
        batch: a.batch,
        await_signal: a.await_signal,
        await_timeout: a.await_timeout,
        on_await_timeout: a.on_await_timeout,
    }
    .build()?;
    let inserted = errand::Client::new(store).enqueue(job).await?;
    if a.json {
        output::json(&output::Enqueued {
            created: inserted.created,
            job: &inserted.job,
        })?;
    } else {
        let verb = if inserted.created {
            "enqueued"
        } else {
            "exists"
        };
        outln!("{verb} {}", output::job_line(&(&inserted.job).into()));
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn jobs(admin: &errand::Admin, a: JobsArgs) -> Result<ExitCode, Failure> {
    if let Some(tag) = &a.tag {
        errand::core::check_tag(tag)?;
    }
    let mut search = JobSearch {
        filter: JobFilter {
            state: a.state.map(|s| s.parse::<JobState>()).transpose()?,
            queue: name("queue", a.queue)?,
            kind: name("kind", a.kind)?,
            workflow: a.workflow.map(errand::core::WorkflowId::new).transpose()?,
            tag: a.tag,
            limit: Some(a.limit),
            after: a.after.map(JobId::new).transpose()?,
            max_bytes: Some(errand::core::DEFAULT_PAGE_BYTES),
            ..JobFilter::default()
        },
        meta: crate::flags::meta_pairs(&a.meta)?,
        payload: a
            .terms
            .iter()
            .map(|t| PayloadTerm::parse(t))
            .collect::<Result<_, _>>()?,
        scan: a.scan,
    };
    if a.scan.is_some() && !search.has_terms() {
        return Err(Error::invalid(
            "--scan bounds a search: give it with --meta KEY=VALUE or --where payload.PATH=VALUE",
        )
        .into());
    }
    let bound = u64::from(search.scan_bound()?);
    let mut scanned = 0_u64;
    // Pages bounded by bytes, each printed before the next is read, until
    // --limit jobs are printed, the listing ends or a search has read
    // --scan jobs.
    let mut listing = output::JobListing::new(a.json);
    let mut left = a.limit;
    while left > 0 && !output::stdout_gone() {
        search.filter.limit = Some(left);
        search.scan = Some(u32::try_from(bound - scanned).unwrap_or(u32::MAX));
        let page = admin.search(&search).await?;
        listing.page(&page.jobs)?;
        left = left.saturating_sub(u32::try_from(page.jobs.len()).unwrap_or(u32::MAX));
        scanned += page.scanned;
        let Some(next) = page.next else { break };
        if left > 0 && search.has_terms() && (page.stopped || scanned >= bound) {
            listing.finish();
            errln!(
                "the search stopped after reading {scanned} jobs, at {next}, before the listing's end; \
                 go on with --after {next}, or raise --scan"
            );
            return Ok(ExitCode::SUCCESS);
        }
        search.filter.after = Some(next);
    }
    listing.finish();
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn show(admin: &errand::Admin, a: ShowArgs) -> Result<ExitCode, Failure> {
    let id = JobId::new(a.id)?;
    let detail = match admin.detail(&id).await {
        Ok(d) => d,
        Err(e @ Error::NotFound(_)) => return Err(admin::not_found(admin, &id, e).await),
        Err(e) => return Err(e.into()),
    };
    if a.json {
        output::json(&detail)?;
    } else {
        output::detail(&detail);
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn replay(admin: &errand::Admin, a: ReplayArgs) -> Result<ExitCode, Failure> {
    let state = if a.cancelled {
        JobState::Cancelled
    } else {
        JobState::Dead
    };
    let jobs = a
        .select
        .selection("replay", state, &[("--cancelled", a.cancelled)])?;
    let req = BulkRequest {
        action: if a.new_key {
            BulkAction::Copy
        } else {
            BulkAction::Replay
        },
        jobs,
        operator: operator(a.operator.by),
        reason: a.operator.reason,
        dry_run: a.dry_run,
    };
    let verb = if a.new_key { "copying" } else { "replaying" };
    let shown =
        progress::Progress::spinner(a.json || a.dry_run, output::acting_on(verb, &req.jobs));
    let outcome = admin.act_on_selection(&req).await;
    shown.finish();
    match outcome? {
        BulkOutcome::Planned(planned) => {
            let none = "nothing matches; nothing would be replayed";
            output::dry_run_lines(&planned, a.json, none, |p| match (p.refused, a.new_key) {
                (Some(_), _) => "would refuse".to_owned(),
                (None, false) => "would replay".to_owned(),
                (None, true) => "would copy".to_owned(),
            })?;
            Ok(ExitCode::SUCCESS)
        }
        BulkOutcome::Copied(copied) => copies_done(&copied, &req.operator, a.json),
        BulkOutcome::Replayed(replayed) => {
            let replayed = errand::briefs(&replayed);
            if a.json {
                output::json(&output::JobsDone {
                    dry_run: false,
                    jobs: &replayed,
                })?;
            } else if replayed.is_empty() {
                outln!("nothing matches; nothing replayed");
            }
            for j in replayed.iter().filter(|_| !a.json) {
                outln!(
                    "replayed {} (replays={}) by {}",
                    j.id,
                    j.replays,
                    req.operator
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        BulkOutcome::Purged(_) => Err(Error::storage("a replay answered as a purge").into()),
    }
}

/// What `replay --new-key` made: one new job per dead or cancelled
/// original, inserted together with their audit entries (all or none); the
/// originals are not touched.
fn copies_done(
    copied: &[errand::Copied],
    operator: &str,
    as_json: bool,
) -> Result<ExitCode, Failure> {
    if copied.is_empty() {
        if as_json {
            output::json(&output::JobsDone::<errand::JobBrief> {
                dry_run: false,
                jobs: &[],
            })?;
        } else {
            outln!("nothing matches; nothing replayed");
        }
        return Ok(ExitCode::SUCCESS);
    }
    if as_json {
        let copies: Vec<output::Copy> = copied
            .iter()
            .map(|c| output::Copy {
                from: c.from.clone(),
                job: (&c.job).into(),
            })
            .collect();
        output::json(&output::Copies {
            dry_run: false,
            copies: &copies,
        })?;
    } else {
        for c in copied {
            outln!(
                "copied job {} to new job {} (queue={} kind={}) by {}",
                c.from,
                c.job.id,
                c.job.queue,
                c.job.kind,
                operator
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn cancel(admin: &errand::Admin, a: CancelArgs) -> Result<ExitCode, Failure> {
    let req = CancelRequest {
        ids: ids(a.ids)?,
        operator: operator(a.operator.by),
        reason: a.operator.reason,
    };
    let cancelled = admin.cancel_jobs(&req).await?;
    if a.json {
        output::json(&cancelled)?;
    } else {
        for j in &cancelled {
            outln!("cancelled {} by {}", j.id, req.operator);
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn reschedule(
    admin: &errand::Admin,
    a: RescheduleArgs,
) -> Result<ExitCode, Failure> {
    let run = match (time_arg("at", a.at)?, a.after, a.now) {
        (Some(t), _, _) => Some(Schedule::At(t)),
        (None, Some(d), _) => Some(Schedule::After(d)),
        (None, None, true) => Some(Schedule::Now),
        (None, None, false) => None,
    };
    let req = errand::RescheduleRequest {
        ids: ids(a.ids)?,
        run,
        priority: a.priority,
        operator: operator(a.operator.by),
        reason: a.operator.reason,
    };
    let moved = admin.reschedule_jobs(&req).await?;
    if a.json {
        output::json(&moved)?;
    } else {
        for j in &moved {
            outln!(
                "rescheduled {} (due {}, priority {}) by {}",
                j.id,
                j.available_at,
                j.priority,
                req.operator
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub(crate) async fn prune(store: Arc<dyn Store>, a: PruneArgs) -> Result<ExitCode, Failure> {
    let mut pruner = errand::Pruner::new(store);
    pruner.keep = a.older_than;
    let shown = progress::Progress::counter(a.json, "pruning finished jobs: deleted");
    let deleted = pruner.run_once_with(|n| shown.set(n)).await?;
    shown.finish();
    if a.json {
        output::json(&serde_json::json!({ "deleted": deleted }))?;
    } else {
        outln!(
            "deleted {deleted} finished jobs older than {}",
            humantime::format_duration(a.older_than)
        );
    }
    Ok(ExitCode::SUCCESS)
}
