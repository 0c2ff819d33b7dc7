//! Moving a waiting job: a confirmation page (GET) with the new due time
//! (now, after a delay, or at a time) and/or priority, then that page's
//! form (POST) with the operator and the reason. The guard has checked the
//! CSRF token before these run.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use errand::{Job, RescheduleRequest, Schedule, Timestamp};
use maud::html;

use super::Dash;
use super::actions::audit_fields;
use super::error::PageError;
use super::forms::{Audit, Form, detail, job_path};
use super::guard::Visitor;
use super::jobs::{path_id, summary};
use super::view::{self, Ctx, truncate};

pub(super) fn routes() -> Router<Dash> {
    Router::new().route(
        "/dashboard/jobs/{id}/reschedule",
        get(confirm).post(reschedule),
    )
}

/// The change as entered, kept to show the form again after a refusal.
#[derive(Clone, Debug, Default)]
struct Change {
    /// `now`, `delay` or `at`; empty keeps the due time.
    when: String,
    delay: String,
    at: String,
    priority: String,
}

impl Change {
    fn entered(form: &Form) -> Change {
        let first = |name| form.first(name);
        Change {
            when: first("when"),
            delay: first("delay"),
            at: first("at"),
            priority: first("priority"),
        }
    }

    /// The due time and priority asked for; the message says what to fix.
    fn parse(&self) -> Result<(Option<Schedule>, Option<i16>), String> {
        let run = match self.when.as_str() {
            "" | "keep" => None,
            "now" => Some(Schedule::Now),
            "delay" => Some(Schedule::After(
                errand::parse_duration(self.delay.trim())
                    .map_err(|e| format!("The delay: {}", detail(e)))?,
            )),
            "at" => Some(Schedule::At(
                Timestamp::parse_rfc3339(self.at.trim())
                    .map_err(|e| format!("The time: {}", detail(e)))?,
            )),
            other => {
                return Err(format!(
                    "`{}` is not a choice of due time.",
                    truncate(other, 20)
                ));
            }
        };
        let priority = match self.priority.trim() {
            "" => None,
            p => Some(p.parse::<i16>().map_err(|_| {
                format!(
                    "The priority must be a whole number from {} to {}.",
                    i16::MIN,
                    i16::MAX
                )
            })?),
        };
        if run.is_none() && priority.is_none() {
            return Err("Choose a new due time, a new priority, or both.".to_owned());
        }
        Ok((run, priority))
    }
}

fn page(ctx: &Ctx, job: &Job, change: &Change, entered: &Audit, problem: Option<&str>) -> Response {
    let checked = |v: &str| change.when == v || (v == "keep" && change.when.is_empty());
    let body = html! {
        h1 { "Reschedule job?" }
        @if let Some(p) = problem { (view::notice("error", p)) }
        p { "The job stays ready and keeps its attempts, payload and history; only when it is due and its priority change. Your name and reason go into the audit log, after the change." }
        (summary(job))
        form.confirm method="post" action={ (job_path(&job.id)) "/reschedule" } {
            (ctx.csrf_field())
            fieldset {
                legend { "When it is due" }
                label { input type="radio" name="when" value="keep" checked[checked("keep")]; " keep its due time" }
                label { input type="radio" name="when" value="now" checked[checked("now")]; " now" }
                label { input type="radio" name="when" value="delay" checked[checked("delay")]; " after " }
                input #delay type="text" name="delay" placeholder="15m" maxlength="20" value=(change.delay);
                label { input type="radio" name="when" value="at" checked[checked("at")]; " at " }
                input #at type="text" name="at" placeholder="2026-12-24T08:00:00Z" maxlength="40" value=(change.at);
            }
            label for="priority" { "Priority (higher is claimed first; empty keeps it — now " (job.priority) ")" }
            input #priority type="number" name="priority" min=(i16::MIN) max=(i16::MAX) value=(change.priority);
            (audit_fields(entered))
            p.actions {
                button.primary type="submit" { "Confirm: reschedule this job" }
                " "
                a href=(job_path(&job.id)) { "back to the job" }
            }
        }
    };
    let status = view::form_status(problem);
    view::page(status, Some(ctx), "Reschedule job", None, body)
}

fn refusal(job: &Job) -> PageError {
    PageError::new(
        StatusCode::CONFLICT,
        "Not possible in this state",
        format!(
            "Job `{}` is {}: {}",
            truncate(job.id.as_str(), 60),
            job.state,
            RescheduleRequest::REFUSED
        ),
    )
}

async fn confirm(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let id = path_id(path)?;
    let job = dash.admin.job(&id).await?;
    if !RescheduleRequest::accepts(job.state) {
        return Err(refusal(&job));
    }
    let ctx = Ctx::new(&dash, &visitor);
    Ok(page(
        &ctx,
        &job,
        &Change::default(),
        &Audit::default(),
        None,
    ))
}

async fn reschedule(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let id = path_id(path)?;
    form.only(&["when", "delay", "at", "priority", "operator", "reason"])?;
    let change = Change::entered(&form);
    let checked = Audit::posted(&form).and_then(|audit| match change.parse() {
        Ok(parsed) => Ok((audit, parsed)),
        Err(problem) => Err((audit, problem)),
    });
    let (Audit { operator, reason }, (run, priority)) = match checked {
        Ok(ok) => ok,
        Err((entered, problem)) => {
            // Nothing is written; the form comes back with what was entered.
            let job = dash.admin.job(&id).await?;
            let ctx = Ctx::new(&dash, &visitor);
            return Ok(page(&ctx, &job, &change, &entered, Some(&problem)));
        }
    };
    let request = RescheduleRequest {
        ids: vec![id.clone()],
        run,
        priority,
        operator,
        reason: Some(reason),
    };
    match dash.admin.reschedule_jobs(&request).await {
        Ok(_) => {}
        Err(errand::Error::InvalidState { .. }) => {
            return Err(refusal(&dash.admin.job(&id).await?));
        }
        Err(e) => return Err(e.into()),
    }
    Ok(Redirect::to(&format!("{}?done=rescheduled", job_path(&id))).into_response())
}
