//! The fence every request passes before routing: browsers out, loopback
//! `Host` names when there is no token, the bearer token when there is one.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::AccessToken;
use crate::problem::Problem;

/// The one path open to everyone (no token, browsers too): it says only
/// that the process is up.
pub(crate) const HEALTHZ: &str = "/healthz";

/// Headers only browsers send. `Origin` is on every cross-origin request
/// and every same-origin one that is not a GET or HEAD; the fetch-metadata
/// headers are on every request of a current browser.
const BROWSER_HEADERS: [&str; 3] = ["origin", "sec-fetch-site", "sec-fetch-mode"];

/// Runs before routing. Refusals happen before the body is read, so a
/// refused request writes nothing.
pub(crate) async fn fence(
    State(token): State<Option<AccessToken>>,
    request: Request,
    next: Next,
) -> Response {
    let mut response = if request.uri().path() == HEALTHZ {
        next.run(request).await
    } else if let Err(problem) = admit(token.as_ref(), &request) {
        tracing::debug!(code = problem.code, path = %request.uri().path(), "request refused");
        problem.into_response()
    } else {
        next.run(request).await
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    response
}

fn admit(token: Option<&AccessToken>, request: &Request) -> Result<(), Problem> {
    let headers = request.headers();
    if let Some(name) = BROWSER_HEADERS.iter().find(|h| headers.contains_key(**h)) {
        return Err(Problem::browser_refused(name));
    }
    match token {
        Some(token) => authorize(token, headers),
        None => {
            let uri_host = request.uri().host();
            let header_ok = match headers.get_all(header::HOST).iter().collect::<Vec<_>>()[..] {
                [] => true,
                [one] => one.to_str().is_ok_and(is_loopback_host),
                _ => false,
            };
            if header_ok && uri_host.is_none_or(is_loopback_name) {
                Ok(())
            } else {
                Err(Problem::host_refused())
            }
        }
    }
}

fn authorize(token: &AccessToken, headers: &HeaderMap) -> Result<(), Problem> {
    const HINT: &str = "send the access token as `Authorization: Bearer <token>`";
    let mut values = headers.get_all(header::AUTHORIZATION).iter();
    let (Some(value), None) = (values.next(), values.next()) else {
        return Err(Problem::unauthorized(format!(
            "this server requires an access token: {HINT}"
        )));
    };
    let value = value.as_bytes();
    let scheme_ok = value
        .get(..7)
        .is_some_and(|s| s.eq_ignore_ascii_case(b"bearer "));
    let presented = value.get(7..).unwrap_or_default().trim_ascii();
    if scheme_ok && token.matches(presented) {
        Ok(())
    } else {
        Err(Problem::unauthorized(format!(
            "the access token is missing or wrong: {HINT}"
        )))
    }
}

/// Whether a `Host` header value (`name[:port]`) names this machine's
/// loopback interface.
pub(crate) fn is_loopback_host(host: &str) -> bool {
    let name = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, port)) if port.is_empty() || port.starts_with(':') => ip,
            _ => return false,
        }
    } else {
        match host.split_once(':') {
            Some((name, _port)) => name,
            None => host,
        }
    };
    is_loopback_name(name)
}

fn is_loopback_name(name: &str) -> bool {
    let name = name.trim_start_matches('[').trim_end_matches(']');
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_are_loopback() {
        for ok in [
            "127.0.0.1",
            "127.0.0.1:7878",
            "127.1.2.3:7878",
            "localhost",
            "LocalHost:7878",
            "[::1]:7878",
            "[::1]",
            "[::ffff:127.0.0.1]:1",
        ] {
            assert!(is_loopback_host(ok), "{ok}");
        }
        for bad in [
            "",
            "example.com",
            "evil.example:7878",
            "127.0.0.1.evil.example",
            "localhost.evil:7878",
            "10.0.0.1:7878",
            "[::2]:1",
            "[::1]x",
            "0.0.0.0:7878",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    #[test]
    fn tokens_compare_whole() {
        let t = AccessToken::new("s3cret-token").unwrap();
        assert!(t.matches(b"s3cret-token"));
        for wrong in [
            &b""[..],
            b"s3cret-toke",
            b"s3cret-token!",
            b"S3cret-token",
            b"x3cret-token",
            b"s3cret-tokeN",
        ] {
            assert!(!t.matches(wrong));
        }
        assert!(AccessToken::new("").is_err());
        assert!(AccessToken::new("has space").is_err());
        assert!(AccessToken::new("nul\0").is_err());
        assert!(AccessToken::new("x".repeat(1025)).is_err());
        assert!(!format!("{t:?}").contains("s3cret"));
    }
}
