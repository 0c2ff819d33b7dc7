//! The router answering requests directly (`tower::ServiceExt::oneshot`)
//! over a temporary SQLite store: every route, every refusal, and after each
//! refusal the proof that nothing was written.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use errand::JobFilter;
use errand::testkit::TestQueue;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::problem::{PROBLEM_JSON, Problem, TYPE_BASE};
use crate::{AccessToken, ServeError, Server, ServerConfig, router};

mod admin;
mod encryption;
mod leases;
mod openapi;
mod schedules;
mod signals;
mod slow;
mod waits;
mod workflows;

const TOKEN: &str = "test-token-0123456789abcdef";

struct Api {
    q: TestQueue,
    app: Router,
}

struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Value,
}

impl Reply {
    fn code(&self) -> &str {
        self.body["code"].as_str().unwrap_or("")
    }

    #[track_caller]
    fn problem(&self, status: StatusCode, code: &str) {
        assert_eq!(
            (self.status, self.code()),
            (status, code),
            "body: {}",
            self.body
        );
        assert_eq!(
            self.headers[header::CONTENT_TYPE],
            PROBLEM_JSON,
            "{}",
            self.body
        );
        assert_eq!(self.body["type"], format!("{TYPE_BASE}{code}"));
        assert_eq!(self.body["status"], status.as_u16());
        assert!(self.body["title"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(
            self.body["detail"].as_str().is_some_and(|d| d.len() > 10),
            "a detail that says what to do: {}",
            self.body
        );
    }
}

impl Api {
    fn new() -> Api {
        Api::with(ServerConfig::default())
    }

    fn with(config: ServerConfig) -> Api {
        let q = TestQueue::new().unwrap();
        let app = router(q.store(), config);
        Api { q, app }
    }

    fn with_token() -> Api {
        Api::with(ServerConfig {
            token: Some(AccessToken::new(TOKEN).unwrap()),
            ..ServerConfig::default()
        })
    }

    async fn send(&self, req: Request<Body>) -> Reply {
        let response = self.app.clone().oneshot(req).await.unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), 16 * 1024 * 1024)
            .await
            .unwrap();
        let json = headers
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_none_or(|v| v.contains("json"));
        let body = if bytes.is_empty() {
            Value::Null
        } else if !json {
            // Prometheus text (/metrics): kept as a string.
            Value::String(String::from_utf8_lossy(&bytes).into_owned())
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
        };
        Reply {
            status,
            headers,
            body,
        }
    }

    async fn call(
        &self,
        method: &str,
        uri: &str,
        headers: &[(&str, &str)],
        body: impl Into<Body>,
    ) -> Reply {
        let mut req = Request::builder().method(method).uri(uri);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        self.send(req.body(body.into()).unwrap()).await
    }

    async fn get(&self, uri: &str) -> Reply {
        self.call("GET", uri, &[], Body::empty()).await
    }

    async fn post(&self, uri: &str, body: &Value) -> Reply {
        self.call(
            "POST",
            uri,
            &[("content-type", "application/json")],
            body.to_string(),
        )
        .await
    }

    async fn post_raw(&self, uri: &str, body: impl Into<Body>) -> Reply {
        self.call("POST", uri, &[("content-type", "application/json")], body)
            .await
    }

    async fn count(&self) -> usize {
        self.q
            .store()
            .list(&JobFilter {
                limit: Some(10_000),
                ..JobFilter::default()
            })
            .await
            .unwrap()
            .len()
    }
}

#[tokio::test]
async fn healthz_answers_without_a_token() {
    let api = Api::with_token();
    let r = api.get("/healthz").await;
    assert_eq!((r.status, &r.body), (StatusCode::OK, &json!({"ok": true})));
    assert_eq!(r.headers[header::CONTENT_TYPE], "application/json");
    assert_eq!(r.headers[header::CACHE_CONTROL], "no-store");
}

#[tokio::test]
async fn enqueue_creates_once_per_id_and_a_retry_gets_the_same_job() {
    let api = Api::new();
    let body = json!({"kind": "email", "id": "order-17", "payload": {"to": "a@example.com"}});
    let first = api.post("/v1/jobs", &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    assert_eq!(first.body["created"], true);
    let job = &first.body["job"];
    assert_eq!(
        (&job["id"], &job["kind"], &job["queue"], &job["state"]),
        (
            &json!("order-17"),
            &json!("email"),
            &json!("default"),
            &json!("ready")
        )
    );
    assert_eq!(job["payload"], json!({"to": "a@example.com"}));

    // The client lost the answer and retries — even with a different body.
    let retry = api
        .post(
            "/v1/jobs",
            &json!({"kind": "email", "id": "order-17", "payload": {"to": "b"}}),
        )
        .await;
    assert_eq!(retry.status, StatusCode::OK, "{}", retry.body);
    assert_eq!(retry.body["created"], false);
    assert_eq!(
        retry.body["job"], first.body["job"],
        "the stored job, unchanged"
    );
    assert_eq!(api.count().await, 1);
}

#[tokio::test]
async fn enqueue_takes_every_field_the_cli_takes() {
    let api = Api::new();
    let r = api.post("/v1/jobs", &json!({"kind": "k"})).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        r.body["job"]["payload"],
        json!({}),
        "the CLI's default payload"
    );
    assert!(
        r.body["job"]["id"]
            .as_str()
            .is_some_and(|id| id.len() == 36)
    );

    let r = api
        .post("/v1/jobs", &json!({"kind": "k", "payload": null}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert_eq!(
        r.body["job"]["payload"],
        Value::Null,
        "an explicit null is kept"
    );

    let r = api
        .post(
            "/v1/jobs",
            &json!({
                "kind": "report", "queue": "slow", "id": "r-1", "payload": [1, "two", {"three": 3}],
                "delay": "5m", "max_attempts": 3, "max_lease_expiries": 2, "give_up_after": "1h",
                "priority": -7, "key": "tenant-7", "key_limit": 2,
            }),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let j = &r.body["job"];
    assert_eq!(
        (
            &j["queue"],
            &j["max_attempts"],
            &j["max_lease_expiries"],
            &j["priority"]
        ),
        (&json!("slow"), &json!(3), &json!(2), &json!(-7))
    );
    assert_eq!(j["payload"], json!([1, "two", {"three": 3}]));
    assert_eq!(
        j["available_at"], "2026-01-01T00:05:00.000Z",
        "5m after the test clock"
    );
    assert_eq!(
        j["key"],
        json!({"name": "tenant-7", "ordered": false, "limit": 2})
    );

    let r = api
        .post(
            "/v1/jobs",
            &json!({"kind": "k", "run_at": "2026-11-30T14:05:00+01:00", "key": "t", "ordered": true}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["job"]["available_at"], "2026-11-30T13:05:00.000Z");
    assert_eq!(r.body["job"]["key"]["ordered"], true);
    assert_eq!(api.count().await, 4);
}

#[tokio::test]
async fn show_returns_the_job_with_history_and_audit() {
    let api = Api::new();
    api.post("/v1/jobs", &json!({"kind": "k", "id": "a/b+c=d@e:f"}))
        .await;
    let r = api.get("/v1/jobs/a%2Fb+c=d@e:f").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["id"], "a/b+c=d@e:f");
    assert_eq!(r.body["history"], json!([]));
    assert_eq!(r.body["audit"], json!([]));

    api.get("/v1/jobs/missing")
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
    for bad in [
        "/v1/jobs/nul%00byte",
        "/v1/jobs/has%20space",
        "/v1/jobs/%FF%FE",
    ] {
        api.get(bad)
            .await
            .problem(StatusCode::BAD_REQUEST, "invalid");
    }
    let long = format!("/v1/jobs/{}", "x".repeat(201));
    api.get(&long)
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
}

#[tokio::test]
async fn list_filters_and_pages_by_the_last_id() {
    let api = Api::new();
    for i in 0..5 {
        let queue = if i % 2 == 0 { "even" } else { "odd" };
        let r = api
            .post(
                "/v1/jobs",
                &json!({"kind": "k", "id": format!("j{i}"), "queue": queue}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED);
    }
    let all = api.get("/v1/jobs").await;
    assert_eq!(all.status, StatusCode::OK);
    assert_eq!(all.body["jobs"].as_array().map(Vec::len), Some(5));
    assert_eq!(
        all.body["next"],
        Value::Null,
        "a page that is not full is the last"
    );

    let mut seen = Vec::new();
    let mut uri = "/v1/jobs?limit=2".to_owned();
    loop {
        let page = api.get(&uri).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        for j in page.body["jobs"].as_array().unwrap() {
            seen.push(j["id"].as_str().unwrap().to_owned());
        }
        match page.body["next"].as_str() {
            Some(next) => uri = format!("/v1/jobs?limit=2&after={next}"),
            None => break,
        }
    }
    assert_eq!(seen, ["j0", "j1", "j2", "j3", "j4"]);

    let even = api
        .get("/v1/jobs?queue=even&state=ready&kind=k&state=")
        .await;
    // A repeated parameter is refused rather than guessed at.
    even.problem(StatusCode::BAD_REQUEST, "malformed_json");
    let even = api
        .get("/v1/jobs?queue=even&state=ready&kind=k&after=")
        .await;
    assert_eq!(even.status, StatusCode::OK, "{}", even.body);
    assert_eq!(even.body["jobs"].as_array().map(Vec::len), Some(3));
    let none = api.get("/v1/jobs?state=dead").await;
    assert_eq!(none.body["jobs"], json!([]));

    for (uri, code) in [
        ("/v1/jobs?state=stuck", "invalid"),
        ("/v1/jobs?limit=0", "invalid"),
        ("/v1/jobs?limit=10001", "invalid"),
        ("/v1/jobs?limit=ten", "invalid"),
        ("/v1/jobs?queue=bad%20queue", "invalid"),
        ("/v1/jobs?kind=k%00", "invalid"),
        ("/v1/jobs?after=a%20b", "invalid"),
        ("/v1/jobs?colour=red", "malformed_json"),
    ] {
        api.get(uri).await.problem(StatusCode::BAD_REQUEST, code);
    }
    api.get("/v1/jobs?after=nope")
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
}

/// `meta` and `where` search the listing, each repeatable; a search page
/// says how many jobs it read and whether it stopped at `scan`, and its
/// `next` reads on; bad terms are refused with how to write them.
#[tokio::test]
async fn list_searches_by_metadata_and_payload_fields() {
    let api = Api::new();
    for i in 0..6 {
        let tenant = if i % 2 == 0 { "acme" } else { "globex" };
        let body = json!({"kind": "k", "id": format!("j{i}"), "payload": {"customer": i % 3, "name": format!("c {i}")},
                          "meta": {"tenant": tenant, "region": "eu"}});
        assert_eq!(
            api.post("/v1/jobs", &body).await.status,
            StatusCode::CREATED
        );
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    let ids = |r: &Reply| -> Vec<String> {
        r.body["jobs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let r = api
        .get("/v1/jobs?meta=tenant%3Dacme&meta=region%3Deu&where=payload.customer%3D1")
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(ids(&r), ["j4"]);
    assert_eq!(r.body["stopped"], json!(false));
    assert_eq!(r.body["next"], Value::Null);
    assert!(r.body["scanned"].as_u64().unwrap() >= 1);
    let r = api
        .get("/v1/jobs?where=payload.name%3D%22c%205%22&scan=2")
        .await;
    assert_eq!(ids(&r), Vec::<String>::new());
    assert_eq!(r.body["stopped"], json!(true));
    assert_eq!(r.body["scanned"], json!(2));
    assert_eq!(r.body["next"], json!("j1"));
    let r = api
        .get("/v1/jobs?where=payload.name%3D%22c%205%22&after=j1")
        .await;
    assert_eq!(ids(&r), ["j5"]);
    // A plain listing carries neither field.
    let r = api.get("/v1/jobs?limit=1").await;
    assert!(
        r.body.get("scanned").is_none() && r.body.get("stopped").is_none(),
        "{}",
        r.body
    );
    for (uri, code, says) in [
        (
            "/v1/jobs?where=customer%3D1",
            "invalid",
            "payload.PATH=VALUE",
        ),
        (
            "/v1/jobs?where=payload.a%3B1%3D2",
            "invalid",
            "payload.PATH=VALUE",
        ),
        ("/v1/jobs?meta=tenant", "invalid", "KEY=VALUE"),
        ("/v1/jobs?meta=a%3D1&meta=a%3D2", "invalid", "twice"),
        ("/v1/jobs?scan=5", "invalid", "scan bounds a search"),
        (
            "/v1/jobs?where=payload.a%3D1&scan=0",
            "invalid",
            "from 1 to",
        ),
        (
            "/v1/jobs?where=payload.a%3D1&scan=lots",
            "invalid",
            "whole number",
        ),
        ("/v1/jobs?scan=1&scan=2", "malformed_json", "twice"),
    ] {
        let r = api.get(uri).await;
        r.problem(StatusCode::BAD_REQUEST, code);
        assert!(r.body.to_string().contains(says), "{uri}: {}", r.body);
    }
}

#[tokio::test]
async fn cancel_then_replay_with_operator_and_reason_in_the_audit_log() {
    let api = Api::new();
    api.post("/v1/jobs", &json!({"kind": "k", "id": "p1"}))
        .await;

    let r = api
        .post(
            "/v1/jobs/p1/replay",
            &json!({"operator": "alice", "reason": "why not"}),
        )
        .await;
    r.problem(StatusCode::CONFLICT, "invalid_state");
    assert!(r.body["detail"].as_str().unwrap().contains("ready"));

    let r = api
        .post("/v1/jobs/p1/cancel", &json!({"operator": "bob"}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["job"]["state"], "cancelled");
    api.post(
        "/v1/jobs/p1/cancel",
        &json!({"operator": "bob", "reason": "again"}),
    )
    .await
    .problem(StatusCode::CONFLICT, "invalid_state");

    let r = api
        .post(
            "/v1/jobs/p1/replay",
            &json!({"operator": "alice", "reason": "customer asked again\nticket 42"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["job"]["state"], "ready");

    // The body's operator and reason (a line break allowed) reach the
    // entries; what each entry holds is conformance's.
    let audit = api.get("/v1/jobs/p1").await.body["audit"].clone();
    assert_eq!(audit[0]["operator"], "bob");
    assert_eq!(audit[1]["operator"], "alice");
    assert_eq!(audit[1]["reason"], "customer asked again\nticket 42");

    for route in ["replay", "cancel"] {
        api.post(
            &format!("/v1/jobs/missing/{route}"),
            &json!({"operator": "a", "reason": "r"}),
        )
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
        api.post(
            &format!("/v1/jobs/bad%00id/{route}"),
            &json!({"operator": "a", "reason": "r"}),
        )
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    }
}

#[tokio::test]
async fn reschedule_moves_a_waiting_job_and_refuses_one_that_is_not() {
    let api = Api::new();
    api.post("/v1/jobs", &json!({"kind": "k", "id": "w1", "delay": "1h"}))
        .await;
    let r = api
        .post(
            "/v1/jobs/w1/reschedule",
            &json!({"operator": "alice", "reason": "customer waiting", "now": true, "priority": 5}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["job"]["priority"], 5);
    assert_eq!(r.body["job"]["state"], "ready");
    // now, priority and reason reach the request (the entry's wording is
    // conformance's `a_waiting_job_is_rescheduled_all_or_none_and_audited`).
    let r = api.get("/v1/jobs/w1").await;
    assert_eq!(
        r.body["audit"][0]["reason"],
        "run now, priority 5: customer waiting"
    );
    // Two due times, or no change at all: refused, nothing written.
    api.post(
        "/v1/jobs/w1/reschedule",
        &json!({"operator": "alice", "delay": "1s", "run_at": "2026-12-24T08:00:00Z"}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "invalid");
    api.post("/v1/jobs/w1/reschedule", &json!({"operator": "alice"}))
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    // A cancelled job is not waiting.
    api.post("/v1/jobs/w1/cancel", &json!({"operator": "bob"}))
        .await;
    api.post(
        "/v1/jobs/w1/reschedule",
        &json!({"operator": "alice", "priority": 1}),
    )
    .await
    .problem(StatusCode::CONFLICT, "invalid_state");
}

#[tokio::test]
async fn replay_and_cancel_need_an_operator_and_replay_a_reason() {
    let api = Api::new();
    api.post("/v1/jobs", &json!({"kind": "k", "id": "p1"}))
        .await;
    let bad = [
        ("replay", json!({"operator": "alice"})),
        ("replay", json!({"reason": "r"})),
        ("replay", json!({"operator": "", "reason": "r"})),
        ("replay", json!({"operator": "alice", "reason": "  "})),
        ("replay", json!({"operator": "al\u{0}ice", "reason": "r"})),
        ("replay", json!({"operator": "alice", "reason": "r\u{0}"})),
        (
            "replay",
            json!({"operator": "x".repeat(201), "reason": "r"}),
        ),
        (
            "replay",
            json!({"operator": "a", "reason": "r", "dry_run": true}),
        ),
        ("cancel", json!({})),
        ("cancel", json!({"operator": " "})),
        ("cancel", json!({"operator": "a\nb"})),
        ("cancel", json!({"operator": 7})),
        ("cancel", json!({"operator": "a", "reason": ""})),
    ];
    for (route, body) in bad {
        let r = api.post(&format!("/v1/jobs/p1/{route}"), &body).await;
        assert_eq!(
            r.status,
            StatusCode::BAD_REQUEST,
            "{route} {body}: {}",
            r.body
        );
        assert!(
            ["invalid", "malformed_json"].contains(&r.code()),
            "{}",
            r.body
        );
    }
    let shown = api.get("/v1/jobs/p1").await;
    assert_eq!(shown.body["state"], "ready");
    assert_eq!(shown.body["audit"], json!([]), "nothing was written");
}

#[tokio::test]
async fn hostile_bodies_are_refused_with_400_and_write_nothing() {
    let api = Api::new();
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_payload = format!(r#"{{"kind":"k","payload":{deep}}}"#);
    let nested_129 = format!(
        r#"{{"kind":"k","payload":{}1{}}}"#,
        "[".repeat(129),
        "]".repeat(129)
    );
    let cases: Vec<(&str, Vec<u8>, &str, &str)> = vec![
        (
            "not JSON",
            b"{nope".to_vec(),
            "malformed_json",
            "not valid JSON",
        ),
        ("empty", Vec::new(), "malformed_json", "empty"),
        ("an array", b"[]".to_vec(), "malformed_json", "expected"),
        (
            "trailing garbage",
            br#"{"kind":"k"} x"#.to_vec(),
            "malformed_json",
            "trailing",
        ),
        (
            "invalid UTF-8",
            b"{\"kind\":\"k\xff\"}".to_vec(),
            "malformed_json",
            "JSON",
        ),
        (
            "no kind",
            br#"{"queue":"q"}"#.to_vec(),
            "malformed_json",
            "kind",
        ),
        (
            "kind is a number",
            br#"{"kind":5}"#.to_vec(),
            "malformed_json",
            "invalid type",
        ),
        (
            "unknown field",
            br#"{"kind":"k","colour":"red"}"#.to_vec(),
            "malformed_json",
            "unknown field `colour`",
        ),
        (
            "duplicate field",
            br#"{"kind":"k","kind":"j"}"#.to_vec(),
            "malformed_json",
            "duplicate field",
        ),
        (
            "deep nesting",
            deep_payload.into_bytes(),
            "invalid",
            "nested more than 128",
        ),
        (
            "129 levels",
            nested_129.into_bytes(),
            "invalid",
            "nested more than 128",
        ),
        (
            "NUL in kind",
            br#"{"kind":"k\u0000"}"#.to_vec(),
            "invalid",
            "kind name",
        ),
        (
            "NUL in queue",
            br#"{"kind":"k","queue":"q\u0000"}"#.to_vec(),
            "invalid",
            "queue name",
        ),
        (
            "NUL in id",
            br#"{"kind":"k","id":"a\u0000b"}"#.to_vec(),
            "invalid",
            "job id",
        ),
        (
            "bad id",
            br#"{"kind":"k","id":"has space"}"#.to_vec(),
            "invalid",
            "job id",
        ),
        (
            "empty id",
            br#"{"kind":"k","id":""}"#.to_vec(),
            "invalid",
            "job id",
        ),
        (
            "empty kind",
            br#"{"kind":""}"#.to_vec(),
            "invalid",
            "kind name",
        ),
        (
            "zero attempts",
            br#"{"kind":"k","max_attempts":0}"#.to_vec(),
            "invalid",
            "max attempts",
        ),
        (
            "negative attempts",
            br#"{"kind":"k","max_attempts":-1}"#.to_vec(),
            "malformed_json",
            "invalid value",
        ),
        (
            "priority out of range",
            br#"{"kind":"k","priority":40000}"#.to_vec(),
            "malformed_json",
            "invalid value",
        ),
        (
            "fractional priority",
            br#"{"kind":"k","priority":1.5}"#.to_vec(),
            "malformed_json",
            "invalid type",
        ),
        (
            "bad delay",
            br#"{"kind":"k","delay":"soon"}"#.to_vec(),
            "invalid",
            "not a duration",
        ),
        (
            "zero delay",
            br#"{"kind":"k","delay":"0s"}"#.to_vec(),
            "invalid",
            "longer than zero",
        ),
        (
            "delay as a number",
            br#"{"kind":"k","delay":5}"#.to_vec(),
            "malformed_json",
            "invalid type",
        ),
        (
            "delay and run_at",
            br#"{"kind":"k","delay":"5s","run_at":"2026-11-30T14:05:00Z"}"#.to_vec(),
            "invalid",
            "not both",
        ),
        (
            "bad run_at",
            br#"{"kind":"k","run_at":"tomorrow"}"#.to_vec(),
            "invalid",
            "RFC 3339",
        ),
        (
            "key limit without a key",
            br#"{"kind":"k","key_limit":2}"#.to_vec(),
            "invalid",
            "key",
        ),
        (
            "NUL in key",
            br#"{"kind":"k","key":"t\u0000"}"#.to_vec(),
            "invalid",
            "control",
        ),
        (
            "ordered and a limit",
            br#"{"kind":"k","key":"t","key_limit":2,"ordered":true}"#.to_vec(),
            "invalid",
            "not both",
        ),
    ];
    for (what, body, code, needle) in cases {
        let r = api.post_raw("/v1/jobs", body).await;
        assert_eq!(r.code(), code, "{what}: {}", r.body);
        r.problem(StatusCode::BAD_REQUEST, code);
        let detail = r.body["detail"].as_str().unwrap();
        assert!(detail.contains(needle), "{what}: {detail}");
        assert_eq!(api.count().await, 0, "{what} wrote a job");
    }

    let form = api
        .call(
            "POST",
            "/v1/jobs",
            &[("content-type", "application/x-www-form-urlencoded")],
            "kind=k",
        )
        .await;
    form.problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    let untyped = api.call("POST", "/v1/jobs", &[], r#"{"kind":"k"}"#).await;
    assert_eq!(
        untyped.status,
        StatusCode::CREATED,
        "a body without a content type is read as JSON"
    );
    let ld = api
        .call(
            "POST",
            "/v1/jobs",
            &[("content-type", "application/ld+json; charset=utf-8")],
            r#"{"kind":"k"}"#,
        )
        .await;
    assert_eq!(ld.status, StatusCode::CREATED);
}

#[tokio::test]
async fn oversized_bodies_and_payloads_are_refused_before_writing() {
    let api = Api::new();
    let big = format!(r#"{{"kind":"k","payload":"{}"}}"#, "x".repeat(1024 * 1024));
    let r = api.post_raw("/v1/jobs", big.clone()).await;
    r.problem(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");
    assert!(r.body["detail"].as_str().unwrap().contains("1048576"));
    // Without a Content-Length (chunked), the limit holds all the same.
    let chunks = futures_chunks(big.into_bytes());
    let r = api
        .call(
            "POST",
            "/v1/jobs",
            &[("content-type", "application/json")],
            chunks,
        )
        .await;
    r.problem(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");
    assert_eq!(api.count().await, 0);

    let api = Api::with(ServerConfig {
        max_body: 4096,
        max_payload: 100,
        ..ServerConfig::default()
    });
    let r = api
        .post(
            "/v1/jobs",
            &json!({"kind": "k", "payload": "y".repeat(200)}),
        )
        .await;
    r.problem(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    let r = api
        .post(
            "/v1/jobs",
            &json!({"kind": "k", "payload": "y".repeat(5000)}),
        )
        .await;
    r.problem(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");
    let r = api
        .post("/v1/jobs/x/cancel", &json!({"operator": "y".repeat(5000)}))
        .await;
    r.problem(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");
    assert_eq!(api.count().await, 0);
    let r = api
        .post("/v1/jobs", &json!({"kind": "k", "payload": "y".repeat(90)}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED);
}

/// A streaming body without a length, in 64 KiB pieces.
fn futures_chunks(bytes: Vec<u8>) -> Body {
    let chunks: Vec<Result<Vec<u8>, std::io::Error>> =
        bytes.chunks(64 * 1024).map(|c| Ok(c.to_vec())).collect();
    Body::from_stream(futures_util::stream::iter(chunks))
}

#[tokio::test]
async fn with_a_token_every_route_but_healthz_needs_it() {
    let api = Api::with_token();
    let bearer = format!("Bearer {TOKEN}");
    let routes = [
        ("POST", "/v1/jobs", r#"{"kind":"k","id":"t1"}"#),
        ("GET", "/v1/jobs", ""),
        ("GET", "/v1/jobs/t1", ""),
        ("POST", "/v1/jobs/t1/cancel", r#"{"operator":"a"}"#),
        (
            "POST",
            "/v1/jobs/t1/replay",
            r#"{"operator":"a","reason":"r"}"#,
        ),
        ("GET", "/v1/nothing-here", ""),
        ("DELETE", "/v1/jobs", ""),
    ];
    let wrong = [
        vec![],
        vec![("authorization", "Bearer wrong")],
        vec![("authorization", "Bearer ")],
        vec![("authorization", "Basic dGVzdDp0ZXN0")],
        vec![("authorization", TOKEN)],
        vec![("authorization", &bearer[..bearer.len() - 1])],
        vec![("authorization", "Bearer test-token-0123456789abcdeF")],
    ];
    for (method, uri, body) in routes {
        for headers in &wrong {
            let r = api.call(method, uri, headers, body).await;
            r.problem(StatusCode::UNAUTHORIZED, "unauthorized");
            assert_eq!(
                r.headers[header::WWW_AUTHENTICATE],
                r#"Bearer realm="errand""#
            );
        }
    }
    let two = Request::post("/v1/jobs")
        .header("authorization", &bearer)
        .header("authorization", "Bearer other")
        .body(Body::from(r#"{"kind":"k"}"#))
        .unwrap();
    api.send(two)
        .await
        .problem(StatusCode::UNAUTHORIZED, "unauthorized");
    assert_eq!(api.count().await, 0);

    let auth = [
        ("authorization", bearer.as_str()),
        ("host", "jobs.example.com"),
    ];
    let expected = [201, 200, 200, 200, 200, 404, 405];
    for ((method, uri, body), status) in routes.into_iter().zip(expected) {
        let r = api.call(method, uri, &auth, body).await;
        assert_eq!(r.status.as_u16(), status, "{method} {uri}: {}", r.body);
    }
    let lower = api
        .call(
            "GET",
            "/v1/jobs",
            &[("authorization", &format!("bearer  {TOKEN} "))],
            "",
        )
        .await;
    assert_eq!(
        lower.status,
        StatusCode::OK,
        "the scheme is case-insensitive"
    );
    assert_eq!(api.get("/healthz").await.status, StatusCode::OK);
}

#[tokio::test]
async fn browsers_are_refused_before_anything_is_read_or_written() {
    for api in [Api::new(), Api::with_token()] {
        let bearer = format!("Bearer {TOKEN}");
        for browser in [
            ("origin", "https://evil.example"),
            ("origin", "null"),
            ("origin", "http://127.0.0.1:7878"),
            ("sec-fetch-site", "same-origin"),
            ("sec-fetch-mode", "cors"),
        ] {
            for (method, uri, body) in [
                ("POST", "/v1/jobs", r#"{"kind":"k"}"#),
                ("GET", "/v1/jobs", ""),
                ("GET", "/v1/jobs/x", ""),
                (
                    "POST",
                    "/v1/jobs/x/replay",
                    r#"{"operator":"a","reason":"r"}"#,
                ),
                ("POST", "/v1/jobs/x/cancel", r#"{"operator":"a"}"#),
                ("POST", "/v1/jobs", "{broken"),
            ] {
                let headers = [
                    browser,
                    ("authorization", bearer.as_str()),
                    ("content-type", "application/json"),
                ];
                let r = api.call(method, uri, &headers, body).await;
                r.problem(StatusCode::FORBIDDEN, "browser_origin_refused");
            }
        }
        let big = "x".repeat(2 * 1024 * 1024);
        let r = api
            .call(
                "POST",
                "/v1/jobs",
                &[("origin", "https://evil.example")],
                big,
            )
            .await;
        r.problem(StatusCode::FORBIDDEN, "browser_origin_refused");
        assert_eq!(api.count().await, 0);
        let r = api
            .call("GET", "/healthz", &[("origin", "https://evil.example")], "")
            .await;
        assert_eq!(
            r.status,
            StatusCode::OK,
            "healthz says only that the process is up"
        );
    }
}

#[tokio::test]
async fn without_a_token_only_loopback_host_names_are_answered() {
    let api = Api::new();
    for host in [
        "evil.example",
        "evil.example:7878",
        "10.0.0.7:7878",
        "127.0.0.1.nip.io",
    ] {
        let r = api
            .call("POST", "/v1/jobs", &[("host", host)], r#"{"kind":"k"}"#)
            .await;
        r.problem(StatusCode::FORBIDDEN, "host_refused");
    }
    let absolute = api
        .call(
            "GET",
            "http://evil.example/v1/jobs",
            &[("host", "127.0.0.1")],
            "",
        )
        .await;
    absolute.problem(StatusCode::FORBIDDEN, "host_refused");
    assert_eq!(api.count().await, 0);
    for host in ["127.0.0.1:7878", "localhost:7878", "[::1]:7878"] {
        let r = api
            .call("POST", "/v1/jobs", &[("host", host)], r#"{"kind":"k"}"#)
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{host}: {}", r.body);
    }
}

#[tokio::test]
async fn unknown_routes_and_methods_are_problems_too() {
    let api = Api::new();
    api.get("/nope")
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
    api.get("/v1/jobs/")
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
    api.call("DELETE", "/v1/jobs/x", &[], "")
        .await
        .problem(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
    api.call("PUT", "/v1/jobs", &[], "")
        .await
        .problem(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed");
}

#[test]
fn library_errors_map_one_to_one_onto_status_codes() {
    use errand::Error as E;
    let cases = [
        (E::invalid("bad"), 400, "invalid"),
        (E::NotFound("x".into()), 404, "not_found"),
        (E::NoSuchWorkflow("w".into()), 404, "not_found"),
        (E::NoSuchBatch("b".into()), 404, "not_found"),
        (E::NoSuchSchedule("s".into()), 404, "not_found"),
        (
            E::InvalidState {
                id: "x".into(),
                state: "done".into(),
                hint: "h".into(),
            },
            409,
            "invalid_state",
        ),
        (
            E::LeaseLost {
                id: "x".into(),
                attempt: 1,
            },
            409,
            "lease_lost",
        ),
        (E::Busy("locked".into()), 503, "busy"),
        (E::StorageFull("disk".into()), 507, "storage_full"),
        (E::NotADatabase("gone.db".into()), 503, "not_a_database"),
        (E::NotErrand("other.db".into()), 503, "not_errand"),
        (E::SchemaOutdated("v1".into()), 503, "schema_outdated"),
        (E::SchemaTooNew("v9".into()), 503, "schema_too_new"),
        (
            E::SchemaUnreleased("old.db".into()),
            503,
            "schema_unreleased",
        ),
        (E::Closed("writer".into()), 503, "closed"),
        (E::storage("SELECT secret"), 500, "storage"),
    ];
    for (e, status, code) in cases {
        let p = Problem::from(e);
        assert_eq!((p.status.as_u16(), p.code), (status, code));
        assert!(
            !p.detail.contains("SELECT"),
            "storage internals stay in the log"
        );
    }
    // A missing workflow, batch or schedule is named, not a storage error.
    for e in [
        E::NoSuchWorkflow("w-1".into()),
        E::NoSuchBatch("b-1".into()),
        E::NoSuchSchedule("nightly".into()),
    ] {
        let name = e.to_string();
        let p = Problem::from(e);
        assert_eq!((p.title, p.detail.as_str()), ("Not found", name.as_str()));
    }
    let busy = axum::response::IntoResponse::into_response(Problem::from(E::Busy("x".into())));
    assert_eq!(busy.headers()[header::RETRY_AFTER], "1");
}

#[test]
fn non_loopback_addresses_need_a_token() {
    let open = ServerConfig {
        bind: "0.0.0.0:7878".parse().unwrap(),
        ..ServerConfig::default()
    };
    let err = open.check().unwrap_err();
    assert!(matches!(err, ServeError::TokenRequired { .. }) && err.is_config());
    assert!(err.to_string().contains("ERRAND_TOKEN"));
    for bind in ["192.168.1.4:80", "[::]:7878", "[2001:db8::1]:7878"] {
        let c = ServerConfig {
            bind: bind.parse().unwrap(),
            ..ServerConfig::default()
        };
        assert!(c.check().is_err(), "{bind}");
    }
    let with_token = ServerConfig {
        token: Some(AccessToken::new(TOKEN).unwrap()),
        ..open
    };
    assert!(with_token.check().is_ok());
    for bind in [
        "127.0.0.1:7878",
        "127.0.0.9:1",
        "[::1]:7878",
        "[::ffff:127.0.0.1]:7878",
    ] {
        let c = ServerConfig {
            bind: bind.parse().unwrap(),
            ..ServerConfig::default()
        };
        assert!(c.check().is_ok(), "{bind}");
    }
}

#[tokio::test]
async fn a_bound_server_reports_its_port_and_stops_when_asked() {
    let q = TestQueue::new().unwrap();
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        ..ServerConfig::default()
    };
    let server = Server::bind(q.store(), config).await.unwrap();
    let addr = server.local_addr();
    assert_ne!(addr.port(), 0);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    drop(stream);
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), running)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let refused = Server::bind(
        q.store(),
        ServerConfig {
            bind: "0.0.0.0:0".parse().unwrap(),
            ..ServerConfig::default()
        },
    )
    .await;
    assert!(matches!(refused, Err(ServeError::TokenRequired { .. })));
}

#[tokio::test]
async fn an_enqueue_joins_the_requests_trace_unless_the_body_names_one() {
    let api = Api::new();
    let header_tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    let body_tp = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let post = |id: &str, body_field: Option<&str>, header: Option<&str>| {
        let mut body = json!({"kind": "k", "id": id});
        if let Some(tp) = body_field {
            body["traceparent"] = json!(tp);
        }
        let mut headers = vec![("content-type", "application/json")];
        if let Some(h) = header {
            headers.push(("traceparent", h));
        }
        let headers: Vec<(&str, String)> = headers
            .into_iter()
            .map(|(k, v)| (k, v.to_owned()))
            .collect();
        (body, headers)
    };
    for (id, field, header, stored) in [
        ("from-header", None, Some(header_tp), Some(header_tp)),
        ("from-body", Some(body_tp), Some(header_tp), Some(body_tp)),
        ("bad-header", None, Some("00-zz-yy-01"), None),
        ("none", None, None, None),
    ] {
        let (body, headers) = post(id, field, header);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let r = api
            .call("POST", "/v1/jobs", &headers, body.to_string())
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{id}: {}", r.body);
        let job = api
            .q
            .store()
            .get(&errand::JobId::new(id).unwrap())
            .await
            .unwrap();
        assert_eq!(job.traceparent.as_ref().map(|t| t.as_str()), stored, "{id}");
    }
    // A malformed traceparent in the body is refused and writes nothing.
    let r = api
        .post(
            "/v1/jobs",
            &json!({"kind": "k", "id": "bad-body", "traceparent": "00-zz-yy-01"}),
        )
        .await;
    r.problem(StatusCode::BAD_REQUEST, "invalid");
    assert_eq!(api.count().await, 4);
}

/// A listing is bounded by bytes as well as rows: however high the limit,
/// a page ends after the job that spends its byte budget and hands back
/// `next`, so a page of large payloads stays near 4 MiB instead of growing
/// with the limit; following `next` lists every job once.
#[tokio::test]
async fn a_page_of_large_payloads_stops_at_its_byte_budget_and_hands_back_next() {
    let api = Api::new();
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(900 * 1024));
    for i in 0..10 {
        let job = errand::NewJob::new("k", errand::Payload::from_json_text(big.clone()).unwrap())
            .unwrap()
            .with_id(errand::JobId::new(format!("big-{i}")).unwrap());
        api.q.store().insert(job).await.unwrap();
        api.q.advance(Duration::from_millis(1));
    }
    let mut seen = Vec::new();
    let mut uri = "/v1/jobs?limit=10000".to_owned();
    let mut pages = 0;
    loop {
        let response = api
            .app
            .clone()
            .oneshot(
                Request::get(uri.as_str())
                    .header(header::HOST, "127.0.0.1")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let bytes = axum::body::to_bytes(response.into_body(), 64 * 1024 * 1024)
            .await
            .unwrap();
        let budget = errand::core::DEFAULT_PAGE_BYTES;
        assert!(
            bytes.len() < budget + 1024 * 1024 + 64 * 1024,
            "page {pages}: {} bytes for a {budget}-byte budget",
            bytes.len()
        );
        let page: Value = serde_json::from_slice(&bytes).unwrap();
        pages += 1;
        for j in page["jobs"].as_array().unwrap() {
            seen.push(j["id"].as_str().unwrap().to_owned());
        }
        match page["next"].as_str() {
            Some(next) => uri = format!("/v1/jobs?limit=10000&after={next}"),
            None => break,
        }
    }
    let all: Vec<String> = (0..10).map(|i| format!("big-{i}")).collect();
    assert_eq!(seen, all);
    assert!(
        pages >= 3,
        "ten 900 KiB payloads take at least 3 pages of 4 MiB: {pages}"
    );
}
