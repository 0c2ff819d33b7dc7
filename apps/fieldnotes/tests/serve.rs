#![allow(clippy::unwrap_used)]
//! The real server process over a real socket: loopback only, browsers
//! refused, oversized bodies answered with 413 (not a reset connection).

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use common::*;

/// Kills the server we started when the test ends, pass or fail.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn start(db: &Db) -> Server {
    let mut child = Command::new(BIN)
        .args(["serve", db.arg(), "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let port = read_port(&mut child);
    Server { child, port }
}

/// The port of the server's first stdout line.
fn read_port(child: &mut Child) -> u16 {
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // "listening on http://127.0.0.1:PORT (Ctrl-C stops)"
    let addr = line
        .split_whitespace()
        .find_map(|w| w.strip_prefix("http://"))
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    assert!(addr.starts_with("127.0.0.1:"), "{addr}");
    addr.rsplit(':').next().unwrap().parse().unwrap()
}

/// One HTTP/1.1 exchange; returns the status code and the body.
fn exchange(port: u16, head: &str, body: &[u8]) -> (u16, String) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let request = format!(
        "{head}\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(request.as_bytes()).unwrap();
    // The server may answer (and stop reading) before the body is all sent.
    let _ = s.write_all(body);
    let mut response = Vec::new();
    let _ = s.read_to_end(&mut response);
    let text = String::from_utf8_lossy(&response).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {text:?}"));
    let body = text.split("\r\n\r\n").nth(1).unwrap_or("").to_owned();
    (status, body)
}

#[test]
fn the_server_pays_refuses_browsers_and_answers_413() {
    let db = Db::init();
    let server = start(&db);

    let (status, body) = exchange(server.port, "GET /wallet HTTP/1.1", b"");
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("10000"), "{body}");

    let pay = br#"{"document_id":"document-7"}"#;
    let (status, body) = exchange(
        server.port,
        "POST /payments HTTP/1.1\r\nContent-Type: application/json\r\nOrigin: http://localhost:3000",
        pay,
    );
    assert_eq!(status, 403, "{body}");
    assert_eq!(db.balance(), 10_000);

    for size in [BODY_SIZES[0], BODY_SIZES[1]] {
        let big = format!(r#"{{"document_id":"{}"}}"#, "x".repeat(size));
        let (status, body) = exchange(
            server.port,
            "POST /payments HTTP/1.1\r\nContent-Type: application/json",
            big.as_bytes(),
        );
        assert_eq!(status, 413, "{body}");
        assert!(body.contains("body_too_large"), "{body}");
    }

    let (status, body) = exchange(
        server.port,
        "POST /payments HTTP/1.1\r\nContent-Type: application/json",
        pay,
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(db.balance(), 9_500);
    // The job the API enqueued is visible to the local operator command.
    let job = only_job(&db);
    assert!(body.contains(job["id"].as_str().unwrap()), "{body}");
}

/// Just over the limit, and far over it.
const BODY_SIZES: [usize; 2] = [20 * 1024, 1024 * 1024];

/// SIGTERM stops the server gracefully, and it says so: that it is
/// shutting down, then that it stopped; it exits 0.
#[test]
fn sigterm_says_the_server_is_shutting_down_and_then_that_it_stopped() {
    let db = Db::init();
    let mut server = start_with_stderr(&db);
    let (status, body) = exchange(server.port, "GET /wallet HTTP/1.1", b"");
    assert_eq!(status, 200, "{body}");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(server.child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let mut stderr = String::new();
    server
        .child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    let exited = server.child.wait().unwrap();
    assert_eq!(exited.code(), Some(0), "{stderr}");
    assert_eq!(
        stderr,
        "fieldnotes: SIGTERM received; finishing in-flight requests\nfieldnotes: stopped\n"
    );
}

/// [`start`], with the server's stderr kept to read.
fn start_with_stderr(db: &Db) -> Server {
    let mut child = Command::new(BIN)
        .args(["serve", db.arg(), "--port", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let port = read_port(&mut child);
    Server { child, port }
}
