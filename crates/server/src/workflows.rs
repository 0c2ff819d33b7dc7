//! `GET /v1/workflows/{id}` and the operator's actions on a whole
//! workflow: cancel its unfinished steps, replay its dead ones.

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use errand::core::{WorkflowAction, WorkflowId};
use serde::Deserialize;

use crate::problem::Problem;
use crate::request::{Answer, App, body_json, given, json, page_limit, who_and_why};

fn workflow_id(path: Result<Path<String>, PathRejection>) -> Result<WorkflowId, Problem> {
    let Path(id) = path.map_err(|r| {
        Problem::invalid(format!(
            "the workflow id in the path is not valid: {}",
            r.body_text()
        ))
    })?;
    Ok(WorkflowId::new(id)?)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StepsQuery {
    limit: Option<String>,
    after: Option<String>,
}

/// `GET /v1/workflows/{id}`: its counts by state and a page of its steps
/// (`limit`, default 100; `after`, the last step id of the previous page),
/// each with the ids it depends on.
pub(crate) async fn show(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<StepsQuery>, QueryRejection>,
) -> Answer {
    let id = workflow_id(path)?;
    let Query(q) = query.map_err(|r| {
        Problem::malformed_json(format!(
            "{}; the parameters are limit and after",
            r.body_text()
        ))
    })?;
    let limit = page_limit(q.limit)?;
    let after = given(q.after).map(errand::JobId::new).transpose()?;
    let view = app.admin.workflow(&id, after, limit).await?;
    json(StatusCode::OK, &view)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActionBody {
    operator: String,
    reason: Option<String>,
}

const ACTION_EXAMPLE: &str = r#"{"operator": "alice", "reason": "order withdrawn"}"#;

async fn action(
    app: &App,
    path: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
    body: Body,
) -> Result<WorkflowAction, Problem> {
    let id = workflow_id(path)?;
    let req: ActionBody = body_json(app, headers, body, ACTION_EXAMPLE).await?;
    who_and_why(&req.operator, req.reason.as_deref())?;
    Ok(WorkflowAction {
        id,
        operator: req.operator,
        reason: req.reason,
    })
}

/// `POST /v1/workflows/{id}/cancel`: cancels every unfinished step.
pub(crate) async fn cancel(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let action = action(&app, path, &headers, body).await?;
    let acted = app.admin.cancel_workflow(&action).await?;
    json(StatusCode::OK, &acted)
}

/// `POST /v1/workflows/{id}/replay`: replays every dead step.
pub(crate) async fn replay(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let action = action(&app, path, &headers, body).await?;
    let acted = app.admin.replay_workflow(&action).await?;
    json(StatusCode::OK, &acted)
}

// ---- batches ---------------------------------------------------------------

/// A callback as the seal's body gives it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CallbackBody {
    kind: String,
    queue: Option<String>,
    id: Option<String>,
    #[serde(default)]
    payload: Option<Box<serde_json::value::RawValue>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SealBody {
    on_success: Option<CallbackBody>,
    on_finish: Option<CallbackBody>,
}

const SEAL_EXAMPLE: &str = r#"{"on_success": {"kind": "notify", "payload": {"order": 7}}, "on_finish": {"kind": "cleanup"}}"#;

fn callback(app: &App, body: Option<CallbackBody>) -> Result<Option<errand::NewJob>, Problem> {
    let Some(body) = body else {
        return Ok(None);
    };
    let spec = errand::JobSpec {
        kind: body.kind,
        queue: body.queue,
        id: body.id,
        payload: body.payload.map(|raw| String::from(raw.get())),
        ..errand::JobSpec::default()
    };
    Ok(Some(spec.build_limited(app.max_payload)?))
}

/// `POST /v1/batches/{id}/seal`: no job joins the batch after; its
/// callbacks are enqueued. Sealing a sealed batch answers with it as it is.
pub(crate) async fn seal(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let id = workflow_id(path).map_err(|_| {
        Problem::invalid(
            "the batch id in the path is not valid: use 1 to 200 letters, digits and -_.:@/+=",
        )
    })?;
    let req: SealBody = body_json(&app, &headers, body, SEAL_EXAMPLE).await?;
    let seal = errand::BatchSeal {
        batch: id,
        on_success: callback(&app, req.on_success)?,
        on_finish: callback(&app, req.on_finish)?,
    };
    let sealed = app.client.seal_batch(&seal).await?;
    let view = app.admin.batch(&sealed.id).await?;
    json(StatusCode::OK, &view)
}

/// `GET /v1/batches/{id}`: whether it is sealed, its counts by state and
/// its callbacks.
pub(crate) async fn batch(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
) -> Answer {
    let id = workflow_id(path).map_err(|_| {
        Problem::invalid(
            "the batch id in the path is not valid: use 1 to 200 letters, digits and -_.:@/+=",
        )
    })?;
    let view = app.admin.batch(&id).await?;
    json(StatusCode::OK, &view)
}
