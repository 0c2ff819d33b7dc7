//! The page frame (head, navigation, sign-out) and small pieces every page
//! uses. maud escapes every `(value)` it interpolates, so job data (payloads,
//! errors, names, reasons) can never become markup.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use errand::core::Timestamp;
use errand::{Job, JobState};
use maud::{DOCTYPE, Markup, html};

/// The dashboard's sections, each with a navigation entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Section {
    Queues,
    Jobs,
    DeadLetters,
    Schedules,
    Audit,
}

/// The navigation bar, in order: a new page adds its entry here.
pub(super) const NAV: [(Section, &str, &str); 5] = [
    (Section::Queues, "Queues", "/dashboard/queues"),
    (Section::Jobs, "Jobs", "/dashboard/jobs"),
    (Section::DeadLetters, "Dead letters", "/dashboard/dead"),
    (Section::Schedules, "Schedules", "/dashboard/schedules"),
    (Section::Audit, "Audit log", "/dashboard/audit"),
];

/// The form field carrying the CSRF token.
pub(super) const CSRF_FIELD: &str = "csrf";

/// At most `max` characters of `s`, with an ellipsis when cut.
pub(super) fn truncate(s: &str, max: usize) -> String {
    let mut out: String = s.chars().take(max).collect();
    if out.len() < s.len() {
        out.push('…');
    }
    out
}

/// What a page needs to know about the visitor: the CSRF token its forms
/// carry, and whether there is a session to end.
#[derive(Clone, Debug)]
pub(super) struct Ctx {
    pub(super) csrf: String,
    pub(super) signed_in: bool,
}

impl Ctx {
    /// The hidden field every form carries.
    pub(super) fn csrf_field(&self) -> Markup {
        html! { input type="hidden" name=(CSRF_FIELD) value=(self.csrf); }
    }
}

/// A whole page as a response.
pub(super) fn page(
    status: StatusCode,
    ctx: Option<&Ctx>,
    title: &str,
    active: Option<Section>,
    body: Markup,
) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · errand" }
                link rel="stylesheet" href="/dashboard/static/style.css";
            }
            body {
                header.top {
                    a.brand href="/dashboard/" { "errand" }
                    nav {
                        @for (section, label, href) in NAV {
                            a.active[active == Some(section)] href=(href) { (label) }
                        }
                    }
                    @if let Some(ctx) = ctx.filter(|c| c.signed_in) {
                        form.signout method="post" action="/dashboard/logout" {
                            (ctx.csrf_field())
                            button type="submit" { "Sign out" }
                        }
                    }
                }
                main { (body) }
            }
        }
    };
    html_response(status, markup)
}

/// A form page's status: 400 when it comes back with a problem to fix,
/// 200 otherwise.
pub(super) fn form_status(problem: Option<&str>) -> StatusCode {
    if problem.is_some() {
        StatusCode::BAD_REQUEST
    } else {
        StatusCode::OK
    }
}

pub(super) fn html_response(status: StatusCode, markup: Markup) -> Response {
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/html; charset=utf-8"),
        )],
        markup.into_string(),
    )
        .into_response()
}

/// A time as RFC 3339 (UTC, milliseconds).
pub(super) fn time(t: Timestamp) -> Markup {
    html! { time datetime=(t.to_rfc3339()) { (t.to_rfc3339()) } }
}

pub(super) fn opt_time(t: Option<Timestamp>) -> Markup {
    match t {
        Some(t) => time(t),
        None => html! { span.muted { "—" } },
    }
}

pub(super) fn state(s: JobState) -> Markup {
    html! { span class={ "state state-" (s.as_str()) } { (s.as_str()) } }
}

/// The optional text, or a muted dash.
pub(super) fn opt_text(t: Option<&str>) -> Markup {
    match t {
        Some(t) => html! { (t) },
        None => html! { span.muted { "—" } },
    }
}

/// A job's last error, cut to `max` characters (the job page has it all).
pub(super) fn last_error(job: &Job, max: usize) -> Markup {
    match &job.last_error {
        Some(e) => html! {
            @if let Some(class) = job.last_error_class {
                span.class { (class.as_str()) } " "
            }
            code.error { (truncate(e, max)) }
        },
        None => html! { span.muted { "—" } },
    }
}

/// A short notice at the top of a page.
pub(super) fn notice(kind: &str, text: &str) -> Markup {
    html! { p class={ "notice notice-" (kind) } role="status" { (text) } }
}
