//! The dashboard answering requests directly (`tower::ServiceExt::oneshot`)
//! over a temporary SQLite store, like a browser would send them: cookies
//! kept, CSRF tokens read from the forms. After every refusal, the proof
//! that nothing was written.

use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use errand::testkit::TestQueue;
use errand::{
    ClaimRequest, ErrorClass, Failure, Job, JobId, JobState, Name, NewJob, Payload, Store,
};
use tower::ServiceExt;

use crate::{AccessToken, ServerConfig, router};

const TOKEN: &str = "dashboard-test-token-0123456789";

struct Browser {
    q: TestQueue,
    app: Router,
    cookies: Vec<(String, String)>,
}

struct Page {
    status: StatusCode,
    headers: HeaderMap,
    body: String,
}

impl Page {
    fn location(&self) -> &str {
        self.headers
            .get(header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }

    /// The CSRF token of the page's first form.
    fn csrf(&self) -> String {
        let marker = r#"name="csrf" value=""#;
        let start = self.body.find(marker).expect("a form with a CSRF token") + marker.len();
        let end = self.body[start..].find('"').expect("end of the token");
        self.body[start..start + end].to_owned()
    }

    #[track_caller]
    fn html(&self, status: StatusCode) {
        assert_eq!(self.status, status, "{}", self.body);
        assert_eq!(
            self.headers[header::CONTENT_TYPE],
            "text/html; charset=utf-8"
        );
        assert!(self.body.starts_with("<!DOCTYPE html>"), "{}", self.body);
    }

    #[track_caller]
    fn refused(&self, status: StatusCode, words: &str) {
        self.html(status);
        assert!(
            self.body.contains(words),
            "expected {words:?} in {}",
            self.body
        );
    }
}

impl Browser {
    fn new() -> Browser {
        Browser::with(ServerConfig::default())
    }

    fn with(config: ServerConfig) -> Browser {
        let q = TestQueue::new().expect("test queue");
        let app = router(q.store(), config);
        Browser {
            q,
            app,
            cookies: Vec::new(),
        }
    }

    fn store(&self) -> std::sync::Arc<dyn Store> {
        self.q.store()
    }

    async fn send(&mut self, mut req: Request<Body>) -> Page {
        if !self.cookies.is_empty() {
            let jar = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join("; ");
            req.headers_mut()
                .insert(header::COOKIE, jar.parse().expect("cookie header"));
        }
        let response = self.app.clone().oneshot(req).await.expect("infallible");
        let status = response.status();
        let headers = response.headers().clone();
        for set in headers.get_all(header::SET_COOKIE) {
            let set = set.to_str().expect("ascii cookie");
            assert!(
                set.contains("; Path=/dashboard; HttpOnly; SameSite=Strict"),
                "{set}"
            );
            let (pair, _) = set.split_once(';').expect("attributes");
            let (k, v) = pair.split_once('=').expect("name=value");
            self.cookies.retain(|(name, _)| name != k);
            if !set.contains("Max-Age=0") {
                self.cookies.push((k.to_owned(), v.to_owned()));
            }
        }
        let bytes = axum::body::to_bytes(response.into_body(), 16 << 20)
            .await
            .expect("body");
        Page {
            status,
            headers,
            body: String::from_utf8(bytes.to_vec()).expect("UTF-8 page"),
        }
    }

    async fn get(&mut self, uri: &str) -> Page {
        let req = Request::get(uri)
            .header(header::HOST, "127.0.0.1:7878")
            .header("sec-fetch-site", "same-origin")
            .body(Body::empty())
            .expect("request");
        self.send(req).await
    }

    async fn post_with(
        &mut self,
        uri: &str,
        fields: &[(&str, &str)],
        extra: &[(&str, &str)],
    ) -> Page {
        let body = form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let mut req = Request::post(uri)
            .header(header::HOST, "127.0.0.1:7878")
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded");
        for (k, v) in extra {
            req = req.header(*k, *v);
        }
        self.send(req.body(Body::from(body)).expect("request"))
            .await
    }

    /// A POST as a browser sends it from the dashboard's own page.
    async fn post(&mut self, uri: &str, fields: &[(&str, &str)]) -> Page {
        self.post_with(
            uri,
            fields,
            &[
                ("origin", "http://127.0.0.1:7878"),
                ("sec-fetch-site", "same-origin"),
            ],
        )
        .await
    }

    async fn job(&self, id: &JobId) -> Job {
        self.store().get(id).await.expect("job")
    }

    /// A ready job on queue `later`.
    async fn insert(&self, id: &str, payload: &str) -> JobId {
        self.insert_on("later", id, payload).await
    }

    async fn insert_on(&self, queue: &str, id: &str, payload: &str) -> JobId {
        let job = NewJob::new("email", Payload::from_json_text(payload).expect("json"))
            .expect("job")
            .on_queue(queue)
            .expect("queue")
            .with_id(JobId::new(id).expect("id"))
            .with_max_attempts(1)
            .expect("attempts");
        self.store().insert(job).await.expect("insert").job.id
    }

    /// A dead job on queue `mail` whose one attempt failed with `error`.
    async fn dead(&self, id: &str, payload: &str, error: &str) -> JobId {
        let id = self.insert_on("mail", id, payload).await;
        let claimed = self
            .store()
            .claim(&ClaimRequest {
                queues: vec![Name::parse("queue", "mail").expect("name")],
                limit: 1,
                lease: Duration::from_secs(60),
                rate: None,
                reclaim: true,
            })
            .await
            .expect("claim");
        let lease = &claimed.first().expect("claimed").lease;
        assert_eq!(lease.id, id);
        let job = self
            .store()
            .fail(
                lease,
                Failure {
                    error: error.into(),
                    class: ErrorClass::Permanent,
                    retry: None,
                },
            )
            .await
            .expect("fail");
        assert_eq!(job.state, JobState::Dead);
        id
    }

    async fn audit_len(&self, id: &JobId) -> usize {
        self.store().detail(id).await.expect("detail").audit.len()
    }
}

fn pairs<'a>(fields: &'a [(&'static str, String)]) -> Vec<(&'static str, &'a str)> {
    fields.iter().map(|(k, v)| (*k, v.as_str())).collect()
}

#[tokio::test]
async fn pages_render_with_the_security_headers() {
    let mut b = Browser::new();
    let ready = b.insert("order-1", r#"{"to":"a@example.com"}"#).await;
    let dead = b
        .dead(
            "order-2",
            r#"{"to":"b@example.com"}"#,
            "SMTP 550: mailbox unavailable",
        )
        .await;

    let p = b.get("/dashboard/jobs").await;
    p.html(StatusCode::OK);
    assert!(p.body.contains(ready.as_str()) && p.body.contains(dead.as_str()));
    assert!(p.body.contains("SMTP 550"));
    let h = &p.headers;
    let csp = h[header::CONTENT_SECURITY_POLICY].to_str().expect("ascii");
    assert!(csp.contains("default-src 'none'") && csp.contains("frame-ancestors 'none'"));
    assert!(!csp.contains("script-src"), "no script at all: {csp}");
    assert_eq!(h[header::X_FRAME_OPTIONS], "DENY");
    assert_eq!(h[header::X_CONTENT_TYPE_OPTIONS], "nosniff");
    assert_eq!(h[header::REFERRER_POLICY], "no-referrer");
    assert_eq!(h[header::CACHE_CONTROL], "no-store");
    assert!(!p.body.contains("<script"), "no script element");
    assert!(
        b.cookies.iter().any(|(k, _)| k == "errand_csrf"),
        "the first page sets the CSRF nonce"
    );

    let p = b.get("/dashboard/jobs?state=ready").await;
    p.html(StatusCode::OK);
    assert!(p.body.contains(ready.as_str()) && !p.body.contains(dead.as_str()));

    let p = b.get("/dashboard/dead").await;
    p.html(StatusCode::OK);
    assert!(p.body.contains(dead.as_str()) && !p.body.contains(ready.as_str()));
    assert!(p.body.contains("SMTP 550: mailbox unavailable") && p.body.contains("permanent"));
    assert!(p.body.contains(r#"href="/dashboard/jobs/order-2/replay""#));

    let p = b.get("/dashboard/jobs/order-2").await;
    p.html(StatusCode::OK);
    assert!(p.body.contains("Attempt history") && p.body.contains("b@example.com"));
    assert!(p.body.contains("SMTP 550: mailbox unavailable"));
    assert!(
        p.body.contains("<td>dead</td>"),
        "the attempt's outcome: {}",
        p.body
    );

    assert_eq!(
        b.get("/dashboard").await.status,
        StatusCode::PERMANENT_REDIRECT
    );
    let p = b.get("/dashboard/").await;
    assert_eq!(
        (p.status, p.location()),
        (StatusCode::SEE_OTHER, "/dashboard/queues")
    );
    let css = b.get("/dashboard/static/style.css").await;
    assert_eq!(css.status, StatusCode::OK);
    assert_eq!(css.headers[header::CONTENT_TYPE], "text/css; charset=utf-8");
    b.get("/dashboard/nowhere")
        .await
        .refused(StatusCode::NOT_FOUND, "no such dashboard page");
}

/// A browser pointed at the server's address lands on the dashboard (with
/// a token, on its sign-in page); unknown API paths still answer with a
/// JSON problem.
#[tokio::test]
async fn the_root_sends_a_browser_to_the_dashboard() {
    let mut b = Browser::new();
    let root = b.get("/").await;
    assert_eq!(root.status, StatusCode::SEE_OTHER, "{}", root.body);
    assert_eq!(root.location(), "/dashboard/");
    assert_eq!(root.headers["x-frame-options"], "DENY");
    let api = Request::get("/v1/no-such-route")
        .header(header::HOST, "127.0.0.1:7878")
        .body(Body::empty())
        .expect("request");
    let api = b.send(api).await;
    assert_eq!(api.status, StatusCode::NOT_FOUND);
    assert_eq!(
        api.headers[header::CONTENT_TYPE],
        "application/problem+json"
    );
    // Not for another host's name (DNS rebinding), as every dashboard page.
    let elsewhere = Request::get("/")
        .header(header::HOST, "attacker.example")
        .body(Body::empty())
        .expect("request");
    b.send(elsewhere)
        .await
        .refused(StatusCode::FORBIDDEN, "Host refused");

    let mut signed = Browser::with(ServerConfig {
        token: Some(AccessToken::new(TOKEN).expect("token")),
        ..ServerConfig::default()
    });
    let root = signed.get("/").await;
    assert_eq!(root.status, StatusCode::SEE_OTHER, "{}", root.body);
    assert_eq!(root.location(), "/dashboard/login");
}

#[tokio::test]
async fn job_data_is_escaped() {
    let mut b = Browser::new();
    let payload =
        r#"{"note":"<script>alert('payload')</script>","x":"\"><img src=x onerror=alert(1)>"}"#;
    b.dead("xss-1", payload, "<script>alert('error')</script>")
        .await;
    for uri in [
        "/dashboard/jobs/xss-1",
        "/dashboard/jobs",
        "/dashboard/dead",
        "/dashboard/jobs/xss-1/replay",
    ] {
        let p = b.get(uri).await;
        p.html(StatusCode::OK);
        assert!(!p.body.contains("<script"), "{uri}: {}", p.body);
        assert!(!p.body.contains("<img"), "{uri}");
        assert!(
            p.body.contains("&lt;script&gt;alert('error')"),
            "{uri}: {}",
            p.body
        );
    }
    let p = b.get("/dashboard/jobs/xss-1").await;
    assert!(
        p.body
            .contains("&lt;script&gt;alert('payload')&lt;/script&gt;")
    );
    assert!(p.body.contains("\\&quot;&gt;&lt;img src=x"), "{}", p.body);
    // The reason and operator an operator types are escaped too.
    let csrf = b.get("/dashboard/jobs/xss-1/replay").await.csrf();
    let p = b
        .post(
            "/dashboard/jobs/xss-1/replay",
            &[
                ("csrf", &csrf),
                ("operator", "<b>eve</b>"),
                ("reason", "<script>x</script>"),
            ],
        )
        .await;
    assert_eq!(p.status, StatusCode::SEE_OTHER);
    let p = b.get("/dashboard/jobs/xss-1").await;
    assert!(p.body.contains("&lt;b&gt;eve&lt;/b&gt;") && !p.body.contains("<script"));
}

#[tokio::test]
async fn a_refused_form_writes_nothing() {
    let mut b = Browser::new();
    let id = b.dead("dead-1", "{}", "boom").await;
    let second = b.dead("dead-2", "{}", "boom").await;
    let good = b.get("/dashboard/jobs/dead-1/replay").await.csrf();
    let fields = |csrf: &str| {
        [("csrf", csrf), ("operator", "alice"), ("reason", "fixed")].map(|(k, v)| (k, v.to_owned()))
    };

    // No token, a wrong one, a token of another browser.
    b.post("/dashboard/jobs/dead-1/replay", &pairs(&fields("")[1..]))
        .await
        .refused(StatusCode::FORBIDDEN, "security token");
    b.post("/dashboard/jobs/dead-1/replay", &pairs(&fields("00ff")))
        .await
        .refused(StatusCode::FORBIDDEN, "security token");
    let mut other = Browser {
        q: TestQueue::new().expect("queue"),
        app: b.app.clone(),
        cookies: Vec::new(),
    };
    let foreign = other.get("/dashboard/jobs/dead-1/replay").await.csrf();
    b.post("/dashboard/jobs/dead-1/replay", &pairs(&fields(&foreign)))
        .await
        .refused(StatusCode::FORBIDDEN, "security token");
    // The right token without the cookie it is bound to.
    let jar = std::mem::take(&mut b.cookies);
    b.post("/dashboard/jobs/dead-1/replay", &pairs(&fields(&good)))
        .await
        .refused(StatusCode::FORBIDDEN, "security token");
    b.cookies = jar;
    // The right token from another site.
    for extra in [
        [
            ("origin", "http://evil.example"),
            ("sec-fetch-site", "cross-site"),
        ],
        [("origin", "http://evil.example"), ("x-other", "1")],
        [
            ("origin", "http://127.0.0.1:7878.evil.example"),
            ("x-other", "1"),
        ],
        [("origin", "null"), ("sec-fetch-site", "cross-site")],
        [
            ("origin", "http://127.0.0.1:7878"),
            ("sec-fetch-site", "same-site"),
        ],
        [("sec-fetch-site", "none"), ("x-other", "1")],
    ] {
        b.post_with(
            "/dashboard/jobs/dead-1/replay",
            &pairs(&fields(&good)),
            &extra,
        )
        .await
        .refused(StatusCode::FORBIDDEN, "another site");
    }
    // Not a form.
    let p = b
        .send(
            Request::post("/dashboard/jobs/dead-1/replay")
                .header(header::HOST, "127.0.0.1:7878")
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from(format!(
                    r#"{{"csrf":"{good}","operator":"a","reason":"r"}}"#
                )))
                .expect("request"),
        )
        .await;
    p.refused(StatusCode::UNSUPPORTED_MEDIA_TYPE, "form");
    // Too large.
    let huge = "r".repeat(70 * 1024);
    b.post(
        "/dashboard/jobs/dead-1/replay",
        &[("csrf", &good[..]), ("operator", "a"), ("reason", &huge)],
    )
    .await
    .refused(StatusCode::PAYLOAD_TOO_LARGE, "larger than");

    assert_eq!(b.job(&id).await.state, JobState::Dead);
    assert_eq!(b.job(&id).await.replays, 0);
    assert_eq!(b.audit_len(&id).await, 0);

    // The same form as Chromium sends it from the dashboard's page works:
    // `Origin: null`, because the pages say `Referrer-Policy: no-referrer`
    // (the browser test found that a strict Origin check refused it).
    let p = b
        .post_with(
            "/dashboard/jobs/dead-1/replay",
            &pairs(&fields(&good)),
            &[("origin", "null"), ("sec-fetch-site", "same-origin")],
        )
        .await;
    assert_eq!(p.status, StatusCode::SEE_OTHER, "{}", p.body);
    assert_eq!(b.job(&id).await.state, JobState::Ready);
    // And without any of those headers (older browsers), the token decides.
    let good = b.get("/dashboard/jobs/dead-2/replay").await.csrf();
    let p = b
        .post_with("/dashboard/jobs/dead-2/replay", &pairs(&fields(&good)), &[])
        .await;
    assert_eq!(p.status, StatusCode::SEE_OTHER, "{}", p.body);
    assert_eq!(b.job(&second).await.state, JobState::Ready);
}

#[tokio::test]
async fn a_replay_needs_an_operator_and_a_reason() {
    let mut b = Browser::new();
    let id = b.dead("dead-1", "{}", "boom").await;
    let csrf = b.get("/dashboard/jobs/dead-1/replay").await.csrf();
    let url = "/dashboard/jobs/dead-1/replay";
    let long_operator = "o".repeat(201);
    let long_reason = "r".repeat(2001);
    for (fields, words) in [
        (
            vec![("operator", "alice")],
            "The reason (`reason`) is required",
        ),
        (
            vec![("operator", "alice"), ("reason", "   ")],
            "The reason (`reason`) is required",
        ),
        (
            vec![("reason", "fixed")],
            "Your name (`operator`) is required",
        ),
        (
            vec![("operator", &long_operator[..]), ("reason", "fixed")],
            "the limit is 200 bytes",
        ),
        (
            vec![("operator", "alice"), ("reason", &long_reason[..])],
            "the limit is 2000 bytes",
        ),
        (
            vec![("operator", "al\u{7}ice"), ("reason", "fixed")],
            "printable text",
        ),
        (
            vec![("operator", "a"), ("operator", "b"), ("reason", "fixed")],
            "more than once",
        ),
    ] {
        let mut all = vec![("csrf", csrf.as_str())];
        all.extend(fields);
        let p = b.post(url, &all).await;
        p.refused(StatusCode::BAD_REQUEST, words);
        assert!(p.body.contains("Confirm: replay"), "the form comes back");
    }
    // What was entered is kept.
    let p = b.post(url, &[("csrf", &csrf), ("operator", "alice")]).await;
    assert!(p.body.contains(r#"value="alice""#), "{}", p.body);
    b.post(
        url,
        &[
            ("csrf", &csrf),
            ("operator", "a"),
            ("reason", "r"),
            ("force", "1"),
        ],
    )
    .await
    .refused(StatusCode::BAD_REQUEST, "Unknown parameter `force`");
    assert_eq!(b.job(&id).await.state, JobState::Dead);
    assert_eq!(b.audit_len(&id).await, 0);
}

#[tokio::test]
async fn confirm_then_replay_leaves_an_audit_entry() {
    let mut b = Browser::new();
    let id = b
        .dead("pay/17+x", r#"{"amount":500}"#, "card declined")
        .await;
    let dead = b.get("/dashboard/dead").await;
    let link = "/dashboard/jobs/pay%2F17%2Bx/replay";
    assert!(dead.body.contains(link), "{}", dead.body);
    let confirm = b.get(link).await;
    confirm.html(StatusCode::OK);
    assert!(confirm.body.contains("Replay job?") && confirm.body.contains("pay/17+x"));
    assert!(confirm.body.contains("card declined"));
    assert_eq!(
        b.job(&id).await.state,
        JobState::Dead,
        "a GET changes nothing"
    );
    let csrf = confirm.csrf();
    let p = b
        .post(
            link,
            &[
                ("csrf", &csrf),
                ("operator", "alice"),
                ("reason", "card processor fixed"),
            ],
        )
        .await;
    assert_eq!(
        (p.status, p.location()),
        (
            StatusCode::SEE_OTHER,
            "/dashboard/jobs/pay%2F17%2Bx?done=replayed"
        )
    );
    // The job's page says so and shows the entry with the form's operator
    // and reason (what a replay does is conformance's
    // `replay_only_from_dead_or_cancelled_and_is_audited`).
    let page = b.get(p.location()).await;
    page.html(StatusCode::OK);
    assert!(page.body.contains("Replayed: the job is ready again"));
    assert!(page.body.contains("card processor fixed") && page.body.contains("alice"));
    // Replaying again is refused: the job is ready now.
    b.get(link).await.refused(
        StatusCode::CONFLICT,
        "only dead or cancelled jobs can be replayed",
    );
    b.post(
        link,
        &[("csrf", &csrf), ("operator", "alice"), ("reason", "again")],
    )
    .await
    .refused(StatusCode::CONFLICT, "Nothing was changed");
}

#[tokio::test]
async fn cancel_is_confirmed_the_same_way() {
    let mut b = Browser::new();
    let id = b.insert("later-1", "{}").await;
    let page = b.get("/dashboard/jobs/later-1").await;
    assert!(
        page.body
            .contains(r#"href="/dashboard/jobs/later-1/cancel""#)
    );
    let confirm = b.get("/dashboard/jobs/later-1/cancel").await;
    confirm.html(StatusCode::OK);
    let csrf = confirm.csrf();
    b.post(
        "/dashboard/jobs/later-1/cancel",
        &[("csrf", &csrf), ("operator", "bob")],
    )
    .await
    .refused(StatusCode::BAD_REQUEST, "is required");
    assert_eq!(b.job(&id).await.state, JobState::Ready);
    let p = b
        .post(
            "/dashboard/jobs/later-1/cancel",
            &[
                ("csrf", &csrf),
                ("operator", "bob"),
                ("reason", "customer withdrew"),
            ],
        )
        .await;
    assert_eq!(p.location(), "/dashboard/jobs/later-1?done=cancelled");
    assert_eq!(b.job(&id).await.state, JobState::Cancelled);
    let audit = b.store().detail(&id).await.expect("detail").audit;
    assert_eq!(
        (audit[0].operator.as_str(), audit[0].reason.as_deref()),
        ("bob", Some("customer withdrew")),
        "the form's operator and reason"
    );
    // Cancelled jobs are dead letters too, and can be replayed.
    let p = b.get("/dashboard/dead?state=cancelled").await;
    assert!(p.body.contains("later-1"));
    b.get("/dashboard/jobs/later-1/cancel").await.refused(
        StatusCode::CONFLICT,
        "only blocked, waiting, ready or running jobs can be cancelled",
    );
}

#[tokio::test]
async fn reschedule_is_confirmed_with_the_change_and_audited() {
    let mut b = Browser::new();
    let id = b.insert("later-2", "{}").await;
    let page = b.get("/dashboard/jobs/later-2").await;
    assert!(
        page.body
            .contains(r#"href="/dashboard/jobs/later-2/reschedule""#)
    );
    let confirm = b.get("/dashboard/jobs/later-2/reschedule").await;
    confirm.html(StatusCode::OK);
    let csrf = confirm.csrf();
    let before = b.job(&id).await;
    // No change chosen, then a delay that does not parse: refused, the
    // form comes back, nothing is written.
    for (fields, needle) in [
        (
            vec![("when", "keep"), ("priority", "")],
            "Choose a new due time",
        ),
        (vec![("when", "delay"), ("delay", "soon")], "The delay"),
        (
            vec![("when", "keep"), ("priority", "99999")],
            "whole number",
        ),
    ] {
        let mut form = vec![
            ("csrf", csrf.as_str()),
            ("operator", "carol"),
            ("reason", "vip"),
        ];
        form.extend(fields);
        let r = b.post("/dashboard/jobs/later-2/reschedule", &form).await;
        r.refused(StatusCode::BAD_REQUEST, needle);
        assert!(
            r.body.contains(r#"value="carol""#),
            "the form comes back filled"
        );
    }
    let unchanged = b.job(&id).await;
    assert_eq!(
        (unchanged.available_at, unchanged.priority),
        (before.available_at, before.priority)
    );
    let p = b
        .post(
            "/dashboard/jobs/later-2/reschedule",
            &[
                ("csrf", &csrf),
                ("when", "at"),
                ("at", "2030-01-02T03:04:05Z"),
                ("priority", "7"),
                ("operator", "carol"),
                ("reason", "vip customer"),
            ],
        )
        .await;
    assert_eq!(p.location(), "/dashboard/jobs/later-2?done=rescheduled");
    let moved = b.job(&id).await;
    assert_eq!(moved.priority, 7);
    assert_eq!(moved.available_at.to_rfc3339(), "2030-01-02T03:04:05.000Z");
    let audit = b.store().detail(&id).await.expect("detail").audit;
    assert_eq!(
        (audit[0].operator.as_str(), audit[0].reason.as_deref()),
        (
            "carol",
            Some("run at 2030-01-02T03:04:05.000Z, priority 7: vip customer")
        ),
        "the form's operator and reason"
    );
    // Once it is no longer waiting, the page refuses.
    errand::Admin::new(b.store().clone())
        .cancel_jobs(&errand::CancelRequest {
            ids: vec![id.clone()],
            operator: "bob".into(),
            reason: None,
        })
        .await
        .expect("cancel");
    b.get("/dashboard/jobs/later-2/reschedule").await.refused(
        StatusCode::CONFLICT,
        "only waiting (ready or blocked) jobs can be rescheduled",
    );
}

#[tokio::test]
async fn bulk_replay_replays_exactly_the_jobs_confirmed() {
    let mut b = Browser::new();
    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(b.dead(&format!("bulk-{i}"), "{}", "relay down").await);
    }
    let other = b.dead("other-1", "{}", "bad payload").await;
    let list = b.get("/dashboard/dead?error=relay").await;
    assert!(list.body.contains("Replay the 3 jobs listed"));
    let confirm = b.get("/dashboard/dead/replay?error=relay").await;
    confirm.html(StatusCode::OK);
    assert!(confirm.body.contains("Replay 3 jobs?"));
    assert!(!confirm.body.contains("other-1"));
    let csrf = confirm.csrf();
    let mut fields = vec![("csrf", csrf.as_str()), ("operator", "carol")];
    for id in &ids {
        fields.push(("id", id.as_str()));
    }
    b.post("/dashboard/dead/replay", &fields)
        .await
        .refused(StatusCode::BAD_REQUEST, "is required");
    fields.push(("reason", "relay is back"));
    let p = b.post("/dashboard/dead/replay", &fields).await;
    assert_eq!(
        (p.status, p.location()),
        (StatusCode::SEE_OTHER, "/dashboard/dead?replayed=3")
    );
    for id in &ids {
        assert_eq!(b.job(id).await.state, JobState::Ready);
    }
    assert_eq!(b.job(&other).await.state, JobState::Dead, "not confirmed");
    let p = b.get(p.location()).await;
    assert!(p.body.contains("Replayed 3 jobs"));
    // All or none: one of them is no longer dead.
    let p = b
        .post(
            "/dashboard/dead/replay",
            &[
                ("csrf", &csrf),
                ("operator", "c"),
                ("reason", "r"),
                ("id", "other-1"),
                ("id", "bulk-0"),
            ],
        )
        .await;
    p.refused(StatusCode::CONFLICT, "Nothing was changed");
    b.get("/dashboard/dead/replay?error=nomatch")
        .await
        .refused(StatusCode::NOT_FOUND, "No dead or cancelled job matches");
}

#[tokio::test]
async fn listings_page_by_keyset() {
    let mut b = Browser::new();
    for i in 0..7 {
        b.insert(&format!("job-{i}"), "{}").await;
        b.q.advance(Duration::from_millis(5));
    }
    let p1 = b.get("/dashboard/jobs?limit=3").await;
    assert!(p1.body.contains("job-0") && p1.body.contains("job-2") && !p1.body.contains("job-3"));
    assert!(
        p1.body
            .contains(r#"href="/dashboard/jobs?limit=3&amp;after=job-2""#),
        "{}",
        p1.body
    );
    let p2 = b.get("/dashboard/jobs?limit=3&after=job-2").await;
    assert!(p2.body.contains("job-3") && p2.body.contains("job-5") && !p2.body.contains("job-2<"));
    assert!(p2.body.contains("first page"));
    let p3 = b.get("/dashboard/jobs?limit=3&after=job-5").await;
    assert!(p3.body.contains("job-6") && !p3.body.contains("next page"));
}

/// The search box finds jobs by metadata and payload fields, on the jobs
/// and dead-letter pages alike; its pages carry the search; a bad term
/// gets a page saying how terms are written; a search that stopped at its
/// bound says so.
#[tokio::test]
async fn the_search_box_finds_jobs_by_metadata_and_payload() {
    let mut b = Browser::new();
    for i in 0..6 {
        let job = NewJob::new(
            "email",
            Payload::from_json_text(format!(r#"{{"customer":{},"name":"c {i}"}}"#, i % 3)).unwrap(),
        )
        .unwrap()
        .with_id(JobId::new(format!("s-{i}")).unwrap())
        .with_meta("tenant", if i % 2 == 0 { "acme" } else { "globex" });
        b.store().insert(job).await.unwrap();
        b.q.advance(Duration::from_millis(5));
    }
    b.insert("plain-1", "{}").await;
    let p = b
        .get("/dashboard/jobs?q=meta.tenant%3Dacme+payload.customer%3D1")
        .await;
    assert_eq!(p.status, StatusCode::OK, "{}", p.body);
    assert!(p.body.contains("s-4"), "{}", p.body);
    for other in ["s-0", "s-1", "s-2", "s-3", "s-5", "plain-1"] {
        assert!(
            !p.body.contains(&format!(">{other}<")),
            "{other}: {}",
            p.body
        );
    }
    assert!(
        p.body
            .contains(r#"value="meta.tenant=acme payload.customer=1""#),
        "{}",
        p.body
    );
    let p = b.get("/dashboard/jobs?q=payload.name%3D%22c+5%22").await;
    assert!(
        p.body.contains(">s-5<") && !p.body.contains(">s-4<"),
        "{}",
        p.body
    );
    // The next page keeps the search.
    let p = b
        .get("/dashboard/jobs?limit=1&q=meta.tenant%3Dglobex")
        .await;
    assert!(
        p.body.contains(">s-1<") && !p.body.contains(">s-3<"),
        "{}",
        p.body
    );
    assert!(
        p.body
            .contains(r#"href="/dashboard/jobs?q=meta.tenant%3Dglobex&amp;limit=1&amp;after=s-1""#),
        "{}",
        p.body
    );
    let p = b.get("/dashboard/dead?q=meta.tenant%3Dacme").await;
    assert!(p.body.contains("No dead jobs match"), "{}", p.body);
    b.get("/dashboard/jobs?q=customer%3D1")
        .await
        .refused(StatusCode::BAD_REQUEST, "payload.PATH=VALUE");
    b.get("/dashboard/jobs?q=payload.a%5Bx%5D%3D1")
        .await
        .refused(StatusCode::BAD_REQUEST, "payload.PATH=VALUE");
    let note = super::jobs::stopped_note(&errand::SearchPage {
        scanned: 100_000,
        stopped: true,
        ..errand::SearchPage::default()
    })
    .into_string();
    assert!(
        note.contains("read 100000 jobs") && note.contains("next page reads on"),
        "{note}"
    );
    let none = super::jobs::stopped_note(&errand::SearchPage::default()).into_string();
    assert!(none.is_empty());
}

#[tokio::test]
async fn bad_input_gets_an_error_page_that_says_what_to_do() {
    let mut b = Browser::new();
    for (uri, status, words) in [
        (
            "/dashboard/jobs?state=stuck",
            StatusCode::BAD_REQUEST,
            "unknown state",
        ),
        (
            "/dashboard/jobs?limit=0",
            StatusCode::BAD_REQUEST,
            "from 1 to 200",
        ),
        (
            "/dashboard/jobs?queue=-x",
            StatusCode::BAD_REQUEST,
            "queue name",
        ),
        (
            "/dashboard/jobs?colour=red",
            StatusCode::BAD_REQUEST,
            "Unknown parameter",
        ),
        (
            "/dashboard/dead?state=ready",
            StatusCode::BAD_REQUEST,
            "dead or cancelled",
        ),
        (
            "/dashboard/jobs/a%20b",
            StatusCode::BAD_REQUEST,
            "a job id may hold only",
        ),
        (
            "/dashboard/jobs/nope",
            StatusCode::NOT_FOUND,
            "no job with id",
        ),
        (
            "/dashboard/jobs/nope/replay",
            StatusCode::NOT_FOUND,
            "no job with id",
        ),
        (
            "/dashboard/jobs?after=gone",
            StatusCode::NOT_FOUND,
            "list again from the start",
        ),
    ] {
        b.get(uri).await.refused(status, words);
    }
    b.dead("dead-1", "{}", "boom").await;
    let csrf = b.get("/dashboard/jobs/dead-1/replay").await.csrf();
    b.post("/dashboard/jobs", &[("csrf", &csrf)])
        .await
        .refused(StatusCode::METHOD_NOT_ALLOWED, "does not accept");
}

#[tokio::test]
async fn without_a_token_only_loopback_hosts_are_answered() {
    let mut b = Browser::new();
    let req = Request::get("/dashboard/jobs")
        .header(header::HOST, "evil.example:7878")
        .body(Body::empty())
        .expect("request");
    b.send(req).await.refused(StatusCode::FORBIDDEN, "loopback");
    let req = Request::get("/dashboard/jobs")
        .header(header::HOST, "localhost:7878")
        .body(Body::empty())
        .expect("request");
    b.send(req).await.html(StatusCode::OK);
    // The API keeps refusing browsers; the dashboard is not behind its fence.
    let req = Request::get("/v1/jobs")
        .header(header::HOST, "127.0.0.1:7878")
        .header("sec-fetch-site", "same-origin")
        .body(Body::empty())
        .expect("request");
    assert_eq!(b.send(req).await.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn with_a_token_the_dashboard_needs_a_session() {
    let mut b = Browser::with(ServerConfig {
        token: Some(AccessToken::new(TOKEN).expect("token")),
        ..ServerConfig::default()
    });
    let id = b.dead("dead-1", "{}", "boom").await;
    let p = b.get("/dashboard/jobs").await;
    assert_eq!(
        (p.status, p.location()),
        (StatusCode::SEE_OTHER, "/dashboard/login")
    );
    assert!(!p.body.contains("dead-1"));
    let forged = "0123456789abcdef0123456789abcdef.99999999999999.00";
    b.cookies.push(("errand_session".into(), forged.into()));
    assert_eq!(
        b.get("/dashboard/jobs/dead-1").await.status,
        StatusCode::SEE_OTHER
    );
    b.cookies.clear();
    // The stylesheet and the sign-in form are open.
    assert_eq!(
        b.get("/dashboard/static/style.css").await.status,
        StatusCode::OK
    );
    let login = b.get("/dashboard/login").await;
    login.html(StatusCode::OK);
    let csrf = login.csrf();
    // A POST without a session is refused before its form is looked at.
    b.post(
        "/dashboard/jobs/dead-1/replay",
        &[("csrf", &csrf), ("operator", "a"), ("reason", "r")],
    )
    .await
    .refused(StatusCode::UNAUTHORIZED, "Sign in");
    assert_eq!(b.job(&id).await.state, JobState::Dead);
    // A wrong token, then the right one.
    b.post("/dashboard/login", &[("csrf", &csrf), ("token", "guess")])
        .await
        .refused(StatusCode::UNAUTHORIZED, "not this server");
    b.post("/dashboard/login", &[("token", TOKEN)])
        .await
        .refused(StatusCode::FORBIDDEN, "security token");
    let p = b
        .post("/dashboard/login", &[("csrf", &csrf), ("token", TOKEN)])
        .await;
    assert_eq!(
        (p.status, p.location()),
        (StatusCode::SEE_OTHER, "/dashboard/jobs")
    );
    let session = p.headers[header::SET_COOKIE].to_str().expect("ascii");
    assert!(session.starts_with("errand_session=") && session.contains("Max-Age=43200"));
    assert!(!session.contains(TOKEN), "the token itself is not stored");
    let jobs = b.get("/dashboard/jobs").await;
    jobs.html(StatusCode::OK);
    assert!(jobs.body.contains("dead-1") && jobs.body.contains("Sign out"));
    // The pre-session token no longer works: tokens are bound to the session.
    b.post(
        "/dashboard/jobs/dead-1/replay",
        &[("csrf", &csrf), ("operator", "a"), ("reason", "r")],
    )
    .await
    .refused(StatusCode::FORBIDDEN, "security token");
    let csrf = b.get("/dashboard/jobs/dead-1/replay").await.csrf();
    let p = b
        .post(
            "/dashboard/jobs/dead-1/replay",
            &[("csrf", &csrf), ("operator", "a"), ("reason", "r")],
        )
        .await;
    assert_eq!(p.status, StatusCode::SEE_OTHER);
    assert_eq!(b.job(&id).await.state, JobState::Ready);
    // Any Host is fine with a token (the session guards it).
    let p = b.post("/dashboard/logout", &[("csrf", &csrf)]).await;
    assert_eq!(p.location(), "/dashboard/login");
    assert!(!b.cookies.iter().any(|(k, _)| k == "errand_session"));
    assert_eq!(b.get("/dashboard/jobs").await.status, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn the_queues_page_counts_each_queue_and_a_pause_is_confirmed_then_audited() {
    let mut b = Browser::new();
    b.dead("d-1", "{}", "card declined").await;
    b.insert("r-1", "{}").await;
    let p = b.get("/dashboard/queues").await;
    p.html(StatusCode::OK);
    for words in [
        "<td>",
        "mail",
        "later",
        "permanent 1",
        "No worker has reported",
    ] {
        assert!(p.body.contains(words), "missing {words}: {}", p.body);
    }
    let confirm = b.get("/dashboard/queues/later/pause").await;
    confirm.html(StatusCode::OK);
    assert!(confirm.body.contains("Pause queue"));
    assert!(
        b.store().paused_queues().await.expect("paused").is_empty(),
        "a GET changes nothing"
    );
    let csrf = confirm.csrf();
    let url = "/dashboard/queues/later/pause";
    b.post(url, &[("csrf", &csrf), ("operator", "alice")])
        .await
        .refused(StatusCode::BAD_REQUEST, "The reason (`reason`) is required");
    b.post(url, &[("operator", "alice"), ("reason", "outage")])
        .await
        .refused(StatusCode::FORBIDDEN, "security token");
    assert!(b.store().paused_queues().await.expect("paused").is_empty());
    let p = b
        .post(
            url,
            &[
                ("csrf", &csrf),
                ("operator", "alice"),
                ("reason", "provider outage"),
            ],
        )
        .await;
    assert_eq!(
        (p.status, p.location()),
        (StatusCode::SEE_OTHER, "/dashboard/queues")
    );
    let paused = b.store().paused_queues().await.expect("paused");
    assert_eq!(paused.len(), 1);
    assert_eq!(paused[0].queue.as_str(), "later");
    let p = b.get("/dashboard/queues").await;
    assert!(
        p.body.contains("/dashboard/queues/later/resume"),
        "{}",
        p.body
    );
    b.get("/dashboard/queues/no%20such/pause")
        .await
        .refused(StatusCode::BAD_REQUEST, "not valid");

    let log = b.get("/dashboard/audit?queue=later").await;
    log.html(StatusCode::OK);
    assert!(log.body.contains("pause") && log.body.contains("provider outage"));
    assert!(log.body.contains("alice"));
}

#[tokio::test]
async fn the_audit_log_pages_newest_first_and_escapes_what_operators_wrote() {
    let mut b = Browser::new();
    for i in 0..55 {
        let action = errand::QueueAction {
            queue: Name::parse("queue", format!("q{i}")).expect("name"),
            operator: "op".into(),
            reason: Some(if i == 54 {
                "<script>alert(1)</script>".into()
            } else {
                format!("r{i}")
            }),
        };
        errand::Admin::new(b.store().clone())
            .pause_queue(&action)
            .await
            .expect("pause");
    }
    let first = b.get("/dashboard/audit").await;
    first.html(StatusCode::OK);
    assert!(!first.body.contains("<script>alert"), "escaped");
    assert!(first.body.contains("&lt;script&gt;"));
    assert!(first.body.contains(">q54<") && !first.body.contains(">q4<"));
    let next = first
        .body
        .split("rel=\"next\" href=\"")
        .nth(1)
        .and_then(|r| r.split('"').next())
        .expect("a next page")
        .replace("&amp;", "&");
    let second = b.get(&next).await;
    second.html(StatusCode::OK);
    assert!(second.body.contains(">q4<") && !second.body.contains(">q54<"));
    assert!(!second.body.contains("rel=\"next\""), "the last page");
    b.get("/dashboard/audit?before=soon")
        .await
        .refused(StatusCode::BAD_REQUEST, "sequence number");
    b.get("/dashboard/audit?sort=asc")
        .await
        .refused(StatusCode::BAD_REQUEST, "Unknown parameter");
}

/// A copy made by `errand replay --new-key` shows on the audit log with
/// both jobs linked, and each job's page says which way it went.
#[tokio::test]
async fn a_copy_links_the_original_and_the_new_job() {
    let mut b = Browser::new();
    let original = b
        .dead("orig-1", r#"{"to":"a@example.com"}"#, "smtp 550")
        .await;
    let copied = errand::Admin::new(b.store().clone())
        .copy_jobs(&errand::CopyRequest {
            ids: vec![original.clone()],
            operator: "alice".into(),
            reason: Some("template fixed".into()),
        })
        .await
        .expect("copy");
    let copy = copied.first().expect("one copy").job.id.clone();
    let log = b.get("/dashboard/audit").await;
    log.html(StatusCode::OK);
    let row = format!(
        r#"<a href="/dashboard/jobs/orig-1"><code>orig-1</code></a> → <a href="/dashboard/jobs/{c}"><code>{c}</code></a>"#,
        c = copy.as_str()
    );
    assert!(log.body.contains(&row), "{row} in {}", log.body);
    let by_copy = b
        .get(&format!("/dashboard/audit?job={}", copy.as_str()))
        .await;
    by_copy.html(StatusCode::OK);
    assert!(by_copy.body.contains("template fixed"), "{}", by_copy.body);
    let page = b.get("/dashboard/jobs/orig-1").await;
    page.html(StatusCode::OK);
    let to = format!(
        r#"copy to <a href="/dashboard/jobs/{c}"><code>{c}</code></a>"#,
        c = copy.as_str()
    );
    assert!(page.body.contains(&to), "{to} in {}", page.body);
    let page = b.get(&format!("/dashboard/jobs/{}", copy.as_str())).await;
    page.html(StatusCode::OK);
    assert!(
        page.body
            .contains(r#"copy of <a href="/dashboard/jobs/orig-1"><code>orig-1</code></a>"#),
        "{}",
        page.body
    );
}

/// The dashboard's listings are bounded by bytes as well as rows: a page of
/// large payloads ends early and links to the next page.
#[tokio::test]
async fn a_listing_of_large_payloads_ends_early_and_links_the_next_page() {
    let mut b = Browser::new();
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(900 * 1024));
    for i in 0..6 {
        b.insert(&format!("big-{i}"), &big).await;
    }
    let p = b.get("/dashboard/jobs").await;
    p.html(StatusCode::OK);
    assert!(
        p.body.contains("big-4") && !p.body.contains("big-5"),
        "the page ends at its byte budget"
    );
    assert!(
        p.body.contains("rel=\"next\""),
        "and links to the next page"
    );
    let p = b.get("/dashboard/jobs?after=big-4").await;
    p.html(StatusCode::OK);
    assert!(p.body.contains("big-5") && !p.body.contains("big-4"));
}

/// A payload stored past today's checks (by SQL, or by an older version)
/// renders on the job's page as it was stored, in the list and the
/// replay confirmation too: no page fails on stored data.
#[tokio::test]
async fn a_payload_stored_past_the_checks_renders_as_stored() {
    let mut b = Browser::new();
    let id = b.dead("odd", r#"{"a":1}"#, "boom").await;
    for stored in [r#"{"a":"\ud800"}"#, "[1e400]"] {
        let text = stored.to_owned();
        b.q.sqlite()
            .write(move |c, _| {
                c.execute(
                    "UPDATE errand_jobs SET payload = ?1 WHERE id = 'odd'",
                    [&text],
                )
                .map_err(|e| errand::Error::storage(e.to_string()))
            })
            .await
            .expect("stored");
        let page = b.get(&format!("/dashboard/jobs/{id}")).await;
        page.html(StatusCode::OK);
        let shown = stored.replace('"', "&quot;");
        assert!(page.body.contains(&shown), "{stored} not shown as stored");
        for uri in [
            "/dashboard/jobs",
            "/dashboard/dead",
            "/dashboard/jobs/odd/replay",
        ] {
            b.get(uri).await.html(StatusCode::OK);
        }
    }
}

/// The job page shows a running job's progress report and a done job's
/// output, both escaped.
#[tokio::test]
async fn the_job_page_shows_progress_and_output() {
    let mut b = Browser::new();
    let id = b.insert("prog-1", "{}").await;
    let claimed = b
        .store()
        .claim(&ClaimRequest {
            queues: vec![],
            limit: 1,
            lease: Duration::from_secs(60),
            rate: None,
            reclaim: false,
        })
        .await
        .expect("claim");
    let lease = &claimed[0].lease;
    let report = errand::core::Progress::new(40, Some("<b>copying</b> rows".into()), 1);
    b.store()
        .heartbeat_with_progress(lease, Duration::from_secs(60), &report)
        .await
        .expect("renewal");
    let p = b.get("/dashboard/jobs/prog-1").await;
    p.html(StatusCode::OK);
    assert!(
        p.body.contains(r#"<progress value="40" max="100">"#),
        "{}",
        p.body
    );
    assert!(
        p.body
            .contains("40% (attempt 1) — &lt;b&gt;copying&lt;/b&gt; rows"),
        "{}",
        p.body
    );
    let output = Payload::output(r#"{"rows":"<i>120</i>"}"#).expect("output");
    b.store()
        .complete_with_output(lease, &output)
        .await
        .expect("ack");
    let p = b.get("/dashboard/jobs/prog-1").await;
    assert!(p.body.contains("<h2>Output</h2>"), "{}", p.body);
    assert!(p.body.contains("&lt;i&gt;120&lt;/i&gt;") && !p.body.contains("<i>120"));
    assert_eq!(b.job(&id).await.state, errand::JobState::Done);
}

/// A workflow's page lists its steps with their states and dependencies,
/// linked; the job page links its workflow, tags (to the tag's listing)
/// and shows its metadata, all escaped; the listing filters by tag.
#[tokio::test]
async fn the_workflow_page_and_labels() {
    let mut b = Browser::new();
    let mut wf = errand::Workflow::with_id(errand::WorkflowId::new("order-7/fulfil").unwrap());
    let fetch = wf.step(
        NewJob::new("fetch", Payload::default())
            .unwrap()
            .with_id(JobId::new("wf-a").unwrap())
            .with_tag("eu")
            .unwrap()
            .with_meta("note", "<script>x</script>"),
    );
    wf.step_after(
        NewJob::new("parse", Payload::default())
            .unwrap()
            .with_id(JobId::new("wf-b").unwrap()),
        &[&fetch],
    );
    b.store().insert_many(wf.into_jobs()).await.expect("insert");
    b.insert("other", "{}").await;
    let p = b.get("/dashboard/workflows/order-7%2Ffulfil").await;
    p.html(StatusCode::OK);
    assert!(p.body.contains("2 step(s), unfinished"), "{}", p.body);
    assert!(
        p.body
            .contains(r#"<a href="/dashboard/jobs/wf-a"><code>wf-a</code></a>"#),
        "{}",
        p.body
    );
    assert!(p.body.contains("state-blocked"), "{}", p.body);
    let job = b.get("/dashboard/jobs/wf-a").await;
    assert!(
        job.body.contains(
            r#"<a href="/dashboard/workflows/order-7%2Ffulfil"><code>order-7/fulfil</code></a>"#
        ),
        "{}",
        job.body
    );
    assert!(
        job.body.contains(r#"href="/dashboard/jobs?tag=eu""#),
        "{}",
        job.body
    );
    assert!(
        job.body.contains("&lt;script&gt;x&lt;/script&gt;") && !job.body.contains("<script>x"),
        "{}",
        job.body
    );
    let listing = b.get("/dashboard/jobs?tag=eu").await;
    assert!(listing.body.contains("wf-a") && !listing.body.contains(">other<"));
    assert!(!listing.body.contains("wf-b"), "{}", listing.body);
    b.get("/dashboard/workflows/nope")
        .await
        .html(StatusCode::NOT_FOUND);
    // A batch's page: open, then sealed with its callback linked.
    let batch = errand::BatchId::new("import/42").unwrap();
    b.store()
        .insert(
            NewJob::new("resize", Payload::default())
                .unwrap()
                .with_id(JobId::new("member-1").unwrap())
                .in_batch(batch.clone()),
        )
        .await
        .unwrap();
    let open = b.get("/dashboard/batches/import%2F42").await;
    open.html(StatusCode::OK);
    assert!(
        open.body.contains("open: jobs may still join it"),
        "{}",
        open.body
    );
    let member = b.get("/dashboard/jobs/member-1").await;
    assert!(
        member
            .body
            .contains(r#"<a href="/dashboard/batches/import%2F42"><code>import/42</code></a>"#),
        "{}",
        member.body
    );
    b.store()
        .seal_batch(&errand::BatchSeal {
            batch,
            on_success: Some(
                NewJob::new("notify", Payload::default())
                    .unwrap()
                    .with_id(JobId::new("cb-1").unwrap()),
            ),
            on_finish: None,
        })
        .await
        .unwrap();
    let sealed = b.get("/dashboard/batches/import%2F42").await;
    assert!(sealed.body.contains("sealed at"), "{}", sealed.body);
    assert!(
        sealed
            .body
            .contains(r#"<a href="/dashboard/jobs/cb-1"><code>cb-1</code></a>"#),
        "{}",
        sealed.body
    );
    b.get("/dashboard/batches/nope")
        .await
        .html(StatusCode::NOT_FOUND);
    b.get("/dashboard/jobs?tag=a%20b")
        .await
        .html(StatusCode::BAD_REQUEST);
}

/// Stores a schedule as `errand schedule add` does.
async fn add_schedule(b: &Browser, name: &str, payload: &str, operator: &str, reason: &str) {
    let definition = errand::ScheduleDefinition::new(
        name,
        "*/5 * * * *",
        "report",
        Payload::from_json_text(payload).expect("json"),
    )
    .expect("definition")
    .on_queue("reports")
    .expect("queue")
    .with_max_attempts(7)
    .expect("attempts")
    .with_misfire(errand::Misfire::Backfill(3));
    errand::Admin::new(b.store())
        .add_schedule(&errand::ScheduleAdd {
            definition,
            replace: false,
            operator: operator.into(),
            reason: Some(reason.into()),
        })
        .await
        .expect("add");
}

async fn stored_schedule(b: &Browser, name: &str) -> errand::StoredSchedule {
    errand::Admin::new(b.store())
        .schedule(&Name::parse("schedule", name).expect("name"))
        .await
        .expect("schedule")
}

#[tokio::test]
async fn the_schedules_page_lists_them_escaped_and_a_pause_is_confirmed_then_audited() {
    let mut b = Browser::new();
    let empty = b.get("/dashboard/schedules").await;
    empty.html(StatusCode::OK);
    assert!(
        empty.body.contains("No schedule is stored"),
        "{}",
        empty.body
    );
    assert!(
        empty
            .body
            .contains(r#"class="active" href="/dashboard/schedules""#),
        "the navigation marks the section: {}",
        empty.body
    );

    add_schedule(
        &b,
        "nightly",
        r#"{"note":"<script>alert('payload')</script>","x":"\"><img src=x>"}"#,
        "<b>eve</b>",
        "<script>alert('reason')</script>",
    )
    .await;
    let p = b.get("/dashboard/schedules").await;
    p.html(StatusCode::OK);
    for words in [
        "<code>nightly</code>",
        "<code>*/5 * * * *</code>",
        "<td>report</td>",
        r#"href="/dashboard/jobs?queue=reports""#,
        "<td>backfill:3</td>",
        r#"<td class="num">7</td>"#,
        "running",
        r#"href="/dashboard/schedules/nightly/pause""#,
        r#"href="/dashboard/audit?schedule=nightly""#,
        "&lt;script&gt;alert('payload')&lt;/script&gt;",
    ] {
        assert!(p.body.contains(words), "missing {words}: {}", p.body);
    }
    assert!(!p.body.contains("<script") && !p.body.contains("<img"));
    assert!(
        p.body.contains("<time datetime="),
        "the next tick: {}",
        p.body
    );

    let confirm = b.get("/dashboard/schedules/nightly/pause").await;
    confirm.html(StatusCode::OK);
    assert!(confirm.body.contains("Pause schedule"), "{}", confirm.body);
    assert!(
        confirm.body.contains("misfire backfill:3"),
        "{}",
        confirm.body
    );
    assert!(
        stored_schedule(&b, "nightly").await.paused.is_none(),
        "a GET changes nothing"
    );
    let csrf = confirm.csrf();
    let url = "/dashboard/schedules/nightly/pause";
    b.post(url, &[("csrf", &csrf), ("operator", "alice")])
        .await
        .refused(StatusCode::BAD_REQUEST, "The reason (`reason`) is required");
    b.post(url, &[("operator", "alice"), ("reason", "freeze")])
        .await
        .refused(StatusCode::FORBIDDEN, "security token");
    b.post(
        url,
        &[
            ("csrf", &csrf),
            ("operator", "alice"),
            ("reason", "r"),
            ("colour", "red"),
        ],
    )
    .await
    .refused(StatusCode::BAD_REQUEST, "Unknown parameter");
    assert!(stored_schedule(&b, "nightly").await.paused.is_none());
    let p = b
        .post(
            url,
            &[
                ("csrf", &csrf),
                ("operator", "alice"),
                ("reason", "<i>month-end</i> freeze"),
            ],
        )
        .await;
    assert_eq!(
        (p.status, p.location()),
        (StatusCode::SEE_OTHER, "/dashboard/schedules")
    );
    let paused = stored_schedule(&b, "nightly").await.paused.expect("paused");
    assert_eq!(paused.operator, "alice");
    let p = b.get("/dashboard/schedules").await;
    p.html(StatusCode::OK);
    assert!(
        p.body.contains("paused") && p.body.contains(" by alice at "),
        "{}",
        p.body
    );
    assert!(p.body.contains("&lt;i&gt;month-end&lt;/i&gt; freeze"));
    assert!(
        p.body
            .contains(r#"href="/dashboard/schedules/nightly/resume""#)
    );

    let confirm = b.get("/dashboard/schedules/nightly/resume").await;
    confirm.html(StatusCode::OK);
    let csrf = confirm.csrf();
    let p = b
        .post(
            "/dashboard/schedules/nightly/resume",
            &[("csrf", &csrf), ("operator", "bob"), ("reason", "over")],
        )
        .await;
    assert_eq!(p.status, StatusCode::SEE_OTHER, "{}", p.body);
    assert!(stored_schedule(&b, "nightly").await.paused.is_none());

    b.get("/dashboard/schedules/nope/pause")
        .await
        .refused(StatusCode::NOT_FOUND, "no schedule named `nope`");
    b.post(
        "/dashboard/schedules/nope/pause",
        &[("csrf", &csrf), ("operator", "alice"), ("reason", "r")],
    )
    .await
    .refused(StatusCode::NOT_FOUND, "Not found");
    b.get("/dashboard/schedules/no%20such/pause")
        .await
        .refused(StatusCode::BAD_REQUEST, "not valid");
}

#[tokio::test]
async fn the_audit_log_shows_schedule_entries_and_filters_by_schedule() {
    let mut b = Browser::new();
    add_schedule(&b, "nightly", "{}", "alice", "finance asked").await;
    add_schedule(&b, "hourly", "{}", "bob", "ops asked").await;
    errand::Admin::new(b.store())
        .pause_schedule(&errand::ScheduleAction {
            name: Name::parse("schedule", "nightly").expect("name"),
            operator: "carol".into(),
            reason: Some("<script>freeze</script>".into()),
        })
        .await
        .expect("pause");

    let all = b.get("/dashboard/audit").await;
    all.html(StatusCode::OK);
    for words in [
        "schedule_add",
        "schedule_pause",
        r#"schedule <a href="/dashboard/audit?schedule=nightly"><code>nightly</code></a>"#,
        r#"schedule <a href="/dashboard/audit?schedule=hourly"><code>hourly</code></a>"#,
        "<td>reports</td>",
        "&lt;script&gt;freeze&lt;/script&gt;",
    ] {
        assert!(all.body.contains(words), "missing {words}: {}", all.body);
    }
    assert!(!all.body.contains("<script>"));

    let one = b.get("/dashboard/audit?schedule=nightly").await;
    one.html(StatusCode::OK);
    assert!(
        one.body.contains(r#"name="schedule" value="nightly""#),
        "the filter keeps its value: {}",
        one.body
    );
    assert!(one.body.contains("schedule_pause") && one.body.contains("finance asked"));
    assert!(!one.body.contains("ops asked"), "{}", one.body);
    let none = b.get("/dashboard/audit?schedule=weekly").await;
    none.html(StatusCode::OK);
    assert!(none.body.contains("No operator action matches."));
    b.get("/dashboard/audit?schedule=a%20b")
        .await
        .refused(StatusCode::BAD_REQUEST, "schedule name");
}

#[tokio::test]
async fn the_queues_pages_draw_charts_from_the_per_minute_counts() {
    use errand::{ErrorClass, MinuteCount, Series, Timestamp};
    let mut b = Browser::new();
    b.insert_on("mail", "m-1", "{}").await;
    let now = errand::core::minute_of(Timestamp::now());
    let count = |queue: &str, minute: i64, series: Series, value: u64| MinuteCount {
        queue: errand::Name::parse("queue", queue).expect("queue"),
        minute,
        series,
        value,
    };
    b.store()
        .record_minutes(&[
            count("mail", now, Series::Finished, 120),
            count("mail", now - 1, Series::Finished, 30),
            count("mail", now, Series::Retry(ErrorClass::Timeout), 4),
            count("mail", now, Series::Depth, 17),
            count("sms", now, Series::Finished, 7),
            count("sms", now - 30, Series::Dead, 2),
        ])
        .await
        .expect("recorded");

    let p = b.get("/dashboard/queues").await;
    p.html(StatusCode::OK);
    assert_eq!(p.body.matches("<svg").count(), 7, "{}", p.body);
    for words in [
        "Every queue, over time",
        "Jobs finished, the last hour",
        "157 in total",
        "jobs per minute",
        "time (UTC)",
        "timeout",
        r#"href="/dashboard/queues?window=day""#,
        r#"aria-current="page""#,
        r#"href="/dashboard/queues/mail""#,
    ] {
        assert!(p.body.contains(words), "missing {words}: {}", p.body);
    }

    let day = b.get("/dashboard/queues?window=day").await;
    day.html(StatusCode::OK);
    assert!(day.body.contains("jobs per 15 min"), "{}", day.body);
    assert!(day.body.contains("157 in total"), "{}", day.body);

    let mail = b.get("/dashboard/queues/mail").await;
    mail.html(StatusCode::OK);
    assert_eq!(mail.body.matches("<svg").count(), 7);
    for words in [
        "Queue <code>mail</code>",
        "150 in total",
        r#"href="/dashboard/queues/mail?window=day""#,
        r#"href="/dashboard/jobs?queue=mail""#,
    ] {
        assert!(mail.body.contains(words), "missing {words}: {}", mail.body);
    }
    assert!(!mail.body.contains("157 in total"));

    let idle = b.get("/dashboard/queues/idle").await;
    idle.html(StatusCode::OK);
    assert!(
        idle.body.contains("nothing in this window"),
        "{}",
        idle.body
    );

    b.get("/dashboard/queues?window=week")
        .await
        .refused(StatusCode::BAD_REQUEST, "`hour` or `day`");
    b.get("/dashboard/queues?colour=blue")
        .await
        .refused(StatusCode::BAD_REQUEST, "colour");
    b.get("/dashboard/queues/no%20such")
        .await
        .refused(StatusCode::BAD_REQUEST, "not valid");
}

/// A step that depends on more jobs than a page lists shows the first
/// ones and links its own page for the rest: a workflow page stays small
/// however wide its fan-in.
#[tokio::test]
async fn a_wide_step_lists_its_first_dependencies_and_links_the_rest() {
    let mut b = Browser::new();
    let deps: Vec<JobId> = (0..130)
        .map(|n| JobId::new(format!("in-{n:03}")).unwrap())
        .collect();
    let inputs: Vec<NewJob> = deps
        .iter()
        .map(|d| {
            NewJob::new("fetch", Payload::default())
                .unwrap()
                .with_id(d.clone())
        })
        .collect();
    b.store().insert_many(inputs).await.expect("inputs");
    let mut wf = errand::Workflow::with_id(errand::WorkflowId::new("wide").unwrap());
    let join = deps.iter().fold(
        NewJob::new("join", Payload::default())
            .unwrap()
            .with_id(JobId::new("join").unwrap()),
        |job, d| job.depends_on(d.clone()),
    );
    wf.step(join);
    b.store().insert_many(wf.into_jobs()).await.expect("insert");
    let p = b.get("/dashboard/workflows/wide").await;
    p.html(StatusCode::OK);
    assert!(p.body.contains("<code>in-099</code>"), "{}", p.body);
    assert!(!p.body.contains("<code>in-100</code>"), "{}", p.body);
    assert!(
        p.body
            .contains(r#"<a href="/dashboard/jobs/join">and 30 more</a>"#),
        "{}",
        p.body
    );
}

#[tokio::test]
async fn a_signal_is_sent_from_the_job_page_and_audited() {
    let mut b = Browser::new();
    let waiting = errand::NewJob::new("hold", errand::Payload::default())
        .expect("kind")
        .with_id(errand::JobId::new("hold-9").expect("id"))
        .awaiting("paid", None, errand::OnAwaitTimeout::Fail)
        .expect("wait");
    let id = b.store().insert(waiting).await.expect("insert").job.id;
    let page = b.get("/dashboard/jobs/hold-9").await;
    assert!(page.body.contains("waits for signal"), "the wait is shown");
    assert!(
        page.body
            .contains(r#"href="/dashboard/jobs/hold-9/signal""#)
    );
    let confirm = b.get("/dashboard/jobs/hold-9/signal").await;
    confirm.html(StatusCode::OK);
    assert!(
        confirm.body.contains(r#"value="paid""#),
        "the awaited name is filled in"
    );
    let csrf = confirm.csrf();
    // A payload that is not JSON, then a signal the job does not wait
    // for: refused, the form comes back, nothing is written.
    for (name, payload, needle) in [
        ("paid", "{", "The payload"),
        ("shipped", "", "waits for the signal paid"),
    ] {
        let r = b
            .post(
                "/dashboard/jobs/hold-9/signal",
                &[
                    ("csrf", csrf.as_str()),
                    ("name", name),
                    ("payload", payload),
                    ("operator", "carol"),
                    ("reason", "paid at the desk"),
                ],
            )
            .await;
        r.refused(StatusCode::BAD_REQUEST, needle);
        assert!(
            r.body.contains(r#"value="carol""#),
            "the form comes back filled"
        );
    }
    assert_eq!(b.job(&id).await.state, errand::JobState::Waiting);
    let p = b
        .post(
            "/dashboard/jobs/hold-9/signal",
            &[
                ("csrf", csrf.as_str()),
                ("name", "paid"),
                ("payload", r#"{"payment": "p-3"}"#),
                ("operator", "carol"),
                ("reason", "paid at the desk"),
            ],
        )
        .await;
    assert_eq!(p.location(), "/dashboard/jobs/hold-9?done=signalled");
    assert_eq!(b.job(&id).await.state, errand::JobState::Ready);
    let detail = b.store().detail(&id).await.expect("detail");
    assert_eq!(detail.signals.len(), 1);
    assert_eq!(
        (
            detail.audit[0].action.as_str(),
            detail.audit[0].operator.as_str()
        ),
        ("signal", "carol")
    );
    let shown = b.get("/dashboard/jobs/hold-9").await;
    assert!(
        shown.body.contains("resumed the job"),
        "the signal is listed"
    );
}

#[tokio::test]
async fn a_child_added_at_run_time_links_the_step_that_added_it() {
    let mut b = Browser::new();
    let store = b.store();
    let step = errand::NewJob::new("list", errand::Payload::default())
        .expect("kind")
        .with_id(errand::JobId::new("lister").expect("id"));
    store.insert(step).await.expect("insert");
    let req = errand::ClaimRequest {
        queues: Vec::new(),
        limit: 1,
        lease: std::time::Duration::from_secs(60),
        rate: None,
        reclaim: false,
    };
    let claimed = store.claim(&req).await.expect("claim");
    let child = errand::NewJob::new("page", errand::Payload::default())
        .expect("kind")
        .with_id(errand::JobId::new("page-1").expect("id"));
    store
        .complete_with_children(&claimed[0].lease, None, &[child])
        .await
        .expect("complete");
    let page = b.get("/dashboard/jobs/page-1").await;
    page.html(StatusCode::OK);
    assert!(
        page.body.contains(
            r#"<th>added by</th><td>step <a href="/dashboard/jobs/lister"><code>lister</code></a>"#
        ),
        "{}",
        page.body
    );
    let step = b.get("/dashboard/jobs/lister").await;
    assert!(!step.body.contains("added by"), "the step was enqueued");
}

/// A schedule added, edited and removed from the dashboard: each form is
/// a GET that changes nothing, then a POST with the CSRF token, the
/// operator and a reason; a bad field (a time zone that does not exist)
/// brings the form back filled in, saying what to fix, and writes nothing;
/// each change is in the audit log with the operator.
#[tokio::test]
async fn a_schedule_is_added_edited_and_removed_from_the_dashboard() {
    let mut b = Browser::new();
    let list = b.get("/dashboard/schedules").await;
    assert!(
        list.body.contains(r#"href="/dashboard/schedules/new""#),
        "{}",
        list.body
    );
    let form = b.get("/dashboard/schedules/new").await;
    form.html(StatusCode::OK);
    assert!(
        form.body.contains(r#"value="UTC""#),
        "the default zone: {}",
        form.body
    );
    let csrf = form.csrf();
    let fields = |tz: &'static str, cron: &'static str| {
        vec![
            ("name", "nightly"),
            ("cron", cron),
            ("tz", tz),
            ("kind", "report"),
            ("queue", "reports"),
            ("payload", r#"{"day": "yesterday"}"#),
            ("max_attempts", "7"),
            ("misfire", "once"),
            ("operator", "carol"),
            ("reason", "nightly numbers"),
        ]
    };
    let mut post = fields("Europe/Nowhere", "30 2 * * *");
    post.push(("csrf", csrf.as_str()));
    let r = b.post("/dashboard/schedules/new", &post).await;
    r.refused(StatusCode::BAD_REQUEST, "The time zone");
    assert!(
        r.body.contains(r#"value="Europe/Nowhere""#),
        "the form comes back filled"
    );
    let admin = errand::Admin::new(b.store());
    assert!(
        admin.schedules().await.expect("list").is_empty(),
        "nothing stored"
    );
    let mut post = fields("Europe/Berlin", "30 2 * * *");
    post.push(("csrf", csrf.as_str()));
    let r = b.post("/dashboard/schedules/new", &post).await;
    assert_eq!(r.location(), "/dashboard/schedules?done=added");
    let stored = stored_schedule(&b, "nightly").await;
    assert_eq!(stored.definition.tz.name(), "Europe/Berlin");
    assert_eq!(stored.definition.max_attempts, 7);
    let page = b.get("/dashboard/schedules").await;
    assert!(
        page.body.contains("<td>Europe/Berlin</td>"),
        "{}",
        page.body
    );

    // Edit: the form is filled from the stored definition; a new pattern
    // replaces it.
    let edit = b.get("/dashboard/schedules/nightly/edit").await;
    edit.html(StatusCode::OK);
    assert!(edit.body.contains(r#"value="30 2 * * *""#), "{}", edit.body);
    let mut post = fields("Europe/Berlin", "0 4 * * *");
    post.push(("csrf", csrf.as_str()));
    let r = b.post("/dashboard/schedules/nightly/edit", &post).await;
    assert_eq!(r.location(), "/dashboard/schedules?done=replaced");
    assert_eq!(
        stored_schedule(&b, "nightly").await.definition.cron,
        "0 4 * * *"
    );

    // Remove, confirmed.
    let confirm = b.get("/dashboard/schedules/nightly/remove").await;
    confirm.html(StatusCode::OK);
    assert!(confirm.body.contains("Remove schedule"), "{}", confirm.body);
    let r = b
        .post(
            "/dashboard/schedules/nightly/remove",
            &[
                ("csrf", csrf.as_str()),
                ("operator", "carol"),
                ("reason", "retired"),
            ],
        )
        .await;
    assert_eq!(r.location(), "/dashboard/schedules?done=removed");
    assert!(admin.schedules().await.expect("list").is_empty());
    let entries = admin
        .audit_log(&errand::AuditFilter::default())
        .await
        .expect("audit");
    let actions: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e.action.as_str(), e.operator.as_str()))
        .collect();
    assert_eq!(
        actions,
        [
            ("schedule_remove", "carol"),
            ("schedule_replace", "carol"),
            ("schedule_add", "carol")
        ]
    );
    assert!(
        entries[2]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains("in Europe/Berlin")),
        "{:?}",
        entries[2].reason
    );
}

#[tokio::test]
async fn a_queue_cap_is_set_and_cleared_from_the_dashboard_with_audit() {
    let mut b = Browser::new();
    b.insert("r-1", "{}").await;
    let page = b.get("/dashboard/queues/mail/limit").await;
    page.html(StatusCode::OK);
    assert!(
        page.body.contains("The queue has no cap now"),
        "{}",
        page.body
    );
    assert!(
        !page.body.contains("Clear the cap"),
        "nothing to clear: {}",
        page.body
    );
    let csrf = page.csrf();
    let url = "/dashboard/queues/mail/limit";
    let limits = async |b: &Browser| b.store().queue_limits().await.expect("limits");
    for (fields, status, says) in [
        (
            vec![("concurrency", "0"), ("change", "set")],
            StatusCode::BAD_REQUEST,
            "1 to 100000",
        ),
        (
            vec![("concurrency", "1000000000"), ("change", "set")],
            StatusCode::BAD_REQUEST,
            "1 to 100000",
        ),
        (
            vec![("concurrency", "five"), ("change", "set")],
            StatusCode::BAD_REQUEST,
            "whole number",
        ),
        (
            vec![("concurrency", "5")],
            StatusCode::BAD_REQUEST,
            "set or to clear",
        ),
    ] {
        let mut form = vec![
            ("csrf", csrf.as_str()),
            ("operator", "alice"),
            ("reason", "provider"),
        ];
        form.extend(fields);
        b.post(url, &form).await.refused(status, says);
    }
    // Without the reason, and without the security token: refused too.
    b.post(
        url,
        &[
            ("csrf", &csrf),
            ("operator", "alice"),
            ("concurrency", "5"),
            ("change", "set"),
        ],
    )
    .await
    .refused(StatusCode::BAD_REQUEST, "The reason (`reason`) is required");
    b.post(
        url,
        &[
            ("operator", "alice"),
            ("reason", "r"),
            ("concurrency", "5"),
            ("change", "set"),
        ],
    )
    .await
    .refused(StatusCode::FORBIDDEN, "security token");
    assert!(limits(&b).await.is_empty(), "a refused form writes nothing");

    let p = b
        .post(
            url,
            &[
                ("csrf", &csrf),
                ("operator", "alice"),
                ("reason", "the provider allows 5"),
                ("concurrency", "5"),
                ("change", "set"),
            ],
        )
        .await;
    assert_eq!(
        (p.status, p.location()),
        (StatusCode::SEE_OTHER, "/dashboard/queues")
    );
    let set = limits(&b).await;
    assert_eq!((set[0].queue.as_str(), set[0].concurrency), ("mail", 5));
    let queues = b.get("/dashboard/queues").await;
    assert!(queues.body.contains("0 of 5"), "{}", queues.body);
    assert!(queues.body.contains("/dashboard/queues/mail/limit"));
    let page = b.get(url).await;
    assert!(page.body.contains("Clear the cap"), "{}", page.body);
    assert!(page.body.contains(r#"value="5""#), "{}", page.body);

    let p = b
        .post(
            url,
            &[
                ("csrf", &csrf),
                ("operator", "bob"),
                ("reason", "lifted"),
                ("concurrency", ""),
                ("change", "clear"),
            ],
        )
        .await;
    assert_eq!(p.status, StatusCode::SEE_OTHER);
    assert!(limits(&b).await.is_empty());
    let log = b.get("/dashboard/audit?queue=mail").await;
    log.html(StatusCode::OK);
    for words in ["unlimit", "limit", "the provider allows 5", "bob", "lifted"] {
        assert!(log.body.contains(words), "missing {words}: {}", log.body);
    }
}

#[tokio::test]
async fn past_the_cap_the_queues_page_shows_the_counted_number() {
    let mut b = Browser::new();
    let jobs: Vec<NewJob> = (0..10_050)
        .map(|n| {
            NewJob::new("email", Payload::from_json_text("{}").expect("json"))
                .expect("job")
                .on_queue("bulk")
                .expect("queue")
                .with_id(JobId::new(format!("b-{n:05}")).expect("id"))
        })
        .collect();
    b.store().insert_many(jobs).await.expect("insert");
    let live = b.get("/dashboard/queues").await;
    live.html(StatusCode::OK);
    assert!(live.body.contains("≥10001"), "{}", live.body);
    b.store().count_exactly().await.expect("count");
    let counted = b.get("/dashboard/queues").await;
    assert!(counted.body.contains("10050*"), "{}", counted.body);
    assert!(
        counted
            .body
            .contains("a running service counts each queue whole once a minute"),
        "{}",
        counted.body
    );
}

#[tokio::test]
async fn a_payload_the_server_cannot_decrypt_is_shown_by_its_key() {
    let mut b = Browser::new();
    let keys = errand::encryption::Keyring::parse(&format!(
        "k7:{}",
        errand::encryption::Keyring::generate_key()
    ))
    .expect("keys");
    let keyed = errand::SqliteStore::open(
        b.q.sqlite().path(),
        errand::SqliteOptions {
            clock: std::sync::Arc::new(b.q.clock().clone()),
            keys: Some(std::sync::Arc::new(keys)),
            ..errand::SqliteOptions::default()
        },
    )
    .expect("keyed store");
    let job = NewJob::new(
        "charge",
        Payload::from_json_text(r#"{"card":"4242"}"#).expect("json"),
    )
    .expect("job");
    let id = errand::JobStore::insert(&keyed, job)
        .await
        .expect("insert")
        .job
        .id;
    let p = b.get(&format!("/dashboard/jobs/{id}")).await;
    p.html(StatusCode::OK);
    assert!(p.body.contains("encrypted (key k7)"), "{}", p.body);
    assert!(!p.body.contains("4242"));
}
