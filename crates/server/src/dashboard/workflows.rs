//! One workflow: how many steps are in each state, and its steps with
//! their dependencies, a page at a time.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use errand::{JobState, WorkflowId};
use maud::html;

use super::Dash;
use super::error::PageError;
use super::forms::{DEFAULT_PAGE, Form, detail, job_id, job_path, segment, with_query};
use super::guard::Visitor;
use super::view::{self, Ctx, truncate};

pub(super) fn routes() -> Router<Dash> {
    Router::new().route("/dashboard/workflows/{id}", get(show))
}

/// Where a workflow's page is.
pub(super) fn workflow_path(id: &WorkflowId) -> String {
    format!("/dashboard/workflows/{}", segment(id.as_str()))
}

async fn show(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let Path(raw) = path.map_err(|r| {
        PageError::bad_request(format!(
            "The workflow id in the address is not valid: {}",
            r.body_text()
        ))
    })?;
    let id = WorkflowId::new(raw).map_err(|e| PageError::bad_request(detail(e)))?;
    let form = Form::parse(query.as_deref().unwrap_or("").as_bytes());
    form.only(&["after"])?;
    let after = form.one("after")?.map(job_id).transpose()?;
    let paged = after.is_some();
    let view = dash.admin.workflow(&id, after, DEFAULT_PAGE).await?;
    let ctx = Ctx::new(&dash, &visitor);
    let here = workflow_path(&id);
    let body = html! {
        h1 { "Workflow " code { (id.as_str()) } }
        p.counts {
            (view.total) " step(s), "
            @if view.finished() { "finished" } @else { "unfinished" }
            ": "
            @for s in JobState::ALL {
                @if view.count(s) > 0 {
                    (view::state(s)) " " (view.count(s)) " "
                }
            }
        }
        p.muted {
            "Cancel the unfinished steps with "
            code { "errand workflow cancel " (id.as_str()) }
            ", replay the dead ones with "
            code { "errand workflow replay " (id.as_str()) }
            " (or POST /v1/workflows/…/cancel and /replay); each step changed gets its audit entry."
        }
        table.jobs.workflow {
            thead { tr {
                th { "step" } th { "state" } th { "kind" } th.num { "attempts" }
                th { "depends on" } th { "last error" }
            } }
            tbody {
                @for step in &view.steps {
                    tr {
                        td { a href=(job_path(&step.job.id)) { code { (step.job.id.as_str()) } } }
                        td { (view::state(step.job.state)) }
                        td { (step.job.kind.as_str()) }
                        td.num { (step.job.attempts) "/" (step.job.max_attempts) }
                        td.deps {
                            @if step.depends_on.is_empty() { span.muted { "—" } }
                            @for dep in &step.depends_on {
                                a href=(job_path(dep)) { code { (truncate(dep.as_str(), 40)) } } " "
                            }
                            @let more = (step.depends_on_count as usize).saturating_sub(step.depends_on.len());
                            @if more > 0 {
                                a href=(job_path(&step.job.id)) { "and " (more) " more" }
                            }
                        }
                        td { (view::last_error(&step.job, 80)) }
                    }
                }
            }
        }
        nav.pager aria-label="Pages" {
            @if paged {
                a rel="first" href=(here.clone()) { "« first steps" }
            }
            @if let Some(last) = &view.next_after {
                @let q = form_urlencoded::Serializer::new(String::new()).append_pair("after", last.as_str()).finish();
                a rel="next" href=(with_query(&here, &q)) { "next steps »" }
            }
        }
    };
    let title = format!("Workflow {}", truncate(id.as_str(), 40));
    Ok(view::page(StatusCode::OK, Some(&ctx), &title, None, body))
}
