//! Error responses: RFC 9457 problem documents with a stable `code`.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;

/// The base of every problem `type` URI; the code follows.
pub(crate) const TYPE_BASE: &str = "https://errand.dev/problems/";
pub(crate) const PROBLEM_JSON: &str = "application/problem+json";

/// One error response.
#[derive(Debug)]
pub(crate) struct Problem {
    pub(crate) status: StatusCode,
    pub(crate) code: &'static str,
    pub(crate) title: &'static str,
    pub(crate) detail: String,
    retry_after: bool,
    challenge: bool,
    close: bool,
}

#[derive(Serialize)]
struct Body<'a> {
    #[serde(rename = "type")]
    kind: String,
    title: &'a str,
    status: u16,
    detail: &'a str,
    code: &'a str,
}

impl Problem {
    fn new(
        status: StatusCode,
        code: &'static str,
        title: &'static str,
        detail: impl Into<String>,
    ) -> Self {
        Problem {
            status,
            code,
            title,
            detail: detail.into(),
            retry_after: false,
            challenge: false,
            close: false,
        }
    }

    /// Bad input that the library refused (a name, an id, a budget, …).
    pub(crate) fn invalid(detail: impl Into<String>) -> Self {
        Problem::new(StatusCode::BAD_REQUEST, "invalid", "Invalid input", detail)
    }

    /// A body or query that is not the JSON (or query string) expected.
    pub(crate) fn malformed_json(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::BAD_REQUEST,
            "malformed_json",
            "Malformed request",
            detail,
        )
    }

    pub(crate) fn unauthorized(detail: impl Into<String>) -> Self {
        Problem {
            challenge: true,
            ..Problem::new(
                StatusCode::UNAUTHORIZED,
                "unauthorized",
                "Unauthorized",
                detail,
            )
        }
    }

    pub(crate) fn browser_refused(header: &str) -> Self {
        Problem::new(
            StatusCode::FORBIDDEN,
            "browser_origin_refused",
            "Browser requests refused",
            format!(
                "this API does not answer browsers (the request carries a {header} header); call it from a program or with curl"
            ),
        )
    }

    /// `why`: the loopback check's refusal (`guard::HostRefused`).
    pub(crate) fn host_refused(why: impl std::fmt::Display) -> Self {
        Problem::new(
            StatusCode::FORBIDDEN,
            "host_refused",
            "Host refused",
            format!(
                "{why}: without an access token this API answers only requests addressed to a loopback address or localhost, with one Host header; use http://127.0.0.1:PORT"
            ),
        )
    }

    pub(crate) fn route_not_found(path: &str) -> Self {
        Problem::new(
            StatusCode::NOT_FOUND,
            "not_found",
            "Not found",
            format!(
                "no such endpoint {path:?}: GET /v1/openapi.json describes every route (see also docs/http-api.md)"
            ),
        )
    }

    pub(crate) fn method_not_allowed() -> Self {
        Problem::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            "Method not allowed",
            "this endpoint does not accept that method; see docs/http-api.md",
        )
    }

    pub(crate) fn unsupported_media_type() -> Self {
        Problem::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "Unsupported media type",
            "send the body as JSON with Content-Type: application/json",
        )
    }

    pub(crate) fn body_too_large(limit: usize) -> Self {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            "Request body too large",
            format!(
                "the request body is larger than the server's limit of {limit} bytes; store large data elsewhere and pass a reference"
            ),
        )
    }

    pub(crate) fn payload_too_large(size: usize, limit: usize) -> Self {
        Problem::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            "Payload too large",
            format!(
                "the payload is {size} bytes of JSON; the limit is {limit} bytes — store large data elsewhere and pass a reference"
            ),
        )
    }

    /// A settlement the store's fence refused: the caller does not hold
    /// the job's current lease.
    pub(crate) fn lease_lost(id: &errand::JobId) -> Self {
        Problem::new(
            StatusCode::CONFLICT,
            "lease_lost",
            "Lease lost",
            format!(
                "the lease on job `{id}` is not held: the token is not the current one, the lease expired, or the job was settled or cancelled meanwhile. Nothing was changed; stop working on this job (another worker may own it now) and lease new work"
            ),
        )
    }

    /// The client took longer than the read timeout to send its body.
    pub(crate) fn request_timeout(limit: std::time::Duration) -> Self {
        Problem {
            close: true,
            ..Problem::new(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                "Request timeout",
                format!(
                    "the request body did not arrive within {} ms; send the whole request at once (the server's --read-timeout sets the limit)",
                    limit.as_millis()
                ),
            )
        }
    }

    pub(crate) fn internal(detail: impl Into<String>) -> Self {
        Problem::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            "Internal error",
            detail,
        )
    }
}

/// The status of an answer carrying `e`, for the API and the dashboard
/// alike (the library's [`errand::Error::http_status`]).
pub(crate) fn status_of(e: &errand::Error) -> StatusCode {
    StatusCode::from_u16(e.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

impl From<errand::Error> for Problem {
    /// Maps each library error onto one status code; `code` is the
    /// library's own.
    fn from(e: errand::Error) -> Self {
        use errand::Error as E;
        let code = e.code();
        let status = status_of(&e);
        let title = e.title();
        let detail = match &e {
            // The library's own messages say what to change.
            E::Invalid(m) => m.clone(),
            E::NotFound(_)
            | E::NoSuchWorkflow(_)
            | E::NoSuchBatch(_)
            | E::NoSuchSchedule(_)
            | E::InvalidState { .. }
            | E::LeaseLost { .. }
            | E::Busy(_)
            | E::StorageFull(_)
            | E::NotADatabase(_)
            | E::NotErrand(_)
            | E::SchemaOutdated(_)
            | E::SchemaTooNew(_)
            | E::SchemaUnreleased(_) => e.to_string(),
            // Storage internals stay in the server's log.
            _ => "the store failed; the server's log has the details — retry later".to_owned(),
        };
        if status.is_server_error() {
            tracing::error!(error = %e, code, "request failed in the store");
        }
        Problem {
            retry_after: matches!(e, E::Busy(_) | E::Closed(_)),
            ..Problem::new(status, code, title, detail)
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let body = Body {
            kind: format!("{TYPE_BASE}{}", self.code),
            title: self.title,
            status: self.status.as_u16(),
            detail: &self.detail,
            code: self.code,
        };
        // Serializing strings and numbers cannot fail; fall back to a
        // fixed document all the same rather than panic.
        let text = serde_json::to_string(&body).unwrap_or_else(|_| {
            format!(
                r#"{{"type":"{TYPE_BASE}internal","title":"Internal error","status":500,"detail":"the error could not be encoded","code":"internal"}}"#
            )
        });
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON))],
            text,
        )
            .into_response();
        if self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.close {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        if self.challenge {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static(r#"Bearer realm="errand""#),
            );
        }
        response
    }
}
