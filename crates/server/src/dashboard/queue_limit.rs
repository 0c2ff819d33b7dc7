//! A queue's concurrency cap from the dashboard: a form that sets or
//! clears it (with the operator's name and reason, audited as `limit` or
//! `unlimit`); the queues page links to it from each queue's row.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use errand::{MAX_QUEUE_CONCURRENCY, Name, QueueLimitRequest};
use maud::html;

use super::Dash;
use super::actions::audit_fields;
use super::error::PageError;
use super::forms::{Audit, Form, segment};
use super::guard::Visitor;
use super::queues::path_queue;
use super::view::{self, Ctx, Section};

pub(super) fn routes() -> Router<Dash> {
    Router::new().route(
        "/dashboard/queues/{queue}/limit",
        get(limit_page).post(change_limit),
    )
}

/// What the form holds: the cap as typed, the operator and the reason.
struct Entered {
    concurrency: String,
    audit: Audit,
}

fn form_page(
    ctx: &Ctx,
    queue: &Name,
    now: Option<u32>,
    entered: &Entered,
    problem: Option<&str>,
) -> Response {
    let name = queue.as_str();
    let title = format!("Concurrency cap of {name}");
    let body = html! {
        h1 { "Concurrency cap of " code { (name) } }
        @if let Some(p) = problem { (view::notice("error", p)) }
        p {
            @match now {
                Some(n) => { "At most " strong { (n) } " of its jobs run at once now, across every worker process and host." }
                None => { "The queue has no cap now: each worker takes its jobs as its own concurrency allows." }
            }
        }
        p.note {
            "A change counts from each worker's next claim, without a restart. Jobs already running go on when the cap is lowered; an expired lease holds its slot until it is reclaimed or swept. Your name and reason go into the audit log."
        }
        form.confirm method="post" action={ "/dashboard/queues/" (segment(name)) "/limit" } {
            (ctx.csrf_field())
            label for="concurrency" { "Jobs that may run at once (1 to " (MAX_QUEUE_CONCURRENCY) ")" }
            input #concurrency type="number" name="concurrency" min="1" max=(MAX_QUEUE_CONCURRENCY)
                value=(entered.concurrency);
            (audit_fields(&entered.audit))
            p.actions {
                button.primary type="submit" name="change" value="set" { "Set the cap" }
                @if now.is_some() {
                    " "
                    button.danger type="submit" name="change" value="clear" formnovalidate { "Clear the cap" }
                }
                " "
                a href="/dashboard/queues" { "back to the queues" }
            }
        }
    };
    view::page(
        view::form_status(problem),
        Some(ctx),
        &title,
        Some(Section::Queues),
        body,
    )
}

async fn current(dash: &Dash, queue: &Name) -> Result<Option<u32>, PageError> {
    Ok(dash
        .admin
        .queue_limits()
        .await?
        .into_iter()
        .find(|l| &l.queue == queue)
        .map(|l| l.concurrency))
}

async fn limit_page(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let queue = path_queue(path)?;
    let now = current(&dash, &queue).await?;
    let ctx = Ctx::new(&dash, &visitor);
    let entered = Entered {
        concurrency: now.map(|n| n.to_string()).unwrap_or_default(),
        audit: Audit::default(),
    };
    Ok(form_page(&ctx, &queue, now, &entered, None))
}

/// The cap the form asks for: `Some` to set, `None` to clear; or what to
/// fix.
fn asked(form: &Form) -> Result<Option<u32>, String> {
    let change = form.one("change").map_err(|e| e.message)?;
    let typed = form
        .one("concurrency")
        .map_err(|e| e.message)?
        .unwrap_or("")
        .trim();
    match change {
        Some("clear") => Ok(None),
        Some("set") => {
            let n: u32 = typed.parse().map_err(|_| {
                format!("The cap must be a whole number from 1 to {MAX_QUEUE_CONCURRENCY}.")
            })?;
            errand::core::check_concurrency(n).map_err(super::forms::detail)?;
            Ok(Some(n))
        }
        _ => Err("Choose whether to set or to clear the cap.".to_owned()),
    }
}

async fn change_limit(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let queue = path_queue(path)?;
    form.only(&["concurrency", "change", "operator", "reason"])?;
    let checked = asked(&form).and_then(|cap| {
        Audit::posted(&form)
            .map(|audit| (cap, audit))
            .map_err(|(_, problem)| problem)
    });
    let (concurrency, Audit { operator, reason }) = match checked {
        Ok(ok) => ok,
        Err(problem) => {
            // Nothing is written; the form comes back as it was filled in.
            let now = current(&dash, &queue).await?;
            let ctx = Ctx::new(&dash, &visitor);
            let entered = Entered {
                concurrency: form.first("concurrency"),
                audit: Audit::entered(&form),
            };
            return Ok(form_page(&ctx, &queue, now, &entered, Some(&problem)));
        }
    };
    let request = QueueLimitRequest {
        queue,
        concurrency,
        operator,
        reason: Some(reason),
    };
    dash.admin.set_queue_limit(&request).await?;
    Ok(Redirect::to("/dashboard/queues").into_response())
}
