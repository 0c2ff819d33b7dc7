//! Changes: replay and cancel, each a confirmation page (GET) showing what
//! will change, then that page's form (POST) with the operator and the
//! reason. The guard has checked the CSRF token before these run.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use errand::{CancelRequest, Job, JobId, JobState, ReplayRequest};
use maud::{Markup, html};

use super::Dash;
use super::error::PageError;
use super::forms::{Audit, Form, MAX_OPERATOR_BYTES, MAX_PAGE, MAX_REASON_BYTES, job_id, job_path};
use super::guard::Visitor;
use super::jobs::{dead_params, path_id, summary};
use super::view::truncate;
use super::view::{self, Ctx, Section};

pub(super) fn routes() -> Router<Dash> {
    Router::new()
        .route(
            "/dashboard/jobs/{id}/replay",
            get(confirm_replay).post(replay),
        )
        .route(
            "/dashboard/jobs/{id}/cancel",
            get(confirm_cancel).post(cancel),
        )
        .route(
            "/dashboard/dead/replay",
            get(confirm_bulk).post(bulk_replay),
        )
}

/// Which change a confirmation page asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action {
    Replay,
    Cancel,
}

impl Action {
    fn allowed(self, state: JobState) -> bool {
        match self {
            Action::Replay => errand::ReplayRequest::accepts(state),
            Action::Cancel => errand::CancelRequest::accepts(state),
        }
    }

    fn refusal(self, job: &Job) -> PageError {
        let what = match self {
            Action::Replay => errand::ReplayRequest::REFUSED,
            Action::Cancel => errand::CancelRequest::REFUSED,
        };
        PageError::new(
            StatusCode::CONFLICT,
            "Not possible in this state",
            format!(
                "Job `{}` is {}: {what}. Nothing was changed.",
                truncate(job.id.as_str(), 60),
                job.state
            ),
        )
    }
}

/// The operator and reason fields, filled with what was entered.
pub(super) fn audit_fields(entered: &Audit) -> Markup {
    html! {
        label for="operator" { "Your name (for the audit log)" }
        input #operator type="text" name="operator" required maxlength=(MAX_OPERATOR_BYTES)
            autocomplete="name" value=(entered.operator);
        label for="reason" { "Reason (required)" }
        textarea #reason name="reason" required maxlength=(MAX_REASON_BYTES) rows="3" { (entered.reason) }
    }
}

/// One job's confirmation page; `problem` is why the last submission was
/// refused.
fn confirm_one(
    ctx: &Ctx,
    action: Action,
    job: &Job,
    entered: &Audit,
    problem: Option<&str>,
) -> Response {
    let (title, verb, explain, button_class) = match action {
        Action::Replay => (
            "Replay job",
            "replay",
            "The job goes back to ready, due now, with its attempt budget reset; its replay count goes up by one and it keeps its id.",
            "primary",
        ),
        Action::Cancel => (
            "Cancel job",
            "cancel",
            "The job moves to cancelled and will not run (a running attempt may still finish, but its result is not recorded). It can be replayed later.",
            "danger",
        ),
    };
    let body = html! {
        h1 { (title) "?" }
        @if let Some(p) = problem { (view::notice("error", p)) }
        p { (explain) " Your name and reason go into the audit log." }
        (summary(job))
        form.confirm method="post" action={ (job_path(&job.id)) "/" (verb) } {
            (ctx.csrf_field())
            (audit_fields(entered))
            p.actions {
                button class=(button_class) type="submit" { "Confirm: " (verb) " this job" }
                " "
                a href=(job_path(&job.id)) { "back to the job" }
            }
        }
    };
    let status = view::form_status(problem);
    view::page(status, Some(ctx), title, None, body)
}

async fn confirm(
    dash: Dash,
    visitor: Visitor,
    path: Result<Path<String>, PathRejection>,
    action: Action,
) -> Result<Response, PageError> {
    let id = path_id(path)?;
    let job = dash.admin.job(&id).await?;
    if !action.allowed(job.state) {
        return Err(action.refusal(&job));
    }
    let ctx = Ctx::new(&dash, &visitor);
    Ok(confirm_one(&ctx, action, &job, &Audit::default(), None))
}

async fn confirm_replay(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    confirm(dash, visitor, path, Action::Replay).await
}

async fn confirm_cancel(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    confirm(dash, visitor, path, Action::Cancel).await
}

async fn act(
    dash: Dash,
    visitor: Visitor,
    path: Result<Path<String>, PathRejection>,
    form: Form,
    action: Action,
) -> Result<Response, PageError> {
    let id = path_id(path)?;
    form.only(&["operator", "reason"])?;
    let Audit { operator, reason } = match Audit::posted(&form) {
        Ok(audit) => audit,
        Err((entered, problem)) => {
            // Nothing is written; the form comes back with what was entered.
            let job = dash.admin.job(&id).await?;
            let ctx = Ctx::new(&dash, &visitor);
            return Ok(confirm_one(&ctx, action, &job, &entered, Some(&problem)));
        }
    };
    let (done, _) = match action {
        Action::Replay => (
            "replayed",
            dash.admin
                .replay_jobs(&ReplayRequest {
                    ids: vec![id.clone()],
                    operator,
                    reason: Some(reason),
                })
                .await?,
        ),
        Action::Cancel => (
            "cancelled",
            dash.admin
                .cancel_jobs(&CancelRequest {
                    ids: vec![id.clone()],
                    operator,
                    reason: Some(reason),
                })
                .await?,
        ),
    };
    Ok(Redirect::to(&format!("{}?done={done}", job_path(&id))).into_response())
}

async fn replay(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    act(dash, visitor, path, form, Action::Replay).await
}

async fn cancel(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    act(dash, visitor, path, form, Action::Cancel).await
}

// ---- bulk replay of a dead-letter page ------------------------------------

/// The bulk confirmation page: the jobs listed, each as a hidden `id` the
/// POST carries, so exactly the jobs shown are replayed.
fn confirm_many(ctx: &Ctx, jobs: &[Job], entered: &Audit, problem: Option<&str>) -> Response {
    let body = html! {
        h1 { "Replay " (jobs.len()) " job" @if jobs.len() != 1 { "s" } "?" }
        @if let Some(p) = problem { (view::notice("error", p)) }
        p { "These jobs go back to ready, due now, with their attempt budgets reset. All of them are replayed or none: if one is no longer dead or cancelled when you confirm, nothing changes." }
        table.jobs {
            thead { tr { th { "id" } th { "state" } th { "queue" } th { "kind" } th { "last error" } } }
            tbody {
                @for job in jobs {
                    tr {
                        td { a href=(job_path(&job.id)) { code { (job.id.as_str()) } } }
                        td { (view::state(job.state)) }
                        td { (job.queue.as_str()) }
                        td { (job.kind.as_str()) }
                        td { (view::last_error(job, 120)) }
                    }
                }
            }
        }
        form.confirm method="post" action="/dashboard/dead/replay" {
            (ctx.csrf_field())
            @for job in jobs { input type="hidden" name="id" value=(job.id.as_str()); }
            (audit_fields(entered))
            p.actions {
                button.primary type="submit" { "Confirm: replay " (jobs.len()) " job" @if jobs.len() != 1 { "s" } }
                " "
                a href="/dashboard/dead" { "back to the dead letters" }
            }
        }
    };
    let status = view::form_status(problem);
    view::page(
        status,
        Some(ctx),
        "Replay jobs",
        Some(Section::DeadLetters),
        body,
    )
}

async fn confirm_bulk(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let (params, _) = dead_params(query.as_deref(), &[])?;
    let jobs = dash.admin.search(&params.search()).await?.jobs;
    if jobs.is_empty() {
        return Err(PageError::new(
            StatusCode::NOT_FOUND,
            "Nothing to replay",
            "No dead or cancelled job matches these filters any more. Go back to the dead letters.",
        ));
    }
    let ctx = Ctx::new(&dash, &visitor);
    Ok(confirm_many(&ctx, &jobs, &Audit::default(), None))
}

async fn bulk_replay(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
) -> Result<Response, PageError> {
    form.only(&["id", "operator", "reason"])?;
    let mut ids: Vec<JobId> = form
        .all("id")
        .into_iter()
        .map(job_id)
        .collect::<Result<_, _>>()?;
    ids.sort();
    ids.dedup();
    if ids.is_empty() || ids.len() > MAX_PAGE as usize {
        return Err(PageError::bad_request(format!(
            "A bulk replay takes 1 to {MAX_PAGE} job ids (got {}). Nothing was replayed: start again from the dead letters.",
            ids.len()
        )));
    }
    let Audit { operator, reason } = match Audit::posted(&form) {
        Ok(audit) => audit,
        Err((entered, problem)) => {
            let mut jobs = Vec::with_capacity(ids.len());
            for id in &ids {
                jobs.push(dash.admin.job(id).await?);
            }
            let ctx = Ctx::new(&dash, &visitor);
            return Ok(confirm_many(&ctx, &jobs, &entered, Some(&problem)));
        }
    };
    let replayed = dash
        .admin
        .replay_jobs(&ReplayRequest {
            ids,
            operator,
            reason: Some(reason),
        })
        .await?;
    Ok(Redirect::to(&format!("/dashboard/dead?replayed={}", replayed.len())).into_response())
}
