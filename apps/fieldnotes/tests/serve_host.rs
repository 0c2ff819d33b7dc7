#![allow(clippy::unwrap_used)]
//! `fieldnotes serve` answers only requests addressed to loopback, however
//! the address is written: an absolute-form target naming another host, a
//! `Host` with trailing junk, and two `Host` headers are all refused with
//! 403 `host_refused`, and nothing is paid. Real process, raw sockets.

mod common;

use common::server::*;
use common::*;

const PAY: &str = r#"{"document_id":"document-7"}"#;

/// A request with `target` and the given header lines, sent whole.
fn request(method: &str, target: &str, headers: &[String]) -> String {
    let mut text = format!("{method} {target} HTTP/1.1\r\n");
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    if method == "POST" {
        text.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            PAY.len()
        ));
    }
    text.push_str("Connection: close\r\n\r\n");
    if method == "POST" {
        text.push_str(PAY);
    }
    text
}

#[test]
fn requests_addressed_to_another_host_are_refused_however_written() {
    let db = Db::init();
    let server = serve(&db, &[]);
    let port = server.port;
    let loopback = format!("Host: 127.0.0.1:{port}");
    let refused: Vec<(&str, String, Vec<String>)> = vec![
        (
            "absolute-form target naming another host",
            "http://evil.example/PATH".into(),
            vec![loopback.clone()],
        ),
        (
            "absolute-form target with a loopback user name",
            format!("http://127.0.0.1:{port}@evil.example/PATH"),
            vec![loopback.clone()],
        ),
        (
            "Host with junk after the IPv6 address",
            "/PATH".into(),
            vec!["Host: [::1]x".into()],
        ),
        (
            "two Host headers, the second foreign",
            "/PATH".into(),
            vec![loopback.clone(), "Host: evil.example".into()],
        ),
        (
            "two Host headers, the first foreign",
            "/PATH".into(),
            vec!["Host: evil.example".into(), loopback.clone()],
        ),
        (
            "two equal loopback Host headers",
            "/PATH".into(),
            vec![loopback.clone(), loopback.clone()],
        ),
    ];
    for (what, target, headers) in &refused {
        for (method, path) in [("GET", "/wallet"), ("POST", "/payments")] {
            let target = target.replace("/PATH", path);
            let answer = server.raw(&request(method, &target, headers));
            assert_eq!(status(&answer), 403, "{what}, {method}: {answer}");
            let error: serde_json::Value = serde_json::from_str(body(&answer)).unwrap();
            assert_eq!(error["error"], "host_refused", "{what}: {answer}");
            assert!(
                error["message"].as_str().unwrap().contains("127.0.0.1"),
                "the message says what to use: {answer}"
            );
        }
    }
    assert_eq!(db.balance(), 10_000, "nothing was paid");
    assert_eq!(db.count("errand_jobs"), 0, "nothing was enqueued");

    // The same requests addressed to loopback are answered.
    for (target, host) in [
        (format!("http://127.0.0.1:{port}/wallet"), loopback.clone()),
        ("http://localhost/wallet".into(), loopback.clone()),
        ("/wallet".into(), format!("Host: [::1]:{port}")),
        ("/wallet".into(), "Host: LocalHost".into()),
    ] {
        let answer = server.raw(&request("GET", &target, std::slice::from_ref(&host)));
        assert_eq!(status(&answer), 200, "{target} {host}: {answer}");
    }
    let answer = server.raw(&request(
        "POST",
        &format!("http://127.0.0.1:{port}/payments"),
        &[loopback],
    ));
    assert_eq!(status(&answer), 201, "{answer}");
    assert_eq!(db.balance(), 9_500);
}

#[test]
fn a_browser_is_refused_with_origin_refused_first() {
    let db = Db::init();
    let server = serve(&db, &[]);
    // A foreign Host too: the Origin answer comes first, as documented.
    let answer = server.raw(&request(
        "POST",
        "/payments",
        &[
            "Host: evil.example".into(),
            "Origin: http://evil.example".into(),
        ],
    ));
    assert_eq!(status(&answer), 403, "{answer}");
    assert!(
        body(&answer).contains(r#""error":"origin_refused""#),
        "{answer}"
    );
    assert_eq!(db.balance(), 10_000);
}
