//! Signals over HTTP: an enqueue with `"await"`, `POST /v1/jobs/{id}/signals`
//! (delivered, kept, refused, audited), and a remote worker's suspend
//! (`POST /v1/leases/{id}/await`) resumed with the signal in its next lease.

use axum::http::StatusCode;
use serde_json::json;

use super::Api;

#[tokio::test]
async fn a_job_enqueued_to_wait_is_released_by_its_signal() {
    let api = Api::new();
    let created = api
        .post(
            "/v1/jobs",
            &json!({"kind": "hold", "id": "h1",
                    "await": {"signal": "paid", "timeout": "15m", "on_timeout": "run"}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["job"]["state"], "waiting");
    assert_eq!(created.body["job"]["awaiting"]["on_timeout"], "run");
    api.post(
        "/v1/jobs",
        &json!({"kind": "hold", "await": {"signal": "paid", "on_timeout": "later"}}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "invalid");

    api.post("/v1/jobs/h1/signals", &json!({"name": "shipped"}))
        .await
        .problem(StatusCode::CONFLICT, "invalid_state");
    api.post("/v1/jobs/none/signals", &json!({"name": "paid"}))
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
    api.post(
        "/v1/jobs/h1/signals",
        &json!({"name": "paid", "reason": "why"}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "invalid");
    let kept = api
        .post(
            "/v1/jobs/h1/signals",
            &json!({"name": "shipped", "buffer": true}),
        )
        .await;
    assert_eq!(kept.status, StatusCode::OK, "{}", kept.body);
    assert_eq!(kept.body["delivered"], false);
    let sent = api
        .post(
            "/v1/jobs/h1/signals",
            &json!({"name": "paid", "payload": {"payment": "p-1"},
                    "operator": "alice", "reason": "paid by phone"}),
        )
        .await;
    assert_eq!(sent.status, StatusCode::OK, "{}", sent.body);
    assert_eq!(sent.body["delivered"], true);
    assert_eq!(sent.body["job"]["state"], "ready");
    let shown = api.get("/v1/jobs/h1").await;
    assert_eq!(
        shown.body["signals"].as_array().unwrap().len(),
        2,
        "{}",
        shown.body
    );
    assert_eq!(shown.body["audit"][0]["action"], "signal");
    assert_eq!(shown.body["audit"][0]["operator"], "alice");
    assert!(shown.body["resumed_by"].is_i64(), "{}", shown.body);
}

#[tokio::test]
async fn a_remote_worker_suspends_and_its_next_lease_carries_the_signal() {
    let api = Api::new();
    api.post("/v1/jobs", &json!({"kind": "review", "id": "r1"}))
        .await;
    let leased = api.post("/v1/leases", &json!({})).await;
    assert_eq!(leased.status, StatusCode::OK, "{}", leased.body);
    let lease = &leased.body["jobs"][0]["lease"];
    assert!(leased.body["jobs"][0].get("signal").is_none());
    let suspended = api
        .post(
            "/v1/leases/r1/await",
            &json!({"token": lease["token"], "attempt": 1,
                    "signal": "approved", "timeout": "1h", "on_timeout": "cancel"}),
        )
        .await;
    assert_eq!(suspended.status, StatusCode::OK, "{}", suspended.body);
    assert_eq!(suspended.body["outcome"], "awaiting");
    assert_eq!(suspended.body["job"]["state"], "waiting");
    // The lease is gone: a late settlement is refused.
    api.post(
        "/v1/leases/r1/complete",
        &json!({"token": lease["token"], "attempt": 1}),
    )
    .await
    .problem(StatusCode::CONFLICT, "lease_lost");
    let none = api.post("/v1/leases", &json!({})).await;
    assert_eq!(
        none.body["jobs"].as_array().unwrap().len(),
        0,
        "{}",
        none.body
    );

    api.post(
        "/v1/jobs/r1/signals",
        &json!({"name": "approved", "payload": {"ok": true}}),
    )
    .await;
    let again = api.post("/v1/leases", &json!({})).await;
    let job = &again.body["jobs"][0];
    assert_eq!(job["signal"]["name"], "approved", "{}", again.body);
    assert_eq!(job["signal"]["payload"]["ok"], true);
}
