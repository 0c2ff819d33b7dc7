//! Sending a signal to a job: a page (GET) with the signal's name (the one
//! the job waits for, if it waits), an optional JSON payload and whether
//! to keep it for a later wait, then that page's form (POST) with the
//! operator and the reason, recorded as a `signal` audit entry. The guard
//! has checked the CSRF token before these run.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use errand::{AuditStamp, Job, NewSignal};
use maud::html;

use super::Dash;
use super::actions::audit_fields;
use super::error::PageError;
use super::forms::{Audit, Form, detail, job_path};
use super::guard::Visitor;
use super::jobs::{path_id, summary};
use super::view::{self, Ctx, truncate};

pub(super) fn routes() -> Router<Dash> {
    Router::new().route("/dashboard/jobs/{id}/signal", get(confirm).post(send))
}

/// The signal as entered, kept to show the form again after a refusal.
#[derive(Clone, Debug, Default)]
struct Entered {
    name: String,
    payload: String,
    buffer: bool,
}

impl Entered {
    fn of(form: &Form) -> Entered {
        let first = |name| form.first(name);
        Entered {
            name: first("name"),
            payload: first("payload"),
            buffer: !form.all("buffer").is_empty(),
        }
    }

    /// The signal for job `job`, stamped with the operator; the message
    /// says what to fix.
    fn signal(&self, job: &Job, stamp: AuditStamp) -> Result<NewSignal, String> {
        let mut signal = NewSignal::new(job.id.clone(), self.name.trim())
            .map_err(|e| format!("The name: {}", detail(e)))?;
        if !self.payload.trim().is_empty() {
            signal = signal
                .with_payload_text(self.payload.trim())
                .map_err(|e| format!("The payload: {}", detail(e)))?;
        }
        signal.buffer = self.buffer;
        Ok(signal.sent_by(stamp))
    }
}

fn page(ctx: &Ctx, job: &Job, entered: &Entered, audit: &Audit, problem: Option<&str>) -> Response {
    let awaited = job.awaiting.as_ref().map(|a| a.signal.as_str());
    let body = html! {
        h1 { "Send a signal?" }
        @if let Some(p) = problem { (view::notice("error", p)) }
        p {
            @match awaited {
                Some(name) => { "The job waits for the signal " code { (name) } ". " }
                None => { "The job waits for no signal now: tick the box to keep this one for its next wait of that name. " }
            }
            "A delivered signal makes it ready, due now; its next attempt reads the payload. Your name and reason go into the audit log."
        }
        (summary(job))
        form.confirm method="post" action={ (job_path(&job.id)) "/signal" } {
            (ctx.csrf_field())
            label for="name" { "Signal" }
            input #name type="text" name="name" required maxlength="100"
                value=(if entered.name.is_empty() { awaited.unwrap_or("") } else { entered.name.as_str() });
            label for="payload" { "Payload (JSON, optional, at most 64 KiB)" }
            textarea #payload name="payload" rows="4" { (entered.payload) }
            label { input type="checkbox" name="buffer" value="1" checked[entered.buffer]; " keep it for a later wait if the job is not waiting for it" }
            (audit_fields(audit))
            p.actions {
                button.primary type="submit" { "Confirm: send this signal" }
                " "
                a href=(job_path(&job.id)) { "back to the job" }
            }
        }
    };
    let status = view::form_status(problem);
    view::page(status, Some(ctx), "Send a signal", None, body)
}

fn ended(job: &Job) -> PageError {
    PageError::new(
        StatusCode::CONFLICT,
        "Not possible in this state",
        format!(
            "Job `{}` is {}: it has ended and waits for no signal. Nothing was changed.",
            truncate(job.id.as_str(), 60),
            job.state
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
    if job.state.is_final() {
        return Err(ended(&job));
    }
    let ctx = Ctx::new(&dash, &visitor);
    Ok(page(
        &ctx,
        &job,
        &Entered::default(),
        &Audit::default(),
        None,
    ))
}

async fn send(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let id = path_id(path)?;
    form.only(&["name", "payload", "buffer", "operator", "reason"])?;
    let entered = Entered::of(&form);
    let job = dash.admin.job(&id).await?;
    let checked = Audit::posted(&form).and_then(|audit| {
        let stamp = AuditStamp {
            operator: audit.operator.clone(),
            reason: Some(audit.reason.clone()),
        };
        entered.signal(&job, stamp).map_err(|p| (audit, p))
    });
    let again = |audit: &Audit, problem: &str| {
        let ctx = Ctx::new(&dash, &visitor);
        page(&ctx, &job, &entered, audit, Some(problem))
    };
    let signal = match checked {
        Ok(signal) => signal,
        // Nothing is written; the form comes back with what was entered.
        Err((audit, problem)) => return Ok(again(&audit, &problem)),
    };
    let sent = match dash.client.signal(&signal).await {
        Ok(sent) => sent,
        Err(e @ errand::Error::InvalidState { .. }) => {
            let audit = Audit::entered(&form);
            return Ok(again(&audit, &detail(e)));
        }
        Err(e) => return Err(e.into()),
    };
    let done = if sent.delivered { "signalled" } else { "kept" };
    Ok(Redirect::to(&format!("{}?done={done}", job_path(&id))).into_response())
}
