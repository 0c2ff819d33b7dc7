#![allow(clippy::unwrap_used, clippy::expect_used)]
//! OpenTelemetry export as a user meets it: `errand serve` and `errand
//! work` run as real processes with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing
//! at an OTLP/HTTP receiver inside this test (axum, decoding each
//! protobuf `ExportTraceServiceRequest` with opentelemetry-proto). A job
//! enqueued through `POST /v1/jobs` with a `traceparent` header yields an
//! enqueue span in that trace, a child of the header's span, and an
//! attempt span that is the enqueue span's child — though the two ran in
//! different processes — and the `--exec` command gets the attempt span's
//! context as its `TRACEPARENT`.

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::{Value, json};

mod common;

use common::Backend;

/// A span as received, with the service that sent it.
#[derive(Clone, Debug)]
struct Received {
    service: String,
    span: Span,
}

impl Received {
    fn attr(&self, key: &str) -> Option<String> {
        self.span
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.as_ref()?.value.as_ref())
            .map(|v| match v {
                AnyValue::StringValue(s) => s.clone(),
                AnyValue::IntValue(i) => i.to_string(),
                AnyValue::BoolValue(b) => b.to_string(),
                other => format!("{other:?}"),
            })
    }
}

/// Starts the receiver on a loopback port of its own; the spans it gets.
fn receiver() -> (u16, Arc<Mutex<Vec<Received>>>) {
    let spans: Arc<Mutex<Vec<Received>>> = Arc::default();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let kept = spans.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = axum::Router::new().route(
                "/v1/traces",
                axum::routing::post(move |body: axum::body::Bytes| {
                    let kept = kept.clone();
                    async move {
                        let request = ExportTraceServiceRequest::decode(body.as_ref())
                            .expect("an OTLP protobuf trace export");
                        let mut kept = kept.lock().unwrap();
                        for resource in request.resource_spans {
                            let service = resource
                                .resource
                                .iter()
                                .flat_map(|r| &r.attributes)
                                .find(|kv| kv.key == "service.name")
                                .and_then(|kv| kv.value.as_ref()?.value.as_ref())
                                .map(|v| match v {
                                    AnyValue::StringValue(s) => s.clone(),
                                    other => format!("{other:?}"),
                                })
                                .unwrap_or_default();
                            for scope in resource.scope_spans {
                                for span in scope.spans {
                                    kept.push(Received {
                                        service: service.clone(),
                                        span,
                                    });
                                }
                            }
                        }
                        // An empty ExportTraceServiceResponse.
                        (
                            [("content-type", "application/x-protobuf")],
                            Vec::<u8>::new(),
                        )
                    }
                }),
            );
            let listener = tokio::net::TcpListener::from_std(listener).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    (port, spans)
}

/// A child process stopped with SIGTERM (so it flushes its spans) and
/// waited for; killed if the test fails first.
struct Process(errand_testsupport::KillOnDrop);

impl Process {
    fn stop(mut self, what: &str) {
        let pid = self.0.child().id().to_string();
        let status = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap();
        assert!(status.success());
        let mut exit = None;
        errand_testsupport::wait_until(
            &format!("{what} to exit after SIGTERM"),
            Duration::from_secs(60),
            Duration::from_millis(20),
            || {
                exit = self.0.child().try_wait().unwrap();
                exit.is_some()
            },
        );
        assert!(exit.is_some_and(|s| s.success()), "{what}: {exit:?}");
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn a_job_enqueued_over_http_with_a_traceparent_yields_spans_in_that_trace() {
    let (port, spans) = receiver();
    let b = Backend::sqlite();
    let endpoint = format!("http://127.0.0.1:{port}");
    let otel = |c: &mut std::process::Command, service: &str| {
        c.env("OTEL_EXPORTER_OTLP_ENDPOINT", &endpoint)
            .env("OTEL_SERVICE_NAME", service)
            // Spans leave only when a batch fills (never here) or at
            // exit: what arrives was flushed by the shutdown.
            .env("OTEL_BSP_SCHEDULE_DELAY", "600000")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .env_remove("OTEL_SDK_DISABLED")
            .env_remove("OTEL_TRACES_EXPORTER")
            .env_remove("OTEL_TRACES_SAMPLER")
            .env_remove("OTEL_RESOURCE_ATTRIBUTES")
            .env_remove("OTEL_EXPORTER_OTLP_HEADERS")
            .env_remove("OTEL_EXPORTER_OTLP_PROTOCOL");
    };

    let mut serve = b.command(&["serve", "--bind", "127.0.0.1:0"]);
    otel(&mut serve, "api");
    let mut serve = serve
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(serve.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    let serve = Process(errand_testsupport::KillOnDrop::new(serve));
    let base = first
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();

    let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
    let parent = "00f067aa0ba902b7";
    let http = reqwest::blocking::Client::new();
    let enqueue = |id: &str, kind: &str| {
        let answer: Value = http
            .post(format!("{base}/v1/jobs"))
            .header("traceparent", format!("00-{trace}-{parent}-01"))
            .json(&json!({"kind": kind, "id": id}))
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(answer["created"], true, "{answer}");
        answer
    };
    let stored = enqueue("ok-1", "fine");
    enqueue("bad-1", "broken");
    // The job carries the enqueue span's context: the same trace, a new
    // parent (the enqueue span), as exported below.
    let stored_tp = stored["job"]["traceparent"].as_str().unwrap().to_owned();
    assert!(
        stored_tp.starts_with(&format!("00-{trace}-")),
        "{stored_tp}"
    );
    assert_ne!(stored_tp, format!("00-{trace}-{parent}-01"));

    // One worker: `fine` succeeds, `broken` fails permanently (exit 65).
    let script = b.dir.join("handler.sh");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf %s \"$TRACEPARENT\" > {}/tp-$ERRAND_JOB_ID\n\
             [ \"$ERRAND_KIND\" = broken ] && exit 65\nexit 0\n",
            b.dir.display()
        ),
    )
    .unwrap();
    let mut work = b.command(&["work", "--exec"]);
    work.arg(format!("sh {}", script.display()));
    otel(&mut work, "worker");
    let work = Process(errand_testsupport::KillOnDrop::new(
        work.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap(),
    ));
    errand_testsupport::wait_until(
        "both jobs to end",
        Duration::from_secs(60),
        Duration::from_millis(200),
        || {
            let done = b.ok(&["show", "ok-1", "--json"])["state"] == "done";
            let dead = b.ok(&["show", "bad-1", "--json"])["state"] == "dead";
            done && dead
        },
    );
    work.stop("errand work");
    serve.stop("errand serve");

    // The spans arrive when each process flushes at its exit.
    let find = |name: &str, id: &str| -> Option<Received> {
        spans
            .lock()
            .unwrap()
            .iter()
            .find(|r| r.span.name == name && r.attr("errand.job.id").as_deref() == Some(id))
            .cloned()
    };
    errand_testsupport::wait_until(
        "the exported spans",
        Duration::from_secs(30),
        Duration::from_millis(50),
        || {
            find("send default", "ok-1").is_some()
                && find("process default", "ok-1").is_some()
                && find("process default", "bad-1").is_some()
        },
    );
    let send = find("send default", "ok-1").unwrap();
    let process = find("process default", "ok-1").unwrap();
    let failed = find("process default", "bad-1").unwrap();

    // One trace: the header's span → the enqueue span → the attempt span.
    assert_eq!(send.service, "api");
    assert_eq!(process.service, "worker");
    for r in [&send, &process, &failed] {
        assert_eq!(hex(&r.span.trace_id), trace, "{:?}", r.span.name);
    }
    assert_eq!(hex(&send.span.parent_span_id), parent);
    assert_eq!(process.span.parent_span_id, send.span.span_id);
    assert_eq!(
        stored_tp,
        format!("00-{trace}-{}-01", hex(&send.span.span_id))
    );
    // The command's own spans would belong under the attempt: its
    // TRACEPARENT names the attempt's span.
    assert_eq!(
        std::fs::read_to_string(b.dir.join("tp-ok-1")).unwrap(),
        format!("00-{trace}-{}-01", hex(&process.span.span_id))
    );
    // Producer and consumer kinds (OTLP's SpanKind 4 and 5).
    assert_eq!(send.span.kind, 4);
    assert_eq!(process.span.kind, 5);

    let attrs = |r: &Received, keys: &[&str]| -> HashMap<String, Option<String>> {
        keys.iter().map(|k| ((*k).to_owned(), r.attr(k))).collect()
    };
    let want = |pairs: &[(&str, &str)]| -> HashMap<String, Option<String>> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned())))
            .collect()
    };
    let keys = [
        "messaging.system",
        "messaging.operation.type",
        "messaging.destination.name",
        "messaging.message.id",
        "errand.job.id",
        "errand.job.kind",
        "errand.job.queue",
        "errand.job.attempt",
        "errand.job.outcome",
    ];
    assert_eq!(
        attrs(&process, &keys),
        want(&[
            ("messaging.system", "errand"),
            ("messaging.operation.type", "process"),
            ("messaging.destination.name", "default"),
            ("messaging.message.id", "ok-1"),
            ("errand.job.id", "ok-1"),
            ("errand.job.kind", "fine"),
            ("errand.job.queue", "default"),
            ("errand.job.attempt", "1"),
            ("errand.job.outcome", "acknowledged"),
        ])
    );
    assert_eq!(process.attr("errand.error.class"), None);
    assert_eq!(failed.attr("errand.job.outcome").as_deref(), Some("dead"));
    assert_eq!(
        failed.attr("errand.error.class").as_deref(),
        Some("permanent")
    );
    // Status code 2: ERROR.
    assert_eq!(failed.span.status.as_ref().map(|s| s.code), Some(2));
    assert_eq!(
        (
            send.attr("messaging.operation.type").as_deref(),
            send.attr("errand.job.kind").as_deref(),
            send.attr("errand.job.created").as_deref(),
        ),
        (Some("send"), Some("fine"), Some("true"))
    );
}
