//! The queues page (counts per state, oldest due age, leases, recent
//! retries and dead letters, workers, and the charts of every queue), a
//! page per queue with its own charts, and pausing or resuming a queue
//! behind a confirmation page (a queue's cap is set in queue_limit.rs).

use axum::Router;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use errand::{ChartWindow, Name, QueueAction, QueueStats, StatsRequest, Timestamp};
use maud::{Markup, html};

use super::Dash;
use super::actions::audit_fields;
use super::charts;
use super::error::PageError;
use super::forms::{Audit, Form, detail, segment};
use super::guard::Visitor;
use super::view::{self, Ctx, Section};

pub(super) fn routes() -> Router<Dash> {
    Router::new()
        .route("/dashboard/queues", get(overview))
        .route("/dashboard/queues/{queue}", get(one_queue))
        .route(
            "/dashboard/queues/{queue}/pause",
            get(confirm_pause).post(pause),
        )
        .route(
            "/dashboard/queues/{queue}/resume",
            get(confirm_resume).post(resume),
        )
}

fn age(ms: Option<u64>) -> String {
    match ms {
        None => "—".into(),
        Some(ms) if ms < 1_000 => format!("{ms} ms"),
        Some(ms) if ms < 120_000 => format!("{:.1} s", ms as f64 / 1000.0),
        Some(ms) if ms < 7_200_000 => format!("{:.1} min", ms as f64 / 60_000.0),
        Some(ms) => format!("{:.1} h", ms as f64 / 3_600_000.0),
    }
}

fn by_class(m: &std::collections::BTreeMap<String, u64>) -> String {
    if m.is_empty() {
        return "—".into();
    }
    m.iter()
        .map(|(k, v)| format!("{k} {v}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A count, with `≥` when the queue holds more than the cap in its state,
/// `*` when a running service counted it whole.
fn count(q: &QueueStats, state: &str, n: u64) -> String {
    if q.truncated.iter().any(|t| t == state) {
        format!("≥{n}")
    } else if q.counted.iter().any(|t| t == state) {
        format!("{n}*")
    } else {
        n.to_string()
    }
}

/// The chart window a page's query asks for (`?window=hour|day`; the
/// hour when none).
fn chart_window(query: Option<&str>) -> Result<ChartWindow, PageError> {
    let form = Form::parse(query.unwrap_or_default().as_bytes());
    form.only(&["window"])?;
    match form.one("window")? {
        None | Some("") => Ok(ChartWindow::default()),
        Some(w) => w.parse().map_err(|e| PageError::bad_request(detail(e))),
    }
}

fn queue_row(q: &QueueStats) -> Markup {
    let c = &q.counts;
    let name = q.queue.as_str();
    html! {
        tr {
            td {
                a href={ "/dashboard/jobs?queue=" (name) } { (name) }
                " "
                a.small href={ "/dashboard/queues/" (segment(name)) } title={ "Charts of " (name) } { "charts" }
            }
            td.num { (count(q, "ready", c.ready)) }
            td.num { (count(q, "ready", c.scheduled)) }
            td.num { a href={ "/dashboard/jobs?queue=" (name) "&state=blocked" } { (count(q, "blocked", c.blocked)) } }
            td.num { a href={ "/dashboard/jobs?queue=" (name) "&state=waiting" } { (count(q, "waiting", c.waiting)) } }
            td.num { (count(q, "running", c.running)) }
            td.num { (c.active_leases) " / " (c.expired_leases) }
            td.num { a href={ "/dashboard/dead?queue=" (name) } { (count(q, "dead", c.dead)) } }
            td.num { (age(c.oldest_due_age_ms)) }
            td { (by_class(&c.retries)) }
            td { (by_class(&c.dead_letters)) }
            td.num {
                @match q.concurrency_limit {
                    Some(n) => { (c.running.min(u64::from(n))) " of " (n) }
                    None => "—",
                }
            }
            td {
                @if q.paused {
                    span.state.paused { "paused" } " "
                    a.button href={ "/dashboard/queues/" (name) "/resume" } { "Resume…" }
                } @else {
                    a.button href={ "/dashboard/queues/" (name) "/pause" } { "Pause…" }
                }
                " "
                a.button href={ "/dashboard/queues/" (segment(name)) "/limit" } { "Cap…" }
            }
        }
    }
}

fn queue_table(queues: &[QueueStats]) -> Markup {
    html! {
        table.jobs {
            thead { tr {
                th { "queue" } th.num { "ready" } th.num { "scheduled" } th.num { "blocked" } th.num { "waiting" } th.num { "running" }
                th.num { "leases live / expired" } th.num { "dead" } th.num { "oldest due" }
                th { "retries" } th { "dead letters" }
                th.num title="Jobs running of the cap on how many may run at once across every worker (—: no cap)" { "cap" }
                th { }
            } }
            tbody { @for q in queues { (queue_row(q)) } }
        }
    }
}

async fn overview(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let window = chart_window(query.as_deref())?;
    let stats = dash.admin.stats(&StatsRequest::default()).await?;
    let charts = dash.admin.charts(None, window, Timestamp::now()).await?;
    let ctx = Ctx::new(&dash, &visitor);
    let body = html! {
        h1 { "Queues" }
        p.note {
            "Read " (view::time(stats.at)) ". Counts stop at " (stats.cap)
            " rows per queue and state (shown as ≥); retries and dead letters are those of the last "
            (stats.window_secs / 60) " minutes, by error class."
            @if let Some(at) = stats.queues.iter().filter_map(|q| q.counted_at).min() {
                " Past the cap, a running service counts each queue whole once a minute (shown with *; last at "
                (view::time(at)) ")."
            }
        }
        @if stats.queues.is_empty() {
            p.empty { "No queue has ready, running or dead jobs, and none is paused or capped." }
        } @else {
            (queue_table(&stats.queues))
        }
        h2 { "Every queue, over time" }
        (chart_intro("/dashboard/queues", window))
        (charts::panel(&charts))
        h2 { "Workers" }
        @match stats.since_last_worker_cycle_ms {
            None => p.empty { "No worker has reported (workers report every few seconds while they run)." },
            Some(ms) => p { "Last completed claim cycle: " (age(Some(ms))) " ago." },
        }
        @if !stats.workers.is_empty() {
            table.jobs {
                thead { tr {
                    th { "host" } th.num { "pid" } th { "queues" } th { "started" }
                    th { "last cycle" } th.num { "attempts started" } th.num { "late / on time" }
                } }
                tbody {
                    @for w in &stats.workers {
                        tr {
                            td { (w.host) }
                            td.num { (w.pid) }
                            td { @if w.queues.is_empty() { "all" } @else {
                                (w.queues.iter().map(Name::as_str).collect::<Vec<_>>().join(", "))
                            } }
                            td { (view::time(w.started_at)) }
                            td { (view::time(w.last_cycle_at)) }
                            td.num { (w.metrics.started) }
                            td.num { (w.metrics.late) " / " (w.metrics.on_time) }
                        }
                    }
                }
            }
        }
    };
    Ok(view::page(
        StatusCode::OK,
        Some(&ctx),
        "Queues",
        Some(Section::Queues),
        body,
    ))
}

fn chart_intro(base: &str, window: ChartWindow) -> Markup {
    html! {
        (charts::window_links(base, window))
        p.note {
            "From the counts worker services write every few seconds (the server too, for jobs settled over the lease API) and each queue's depth, sampled once a minute by a running worker service or server. Lease expirations, sweeps and one-shot runs (errand work --once) are not counted here; the table above shows recent failures of every kind."
        }
    }
}

/// One queue: its counts and its charts.
async fn one_queue(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, PageError> {
    let queue = path_queue(path)?;
    let window = chart_window(query.as_deref())?;
    let stats = dash.admin.stats(&StatsRequest::default()).await?;
    let charts = dash
        .admin
        .charts(Some(queue.clone()), window, Timestamp::now())
        .await?;
    let ctx = Ctx::new(&dash, &visitor);
    let row: Vec<QueueStats> = stats
        .queues
        .into_iter()
        .filter(|q| q.queue == queue)
        .collect();
    let name = queue.as_str();
    let body = html! {
        h1 { "Queue " code { (name) } }
        p {
            a href="/dashboard/queues" { "« all queues" } " · "
            a href={ "/dashboard/jobs?queue=" (name) } { "its jobs" } " · "
            a href={ "/dashboard/dead?queue=" (name) } { "its dead letters" }
        }
        @if row.is_empty() {
            p.empty { "The queue has no ready, running or dead jobs now, and is neither paused nor capped." }
        } @else {
            (queue_table(&row))
        }
        h2 { "Over time" }
        (chart_intro(&format!("/dashboard/queues/{}", segment(name)), window))
        (charts::panel(&charts))
    };
    Ok(view::page(
        StatusCode::OK,
        Some(&ctx),
        &format!("Queue {name}"),
        Some(Section::Queues),
        body,
    ))
}

pub(super) fn path_queue(path: Result<Path<String>, PathRejection>) -> Result<Name, PageError> {
    let Path(q) = path.map_err(|r| {
        PageError::bad_request(format!(
            "The queue name in the address is not valid: {}",
            r.body_text()
        ))
    })?;
    Name::parse("queue", q).map_err(|e| PageError::bad_request(detail(e)))
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
    queue: &Name,
    entered: &Audit,
    problem: Option<&str>,
) -> Response {
    let (title, explain) = match change {
        Change::Pause => (
            "Pause queue",
            "No worker, in any process, claims from a paused queue until it is resumed; jobs already running finish.",
        ),
        Change::Resume => (
            "Resume queue",
            "Workers claim from the queue again at their next cycle.",
        ),
    };
    let body = html! {
        h1 { (title) " " code { (queue.as_str()) } "?" }
        @if let Some(p) = problem { (view::notice("error", p)) }
        p { (explain) " Your name and reason go into the audit log." }
        form.confirm method="post" action={ "/dashboard/queues/" (queue.as_str()) "/" (change.verb()) } {
            (ctx.csrf_field())
            (audit_fields(entered))
            p.actions {
                button.danger[change == Change::Pause] .primary[change == Change::Resume] type="submit" {
                    "Confirm: " (change.verb()) " " (queue.as_str())
                }
                " "
                a href="/dashboard/queues" { "back to the queues" }
            }
        }
    };
    let status = view::form_status(problem);
    view::page(status, Some(ctx), title, Some(Section::Queues), body)
}

async fn confirm_pause(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let queue = path_queue(path)?;
    let ctx = Ctx::new(&dash, &visitor);
    Ok(confirm_page(
        &ctx,
        Change::Pause,
        &queue,
        &Audit::default(),
        None,
    ))
}

async fn confirm_resume(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, PageError> {
    let queue = path_queue(path)?;
    let ctx = Ctx::new(&dash, &visitor);
    Ok(confirm_page(
        &ctx,
        Change::Resume,
        &queue,
        &Audit::default(),
        None,
    ))
}

async fn act(
    dash: Dash,
    visitor: Visitor,
    path: Result<Path<String>, PathRejection>,
    form: Form,
    change: Change,
) -> Result<Response, PageError> {
    let queue = path_queue(path)?;
    form.only(&["operator", "reason"])?;
    let Audit { operator, reason } = match Audit::posted(&form) {
        Ok(audit) => audit,
        Err((entered, problem)) => {
            // Nothing is written; the form comes back with what was entered.
            let ctx = Ctx::new(&dash, &visitor);
            return Ok(confirm_page(&ctx, change, &queue, &entered, Some(&problem)));
        }
    };
    let action = QueueAction {
        queue,
        operator,
        reason: Some(reason),
    };
    match change {
        Change::Pause => dash.admin.pause_queue(&action).await?,
        Change::Resume => dash.admin.resume_queue(&action).await?,
    };
    Ok(Redirect::to("/dashboard/queues").into_response())
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
