//! The audit log: every operator action, newest first, filtered by job,
//! queue or stored schedule, a page at a time (keyset on the entries'
//! sequence numbers).

use axum::Router;
use axum::extract::{Extension, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use errand::{AuditEntry, AuditFilter, Name};
use maud::html;

use super::Dash;
use super::error::PageError;
use super::forms::{DEFAULT_PAGE, Form, detail, job_id, job_path, with_query};
use super::guard::Visitor;
use super::schedules::audit_path;
use super::view::{self, Ctx, Section};

pub(super) fn routes() -> Router<Dash> {
    Router::new().route("/dashboard/audit", get(log))
}

/// The page's query: `job`, `queue`, `schedule`, `before`.
fn filter(query: Option<&str>) -> Result<AuditFilter, PageError> {
    let form = Form::parse(query.unwrap_or("").as_bytes());
    form.only(&["job", "queue", "schedule", "before"])?;
    let before = match form.one("before")? {
        None => None,
        Some(t) => Some(t.parse::<u64>().map_err(|_| {
            PageError::bad_request(format!(
                "`before` must be an entry's sequence number, not {t:?}; start again from the first page."
            ))
        })?),
    };
    Ok(AuditFilter {
        job: form.one("job")?.map(job_id).transpose()?,
        queue: form
            .one("queue")?
            .map(|q| Name::parse("queue", q).map_err(|e| PageError::bad_request(detail(e))))
            .transpose()?,
        schedule: form
            .one("schedule")?
            .map(|s| Name::parse("schedule", s).map_err(|e| PageError::bad_request(detail(e))))
            .transpose()?,
        before,
        limit: Some(DEFAULT_PAGE),
    })
}

fn query_of(f: &AuditFilter, before: Option<u64>) -> String {
    let mut q = form_urlencoded::Serializer::new(String::new());
    if let Some(j) = &f.job {
        q.append_pair("job", j.as_str());
    }
    if let Some(n) = &f.queue {
        q.append_pair("queue", n.as_str());
    }
    if let Some(n) = &f.schedule {
        q.append_pair("schedule", n.as_str());
    }
    if let Some(b) = before {
        q.append_pair("before", &b.to_string());
    }
    q.finish()
}

async fn log(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let f = filter(query.as_deref())?;
    let entries: Vec<AuditEntry> = dash.admin.audit_log(&f).await?;
    let next = (entries.len() >= f.effective_limit() as usize)
        .then(|| entries.last().map(|e| e.seq))
        .flatten();
    let ctx = Ctx::new(&dash, &visitor);
    let body = html! {
        h1 { "Audit log" }
        form.filters method="get" action="/dashboard/audit" {
            label { "job " input type="text" name="job" value=[f.job.as_ref().map(|j| j.as_str())] maxlength="200"; }
            label { "queue " input type="text" name="queue" value=[f.queue.as_ref().map(|q| q.as_str())] maxlength="200"; }
            label { "schedule " input type="text" name="schedule" value=[f.schedule.as_ref().map(|s| s.as_str())] maxlength="200"; }
            button type="submit" { "Filter" }
            " "
            a href="/dashboard/audit" { "clear" }
        }
        @if entries.is_empty() {
            p.empty { "No operator action matches." }
        } @else {
            table.jobs {
                thead { tr {
                    th.num { "#" } th { "when" } th { "action" } th { "job or schedule" } th { "queue" }
                    th { "operator" } th { "reason" }
                } }
                tbody {
                    @for e in &entries {
                        tr {
                            td.num { (e.seq) }
                            td { (view::time(e.at)) }
                            td { (e.action) }
                            td { @if let Some(j) = &e.job_id {
                                @if e.action == "purge" { code { (j.as_str()) } " (purged)" }
                                @else { a href=(job_path(j)) { code { (j.as_str()) } } }
                                @if let Some(c) = &e.copy_id {
                                    " → " a href=(job_path(c)) { code { (c.as_str()) } }
                                }
                            } @else if let Some(s) = &e.schedule {
                                "schedule " a href=(audit_path(s)) { code { (s.as_str()) } }
                            } }
                            td { (view::opt_text(e.queue.as_ref().map(|q| q.as_str()))) }
                            td { (e.operator) }
                            td { (view::opt_text(e.reason.as_deref())) }
                        }
                    }
                }
            }
        }
        nav.pager aria-label="Pages" {
            @if f.before.is_some() {
                a rel="first" href=(with_query("/dashboard/audit", &query_of(&f, None))) { "« newest" }
            }
            @if let Some(seq) = next {
                a rel="next" href=(with_query("/dashboard/audit", &query_of(&f, Some(seq)))) { "older »" }
            }
        }
    };
    Ok(view::page(
        StatusCode::OK,
        Some(&ctx),
        "Audit log",
        Some(Section::Audit),
        body,
    ))
}
