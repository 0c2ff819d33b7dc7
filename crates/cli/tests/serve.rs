#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `errand serve` as a real process: the port read from its first stdout
//! line, requests over plain HTTP/1.1 (a hand-rolled client on
//! `std::net::TcpStream`), the idempotent retry by id, the refusal of a
//! non-loopback address without a token, and a graceful SIGTERM that lets an
//! in-flight request finish. On SQLite, and on PostgreSQL in its own schema
//! when `ERRAND_TEST_POSTGRES_URL` is set.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const TOKEN: &str = "serve-test-token-5f1c2a9e";

mod common;

use common::{Backend, both};

impl Backend {
    /// Writes `payload` into job `id`'s row directly, as SQL or an older
    /// version could have stored it, past the library's checks.
    fn store_raw_payload(&self, id: &str, payload: &str) {
        match &self.pg {
            Some((url, schema)) => {
                let out = Command::new("psql")
                    .args([url.as_str(), "-q", "-v", "ON_ERROR_STOP=1", "-c"])
                    .arg(format!(
                        "UPDATE {schema}.errand_jobs SET payload = '{payload}'::json WHERE id = '{id}'"
                    ))
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            None => {
                let conn = errand::sqlite::rusqlite::Connection::open(self.db()).unwrap();
                let changed = conn
                    .execute(
                        "UPDATE errand_jobs SET payload = ?1 WHERE id = ?2",
                        [payload, id],
                    )
                    .unwrap();
                assert_eq!(changed, 1);
            }
        }
    }

    /// Every job, as `errand jobs --json` sees it (not through the server).
    fn jobs(&self) -> Vec<Value> {
        let out = self
            .command(&[])
            .args(["jobs", "--limit", "1000", "--json"])
            .output()
            .unwrap();
        assert!(out.status.success());
        serde_json::from_slice::<Value>(&out.stdout)
            .unwrap()
            .as_array()
            .cloned()
            .unwrap()
    }

    /// Starts `errand serve` with `args` and waits for its address.
    fn serve(&self, args: &[&str], env: &[(&str, &str)]) -> Server {
        let mut child = self
            .command(&[])
            .arg("serve")
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn errand serve");
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut server = Server {
            child: Some(child),
            stdout: lines(stdout),
            stderr: lines(stderr),
            port: 0,
        };
        let line = server
            .stdout
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no address line; stderr: {}", server.drain_stderr()));
        let addr = line
            .strip_prefix("listening on http://")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"));
        server.port = addr.rsplit(':').next().unwrap().parse().unwrap();
        server
    }
}

/// Forwards a pipe's lines to a channel from a thread of its own.
fn lines(pipe: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines() {
            let Ok(line) = line else { return };
            if tx.send(line).is_err() {
                return;
            }
        }
    });
    rx
}

/// A running `errand serve`; killed if the test panics before it exits.
struct Server {
    child: Option<Child>,
    stdout: Receiver<String>,
    stderr: Receiver<String>,
    port: u16,
}

impl Server {
    fn child(&self) -> &Child {
        self.child.as_ref().unwrap()
    }

    fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([sig, &self.child().id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    fn drain_stderr(&self) -> String {
        self.stderr.try_iter().collect::<Vec<_>>().join("\n")
    }

    /// The next line on stdout.
    fn next_line(&self) -> String {
        self.stdout
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("no further line; stderr: {}", self.drain_stderr()))
    }

    /// Waits for a line on stderr containing `needle`.
    fn await_stderr(&self, needle: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            match self.stderr.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return,
                Ok(_) => {}
                Err(_) => break,
            }
        }
        panic!("stderr never said {needle:?}");
    }

    /// Waits for the process to exit and returns its exit code.
    fn wait(mut self) -> Option<i32> {
        let mut child = self.child.take().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status.code();
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("errand serve did not exit within 60 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn request(&self, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Reply {
        let mut stream = self.connect();
        stream
            .write_all(request_head(self.port, method, path, headers, body.len()).as_bytes())
            .unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        read_reply(stream)
    }

    /// A request whose answer is kept as text (a stored payload may be JSON
    /// that `serde_json::Value` cannot hold).
    fn request_text(&self, method: &str, path: &str, body: &str) -> (u16, String) {
        let mut stream = self.connect();
        let headers = [("Content-Type", "application/json")];
        stream
            .write_all(request_head(self.port, method, path, &headers, body.len()).as_bytes())
            .unwrap();
        stream.write_all(body.as_bytes()).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let text = String::from_utf8(raw).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
        let status = head.split(' ').nth(1).and_then(|s| s.parse().ok());
        (status.expect("a status line"), body.to_owned())
    }

    fn connect(&self) -> TcpStream {
        let stream = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        stream
    }

    fn post(&self, path: &str, body: &Value) -> Reply {
        self.request(
            "POST",
            path,
            &[("Content-Type", "application/json")],
            &body.to_string(),
        )
    }

    fn get(&self, path: &str) -> Reply {
        self.request("GET", path, &[], "")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn request_head(
    port: u16,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    length: usize,
) -> String {
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\nContent-Length: {length}\r\n"
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    head
}

#[derive(Debug)]
struct Reply {
    status: u16,
    head: String,
    body: Value,
}

/// Reads a whole response (the server closes the connection after it).
fn read_reply(mut stream: TcpStream) -> Reply {
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).unwrap();
    let text = String::from_utf8(raw).unwrap();
    let (head, body) = text.split_once("\r\n\r\n").expect("a complete response");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status line");
    assert!(
        !head.to_ascii_lowercase().contains("transfer-encoding"),
        "this client reads only Content-Length bodies: {head}"
    );
    let body = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
    };
    Reply {
        status,
        head: head.to_owned(),
        body,
    }
}

#[test]
fn serve_enqueues_once_per_id_and_finishes_in_flight_requests_on_sigterm() {
    both("main", |b| {
        let server = b.serve(&["--bind", "127.0.0.1:0"], &[]);
        let health = server.get("/healthz");
        assert_eq!((health.status, &health.body), (200, &json!({"ok": true})));

        // A client that lost its connection retries with the same id.
        let job = json!({"kind": "email", "id": "order-17", "payload": {"to": "a@example.com"}});
        let first = server.post("/v1/jobs", &job);
        assert_eq!(first.status, 201, "{:?}", first);
        assert_eq!(first.body["created"], true);
        let retry = server.post("/v1/jobs", &job);
        assert_eq!(retry.status, 200, "{:?}", retry);
        assert_eq!(retry.body["created"], false);
        assert_eq!(retry.body["job"]["id"], "order-17");
        let jobs = b.jobs();
        assert_eq!(jobs.len(), 1, "exactly one job: {jobs:?}");
        assert_eq!(jobs[0]["payload"], json!({"to": "a@example.com"}));

        let shown = server.get("/v1/jobs/order-17");
        assert_eq!((shown.status, &shown.body["state"]), (200, &json!("ready")));
        let listed = server.get("/v1/jobs?state=ready&limit=1");
        assert_eq!(
            listed.body["next"], "order-17",
            "a full page names the next"
        );
        let missing = server.get("/v1/jobs/nope");
        assert_eq!(missing.status, 404);
        assert!(
            missing
                .head
                .to_ascii_lowercase()
                .contains("content-type: application/problem+json")
        );
        assert_eq!(missing.body["code"], "not_found");

        // Browsers and broken input are refused and write nothing.
        let browser = server.request(
            "POST",
            "/v1/jobs",
            &[
                ("Origin", "https://evil.example"),
                ("Content-Type", "application/json"),
            ],
            r#"{"kind":"k"}"#,
        );
        assert_eq!(
            (browser.status, &browser.body["code"]),
            (403, &json!("browser_origin_refused"))
        );
        let broken = server.request(
            "POST",
            "/v1/jobs",
            &[("Content-Type", "application/json")],
            r#"{"kind":"k","payload":"#,
        );
        assert_eq!(
            (broken.status, &broken.body["code"]),
            (400, &json!("malformed_json"))
        );
        let big = format!(r#"{{"kind":"k","payload":"{}"}}"#, "x".repeat(1024 * 1024));
        let too_big = server.request(
            "POST",
            "/v1/jobs",
            &[("Content-Type", "application/json")],
            &big,
        );
        assert_eq!(
            (too_big.status, &too_big.body["code"]),
            (413, &json!("body_too_large"))
        );
        assert_eq!(b.jobs().len(), 1);

        // A request in flight when SIGTERM arrives: its head and half its
        // body are sent, then the signal, then the rest. It is answered, and
        // then the process exits 0.
        let body = json!({"kind": "email", "id": "in-flight"}).to_string();
        let (front, back) = body.split_at(body.len() / 2);
        let mut stream = server.connect();
        let head = request_head(
            server.port,
            "POST",
            "/v1/jobs",
            &[("Content-Type", "application/json")],
            body.len(),
        );
        stream.write_all(head.as_bytes()).unwrap();
        stream.write_all(front.as_bytes()).unwrap();
        stream.flush().unwrap();
        std::thread::sleep(Duration::from_millis(200));
        server.signal("-TERM");
        server.await_stderr("SIGTERM received");
        // New connections are refused once the server has seen the signal.
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(("127.0.0.1", server.port)).is_ok() {
            assert!(Instant::now() < deadline, "still accepting after SIGTERM");
            std::thread::sleep(Duration::from_millis(10));
        }
        stream.write_all(back.as_bytes()).unwrap();
        let answer = read_reply(stream);
        assert_eq!(answer.status, 201, "{answer:?}");
        assert_eq!(server.wait(), Some(0), "a graceful stop exits 0");
        assert_eq!(b.jobs().len(), 2);
    });
}

#[test]
fn a_non_loopback_address_needs_a_token_and_then_requires_it() {
    let b = Backend::sqlite();
    for bind in ["0.0.0.0:0", "[::]:0"] {
        let out = b
            .command(&[])
            .args(["serve", "--bind", bind])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bind}: {stderr}");
        assert!(
            stderr.contains("--token") && stderr.contains("ERRAND_TOKEN"),
            "the message says what to do: {stderr}"
        );
        assert!(out.stdout.is_empty(), "it never listened");
    }
    let out = b
        .command(&[])
        .args(["serve", "--bind", "0.0.0.0:0"])
        .env("ERRAND_TOKEN", "")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "an empty token is no token");
    let out = b
        .command(&[])
        .args(["serve", "--bind", "127.0.0.1:0", "--max-body", "12"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a body limit below 1 KiB");

    // The token from the environment: the server starts on every
    // interface, and every /v1 route wants the token.
    let server = b.serve(&["--bind", "0.0.0.0:0"], &[("ERRAND_TOKEN", TOKEN)]);
    // It says where to point a browser on this machine, and how to sign in.
    let base = format!("http://127.0.0.1:{}", server.port);
    assert_eq!(
        server.next_line(),
        format!(
            "dashboard: {base}/dashboard/ (sign in with the access token given with --token or ERRAND_TOKEN)"
        )
    );
    assert_eq!(
        server.next_line(),
        format!(
            "API: {base}/v1/ (described at /v1/openapi.json; send the access token as `Authorization: Bearer TOKEN`)"
        )
    );
    let body = r#"{"kind":"k","id":"t1"}"#;
    let json_type = ("Content-Type", "application/json");
    let anonymous = server.request("POST", "/v1/jobs", &[json_type], body);
    assert_eq!(
        (anonymous.status, &anonymous.body["code"]),
        (401, &json!("unauthorized"))
    );
    assert!(
        anonymous
            .head
            .to_ascii_lowercase()
            .contains("www-authenticate: bearer")
    );
    let wrong = server.request(
        "POST",
        "/v1/jobs",
        &[json_type, ("Authorization", "Bearer not-the-token")],
        body,
    );
    assert_eq!(wrong.status, 401);
    assert!(b.jobs().is_empty());
    let bearer = format!("Bearer {TOKEN}");
    let created = server.request(
        "POST",
        "/v1/jobs",
        &[json_type, ("Authorization", &bearer)],
        body,
    );
    assert_eq!(created.status, 201, "{created:?}");
    assert_eq!(server.get("/healthz").status, 200, "healthz stays open");
    server.signal("-INT");
    assert_eq!(server.wait(), Some(0));
    assert_eq!(b.jobs().len(), 1);
}

/// After the address, the server says where the dashboard and the API
/// are; a browser sent to `/` is redirected to the dashboard, and API
/// clients still get JSON errors everywhere else.
#[test]
fn serve_names_its_dashboard_and_sends_a_browser_at_the_root_there() {
    let b = Backend::sqlite();
    let server = b.serve(&["--bind", "127.0.0.1:0"], &[]);
    let base = format!("http://127.0.0.1:{}", server.port);
    assert_eq!(server.next_line(), format!("dashboard: {base}/dashboard/"));
    assert_eq!(
        server.next_line(),
        format!("API: {base}/v1/ (described at /v1/openapi.json)")
    );
    // What a browser sends when the address is typed in.
    let browser = [
        ("Accept", "text/html"),
        ("Sec-Fetch-Mode", "navigate"),
        ("Sec-Fetch-Site", "none"),
    ];
    let root = server.request("GET", "/", &browser, "");
    assert_eq!(root.status, 303, "{root:?}");
    assert!(
        root.head
            .lines()
            .any(|l| l.eq_ignore_ascii_case("location: /dashboard/")),
        "{root:?}"
    );
    let dashboard = server.request("GET", "/dashboard/", &browser, "");
    assert_eq!(dashboard.status, 303, "the dashboard's home: {dashboard:?}");
    let missing = server.get("/v1/no-such-route");
    assert_eq!(
        (missing.status, &missing.body["code"]),
        (404, &json!("not_found"))
    );
    server.signal("-TERM");
    assert_eq!(server.wait(), Some(0));
}

/// A remote worker with nothing but an HTTP client: it leases a job,
/// renews the lease, loses nothing to a forged token, and acknowledges;
/// a second job fails with a retry hint and waits for it.
#[test]
fn a_remote_worker_leases_heartbeats_and_settles_over_http() {
    both("remote", |b| {
        let server = b.serve(&["--bind", "127.0.0.1:0", "--read-timeout", "5s"], &[]);
        let described = server.get("/v1/openapi.json");
        assert_eq!(described.status, 200);
        assert!(described.body["paths"]["/v1/leases"]["post"].is_object());

        let job = json!({"kind": "email", "id": "remote-1", "payload": {"to": "a@example.com"}});
        assert_eq!(server.post("/v1/jobs", &job).status, 201);
        let leased = server.post("/v1/leases", &json!({"limit": 10, "lease": "30s"}));
        assert_eq!(leased.status, 200, "{leased:?}");
        let jobs = leased.body["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 1, "{leased:?}");
        let (job, lease) = (&jobs[0]["job"], &jobs[0]["lease"]);
        assert_eq!(
            (&job["id"], &job["state"]),
            (&json!("remote-1"), &json!("running"))
        );
        assert_eq!(job["payload"], json!({"to": "a@example.com"}));
        let token = lease["token"].as_str().unwrap().to_owned();
        let attempt = lease["attempt"].as_u64().unwrap();
        assert_eq!(attempt, 1);

        let beat = server.post(
            "/v1/leases/remote-1/heartbeat",
            &json!({"token": token, "attempt": attempt, "extend": "60s",
                    "progress": {"percent": 50, "message": "half sent"}}),
        );
        assert_eq!(beat.status, 200, "{beat:?}");
        let shown = server.get("/v1/jobs/remote-1");
        assert_eq!(
            shown.body["progress"],
            json!({"percent": 50, "message": "half sent", "attempt": 1}),
            "{shown:?}"
        );
        assert!(
            beat.body["lease_until"].as_str().unwrap() > lease["lease_until"].as_str().unwrap()
        );

        let forged = server.post(
            "/v1/leases/remote-1/complete",
            &json!({"token": "0123456789abcdef0123456789abcdef"}),
        );
        assert_eq!(
            (forged.status, &forged.body["code"]),
            (409, &json!("lease_lost"))
        );
        assert_eq!(
            b.jobs()[0]["state"],
            "running",
            "a forged token changed nothing"
        );

        let too_big = "x".repeat(errand::MAX_OUTPUT_BYTES);
        let refused = server.post(
            "/v1/leases/remote-1/complete",
            &json!({"token": token, "attempt": attempt, "output": too_big}),
        );
        assert_eq!(
            (refused.status, &refused.body["code"]),
            (400, &json!("invalid")),
            "{refused:?}"
        );
        assert!(
            refused.body["detail"]
                .as_str()
                .unwrap()
                .contains("the limit is 65536 bytes"),
            "{refused:?}"
        );
        let done = server.post(
            "/v1/leases/remote-1/complete",
            &json!({"token": token, "attempt": attempt, "output": {"rows": 7}}),
        );
        assert_eq!(done.status, 200, "{done:?}");
        assert_eq!(done.body["outcome"], "acknowledged");
        let shown = server.get("/v1/jobs/remote-1");
        assert_eq!(shown.body["output"], json!({"rows": 7}), "{shown:?}");
        let again = server.post("/v1/leases/remote-1/complete", &json!({"token": token}));
        assert_eq!(
            (again.status, &again.body["code"]),
            (409, &json!("lease_lost"))
        );

        assert_eq!(
            server
                .post("/v1/jobs", &json!({"kind": "sms", "id": "remote-2"}))
                .status,
            201
        );
        let leased = server.post("/v1/leases", &json!({"wait": "5s"}));
        let token = leased.body["jobs"][0]["lease"]["token"]
            .as_str()
            .unwrap()
            .to_owned();
        let failed = server.post(
            "/v1/leases/remote-2/fail",
            &json!({"token": token, "error": "provider down", "retry_in": "1h"}),
        );
        assert_eq!(failed.body["outcome"], "retry_scheduled", "{failed:?}");
        assert!(
            server.post("/v1/leases", &json!({})).body["jobs"]
                .as_array()
                .unwrap()
                .is_empty()
        );

        let mut states: Vec<_> = b
            .jobs()
            .iter()
            .map(|j| {
                (
                    j["id"].clone(),
                    j["state"].clone(),
                    j["attempts"].clone(),
                    j["last_error"].clone(),
                )
            })
            .collect();
        states.sort_by_key(|s| s.0.to_string());
        assert_eq!(
            states,
            [
                (json!("remote-1"), json!("done"), json!(1), json!(null)),
                (
                    json!("remote-2"),
                    json!("ready"),
                    json!(1),
                    json!("provider down")
                ),
            ]
        );
        server.signal("-TERM");
        assert_eq!(server.wait(), Some(0));
    });
}

/// One rule for payloads: JSON that a store could not hold or a reader could
/// not render (a lone UTF-16 surrogate, a number beyond a 64-bit float, a
/// NUL character) is refused with 400 `invalid` on both backends, before
/// anything is written. And a payload already stored that breaks the rule
/// (written by SQL, or by an older version) renders, as stored, in every
/// answer that carries it: no reader panics or fails on stored data.
#[test]
fn payloads_no_store_can_hold_are_refused_alike_and_stored_ones_render_everywhere() {
    both("payloads", |b| {
        let server = b.serve(&["--bind", "127.0.0.1:0"], &[]);
        for payload in [
            r#"{"a":"\ud800"}"#,
            "[1e400]",
            "1e999999",
            r#""a\u0000b""#,
            r#"{"k\u0000":1}"#,
        ] {
            let body = format!(r#"{{"kind":"k","id":"refused","payload":{payload}}}"#);
            let (status, text) = server.request_text("POST", "/v1/jobs", &body);
            assert_eq!(status, 400, "{payload}: {text}");
            let problem: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(problem["code"], "invalid", "{payload}: {text}");
            assert!(
                problem["detail"].as_str().unwrap().contains("payload"),
                "{payload}: {text}"
            );
            let out = b
                .command(&[])
                .args([
                    "enqueue",
                    "--kind",
                    "k",
                    "--id",
                    "refused",
                    "--payload",
                    payload,
                ])
                .output()
                .unwrap();
            assert_eq!(out.status.code(), Some(2), "{payload}");
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("payload"), "{payload}: {stderr}");
        }
        assert!(b.jobs().is_empty(), "a refused payload wrote nothing");

        // Stored past the checks: PostgreSQL's json holds 1e400 (not a lone
        // surrogate or NUL); SQLite holds any text.
        let stored: &[(&str, &str)] = if b.pg.is_some() {
            &[("big", "[1e400]")]
        } else {
            &[("big", "[1e400]"), ("surrogate", r#"{"a":"\ud800"}"#)]
        };
        for (id, payload) in stored {
            // Each job on a queue of its own, so the lease below takes it.
            let made = server.post("/v1/jobs", &json!({"kind": "k", "id": id, "queue": id}));
            assert_eq!(made.status, 201, "{made:?}");
            b.store_raw_payload(id, payload);
            let rendered = |text: &str| {
                // Both stores keep the text as it was.
                assert!(
                    text.contains(&format!(r#""payload":{payload}"#)),
                    "{id}: {}",
                    &text[..text.len().min(300)]
                );
            };
            for (method, path, body) in [
                (
                    "POST",
                    "/v1/jobs".to_owned(),
                    format!(r#"{{"kind":"k","id":"{id}"}}"#),
                ),
                ("GET", "/v1/jobs".to_owned(), String::new()),
                ("GET", format!("/v1/jobs/{id}"), String::new()),
                (
                    "POST",
                    format!("/v1/jobs/{id}/cancel"),
                    r#"{"operator":"ops","reason":"check"}"#.to_owned(),
                ),
                (
                    "POST",
                    format!("/v1/jobs/{id}/replay"),
                    r#"{"operator":"ops","reason":"check"}"#.to_owned(),
                ),
                (
                    "POST",
                    "/v1/leases".to_owned(),
                    format!(r#"{{"limit":1,"queues":["{id}"]}}"#),
                ),
            ] {
                let (status, text) = server.request_text(method, &path, &body);
                assert_eq!(status, 200, "{method} {path}: {text}");
                rendered(&text);
            }
            // The lease taken above is cancelled; the CLI's readers and
            // writers render the job too.
            for args in [
                vec!["jobs", "--json"],
                vec!["show", id, "--json"],
                vec!["cancel", id, "--json"],
                vec!["enqueue", "--kind", "k", "--id", id, "--json"],
            ] {
                let out = b.command(&[]).args(&args).output().unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(
                    out.status.success(),
                    "{args:?}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                rendered(&stdout);
            }
            // A replay names the job without its payload, but names it.
            for args in [
                vec!["replay", id, "--json", "--by", "ops", "--reason", "check"],
                vec!["replay", id, "--dry-run", "--json"],
            ] {
                let out = b.command(&[]).args(&args).output().unwrap();
                let stdout = String::from_utf8_lossy(&out.stdout);
                assert!(out.status.success(), "{args:?}: {stdout}");
                let bytes = format!(r#""payload_bytes":{}"#, payload.len());
                assert!(stdout.contains(&bytes), "{args:?}: {stdout}");
            }
        }
        server.signal("-TERM");
        assert_eq!(server.wait(), Some(0));
    });
}

/// Durations and times out of range get the same clear refusal on both
/// backends — 400 `invalid` from the API, exit 2 from the CLI — and write
/// nothing: no `i64::MAX` due time on SQLite, no 500 "interval out of range"
/// on PostgreSQL.
#[test]
fn out_of_range_durations_and_times_are_refused_alike() {
    both("durations", |b| {
        let server = b.serve(&["--bind", "127.0.0.1:0"], &[]);
        for (field, value, needle) in [
            ("delay", "500000000y", "a delay"),
            ("delay", "36501d", "a delay"),
            ("give_up_after", "500000000y", "elapsed-time budget"),
            ("run_at", "1969-12-31T23:59:59Z", "run-at"),
            ("deadline", "500000000y", "deadline"),
        ] {
            let r = server.post("/v1/jobs", &json!({"kind": "k", field: value}));
            assert_eq!(
                (r.status, r.body["code"].as_str()),
                (400, Some("invalid")),
                "{field}={value}: {r:?}"
            );
            let detail = r.body["detail"].as_str().unwrap();
            assert!(detail.contains(needle), "{field}={value}: {detail}");
            let flag = format!("--{}", field.replace('_', "-"));
            let out = b
                .command(&[])
                .args(["enqueue", "--kind", "k", &flag, value])
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(out.status.code(), Some(2), "{flag} {value}: {stderr}");
            assert!(stderr.contains(needle), "{flag} {value}: {stderr}");
        }
        let out = b
            .command(&[])
            .args(["work", "--once", "--lease", "500000000y", "--exec", "true"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(2),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(b.jobs().is_empty(), "a refused request wrote nothing");
        // The bounds themselves are accepted and read back as written.
        let r = server.post(
            "/v1/jobs",
            &json!({"kind": "k", "id": "far", "delay": "36500d", "run_at": null,
                    "deadline": "9999-12-31T23:59:59.999Z"}),
        );
        assert_eq!(r.status, 201, "{r:?}");
        assert_eq!(r.body["job"]["deadline"], "9999-12-31T23:59:59.999Z");
        let shown = b
            .command(&[])
            .args(["show", "far", "--json"])
            .output()
            .unwrap();
        assert!(shown.status.success());
        server.signal("-TERM");
        assert_eq!(server.wait(), Some(0));
    });
}

/// With remote workers only, the server ends the waits that timed out:
/// a job waiting for a signal under the `run` policy is leased once its
/// wait is over.
#[test]
fn the_server_ends_waits_that_timed_out_for_remote_workers() {
    both("serve_waits", |b| {
        let server = b.serve(&["--bind", "127.0.0.1:0"], &[]);
        let job = json!({"kind": "hold", "id": "w-1",
                         "await": {"signal": "paid", "timeout": "300ms", "on_timeout": "run"}});
        assert_eq!(server.post("/v1/jobs", &job).status, 201);
        let none = server.post("/v1/leases", &json!({}));
        assert_eq!(none.body["jobs"].as_array().unwrap().len(), 0, "{none:?}");
        // The wait is over in 300 ms; the server looks once a second.
        let leased = server.post("/v1/leases", &json!({"wait": "5s"}));
        let jobs = leased.body["jobs"].as_array().unwrap();
        assert_eq!(jobs.len(), 1, "{leased:?}");
        assert_eq!(jobs[0]["job"]["id"], "w-1");
        assert!(jobs[0].get("signal").is_none(), "it runs without a signal");
    });
}
