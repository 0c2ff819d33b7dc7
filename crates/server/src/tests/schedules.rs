//! The stored schedules through the API: add, the same again, a second
//! definition refused then replaced, list, show, pause, resume, remove,
//! each answer held against `openapi.json` (what each change does and
//! writes is conformance's: storetest's schedules.rs).

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::Api;
use super::openapi::{keys, property_names};
use crate::ServerConfig;

fn doc() -> Value {
    serde_json::from_str(crate::routes::OPENAPI).unwrap()
}

fn nightly() -> Value {
    json!({
        "name": "nightly",
        "cron": "0 3 * * *",
        "kind": "report",
        "payload": {"format": "pdf", "pages": [1, 2]},
        "operator": "alice",
        "reason": "finance asked"
    })
}

/// The same object with `changes` set.
fn with(mut base: Value, changes: &Value) -> Value {
    for (k, v) in changes.as_object().unwrap() {
        base[k] = v.clone();
    }
    base
}

async fn audit(api: &Api, query: &str) -> Vec<Value> {
    let r = api.get(&format!("/v1/audit?{query}")).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    r.body["entries"].as_array().unwrap().clone()
}

/// Checks a schedule object against the `Schedule` schema.
#[track_caller]
fn is_schedule(doc: &Value, s: &Value) {
    assert_eq!(keys(s), property_names(doc, "Schedule"), "{s}");
    if s["paused"].is_object() {
        assert_eq!(
            keys(&s["paused"]),
            property_names(doc, "SchedulePause"),
            "{s}"
        );
    }
}

#[tokio::test]
async fn a_schedule_is_added_once_and_replaced_only_when_asked() {
    let api = Api::new();
    let doc = doc();
    let r = api.post("/v1/schedules", &nightly()).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(keys(&r.body), property_names(&doc, "ScheduleAdded"));
    assert_eq!(r.body["outcome"], "added");
    let s = &r.body["schedule"];
    is_schedule(&doc, s);
    assert_eq!(
        (&s["name"], &s["cron"], &s["kind"]),
        (&json!("nightly"), &json!("0 3 * * *"), &json!("report"))
    );
    assert_eq!(s["payload"], json!({"format": "pdf", "pages": [1, 2]}));
    assert_eq!(
        (&s["queue"], &s["max_attempts"], &s["misfire"], &s["paused"]),
        (&json!("default"), &json!(25), &json!("skip"), &Value::Null),
        "the defaults"
    );
    let next = s["next_tick"].as_str().expect("a running schedule ticks");
    assert!(next.ends_with("T03:00:00.000Z"), "{next}");

    // The same definition (the payload spelled otherwise): nothing written.
    let same = with(
        nightly(),
        &json!({"payload": {"pages": [1, 2], "format": "pdf"}, "queue": "default"}),
    );
    let r = api.post("/v1/schedules", &same).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["outcome"], "unchanged");

    // Another definition under the name: refused without `replace`.
    let other = with(
        nightly(),
        &json!({"cron": "30 2 * * 1-5", "misfire": "backfill:3", "max_attempts": 3, "queue": "reports"}),
    );
    let refused = api.post("/v1/schedules", &other).await;
    refused.problem(StatusCode::BAD_REQUEST, "invalid");
    let detail = refused.body["detail"].as_str().unwrap();
    assert!(detail.contains(r#""replace": true"#), "{detail}");

    let r = api
        .post(
            "/v1/schedules",
            &with(other, &json!({"replace": true, "reason": "weekdays only"})),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["outcome"], "replaced");
    let s = &r.body["schedule"];
    is_schedule(&doc, s);
    assert_eq!(
        (&s["cron"], &s["misfire"], &s["max_attempts"], &s["queue"]),
        (
            &json!("30 2 * * 1-5"),
            &json!("backfill:3"),
            &json!(3),
            &json!("reports")
        )
    );
    // The body's reason reaches the entry (its wording, and which entries
    // are written, are conformance's
    // `a_stored_schedule_is_added_once_and_replaced_only_when_asked`).
    let log = audit(&api, "schedule=nightly").await;
    let reason = log[0]["reason"].as_str().unwrap();
    assert!(reason.ends_with("weekdays only"), "{reason}");
}

#[tokio::test]
async fn schedules_are_listed_by_name_and_shown_one_by_one() {
    let api = Api::new();
    let doc = doc();
    let empty = api.get("/v1/schedules").await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.body);
    assert_eq!(empty.body, json!({"schedules": []}));
    for (name, payload) in [("weekly", json!(null)), ("hourly", json!([1, "two"]))] {
        let r = api
            .post(
                "/v1/schedules",
                &json!({"name": name, "cron": "0 * * * *", "kind": "k", "payload": payload, "operator": "bob"}),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    }
    let list = api.get("/v1/schedules").await;
    assert_eq!(keys(&list.body), property_names(&doc, "Schedules"));
    let all = list.body["schedules"].as_array().unwrap();
    let names: Vec<&str> = all.iter().map(|s| s["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["hourly", "weekly"]);
    for s in all {
        is_schedule(&doc, s);
    }
    assert_eq!(all[1]["payload"], Value::Null, "an explicit null is kept");
    assert_eq!(all[0]["payload"], json!([1, "two"]));

    let one = api.get("/v1/schedules/hourly").await;
    assert_eq!(one.status, StatusCode::OK, "{}", one.body);
    assert_eq!(one.body, all[0]);

    let missing = api.get("/v1/schedules/nope").await;
    missing.problem(StatusCode::NOT_FOUND, "not_found");
    assert_eq!(missing.body["title"], "Not found");
    assert!(
        missing.body["detail"].as_str().unwrap().contains("`nope`"),
        "{}",
        missing.body
    );
    api.get("/v1/schedules/a%20b")
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
}

/// Pause and resume answer with the schedule as changed, whether they
/// changed it, and the entries they write match the documented schema
/// (what they change and write is conformance's
/// `a_stored_schedule_pauses_resumes_and_goes_with_audit`).
#[tokio::test]
async fn pausing_and_resuming_a_schedule_answer_with_it_and_their_entries_are_documented() {
    let api = Api::new();
    let doc = doc();
    api.post(
        "/v1/schedules",
        &with(nightly(), &json!({"queue": "reports"})),
    )
    .await;
    let body = json!({"operator": "carol", "reason": "month-end freeze"});
    let paused = api.post("/v1/schedules/nightly/pause", &body).await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.body);
    assert_eq!(keys(&paused.body), property_names(&doc, "ScheduleActed"));
    assert_eq!(paused.body["changed"], true);
    let s = &paused.body["schedule"];
    is_schedule(&doc, s);
    assert_eq!(s["paused"]["operator"], "carol");
    assert_eq!(s["paused"]["reason"], "month-end freeze");
    assert!(s["paused"]["at"].is_string());

    let again = api
        .post("/v1/schedules/nightly/pause", &json!({"operator": "dave"}))
        .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    assert_eq!(again.body["changed"], false);

    let resumed = api
        .post(
            "/v1/schedules/nightly/resume",
            &json!({"operator": "carol"}),
        )
        .await;
    assert_eq!(resumed.status, StatusCode::OK, "{}", resumed.body);
    assert_eq!(resumed.body["changed"], true);
    assert_eq!(resumed.body["schedule"]["paused"], Value::Null);
    let again = api
        .post(
            "/v1/schedules/nightly/resume",
            &json!({"operator": "carol"}),
        )
        .await;
    assert_eq!(again.body["changed"], false, "{}", again.body);

    // Refusals write nothing.
    api.post("/v1/schedules/nightly/pause", &json!({"operator": ""}))
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    api.post("/v1/schedules/nightly/pause", &json!({"reason": "r"}))
        .await
        .problem(StatusCode::BAD_REQUEST, "malformed_json");
    for verb in ["pause", "resume", "remove"] {
        api.post(
            &format!("/v1/schedules/nope/{verb}"),
            &json!({"operator": "carol"}),
        )
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
    }

    let log = audit(&api, "schedule=nightly").await;
    assert!(!log.is_empty());
    let documented = doc["components"]["schemas"]["AuditEntry"]["properties"]["action"]["enum"]
        .as_array()
        .unwrap()
        .clone();
    for e in &log {
        assert_eq!(keys(e), property_names(&doc, "AuditEntry"), "{e}");
        assert!(documented.contains(&e["action"]), "{e}");
    }
}

/// Removing answers with the schedule as it was, shown without a next tick
/// (that it is the schedule as it was, paused or not, what removal writes
/// and that the name is free again are conformance's
/// `a_stored_schedule_pauses_resumes_and_goes_with_audit`).
#[tokio::test]
async fn removing_a_schedule_answers_with_it_as_it_was() {
    let api = Api::new();
    let doc = doc();
    api.post("/v1/schedules", &nightly()).await;
    let r = api
        .post(
            "/v1/schedules/nightly/remove",
            &json!({"operator": "erin", "reason": "report retired"}),
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(keys(&r.body), property_names(&doc, "ScheduleRemoved"));
    let removed = &r.body["removed"];
    is_schedule(&doc, removed);
    assert_eq!(removed["name"], "nightly");
    assert_eq!(removed["next_tick"], Value::Null);
    api.post("/v1/schedules/nightly/remove", &json!({"operator": "erin"}))
        .await
        .problem(StatusCode::NOT_FOUND, "not_found");
    let log = audit(&api, "schedule=nightly").await;
    let reason = log[0]["reason"].as_str().unwrap();
    assert!(reason.ends_with("report retired"), "{reason}");
}

#[tokio::test]
async fn invalid_schedules_are_refused_with_the_library_message_and_write_nothing() {
    let api = Api::with(ServerConfig {
        max_payload: 64,
        ..ServerConfig::default()
    });
    let cases = [
        (json!({"cron": "every day"}), "invalid", "cron pattern"),
        (json!({"cron": "0 ".repeat(150)}), "invalid", "limit is 200"),
        (json!({"cron": "61 * * * *"}), "invalid", "cron pattern"),
        (json!({"misfire": "sometimes"}), "invalid", "misfire"),
        (json!({"misfire": "backfill:0"}), "invalid", "backfill:N"),
        (json!({"max_attempts": 0}), "invalid", "between 1 and 1000"),
        (
            json!({"max_attempts": 1001}),
            "invalid",
            "between 1 and 1000",
        ),
        (json!({"kind": "bad kind"}), "invalid", "kind name"),
        (json!({"name": "bad name"}), "invalid", "schedule name"),
        (json!({"queue": ""}), "invalid", "queue name"),
        (json!({"operator": " "}), "invalid", "`operator`"),
        (json!({"reason": ""}), "invalid", "`reason`"),
        (
            json!({"max_attempts": -1}),
            "malformed_json",
            "expected u32",
        ),
        (json!({"replace": "yes"}), "malformed_json", "boolean"),
        (json!({"every": "day"}), "malformed_json", "unknown field"),
    ];
    for (change, code, words) in cases {
        let r = api.post("/v1/schedules", &with(nightly(), &change)).await;
        r.problem(StatusCode::BAD_REQUEST, code);
        let detail = r.body["detail"].as_str().unwrap();
        assert!(detail.contains(words), "{change}: {detail}");
    }
    let mut missing = nightly();
    missing.as_object_mut().unwrap().remove("cron");
    let r = api.post("/v1/schedules", &missing).await;
    r.problem(StatusCode::BAD_REQUEST, "malformed_json");
    assert!(
        r.body["detail"]
            .as_str()
            .unwrap()
            .contains("missing field `cron`")
    );
    api.post_raw(
        "/v1/schedules",
        r#"{"name":"n","cron":"* * * * *","kind":"k","operator":"o","payload":[1e400]}"#,
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "invalid");
    api.post(
        "/v1/schedules",
        &with(nightly(), &json!({"payload": {"text": "x".repeat(100)}})),
    )
    .await
    .problem(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");

    assert_eq!(api.get("/v1/schedules").await.body["schedules"], json!([]));
    assert!(audit(&api, "").await.is_empty(), "nothing was audited");
}

#[tokio::test]
async fn the_audit_log_takes_a_schedule_filter() {
    let api = Api::new();
    for name in ["a", "b"] {
        api.post("/v1/schedules", &with(nightly(), &json!({"name": name})))
            .await;
    }
    let a = audit(&api, "schedule=a").await;
    assert_eq!(a.len(), 1);
    assert_eq!(a[0]["schedule"], "a");
    assert_eq!(audit(&api, "schedule=").await.len(), 2, "empty is absent");
    api.get("/v1/audit?schedule=a%20b")
        .await
        .problem(StatusCode::BAD_REQUEST, "invalid");
    let r = api.get("/v1/audit?schedules=a").await;
    r.problem(StatusCode::BAD_REQUEST, "malformed_json");
    assert!(
        r.body["detail"]
            .as_str()
            .unwrap()
            .contains("job, queue, schedule, before and limit"),
        "{}",
        r.body
    );
}

/// `tz` reads the pattern in an IANA time zone and comes back with the
/// schedule; a zone that does not exist is a 400 that writes nothing.
#[tokio::test]
async fn a_schedule_in_a_time_zone_is_stored_with_it_and_a_bad_zone_refused() {
    let api = Api::new();
    api.post(
        "/v1/schedules",
        &json!({"name": "n", "cron": "0 3 * * *", "kind": "k", "tz": "Europe/Nowhere",
                "operator": "alice"}),
    )
    .await
    .problem(StatusCode::BAD_REQUEST, "invalid");
    let listed = api.get("/v1/schedules").await;
    assert_eq!(listed.body["schedules"], json!([]), "{}", listed.body);
    let added = api
        .post(
            "/v1/schedules",
            &json!({"name": "n", "cron": "30 2 * * *", "kind": "k", "tz": "Europe/Berlin",
                    "operator": "alice"}),
        )
        .await;
    assert_eq!(added.status, StatusCode::CREATED, "{}", added.body);
    assert_eq!(added.body["schedule"]["tz"], "Europe/Berlin");
    let shown = api.get("/v1/schedules/n").await;
    let next = shown.body["next_tick"].as_str().unwrap();
    // 02:30 in Berlin is 00:30 or 01:30 UTC, by the season.
    assert!(
        next.ends_with("T00:30:00.000Z") || next.ends_with("T01:30:00.000Z"),
        "{}",
        shown.body
    );
}
