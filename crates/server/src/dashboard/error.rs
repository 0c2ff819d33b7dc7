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
    /// The status and the title are the API's for the same error
    /// ([`crate::problem::status_of`], [`errand::Error::title`]); the page
    /// says the rest in an operator's words.
    fn from(e: errand::Error) -> Self {
        use errand::Error as E;
        let status = crate::problem::status_of(&e);
        let title = e.title();
        let message = match &e {
            E::Invalid(m) => m.clone(),
            E::NotFound(_) => {
                format!("{e}. It may have been pruned; look it up in the jobs list.")
            }
            E::NoSuchWorkflow(_) | E::NoSuchBatch(_) | E::NoSuchSchedule(_) => {
                format!("{e}.")
            }
            E::InvalidState { .. } => format!("{e}. Nothing was changed."),
            E::LeaseLost { .. } => {
                format!("{e}. Nothing was changed; reload the job to see its state.")
            }
            E::StorageFull(_) => {
                tracing::error!(error = %e, "dashboard request failed: storage full");
                format!("{e}. Nothing was changed.")
            }
            E::Busy(_)
            | E::Closed(_)
            | E::NotADatabase(_)
            | E::NotErrand(_)
            | E::SchemaOutdated(_)
            | E::SchemaTooNew(_)
            | E::SchemaUnreleased(_) => {
                tracing::warn!(error = %e, "dashboard request failed");
                format!("{e}. Try again in a moment.")
            }
            _ => {
                tracing::error!(error = %e, "dashboard request failed in the store");
                "The store failed; the server's log has the details. Try again later.".to_owned()
            }
        };
        PageError::new(status, title, message)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::problem::Problem;

    /// The dashboard answers each library error with the API's status and
    /// title (they once disagreed: a lost lease was 409 in the API and 500
    /// here, full storage 507 and 500, and the titles were worded twice).
    #[test]
    fn the_dashboard_and_the_api_give_each_error_the_same_status_and_title() {
        use errand::Error as E;
        let errors = || {
            [
                E::invalid("x"),
                E::NotFound("j".into()),
                E::NoSuchWorkflow("w".into()),
                E::NoSuchBatch("b".into()),
                E::NoSuchSchedule("s".into()),
                E::InvalidState {
                    id: "j".into(),
                    state: "done".into(),
                    hint: "h".into(),
                },
                E::LeaseLost {
                    id: "j".into(),
                    attempt: 2,
                },
                E::NotADatabase("n".into()),
                E::NotErrand("o".into()),
                E::SchemaOutdated("v1".into()),
                E::SchemaTooNew("v99".into()),
                E::SchemaUnreleased("db".into()),
                E::Busy("b".into()),
                E::StorageFull("f".into()),
                E::Closed("c".into()),
                E::storage("s"),
            ]
        };
        for (page, api) in errors().into_iter().zip(errors()) {
            let code = page.code();
            let page = PageError::from(page);
            let api = Problem::from(api);
            assert_eq!(page.status, api.status, "{code}");
            assert_eq!(page.title, api.title, "{code}");
        }
        let lost = PageError::from(E::LeaseLost {
            id: "j".into(),
            attempt: 2,
        });
        assert_eq!(lost.status, StatusCode::CONFLICT);
        assert_eq!(
            PageError::from(E::StorageFull("f".into())).status,
            StatusCode::INSUFFICIENT_STORAGE
        );
        let missing = PageError::from(E::NoSuchSchedule("nightly".into()));
        assert_eq!(
            (missing.status, missing.title),
            (StatusCode::NOT_FOUND, "Not found")
        );
        assert!(missing.message.contains("nightly"), "{}", missing.message);
    }
}
