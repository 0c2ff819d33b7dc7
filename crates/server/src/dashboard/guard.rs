//! What every dashboard request passes before its handler: the `Host`
//! check (no token) or the session (token), and for every request that is
//! not a GET or HEAD the same-origin check, the form body and its CSRF
//! token. Plus the security headers on every response.

use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use errand::core::Timestamp;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

use super::error::PageError;
use super::forms::Form;
use super::view::Ctx;
use super::{BASE, Dash};
use crate::guard::check_loopback;
use crate::http::BodyTimeout;

type HmacSha256 = Hmac<Sha256>;

/// The cookie holding the browser's CSRF nonce.
pub(super) const CSRF_COOKIE: &str = "errand_csrf";
/// The cookie holding the signed session (only with an access token).
pub(super) const SESSION_COOKIE: &str = "errand_session";
/// How long a session lasts.
pub(super) const SESSION_LIFETIME: Duration = Duration::from_secs(12 * 3600);
/// The largest form body accepted (a bulk replay of 200 ids fits easily).
pub(super) const MAX_FORM_BYTES: usize = 64 * 1024;

/// Pages open without a session: the sign-in form and what it needs.
const PUBLIC_PATHS: [&str; 2] = ["/dashboard/login", "/dashboard/static/style.css"];

const CSP: &str = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
                   frame-ancestors 'none'; base-uri 'none'";

/// The server's secret, drawn at start-up: it signs sessions and CSRF
/// tokens, so a restart invalidates both.
pub(crate) struct Keys {
    secret: [u8; 32],
}

impl std::fmt::Debug for Keys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Keys(<redacted>)")
    }
}

impl Keys {
    /// A fresh secret from the thread-local CSPRNG (seeded by the
    /// operating system).
    pub(crate) fn generate() -> Keys {
        Keys {
            secret: rand::random(),
        }
    }

    fn mac(&self, parts: &[&str]) -> HmacSha256 {
        // HMAC takes keys of any length: this cannot fail.
        let mut mac = <HmacSha256 as KeyInit>::new_from_slice(&self.secret)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"));
        for part in parts {
            mac.update(part.as_bytes());
            mac.update(&[0]);
        }
        mac
    }

    fn sign(&self, parts: &[&str]) -> String {
        hex(&self.mac(parts).finalize().into_bytes())
    }

    /// Compares a presented hex signature in constant time.
    fn verify(&self, parts: &[&str], presented: &str) -> bool {
        match unhex(presented) {
            Some(bytes) => self.mac(parts).verify_slice(&bytes).is_ok(),
            None => false,
        }
    }

    /// The CSRF token of a visitor's forms.
    pub(super) fn csrf_token(&self, visitor: &Visitor) -> String {
        self.sign(&[
            "csrf",
            &visitor.nonce,
            visitor.session.as_deref().unwrap_or(""),
        ])
    }

    fn csrf_ok(&self, visitor: &Visitor, presented: &str) -> bool {
        self.verify(
            &[
                "csrf",
                &visitor.nonce,
                visitor.session.as_deref().unwrap_or(""),
            ],
            presented,
        )
    }

    /// A new session cookie value: `id.expires.signature`.
    pub(super) fn new_session(&self, now: Timestamp) -> String {
        let id = hex(&rand::random::<[u8; 16]>());
        let expires = now.plus(SESSION_LIFETIME).as_millis().to_string();
        let sig = self.sign(&["session", &id, &expires]);
        format!("{id}.{expires}.{sig}")
    }

    /// The session id of a valid, unexpired session cookie.
    fn session(&self, value: &str, now: Timestamp) -> Option<String> {
        let mut parts = value.split('.');
        let (Some(id), Some(expires), Some(sig), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        let expires_ms = expires.parse::<i64>().ok()?;
        let valid = is_nonce(id) && self.verify(&["session", id, expires], sig);
        (valid && now.as_millis() < expires_ms).then(|| id.to_owned())
    }
}

/// Who is asking: the browser's CSRF nonce and, with an access token, its
/// session. Handlers read it from the request's extensions.
#[derive(Clone, Debug)]
pub(crate) struct Visitor {
    nonce: String,
    /// The nonce was minted for this request (the browser sent none): the
    /// response sets the cookie.
    fresh: bool,
    session: Option<String>,
    /// An access token is configured (the pages show "sign out").
    pub(super) signed_in: bool,
}

impl Ctx {
    /// The page context of `visitor`: its CSRF token and whether it has a
    /// session to end.
    pub(super) fn new(dash: &Dash, visitor: &Visitor) -> Ctx {
        Ctx {
            csrf: dash.keys.csrf_token(visitor),
            signed_in: visitor.signed_in,
        }
    }
}

impl Visitor {
    /// Whether the browser presented a valid session.
    pub(super) fn has_session(&self) -> bool {
        self.session.is_some()
    }
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        let _ = write!(s, "{b:02x}");
    }
    s
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if !s.len().is_multiple_of(2) || s.len() > 128 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// A nonce or session id: 32 lowercase hex digits.
fn is_nonce(s: &str) -> bool {
    s.len() == 32 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The value of cookie `name`, if the request carries it exactly once.
pub(super) fn cookie<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    let mut found = headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .filter(|(k, _)| *k == name)
        .map(|(_, v)| v);
    match (found.next(), found.next()) {
        (Some(v), None) => Some(v),
        _ => None,
    }
}

/// A `Set-Cookie` value under the dashboard's path.
pub(super) fn set_cookie(name: &str, value: &str, max_age: Option<u64>) -> Option<HeaderValue> {
    let age = max_age
        .map(|s| format!("; Max-Age={s}"))
        .unwrap_or_default();
    HeaderValue::from_str(&format!(
        "{name}={value}; Path={BASE}; HttpOnly; SameSite=Strict{age}"
    ))
    .ok()
}

/// Runs before every dashboard handler. Every refusal happens before the
/// handler, so a refused request writes nothing.
pub(super) async fn protect(State(dash): State<Dash>, request: Request, next: Next) -> Response {
    match admit(&dash, request).await {
        Ok((request, visitor)) => {
            let mut response = next.run(request).await;
            if visitor.fresh
                && let Some(v) = set_cookie(CSRF_COOKIE, &visitor.nonce, None)
            {
                response.headers_mut().append(header::SET_COOKIE, v);
            }
            response
        }
        Err(Refusal::SignIn) => Redirect::to("/dashboard/login").into_response(),
        Err(Refusal::Page(page)) => {
            tracing::debug!(status = %page.status, title = page.title, "dashboard request refused");
            page.into_response()
        }
    }
}

/// Why a request does not reach its handler.
enum Refusal {
    /// A page needs a session: to the sign-in form.
    SignIn,
    Page(PageError),
}

impl From<PageError> for Refusal {
    fn from(page: PageError) -> Self {
        Refusal::Page(page)
    }
}

async fn admit(dash: &Dash, request: Request) -> Result<(Request, Visitor), Refusal> {
    let (mut parts, body) = request.into_parts();
    let headers = &parts.headers;
    if dash.token.is_none()
        && let Err(why) = check_loopback(&parts.uri, headers)
    {
        return Err(PageError::new(
            StatusCode::FORBIDDEN,
            "Host refused",
            format!(
                "{why}. Without an access token the dashboard answers only requests addressed to a loopback address or localhost. Open it as http://127.0.0.1:PORT/dashboard/, or start the server with --token."
            ),
        )
        .into());
    }
    let now = Timestamp::now();
    let session = cookie(headers, SESSION_COOKIE).and_then(|v| dash.keys.session(v, now));
    let (nonce, fresh) = match cookie(headers, CSRF_COOKIE).filter(|n| is_nonce(n)) {
        Some(n) => (n.to_owned(), false),
        None => (hex(&rand::random::<[u8; 16]>()), true),
    };
    let visitor = Visitor {
        nonce,
        fresh,
        session,
        signed_in: dash.token.is_some(),
    };
    let path = parts.uri.path();
    let safe = parts.method == Method::GET || parts.method == Method::HEAD;
    if dash.token.is_some() && visitor.session.is_none() && !PUBLIC_PATHS.contains(&path) {
        return Err(if safe {
            Refusal::SignIn
        } else {
            PageError::new(
                StatusCode::UNAUTHORIZED,
                "Sign in first",
                "This dashboard needs the server's access token. Sign in, then go back and submit the form again; nothing was changed.",
            )
            .into()
        });
    }
    if !safe {
        same_origin(headers)?;
        let form = read_form(headers, body).await?;
        let presented = form.csrf();
        if visitor.fresh || !presented.is_some_and(|t| dash.keys.csrf_ok(&visitor, t)) {
            return Err(PageError::new(
                StatusCode::FORBIDDEN,
                "Form expired or forged",
                "The form's security token is missing or does not match this browser (it may come from another site, an old page or before a restart of the server). Nothing was changed: reload the page and submit the form again.",
            )
            .into());
        }
        parts.extensions.insert(form);
        parts.extensions.insert(visitor.clone());
        return Ok((Request::from_parts(parts, Body::empty()), visitor));
    }
    parts.extensions.insert(visitor.clone());
    Ok((Request::from_parts(parts, body), visitor))
}

/// Refuses requests that a browser marks as coming from another site. A
/// `Sec-Fetch-Site` header (every current browser sends it, and no page can
/// set it) must say `same-origin`. Without it, an `Origin` must name this
/// request's one `Host`, except `null`: browsers send `Origin: null` for the
/// dashboard's own forms, because its pages are served with
/// `Referrer-Policy: no-referrer`; the CSRF token decides those.
fn same_origin(headers: &HeaderMap) -> Result<(), PageError> {
    let refuse = || {
        PageError::new(
            StatusCode::FORBIDDEN,
            "Cross-site request refused",
            "This form was sent from another site (or from a page the browser does not consider the dashboard's own). Nothing was changed: open the dashboard directly and submit the form there.",
        )
    };
    if let Some(site) = headers.get("sec-fetch-site") {
        return if site.as_bytes() == b"same-origin" {
            Ok(())
        } else {
            Err(refuse())
        };
    }
    match headers.get(header::ORIGIN).map(HeaderValue::as_bytes) {
        None | Some(b"null") => Ok(()),
        Some(origin) => {
            let origin_host = std::str::from_utf8(origin)
                .ok()
                .and_then(|o| o.split_once("://"))
                .map(|(_, host)| host);
            let mut hosts = headers.get_all(header::HOST).iter();
            let host = match (hosts.next(), hosts.next()) {
                (Some(h), None) => h.to_str().ok(),
                _ => None,
            };
            match (origin_host, host) {
                (Some(o), Some(h)) if o.eq_ignore_ascii_case(h) => Ok(()),
                _ => Err(refuse()),
            }
        }
    }
}

async fn read_form(headers: &HeaderMap, body: Body) -> Result<Form, PageError> {
    let is_form = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| {
            v.trim()
                .eq_ignore_ascii_case("application/x-www-form-urlencoded")
        });
    if !is_form {
        return Err(PageError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Not a form",
            "The dashboard accepts only HTML form submissions (application/x-www-form-urlencoded). Nothing was changed.",
        ));
    }
    let bytes = axum::body::to_bytes(body, MAX_FORM_BYTES)
        .await
        .map_err(|e| {
            if let Some(timeout) = BodyTimeout::find(&e) {
                return PageError::new(
                    StatusCode::REQUEST_TIMEOUT,
                    "Form too slow",
                    format!(
                        "{timeout}. Nothing was changed: submit the form again (the server's --read-timeout sets the limit)."
                    ),
                );
            }
            PageError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "Form too large",
                format!(
                    "The form is larger than {MAX_FORM_BYTES} bytes (or could not be read). Nothing was changed: shorten the reason or replay fewer jobs at once."
                ),
            )
        })?;
    Ok(Form::parse(&bytes))
}

/// Adds the security headers to every dashboard response.
pub(super) async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(
        "cross-origin-opener-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    if !h.contains_key(header::CACHE_CONTROL) {
        h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    response
}

#[cfg(test)]
mod unit {
    use super::*;

    fn visitor(session: Option<&str>) -> Visitor {
        Visitor {
            nonce: "0123456789abcdef0123456789abcdef".into(),
            fresh: false,
            session: session.map(str::to_owned),
            signed_in: session.is_some(),
        }
    }

    #[test]
    fn csrf_tokens_are_bound_to_the_secret_the_nonce_and_the_session() {
        let keys = Keys::generate();
        let v = visitor(None);
        let token = keys.csrf_token(&v);
        assert!(keys.csrf_ok(&v, &token));
        assert!(!keys.csrf_ok(&v, ""));
        assert!(!keys.csrf_ok(&v, &token[..62]));
        assert!(!keys.csrf_ok(&v, "zz"));
        assert!(!Keys::generate().csrf_ok(&v, &token), "another server");
        let other = Visitor {
            nonce: "f".repeat(32),
            ..v.clone()
        };
        assert!(!keys.csrf_ok(&other, &token), "another browser");
        let signed = visitor(Some("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"));
        assert!(!keys.csrf_ok(&signed, &token), "another session");
    }

    #[test]
    fn sessions_are_signed_and_expire() {
        let keys = Keys::generate();
        let now = Timestamp::from_millis(1_000_000);
        let cookie = keys.new_session(now);
        let id = keys.session(&cookie, now).expect("valid");
        assert!(is_nonce(&id));
        assert!(
            keys.session(&cookie, now.plus(SESSION_LIFETIME)).is_none(),
            "expired"
        );
        assert!(Keys::generate().session(&cookie, now).is_none());
        let (head, _) = cookie.rsplit_once('.').expect("three parts");
        let (id_part, _) = head.split_once('.').expect("three parts");
        let forged = format!(
            "{id_part}.{}.{}",
            i64::MAX,
            cookie.rsplit('.').next().expect("sig")
        );
        assert!(keys.session(&forged, now).is_none(), "a longer expiry");
        assert!(keys.session("garbage", now).is_none());
    }

    #[test]
    fn cookies_are_found_once() {
        let mut h = HeaderMap::new();
        h.append(
            header::COOKIE,
            HeaderValue::from_static("a=1; errand_csrf=x"),
        );
        assert_eq!(cookie(&h, "errand_csrf"), Some("x"));
        assert_eq!(cookie(&h, "b"), None);
        h.append(header::COOKIE, HeaderValue::from_static("errand_csrf=y"));
        assert_eq!(cookie(&h, "errand_csrf"), None, "ambiguous");
    }
}
