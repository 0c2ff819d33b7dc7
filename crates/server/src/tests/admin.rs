//! The operator's routes: stats, pause and resume, purge, the audit log and
//! `/metrics`, with their refusals writing nothing.

use axum::http::StatusCode;
use errand::{ClaimRequest, ErrorClass, Failure, WorkerMetrics, WorkerReport};
use serde_json::json;

use super::Api;

fn claim_all() -> ClaimRequest {
    ClaimRequest {
        queues: Vec::new(),
        limit: 10,
        lease: std::time::Duration::from_secs(30),
        rate: None,
        reclaim: true,
    }
}

/// Enqueues `id` on `queue` through the API and, with `dead`, fails it
/// permanently.
async fn seed(api: &Api, id: &str, queue: &str, dead: bool) {
    let r = api
        .post("/v1/jobs", &json!({"kind": "k", "id": id, "queue": queue}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    if dead {
        let store = api.q.store();
        let claimed = store.claim(&claim_all()).await.unwrap();
        for c in claimed {
            let failure = Failure {
                error: "no such customer".into(),
                class: ErrorClass::Permanent,
                retry: None,
            };
            store.fail(&c.lease, failure).await.unwrap();
        }
    }
}

/// Pause and resume answer with the queue's state, and the paused queues
/// are listed with their reason (what a pause does to claims is
/// conformance's `a_paused_queue_gives_nothing_to_claims_until_resumed`).
#[tokio::test]
async fn a_queue_is_paused_and_resumed_over_http_and_listed_with_its_reason() {
    let api = Api::new();
    seed(&api, "m1", "mail", false).await;
    let r = api
        .post(
            "/v1/queues/mail/pause",
            &json!({"operator": "alice", "reason": "provider outage"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"queue": "mail", "paused": true, "changed": true})
    );
    let again = api
        .post("/v1/queues/mail/pause", &json!({"operator": "alice"}))
        .await;
    assert_eq!(again.body["changed"], false);
    let listed = api.get("/v1/queues/paused").await;
    assert_eq!(listed.body["queues"][0]["queue"], "mail");
    assert_eq!(listed.body["queues"][0]["reason"], "provider outage");

    let r = api
        .post("/v1/queues/mail/resume", &json!({"operator": "alice"}))
        .await;
    assert_eq!(
        r.body,
        json!({"queue": "mail", "paused": false, "changed": true})
    );
}

#[tokio::test]
async fn refused_queue_actions_write_nothing() {
    let api = Api::new();
    for (uri, body, code) in [
        ("/v1/queues/mail/pause", json!({}), "malformed_json"),
        ("/v1/queues/mail/pause", json!({"operator": ""}), "invalid"),
        (
            "/v1/queues/mail/pause",
            json!({"operator": "a\u{0}b"}),
            "invalid",
        ),
        (
            "/v1/queues/mail/pause",
            json!({"operator": "a", "extra": 1}),
            "malformed_json",
        ),
        (
            "/v1/queues/bad%20name/pause",
            json!({"operator": "a"}),
            "invalid",
        ),
        (
            "/v1/queues/mail/pause",
            json!({"operator": "a", "reason": 7}),
            "malformed_json",
        ),
    ] {
        let r = api.post(uri, &body).await;
        r.problem(StatusCode::BAD_REQUEST, code);
    }
    assert!(api.q.store().paused_queues().await.unwrap().is_empty());
    let audit = api.get("/v1/audit").await;
    assert_eq!(audit.body["entries"], json!([]));
}

#[tokio::test]
async fn a_queue_cap_is_set_listed_shown_in_stats_and_cleared() {
    let api = Api::new();
    let body = json!({"concurrency": 5, "operator": "alice", "reason": "provider allows 5"});
    let r = api.post("/v1/queues/mail/limit", &body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.body,
        json!({"queue": "mail", "concurrency_limit": 5, "changed": true})
    );
    let again = api.post("/v1/queues/mail/limit", &body).await;
    assert_eq!(again.body["changed"], false);
    let listed = api.get("/v1/queues/limits").await;
    assert_eq!(listed.body["queues"][0]["queue"], "mail");
    assert_eq!(listed.body["queues"][0]["concurrency"], 5);
    assert_eq!(listed.body["queues"][0]["reason"], "provider allows 5");
    let stats = api.get("/v1/stats").await;
    assert_eq!(stats.body["queues"][0]["queue"], "mail");
    assert_eq!(stats.body["queues"][0]["concurrency_limit"], 5);

    let r = api
        .post(
            "/v1/queues/mail/limit",
            &json!({"clear": true, "operator": "alice"}),
        )
        .await;
    assert_eq!(
        r.body,
        json!({"queue": "mail", "concurrency_limit": null, "changed": true})
    );
    assert_eq!(api.get("/v1/queues/limits").await.body["queues"], json!([]));
    let audit = api.get("/v1/audit").await;
    let actions: Vec<&str> = audit.body["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["unlimit", "limit"]);
}

#[tokio::test]
async fn refused_queue_caps_write_nothing() {
    let api = Api::new();
    for (body, code) in [
        (json!({"concurrency": 0, "operator": "a"}), "invalid"),
        (json!({"concurrency": 100_001, "operator": "a"}), "invalid"),
        (
            json!({"concurrency": 1_000_000_000, "operator": "a"}),
            "invalid",
        ),
        (
            json!({"concurrency": -1, "operator": "a"}),
            "malformed_json",
        ),
        (json!({"operator": "a"}), "invalid"),
        (
            json!({"concurrency": 3, "clear": true, "operator": "a"}),
            "invalid",
        ),
        (json!({"concurrency": 3}), "malformed_json"),
        (json!({"concurrency": 3, "operator": ""}), "invalid"),
        (
            json!({"concurrency": 3, "operator": "a", "limit": 3}),
            "malformed_json",
        ),
    ] {
        let r = api.post("/v1/queues/mail/limit", &body).await;
        r.problem(StatusCode::BAD_REQUEST, code);
    }
    assert!(api.q.store().queue_limits().await.unwrap().is_empty());
    assert_eq!(api.get("/v1/audit").await.body["entries"], json!([]));
}

#[tokio::test]
async fn purge_deletes_a_dead_job_refuses_others_and_the_audit_remembers() {
    let api = Api::new();
    seed(&api, "dead-1", "mail", true).await;
    seed(&api, "live-1", "mail", false).await;
    let body = json!({"operator": "alice", "reason": "poison payload"});
    let r = api.post("/v1/jobs/live-1/purge", &body).await;
    r.problem(StatusCode::CONFLICT, "invalid_state");
    let r = api
        .post("/v1/jobs/dead-1/purge", &json!({"operator": "alice"}))
        .await;
    r.problem(StatusCode::BAD_REQUEST, "malformed_json");
    assert_eq!(api.count().await, 2, "refused purges deleted nothing");

    let r = api.post("/v1/jobs/dead-1/purge", &body).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body, json!({"purged": ["dead-1"]}));
    api.post("/v1/jobs/dead-1/purge", &body)
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");

    // The body's operator and reason reach the entry, which outlives the
    // job (what it holds is conformance's
    // `purge_deletes_only_dead_jobs_and_its_audit_outlives_them`).
    let audit = api.get("/v1/audit?job=dead-1").await;
    assert_eq!(audit.status, StatusCode::OK, "{}", audit.body);
    let e = &audit.body["entries"][0];
    assert_eq!(
        (&e["operator"], &e["reason"]),
        (&json!("alice"), &json!("poison payload"))
    );
    assert_eq!(audit.body["next"], json!(null));
}

#[tokio::test]
async fn the_audit_log_pages_by_seq_and_refuses_bad_parameters() {
    let api = Api::new();
    for q in ["a", "b", "c"] {
        api.post(&format!("/v1/queues/{q}/pause"), &json!({"operator": "op"}))
            .await;
    }
    let first = api.get("/v1/audit?limit=2").await;
    let entries = first.body["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 2);
    let next = first.body["next"].as_u64().unwrap();
    let second = api.get(&format!("/v1/audit?limit=2&before={next}")).await;
    let rest = second.body["entries"].as_array().unwrap();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["queue"], "a");
    assert_eq!(second.body["next"], json!(null));
    for bad in [
        "/v1/audit?limit=0",
        "/v1/audit?before=-1",
        "/v1/audit?queue=no%20spaces",
        "/v1/audit?job=bad%00id",
    ] {
        api.get(bad)
            .await
            .problem(StatusCode::BAD_REQUEST, "invalid");
    }
    api.get("/v1/audit?sort=asc")
        .await
        .problem(StatusCode::BAD_REQUEST, "malformed_json");
}

#[tokio::test]
async fn stats_count_queues_and_refuse_a_bad_window() {
    let api = Api::new();
    seed(&api, "d", "mail", true).await;
    seed(&api, "r", "mail", false).await;
    let r = api.get("/v1/stats?window=1h").await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["window_secs"], 3600);
    let mail = &r.body["queues"][0];
    assert_eq!(
        (&mail["queue"], &mail["ready"], &mail["dead"]),
        (&json!("mail"), &json!(1), &json!(1))
    );
    assert_eq!(mail["dead_letters"], json!({"permanent": 1}));
    for bad in [
        "/v1/stats?window=0s",
        "/v1/stats?window=8d",
        "/v1/stats?window=soon",
    ] {
        api.get(bad)
            .await
            .problem(StatusCode::BAD_REQUEST, "invalid");
    }
}

#[tokio::test]
async fn metrics_expose_the_operator_signals_in_prometheus_text() {
    let api = Api::new();
    seed(&api, "d", "mail", true).await;
    seed(&api, "r", "mail", false).await;
    api.post("/v1/queues/bulk/pause", &json!({"operator": "op"}))
        .await;
    api.post(
        "/v1/queues/mail/limit",
        &json!({"concurrency": 7, "operator": "op"}),
    )
    .await;
    let mut metrics = WorkerMetrics {
        cycles: 12,
        started: 2,
        on_time: 1,
        ..WorkerMetrics::default()
    };
    metrics
        .start_latency
        .observe(std::time::Duration::from_millis(3));
    metrics
        .start_latency
        .observe(std::time::Duration::from_secs(2));
    metrics.lateness.observe(std::time::Duration::ZERO);
    let report = WorkerReport {
        id: "w1".into(),
        host: "h".into(),
        pid: 1,
        queues: vec![],
        started_at: api.q.now(),
        metrics,
        one_shot: false,
    };
    api.q.store().report_worker(&report).await.unwrap();
    api.q.advance(std::time::Duration::from_secs(4));

    let r = api.get("/metrics").await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("application/openmetrics-text")
    );
    let text = r.body.as_str().unwrap();
    for line in [
        r#"errand_jobs{queue="mail",state="ready"} 1"#,
        r#"errand_jobs{queue="mail",state="dead"} 1"#,
        r#"errand_jobs_truncated{state="ready"} 0"#,
        r#"errand_leases{queue="mail",lease="live"} 0"#,
        r#"errand_queue_paused{queue="bulk"} 1"#,
        r#"errand_queue_paused{queue="mail"} 0"#,
        r#"errand_queue_concurrency_limit{queue="mail"} 7"#,
        r#"errand_dead_letters_recent{queue="mail",class="permanent",window="900s"} 1"#,
        "errand_workers 1",
        "errand_seconds_since_last_worker_cycle 4.0",
        r#"errand_worker_cycles_total{worker="w1",host="h"} 12"#,
        r#"errand_attempts_started_total{worker="w1",host="h"} 2"#,
        r#"errand_deadline_met_total{worker="w1",host="h"} 1"#,
        r#"errand_start_latency_seconds_count{worker="w1",host="h"} 2"#,
        r#"errand_start_latency_seconds_bucket{le="0.005",worker="w1",host="h"} 1"#,
        r#"errand_start_latency_seconds_bucket{le="2.5",worker="w1",host="h"} 2"#,
        r#"errand_start_latency_seconds_bucket{le="+Inf",worker="w1",host="h"} 2"#,
        r#"errand_lateness_seconds_count{worker="w1",host="h"} 1"#,
        "# EOF",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing `{line}` in:\n{text}"
        );
    }
    assert!(
        text.lines()
            .any(|l| l.starts_with("errand_oldest_due_age_seconds{queue=\"mail\"} "))
    );
    assert!(
        !text.contains(r#"errand_queue_concurrency_limit{queue="bulk"}"#),
        "a queue without a cap has no cap gauge"
    );
}

fn worker_report(api: &Api, id: &str) -> WorkerReport {
    WorkerReport {
        id: id.into(),
        host: "h".into(),
        pid: 1,
        queues: vec![],
        started_at: api.q.now(),
        metrics: WorkerMetrics {
            cycles: 3,
            ..WorkerMetrics::default()
        },
        one_shot: false,
    }
}

#[tokio::test]
async fn metrics_spell_an_infinite_age_plus_inf() {
    let api = Api::new();
    let r = api.get("/metrics").await;
    assert_eq!(r.status, StatusCode::OK);
    let text = r.body.as_str().unwrap();
    assert!(
        text.lines()
            .any(|l| l == "errand_seconds_since_last_worker_cycle +Inf"),
        "no worker ever reported: +Inf in:\n{text}"
    );
    assert!(
        !text
            .lines()
            .any(|l| !l.starts_with('#') && (l.ends_with(" inf") || l.ends_with("-inf"))),
        "a value OpenMetrics cannot read in:\n{text}"
    );
}

#[tokio::test]
async fn metrics_drop_the_series_of_a_worker_silent_past_the_window() {
    let api = Api::new();
    let store = api.q.store();
    store
        .report_worker(&worker_report(&api, "gone"))
        .await
        .unwrap();
    store
        .report_worker(&worker_report(&api, "alive"))
        .await
        .unwrap();
    let series = |text: &str, worker: &str| {
        text.lines()
            .filter(|l| l.contains(&format!("worker=\"{worker}\"")))
            .count()
    };
    let text = api.get("/metrics").await.body.as_str().unwrap().to_owned();
    assert!(
        series(&text, "gone") > 0 && series(&text, "alive") > 0,
        "{text}"
    );
    assert!(text.lines().any(|l| l == "errand_workers 2"), "{text}");

    // "alive" keeps reporting; "gone" stops. The window of /metrics is the
    // statistics window (15 minutes).
    let window = errand::StatsRequest::default().window;
    api.q.advance(window / 2);
    store
        .report_worker(&worker_report(&api, "alive"))
        .await
        .unwrap();
    api.q
        .advance(window / 2 + std::time::Duration::from_secs(1));
    store
        .report_worker(&worker_report(&api, "alive"))
        .await
        .unwrap();

    let text = api.get("/metrics").await.body.as_str().unwrap().to_owned();
    assert_eq!(
        series(&text, "gone"),
        0,
        "a silent worker's series:\n{text}"
    );
    assert!(series(&text, "alive") > 0, "{text}");
    assert!(text.lines().any(|l| l == "errand_workers 1"), "{text}");
    assert!(
        text.lines()
            .any(|l| l == r#"errand_worker_cycles_total{worker="alive",host="h"} 3"#),
        "{text}"
    );
    // Its report is still kept (and listed by the statistics) for a day.
    let stats = api.get("/v1/stats").await;
    let ids: Vec<&str> = stats.body["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|w| w["id"].as_str())
        .collect();
    assert_eq!(ids, ["alive", "gone"]);
}

/// `POST /v1/bulk/replay` matches `errand replay`: by filter with a bound
/// or by ids, a dry run, a refusal as 409, `new_key` copies; a request
/// naming neither or both is refused. What the action does is conformance's
/// (bulk.rs: `an_action_over_a_selection_is_judged_and_taken_in_one_call`,
/// `a_filter_selects_by_kind_error_text_and_when_the_job_ended`).
#[tokio::test]
async fn bulk_replay_by_filter_or_ids_with_a_dry_run_and_copies() {
    let api = Api::new();
    seed(&api, "m1", "mail", true).await;
    seed(&api, "m2", "mail", true).await;
    seed(&api, "s1", "sms", true).await;
    seed(&api, "live", "mail", false).await;

    let dry = api
        .post(
            "/v1/bulk/replay",
            &json!({"filter": {"queue": "mail"}, "dry_run": true, "operator": "alice"}),
        )
        .await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.body);
    assert_eq!(dry.body["dry_run"], true);
    let ids: Vec<&str> = dry.body["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["m1", "m2"], "dead jobs of the queue only");

    let limited = api
        .post(
            "/v1/bulk/replay",
            &json!({"filter": {"queue": "mail", "limit": 1}, "operator": "alice", "reason": "relay fixed"}),
        )
        .await;
    assert_eq!(limited.status, StatusCode::OK, "{}", limited.body);
    assert_eq!(limited.body["jobs"].as_array().unwrap().len(), 1);

    // By ids: a live job refuses the whole request.
    let refused = api
        .post(
            "/v1/bulk/replay",
            &json!({"ids": ["m2", "live"], "operator": "alice"}),
        )
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);

    // new_key answers with copies.
    let copied = api
        .post(
            "/v1/bulk/replay",
            &json!({"ids": ["s1"], "new_key": true, "operator": "alice", "reason": "fresh id"}),
        )
        .await;
    assert_eq!(copied.status, StatusCode::OK, "{}", copied.body);
    assert_eq!(copied.body["copies"][0]["from"], "s1");
    assert!(copied.body["copies"][0]["job"]["id"].is_string());

    for body in [
        json!({"operator": "alice"}),
        json!({"ids": ["m2"], "filter": {"queue": "mail"}, "operator": "alice"}),
        json!({"ids": [], "operator": "alice"}),
    ] {
        api.post("/v1/bulk/replay", &body)
            .await
            .problem(StatusCode::BAD_REQUEST, "invalid");
    }
    api.post(
        "/v1/bulk/replay",
        &json!({"filter": {"limit": 0}, "operator": "alice"}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "invalid");
}

/// A bulk replay answers with the jobs' ids, states and payload sizes,
/// never their payloads: a dry run over dead jobs of 300 KB each, the
/// replay itself and a copy each answer in a few hundred bytes a job.
#[tokio::test]
async fn bulk_answers_name_the_jobs_without_their_payloads() {
    let api = Api::new();
    let store = api.q.store();
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(300_000));
    for id in ["b1", "b2", "b3"] {
        let job = errand::NewJob::new("k", errand::Payload::from_json_text(&big).unwrap())
            .unwrap()
            .with_id(errand::JobId::new(id).unwrap());
        store
            .insert(job.on_queue("bigdead").unwrap())
            .await
            .unwrap();
    }
    for c in store.claim(&claim_all()).await.unwrap() {
        let failure = Failure {
            error: "too big".into(),
            class: ErrorClass::Permanent,
            retry: None,
        };
        store.fail(&c.lease, failure).await.unwrap();
    }
    let small = |reply: &super::Reply, what: &str, list: &str| {
        let text = reply.body.to_string();
        assert!(
            text.len() < 2_000,
            "{what}: {} bytes: {text:.300}",
            text.len()
        );
        for job in reply.body[list].as_array().unwrap() {
            let job = if list == "copies" { &job["job"] } else { job };
            assert!(job.get("payload").is_none(), "{what}: {job}");
            assert_eq!(job["payload_bytes"], big.len(), "{what}: {job}");
        }
    };
    let filter = json!({"queue": "bigdead", "limit": 10_000});
    let dry = api
        .post(
            "/v1/bulk/replay",
            &json!({"filter": filter, "dry_run": true, "operator": "alice"}),
        )
        .await;
    assert_eq!(dry.status, StatusCode::OK, "{}", dry.body);
    assert_eq!(dry.body["jobs"].as_array().unwrap().len(), 3);
    small(&dry, "the dry run", "jobs");
    let copied = api
        .post(
            "/v1/bulk/replay",
            &json!({"ids": ["b3"], "new_key": true, "operator": "alice"}),
        )
        .await;
    assert_eq!(copied.status, StatusCode::OK, "{}", copied.body);
    small(&copied, "the copy", "copies");
    let replayed = api
        .post(
            "/v1/bulk/replay",
            &json!({"filter": filter, "operator": "alice"}),
        )
        .await;
    assert_eq!(replayed.status, StatusCode::OK, "{}", replayed.body);
    assert_eq!(replayed.body["jobs"][0]["state"], "ready");
    small(&replayed, "the replay", "jobs");
}
