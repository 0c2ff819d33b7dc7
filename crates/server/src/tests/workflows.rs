//! `GET /v1/workflows/{id}`, the workflow actions, and tags and metadata
//! through the API.

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::Api;
use super::openapi::{keys, property_names};

async fn three_steps(api: &Api) {
    for body in [
        json!({"kind": "fetch", "id": "a", "workflow": "w/1", "tags": ["eu", "customer:42"], "meta": {"owner": "ada"}}),
        json!({"kind": "parse", "id": "b", "workflow": "w/1", "depends_on": ["a"], "tags": ["eu"]}),
        json!({"kind": "report", "id": "c", "workflow": "w/1", "depends_on": ["a", "b"]}),
        json!({"kind": "other", "id": "d", "tags": ["eu"]}),
    ] {
        let r = api.post("/v1/jobs", &body).await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    }
}

fn ids(jobs: &Value) -> Vec<&str> {
    jobs.as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn a_workflow_shows_its_steps_with_their_dependencies_and_counts() {
    let api = Api::new();
    three_steps(&api).await;
    let r = api.get("/v1/workflows/w%2F1").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["id"], "w/1");
    assert_eq!(r.body["total"], 3);
    assert_eq!(
        r.body["states"],
        json!([{"state": "blocked", "count": 2}, {"state": "ready", "count": 1}])
    );
    assert_eq!(ids(&r.body["steps"]), ["a", "b", "c"]);
    assert_eq!(r.body["steps"][2]["depends_on"], json!(["a", "b"]));
    assert_eq!(r.body["steps"][0]["depends_on"], json!([]));
    assert_eq!(r.body["steps"][0]["meta"], json!({"owner": "ada"}));
    let doc: Value = serde_json::from_str(crate::routes::OPENAPI).unwrap();
    let mut documented = property_names(&doc, "Workflow");
    documented.remove("next_after");
    assert_eq!(keys(&r.body), documented, "the last page has no next_after");
    // A page of one step names where the next starts.
    let page = api.get("/v1/workflows/w%2F1?limit=1").await;
    assert_eq!(ids(&page.body["steps"]), ["a"]);
    assert_eq!(page.body["next_after"], "a");
    assert_eq!(keys(&page.body), property_names(&doc, "Workflow"));
    let next = api.get("/v1/workflows/w%2F1?limit=1&after=a").await;
    assert_eq!(ids(&next.body["steps"]), ["b"]);
    // The step schema is the job's plus its dependencies (c has no
    // dependents and never ran).
    let mut step = property_names(&doc, "WorkflowStep");
    step.retain(|p| p != "has_dependents" && p != "progress" && p != "key");
    step.retain(|p| !["deadline", "traceparent", "unique_key", "batch"].contains(&p.as_str()));
    assert_eq!(keys(&r.body["steps"][2]), step);
    api.get("/v1/workflows/nope")
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
    api.get("/v1/workflows/a%20b")
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
}

#[tokio::test]
async fn cancelling_a_workflow_cancels_its_unfinished_steps_audited() {
    let api = Api::new();
    three_steps(&api).await;
    let r = api
        .post(
            "/v1/workflows/w%2F1/cancel",
            &json!({"operator": "alice", "reason": "order withdrawn"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["workflow"], "w/1");
    let mut changed = ids(&r.body["jobs"]);
    changed.sort_unstable();
    assert_eq!(changed, ["a", "b", "c"]);
    let doc: Value = serde_json::from_str(crate::routes::OPENAPI).unwrap();
    assert_eq!(keys(&r.body), property_names(&doc, "WorkflowActed"));
    // The body's operator and reason reach each step's entry (which steps
    // are cancelled, and the entry's wording, are conformance's
    // `cancelling_or_replaying_a_workflow_acts_on_its_steps_with_audit`).
    let audit = api.get("/v1/audit?job=c").await;
    let entry = &audit.body["entries"][0];
    assert_eq!(
        (entry["operator"].as_str(), entry["reason"].as_str()),
        (Some("alice"), Some("cancel workflow w/1: order withdrawn")),
        "{}",
        audit.body
    );
    api.post("/v1/workflows/w%2F1/cancel", &json!({"operator": ""}))
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    api.post("/v1/workflows/nope/replay", &json!({"operator": "alice"}))
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
}

#[tokio::test]
async fn jobs_are_listed_by_tag_and_by_workflow() {
    let api = Api::new();
    three_steps(&api).await;
    let eu = api.get("/v1/jobs?tag=eu").await;
    assert_eq!(ids(&eu.body["jobs"]), ["a", "b", "d"], "{}", eu.body);
    let customer = api.get("/v1/jobs?tag=customer:42").await;
    assert_eq!(ids(&customer.body["jobs"]), ["a"]);
    assert_eq!(
        customer.body["jobs"][0]["tags"],
        json!(["eu", "customer:42"])
    );
    let blocked = api.get("/v1/jobs?workflow=w/1&state=blocked").await;
    assert_eq!(ids(&blocked.body["jobs"]), ["b", "c"]);
    let both = api.get("/v1/jobs?workflow=w/1&tag=eu&limit=1").await;
    assert_eq!(ids(&both.body["jobs"]), ["a"]);
    assert_eq!(both.body["next"], "a");
    let rest = api.get("/v1/jobs?workflow=w/1&tag=eu&after=a").await;
    assert_eq!(ids(&rest.body["jobs"]), ["b"]);
    api.get("/v1/jobs?tag=a%20b")
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    // Refused labels write nothing.
    let before = api.count().await;
    api.post("/v1/jobs", &json!({"kind": "k", "tags": ["x", "x"]}))
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    api.post("/v1/jobs", &json!({"kind": "k", "meta": {"bad key": "v"}}))
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    api.post("/v1/jobs", &json!({"kind": "k", "meta": {"k": 1}}))
        .await
        .problem(StatusCode::BAD_REQUEST, "malformed_json");
    api.post("/v1/jobs", &json!({"kind": "k", "workflow": ""}))
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    assert_eq!(api.count().await, before);
}

#[tokio::test]
async fn unique_and_debounced_enqueues_answer_with_the_job_that_stands_in() {
    let api = Api::new();
    let body = json!({"kind": "sync", "payload": {"account": 9}, "unique_for": "10m"});
    let first = api.post("/v1/jobs", &body).await;
    assert_eq!(first.status, StatusCode::CREATED, "{}", first.body);
    let key = first.body["job"]["unique_key"].as_str().unwrap().to_owned();
    assert!(key.starts_with("sync:"), "{key}");
    let again = api.post("/v1/jobs", &body).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["created"], false);
    assert_eq!(again.body["job"]["id"], first.body["job"]["id"]);
    let doc: Value = serde_json::from_str(crate::routes::OPENAPI).unwrap();
    let mut documented = property_names(&doc, "Job");
    for absent in [
        "key",
        "deadline",
        "traceparent",
        "progress",
        "workflow",
        "batch",
    ] {
        documented.remove(absent);
    }
    for absent in [
        "on_dependency_failure",
        "has_dependents",
        "awaiting",
        "resumed_by",
        "added_by",
    ] {
        documented.remove(absent);
    }
    assert_eq!(keys(&first.body["job"]), documented);

    let bounce = |v: u32| json!({"kind": "reindex", "payload": {"v": v}, "debounce": "30s", "unique_key": "user:7"});
    let d1 = api.post("/v1/jobs", &bounce(1)).await;
    let d2 = api.post("/v1/jobs", &bounce(2)).await;
    assert_eq!(
        (d1.status, d2.status),
        (StatusCode::CREATED, StatusCode::OK)
    );
    assert_eq!(d2.body["job"]["id"], d1.body["job"]["id"]);
    assert_eq!(d2.body["job"]["payload"], json!({"v": 2}));

    let live = json!({"kind": "rebuild", "unique_while": ["ready", "running"]});
    assert_eq!(
        api.post("/v1/jobs", &live).await.status,
        StatusCode::CREATED
    );
    assert_eq!(api.post("/v1/jobs", &live).await.status, StatusCode::OK);

    let before = api.count().await;
    for bad in [
        json!({"kind": "k", "unique_for": "10m", "debounce": "5s"}),
        json!({"kind": "k", "unique_key": "x"}),
        json!({"kind": "k", "unique_while": ["nowhere"]}),
        json!({"kind": "k", "debounce": "5s", "delay": "1s"}),
        json!({"kind": "k", "unique_for": "0s"}),
    ] {
        api.post("/v1/jobs", &bad)
            .await
            .problem(StatusCode::BAD_REQUEST, "invalid");
    }
    assert_eq!(api.count().await, before);
}

#[tokio::test]
async fn a_batch_is_filled_then_sealed_and_shows_its_callbacks() {
    let api = Api::new();
    for id in ["m1", "m2"] {
        let r = api
            .post(
                "/v1/jobs",
                &json!({"kind": "resize", "id": id, "batch": "import-42"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        assert_eq!(r.body["job"]["batch"], "import-42");
    }
    let open = api.get("/v1/batches/import-42").await;
    assert_eq!(open.status, StatusCode::OK, "{}", open.body);
    assert_eq!(open.body["sealed_at"], Value::Null);
    assert_eq!(open.body["total"], 2);
    let sealed = api
        .post(
            "/v1/batches/import-42/seal",
            &json!({"on_success": {"kind": "notify", "id": "done-42", "payload": {"n": 1}}, "on_finish": {"kind": "cleanup", "queue": "ops"}}),
        )
        .await;
    assert_eq!(sealed.status, StatusCode::OK, "{}", sealed.body);
    assert_eq!(sealed.body["on_success"], "done-42");
    assert_eq!(sealed.body["on_success_job"]["state"], "blocked");
    assert_eq!(sealed.body["on_success_job"]["waiting_on"], 2);
    assert_eq!(sealed.body["on_finish_job"]["queue"], "ops");
    let doc: Value = serde_json::from_str(crate::routes::OPENAPI).unwrap();
    assert_eq!(keys(&sealed.body), property_names(&doc, "Batch"));
    // A sealed batch takes no more jobs; nothing is written.
    let before = api.count().await;
    api.post("/v1/jobs", &json!({"kind": "resize", "batch": "import-42"}))
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    assert_eq!(api.count().await, before);
    api.get("/v1/batches/nope")
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
    api.post(
        "/v1/batches/x/seal",
        &json!({"on_success": {"kind": "bad kind"}}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "invalid");
    api.post(
        "/v1/batches/x/seal",
        &json!({"on_success": {"kind": "k", "delay": "1s"}}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "malformed_json");
}

/// A remote worker completes a step with `children`: they are stored in
/// the step's workflow and the join waits for them; a child that breaks a
/// rule is refused (400, naming it) and nothing is written, the lease
/// still held; a completion under a lost lease adds nothing (409).
#[tokio::test]
async fn a_remote_worker_adds_children_with_its_completion() {
    let api = Api::new();
    for body in [
        json!({"kind": "list", "id": "list", "workflow": "rep"}),
        json!({"kind": "join", "id": "join", "workflow": "rep", "depends_on": ["list"]}),
    ] {
        let created = api.post("/v1/jobs", &body).await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    }
    let leased = api.post("/v1/leases", &json!({})).await;
    let token = leased.body["jobs"][0]["lease"]["token"].clone();
    api.post(
        "/v1/leases/list/complete",
        &json!({"token": token, "children": [{"kind": "page", "id": "p1"},
                                             {"kind": "page", "colour": "red"}]}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "malformed_json");
    let late = api
        .post(
            "/v1/leases/list/complete",
            &json!({"token": token, "children": [{"kind": "page", "id": "p1"},
                                                 {"kind": "page", "delay": "soon"}]}),
        )
        .await;
    late.problem(StatusCode::BAD_REQUEST, "invalid");
    let detail = late.body["detail"].as_str().unwrap();
    assert!(detail.starts_with("`children[1]`: `delay`"), "{detail}");
    api.post(
        "/v1/leases/list/complete",
        &json!({"token": token, "children": [{"kind": "page", "depends_on": ["join"]}]}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "invalid");
    assert_eq!(api.get("/v1/jobs/list").await.body["state"], "running");
    assert_eq!(api.get("/v1/jobs/p1").await.status, StatusCode::NOT_FOUND);
    let done = api
        .post(
            "/v1/leases/list/complete",
            &json!({"token": token, "output": {"pages": 2},
                    "children": [{"kind": "page", "id": "p1", "payload": {"n": 1}},
                                 {"kind": "page", "id": "p2", "depends_on": ["p1"]}]}),
        )
        .await;
    assert_eq!(done.status, StatusCode::OK, "{}", done.body);
    assert_eq!(done.body["outcome"], "acknowledged");
    let doc: Value = serde_json::from_str(crate::routes::OPENAPI).unwrap();
    assert_eq!(keys(&done.body), property_names(&doc, "Completed"));
    assert_eq!(done.body["job"]["state"], "done");
    assert_eq!(done.body["dependents"], 1);
    let kids: Vec<(&str, &str, &str)> = done.body["children"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["id"].as_str().unwrap(),
                c["state"].as_str().unwrap(),
                c["workflow"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(kids, [("p1", "ready", "rep"), ("p2", "blocked", "rep")]);
    assert_eq!(done.body["children"][0]["added_by"], "list");
    let join = api.get("/v1/jobs/join").await;
    assert_eq!(join.body["waiting_on"], 2, "{}", join.body);
    api.post(
        "/v1/leases/list/complete",
        &json!({"token": token, "children": [{"kind": "page", "id": "p3"}]}),
    )
    .await
    .problem(StatusCode::CONFLICT, "lease_lost");
    assert_eq!(api.get("/v1/jobs/p3").await.status, StatusCode::NOT_FOUND);
}
