//! `openapi.json` held against the real router in both directions: every
//! documented operation reaches a handler, every route of the table is
//! documented, the router has no route outside the table, the request
//! schemas name exactly the fields the server's `deny_unknown_fields`
//! structs accept, and every documented example is accepted.

use std::collections::BTreeSet;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::{Api, Reply, TOKEN};
use crate::routes::{OPENAPI, endpoints};

const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

fn doc() -> Value {
    serde_json::from_str(OPENAPI).expect("openapi.json is JSON")
}

/// The keys of a JSON object.
pub(super) fn keys(v: &Value) -> BTreeSet<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .cloned()
        .collect()
}

/// The property names of a schema in `components/schemas`.
pub(super) fn property_names(doc: &Value, schema: &str) -> BTreeSet<String> {
    keys(&doc["components"]["schemas"][schema]["properties"])
}

/// `v`, or what its `$ref` points at (followed to the end).
fn resolve<'a>(doc: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => {
            let target = r
                .strip_prefix('#')
                .and_then(|p| doc.pointer(p))
                .unwrap_or_else(|| panic!("unresolved $ref {r}"));
            resolve(doc, target)
        }
        None => v,
    }
}

struct Operation {
    path: String,
    method: String,
    op: Value,
}

impl Operation {
    /// The path with its `{id}`, `{queue}` and `{name}` filled in.
    fn uri(&self) -> String {
        self.path
            .replace("{id}", "x")
            .replace("{queue}", "q")
            .replace("{name}", "x")
    }

    fn body_schema<'a>(&'a self, doc: &'a Value) -> Option<&'a Value> {
        self.op
            .pointer("/requestBody/content/application~1json/schema")
            .map(|s| resolve(doc, s))
    }

    fn examples(&self) -> Vec<(String, Value)> {
        self.op
            .pointer("/requestBody/content/application~1json/examples")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .map(|(name, e)| (name.clone(), e["value"].clone()))
                    .collect()
            })
            .unwrap_or_default()
    }

    fn is_open(&self) -> bool {
        self.op.get("security") == Some(&json!([{}]))
    }
}

fn operations(doc: &Value) -> Vec<Operation> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().expect("a path item") {
            if METHODS.contains(&method.as_str()) {
                ops.push(Operation {
                    path: path.clone(),
                    method: method.to_ascii_uppercase(),
                    op: op.clone(),
                });
            }
        }
    }
    ops
}

/// Whether the router found no route (as opposed to a handler answering
/// 404 for a job that does not exist).
fn missed(r: &Reply) -> bool {
    let detail = r.body["detail"].as_str().unwrap_or("");
    (r.status == StatusCode::NOT_FOUND && detail.starts_with("no such endpoint"))
        || (r.status == StatusCode::METHOD_NOT_ALLOWED && r.code() == "method_not_allowed")
}

impl Api {
    async fn request(&self, method: &str, uri: &str, body: &Value) -> Reply {
        if method == "GET" {
            self.get(uri).await
        } else {
            self.call(
                method,
                uri,
                &[("content-type", "application/json")],
                body.to_string(),
            )
            .await
        }
    }
}

#[test]
fn the_description_is_openapi_3_1_and_every_reference_resolves() {
    let doc = doc();
    assert!(
        doc["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1.")),
        "{}",
        doc["openapi"]
    );
    for field in ["title", "version"] {
        assert!(doc["info"][field].as_str().is_some_and(|s| !s.is_empty()));
    }
    let ops = operations(&doc);
    assert!(!ops.is_empty());
    let mut ids = BTreeSet::new();
    for o in &ops {
        assert!(o.path.starts_with('/'), "{}", o.path);
        let id = o.op["operationId"].as_str().expect("an operationId");
        assert!(ids.insert(id.to_owned()), "operationId {id} twice");
        assert!(
            o.op["responses"].as_object().is_some_and(|r| !r.is_empty()),
            "{} {} has no responses",
            o.method,
            o.path
        );
        // Every path template parameter is declared.
        for name in o.path.split('{').skip(1).filter_map(|s| s.split_once('}')) {
            let name = name.0;
            let declared = o.op["parameters"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| resolve(&doc, p))
                .any(|p| p["in"] == "path" && p["name"] == name && p["required"] == true);
            assert!(
                declared,
                "{} {} does not declare {{{name}}}",
                o.method, o.path
            );
        }
    }
    fn refs<'a>(v: &'a Value, out: &mut Vec<&'a str>) {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(r)) = m.get("$ref") {
                    out.push(r);
                }
                m.values().for_each(|v| refs(v, out));
            }
            Value::Array(a) => a.iter().for_each(|v| refs(v, out)),
            _ => {}
        }
    }
    let mut all = Vec::new();
    refs(&doc, &mut all);
    assert!(all.len() > 20);
    for r in all {
        let target = r.strip_prefix('#').and_then(|p| doc.pointer(p));
        assert!(target.is_some(), "unresolved $ref {r}");
    }
}

#[test]
fn documented_routes_and_routed_routes_are_the_same() {
    let documented: BTreeSet<(String, String)> = operations(&doc())
        .into_iter()
        .map(|o| (o.path, o.method))
        .collect();
    let routed: BTreeSet<(String, String)> = endpoints()
        .into_iter()
        .map(|e| (e.path.to_owned(), e.verb.as_str().to_owned()))
        .collect();
    let undocumented: Vec<_> = routed.difference(&documented).collect();
    let unrouted: Vec<_> = documented.difference(&routed).collect();
    assert!(
        undocumented.is_empty() && unrouted.is_empty(),
        "routed but not in openapi.json: {undocumented:?}; in openapi.json but not routed: {unrouted:?}"
    );
}

#[test]
fn the_router_has_no_route_outside_the_table() {
    // `routes::router` adds the table's rows in one loop; anything else
    // that adds a route would escape the documentation check above.
    let sources = [
        ("routes.rs", include_str!("../routes.rs")),
        ("lib.rs", include_str!("../lib.rs")),
        ("leases.rs", include_str!("../leases.rs")),
        ("admin.rs", include_str!("../admin.rs")),
        ("workflows.rs", include_str!("../workflows.rs")),
        ("schedules.rs", include_str!("../schedules.rs")),
        ("guard.rs", include_str!("../guard.rs")),
    ];
    let count =
        |needle: &str| -> usize { sources.iter().map(|(_, s)| s.matches(needle).count()).sum() };
    assert_eq!(
        count(".route("),
        1,
        "routes are added from endpoints() only"
    );
    for other in [".route_service(", ".nest(", ".nest_service("] {
        assert_eq!(count(other), 0, "{other} adds routes outside endpoints()");
    }
    // The one merge is the dashboard's HTML surface (its own guard, not
    // part of the JSON API), whose routes all live under /dashboard.
    assert_eq!(
        count(".merge("),
        1,
        ".merge( adds routes outside endpoints()"
    );
    assert_eq!(
        count(".merge(dashboard)"),
        1,
        "only the dashboard is merged"
    );
}

#[test]
fn the_dashboard_routes_stay_under_dashboard() {
    let sources = [
        include_str!("../dashboard/mod.rs"),
        include_str!("../dashboard/jobs.rs"),
        include_str!("../dashboard/actions.rs"),
        include_str!("../dashboard/login.rs"),
        include_str!("../dashboard/queues.rs"),
        include_str!("../dashboard/audit.rs"),
        include_str!("../dashboard/schedules.rs"),
    ];
    let mut paths = Vec::new();
    for src in sources {
        for (i, _) in src.match_indices(".route(") {
            let rest = &src[i..];
            let start = rest.find('"').expect("a route path literal") + 1;
            let end = start + rest[start..].find('"').expect("the literal's end");
            paths.push(&rest[start..end]);
        }
    }
    assert!(paths.len() >= 8, "found the dashboard's routes: {paths:?}");
    // The one exception: `/`, which only sends a browser to the dashboard.
    assert_eq!(paths.iter().filter(|p| **p == "/").count(), 1, "{paths:?}");
    for p in &paths {
        assert!(
            *p == "/" || *p == "/dashboard" || p.starts_with("/dashboard/"),
            "dashboard route {p} outside /dashboard"
        );
    }
    let documented = doc();
    for p in &paths {
        assert!(
            documented["paths"].get(*p).is_none(),
            "{p} is an HTML page, not part of the JSON API"
        );
    }
}

#[tokio::test]
async fn every_documented_operation_reaches_its_handler() {
    let api = Api::new();
    api.post("/v1/jobs", &json!({"kind": "k", "id": "x"})).await;
    // The check can tell a missing route from a missing job.
    assert!(missed(&api.get("/v1/nope").await));
    assert!(missed(&api.request("PUT", "/v1/leases", &json!({})).await));
    assert!(!missed(&api.get("/v1/jobs/absent").await));
    for o in operations(&doc()) {
        let r = api.request(&o.method, &o.uri(), &json!({})).await;
        assert!(
            !missed(&r),
            "{} {} is not routed: {}",
            o.method,
            o.path,
            r.body
        );
    }
}

#[tokio::test]
async fn the_description_is_served() {
    let api = Api::new();
    let r = api.get("/v1/openapi.json").await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.headers["content-type"], "application/json");
    assert_eq!(r.body, doc());
}

#[tokio::test]
async fn request_schemas_name_exactly_the_fields_the_server_accepts() {
    let api = Api::new();
    let doc = doc();
    let mut checked = 0;
    for o in operations(&doc) {
        let Some(schema) = o.body_schema(&doc) else {
            continue;
        };
        assert_eq!(
            schema["additionalProperties"], false,
            "{} {}: unknown fields are refused",
            o.method, o.path
        );
        let documented = keys(&schema["properties"]);
        // serde names every field it accepts when it refuses one.
        let r = api
            .request(&o.method, &o.uri(), &json!({"zz_probe": 1}))
            .await;
        assert_eq!(
            r.code(),
            "malformed_json",
            "{} {}: {}",
            o.method,
            o.path,
            r.body
        );
        let detail = r.body["detail"].as_str().unwrap();
        let (_, expected) = detail
            .split_once("unknown field `zz_probe`, expected")
            .unwrap_or_else(|| panic!("{detail}"));
        let expected = expected.split(" at line").next().unwrap_or_default();
        let accepted: BTreeSet<String> = expected
            .split('`')
            .skip(1)
            .step_by(2)
            .map(str::to_owned)
            .collect();
        assert_eq!(
            documented, accepted,
            "{} {}: documented vs accepted fields",
            o.method, o.path
        );
        // Each required field is required.
        for (name, example) in o.examples() {
            for field in schema["required"].as_array().into_iter().flatten() {
                let field = field.as_str().unwrap();
                let mut without = example.clone();
                without.as_object_mut().unwrap().remove(field);
                let r = api.request(&o.method, &o.uri(), &without).await;
                let detail = r.body["detail"].as_str().unwrap_or("");
                assert!(
                    r.code() == "malformed_json"
                        && detail.contains(&format!("missing field `{field}`")),
                    "{} {} example {name} without {field}: {}",
                    o.method,
                    o.path,
                    r.body
                );
            }
        }
        checked += 1;
    }
    assert_eq!(checked, 25, "every operation with a body was checked");
}

#[tokio::test]
async fn documented_examples_are_accepted_and_use_every_documented_field() {
    let api = Api::new();
    api.post("/v1/jobs", &json!({"kind": "k", "id": "x"})).await;
    for i in 0..12 {
        // Due work for the lease examples, so that their `wait` ends at once.
        api.post(
            "/v1/jobs",
            &json!({"kind": "k", "queue": "email", "id": format!("e{i}")}),
        )
        .await;
    }
    let doc = doc();
    for o in operations(&doc) {
        let Some(schema) = o.body_schema(&doc) else {
            continue;
        };
        let examples = o.examples();
        assert!(
            !examples.is_empty(),
            "{} {} has no example",
            o.method,
            o.path
        );
        let mut used = BTreeSet::new();
        for (name, example) in examples {
            used.extend(keys(&example));
            let r = api.request(&o.method, &o.uri(), &example).await;
            assert!(
                !matches!(r.status.as_u16(), 400 | 413 | 415) && !missed(&r),
                "{} {} example {name} was refused: {}",
                o.method,
                o.path,
                r.body
            );
        }
        assert_eq!(
            used,
            keys(&schema["properties"]),
            "{} {}: the examples use every documented field",
            o.method,
            o.path
        );
    }
}

#[tokio::test]
async fn every_documented_route_but_healthz_needs_the_token_and_refuses_browsers() {
    let api = Api::with_token();
    let bearer = format!("Bearer {TOKEN}");
    for o in operations(&doc()) {
        let body = json!({}).to_string();
        let anonymous = api.call(&o.method, &o.uri(), &[], body.clone()).await;
        let browser = api
            .call(
                &o.method,
                &o.uri(),
                &[
                    ("authorization", &bearer),
                    ("origin", "https://evil.example"),
                ],
                body,
            )
            .await;
        if o.is_open() {
            assert_eq!(anonymous.status, StatusCode::OK, "{}", o.path);
            continue;
        }
        anonymous.problem(StatusCode::UNAUTHORIZED, "unauthorized");
        browser.problem(StatusCode::FORBIDDEN, "browser_origin_refused");
    }
    assert_eq!(api.count().await, 0);
}

#[tokio::test]
async fn the_job_schemas_name_every_field_of_a_job() {
    let api = Api::new();
    let doc = doc();
    api.post("/v1/jobs", &json!({"kind": "k", "id": "first"}))
        .await;
    api.post("/v1/jobs", &json!({"kind": "k", "id": "x"})).await;
    let job = api
        .post(
            "/v1/jobs",
            &json!({
                "kind": "k",
                "id": "x2",
                "key": "t",
                "deadline": "30m",
                "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "depends_on": ["first"],
                "on_dependency_failure": "run",
                "workflow": "w-1",
                "batch": "b-1",
                "tags": ["eu"],
                "meta": {"customer": "Ada"}
            }),
        )
        .await;
    assert_eq!(job.body["job"]["state"], "blocked", "{}", job.body);
    assert_eq!(job.body["job"]["waiting_on"], 1, "{}", job.body);
    // x2 has a dependency; a job depending on it gives it a dependent.
    api.post(
        "/v1/jobs",
        &json!({"kind": "k", "id": "x3", "depends_on": ["x2"]}),
    )
    .await;
    let job = api.get("/v1/jobs/x2").await.body;
    let fields = property_names(&doc, "Job");
    let required: BTreeSet<String> = doc["components"]["schemas"]["Job"]["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_owned())
        .collect();
    let plain = api.post("/v1/jobs", &json!({"kind": "k"})).await;
    assert_eq!(
        keys(&plain.body["job"]),
        required,
        "only `key`, `deadline`, `traceparent`, `progress`, `workflow`, `unique_key`, `batch` and the dependency fields may be absent"
    );
    // x2 never ran, so it has no progress report (the HTTP test of the
    // lease API shows one).
    let mut with_history = fields;
    with_history.remove("progress");
    // A unique job cannot have dependencies; the unique test shows the key.
    with_history.remove("unique_key");
    // A job with dependencies cannot wait for a signal at enqueue; the
    // signals test shows `awaiting` and `resumed_by`.
    with_history.remove("awaiting");
    with_history.remove("resumed_by");
    // Only a child added at run time names the step that added it (the
    // lease API's test of children shows it).
    with_history.remove("added_by");
    with_history.extend(["history", "audit", "dependencies", "dependents"].map(str::to_owned));
    assert_eq!(keys(&job), with_history);
}

/// An audit entry has exactly the documented fields, a `copy` among the
/// documented actions; a job's history entries only documented ones.
#[tokio::test]
async fn the_audit_schemas_name_every_field_of_an_entry() {
    let api = Api::new();
    let doc = doc();
    let r = api
        .post(
            "/v1/jobs",
            &json!({"kind": "k", "id": "orig", "max_attempts": 1}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let store = api.q.store();
    let claimed = store
        .claim(&errand::ClaimRequest {
            queues: Vec::new(),
            limit: 1,
            lease: std::time::Duration::from_secs(30),
            rate: None,
            reclaim: true,
        })
        .await
        .unwrap();
    let failure = errand::Failure {
        error: "bad".into(),
        class: errand::ErrorClass::Permanent,
        retry: None,
    };
    store.fail(&claimed[0].lease, failure).await.unwrap();
    let copied = errand::Admin::new(store.clone())
        .copy_jobs(&errand::CopyRequest {
            ids: vec![errand::JobId::new("orig").unwrap()],
            operator: "alice".into(),
            reason: None,
        })
        .await
        .unwrap();
    let copy = copied[0].job.id.as_str().to_owned();

    let log = api.get("/v1/audit").await;
    let entry = &log.body["entries"][0];
    assert_eq!(keys(entry), property_names(&doc, "AuditEntry"));
    assert_eq!(entry["action"], "copy");
    assert_eq!(entry["job_id"], "orig");
    assert_eq!(entry["copy_id"], copy.as_str());
    let actions = doc["components"]["schemas"]["AuditEntry"]["properties"]["action"]["enum"]
        .as_array()
        .unwrap();
    assert!(actions.contains(&json!("copy")));

    let record = property_names(&doc, "AuditRecord");
    for (id, side) in [("orig", "copied_to"), (copy.as_str(), "copied_from")] {
        let detail = api.get(&format!("/v1/jobs/{id}")).await;
        let a = &detail.body["audit"][0];
        assert!(keys(a).is_subset(&record), "{a}");
        assert!(keys(a).contains(side), "{a}");
    }
}
