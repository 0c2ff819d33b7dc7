//! The remote-worker endpoints over a SQLite store on the test kit's
//! manual clock: every settlement fenced by the token and the lease's end,
//! retries scheduled on the server's policy, and refused requests that
//! change nothing.

use std::time::Duration;

use axum::http::StatusCode;
use errand::testkit::START;
use errand::{ErrorClass, Job, JobId, JobState, RetryPolicy, Timestamp};
use serde_json::{Value, json};

use super::{Api, Reply};
use crate::ServerConfig;

/// A well-formed token that no claim wrote.
const FORGED: &str = "0123456789abcdef0123456789abcdef";
const SETTLEMENTS: [&str; 6] = [
    "heartbeat",
    "complete",
    "fail",
    "snooze",
    "release",
    "cancel",
];

fn at(secs: u64) -> String {
    START.plus(Duration::from_secs(secs)).to_rfc3339()
}

fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// A body for `action` presenting `token`, with whatever else it needs.
fn settle_body(action: &str, token: &str) -> Value {
    match action {
        "heartbeat" => json!({"token": token, "extend": "30s"}),
        "fail" => json!({"token": token, "error": "boom"}),
        "snooze" => json!({"token": token, "delay": "1m"}),
        "cancel" => json!({"token": token, "reason": "not wanted"}),
        _ => json!({"token": token}),
    }
}

fn token(leased: &Value) -> &str {
    leased["lease"]["token"].as_str().expect("a token")
}

impl Api {
    async fn enqueue(&self, body: Value) -> Value {
        let r = self.post("/v1/jobs", &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body["job"].clone()
    }

    async fn lease(&self, body: Value) -> Vec<Value> {
        let r = self.post("/v1/leases", &body).await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body["jobs"].as_array().cloned().expect("a jobs array")
    }

    async fn lease_one(&self) -> Value {
        let mut jobs = self.lease(json!({})).await;
        assert_eq!(jobs.len(), 1, "{jobs:?}");
        jobs.remove(0)
    }

    async fn stored(&self, id: &str) -> Job {
        self.q.store().get(&JobId::new(id).unwrap()).await.unwrap()
    }

    async fn settle(&self, id: &str, action: &str, body: &Value) -> Reply {
        self.post(&format!("/v1/leases/{id}/{action}"), body).await
    }

    /// Every settlement with `token` is refused as `lease_lost`, and the
    /// job is exactly as it was.
    async fn all_refused(&self, id: &str, token: &str, why: &str) {
        let before = self.stored(id).await;
        for action in SETTLEMENTS {
            let r = self.settle(id, action, &settle_body(action, token)).await;
            assert_eq!(r.code(), "lease_lost", "{why}: {action}: {}", r.body);
            r.problem(StatusCode::CONFLICT, "lease_lost");
            assert_eq!(
                self.stored(id).await,
                before,
                "{why}: {action} changed the job"
            );
        }
    }
}

#[tokio::test]
async fn a_remote_worker_leases_heartbeats_and_completes() {
    let api = Api::new();
    api.enqueue(json!({"kind": "email", "id": "r1", "payload": {"to": "a@example.com"}}))
        .await;
    let leased = api.lease_one().await;
    let (job, lease) = (&leased["job"], &leased["lease"]);
    assert_eq!(
        (&job["id"], &job["state"]),
        (&json!("r1"), &json!("running"))
    );
    assert_eq!(job["payload"], json!({"to": "a@example.com"}));
    assert_eq!((&lease["id"], &lease["attempt"]), (&json!("r1"), &json!(1)));
    assert_eq!(lease["lease_until"], at(30), "the default lease is 30 s");
    let token = token(&leased);
    assert!(token.len() == 32 && token.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(api.lease(json!({})).await.is_empty(), "nothing else is due");

    // 20 s in, the worker extends the lease to 60 s from now.
    api.q.advance(secs(20));
    let r = api
        .settle(
            "r1",
            "heartbeat",
            &json!({"token": token, "attempt": 1, "extend": "60s"}),
        )
        .await;
    assert_eq!(
        (r.status, &r.body),
        (StatusCode::OK, &json!({"lease_until": at(80)}))
    );
    assert_eq!(
        api.stored("r1").await.lease_until,
        Some(START.plus(secs(80)))
    );

    // Past the first lease's end, within the extension: still the owner.
    api.q.advance(secs(40));
    let r = api
        .settle("r1", "complete", &json!({"token": token, "attempt": 1}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["outcome"], "acknowledged");
    assert_eq!(r.body["job"]["state"], "done");
    assert_eq!(api.stored("r1").await.state, JobState::Done);

    // The same acknowledgment again (a retry after a lost answer) is
    // refused: the lease ended with the first.
    api.all_refused("r1", token, "after completion").await;
}

#[tokio::test]
async fn a_wrong_or_stale_token_is_lease_lost_and_changes_nothing() {
    let api = Api::new();
    api.enqueue(json!({"kind": "k", "id": "w1"})).await;
    let first = api.lease_one().await;
    api.all_refused("w1", FORGED, "a forged token").await;
    for action in SETTLEMENTS {
        let r = api
            .settle("nope", action, &settle_body(action, FORGED))
            .await;
        r.problem(StatusCode::CONFLICT, "lease_lost");
    }
    assert_eq!(api.count().await, 1, "no job was created");

    // The lease expires and another worker takes the job: the first
    // worker's token is stale for every settlement.
    api.q.advance(secs(31));
    let second = api.lease_one().await;
    assert_eq!(second["lease"]["attempt"], 2);
    assert_ne!(token(&first), token(&second));
    api.all_refused("w1", token(&first), "the previous attempt's token")
        .await;
    let r = api
        .settle("w1", "complete", &json!({"token": token(&second)}))
        .await;
    assert_eq!(r.body["outcome"], "acknowledged", "{}", r.body);
}

#[tokio::test]
async fn an_expired_lease_refuses_every_settlement_before_any_sweep() {
    let api = Api::new();
    api.enqueue(json!({"kind": "k", "id": "e1"})).await;
    let leased = api.lease_one().await;
    api.q.advance(secs(30));
    // Not reclaimed, not swept: still `running` with the same token, but
    // its lease has ended.
    let job = api.stored("e1").await;
    assert_eq!((job.state, job.attempts), (JobState::Running, 1));
    api.all_refused("e1", token(&leased), "an expired lease")
        .await;
}

#[tokio::test]
async fn a_failure_is_retried_on_the_policy_or_the_worker_hint_and_keeps_its_attempt() {
    let api = Api::with(ServerConfig {
        retry: RetryPolicy::Fixed(secs(7)),
        ..ServerConfig::default()
    });
    api.enqueue(json!({"kind": "k", "id": "f1", "max_attempts": 4}))
        .await;

    // No retry time: the server's policy (here a fixed 7 s).
    let l = api.lease_one().await;
    let r = api
        .settle(
            "f1",
            "fail",
            &json!({"token": token(&l), "attempt": 1, "error": "SMTP timeout"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["outcome"], "retry_scheduled");
    let job = api.stored("f1").await;
    assert_eq!((job.state, job.attempts), (JobState::Ready, 1));
    assert_eq!(job.available_at, START.plus(secs(7)));
    assert_eq!(job.last_error.as_deref(), Some("SMTP timeout"));
    assert_eq!(job.last_error_class, Some(ErrorClass::Retryable));
    assert!(api.lease(json!({})).await.is_empty(), "not due before 7 s");

    // The worker's own delay (a Retry-After), measured on the store's clock.
    api.q.advance(secs(7));
    let l = api.lease_one().await;
    assert_eq!(l["lease"]["attempt"], 2);
    let r = api
        .settle(
            "f1",
            "fail",
            &json!({"token": token(&l), "error": "rate limited", "retry_in": "90s"}),
        )
        .await;
    assert_eq!(r.body["outcome"], "retry_scheduled", "{}", r.body);
    let job = api.stored("f1").await;
    assert_eq!((job.attempts, job.available_at), (2, START.plus(secs(97))));

    // A time, and the timeout class.
    api.q.advance(secs(90));
    let l = api.lease_one().await;
    let when = START.plus(secs(3600));
    let r = api
        .settle(
            "f1",
            "fail",
            &json!({"token": token(&l), "error": "deadline", "class": "timeout", "retry_at": when.to_rfc3339()}),
        )
        .await;
    assert_eq!(r.body["outcome"], "retry_scheduled", "{}", r.body);
    let job = api.stored("f1").await;
    assert_eq!((job.attempts, job.available_at), (3, when));
    assert_eq!(job.last_error_class, Some(ErrorClass::Timeout));

    // Permanent: dead at once, attempts left or not.
    api.q.advance(secs(3600));
    let l = api.lease_one().await;
    let r = api
        .settle(
            "f1",
            "fail",
            &json!({"token": token(&l), "error": "no such customer", "class": "permanent"}),
        )
        .await;
    assert_eq!(r.body["outcome"], "dead", "{}", r.body);
    assert_eq!(r.body["job"]["state"], "dead");
    let job = api.stored("f1").await;
    assert_eq!((job.state, job.attempts), (JobState::Dead, 4));
    assert_eq!(job.last_error_class, Some(ErrorClass::Permanent));
    let detail = api.q.store().detail(&job.id).await.unwrap();
    let errors: Vec<_> = detail
        .history
        .iter()
        .map(|a| (a.attempt, a.error.as_deref()))
        .collect();
    assert_eq!(
        errors,
        [
            (1, Some("SMTP timeout")),
            (2, Some("rate limited")),
            (3, Some("deadline")),
            (4, Some("no such customer"))
        ]
    );
}

#[tokio::test]
async fn the_default_policy_is_equal_jitter_on_the_attempt_the_lease_started() {
    let api = Api::new();
    api.enqueue(json!({"kind": "k", "id": "j1"})).await;
    let l = api.lease_one().await;
    // Equal jitter, 1 s base: attempt 1 waits in [0.5 s, 1 s).
    let r = api
        .settle(
            "j1",
            "fail",
            &json!({"token": token(&l), "error": "x", "attempt": 1}),
        )
        .await;
    assert_eq!(r.body["outcome"], "retry_scheduled", "{}", r.body);
    let due = api.stored("j1").await.available_at;
    assert!(
        (START.plus(Duration::from_millis(500))..START.plus(secs(1))).contains(&due),
        "{due:?}"
    );
    // Attempt 2, with the attempt left out (read from the job): [1 s, 2 s).
    api.q.advance(secs(1));
    let l = api.lease_one().await;
    let r = api
        .settle("j1", "fail", &json!({"token": token(&l), "error": "x"}))
        .await;
    assert_eq!(r.body["outcome"], "retry_scheduled", "{}", r.body);
    let now = START.plus(secs(1));
    let due = api.stored("j1").await.available_at;
    assert!(
        (now.plus(secs(1))..now.plus(secs(2))).contains(&due),
        "{due:?}"
    );
}

#[tokio::test]
async fn the_last_attempt_failing_goes_to_dead() {
    let api = Api::new();
    api.enqueue(json!({"kind": "k", "id": "d1", "max_attempts": 1}))
        .await;
    let l = api.lease_one().await;
    let r = api
        .settle("d1", "fail", &json!({"token": token(&l), "error": "x"}))
        .await;
    assert_eq!(r.body["outcome"], "dead", "{}", r.body);
    assert_eq!(api.stored("d1").await.state, JobState::Dead);
}

#[tokio::test]
async fn release_and_snooze_give_the_job_back_without_spending_the_attempt() {
    let api = Api::new();
    api.enqueue(json!({"kind": "k", "id": "s1"})).await;
    let l = api.lease_one().await;
    let r = api
        .settle("s1", "release", &json!({"token": token(&l)}))
        .await;
    assert_eq!(r.body["outcome"], "released", "{}", r.body);
    let job = api.stored("s1").await;
    assert_eq!((job.state, job.attempts), (JobState::Ready, 0));
    assert_eq!(job.available_at, START, "due again at once");

    let l = api.lease_one().await;
    assert_eq!(
        l["lease"]["attempt"], 1,
        "the released attempt was not spent"
    );
    let r = api
        .settle("s1", "snooze", &json!({"token": token(&l), "delay": "5m"}))
        .await;
    assert_eq!(r.body["outcome"], "snoozed", "{}", r.body);
    let job = api.stored("s1").await;
    assert_eq!((job.state, job.attempts), (JobState::Ready, 0));
    assert_eq!(job.available_at, START.plus(secs(300)));

    api.q.advance(secs(300));
    let l = api.lease_one().await;
    assert_eq!(l["lease"]["attempt"], 1);
    let r = api
        .settle(
            "s1",
            "cancel",
            &json!({"token": token(&l), "reason": "order withdrawn"}),
        )
        .await;
    assert_eq!(r.body["outcome"], "cancelled", "{}", r.body);
    let job = api.stored("s1").await;
    assert_eq!(job.state, JobState::Cancelled);
    assert_eq!(job.last_error_class, Some(ErrorClass::Cancelled));
}

#[tokio::test]
async fn a_lease_takes_a_batch_from_the_named_queues() {
    let api = Api::new();
    for (id, queue) in [
        ("m1", "mail"),
        ("m2", "mail"),
        ("m3", "mail"),
        ("s1", "sms"),
    ] {
        api.enqueue(json!({"kind": "k", "id": id, "queue": queue}))
            .await;
    }
    let two = api
        .lease(json!({"queues": ["mail", "mail"], "limit": 2, "lease": "2m"}))
        .await;
    assert_eq!(two.len(), 2);
    for l in &two {
        assert_eq!(l["job"]["queue"], "mail");
        assert_eq!(l["lease"]["lease_until"], at(120));
        assert_eq!(l["lease"]["id"], l["job"]["id"]);
    }
    let rest = api.lease(json!({"limit": 100})).await;
    let mut ids: Vec<_> = rest.iter().map(|l| l["job"]["id"].clone()).collect();
    ids.sort_by_key(Value::to_string);
    assert_eq!(ids, [json!("m3"), json!("s1")]);
}

#[tokio::test]
async fn a_waiting_lease_answers_when_work_arrives() {
    let api = Api::new();
    let app = api.app.clone();
    let waiting = tokio::spawn(async move {
        let request = axum::http::Request::post("/v1/leases")
            .header("content-type", "application/json")
            .body(axum::body::Body::from(r#"{"wait": "30s"}"#))
            .unwrap();
        tower::ServiceExt::oneshot(app, request).await.unwrap()
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    api.enqueue(json!({"kind": "k", "id": "late"})).await;
    let response = tokio::time::timeout(secs(25), waiting)
        .await
        .expect("the waiting lease answered once the job arrived")
        .unwrap();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap();
    let body: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(body["jobs"][0]["job"]["id"], "late", "{body}");
    // Nothing due: a short wait answers with no jobs.
    assert!(api.lease(json!({"wait": "200ms"})).await.is_empty());
}

#[tokio::test]
async fn hostile_lease_requests_are_refused_and_claim_nothing() {
    let api = Api::new();
    api.enqueue(json!({"kind": "k", "id": "h1"})).await;
    let cases: Vec<(&str, &str, &str)> = vec![
        ("", "malformed_json", "empty"),
        ("[]", "malformed_json", "expected"),
        (
            r#"{"limit": 0}"#,
            "invalid",
            "`limit` must be from 1 to 100",
        ),
        (r#"{"limit": 101}"#, "invalid", "`limit`"),
        (r#"{"limit": -1}"#, "malformed_json", "invalid value"),
        (r#"{"limit": "2"}"#, "malformed_json", "invalid type"),
        (r#"{"queues": []}"#, "invalid", "every queue"),
        (r#"{"queues": "mail"}"#, "malformed_json", "invalid type"),
        (r#"{"queues": ["bad name"]}"#, "invalid", "queue name"),
        (r#"{"queues": ["q\u0000"]}"#, "invalid", "queue name"),
        (r#"{"lease": "500ms"}"#, "invalid", "from 1s to 1h"),
        (r#"{"lease": "2h"}"#, "invalid", "from 1s to 1h"),
        (r#"{"lease": "soon"}"#, "invalid", "not a duration"),
        (r#"{"lease": 30}"#, "malformed_json", "invalid type"),
        (r#"{"wait": "31s"}"#, "invalid", "at most 30s"),
        (r#"{"wait": "0s"}"#, "invalid", "longer than zero"),
        (
            r#"{"limit": 1, "colour": "red"}"#,
            "malformed_json",
            "unknown field `colour`",
        ),
        (
            r#"{"limit": 1, "limit": 2}"#,
            "malformed_json",
            "duplicate field",
        ),
    ];
    let too_many = json!({"queues": (0..101).map(|i| format!("q{i}")).collect::<Vec<_>>()});
    let too_many = too_many.to_string();
    let cases = cases
        .into_iter()
        .chain([(too_many.as_str(), "invalid", "1 to 100 queues")]);
    for (body, code, needle) in cases {
        let r = api.post_raw("/v1/leases", body.to_owned()).await;
        assert_eq!(r.code(), code, "{body}: {}", r.body);
        r.problem(StatusCode::BAD_REQUEST, code);
        let detail = r.body["detail"].as_str().unwrap();
        assert!(detail.contains(needle), "{body}: {detail}");
        let job = api.stored("h1").await;
        assert_eq!(
            (job.state, job.attempts),
            (JobState::Ready, 0),
            "{body} claimed"
        );
    }
}

#[tokio::test]
async fn hostile_settlements_are_refused_and_change_nothing() {
    let api = Api::new();
    api.enqueue(json!({"kind": "k", "id": "h2"})).await;
    let l = api.lease_one().await;
    let good = token(&l).to_owned();
    let upper = good.to_ascii_uppercase();
    let long_error = "e".repeat(2001);
    let before = api.stored("h2").await;
    let t = good.as_str();
    let cases: Vec<(&str, &str, Value, &str, &str)> = vec![
        (
            "h2",
            "complete",
            json!({}),
            "malformed_json",
            "missing field `token`",
        ),
        (
            "h2",
            "complete",
            json!({"token": ""}),
            "invalid",
            "32 lowercase hexadecimal",
        ),
        (
            "h2",
            "complete",
            json!({"token": &good[..31]}),
            "invalid",
            "32 lowercase",
        ),
        (
            "h2",
            "complete",
            json!({"token": format!("{good}0")}),
            "invalid",
            "32 lowercase",
        ),
        (
            "h2",
            "complete",
            json!({"token": upper}),
            "invalid",
            "32 lowercase",
        ),
        (
            "h2",
            "complete",
            json!({"token": "g".repeat(32)}),
            "invalid",
            "32 lowercase",
        ),
        (
            "h2",
            "complete",
            json!({"token": format!("{}\u{0}", &good[..31])}),
            "invalid",
            "32 lowercase",
        ),
        (
            "h2",
            "complete",
            json!({"token": 5}),
            "malformed_json",
            "invalid type",
        ),
        (
            "h2",
            "complete",
            json!({"token": t, "attempt": 0}),
            "invalid",
            "`attempt`",
        ),
        (
            "h2",
            "complete",
            json!({"token": t, "attempt": 1001}),
            "invalid",
            "`attempt`",
        ),
        (
            "h2",
            "complete",
            json!({"token": t, "attempt": -1}),
            "malformed_json",
            "invalid value",
        ),
        (
            "h2",
            "complete",
            json!({"token": t, "owner": "me"}),
            "malformed_json",
            "unknown field `owner`",
        ),
        (
            "h2",
            "release",
            json!({"token": t, "delay": "1s"}),
            "malformed_json",
            "unknown field `delay`",
        ),
        ("a b", "complete", json!({"token": t}), "invalid", "job id"),
        (
            "h2",
            "heartbeat",
            json!({"token": t, "extend": "500ms"}),
            "invalid",
            "from 1s to 1h",
        ),
        (
            "h2",
            "heartbeat",
            json!({"token": t, "extend": "2h"}),
            "invalid",
            "from 1s to 1h",
        ),
        (
            "h2",
            "heartbeat",
            json!({"token": t, "extend": "0s"}),
            "invalid",
            "longer than zero",
        ),
        (
            "h2",
            "fail",
            json!({"token": t}),
            "malformed_json",
            "missing field `error`",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": ""}),
            "invalid",
            "`error`",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": "  "}),
            "invalid",
            "not blank",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": "a\u{0}b"}),
            "invalid",
            "printable",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": long_error}),
            "invalid",
            "2000",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": "x", "class": "lease_expired"}),
            "invalid",
            "`class`",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": "x", "class": "cancelled"}),
            "invalid",
            "cancel",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": "x", "class": "Retryable"}),
            "invalid",
            "`class`",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": "x", "retry_in": "1s", "retry_at": "2026-11-30T14:05:00Z"}),
            "invalid",
            "not both",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": "x", "class": "permanent", "retry_in": "1s"}),
            "invalid",
            "not retried",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": "x", "retry_in": "0s"}),
            "invalid",
            "longer than zero",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": "x", "retry_in": "400d"}),
            "invalid",
            "at most 365d",
        ),
        (
            "h2",
            "fail",
            json!({"token": t, "error": "x", "retry_at": "tomorrow"}),
            "invalid",
            "RFC 3339",
        ),
        (
            "h2",
            "snooze",
            json!({"token": t}),
            "malformed_json",
            "missing field `delay`",
        ),
        (
            "h2",
            "snooze",
            json!({"token": t, "delay": "366d"}),
            "invalid",
            "at most 365d",
        ),
        (
            "h2",
            "cancel",
            json!({"token": t}),
            "malformed_json",
            "missing field `reason`",
        ),
        (
            "h2",
            "cancel",
            json!({"token": t, "reason": " "}),
            "invalid",
            "`reason`",
        ),
    ];
    for (id, action, body, code, needle) in cases {
        let uri = format!("/v1/leases/{}/{action}", id.replace(' ', "%20"));
        let r = api.post(&uri, &body).await;
        assert_eq!(r.code(), code, "{action} {body}: {}", r.body);
        r.problem(StatusCode::BAD_REQUEST, code);
        let detail = r.body["detail"].as_str().unwrap();
        assert!(detail.contains(needle), "{action} {body}: {detail}");
        assert!(
            !detail.to_ascii_lowercase().contains(&good[..8]),
            "a token is never repeated in an answer: {detail}"
        );
        assert_eq!(
            api.stored("h2").await,
            before,
            "{action} {body} changed the job"
        );
    }
    let form = api
        .call(
            "POST",
            "/v1/leases/h2/complete",
            &[("content-type", "application/x-www-form-urlencoded")],
            format!("token={good}"),
        )
        .await;
    form.problem(StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type");
    let big = json!({"token": good, "error": "x".repeat(2 * 1024 * 1024)});
    api.post("/v1/leases/h2/fail", &big)
        .await
        .problem(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");
    assert_eq!(api.stored("h2").await, before);

    // After all that, the real owner still settles.
    let r = api.settle("h2", "complete", &json!({"token": good})).await;
    assert_eq!(r.body["outcome"], "acknowledged", "{}", r.body);
}

#[tokio::test]
async fn lease_answers_match_their_documented_schemas() {
    let api = Api::new();
    api.enqueue(json!({
        "kind": "k",
        "id": "o1",
        "key": "tenant-7",
        "deadline": "2999-01-01T00:00:00Z",
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    }))
    .await;
    let leased = api.lease_one().await;
    let doc: Value = serde_json::from_str(crate::routes::OPENAPI).unwrap();
    let props = |name: &str| super::openapi::property_names(&doc, name);
    // `signal` comes with a job a signal released (tests/signals.rs).
    let mut leased_fields = props("LeasedJob");
    leased_fields.remove("signal");
    assert_eq!(super::openapi::keys(&leased), leased_fields);
    assert_eq!(super::openapi::keys(&leased["lease"]), props("Lease"));
    // Only a job with dependencies or dependents carries those fields
    // (the job schemas' own test shows them).
    let mut job_props = props("Job");
    job_props.retain(|p| {
        p != "on_dependency_failure"
            && p != "has_dependents"
            && p != "progress"
            && p != "workflow"
            && p != "unique_key"
            && p != "batch"
            && p != "awaiting"
            && p != "resumed_by"
            && p != "added_by"
    });
    assert_eq!(super::openapi::keys(&leased["job"]), job_props);
    let r = api
        .settle("o1", "heartbeat", &json!({"token": token(&leased)}))
        .await;
    assert_eq!(super::openapi::keys(&r.body), props("Renewed"));
    let r = api
        .settle("o1", "complete", &json!({"token": token(&leased)}))
        .await;
    // A completion that added no children says nothing of them (the
    // workflows test of children shows them).
    let mut completed = props("Completed");
    completed.remove("children");
    completed.remove("dependents");
    assert_eq!(super::openapi::keys(&r.body), completed);
    let _: Timestamp = serde_json::from_value(leased["lease"]["lease_until"].clone()).unwrap();
}

/// What remote workers settle counts on the charts: a completion as
/// finished, a retried failure under its class, a permanent one as dead,
/// each lease's start by its wait; `GET /v1/charts` adds them up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn settlements_over_the_lease_api_count_on_the_charts() {
    let api = Api::with(ServerConfig {
        chart_counts_every: Duration::ZERO,
        ..ServerConfig::default()
    });
    for (id, queue) in [("c1", "mail"), ("c2", "mail"), ("c3", "sms")] {
        api.enqueue(json!({"kind": "k", "id": id, "queue": queue}))
            .await;
    }
    let leased = api.lease(json!({"limit": 3})).await;
    assert_eq!(leased.len(), 3);
    let token_of = |id: &str| {
        let l = leased.iter().find(|l| l["job"]["id"] == id).unwrap();
        token(l).to_owned()
    };
    let r = api
        .settle("c1", "complete", &json!({"token": token_of("c1")}))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let r = api
        .settle(
            "c2",
            "fail",
            &json!({"token": token_of("c2"), "error": "slow", "class": "timeout"}),
        )
        .await;
    assert_eq!(r.body["outcome"], "retry_scheduled", "{}", r.body);
    let r = api
        .settle(
            "c3",
            "fail",
            &json!({"token": token_of("c3"), "error": "gone", "class": "permanent"}),
        )
        .await;
    assert_eq!(r.body["outcome"], "dead", "{}", r.body);

    let total = |v: &Value| -> u64 {
        v.as_array()
            .map_or(0, |a| a.iter().filter_map(Value::as_u64).sum())
    };
    let mut body = Value::Null;
    for _ in 0..200 {
        let r = api.get("/v1/charts?window=hour").await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        body = r.body;
        if total(&body["finished"]) == 1
            && total(&body["dead"]) == 1
            && total(&body["retries"]["timeout"]) == 1
            && total(&body["wait"]) == 3
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(total(&body["finished"]), 1, "{body}");
    assert_eq!(total(&body["dead"]), 1, "{body}");
    assert_eq!(total(&body["retries"]["timeout"]), 1, "{body}");
    assert_eq!(total(&body["wait"]), 3, "{body}");
    assert_eq!(body["window"], "hour");
    assert_eq!(body["finished"].as_array().map(Vec::len), Some(60));

    let sms = api.get("/v1/charts?queue=sms&window=day").await;
    assert_eq!(sms.status, StatusCode::OK, "{}", sms.body);
    assert_eq!(sms.body["queue"], "sms");
    assert_eq!(sms.body["finished"].as_array().map(Vec::len), Some(96));
    assert_eq!(total(&sms.body["dead"]), 1);
    assert_eq!(total(&sms.body["finished"]), 0);

    for bad in ["/v1/charts?window=week", "/v1/charts?queue=%3Cx%3E"] {
        api.get(bad)
            .await
            .problem(StatusCode::BAD_REQUEST, "invalid");
    }
    let r = api.get("/v1/charts?colour=blue").await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST, "{}", r.body);
    assert!(
        r.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("queue and window")),
        "{}",
        r.body
    );
}

/// A progress message sent with a heartbeat is stored without its control
/// characters (each becomes U+FFFD), as one reported through the library
/// is: a lease holder cannot write escape sequences into an operator's
/// terminal or a log line.
#[tokio::test]
async fn a_heartbeats_progress_message_loses_its_control_characters() {
    let api = Api::new();
    api.enqueue(json!({"kind": "email", "id": "p1"})).await;
    let leased = api.lease_one().await;
    let body = json!({"token": token(&leased), "extend": "30s",
                      "progress": {"percent": 40, "message": "a\u{1b}[31m\nb\u{9b}2J"}});
    let r = api.settle("p1", "heartbeat", &body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let progress = api.stored("p1").await.progress.expect("stored");
    assert_eq!(
        progress.message.as_deref(),
        Some("a\u{fffd}[31m\u{fffd}b\u{fffd}2J")
    );
    let shown = api.get("/v1/jobs/p1").await;
    assert_eq!(
        shown.body["progress"]["message"],
        "a\u{fffd}[31m\u{fffd}b\u{fffd}2J"
    );
}
