#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The dashboard in a real browser: headless Chromium driven over WebDriver
//! (chromedriver) against a real server on a loopback port, over a SQLite
//! file. An operator opens the dead letters, clicks replay, fills in their
//! name and reason, confirms, and the job is ready with an audit entry; the
//! job page shows its history. Screenshots go to `artifacts/screenshots/`
//! at the repository root.
//!
//! Needs `chromium` and `chromium-driver` (Debian packages; `/usr/bin/chromium`
//! and `/usr/bin/chromedriver`, or `ERRAND_CHROMIUM` and
//! `ERRAND_CHROMEDRIVER`). Without them the test says SKIPPED and passes,
//! except under CI (`CI` set), where it fails.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use errand::{
    ClaimRequest, ErrorClass, Failure, JobId, JobState, NewJob, Payload, SqliteOptions,
    SqliteStore, Store,
};
use errand_server::{Server, ServerConfig};
use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::FutureExt;
use tokio::sync::oneshot;

/// chromedriver, ended when dropped.
struct Driver {
    child: Child,
    url: String,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool(env: &str, default: &str) -> Option<PathBuf> {
    let path = std::env::var_os(env)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(default));
    path.is_file().then_some(path)
}

/// The browser and its driver, or `None` (SKIPPED) when they are missing
/// outside CI.
fn browser_tools() -> Option<(PathBuf, PathBuf)> {
    let chromium = tool("ERRAND_CHROMIUM", "/usr/bin/chromium");
    let driver = tool("ERRAND_CHROMEDRIVER", "/usr/bin/chromedriver");
    match (chromium, driver) {
        (Some(c), Some(d)) => Some((c, d)),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "chromium and chromedriver are required under CI: apt-get install chromium chromium-driver"
            );
            eprintln!(
                "SKIPPED: the dashboard browser test needs /usr/bin/chromium and /usr/bin/chromedriver (apt-get install chromium chromium-driver)"
            );
            None
        }
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn start_driver(path: &Path) -> Driver {
    let port = free_port();
    let child = Command::new(path)
        .arg(format!("--port={port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start chromedriver");
    let driver = Driver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "chromedriver did not listen on {port}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    driver
}

async fn open_browser(driver: &Driver, chromium: &Path) -> Client {
    let caps = serde_json::json!({
        "goog:chromeOptions": {
            "binary": chromium.display().to_string(),
            "args": [
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--window-size=1280,1500",
            ],
        }
    });
    let serde_json::Value::Object(caps) = caps else {
        unreachable!()
    };
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(caps)
        .connect(&driver.url)
        .await
        .expect("a WebDriver session")
}

fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../artifacts/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

const FAILURE_SHOT: &str = "dashboard-failure.png";

async fn screenshot(c: &Client, name: &str) {
    let png = c.screenshot().await.expect("screenshot");
    std::fs::write(screenshots().join(name), png).unwrap();
}

/// A dead job whose two attempts failed, the second permanently.
async fn seed_dead(store: &Arc<dyn Store>, id: &str) -> JobId {
    let job = NewJob::new(
        "send-receipt",
        Payload::from_json_text(r#"{"order": 1017, "to": "<ops@example.com>"}"#).unwrap(),
    )
    .unwrap()
    .on_queue("mail")
    .unwrap()
    .with_id(JobId::new(id).unwrap())
    .with_max_attempts(3)
    .unwrap();
    let id = store.insert(job).await.unwrap().job.id;
    for (error, class, retry) in [
        (
            "SMTP 451: try again later",
            ErrorClass::Retryable,
            Some(errand::RetryAt::After(Duration::ZERO)),
        ),
        ("SMTP 550: mailbox unavailable", ErrorClass::Permanent, None),
    ] {
        let claimed = store
            .claim(&ClaimRequest {
                queues: vec![],
                limit: 1,
                lease: Duration::from_secs(60),
                rate: None,
                reclaim: true,
            })
            .await
            .unwrap();
        let lease = &claimed.first().expect("the job is due").lease;
        store
            .fail(
                lease,
                Failure {
                    error: error.into(),
                    class,
                    retry,
                },
            )
            .await
            .unwrap();
    }
    assert_eq!(store.get(&id).await.unwrap().state, JobState::Dead);
    id
}

async fn wait_for_url(c: &Client, part: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let url = c.current_url().await.unwrap().to_string();
        if url.contains(part) {
            return url;
        }
        assert!(Instant::now() < deadline, "never reached {part}; at {url}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_replays_a_dead_job_in_the_browser() {
    let Some((chromium, chromedriver)) = browser_tools() else {
        return;
    };
    let _ = std::fs::remove_file(screenshots().join(FAILURE_SHOT));
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(
            dir.path().join("jobs.db"),
            SqliteOptions {
                create: true,
                migrate: true,
                ..SqliteOptions::default()
            },
        )
        .unwrap(),
    );
    let id = seed_dead(&store, "receipt-1017").await;
    let server = Server::bind(
        Arc::clone(&store),
        ServerConfig {
            bind: SocketAddr::from(([127, 0, 0, 1], 0)),
            ..ServerConfig::default()
        },
    )
    .await
    .unwrap();
    let base = format!("http://{}", server.local_addr());
    let (stop, stopped) = oneshot::channel::<()>();
    let serving = tokio::spawn(server.run(async {
        let _ = stopped.await;
    }));

    let driver = start_driver(&chromedriver);
    let c = open_browser(&driver, &chromium).await;
    let outcome = async {
        // The dead letters list the job with its last error.
        c.goto(&format!("{base}/dashboard/dead")).await.unwrap();
        let row = c
            .find(Locator::XPath("//tr[td//code[text()='receipt-1017']]"))
            .await
            .expect("the dead job is listed");
        let text = row.text().await.unwrap();
        assert!(text.contains("SMTP 550: mailbox unavailable"), "{text}");
        screenshot(&c, "dashboard-1-dead-letters.png").await;

        // Replay… opens the confirmation page; nothing has changed yet.
        row.find(Locator::LinkText("Replay…"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        wait_for_url(&c, "/dashboard/jobs/receipt-1017/replay").await;
        let heading = c
            .find(Locator::Css("h1"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert_eq!(heading, "Replay job?");
        assert_eq!(store.get(&id).await.unwrap().state, JobState::Dead);
        c.find(Locator::Id("operator"))
            .await
            .unwrap()
            .send_keys("alice")
            .await
            .unwrap();
        c.find(Locator::Id("reason"))
            .await
            .unwrap()
            .send_keys("mailbox restored by the provider")
            .await
            .unwrap();
        screenshot(&c, "dashboard-2-confirm-replay.png").await;
        c.find(Locator::Css("form.confirm button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();

        // Back on the job page: replayed, audited, history kept.
        wait_for_url(&c, "done=replayed").await;
        let notice = c
            .find(Locator::Css(".notice-ok"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(notice.starts_with("Replayed"), "{notice}");
        let audit = c
            .find(Locator::Css("table.audit"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            audit.contains("alice") && audit.contains("mailbox restored by the provider"),
            "{audit}"
        );
        let history = c
            .find(Locator::Css("table.history"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            history.contains("SMTP 451: try again later")
                && history.contains("SMTP 550: mailbox unavailable")
                && history.contains("permanent")
                && history.contains("retryable"),
            "{history}"
        );
        let payload = c
            .find(Locator::Css("pre.payload"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            payload.contains("\"to\": \"<ops@example.com>\""),
            "{payload}"
        );
        screenshot(&c, "dashboard-3-job-replayed.png").await;

        let job = store.get(&id).await.unwrap();
        assert_eq!(
            (job.state, job.replays, job.attempts),
            (JobState::Ready, 1, 0)
        );
        let detail = store.detail(&id).await.unwrap();
        let entry = detail.audit.last().expect("an audit entry");
        assert_eq!(
            (
                entry.action.as_str(),
                entry.operator.as_str(),
                entry.reason.as_deref()
            ),
            ("replay", "alice", Some("mailbox restored by the provider"))
        );

        // The jobs list shows it ready again.
        c.goto(&format!("{base}/dashboard/jobs?state=ready"))
            .await
            .unwrap();
        c.find(Locator::XPath("//tr[td//code[text()='receipt-1017']]"))
            .await
            .expect("listed as ready");
        screenshot(&c, "dashboard-4-jobs-ready.png").await;

        // The audit log shows the replay; the queues page offers a pause,
        // confirmed with an operator and a reason.
        c.goto(&format!("{base}/dashboard/audit")).await.unwrap();
        c.find(Locator::XPath(
            "//tr[td[text()='replay'] and td[text()='alice']]",
        ))
        .await
        .expect("the replay in the audit log");
        screenshot(&c, "dashboard-5-audit-log.png").await;
        c.goto(&format!("{base}/dashboard/queues")).await.unwrap();
        c.find(Locator::LinkText("Pause…"))
            .await
            .expect("a pause link")
            .click()
            .await
            .unwrap();
        c.find(Locator::Id("operator"))
            .await
            .unwrap()
            .send_keys("alice")
            .await
            .unwrap();
        c.find(Locator::Id("reason"))
            .await
            .unwrap()
            .send_keys("provider outage")
            .await
            .unwrap();
        c.find(Locator::Css("form.confirm button[type=submit]"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        // The confirmation page's own address contains /dashboard/queues
        // too: wait for the redirected page's link, not for the address.
        c.wait()
            .at_most(Duration::from_secs(15))
            .for_element(Locator::LinkText("Resume…"))
            .await
            .expect("the queue shows as paused");
        screenshot(&c, "dashboard-6-queue-paused.png").await;
        let paused = store.paused_queues().await.unwrap();
        assert_eq!(paused.len(), 1);
        assert_eq!(paused[0].operator, "alice");
    };
    // Close the browser even when an assertion failed.
    let result = std::panic::AssertUnwindSafe(outcome).catch_unwind().await;
    if result.is_err() {
        // What the browser showed when it went wrong.
        screenshot(&c, FAILURE_SHOT).await;
        if let Ok(text) = c.find(Locator::Css("body")).await {
            eprintln!(
                "the page at failure: {}",
                text.text().await.unwrap_or_default()
            );
        }
    }
    let _ = c.close().await;
    drop(driver);
    let _ = stop.send(());
    serving.await.unwrap().unwrap();
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
}
