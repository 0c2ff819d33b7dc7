//! The HTTP API: `GET /documents`, `GET /wallet`, `POST /payments`.
//!
//! It is meant for local tools only: the server binds to 127.0.0.1, every
//! request carrying an `Origin` header (a browser) is refused with 403
//! before anything else runs, and so is a request addressed to anything
//! but a loopback name (DNS rebinding): a `Host` that is not one, two
//! `Host` headers, or an absolute-form target naming another host. The
//! check is `errand serve`'s own ([`errand_server::http::check_loopback`]).
//! There is no administrative endpoint: jobs are inspected and replayed
//! only with the local `fieldnotes` command.
//!
//! [`serve`] is `errand serve`'s serving loop ([`errand_server::http::serve`]):
//! a request head (and an idle kept-alive connection) gets the read timeout,
//! the body the same time again (408 `request_timeout` past it), and the
//! number of open connections is bounded.
//!
//! Every error has a JSON body `{"error": CODE, "message": TEXT}` with a
//! stable code.

use std::future::Future;

use axum::Router;
use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use errand::SqliteStore;
use errand_server::http::{BodyTimeout, Limits, check_loopback};
use serde::Deserialize;
use serde_json::json;

use crate::app::{self, IdempotencyKey, PayAnswer, error_body};
use crate::error::Error;

/// The largest request body accepted.
pub const BODY_LIMIT: usize = 16 * 1024;
/// The header that makes a payment request idempotent.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Set on a response that repeats a stored answer.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

#[derive(Clone, Debug)]
struct AppState {
    store: SqliteStore,
}

/// The API's router over an open Field Notes store.
pub fn router(store: SqliteStore) -> Router {
    Router::new()
        .route("/documents", get(list_documents))
        .route("/wallet", get(show_wallet))
        .route("/payments", post(create_payment))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .layer(middleware::from_fn(refuse_browsers))
        .with_state(AppState { store })
}

/// Serves the API on `listener` under `limits` until `shutdown` completes.
pub async fn serve(
    store: SqliteStore,
    listener: tokio::net::TcpListener,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), errand_server::ServeError> {
    errand_server::http::serve(listener, router(store), limits, shutdown).await
}

fn json_response(status: StatusCode, body: String) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    json_response(status, error_body(code, message))
}

/// Refuses browsers (any `Origin` header) and requests addressed to
/// anything but loopback before routing, body limits or handlers run.
async fn refuse_browsers(request: Request, next: Next) -> Response {
    if request.headers().contains_key(header::ORIGIN) {
        return error(
            StatusCode::FORBIDDEN,
            "origin_refused",
            "requests from browsers (with an Origin header) are refused; use curl or the fieldnotes command",
        );
    }
    if let Err(why) = check_loopback(request.uri(), request.headers()) {
        return error(
            StatusCode::FORBIDDEN,
            "host_refused",
            &format!(
                "{why}: this API answers only requests addressed to 127.0.0.1, [::1] or localhost, with one Host header; use http://127.0.0.1:PORT"
            ),
        );
    }
    next.run(request).await
}

async fn not_found() -> Response {
    error(
        StatusCode::NOT_FOUND,
        "no_route",
        "no such endpoint: use GET /documents, GET /wallet or POST /payments",
    )
}

async fn method_not_allowed() -> Response {
    error(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not accept that method",
    )
}

/// Maps an application error to a response. Storage details stay in the
/// server's log.
fn app_error(e: &Error) -> Response {
    match e {
        Error::Refused(r) => json_response(
            StatusCode::from_u16(r.http_status()).unwrap_or(StatusCode::BAD_REQUEST),
            error_body(r.code(), &r.to_string()),
        ),
        Error::Invalid(m) => error(StatusCode::BAD_REQUEST, "invalid", m),
        Error::IdempotencyKeyReused { .. } => error(
            StatusCode::UNPROCESSABLE_ENTITY,
            "idempotency_key_reused",
            &e.to_string(),
        ),
        Error::Errand(errand::Error::Busy(_)) => {
            tracing::warn!(error = %e, "database busy");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "busy",
                "the database is busy; retry the request (with the same Idempotency-Key)",
            )
        }
        other => {
            tracing::error!(error = %other, "request failed");
            error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "internal",
                "the request failed inside the server; see its log",
            )
        }
    }
}

async fn list_documents(State(state): State<AppState>) -> Response {
    match app::documents(&state.store).await {
        Ok(docs) => json_response(StatusCode::OK, json!({ "documents": docs }).to_string()),
        Err(e) => app_error(&e),
    }
}

async fn show_wallet(State(state): State<AppState>) -> Response {
    match app::wallet(&state.store).await {
        Ok(w) => json_response(
            StatusCode::OK,
            json!({ "author_id": w.author_id, "balance_cents": w.balance_cents }).to_string(),
        ),
        Err(e) => app_error(&e),
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PaymentRequest {
    document_id: String,
}

fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|essence| essence.trim().eq_ignore_ascii_case("application/json"))
}

/// The request's `Idempotency-Key`, if any; `Err` holds why it is invalid.
fn idempotency_key(headers: &HeaderMap) -> Result<Option<IdempotencyKey>, String> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let Some(value) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err("send at most one Idempotency-Key header".into());
    }
    let text = value
        .to_str()
        .map_err(|_| "an Idempotency-Key may hold only printable ASCII characters".to_owned())?;
    IdempotencyKey::parse(text)
        .map(Some)
        .map_err(|e| e.to_string())
}

fn answer_response(answer: PayAnswer) -> Response {
    let status = StatusCode::from_u16(answer.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, answer.body);
    if answer.replayed {
        response
            .headers_mut()
            .insert(IDEMPOTENT_REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// The answer to a body that could not be read: too slow, too large, or
/// broken off.
fn body_refused(rejection: &BytesRejection) -> Response {
    if let Some(timeout) = BodyTimeout::find(rejection) {
        let mut response = error(
            StatusCode::REQUEST_TIMEOUT,
            "request_timeout",
            &format!(
                "{timeout}; send the whole request at once (fieldnotes serve --read-timeout sets the limit)"
            ),
        );
        response
            .headers_mut()
            .insert(header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            &format!("the request body is larger than {BODY_LIMIT} bytes"),
        );
    }
    error(
        StatusCode::BAD_REQUEST,
        "unreadable_body",
        &format!("the request body could not be read: {rejection}"),
    )
}

async fn create_payment(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let body = match body {
        Ok(b) => b,
        Err(rejection) => return body_refused(&rejection),
    };
    if !is_json(&headers) {
        return error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as JSON with Content-Type: application/json",
        );
    }
    let key = match idempotency_key(&headers) {
        Ok(k) => k,
        Err(message) => {
            return error(StatusCode::BAD_REQUEST, "invalid_idempotency_key", &message);
        }
    };
    let request: PaymentRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return error(
                StatusCode::BAD_REQUEST,
                "malformed_body",
                &format!("expected a JSON object like {{\"document_id\": \"document-7\"}}: {e}"),
            );
        }
    };
    let outcome = match &key {
        Some(key) => app::pay_idempotent(&state.store, &request.document_id, key).await,
        None => match app::pay(&state.store, &request.document_id).await {
            Ok(payment) => Ok(PayAnswer::of(&Ok(payment))),
            Err(Error::Refused(r)) => Ok(PayAnswer::of(&Err(r))),
            Err(e) => Err(e),
        },
    };
    match outcome {
        Ok(answer) => answer_response(answer),
        Err(e) => app_error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_content_types_are_recognised() {
        let mut h = HeaderMap::new();
        assert!(!is_json(&h));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("Application/JSON; charset=utf-8"),
        );
        assert!(is_json(&h));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/jsonx"),
        );
        assert!(!is_json(&h));
    }
}
