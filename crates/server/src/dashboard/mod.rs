//! The web dashboard under `/dashboard/`: jobs by state, one job with its
//! history and audit entries, dead letters, the stored schedules, and
//! replay, cancel and pausing behind a confirmation page. Everything is rendered on the server (maud templates,
//! which escape every interpolated value) with one embedded stylesheet and
//! no script at all. `docs/dashboard.md` describes it for operators.
//!
//! ## Design decisions
//!
//! **A separate surface.** The JSON API refuses browsers outright
//! (`guard.rs`); the dashboard is made for them, so its routes are merged
//! next to the API's rather than behind its fence, and carry their own
//! protections, all in [`guard`]:
//!
//! - Without an access token (loopback only) the `Host` header must name a
//!   loopback address or `localhost`, as for the API (DNS rebinding).
//! - With an access token, every page except the sign-in form and the
//!   stylesheet needs a session: the operator types the token once into
//!   `/dashboard/login`, and the server answers with a session cookie
//!   signed with HMAC-SHA-256 under a secret drawn at start-up (12 hours;
//!   a restart signs everyone out). The token itself is never stored in the
//!   browser.
//! - Every request other than GET and HEAD is a form POST that must carry a
//!   CSRF token: HMAC-SHA-256 of a random per-browser nonce (the
//!   `errand_csrf` cookie) and the session id, under the same secret, so it
//!   can be neither read nor forged by another site. The guard checks it
//!   (and refuses `Sec-Fetch-Site` other than `same-origin`, and an
//!   `Origin` other than the request's own host) before any handler runs:
//!   a refused request writes nothing, and a POST route added later is
//!   covered without doing anything.
//! - Cookies are `HttpOnly; SameSite=Strict; Path=/dashboard`. Every
//!   response carries a `Content-Security-Policy` without scripts or
//!   framing, `X-Frame-Options: DENY`, `X-Content-Type-Options: nosniff`,
//!   `Referrer-Policy: no-referrer` and `Cache-Control: no-store`.
//!
//! **Deliberate changes.** A replay or a cancel is a GET of a confirmation
//! page that shows exactly which jobs will change, then a POST of that page's
//! form with the operator's name (1–200 bytes) and a reason (1–2000 bytes,
//! required), which go into the audit log. A refused or invalid form writes
//! nothing and says what to fix.
//!
//! **Pages cost a page, not a table.** Lists are keyset-paginated through
//! [`errand::Store::list`] (`after` = the last id shown); nothing counts the
//! whole table.
//!
//! ## Adding a page
//!
//! Each page family is a module with a `routes()` function returning a
//! `Router<Dash>` and handlers that render through [`view::layout`]. To add
//! one (the per-queue counts page, the audit log): write the module, merge
//! its `routes()` in [`router`], and add its entry to [`view::NAV`] (a
//! [`view::Section`] variant names it). Its handlers get the store from
//! [`Dash`], the CSRF token for any form from [`guard::Visitor`], and
//! report failures as [`error::PageError`]; their POSTs are protected by the
//! guard already.

mod actions;
mod audit;
mod batches;
mod charts;
mod error;
mod forms;
mod guard;
mod jobs;
mod login;
mod queue_limit;
mod queues;
mod reschedule;
mod schedule_forms;
mod schedules;
mod signal;
#[cfg(test)]
mod tests;
mod view;
mod workflows;

use std::sync::Arc;

use axum::Router;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware;
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{any, get};
use errand::{Admin, Store};

use crate::{AccessToken, ServerConfig};

/// Where the dashboard lives; every route and cookie is under it, but for
/// `/`, which sends a browser to the dashboard's home (the JSON API has no
/// route there).
pub(crate) const BASE: &str = "/dashboard";

/// What every handler shares.
#[derive(Clone, Debug)]
pub(crate) struct Dash {
    admin: Admin,
    /// Sends an operator's signals.
    client: errand::Client,
    keys: Arc<guard::Keys>,
    token: Option<AccessToken>,
}

/// The dashboard's routes, to be merged next to the API's (they do not go
/// through the API's fence).
pub(crate) fn router(store: Arc<dyn Store>, config: &ServerConfig) -> Router {
    let dash = Dash {
        client: errand::Client::new(store.clone()),
        admin: Admin::new(store),
        keys: Arc::new(guard::Keys::generate()),
        token: config.token.clone(),
    };
    Router::new()
        .route("/", get(|| async { Redirect::to("/dashboard/") }))
        .route(BASE, get(|| async { Redirect::permanent("/dashboard/") }))
        .route("/dashboard/", get(home))
        .route("/dashboard/static/style.css", get(stylesheet))
        .merge(jobs::routes())
        .merge(actions::routes())
        .merge(reschedule::routes())
        .merge(signal::routes())
        .merge(login::routes())
        .merge(queues::routes())
        .merge(queue_limit::routes())
        .merge(audit::routes())
        .merge(schedules::routes())
        .merge(schedule_forms::routes())
        .merge(workflows::routes())
        .merge(batches::routes())
        .route("/dashboard/{*rest}", any(not_found))
        .method_not_allowed_fallback(method_not_allowed)
        .layer(middleware::from_fn_with_state(dash.clone(), guard::protect))
        .layer(middleware::from_fn(guard::security_headers))
        .with_state(dash)
}

/// The landing page: the queue overview.
async fn home() -> Redirect {
    Redirect::to("/dashboard/queues")
}

async fn stylesheet() -> Response {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/css; charset=utf-8"),
            ),
            (
                header::CACHE_CONTROL,
                HeaderValue::from_static("private, max-age=300"),
            ),
        ],
        include_str!("style.css"),
    )
        .into_response()
}

async fn not_found() -> error::PageError {
    error::PageError::new(
        StatusCode::NOT_FOUND,
        "Page not found",
        "There is no such dashboard page. Start again from the jobs list.",
    )
}

async fn method_not_allowed() -> error::PageError {
    error::PageError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "Method not allowed",
        "This page does not accept that kind of request. Use the links and buttons of the dashboard.",
    )
}
