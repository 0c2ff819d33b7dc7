//! The stored periodic schedules (what `errand schedule add` keeps in the
//! database and every running service enqueues at each tick), and pausing
//! or resuming one behind a confirmation page, as for queues. Adding,
//! editing and removing them are the forms of `schedule_forms.rs`.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use errand::{Name, ScheduleAction, StoredSchedule, Timestamp};
use maud::{Markup, html};

use super::Dash;
use super::actions::audit_fields;
use super::error::PageError;
use super::forms::{Audit, Form, detail, segment};
use super::guard::Visitor;
use super::view::{self, Ctx, Section, truncate};

/// Where the schedules are listed.
pub(super) const LIST: &str = "/dashboard/schedules";
/// The most characters of a payload the table shows.
const PAYLOAD_CHARS: usize = 80;

pub(super) fn routes() -> Router<Dash> {
    Router::new()
        .route("/dashboard/schedules", get(list))
        .route(
            "/dashboard/schedules/{name}/pause",
            get(confirm_pause).post(pause),
        )
        .route(
            "/dashboard/schedules/{name}/resume",
            get(confirm_resume).post(resume),
        )
}

/// The audit log of one schedule.
pub(super) fn audit_path(name: &Name) -> String {
    let query = form_urlencoded::Serializer::new(String::new())
        .append_pair("schedule", name.as_str())
        .finish();
    format!("/dashboard/audit?{query}")
}

/// The path of the edit form of `name` (schedule_forms.rs).
pub(super) fn edit_path(name: &Name) -> String {
    format!("{LIST}/{}/edit", segment(name.as_str()))
}

/// The path of the removal's confirmation of `name` (schedule_forms.rs).
pub(super) fn remove_path(name: &Name) -> String {
    format!("{LIST}/{}/remove", segment(name.as_str()))
}

fn action_path(name: &Name, change: Change) -> String {
    format!("{LIST}/{}/{}", segment(name.as_str()), change.verb())
}

/// Running, or who paused it, when and why.
fn state(s: &StoredSchedule) -> Markup {
    match &s.paused {
        None => html! { span.state { "running" } },
        Some(p) => html! {
            span.state.paused { "paused" } " by " (p.operator) " at " (view::time(p.at))
            @if let Some(r) = &p.reason { ": " (r) }
        },
    }
}

fn row(s: &StoredSchedule, now: Timestamp) -> Markup {
    let d = &s.definition;
    html! {
        tr {
            td { code { (d.name.as_str()) } }
            td { code { (d.cron) } }
            td { (d.tz.name()) }
            td { (d.kind.as_str()) }
            td { a href={ "/dashboard/jobs?queue=" (d.queue.as_str()) } { (d.queue.as_str()) } }
            td { code { (truncate(d.payload.as_str(), PAYLOAD_CHARS)) } }
            td { (d.misfire.to_string()) }
            td.num { (d.max_attempts) }
            td { (view::opt_time(s.next_tick(now))) }
            td { (state(s)) }
            td {
                @if s.paused.is_some() {
                    a.button href=(action_path(&d.name, Change::Resume)) { "Resume…" }
                } @else {
                    a.button href=(action_path(&d.name, Change::Pause)) { "Pause…" }
                }
                " "
                a.button href=(edit_path(&d.name)) { "Edit…" }
                " "
                a.button href=(remove_path(&d.name)) { "Remove…" }
                " "
                a href=(audit_path(&d.name)) { "audit" }
            }
        }
    }
}

async fn list(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
) -> Result<Response, PageError> {
    let schedules = dash.admin.schedules().await?;
    let now = Timestamp::now();
    let ctx = Ctx::new(&dash, &visitor);
    let body = html! {
        h1 { "Schedules" }
        p.note {
            "Periodic jobs stored in the database: every running service enqueues each one's job at every tick, exactly once per tick (job id "
            code { "cron:NAME:TICK" } "), the pattern read in the schedule's time zone. Next ticks as of " (view::time(now))
            "."
        }
        p { a.button href="/dashboard/schedules/new" { "Add a schedule…" } }
        @if schedules.is_empty() {
            p.empty { "No schedule is stored. Add one here, or with " code { "errand schedule add NAME --cron PATTERN --kind KIND" } "." }
        } @else {
            table.jobs {
                thead { tr {
                    th { "name" } th { "cron" } th { "time zone" } th { "kind" } th { "queue" } th { "payload" }
                    th { "misfire" } th.num { "max attempts" } th { "next tick" } th { "state" } th { }
                } }
                tbody { @for s in &schedules { (row(s, now)) } }
            }
        }
    };
    Ok(view::page(
        StatusCode::OK,
        Some(&ctx),
        "Schedules",
        Some(Section::Schedules),
        body,
    ))
}

/// The schedule named in the address.
pub(super) fn path_name(path: Result<Path<String>, PathRejection>) -> Result<Name, PageError> {
    let Path(name) = path.map_err(|r| {
        PageError::bad_request(format!(
            "The schedule name in the address is not valid: {}",
            r.body_text()
        ))
    })?;
    Name::parse("schedule", name).map_err(|e| PageError::bad_request(detail(e)))
}

/// Pausing or resuming.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Change {
    Pause,
    Resume,
}

impl Change {
    fn verb(self) -> &'static str {
        match self {
            Change::Pause => "pause",
            Change::Resume => "resume",
        }
    }
}

fn confirm_page(
    ctx: &Ctx,
    change: Change,
    schedule: &StoredSchedule,
    entered: &Audit,
    problem: Option<&str>,
) -> Response {
    let name = &schedule.definition.name;
    let (title, explain) = match change {
        Change::Pause => (
            "Pause schedule",
            "No service enqueues its ticks until it is resumed; jobs it enqueued already stay and run.",
        ),
        Change::Resume => (
            "Resume schedule",
            "Services enqueue its ticks again from now on; ticks missed while it was paused are not enqueued, whatever its misfire policy.",
        ),
    };
    let body = html! {
        h1 { (title) " " code { (name.as_str()) } "?" }
        @if let Some(p) = problem { (view::notice("error", p)) }
        p { (explain) " Your name and reason go into the audit log." }
        p { code { (schedule.definition.describe()) } " — " (state(schedule)) }
        form.confirm method="post" action=(action_path(name, change)) {
            (ctx.csrf_field())
            (audit_fields(entered))
            p.actions {
                button.danger[change == Change::Pause] .primary[change == Change::Resume] type="submit" {
                    "Confirm: " (change.verb()) " " (name.as_str())
                }
                " "
                a href=(LIST) { "back to the schedules" }
            }
        }
    };
    let status = view::form_status(problem);
    view::page(status, Some(ctx), title, Some(Section::Schedules), body)
}

async fn confirm(
    dash: Dash,
    visitor: Visitor,
    path: Result<Path<String>, PathRejection>,
    change: Change,
) -> Result<Response, PageError> {
    let name = path_name(path)?;
    let schedule = dash.admin.schedule(&name).await?;
    let ctx = Ctx::new(&dash, &visitor);
    Ok(confirm_page(
        &ctx,
        change,
        &schedule,
        &Audit::default(),
        None,
    ))
}

async fn confirm_pause(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    confirm(dash, visitor, path, Change::Pause).await
}

async fn confirm_resume(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    confirm(dash, visitor, path, Change::Resume).await
}

async fn act(
    dash: Dash,
    visitor: Visitor,
    path: Result<Path<String>, PathRejection>,
    form: Form,
    change: Change,
) -> Result<Response, PageError> {
    let name = path_name(path)?;
    form.only(&["operator", "reason"])?;
    let Audit { operator, reason } = match Audit::posted(&form) {
        Ok(audit) => audit,
        Err((entered, problem)) => {
            // Nothing is written; the form comes back with what was entered.
            let schedule = dash.admin.schedule(&name).await?;
            let ctx = Ctx::new(&dash, &visitor);
            return Ok(confirm_page(
                &ctx,
                change,
                &schedule,
                &entered,
                Some(&problem),
            ));
        }
    };
    let action = ScheduleAction {
        name,
        operator,
        reason: Some(reason),
    };
    match change {
        Change::Pause => dash.admin.pause_schedule(&action).await?,
        Change::Resume => dash.admin.resume_schedule(&action).await?,
    };
    Ok(Redirect::to(LIST).into_response())
}

async fn pause(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    act(dash, visitor, path, form, Change::Pause).await
}

async fn resume(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    act(dash, visitor, path, form, Change::Resume).await
}
