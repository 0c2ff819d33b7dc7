//! The queues' routes: pausing and resuming a queue, and its concurrency
//! cap across every process (`/v1/queues/{queue}/limit`), each audited.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use errand::{MAX_QUEUE_CONCURRENCY, Name, QueueAction, QueueLimitRequest};
use serde::Deserialize;

use crate::problem::Problem;
use crate::request::{Answer, App, body_json, json, who_and_why};

fn queue_name(path: Result<Path<String>, PathRejection>) -> Result<Name, Problem> {
    let Path(q) = path.map_err(|r| {
        Problem::invalid(format!(
            "the queue name in the path is not valid: {}",
            r.body_text()
        ))
    })?;
    Ok(Name::parse("queue", q)?)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct QueueBody {
    operator: String,
    reason: Option<String>,
}

const QUEUE_EXAMPLE: &str = r#"{"operator": "alice", "reason": "provider outage"}"#;

async fn queue_action(
    app: &App,
    path: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
    body: Body,
) -> Result<QueueAction, Problem> {
    let queue = queue_name(path)?;
    let req: QueueBody = body_json(app, headers, body, QUEUE_EXAMPLE).await?;
    who_and_why(&req.operator, req.reason.as_deref())?;
    Ok(QueueAction {
        queue,
        operator: req.operator,
        reason: req.reason,
    })
}

/// `POST /v1/queues/{queue}/pause`
pub(crate) async fn pause(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let action = queue_action(&app, path, &headers, body).await?;
    let changed = app.admin.pause_queue(&action).await?;
    json(
        StatusCode::OK,
        &serde_json::json!({"queue": action.queue, "paused": true, "changed": changed}),
    )
}

/// `POST /v1/queues/{queue}/resume`
pub(crate) async fn resume(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let action = queue_action(&app, path, &headers, body).await?;
    let changed = app.admin.resume_queue(&action).await?;
    json(
        StatusCode::OK,
        &serde_json::json!({"queue": action.queue, "paused": false, "changed": changed}),
    )
}

/// `GET /v1/queues/paused`
pub(crate) async fn paused(State(app): State<App>) -> Answer {
    let queues = app.admin.paused_queues().await?;
    json(StatusCode::OK, &serde_json::json!({"queues": queues}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LimitBody {
    concurrency: Option<u32>,
    #[serde(default)]
    clear: bool,
    operator: String,
    reason: Option<String>,
}

const LIMIT_EXAMPLE: &str =
    r#"{"concurrency": 5, "operator": "alice", "reason": "the provider allows 5 connections"}"#;

/// `POST /v1/queues/{queue}/limit`: `{"concurrency": N}` sets the cap,
/// `{"clear": true}` lifts it.
pub(crate) async fn limit(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let queue = queue_name(path)?;
    let req: LimitBody = body_json(&app, &headers, body, LIMIT_EXAMPLE).await?;
    who_and_why(&req.operator, req.reason.as_deref())?;
    let concurrency = match (req.concurrency, req.clear) {
        (Some(n), false) => Some(n),
        (None, true) => None,
        _ => {
            return Err(Problem::invalid(format!(
                "send either `concurrency` (1 to {MAX_QUEUE_CONCURRENCY}) to set the queue's \
                 cap, or `\"clear\": true` to lift it"
            )));
        }
    };
    let request = QueueLimitRequest {
        queue,
        concurrency,
        operator: req.operator,
        reason: req.reason,
    };
    let changed = app.admin.set_queue_limit(&request).await?;
    json(
        StatusCode::OK,
        &serde_json::json!({
            "queue": request.queue,
            "concurrency_limit": request.concurrency,
            "changed": changed,
        }),
    )
}

/// `GET /v1/queues/limits`
pub(crate) async fn limits(State(app): State<App>) -> Answer {
    let queues = app.admin.queue_limits().await?;
    json(StatusCode::OK, &serde_json::json!({"queues": queues}))
}
