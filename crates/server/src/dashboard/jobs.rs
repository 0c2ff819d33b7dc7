//! Reading pages: jobs by state, dead letters, one job.

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::routing::get;
use errand::core::{AttemptRecord, AuditRecord};
use errand::{Job, JobDetail, JobId, JobState, SearchPage};
use maud::{Markup, html};

use super::Dash;
use super::error::PageError;
use super::forms::{Form, ListParams, job_id, job_path, with_query};
use super::guard::Visitor;
use super::view::truncate;
use super::view::{self, Ctx, Section};

pub(super) fn routes() -> Router<Dash> {
    Router::new()
        .route("/dashboard/jobs", get(list))
        .route("/dashboard/jobs/{id}", get(show))
        .route("/dashboard/dead", get(dead_letters))
}

/// The id in a path, checked.
pub(super) fn path_id(path: Result<Path<String>, PathRejection>) -> Result<JobId, PageError> {
    let Path(id) = path.map_err(|r| {
        PageError::bad_request(format!(
            "The job id in the address is not valid: {}",
            r.body_text()
        ))
    })?;
    job_id(&id)
}

// ---- /dashboard/jobs ------------------------------------------------------

async fn list(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let params = ListParams::parse(query.as_deref(), &[])?.0;
    let page = dash.admin.search(&params.search()).await?;
    let jobs = &page.jobs;
    let ctx = Ctx::new(&dash, &visitor);
    let tabs = html! {
        nav.tabs aria-label="States" {
            @let all = ListParams { state: None, after: None, ..params.clone() };
            a.active[params.state.is_none()] href=(with_query("/dashboard/jobs", &all.query(None))) { "all" }
            @for s in JobState::ALL {
                @let p = ListParams { state: Some(s), after: None, ..params.clone() };
                a.active[params.state == Some(s)] href=(with_query("/dashboard/jobs", &p.query(None))) { (s.as_str()) }
            }
        }
    };
    let body = html! {
        h1 { "Jobs" @if let Some(s) = params.state { " · " (s.as_str()) } }
        (tabs)
        (filter_form("/dashboard/jobs", &params))
        (stopped_note(&page))
        @if jobs.is_empty() {
            p.empty { "No jobs match these filters" @if page.stopped { " among those searched" } "." }
        } @else {
            table.jobs {
                thead { tr {
                    th { "id" } th { "state" } th { "queue" } th { "kind" }
                    th.num { "attempts" } th.num { "replays" } th { "due" } th { "updated" } th { "last error" }
                } }
                tbody {
                    @for job in jobs {
                        tr {
                            td { a href=(job_path(&job.id)) { code { (job.id.as_str()) } } }
                            td { (view::state(job.state)) }
                            td { (job.queue.as_str()) }
                            td { (job.kind.as_str()) }
                            td.num { (job.attempts) "/" (job.max_attempts) }
                            td.num { (job.replays) }
                            td { @if job.state == JobState::Ready { (view::time(job.available_at)) } }
                            td { (view::time(job.updated_at)) }
                            td { (view::last_error(job, 80)) }
                        }
                    }
                }
            }
        }
        (pager("/dashboard/jobs", &params, &page))
    };
    Ok(view::page(
        StatusCode::OK,
        Some(&ctx),
        "Jobs",
        Some(Section::Jobs),
        body,
    ))
}

/// The filter form of a listing; the state stays as the tabs chose it.
fn filter_form(action: &str, params: &ListParams) -> Markup {
    html! {
        form.filters method="get" action=(action) {
            @if let Some(s) = params.state { input type="hidden" name="state" value=(s.as_str()); }
            label { "queue " input type="text" name="queue" value=[params.queue.as_ref().map(|q| q.as_str())] maxlength="200"; }
            label { "kind " input type="text" name="kind" value=[params.kind.as_ref().map(|k| k.as_str())] maxlength="200"; }
            label { "error text " input type="search" name="error" value=[params.error.as_deref()] maxlength="200"; }
            label { "tag " input type="text" name="tag" value=[params.tag.as_deref()] maxlength="100"; }
            label title="Terms separated by spaces: meta.KEY=VALUE (a metadata entry) and payload.PATH=VALUE (a payload field: payload.customer=42, payload.items[0].sku=\"A-1\"); all must hold" {
                "search " input type="search" name="q" value=[params.q.as_deref()] maxlength="1000" size="40" placeholder="meta.tenant=acme payload.customer=42";
            }
            button type="submit" { "Filter" }
            " "
            a href=(action) { "clear" }
        }
    }
}

/// What a search that stopped at its bound read, and that the next page
/// reads on.
pub(super) fn stopped_note(page: &SearchPage) -> Markup {
    html! {
        @if page.stopped {
            (view::notice("stopped", &format!(
                "The search read {} jobs without reaching the end of the list and stopped there; \
                 the next page reads on.",
                page.scanned
            )))
        }
    }
}

/// Links to the first and the next page. A full page has a next one (maybe
/// empty), and so has a search that stopped at its bound; nothing counts
/// the table.
fn pager(path: &str, params: &ListParams, page: &SearchPage) -> Markup {
    let next = page.next.as_ref();
    html! {
        nav.pager aria-label="Pages" {
            @if params.after.is_some() {
                a rel="first" href=(with_query(path, &params.query(None))) { "« first page" }
            }
            @if let Some(last) = next {
                a rel="next" href=(with_query(path, &params.query(Some(last)))) { "next page »" }
            }
        }
    }
}

// ---- /dashboard/dead ------------------------------------------------------

/// Dead-letter listings show `dead` (default) or `cancelled` jobs.
pub(super) fn dead_params(
    query: Option<&str>,
    extra: &[&str],
) -> Result<(ListParams, Form), PageError> {
    let (mut params, form) = ListParams::parse(query, extra)?;
    match params.state {
        None => params.state = Some(JobState::Dead),
        Some(JobState::Dead | JobState::Cancelled) => {}
        Some(other) => {
            return Err(PageError::bad_request(format!(
                "The dead-letter pages show dead or cancelled jobs, not {other} ones; see the jobs list for those."
            )));
        }
    }
    Ok((params, form))
}

async fn dead_letters(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let (params, form) = dead_params(query.as_deref(), &["replayed"])?;
    let replayed = form.one("replayed")?.and_then(|n| n.parse::<u32>().ok());
    let page = dash.admin.search(&params.search()).await?;
    let jobs = &page.jobs;
    let ctx = Ctx::new(&dash, &visitor);
    let state = params.state.unwrap_or(JobState::Dead);
    let body = html! {
        h1 { "Dead letters" }
        @if let Some(n) = replayed {
            (view::notice("ok", &format!("Replayed {n} job{}: they are ready again.", if n == 1 { "" } else { "s" })))
        }
        nav.tabs aria-label="States" {
            @for s in [JobState::Dead, JobState::Cancelled] {
                @let p = ListParams { state: Some(s), after: None, ..params.clone() };
                a.active[state == s] href=(with_query("/dashboard/dead", &p.query(None))) { (s.as_str()) }
            }
        }
        (filter_form("/dashboard/dead", &params))
        (stopped_note(&page))
        @if jobs.is_empty() {
            p.empty { "No " (state.as_str()) " jobs match these filters." }
        } @else {
            p.bulk {
                a.button href=(with_query("/dashboard/dead/replay", &params.query(params.after.as_ref()))) {
                    "Replay the " (jobs.len()) " job" @if jobs.len() != 1 { "s" } " listed…"
                }
            }
            table.jobs {
                thead { tr {
                    th { "id" } th { "queue" } th { "kind" } th.num { "attempts" } th.num { "replays" }
                    th { "finished" } th { "last error" } th { }
                } }
                tbody {
                    @for job in jobs {
                        tr {
                            td { a href=(job_path(&job.id)) { code { (job.id.as_str()) } } }
                            td { (job.queue.as_str()) }
                            td { (job.kind.as_str()) }
                            td.num { (job.attempts) "/" (job.max_attempts) }
                            td.num { (job.replays) }
                            td { (view::opt_time(job.finished_at)) }
                            td { (view::last_error(job, 300)) }
                            td { a.button href={ (job_path(&job.id)) "/replay" } { "Replay…" } }
                        }
                    }
                }
            }
        }
        (pager("/dashboard/dead", &params, &page))
    };
    Ok(view::page(
        StatusCode::OK,
        Some(&ctx),
        "Dead letters",
        Some(Section::DeadLetters),
        body,
    ))
}

// ---- /dashboard/jobs/{id} -------------------------------------------------

async fn show(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let id = path_id(path)?;
    let form = Form::parse(query.as_deref().unwrap_or("").as_bytes());
    form.only(&["done"])?;
    let done = match form.one("done")? {
        Some("replayed") => Some("Replayed: the job is ready again with a fresh attempt budget."),
        Some("cancelled") => Some("Cancelled: the job will not run."),
        Some("rescheduled") => {
            Some("Rescheduled: the job waits for its new due time, at its new priority.")
        }
        Some("signalled") => Some("Signal delivered: the job is ready and will read it."),
        Some("kept") => Some("Signal kept: the job's next wait for it will take it."),
        _ => None,
    };
    let detail = dash.admin.detail(&id).await?;
    let ctx = Ctx::new(&dash, &visitor);
    let title = format!("Job {}", truncate(id.as_str(), 40));
    let body = html! {
        @if let Some(text) = done { (view::notice("ok", text)) }
        (job_view(&detail))
    };
    Ok(view::page(StatusCode::OK, Some(&ctx), &title, None, body))
}

/// The listing's query for one tag.
fn tag_query(tag: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .append_pair("tag", tag)
        .finish()
}

fn pretty_payload(job: &Job) -> String {
    pretty_json(&job.payload.shown())
}

/// JSON text indented, or as stored if it does not parse.
fn pretty_json(text: &str) -> String {
    serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_owned())
}

/// The job's fields, one per row.
pub(super) fn summary(job: &Job) -> Markup {
    html! {
        table.summary {
            tr { th { "id" } td { code { (job.id.as_str()) } } }
            tr { th { "state" } td { (view::state(job.state)) } }
            tr { th { "queue" } td { (job.queue.as_str()) } }
            tr { th { "kind" } td { (job.kind.as_str()) } }
            tr { th { "attempts" } td { (job.attempts) " of " (job.max_attempts) } }
            tr { th { "replays" } td { (job.replays) } }
            tr { th { "last error" } td {
                @if let Some(class) = job.last_error_class { span.class { (class.as_str()) } " " }
                @match &job.last_error { Some(e) => pre.error { (e) }, None => span.muted { "—" } }
            } }
        }
    }
}

fn job_view(detail: &JobDetail) -> Markup {
    let job = &detail.job;
    html! {
        h1 { "Job " code { (job.id.as_str()) } " " (view::state(job.state)) }
        p.actions {
            @if errand::ReplayRequest::accepts(job.state) {
                a.button href={ (job_path(&job.id)) "/replay" } { "Replay…" }
            }
            @if errand::RescheduleRequest::accepts(job.state) {
                a.button href={ (job_path(&job.id)) "/reschedule" } { "Reschedule…" }
            }
            @if !job.state.is_final() {
                a.button href={ (job_path(&job.id)) "/signal" } { "Signal…" }
            }
            @if errand::CancelRequest::accepts(job.state) {
                a.button.danger href={ (job_path(&job.id)) "/cancel" } { "Cancel…" }
            }
        }
        (summary(job))
        table.summary {
            tr { th { "priority" } td { (job.priority) } }
            tr { th { "lease expiries" } td { (job.lease_expiries) " of " (job.max_lease_expiries) } }
            tr { th { "key" } td { (view::opt_text(job.key.as_ref().map(|k| k.name.as_str()))) } }
            tr { th { "created" } td { (view::time(job.created_at)) } }
            tr { th { "updated" } td { (view::time(job.updated_at)) } }
            tr { th { "available at" } td { (view::time(job.available_at)) } }
            tr { th { "lease until" } td { (view::opt_time(job.lease_until)) } }
            tr { th { "give up at" } td { (view::opt_time(job.give_up_at)) } }
            tr { th { "finished" } td { (view::opt_time(job.finished_at)) } }
            @if let Some(w) = &job.workflow {
                tr { th { "workflow" } td { a href=(super::workflows::workflow_path(w)) { code { (w.as_str()) } } } }
            }
            @if let Some(step) = &job.added_by {
                tr { th { "added by" } td { "step " a href=(super::forms::job_path(step)) { code { (step.as_str()) } } ", as it completed" } }
            }
            @if let Some(b) = &job.batch {
                tr { th { "batch" } td { a href=(super::batches::batch_path(b)) { code { (b.as_str()) } } } }
            }
            @if !job.tags.is_empty() {
                tr { th { "tags" } td {
                    @for tag in &job.tags {
                        a.tag href=(with_query("/dashboard/jobs", &tag_query(tag))) { (tag) } " "
                    }
                } }
            }
            @for (key, value) in &job.meta {
                tr.meta { th { "meta: " (key) } td { (value) } }
            }
            @if let Some(a) = &job.awaiting {
                tr.awaiting { th { "waits for signal" } td {
                    code { (a.signal.as_str()) }
                    @match a.until {
                        Some(until) => { " until " (view::time(until)) ", then " (a.on_timeout.as_str()) }
                        None => { " (no timeout)" }
                    }
                } }
            }
            @if let Some(p) = &job.progress {
                tr.progress { th { "progress" } td {
                    progress value=(p.percent) max="100" { (p.percent) "%" }
                    " " (p.percent) "% (attempt " (p.attempt) ")"
                    @if let Some(m) = &p.message { " — " (m) }
                } }
            }
        }
        h2 { "Payload" }
        pre.payload { (pretty_payload(job)) }
        @if let Some(output) = &job.output {
            h2 { "Output" }
            pre.payload.output { (pretty_json(&output.shown())) }
        }
        @if !detail.signals.is_empty() {
            h2 { "Signals" }
            (signals(detail))
        }
        h2 { "Attempt history" }
        (history(&detail.history))
        h2 { "Audit" }
        (audit(&detail.audit))
    }
}

/// The signals sent to the job: when, what, whether delivered, how big.
fn signals(detail: &JobDetail) -> Markup {
    html! {
        table.signals {
            thead { tr { th.num { "#" } th { "name" } th { "sent" } th { "delivered" } th.num { "payload bytes" } } }
            tbody {
                @for s in &detail.signals {
                    tr {
                        td.num { (s.seq) }
                        td { code { (s.name.as_str()) } }
                        td { (view::time(s.sent_at)) }
                        td {
                            @match s.delivered_at {
                                Some(t) => { (view::time(t)) @if detail.job.resumed_by == Some(s.seq) { " (resumed the job)" } }
                                None => span.muted { "kept for a later wait" },
                            }
                        }
                        td.num { (s.payload_bytes) }
                    }
                }
            }
        }
    }
}

fn history(history: &[AttemptRecord]) -> Markup {
    html! {
        @if history.is_empty() {
            p.empty { "No attempt yet." }
        } @else {
            table.history {
                thead { tr {
                    th.num { "cycle" } th.num { "attempt" } th { "started" } th { "finished" }
                    th { "outcome" } th { "error class" } th { "error" }
                } }
                tbody {
                    @for a in history {
                        tr {
                            td.num { (a.cycle) }
                            td.num { (a.attempt) }
                            td { (view::time(a.started_at)) }
                            td { (view::opt_time(a.finished_at)) }
                            td { (view::opt_text(a.outcome.as_deref().or(Some("running")))) }
                            td { (view::opt_text(a.error_class.map(|c| c.as_str()))) }
                            td { @match &a.error { Some(e) => pre.error { (e) }, None => span.muted { "—" } } }
                        }
                    }
                }
            }
        }
    }
}

fn audit(audit: &[AuditRecord]) -> Markup {
    html! {
        @if audit.is_empty() {
            p.empty { "No operator action yet." }
        } @else {
            table.audit {
                thead { tr { th { "at" } th { "action" } th { "operator" } th { "reason" } } }
                tbody {
                    @for a in audit {
                        tr {
                            td { (view::time(a.at)) }
                            td {
                                (a.action)
                                @if let Some(c) = &a.copied_to {
                                    " to " a href=(job_path(c)) { code { (c.as_str()) } }
                                }
                                @if let Some(o) = &a.copied_from {
                                    " of " a href=(job_path(o)) { code { (o.as_str()) } }
                                }
                            }
                            td { (a.operator) }
                            td { (view::opt_text(a.reason.as_deref())) }
                        }
                    }
                }
            }
        }
    }
}
