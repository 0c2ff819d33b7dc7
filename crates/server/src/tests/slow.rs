//! A real server on a loopback port and clients on raw TCP: a client that
//! trickles its request head, sends nothing, idles on a kept-alive
//! connection or trickles its body is cut off after the read timeout; a
//! waiting lease request ends when the server shuts down.

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use errand::testkit::TestQueue;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;

use super::Api;
use crate::{Server, ServerConfig};

/// Generous: the server is configured to give up after 300 ms.
const BOUND: Duration = Duration::from_secs(20);

struct Running {
    q: TestQueue,
    addr: SocketAddr,
    stop: oneshot::Sender<()>,
    task: tokio::task::JoinHandle<Result<(), crate::ServeError>>,
}

impl Running {
    /// Asks the server to stop and waits until it has. Returns the queue,
    /// whose directory holds the database: a store opens connections on
    /// demand, so a caller still reading must keep it.
    async fn stop(self) -> TestQueue {
        self.stop.send(()).unwrap();
        tokio::time::timeout(BOUND, self.task)
            .await
            .expect("the server stopped")
            .unwrap()
            .unwrap();
        self.q
    }
}

async fn start(read_timeout: Duration) -> Running {
    let q = TestQueue::new().unwrap();
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        read_timeout,
        ..ServerConfig::default()
    };
    let server = Server::bind(q.store(), config).await.unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    Running {
        q,
        addr,
        stop,
        task,
    }
}

/// Writes `prefix`, then one more byte of `drip` every 50 ms for as long
/// as the server takes them, while reading everything the server sends
/// until it closes the connection. Panics if it is still open after
/// [`BOUND`].
async fn trickle(addr: SocketAddr, prefix: &[u8], drip: Option<u8>) -> String {
    let (mut rd, mut wr) = TcpStream::connect(addr).await.unwrap().into_split();
    wr.write_all(prefix).await.unwrap();
    let writer = tokio::spawn(async move {
        while let Some(byte) = drip {
            tokio::time::sleep(Duration::from_millis(50)).await;
            if wr.write_all(&[byte]).await.is_err() {
                break;
            }
        }
        // Keep our half open while the server decides.
        std::future::pending::<()>().await;
    });
    let mut got = Vec::new();
    let closed = tokio::time::timeout(BOUND, async {
        let mut buf = [0u8; 4096];
        loop {
            match rd.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await;
    writer.abort();
    assert!(
        closed.is_ok(),
        "the server still held the connection after {BOUND:?}"
    );
    String::from_utf8_lossy(&got).into_owned()
}

/// One request written at once; the whole answer.
async fn exchange(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    tokio::time::timeout(BOUND, stream.read_to_end(&mut got))
        .await
        .expect("answered in time")
        .unwrap();
    String::from_utf8(got).unwrap()
}

fn body_of(answer: &str) -> Value {
    let (_, body) = answer.split_once("\r\n\r\n").expect("a complete answer");
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {answer}"))
}

#[tokio::test]
async fn clients_that_trickle_a_head_or_send_nothing_are_cut_off() {
    let s = start(Duration::from_millis(300)).await;
    let head = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    let got = trickle(s.addr, head.as_bytes(), Some(b'a')).await;
    assert!(
        !got.contains("200 OK"),
        "a head never finished was answered: {got}"
    );
    let got = trickle(s.addr, b"", None).await;
    assert!(got.is_empty(), "{got}");
    // A kept-alive connection left idle after its answer is closed too.
    let got = trickle(
        s.addr,
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
        None,
    )
    .await;
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    // A client that sends its request at once is answered as ever.
    let got = exchange(
        s.addr,
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(body_of(&got), json!({"ok": true}));
    s.stop().await;
}

#[tokio::test]
async fn a_client_that_trickles_its_body_gets_408_and_nothing_is_written() {
    let s = start(Duration::from_millis(300)).await;
    let head = "POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"kind\":\"k\",\"payload\":\"";
    let got = trickle(s.addr, head.as_bytes(), Some(b'x')).await;
    assert!(got.starts_with("HTTP/1.1 408"), "{got}");
    assert!(
        got.to_ascii_lowercase().contains("connection: close"),
        "{got}"
    );
    let problem = body_of(&got);
    assert_eq!(problem["code"], "request_timeout", "{problem}");
    assert!(problem["detail"].as_str().unwrap().contains("300 ms"));
    let jobs = s.q.jobs().await.unwrap();
    assert!(jobs.is_empty(), "{jobs:?}");
    s.stop().await;
}

#[tokio::test]
async fn a_body_that_never_ends_is_a_408_problem() {
    let api = Api::with(ServerConfig {
        read_timeout: Duration::from_millis(200),
        ..ServerConfig::default()
    });
    let never = Body::from_stream(futures_util::stream::pending::<
        Result<Vec<u8>, std::io::Error>,
    >());
    let request = Request::post("/v1/jobs")
        .header(header::CONTENT_TYPE, "application/json")
        .body(never)
        .unwrap();
    let r = api.send(request).await;
    r.problem(StatusCode::REQUEST_TIMEOUT, "request_timeout");
    assert_eq!(r.headers[header::CONNECTION], "close");
    assert_eq!(api.count().await, 0);
}

#[tokio::test]
async fn shutdown_ends_a_waiting_lease_request_with_no_jobs() {
    let s = start(Duration::from_secs(10)).await;
    let body = r#"{"wait": "30s"}"#;
    let request = format!(
        "POST /v1/leases HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    let addr = s.addr;
    let waiting = tokio::spawn(async move { exchange(addr, &request).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    s.stop().await;
    let got = waiting.await.unwrap();
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert_eq!(body_of(&got), json!({"jobs": []}));
}

#[test]
fn a_zero_read_timeout_is_refused() {
    let config = ServerConfig {
        read_timeout: Duration::ZERO,
        ..ServerConfig::default()
    };
    let err = config.check().unwrap_err();
    assert!(
        err.is_config() && err.to_string().contains("read timeout"),
        "{err}"
    );
}

/// Three jobs due before the server starts; a running server with its
/// counts written every `every`.
async fn start_with_jobs(every: Duration) -> Running {
    let q = TestQueue::new().unwrap();
    for id in ["c1", "c2", "c3"] {
        q.store()
            .insert(
                errand::NewJob::new("k", errand::Payload::from_json_text("{}").unwrap())
                    .unwrap()
                    .with_id(errand::JobId::new(id).unwrap()),
            )
            .await
            .unwrap();
    }
    let config = ServerConfig {
        bind: "127.0.0.1:0".parse().unwrap(),
        chart_counts_every: every,
        ..ServerConfig::default()
    };
    let server = Server::bind(q.store(), config).await.unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));
    Running {
        q,
        addr,
        stop,
        task,
    }
}

/// Leases the three jobs over HTTP (a lease is counted, by its wait, but
/// writes nothing itself: only a settlement or the timer writes).
async fn lease_three(addr: SocketAddr) {
    let body = json!({"limit": 3}).to_string();
    let request = format!(
        "POST /v1/leases HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let answer = exchange(addr, &request).await;
    assert_eq!(
        body_of(&answer)["jobs"].as_array().map(Vec::len),
        Some(3),
        "{answer}"
    );
}

async fn charts(q: &TestQueue) -> errand::Charts {
    charts_of(q.store()).await
}

async fn charts_of(store: std::sync::Arc<dyn errand::Store>) -> errand::Charts {
    errand::Admin::new(store)
        .charts(None, errand::ChartWindow::Hour, errand::Timestamp::now())
        .await
        .unwrap()
}

/// A running server writes what the lease API counted on its own timer,
/// with no settlement to trigger it, and samples the queues' depth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_server_writes_its_counts_on_a_timer_and_samples_depth() {
    let s = start_with_jobs(Duration::from_millis(100)).await;
    // Sampled as the server starts, with the three jobs due (nothing
    // leased yet).
    let mut sampled = false;
    for _ in 0..400 {
        if charts(&s.q).await.depth.contains(&Some(3)) {
            sampled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(sampled, "{:?}", charts(&s.q).await.depth);
    lease_three(s.addr).await;
    let mut seen = None;
    for _ in 0..400 {
        let c = charts(&s.q).await;
        if c.wait.iter().sum::<u64>() == 3 {
            seen = Some(c);
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let c = seen.expect("the timer wrote the three leases' waits");
    assert_eq!(c.finished.iter().sum::<u64>(), 0);
    s.stop().await;
}

/// What a server counted since its last write is written as it shuts
/// down.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_writes_what_is_left_as_it_shuts_down() {
    let s = start_with_jobs(Duration::from_secs(3600)).await;
    lease_three(s.addr).await;
    assert_eq!(charts(&s.q).await.wait.iter().sum::<u64>(), 0);
    let q = s.stop().await;
    assert_eq!(charts(&q).await.wait.iter().sum::<u64>(), 3);
}
