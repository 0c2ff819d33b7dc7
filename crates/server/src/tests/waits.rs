//! `GET /v1/jobs/{id}?wait=`: a long poll that answers when the job has
//! ended, bounded in time and in how many requests wait at once.

use std::time::Duration;

use axum::http::{StatusCode, header};
use errand::ClaimRequest;
use serde_json::json;

use super::Api;
use crate::ServerConfig;

fn claim_one() -> ClaimRequest {
    ClaimRequest {
        queues: Vec::new(),
        limit: 1,
        lease: Duration::from_secs(30),
        rate: None,
        reclaim: false,
    }
}

#[tokio::test]
async fn a_waiting_request_answers_once_its_job_has_ended() {
    let api = Api::new();
    let created = api
        .post("/v1/jobs", &json!({"kind": "k", "id": "w1"}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let store = api.q.store();
    let end = async {
        let claimed = store.claim(&claim_one()).await.unwrap();
        store.complete(&claimed[0].lease).await.unwrap();
    };
    let (answer, ()) = tokio::time::timeout(Duration::from_secs(15), async {
        tokio::join!(api.get("/v1/jobs/w1?wait=20s"), end)
    })
    .await
    .expect("the waiting request answers once the job is done, not at the end of its wait");
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["state"], "done", "{}", answer.body);
}

#[tokio::test]
async fn a_wait_that_runs_out_answers_with_the_job_as_it_stands() {
    let api = Api::new();
    api.post("/v1/jobs", &json!({"kind": "k", "id": "w2"}))
        .await;
    let answer = api.get("/v1/jobs/w2?wait=50ms").await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    assert_eq!(answer.body["state"], "ready");
    api.get("/v1/jobs/none?wait=50ms")
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
    api.get("/v1/jobs/w2?wait=61s")
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    api.get("/v1/jobs/w2?wait=soon")
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    api.get("/v1/jobs/w2?until=1s")
        .await
        .problem(StatusCode::BAD_REQUEST, "malformed_json");
}

#[tokio::test]
async fn past_the_most_waiting_requests_one_more_is_told_to_retry() {
    let api = Api::with(ServerConfig {
        max_job_waits: 1,
        ..ServerConfig::default()
    });
    api.post("/v1/jobs", &json!({"kind": "k", "id": "w3"}))
        .await;
    // Two at once with one place: one waits its time out, the other is
    // refused at once.
    let (a, b) = tokio::join!(
        api.get("/v1/jobs/w3?wait=300ms"),
        api.get("/v1/jobs/w3?wait=300ms")
    );
    let (waited, refused) = if a.status == StatusCode::OK {
        (a, b)
    } else {
        (b, a)
    };
    assert_eq!(waited.status, StatusCode::OK, "{}", waited.body);
    refused.problem(StatusCode::SERVICE_UNAVAILABLE, "busy");
    assert_eq!(refused.headers[header::RETRY_AFTER], "1");
    // The place is free again once the wait is over, and a read without
    // `wait` never needs one.
    assert_eq!(
        api.get("/v1/jobs/w3?wait=10ms").await.status,
        StatusCode::OK
    );
    assert_eq!(api.get("/v1/jobs/w3").await.status, StatusCode::OK);
}

#[tokio::test]
async fn waiting_requests_must_leave_connections_for_the_others() {
    let config = |waits, connections| ServerConfig {
        max_job_waits: waits,
        max_connections: connections,
        ..ServerConfig::default()
    };
    let refused = config(4, 4).check().unwrap_err().to_string();
    assert!(refused.contains("--max-job-waits"), "{refused}");
    assert!(config(3, 4).check().is_ok());
    assert!(config(0, 1).check().is_ok(), "no waits at all is allowed");
    assert!(ServerConfig::default().check().is_ok());

    // With no place, every wait is told to retry; a plain read is not.
    let api = Api::with(config(0, 4));
    api.post("/v1/jobs", &json!({"kind": "k", "id": "w4"}))
        .await;
    api.get("/v1/jobs/w4?wait=1s")
        .await
        .problem(StatusCode::SERVICE_UNAVAILABLE, "busy");
    assert_eq!(api.get("/v1/jobs/w4").await.status, StatusCode::OK);
}
