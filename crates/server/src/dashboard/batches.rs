//! One batch: open or sealed, how many of its jobs are in each state, and
//! its callbacks.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use errand::{BatchId, Job};
use maud::{Markup, html};

use super::Dash;
use super::error::PageError;
use super::forms::{detail, job_path, segment};
use super::guard::Visitor;
use super::view::{self, Ctx, truncate};

pub(super) fn routes() -> Router<Dash> {
    Router::new().route("/dashboard/batches/{id}", get(show))
}

/// Where a batch's page is.
pub(super) fn batch_path(id: &BatchId) -> String {
    format!("/dashboard/batches/{}", segment(id.as_str()))
}

fn callback(what: &str, job: Option<&Job>) -> Markup {
    html! {
        tr {
            th { (what) }
            td {
                @match job {
                    Some(j) => {
                        a href=(job_path(&j.id)) { code { (j.id.as_str()) } }
                        " " (view::state(j.state)) " " (j.kind.as_str())
                    }
                    None => span.muted { "—" },
                }
            }
        }
    }
}

async fn show(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let Path(raw) = path.map_err(|r| {
        PageError::bad_request(format!(
            "The batch id in the address is not valid: {}",
            r.body_text()
        ))
    })?;
    let id = BatchId::new(raw).map_err(|e| PageError::bad_request(detail(e)))?;
    let v = dash.admin.batch(&id).await?;
    let ctx = Ctx::new(&dash, &visitor);
    let body = html! {
        h1 { "Batch " code { (id.as_str()) } }
        table.summary {
            tr { th { "state" } td {
                @match v.batch.sealed_at {
                    Some(at) => { "sealed at " (view::time(at)) }
                    None => "open: jobs may still join it",
                }
            } }
            tr { th { "started" } td { (view::time(v.batch.created_at)) } }
            tr { th { "jobs" } td {
                (v.batch.total)
                @for c in &v.batch.states {
                    " · " (view::state(c.state)) " " (c.count)
                }
            } }
            (callback("on success", v.on_success_job.as_ref()))
            (callback("on finish", v.on_finish_job.as_ref()))
        }
        p.muted {
            "The callbacks run once: on success when every job is done, on finish when every job has ended. "
            "Seal a batch with " code { "errand batch seal " (id.as_str()) } " or POST /v1/batches/…/seal."
        }
    };
    let title = format!("Batch {}", truncate(id.as_str(), 40));
    Ok(view::page(StatusCode::OK, Some(&ctx), &title, None, body))
}
