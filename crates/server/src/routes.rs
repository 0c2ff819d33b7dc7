//! The routes and their handlers. Every route is one row of
//! [`endpoints`], which builds the router and which the tests hold against
//! the OpenAPI description (`openapi.json`) in both directions.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, Uri, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodFilter, MethodRouter, on};
use errand::{CancelRequest, ReplayRequest, Store};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::ServerConfig;
use crate::admin;
use crate::guard::{HEALTHZ, fence};
use crate::leases;
use crate::listing;
use crate::problem::Problem;
use crate::queues;
use crate::request::{
    Answer, App, body_json, detail_of, duration_field, given, job_id, json, who_and_why,
};
use crate::schedules;
use crate::workflows;

/// Where the OpenAPI description is served.
pub(crate) const OPENAPI_PATH: &str = "/v1/openapi.json";
/// The OpenAPI 3.1 description of every route, served as it is.
pub(crate) const OPENAPI: &str = include_str!("../openapi.json");

/// An HTTP method the API routes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verb {
    Get,
    Post,
}

impl Verb {
    #[cfg_attr(not(test), expect(dead_code, reason = "the OpenAPI test reads it"))]
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Verb::Get => "GET",
            Verb::Post => "POST",
        }
    }

    fn filter(self) -> MethodFilter {
        match self {
            Verb::Get => MethodFilter::GET,
            Verb::Post => MethodFilter::POST,
        }
    }
}

/// One route: a path, a method and its handler.
pub(crate) struct Endpoint {
    pub(crate) path: &'static str,
    #[cfg_attr(not(test), expect(dead_code, reason = "the OpenAPI test reads it"))]
    pub(crate) verb: Verb,
    handler: MethodRouter<App>,
}

fn endpoint<H, T>(path: &'static str, verb: Verb, handler: H) -> Endpoint
where
    H: axum::handler::Handler<T, App>,
    T: 'static,
{
    Endpoint {
        path,
        verb,
        handler: on(verb.filter(), handler),
    }
}

/// Every route of the API. The router is built from this table and from
/// nothing else; a route added here must be described in `openapi.json`
/// (a test checks both directions).
pub(crate) fn endpoints() -> Vec<Endpoint> {
    use Verb::{Get, Post};
    vec![
        endpoint(HEALTHZ, Get, healthz),
        endpoint(OPENAPI_PATH, Get, openapi),
        endpoint("/v1/jobs", Post, enqueue),
        endpoint("/v1/jobs", Get, listing::list),
        endpoint("/v1/jobs/{id}", Get, show),
        endpoint("/v1/jobs/{id}/replay", Post, replay),
        endpoint("/v1/jobs/{id}/cancel", Post, cancel),
        endpoint("/v1/jobs/{id}/reschedule", Post, reschedule),
        endpoint("/v1/jobs/{id}/purge", Post, admin::purge),
        endpoint("/v1/jobs/{id}/signals", Post, crate::signals::send),
        endpoint("/v1/bulk/replay", Post, crate::bulk::replay),
        endpoint("/v1/workflows/{id}", Get, workflows::show),
        endpoint("/v1/batches/{id}", Get, workflows::batch),
        endpoint("/v1/batches/{id}/seal", Post, workflows::seal),
        endpoint("/v1/workflows/{id}/cancel", Post, workflows::cancel),
        endpoint("/v1/workflows/{id}/replay", Post, workflows::replay),
        endpoint("/v1/stats", Get, admin::stats),
        endpoint("/v1/charts", Get, admin::charts),
        endpoint("/v1/queues/paused", Get, queues::paused),
        endpoint("/v1/queues/limits", Get, queues::limits),
        endpoint("/v1/queues/{queue}/pause", Post, queues::pause),
        endpoint("/v1/queues/{queue}/resume", Post, queues::resume),
        endpoint("/v1/queues/{queue}/limit", Post, queues::limit),
        endpoint("/v1/audit", Get, admin::audit),
        endpoint("/v1/schedules", Get, schedules::list),
        endpoint("/v1/schedules", Post, schedules::add),
        endpoint("/v1/schedules/{name}", Get, schedules::show),
        endpoint("/v1/schedules/{name}/pause", Post, schedules::pause),
        endpoint("/v1/schedules/{name}/resume", Post, schedules::resume),
        endpoint("/v1/schedules/{name}/remove", Post, schedules::remove),
        endpoint("/metrics", Get, admin::metrics),
        endpoint("/v1/leases", Post, leases::lease),
        endpoint("/v1/leases/{id}/heartbeat", Post, leases::heartbeat),
        endpoint("/v1/leases/{id}/complete", Post, leases::complete),
        endpoint("/v1/leases/{id}/fail", Post, leases::fail),
        endpoint("/v1/leases/{id}/snooze", Post, leases::snooze),
        endpoint("/v1/leases/{id}/release", Post, leases::release),
        endpoint("/v1/leases/{id}/cancel", Post, leases::cancel),
        endpoint("/v1/leases/{id}/await", Post, leases::suspend),
    ]
}

pub(crate) fn router(
    store: Arc<dyn Store>,
    config: ServerConfig,
    stopping: watch::Receiver<bool>,
    minutes: Arc<errand::MinuteCounter>,
) -> Router {
    let app = App {
        admin: errand::Admin::new(store.clone()),
        client: errand::Client::new(store.clone()),
        store,
        max_body: config.max_body,
        max_payload: config.max_payload,
        read_timeout: config.read_timeout,
        retry: config.retry,
        minutes,
        chart_counts_every: config.chart_counts_every,
        stopping,
        job_waits: Arc::new(tokio::sync::Semaphore::new(config.max_job_waits)),
        job_waits_max: config.max_job_waits,
    };
    let mut routes = Router::new();
    for e in endpoints() {
        routes = routes.route(e.path, e.handler);
    }
    routes
        .fallback(no_route)
        .method_not_allowed_fallback(method_not_allowed)
        .with_state(app)
        .layer(middleware::from_fn_with_state(config.token, fence))
}

async fn healthz() -> Answer {
    json(StatusCode::OK, &serde_json::json!({"ok": true}))
}

async fn openapi() -> Response {
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        OPENAPI,
    )
        .into_response()
}

async fn no_route(uri: Uri) -> Problem {
    Problem::route_not_found(uri.path())
}

async fn method_not_allowed() -> Problem {
    Problem::method_not_allowed()
}

// ---- POST /v1/jobs --------------------------------------------------------

const ENQUEUE_EXAMPLE: &str =
    r#"{"kind": "email", "id": "order-17", "payload": {"to": "a@example.com"}}"#;

/// The request's own W3C `traceparent` header, when it carries a valid one:
/// a job enqueued inside a traced request joins that trace unless the body
/// names another. An invalid header is ignored, as W3C Trace Context asks
/// of a receiver (the body's field, by contrast, is validated).
fn header_traceparent(headers: &HeaderMap) -> Option<String> {
    let mut values = headers.get_all("traceparent").iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return None;
    };
    let text = value.to_str().ok()?.trim();
    errand::core::TraceParent::parse(text)
        .ok()
        .map(|tp| tp.to_string())
}

async fn enqueue(State(app): State<App>, headers: HeaderMap, body: Body) -> Answer {
    let req: errand::core::JobJson = body_json(&app, &headers, body, ENQUEUE_EXAMPLE).await?;
    if req.payload_bytes() > app.max_payload {
        return Err(Problem::payload_too_large(
            req.payload_bytes(),
            app.max_payload,
        ));
    }
    let mut spec = req.into_spec()?;
    spec.traceparent = spec.traceparent.or_else(|| header_traceparent(&headers));
    let job = spec.build_limited(app.max_payload)?;
    let inserted = app.client.enqueue(job).await?;
    let status = if inserted.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    json(
        status,
        &Enqueued {
            created: inserted.created,
            job: &inserted.job,
        },
    )
}

// Answers that carry jobs are typed structs serialized straight to text:
// a payload then goes out as stored, never parsed into a `serde_json::Value`
// (which a stored payload such as `[1e400]` could fail, and `json!` would
// turn into a panic).

#[derive(Serialize)]
struct Enqueued<'a> {
    created: bool,
    job: &'a errand::Job,
}

#[derive(Serialize)]
struct OneJob<'a> {
    job: &'a errand::Job,
}

// ---- GET /v1/jobs/{id} ----------------------------------------------------

/// The longest `?wait=` a request may ask.
const MAX_JOB_WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ShowQuery {
    wait: Option<String>,
}

/// `GET /v1/jobs/{id}`, and with `?wait=DUR` (at most 60 s) a long poll:
/// the answer comes when the job has ended (done, dead or cancelled), the
/// time is up or the server shuts down — the job as it then stands,
/// ended or not. At most `max_job_waits` requests wait at once; one more
/// is refused with 503 and `Retry-After`.
async fn show(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    query: Result<Query<ShowQuery>, QueryRejection>,
) -> Answer {
    let id = job_id(path)?;
    let Query(q) = query.map_err(|r| {
        Problem::malformed_json(format!("{}; the parameter is wait", r.body_text()))
    })?;
    if let Some(wait) = given(q.wait) {
        let wait = leases::within("wait", &wait, Duration::ZERO, MAX_JOB_WAIT, "at most 60s")?;
        let Ok(_waiting) = Arc::clone(&app.job_waits).try_acquire_owned() else {
            return Err(errand::Error::Busy(format!(
                "{} requests are already waiting for jobs to end, the most this server lets wait \
                 at once; retry shortly, or ask without `wait`",
                app.job_waits_max
            ))
            .into());
        };
        let mut stopping = app.stopping.clone();
        tokio::select! {
            ended = app.client.wait(&id, wait) => match ended {
                Ok(_) | Err(errand::Error::TimedOut(_)) => {}
                Err(e) => return Err(e.into()),
            },
            () = leases::stop_asked(&mut stopping) => {}
        }
    }
    let detail = app.admin.detail(&id).await?;
    json(StatusCode::OK, &detail)
}

// ---- POST /v1/jobs/{id}/replay and /cancel --------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplayBody {
    operator: String,
    reason: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    operator: String,
    reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RescheduleBody {
    operator: String,
    reason: Option<String>,
    now: Option<bool>,
    delay: Option<String>,
    run_at: Option<String>,
    priority: Option<i16>,
}

const RESCHEDULE_EXAMPLE: &str =
    r#"{"operator": "alice", "reason": "customer waiting", "now": true, "priority": 5}"#;

/// `POST /v1/jobs/{id}/reschedule`: a waiting job to a new due time
/// (`now`, `delay` from now, or `run_at`) and/or priority.
async fn reschedule(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let id = job_id(path)?;
    let req: RescheduleBody = body_json(&app, &headers, body, RESCHEDULE_EXAMPLE).await?;
    who_and_why(&req.operator, req.reason.as_deref())?;
    let now = req.now.unwrap_or(false);
    let run = match (now, duration_field("delay", req.delay)?, req.run_at) {
        (true, None, None) => Some(errand::Schedule::Now),
        (false, Some(d), None) => Some(errand::Schedule::After(d)),
        (false, None, Some(t)) => Some(errand::Schedule::At(
            errand::Timestamp::parse_rfc3339(&t)
                .map_err(|e| Problem::invalid(format!("`run_at`: {}", detail_of(e))))?,
        )),
        (false, None, None) => None,
        _ => {
            return Err(Problem::invalid(
                "give one of `now`, `delay` and `run_at`, not more",
            ));
        }
    };
    let moved = app
        .admin
        .reschedule_jobs(&errand::RescheduleRequest {
            ids: vec![id],
            run,
            priority: req.priority,
            operator: req.operator,
            reason: req.reason,
        })
        .await?;
    one_job(moved)
}

fn one_job(jobs: Vec<errand::Job>) -> Answer {
    match jobs.into_iter().next() {
        Some(job) => json(StatusCode::OK, &OneJob { job: &job }),
        None => Err(Problem::internal("the store answered without the job")),
    }
}

async fn replay(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let id = job_id(path)?;
    let req: ReplayBody = body_json(
        &app,
        &headers,
        body,
        r#"{"operator": "alice", "reason": "SMTP relay fixed"}"#,
    )
    .await?;
    who_and_why(&req.operator, Some(&req.reason))?;
    let replayed = app
        .admin
        .replay_jobs(&ReplayRequest {
            ids: vec![id],
            operator: req.operator,
            reason: Some(req.reason),
        })
        .await?;
    one_job(replayed)
}

async fn cancel(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let id = job_id(path)?;
    let req: CancelBody = body_json(
        &app,
        &headers,
        body,
        r#"{"operator": "alice", "reason": "customer withdrew"}"#,
    )
    .await?;
    who_and_why(&req.operator, req.reason.as_deref())?;
    let cancelled = app
        .admin
        .cancel_jobs(&CancelRequest {
            ids: vec![id],
            operator: req.operator,
            reason: req.reason,
        })
        .await?;
    one_job(cancelled)
}
