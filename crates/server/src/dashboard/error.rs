//! Refusals and failures as HTML pages that say what was wrong and what to
//! do.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::html;

use super::view;

/// An error page.
#[derive(Debug)]
pub(crate) struct PageError {
    pub(super) status: StatusCode,
    pub(super) title: &'static str,
    pub(super) message: String,
}

impl PageError {
    pub(super) fn new(status: StatusCode, title: &'static str, message: impl Into<String>) -> Self {
        PageError {
            status,
            title,
            message: message.into(),
        }
    }

    pub(super) fn bad_request(message: impl Into<String>) -> Self {
        PageError::new(StatusCode::BAD_REQUEST, "Invalid request", message)
    }
}

impl From<errand::Error> for PageError {
    fn from(e: errand::Error) -> Self {
        use errand::Error as E;
        match e {
            E::Invalid(m) => PageError::bad_request(m),
            E::NotFound(_) => PageError::new(
                StatusCode::NOT_FOUND,
                "Job not found",
                format!("{e}. It may have been pruned; look it up in the jobs list."),
            ),
            E::InvalidState { .. } => PageError::new(
                StatusCode::CONFLICT,
                "Not possible in this state",
                format!("{e}. Nothing was changed."),
            ),
            E::Busy(_) | E::Closed(_) | E::SchemaOutdated(_) | E::SchemaTooNew(_) => {
                tracing::warn!(error = %e, "dashboard request failed");
                PageError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Store unavailable",
                    format!("{e}. Try again in a moment."),
                )
            }
            other => {
                tracing::error!(error = %other, "dashboard request failed in the store");
                PageError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "Storage error",
                    "The store failed; the server's log has the details. Try again later.",
                )
            }
        }
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let body = html! {
            section.error {
                h1 { (self.title) }
                p { (self.message) }
                p { a href="/dashboard/jobs" { "Back to the jobs list" } }
            }
        };
        view::page(self.status, None, self.title, None, body)
    }
}
