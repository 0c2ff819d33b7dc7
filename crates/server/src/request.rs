//! What every handler of the API shares: the application state, the
//! answer type, reading a JSON body, and checking the fields and path
//! parameters several routes take. The route table (`routes.rs`) and the
//! handlers of each group of routes (`routes.rs`, `leases.rs`,
//! `admin.rs`, `workflows.rs`, `schedules.rs`) import from here, never
//! from each other.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use errand::{Admin, Client, JobId, RetryPolicy, Store};
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;
use tokio::sync::watch;

use crate::http::BodyTimeout;
use crate::problem::Problem;

pub(crate) use errand::core::{MAX_OPERATOR_BYTES, MAX_REASON_BYTES};

#[derive(Clone, Debug)]
pub(crate) struct App {
    /// The worker's seam, for the lease API's remote workers.
    pub(crate) store: Arc<dyn Store>,
    /// Enqueues jobs into `store`.
    pub(crate) client: Client,
    /// The operator's actions on `store`.
    pub(crate) admin: Admin,
    pub(crate) max_body: usize,
    pub(crate) max_payload: usize,
    pub(crate) read_timeout: Duration,
    pub(crate) retry: RetryPolicy,
    /// What the lease API settles, counted for the dashboard's charts.
    pub(crate) minutes: Arc<errand::MinuteCounter>,
    /// How often those counts are written.
    pub(crate) chart_counts_every: Duration,
    /// Becomes `true` when the server shuts down: waiting lease requests
    /// answer at once.
    pub(crate) stopping: watch::Receiver<bool>,
    /// The requests that may wait for a job to end at once (`?wait=`).
    pub(crate) job_waits: Arc<tokio::sync::Semaphore>,
    /// How many that is.
    pub(crate) job_waits_max: usize,
}

pub(crate) type Answer = Result<Response, Problem>;

pub(crate) fn json<T: Serialize + ?Sized>(status: StatusCode, value: &T) -> Answer {
    let body = serde_json::to_vec(value)
        .map_err(|e| Problem::internal(format!("the response could not be encoded: {e}")))?;
    Ok((
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response())
}

/// Absent, `application/json` or `application/*+json`: anything else (a
/// form, plain text) is refused, which also keeps HTML forms out.
fn json_content_type(headers: &HeaderMap) -> Result<(), Problem> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    let essence = value
        .to_str()
        .ok()
        .and_then(|v| v.split(';').next())
        .map(|v| v.trim().to_ascii_lowercase());
    match essence.as_deref() {
        Some("application/json") => Ok(()),
        Some(t) if t.starts_with("application/") && t.ends_with("+json") => Ok(()),
        _ => Err(Problem::unsupported_media_type()),
    }
}

/// Reads the whole body: at most `max_body` bytes (413 past it), within
/// the read timeout from the moment the handler asks for it (408 past it,
/// so a client trickling its body cannot hold the connection).
async fn read_body(app: &App, body: Body) -> Result<Bytes, Problem> {
    let limited = Limited::new(body, app.max_body);
    match tokio::time::timeout(app.read_timeout, limited.collect()).await {
        Err(_elapsed) => Err(Problem::request_timeout(app.read_timeout)),
        Ok(Ok(collected)) => Ok(collected.to_bytes()),
        Ok(Err(e)) if e.is::<LengthLimitError>() => Err(Problem::body_too_large(app.max_body)),
        Ok(Err(e)) if BodyTimeout::find(&*e).is_some() => {
            Err(Problem::request_timeout(app.read_timeout))
        }
        Ok(Err(e)) => Err(Problem::malformed_json(format!(
            "the request body could not be read: {e}"
        ))),
    }
}

/// Reads and parses a JSON body; `example` shows the expected shape.
pub(crate) async fn body_json<T: DeserializeOwned>(
    app: &App,
    headers: &HeaderMap,
    body: Body,
    example: &str,
) -> Result<T, Problem> {
    json_content_type(headers)?;
    let body = read_body(app, body).await?;
    if body.iter().all(u8::is_ascii_whitespace) {
        return Err(Problem::malformed_json(format!(
            "the request body is empty: send a JSON object like {example}"
        )));
    }
    serde_json::from_slice(&body).map_err(|e| {
        use serde_json::error::Category;
        let what = match e.classify() {
            Category::Data => "the JSON does not have the expected shape",
            Category::Syntax | Category::Eof | Category::Io => "the body is not valid JSON",
        };
        Problem::malformed_json(format!("{what}: {e}; send a JSON object like {example}"))
    })
}

/// A present field keeps its raw JSON, `null` included (with
/// `#[serde(default, deserialize_with = "raw_json")]`).
pub(crate) fn raw_json<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Box<RawValue>>, D::Error> {
    Box::<RawValue>::deserialize(d).map(Some)
}

pub(crate) fn job_id(path: Result<Path<String>, PathRejection>) -> Result<JobId, Problem> {
    let Path(id) = path.map_err(|r| {
        Problem::invalid(format!(
            "the job id in the path is not valid: {}",
            r.body_text()
        ))
    })?;
    Ok(JobId::new(id)?)
}

/// Checks the `operator` and `reason` of an operator's request, naming
/// the field that is wrong (the reason may hold line breaks).
pub(crate) fn who_and_why(operator: &str, reason: Option<&str>) -> Result<(), Problem> {
    audit_text("operator", operator, MAX_OPERATOR_BYTES, false)?;
    reason.map_or(Ok(()), |r| audit_text("reason", r, MAX_REASON_BYTES, true))
}

/// Operator names and reasons end up in the audit log: printable text of a
/// bounded size (PostgreSQL text cannot hold NUL at all).
pub(crate) fn audit_text(
    field: &str,
    value: &str,
    max: usize,
    allow_line_breaks: bool,
) -> Result<(), Problem> {
    if !errand::core::is_audit_text(value, max, allow_line_breaks) {
        let breaks = if allow_line_breaks {
            " (line breaks and tabs are allowed)"
        } else {
            ""
        };
        return Err(Problem::invalid(format!(
            "`{field}` must be 1 to {max} bytes of printable text{breaks}, not blank"
        )));
    }
    Ok(())
}

pub(crate) fn duration_field(
    field: &str,
    text: Option<String>,
) -> Result<Option<std::time::Duration>, Problem> {
    text.map(|t| {
        errand::parse_duration(&t)
            .map_err(|e| Problem::invalid(format!("`{field}`: {}", detail_of(e))))
    })
    .transpose()
}

pub(crate) fn detail_of(e: errand::Error) -> String {
    match e {
        errand::Error::Invalid(m) => m,
        other => other.to_string(),
    }
}

/// An empty parameter (`?state=`) means "not given".
pub(crate) fn given(v: Option<String>) -> Option<String> {
    v.filter(|s| !s.is_empty())
}

/// A page's `limit` parameter: 1 to 10,000, 100 when not given.
pub(crate) fn page_limit(text: Option<String>) -> Result<u32, Problem> {
    match given(text) {
        None => Ok(100),
        Some(text) => match text.parse::<u32>() {
            Ok(n @ 1..=10_000) => Ok(n),
            _ => Err(Problem::invalid(format!(
                "limit {text:?} is not valid: give a whole number from 1 to 10000"
            ))),
        },
    }
}
