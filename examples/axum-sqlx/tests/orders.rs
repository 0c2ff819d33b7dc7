#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The example as a user runs it: the binary against a PostgreSQL schema
//! of its own, orders posted over HTTP, the database looked at with psql.
//! Needs `ERRAND_TEST_POSTGRES_URL`; says SKIPPED without it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

use errand_testsupport::{KillOnDrop, PgSchema, postgres_url, wait_until};
use serde_json::{Value, json};

/// One HTTP/1.1 request on a fresh connection; the status and the JSON
/// body (`null` when empty). Small enough not to need a client crate.
fn http(addr: &str, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
    let mut stream = TcpStream::connect(addr).expect("connect to the service");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("read timeout");
    let body = body.map(Value::to_string).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .expect("send the request");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).expect("read the answer");
    let (head, body) = answer
        .split_once("\r\n\r\n")
        .unwrap_or_else(|| panic!("not an HTTP answer: {answer:?}"));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {head:?}"));
    let json = if body.is_empty() {
        Value::Null
    } else {
        serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body:?}"))
    };
    (status, json)
}

#[test]
fn each_order_gets_one_receipt_and_a_refused_order_leaves_no_job() {
    let Some(url) = postgres_url("the axum + sqlx example") else {
        return;
    };
    let jobs = PgSchema::new(&url, "axum_jobs");
    let shop = PgSchema::new(&url, "axum_shop");
    // Declared after the schemas, so it is killed before they are dropped.
    let mut service = KillOnDrop::new(
        Command::new(env!("CARGO_BIN_EXE_axum-sqlx-example"))
            .args(["--bind", "127.0.0.1:0"])
            .env("DATABASE_URL", &url)
            .env("ERRAND_SCHEMA", &jobs.name)
            .env("APP_SCHEMA", &shop.name)
            .env("RUST_LOG", "warn")
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the example"),
    );
    // Kept open for the whole test: the service may write more lines.
    let mut stdout = BufReader::new(service.child().stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read stdout");
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| panic!("the service did not say where it listens: {line:?}"))
        .to_owned();

    let orders: Vec<(String, &str, i64)> = (1..=10)
        .map(|i| {
            (
                format!("o-{i}"),
                if i % 2 == 0 { "ada" } else { "bob" },
                1_000 * i,
            )
        })
        .collect();
    for (id, customer, cents) in &orders {
        let (status, body) = http(
            &addr,
            "POST",
            "/orders",
            Some(&json!({"id": id, "customer": customer, "cents": cents})),
        );
        assert_eq!(status, 201, "{body}");
        assert_eq!(body["job"], format!("receipt-{id}"));
    }
    // The same order again is refused and enqueues nothing more.
    let (status, body) = http(
        &addr,
        "POST",
        "/orders",
        Some(&json!({"id": "o-1", "customer": "bob", "cents": 1_000})),
    );
    assert_eq!(status, 409, "{body}");
    // Over the credit limit: the order and its job were written, then the
    // check refused the request and the transaction rolled both back.
    let (status, body) = http(
        &addr,
        "POST",
        "/orders",
        Some(&json!({"id": "big", "customer": "cyd", "cents": 150_000})),
    );
    assert_eq!(status, 422, "{body}");
    assert!(
        body["error"].as_str().unwrap().contains("over the limit"),
        "{body}"
    );

    for (id, _, _) in &orders {
        wait_until(
            &format!("the receipt job of {id} to be done"),
            Duration::from_secs(60),
            Duration::from_millis(100),
            || http(&addr, "GET", &format!("/orders/{id}"), None).1["job"]["state"] == "done",
        );
        let (status, order) = http(&addr, "GET", &format!("/orders/{id}"), None);
        assert_eq!(status, 200);
        assert_eq!(order["receipts"], 1, "{order}");
        assert_eq!(order["job"]["attempts"], 1, "{order}");
    }

    // The refused order left nothing: no order, no job.
    let (status, _) = http(&addr, "GET", "/orders/big", None);
    assert_eq!(status, 404);
    let s = &jobs.name;
    assert_eq!(
        jobs.psql(&format!(
            "SELECT count(*) FROM {s}.errand_jobs WHERE id = 'receipt-big'"
        )),
        "0"
    );
    // Exactly one job per order, all done; exactly one receipt per order,
    // written by that order's job.
    assert_eq!(
        jobs.psql(&format!(
            "SELECT state || ' ' || count(*) FROM {s}.errand_jobs GROUP BY state"
        )),
        "done 10"
    );
    let a = &shop.name;
    let receipts = shop.psql(&format!(
        "SELECT count(*), count(DISTINCT order_id), \
                count(*) FILTER (WHERE job_id = 'receipt-' || order_id) \
         FROM {a}.receipts"
    ));
    assert_eq!(receipts, "10|10|10");
    assert_eq!(shop.psql(&format!("SELECT count(*) FROM {a}.orders")), "10");
}
