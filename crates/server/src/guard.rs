//! The fence every request passes before routing: browsers out, loopback
//! `Host` names when there is no token, the bearer token when there is one.
//! The loopback check itself ([`check_loopback`]) is public (through
//! [`crate::http`]) so that every server that answers only on loopback
//! applies the same one.

use std::net::IpAddr;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Uri, header};
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
        None => check_loopback(request.uri(), headers).map_err(Problem::host_refused),
    }
}

/// Why a request is not addressed to this machine's loopback interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HostRefused {
    /// More than one `Host` header: which one a proxy or a browser acted on
    /// cannot be known.
    #[error("the request carries more than one Host header")]
    DuplicateHost,
    /// The `Host` header names another machine, or is not a valid
    /// `name[:port]`.
    #[error("the Host header does not name a loopback address or localhost")]
    HostNotLoopback,
    /// An absolute-form request target (`GET http://name/path`) names
    /// another machine; such a target overrides the `Host` header, so it is
    /// checked too.
    #[error("the request target names a host that is not a loopback address or localhost")]
    TargetNotLoopback,
}

/// Accepts a request only if everything that says where it is addressed
/// names this machine's loopback interface (127.0.0.0/8, `::1`, an
/// IPv4-mapped loopback address, or `localhost`): at most one `Host`
/// header, whose whole value is such a name with an optional port, and, for
/// an absolute-form target, the target's host too. This is what keeps a
/// page on another site from reaching a loopback-only server through DNS
/// rebinding. A request without any `Host` header (HTTP/1.0) is accepted:
/// browsers always send one.
pub fn check_loopback(uri: &Uri, headers: &HeaderMap) -> Result<(), HostRefused> {
    let mut hosts = headers.get_all(header::HOST).iter();
    match (hosts.next(), hosts.next()) {
        (_, Some(_)) => return Err(HostRefused::DuplicateHost),
        (Some(host), None) if !host.to_str().is_ok_and(is_loopback_host) => {
            return Err(HostRefused::HostNotLoopback);
        }
        _ => {}
    }
    match uri.host() {
        Some(host) if !is_loopback_name(host) => Err(HostRefused::TargetNotLoopback),
        _ => Ok(()),
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

/// Whether a `Host` header value (`name[:port]`, `[v6]` or `[v6]:port`)
/// names this machine's loopback interface. Anything after the name must
/// be a port (`:` and digits): `[::1]x` or `localhost:x` is refused.
fn is_loopback_host(host: &str) -> bool {
    let (name, port) = if let Some(rest) = host.strip_prefix('[') {
        match rest.split_once(']') {
            Some((ip, "")) => (ip, None),
            Some((ip, port)) => match port.strip_prefix(':') {
                Some(port) => (ip, Some(port)),
                None => return false,
            },
            None => return false,
        }
    } else {
        match host.split_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    let port_ok = port.is_none_or(|p| p.bytes().all(|b| b.is_ascii_digit()));
    port_ok && is_loopback_name(name)
}

/// Whether a host name (as in a URI: an IPv6 address may be in brackets)
/// is `localhost` or a loopback address.
fn is_loopback_name(name: &str) -> bool {
    let name = name
        .strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .unwrap_or(name);
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
            "[::1]:x",
            "[::1",
            "::1",
            "localhost:x",
            "127.0.0.1:7878:1",
            "127.0.0.1 ",
            "0.0.0.0:7878",
        ] {
            assert!(!is_loopback_host(bad), "{bad}");
        }
    }

    fn headers(hosts: &[&'static str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for host in hosts {
            h.append(header::HOST, HeaderValue::from_static(host));
        }
        h
    }

    #[test]
    fn requests_are_loopback_only_if_every_address_in_them_is() {
        let origin_form = Uri::from_static("/wallet");
        for ok in [
            &[][..],
            &["127.0.0.1:4318"],
            &["[::1]:4318"],
            &["localhost"],
        ] {
            assert_eq!(check_loopback(&origin_form, &headers(ok)), Ok(()), "{ok:?}");
        }
        assert_eq!(
            check_loopback(&origin_form, &headers(&["[::1]x"])),
            Err(HostRefused::HostNotLoopback)
        );
        assert_eq!(
            check_loopback(&origin_form, &headers(&["evil.example"])),
            Err(HostRefused::HostNotLoopback)
        );
        assert_eq!(
            check_loopback(&origin_form, &headers(&["127.0.0.1", "127.0.0.1"])),
            Err(HostRefused::DuplicateHost),
            "two Host headers, even equal ones"
        );
        assert_eq!(
            check_loopback(&origin_form, &headers(&["127.0.0.1", "evil.example"])),
            Err(HostRefused::DuplicateHost)
        );
        // An absolute-form target overrides Host: it is checked too.
        let loopback_host = headers(&["127.0.0.1:4318"]);
        for bad in [
            "http://evil.example/wallet",
            "http://evil.example:4318/wallet",
            "http://127.0.0.1.evil.example/wallet",
            "http://127.0.0.1@evil.example/wallet",
            "http://[::2]/wallet",
        ] {
            assert_eq!(
                check_loopback(&Uri::from_static(bad), &loopback_host),
                Err(HostRefused::TargetNotLoopback),
                "{bad}"
            );
        }
        for ok in [
            "http://127.0.0.1:4318/wallet",
            "http://localhost/wallet",
            "http://[::1]:4318/wallet",
            "http://evil.example@127.0.0.1/wallet",
        ] {
            assert_eq!(
                check_loopback(&Uri::from_static(ok), &loopback_host),
                Ok(()),
                "{ok}"
            );
        }
        assert_eq!(
            check_loopback(
                &Uri::from_static("http://127.0.0.1/wallet"),
                &headers(&["evil.example"])
            ),
            Err(HostRefused::HostNotLoopback),
            "a loopback target does not excuse a foreign Host"
        );
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
