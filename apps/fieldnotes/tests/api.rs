#![allow(clippy::unwrap_used)]
//! The HTTP API, driven in-process through the router (no socket).

use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode};
use errand::{JobId, JobState, JobStore, SqliteStore, Store};
use fieldnotes::app;
use fieldnotes::http::{BODY_LIMIT, IDEMPOTENT_REPLAYED, router};
use rusqlite::Connection;
use serde_json::{Value, json};
use tower::ServiceExt;

struct Api {
    _dir: tempfile::TempDir,
    path: PathBuf,
    store: SqliteStore,
    router: Router,
}

impl Api {
    fn new() -> Api {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("api.sqlite");
        app::init(&path).unwrap();
        let store = app::open(&path).unwrap();
        let router = router(store.clone());
        Api {
            _dir: dir,
            path,
            store,
            router,
        }
    }

    fn conn(&self) -> Connection {
        Connection::open(&self.path).unwrap()
    }

    fn scalar(&self, sql: &str) -> i64 {
        self.conn().query_row(sql, [], |r| r.get(0)).unwrap()
    }

    fn balance(&self) -> i64 {
        self.scalar("SELECT balance_cents FROM authors")
    }

    fn jobs(&self) -> i64 {
        self.scalar("SELECT count(*) FROM errand_jobs")
    }

    fn payments(&self) -> i64 {
        self.scalar("SELECT count(*) FROM payments")
    }

    async fn send(&self, req: Request<Body>) -> (StatusCode, HeaderMap, Value) {
        send(self.router.clone(), req).await
    }

    async fn pay(&self, document_id: &str) -> (StatusCode, HeaderMap, Value) {
        self.send(payment(document_id, None)).await
    }
}

async fn send(router: Router, req: Request<Body>) -> (StatusCode, HeaderMap, Value) {
    let res = router.oneshot(req).await.unwrap();
    let (parts, body) = res.into_parts();
    let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let value = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)))
    };
    (parts.status, parts.headers, value)
}

fn post() -> axum::http::request::Builder {
    Request::builder()
        .method(Method::POST)
        .uri("/payments")
        .header("content-type", "application/json")
}

fn payment(document_id: &str, key: Option<&str>) -> Request<Body> {
    let mut b = post();
    if let Some(k) = key {
        b = b.header("idempotency-key", k);
    }
    b.body(Body::from(
        json!({ "document_id": document_id }).to_string(),
    ))
    .unwrap()
}

fn get(uri: &str) -> Request<Body> {
    Request::builder().uri(uri).body(Body::empty()).unwrap()
}

fn assert_error(status: StatusCode, body: &Value, want: StatusCode, code: &str) {
    assert_eq!(status, want, "{body}");
    assert_eq!(body["error"], code, "{body}");
    assert!(
        body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{body}"
    );
}

#[tokio::test]
async fn documents_and_wallet_are_listed() {
    let api = Api::new();
    let (status, _, body) = api.send(get("/wallet")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["balance_cents"], 10_000);
    let (status, _, body) = api.send(get("/documents")).await;
    assert_eq!(status, StatusCode::OK);
    let docs = body["documents"].as_array().unwrap();
    let ids: Vec<&str> = docs.iter().map(|d| d["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["document-7", "document-8"]);
    assert!(
        docs.iter()
            .all(|d| d["price_cents"] == 500 && d["published"] == false)
    );
}

#[tokio::test]
async fn a_payment_commits_with_its_receipt_job() {
    let api = Api::new();
    let (status, _, body) = api.pay("document-7").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let id = body["payment_id"].as_str().unwrap().to_owned();
    assert_eq!(body["job_id"], id.as_str());
    assert_eq!(body["balance_cents"], 9_500);
    assert_eq!(body["amount_cents"], 500);

    // The job exists with the payment's id, in the same commit as the rest.
    let job = api
        .store
        .get(&JobId::new(id.clone()).unwrap())
        .await
        .unwrap();
    assert_eq!(job.state, JobState::Ready);
    assert_eq!(job.kind.as_str(), "receipt");
    assert_eq!(job.max_attempts, 3);
    let payload: Value = serde_json::from_str(job.payload.as_str()).unwrap();
    assert_eq!(payload["payment_id"], id.as_str());
    assert_eq!(payload["document_id"], "document-7");
    assert_eq!(api.balance(), 9_500);
    assert_eq!(api.payments(), 1);
    let published: String = api
        .conn()
        .query_row(
            "SELECT payment_id FROM documents WHERE id = 'document-7' AND published_at IS NOT NULL",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(published, id);
    let (_, _, wallet) = api.send(get("/wallet")).await;
    assert_eq!(wallet["balance_cents"], 9_500);
}

#[tokio::test]
async fn a_payment_whose_enqueue_fails_leaves_no_debit_and_no_publication() {
    let api = Api::new();
    // Make the job insert fail after the debit and the payment row.
    api.conn()
        .execute_batch(
            "CREATE TRIGGER no_jobs BEFORE INSERT ON errand_jobs
             BEGIN SELECT RAISE(ABORT, 'the queue is broken'); END",
        )
        .unwrap();
    let (status, _, body) = api.pay("document-7").await;
    assert_error(status, &body, StatusCode::INTERNAL_SERVER_ERROR, "internal");
    assert_eq!(api.balance(), 10_000);
    assert_eq!(api.payments(), 0);
    assert_eq!(
        api.scalar("SELECT count(*) FROM documents WHERE published_at IS NOT NULL"),
        0
    );
    assert_eq!(api.jobs(), 0);

    api.conn().execute_batch("DROP TRIGGER no_jobs").unwrap();
    let (status, _, _) = api.pay("document-7").await;
    assert_eq!(status, StatusCode::CREATED);
    assert_eq!(api.jobs(), 1);
}

#[tokio::test]
async fn refused_payments_leave_no_job_and_no_debit() {
    let api = Api::new();

    let (status, _, body) = api.pay("document-404").await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "unknown_document");
    assert_eq!((api.balance(), api.jobs(), api.payments()), (10_000, 0, 0));

    let (status, _, _) = api.pay("document-7").await;
    assert_eq!(status, StatusCode::CREATED);
    let (status, _, body) = api.pay("document-7").await;
    assert_error(status, &body, StatusCode::CONFLICT, "already_published");
    assert_eq!((api.balance(), api.jobs(), api.payments()), (9_500, 1, 1));

    api.conn()
        .execute("UPDATE authors SET balance_cents = 499", [])
        .unwrap();
    let (status, _, body) = api.pay("document-8").await;
    assert_error(
        status,
        &body,
        StatusCode::PAYMENT_REQUIRED,
        "insufficient_funds",
    );
    assert_eq!((api.balance(), api.jobs(), api.payments()), (499, 1, 1));
    let (_, _, docs) = api.send(get("/documents")).await;
    assert_eq!(docs["documents"][1]["published"], false);

    // Exactly enough is enough.
    api.conn()
        .execute("UPDATE authors SET balance_cents = 500", [])
        .unwrap();
    let (status, _, body) = api.pay("document-8").await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    assert_eq!(body["balance_cents"], 0);
}

#[tokio::test]
async fn any_request_with_an_origin_is_refused_before_anything_runs() {
    let api = Api::new();
    let mut req = payment("document-7", Some("k-origin"));
    req.headers_mut()
        .insert("origin", HeaderValue::from_static("https://example.com"));
    let (status, _, body) = api.send(req).await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "origin_refused");
    assert_eq!((api.balance(), api.jobs(), api.payments()), (10_000, 0, 0));
    assert_eq!(api.scalar("SELECT count(*) FROM idempotency_keys"), 0);

    for uri in ["/wallet", "/documents", "/nowhere"] {
        let req = Request::builder()
            .uri(uri)
            .header("origin", "http://127.0.0.1:4318")
            .body(Body::empty())
            .unwrap();
        let (status, _, body) = api.send(req).await;
        assert_error(status, &body, StatusCode::FORBIDDEN, "origin_refused");
    }
    // Even an oversized body is refused for its Origin first.
    let req = post()
        .header("origin", "null")
        .body(Body::from(vec![b' '; BODY_LIMIT * 2]))
        .unwrap();
    let (status, _, _) = api.send(req).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // A foreign Host (DNS rebinding) is refused too.
    let req = Request::builder()
        .uri("/wallet")
        .header("host", "attacker.example:4318")
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = api.send(req).await;
    assert_error(status, &body, StatusCode::FORBIDDEN, "host_refused");
    let req = Request::builder()
        .uri("/wallet")
        .header("host", "localhost:4318")
        .body(Body::empty())
        .unwrap();
    assert_eq!(api.send(req).await.0, StatusCode::OK);
}

#[tokio::test]
async fn a_retried_request_with_an_idempotency_key_gets_the_first_answer() {
    let api = Api::new();
    let (s1, h1, b1) = api.send(payment("document-7", Some("order-1"))).await;
    assert_eq!(s1, StatusCode::CREATED, "{b1}");
    assert!(h1.get(IDEMPOTENT_REPLAYED).is_none());
    let (s2, h2, b2) = api.send(payment("document-7", Some("order-1"))).await;
    assert_eq!(s2, s1);
    assert_eq!(b2, b1);
    assert_eq!(h2.get(IDEMPOTENT_REPLAYED).unwrap(), "true");
    assert_eq!((api.balance(), api.jobs(), api.payments()), (9_500, 1, 1));

    // Without the key the same request is a new payment attempt: refused.
    let (s3, _, b3) = api.pay("document-7").await;
    assert_error(s3, &b3, StatusCode::CONFLICT, "already_published");

    // A refusal is an answer too: it is given again for its key.
    let (s4, _, b4) = api.send(payment("document-7", Some("order-2"))).await;
    assert_eq!(s4, StatusCode::CONFLICT);
    let (s5, _, b5) = api.send(payment("document-7", Some("order-2"))).await;
    assert_eq!((s5, b5), (s4, b4));

    // Reusing a key for another document is refused and pays nothing.
    let (s6, _, b6) = api.send(payment("document-8", Some("order-1"))).await;
    assert_error(
        s6,
        &b6,
        StatusCode::UNPROCESSABLE_ENTITY,
        "idempotency_key_reused",
    );
    assert_eq!((api.balance(), api.jobs(), api.payments()), (9_500, 1, 1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_retries_with_one_key_pay_once() {
    let api = Api::new();
    let mut tasks = Vec::new();
    for _ in 0..12 {
        let router = api.router.clone();
        tasks.push(tokio::spawn(async move {
            send(router, payment("document-8", Some("same-key"))).await
        }));
    }
    let mut answers = Vec::new();
    for t in tasks {
        let (status, _, body) = t.await.unwrap();
        answers.push((status, body));
    }
    assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");
    assert_eq!(answers[0].0, StatusCode::CREATED);
    assert_eq!((api.balance(), api.jobs(), api.payments()), (9_500, 1, 1));
}

#[tokio::test]
async fn invalid_idempotency_keys_are_refused() {
    let api = Api::new();
    let long = "k".repeat(201);
    for key in [
        HeaderValue::from_static(""),
        HeaderValue::from_str(&long).unwrap(),
        HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap(),
        HeaderValue::from_static("tab\there"),
    ] {
        let mut req = payment("document-7", None);
        req.headers_mut().insert("idempotency-key", key.clone());
        let (status, _, body) = api.send(req).await;
        assert_error(
            status,
            &body,
            StatusCode::BAD_REQUEST,
            "invalid_idempotency_key",
        );
    }
    let mut req = payment("document-7", Some("a"));
    req.headers_mut()
        .append("idempotency-key", HeaderValue::from_static("b"));
    let (status, _, _) = api.send(req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!((api.balance(), api.jobs(), api.payments()), (10_000, 0, 0));
    // The longest valid key works.
    let (status, _, _) = api
        .send(payment("document-7", Some(&"k".repeat(200))))
        .await;
    assert_eq!(status, StatusCode::CREATED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_payments_never_overdraw_or_publish_twice() {
    let api = Api::new();
    let router = api.router.clone();
    let mut tasks = Vec::new();
    for i in 0..50 {
        let router = router.clone();
        tasks.push(tokio::spawn(async move {
            let doc = if i % 2 == 0 {
                "document-7"
            } else {
                "document-8"
            };
            let key = (i % 5 == 0).then(|| format!("key-{i}"));
            send(router, payment(doc, key.as_deref())).await
        }));
    }
    let mut created = Vec::new();
    for t in tasks {
        let (status, _, body) = t.await.unwrap();
        match status {
            StatusCode::CREATED => created.push(body),
            StatusCode::CONFLICT => assert_eq!(body["error"], "already_published"),
            other => panic!("unexpected {other}: {body}"),
        }
    }
    assert_eq!(created.len(), 2, "{created:?}");
    let mut docs: Vec<&str> = created
        .iter()
        .map(|b| b["document_id"].as_str().unwrap())
        .collect();
    docs.sort();
    assert_eq!(docs, ["document-7", "document-8"]);
    assert_eq!(api.balance(), 9_000);
    assert_eq!(api.payments(), 2);
    assert_eq!(api.jobs(), 2);
    let store: Arc<dyn Store> = Arc::new(api.store.clone());
    for b in &created {
        let job = store
            .get(&JobId::new(b["job_id"].as_str().unwrap()).unwrap())
            .await
            .unwrap();
        assert_eq!(job.id.as_str(), b["payment_id"].as_str().unwrap());
    }
}

#[tokio::test]
async fn malformed_oversized_and_mistyped_bodies_are_refused_before_anything_is_written() {
    let api = Api::new();
    for body in [
        "{not json",
        "",
        "[]",
        "{}",
        r#"{"document_id": 7}"#,
        r#"{"document_id": null}"#,
        r#"{"document_id": "document-7", "amount_cents": 1}"#,
        r#""document-7""#,
    ] {
        let (status, _, b) = api.send(post().body(Body::from(body)).unwrap()).await;
        assert_error(status, &b, StatusCode::BAD_REQUEST, "malformed_body");
    }

    let big = json!({ "document_id": "x".repeat(BODY_LIMIT) }).to_string();
    let (status, _, b) = api.send(post().body(Body::from(big)).unwrap()).await;
    assert_error(status, &b, StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");

    let req = Request::builder()
        .method(Method::POST)
        .uri("/payments")
        .header("content-type", "text/plain")
        .body(Body::from(r#"{"document_id":"document-7"}"#))
        .unwrap();
    let (status, _, b) = api.send(req).await;
    assert_error(
        status,
        &b,
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
    );

    let req = Request::builder()
        .method(Method::POST)
        .uri("/payments")
        .body(Body::from(r#"{"document_id":"document-7"}"#))
        .unwrap();
    assert_eq!(api.send(req).await.0, StatusCode::UNSUPPORTED_MEDIA_TYPE);

    assert_eq!((api.balance(), api.jobs(), api.payments()), (10_000, 0, 0));

    // A charset parameter is fine.
    let req = Request::builder()
        .method(Method::POST)
        .uri("/payments")
        .header("content-type", "application/json; charset=utf-8")
        .body(Body::from(r#"{"document_id":"document-7"}"#))
        .unwrap();
    assert_eq!(api.send(req).await.0, StatusCode::CREATED);
}

#[tokio::test]
async fn there_is_no_administrative_endpoint() {
    let api = Api::new();
    for uri in ["/jobs", "/admin", "/replay", "/receipts"] {
        let (status, _, body) = api.send(get(uri)).await;
        assert_error(status, &body, StatusCode::NOT_FOUND, "no_route");
    }
    let req = Request::builder()
        .method(Method::DELETE)
        .uri("/wallet")
        .body(Body::empty())
        .unwrap();
    let (status, _, body) = api.send(req).await;
    assert_error(
        status,
        &body,
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
    );
}
