#![allow(clippy::unwrap_used)]
//! `fieldnotes serve` against clients that hold its connections: a socket
//! that sends nothing, a kept-alive connection left idle, a body trickled
//! byte by byte, more idle sockets than the process has file descriptors,
//! and more clients than the connection limit. Real processes, real
//! sockets; the server's timeouts are a second, every wait on it is bounded
//! by a generous [`BOUND`].

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use common::server::*;
use common::*;

#[test]
fn idle_connections_are_closed_by_the_server() {
    let db = Db::init();
    let server = serve(&db, &["--read-timeout", "1s"]);

    // A client that connects and sends nothing.
    let mut silent = server.connect();
    let got = read_until_closed(&mut silent)
        .unwrap_or_else(|_| panic!("a silent connection was still open after {BOUND:?}"));
    assert_eq!(got, "", "nothing is answered to nothing");

    // A kept-alive connection, idle after its answer.
    let mut kept = server.connect();
    write!(kept, "GET /wallet HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
    let answer = read_response(&mut kept);
    assert_eq!(status(&answer), 200, "{answer}");
    read_until_closed(&mut kept)
        .unwrap_or_else(|_| panic!("an idle kept-alive connection was still open after {BOUND:?}"));
}

#[test]
fn a_trickled_body_gets_408_and_pays_nothing() {
    let db = Db::init();
    let server = serve(&db, &["--read-timeout", "1s"]);
    let json = r#"{"document_id":"document-7"}"#;
    // 64 trailing spaces, one every 150 ms: the body would be complete
    // (and valid) after about 10 s, ten times the read timeout.
    let padding = 64;
    let mut s = server.connect();
    write!(
        s,
        "POST /payments HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{json}",
        json.len() + padding
    )
    .unwrap();
    let mut writer = s.try_clone().unwrap();
    let trickle = std::thread::spawn(move || {
        for _ in 0..padding {
            std::thread::sleep(Duration::from_millis(150));
            if writer.write_all(b" ").is_err() {
                break; // the server closed the connection
            }
        }
    });
    let answer = read_until_closed(&mut s)
        .unwrap_or_else(|got| panic!("no answer within {BOUND:?}: {got:?}"));
    trickle.join().unwrap();
    assert_eq!(status(&answer), 408, "{answer}");
    let error: serde_json::Value = serde_json::from_str(body(&answer)).unwrap();
    assert_eq!(error["error"], "request_timeout", "{answer}");
    assert!(
        error["message"].as_str().unwrap().contains("1000 ms"),
        "{answer}"
    );
    assert!(
        answer.to_ascii_lowercase().contains("connection: close"),
        "{answer}"
    );
    assert_eq!(db.balance(), 10_000, "nothing was paid");
    assert_eq!(db.count("errand_jobs"), 0, "nothing was enqueued");
}

#[test]
fn more_idle_sockets_than_file_descriptors_do_not_stop_the_server() {
    let db = Db::init();
    // 64 descriptors: the server can hold only a few dozen sockets.
    let server = serve_with(&db, &["--read-timeout", "1s"], Some("ulimit -n 64;"));
    let idle: Vec<TcpStream> = (0..150).map(|_| server.connect()).collect();
    // While every idle socket is still open on this side, a real request
    // is answered: the server closes idle connections itself, and accepts
    // again once descriptors are free.
    let answer = server.raw("GET /wallet HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n");
    assert_eq!(status(&answer), 200, "{answer}");
    assert!(body(&answer).contains("10000"), "{answer}");
    let json = r#"{"document_id":"document-7"}"#;
    let answer = server.raw(&format!(
        "POST /payments HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{json}",
        json.len()
    ));
    assert_eq!(status(&answer), 201, "{answer}");
    assert_eq!(db.balance(), 9_500);
    drop(idle);
}

#[test]
fn clients_beyond_the_connection_limit_wait_until_one_closes() {
    let db = Db::init();
    let server = serve(&db, &["--max-connections", "4", "--read-timeout", "300s"]);
    // Four kept-alive connections, each answered once: all four are open.
    let mut held: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut s = server.connect();
            write!(s, "GET /wallet HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
            assert_eq!(status(&read_response(&mut s)), 200);
            s
        })
        .collect();
    let mut fifth = server.connect();
    write!(
        fifth,
        "GET /wallet HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    fifth
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let mut buf = [0u8; 64];
    match fifth.read(&mut buf) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!(
            "a fifth client was served while four connections were open: {other:?} {:?}",
            String::from_utf8_lossy(&buf)
        ),
    }
    // One closes: the fifth is served.
    drop(held.pop());
    fifth.set_read_timeout(Some(BOUND)).unwrap();
    let answer = read_until_closed(&mut fifth)
        .unwrap_or_else(|got| panic!("the fifth client was not served: {got:?}"));
    assert_eq!(status(&answer), 200, "{answer}");
}

#[test]
fn unusable_limits_are_refused_before_listening() {
    let db = Db::init();
    let o = run(&["serve", db.arg(), "--port", "0", "--read-timeout", "0s"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--read-timeout"), "{}", stderr(&o));
    let o = run(&["serve", db.arg(), "--port", "0", "--max-connections", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--max-connections"), "{}", stderr(&o));
}
