//! `POST /v1/bulk/replay`: `errand replay` over HTTP — dead (or cancelled)
//! jobs named by id or chosen by filter with a bound, all or none, each
//! audited; `dry_run` shows what would be acted on, `new_key` copies them
//! under new ids instead of replaying them in place. Answers name the jobs
//! without their payloads ([`JobBrief`]): up to 10,000 jobs of up to 1 MiB
//! each would make an answer of gigabytes. A job's payload is read with
//! the job, or a listing page, which has a byte budget.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use errand::{
    BulkAction, BulkFilter, BulkOutcome, BulkRequest, JobBrief, JobId, JobState, Name, Selection,
};
use serde::{Deserialize, Serialize};

use crate::problem::Problem;
use crate::request::{Answer, App, body_json, detail_of, json, who_and_why};

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct FilterBody {
    queue: Option<String>,
    kind: Option<String>,
    error: Option<String>,
    since: Option<String>,
    until: Option<String>,
    #[serde(default)]
    cancelled: bool,
    limit: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReplayBody {
    ids: Option<Vec<String>>,
    filter: Option<FilterBody>,
    #[serde(default)]
    dry_run: bool,
    #[serde(default)]
    new_key: bool,
    operator: String,
    reason: Option<String>,
}

const EXAMPLE: &str = r#"{"filter": {"queue": "mail", "error": "SMTP 451", "limit": 500}, "dry_run": true, "operator": "alice", "reason": "relay fixed"}"#;

#[derive(Serialize)]
struct Jobs<'a, T: Serialize> {
    dry_run: bool,
    jobs: &'a [T],
}

/// One copy as the answer names it: the original's id and the new job.
#[derive(Serialize)]
struct Copy {
    from: JobId,
    job: JobBrief,
}

#[derive(Serialize)]
struct Copies<'a> {
    dry_run: bool,
    copies: &'a [Copy],
}

fn time(field: &str, text: Option<String>) -> Result<Option<errand::Timestamp>, Problem> {
    text.map(|t| {
        errand::Timestamp::parse_rfc3339(&t)
            .map_err(|e| Problem::invalid(format!("`filter.{field}`: {}", detail_of(e))))
    })
    .transpose()
}

/// The jobs the body names: by id, or by filter.
fn selection(ids: Option<Vec<String>>, filter: Option<FilterBody>) -> Result<Selection, Problem> {
    Ok(match (ids, filter) {
        (Some(ids), None) if !ids.is_empty() => Selection::Ids(
            ids.into_iter()
                .map(JobId::new)
                .collect::<errand::Result<Vec<_>>>()?,
        ),
        (None, Some(f)) => Selection::Filter(BulkFilter {
            state: if f.cancelled {
                JobState::Cancelled
            } else {
                JobState::Dead
            },
            queue: f.queue.map(|q| Name::parse("queue", q)).transpose()?,
            kind: f.kind.map(|k| Name::parse("kind", k)).transpose()?,
            error_contains: f.error,
            since: time("since", f.since)?,
            until: time("until", f.until)?,
            limit: f.limit.unwrap_or(100),
        }),
        _ => {
            return Err(Problem::invalid(
                "name the jobs either by `ids` (a non-empty list) or by `filter` (queue, kind, \
             error, since, until, cancelled, limit), not both and not neither",
            ));
        }
    })
}

/// `POST /v1/bulk/replay`: replays (or, with `new_key`, copies) the jobs
/// named, all or none; with `dry_run`, answers with them and changes
/// nothing.
pub(crate) async fn replay(State(app): State<App>, headers: HeaderMap, body: Body) -> Answer {
    let req: ReplayBody = body_json(&app, &headers, body, EXAMPLE).await?;
    who_and_why(&req.operator, req.reason.as_deref())?;
    let outcome = app
        .admin
        .act_on_selection(&BulkRequest {
            action: if req.new_key {
                BulkAction::Copy
            } else {
                BulkAction::Replay
            },
            jobs: selection(req.ids, req.filter)?,
            operator: req.operator,
            reason: req.reason,
            dry_run: req.dry_run,
        })
        .await?;
    match outcome {
        BulkOutcome::Planned(planned) => json(
            StatusCode::OK,
            &Jobs {
                dry_run: true,
                jobs: &planned,
            },
        ),
        BulkOutcome::Copied(copied) if !copied.is_empty() => {
            let copies: Vec<Copy> = copied
                .iter()
                .map(|c| Copy {
                    from: c.from.clone(),
                    job: JobBrief::from(&c.job),
                })
                .collect();
            json(
                StatusCode::OK,
                &Copies {
                    dry_run: false,
                    copies: &copies,
                },
            )
        }
        BulkOutcome::Replayed(replayed) => json(
            StatusCode::OK,
            &Jobs {
                dry_run: false,
                jobs: &errand::briefs(&replayed),
            },
        ),
        // Nothing matched (as an answer with no jobs, whatever the action).
        _ => json(
            StatusCode::OK,
            &Jobs::<JobBrief> {
                dry_run: false,
                jobs: &[],
            },
        ),
    }
}
