//! Signals over HTTP: a wait given with an enqueue (`"await"`), the
//! signal a caller sends to a job (`POST /v1/jobs/{id}/signals`), and a
//! lease-API worker's suspend (`POST /v1/leases/{id}/await`).

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use errand::{AuditStamp, NewSignal, Signalled};
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::problem::Problem;
use crate::request::{Answer, App, body_json, duration_field, job_id, json, raw_json, who_and_why};

/// The wait a suspend asks for: the signal, at most how long (text such
/// as `30m`) and the policy then — the same shape as `{"await": …}` in an
/// enqueue's body or an `--exec` command's outcome file.
pub(crate) fn wait_of(
    signal: &str,
    timeout: Option<String>,
    on_timeout: Option<String>,
) -> Result<errand::Await, Problem> {
    let mut wait = errand::Await::new(signal)?;
    wait.timeout = duration_field("timeout", timeout)?;
    if let Some(policy) = on_timeout {
        wait.on_timeout = policy.parse()?;
    }
    wait.validate()?;
    Ok(wait)
}

// ---- POST /v1/jobs/{id}/signals -------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SignalBody {
    name: String,
    #[serde(default, deserialize_with = "raw_json")]
    payload: Option<Box<RawValue>>,
    #[serde(default)]
    buffer: bool,
    operator: Option<String>,
    reason: Option<String>,
}

const SIGNAL_EXAMPLE: &str = r#"{"name": "paid", "payload": {"payment": "p-1"}, "operator": "alice", "reason": "paid by phone"}"#;

/// `POST /v1/jobs/{id}/signals`: 200 with `{"delivered": true|false,
/// "job": …}`; 409 when the job is not waiting for the signal (and it did
/// not ask to be kept), 404 for an unknown job.
pub(crate) async fn send(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let id = job_id(path)?;
    let req: SignalBody = body_json(&app, &headers, body, SIGNAL_EXAMPLE).await?;
    let mut signal = NewSignal::new(id, &req.name)?;
    if let Some(payload) = req.payload {
        signal = signal.with_payload_text(payload.get())?;
    }
    signal.buffer = req.buffer;
    match (req.operator, req.reason) {
        (Some(operator), reason) => {
            who_and_why(&operator, reason.as_deref())?;
            signal.by = Some(AuditStamp { operator, reason });
        }
        (None, Some(_)) => {
            return Err(Problem::invalid(
                "`reason` is recorded with the operator who sent the signal: give `operator` too",
            ));
        }
        (None, None) => {}
    }
    let sent: Signalled = app.client.signal(&signal).await?;
    json(StatusCode::OK, &sent)
}
