//! Signing in with the server's access token (only when one is configured),
//! and signing out.

use std::time::Duration;

use axum::Router;
use axum::extract::{Extension, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use errand::core::Timestamp;
use maud::html;

use super::Dash;
use super::error::PageError;
use super::forms::Form;
use super::guard::{SESSION_COOKIE, SESSION_LIFETIME, Visitor, set_cookie};
use super::view::{self, Ctx};

/// How long a wrong token waits before its answer (slows guessing down).
const WRONG_TOKEN_DELAY: Duration = Duration::from_millis(300);

pub(super) fn routes() -> Router<Dash> {
    Router::new()
        .route("/dashboard/login", get(form).post(login))
        .route("/dashboard/logout", post(logout))
}

fn login_page(ctx: &Ctx, problem: Option<&str>, status: StatusCode) -> Response {
    let body = html! {
        section.login {
            h1 { "Sign in" }
            p { "This server requires its access token (the one given to " code { "errand serve --token" } " or in " code { "ERRAND_TOKEN" } ")." }
            @if let Some(p) = problem { (view::notice("error", p)) }
            form method="post" action="/dashboard/login" {
                (ctx.csrf_field())
                label for="token" { "Access token" }
                input #token type="password" name="token" required autocomplete="current-password";
                p.actions { button.primary type="submit" { "Sign in" } }
            }
        }
    };
    view::page(status, None, "Sign in", None, body)
}

async fn form(State(dash): State<Dash>, Extension(visitor): Extension<Visitor>) -> Response {
    if dash.token.is_none() || visitor.has_session() {
        return Redirect::to("/dashboard/jobs").into_response();
    }
    login_page(&Ctx::new(&dash, &visitor), None, StatusCode::OK)
}

async fn login(
    State(dash): State<Dash>,
    Extension(visitor): Extension<Visitor>,
    Extension(form): Extension<Form>,
) -> Result<Response, PageError> {
    let Some(token) = &dash.token else {
        return Ok(Redirect::to("/dashboard/jobs").into_response());
    };
    form.only(&["token"])?;
    let presented = form.one("token")?.unwrap_or("");
    if !token.matches(presented.as_bytes()) {
        tokio::time::sleep(WRONG_TOKEN_DELAY).await;
        return Ok(login_page(
            &Ctx::new(&dash, &visitor),
            Some("That is not this server's access token. Check it and try again."),
            StatusCode::UNAUTHORIZED,
        ));
    }
    let session = dash.keys.new_session(Timestamp::now());
    let mut response = Redirect::to("/dashboard/jobs").into_response();
    if let Some(cookie) = set_cookie(SESSION_COOKIE, &session, Some(SESSION_LIFETIME.as_secs())) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    Ok(response)
}

async fn logout(Extension(form): Extension<Form>) -> Result<Response, PageError> {
    form.only(&[])?;
    let mut response = Redirect::to("/dashboard/login").into_response();
    if let Some(cookie) = set_cookie(SESSION_COOKIE, "", Some(0)) {
        response.headers_mut().append(header::SET_COOKIE, cookie);
    }
    Ok(response)
}
