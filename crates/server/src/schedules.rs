//! The stored periodic schedules (`errand schedule add|list|remove|pause|
//! resume` over HTTP): every running service enqueues a stored schedule's
//! job at each tick, exactly once per tick. Every change is audited.

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use errand::{
    Misfire, Name, Payload, ScheduleAction, ScheduleAdd, ScheduleAddOutcome, ScheduleDefinition,
    ScheduleView, StoredSchedule, Timestamp,
};
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::problem::Problem;
use crate::request::{Answer, App, body_json, json, raw_json, who_and_why};

/// A stored schedule as the API shows it: as stored, with its next tick
/// (after now, on this host's clock, as `errand schedule list` shows it;
/// none while paused).
fn shown(schedule: StoredSchedule) -> ScheduleView {
    schedule.view(Timestamp::now())
}

#[derive(Serialize)]
struct Listed {
    schedules: Vec<ScheduleView>,
}

#[derive(Serialize)]
struct Added {
    outcome: ScheduleAddOutcome,
    schedule: ScheduleView,
}

#[derive(Serialize)]
struct Acted {
    changed: bool,
    schedule: ScheduleView,
}

#[derive(Serialize)]
struct Removed {
    removed: ScheduleView,
}

fn schedule_name(path: Result<Path<String>, PathRejection>) -> Result<Name, Problem> {
    let Path(name) = path.map_err(|r| {
        Problem::invalid(format!(
            "the schedule name in the path is not valid: {}",
            r.body_text()
        ))
    })?;
    Ok(Name::parse("schedule", name)?)
}

/// `GET /v1/schedules`: every stored schedule, by name.
pub(crate) async fn list(State(app): State<App>) -> Answer {
    let schedules = app.admin.schedules().await?;
    json(
        StatusCode::OK,
        &Listed {
            schedules: schedules.into_iter().map(shown).collect(),
        },
    )
}

/// `GET /v1/schedules/{name}`
pub(crate) async fn show(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
) -> Answer {
    let name = schedule_name(path)?;
    let schedule = app.admin.schedule(&name).await?;
    json(StatusCode::OK, &shown(schedule))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AddBody {
    name: String,
    cron: String,
    kind: String,
    #[serde(default, deserialize_with = "raw_json")]
    payload: Option<Box<RawValue>>,
    queue: Option<String>,
    max_attempts: Option<u32>,
    misfire: Option<String>,
    /// The IANA time zone the pattern is read in (default UTC).
    tz: Option<String>,
    #[serde(default)]
    replace: bool,
    operator: String,
    reason: Option<String>,
}

const ADD_EXAMPLE: &str =
    r#"{"name": "nightly-report", "cron": "0 3 * * *", "kind": "report", "operator": "alice"}"#;

/// The definition a body describes, checked by the library (the same
/// rules as `errand schedule add`).
fn definition(app: &App, req: &AddBody) -> Result<ScheduleDefinition, Problem> {
    let payload = match &req.payload {
        Some(raw) if raw.get().len() > app.max_payload => {
            return Err(Problem::payload_too_large(raw.get().len(), app.max_payload));
        }
        Some(raw) => Payload::from_json_text_limited(raw.get(), app.max_payload)?,
        None => Payload::default(),
    };
    let misfire = req
        .misfire
        .as_deref()
        .map(str::parse::<Misfire>)
        .transpose()?;
    let tz = req
        .tz
        .as_deref()
        .map(str::parse::<errand::core::ScheduleZone>)
        .transpose()?
        .unwrap_or_default();
    Ok(
        ScheduleDefinition::new(&req.name, &req.cron, &req.kind, payload)?
            .with_options(req.queue.as_deref(), req.max_attempts, misfire)?
            .in_zone(tz),
    )
}

/// `POST /v1/schedules`: stores a schedule (201), finds the same
/// definition stored already (200 `unchanged`), or replaces another one
/// under the name when `replace` is set (200 `replaced`).
pub(crate) async fn add(State(app): State<App>, headers: HeaderMap, body: Body) -> Answer {
    let req: AddBody = body_json(&app, &headers, body, ADD_EXAMPLE).await?;
    who_and_why(&req.operator, req.reason.as_deref())?;
    let definition = definition(&app, &req)?;
    let added = app
        .admin
        .add_schedule(&ScheduleAdd {
            definition,
            replace: req.replace,
            operator: req.operator,
            reason: req.reason,
        })
        .await?;
    let status = match added.outcome {
        ScheduleAddOutcome::Added => StatusCode::CREATED,
        ScheduleAddOutcome::Unchanged | ScheduleAddOutcome::Replaced => StatusCode::OK,
    };
    json(
        status,
        &Added {
            outcome: added.outcome,
            schedule: shown(added.schedule),
        },
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ActionBody {
    operator: String,
    reason: Option<String>,
}

const ACTION_EXAMPLE: &str = r#"{"operator": "alice", "reason": "month-end freeze"}"#;

async fn action(
    app: &App,
    path: Result<Path<String>, PathRejection>,
    headers: &HeaderMap,
    body: Body,
) -> Result<ScheduleAction, Problem> {
    let name = schedule_name(path)?;
    let req: ActionBody = body_json(app, headers, body, ACTION_EXAMPLE).await?;
    who_and_why(&req.operator, req.reason.as_deref())?;
    Ok(ScheduleAction {
        name,
        operator: req.operator,
        reason: req.reason,
    })
}

/// Pauses or resumes, and answers with whether it changed and the
/// schedule as it is now.
async fn toggle(
    app: App,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
    pause: bool,
) -> Answer {
    let action = action(&app, path, &headers, body).await?;
    let acted = if pause {
        app.admin.pause_schedule(&action).await?
    } else {
        app.admin.resume_schedule(&action).await?
    };
    json(
        StatusCode::OK,
        &Acted {
            changed: acted.changed,
            schedule: shown(acted.schedule),
        },
    )
}

/// `POST /v1/schedules/{name}/pause`: no tick is enqueued until it is
/// resumed; `changed` is false when it was paused already.
pub(crate) async fn pause(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    toggle(app, path, headers, body, true).await
}

/// `POST /v1/schedules/{name}/resume`: ticks from now on are enqueued
/// (those missed while paused are not); `changed` is false when it was
/// not paused.
pub(crate) async fn resume(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    toggle(app, path, headers, body, false).await
}

/// `POST /v1/schedules/{name}/remove`: deletes it (the jobs it enqueued
/// stay) and answers with it as it was.
pub(crate) async fn remove(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let action = action(&app, path, &headers, body).await?;
    let removed = app.admin.remove_schedule(&action).await?;
    json(
        StatusCode::OK,
        &Removed {
            // No next tick once removed.
            removed: ScheduleView {
                schedule: removed,
                next_tick: None,
            },
        },
    )
}
