#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The dashboard in a real browser: headless Chromium driven over WebDriver
//! (chromedriver) against a real server on a loopback port, over a SQLite
//! file. An operator opens the dead letters, clicks replay, fills in their
//! name and reason, confirms, and the job is ready with an audit entry; the
//! job page shows its history. Another opens the queues' charts, drawn
//! from a seeded day of per-minute counts, and checks that every chart
//! renders with its axes labelled, in the hour and the day windows, for
//! every queue and for one. Screenshots go to `artifacts/screenshots/` at
//! the repository root.
//!
//! Needs `chromium` and `chromium-driver` (Debian packages; `/usr/bin/chromium`
//! and `/usr/bin/chromedriver`, or `ERRAND_CHROMIUM` and
//! `ERRAND_CHROMEDRIVER`). Without them the test says SKIPPED and passes
//! (`errand_testsupport::skip`, which `scripts/test.sh` lists at its end),
//! except under CI (`CI` set), where it fails.

use std::f64::consts::TAU;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use errand::{
    ClaimRequest, ErrorClass, Failure, JobId, JobState, MinuteCount, Name, NewJob, Payload,
    Schedule, Series, SqliteOptions, SqliteStore, Store, Timestamp,
};
use errand_server::{ServeError, Server, ServerConfig};
use fantoccini::{Client, ClientBuilder, Locator};
use futures_util::FutureExt;
use serde::Deserialize;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

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
            errand_testsupport::skip(
                "the dashboard browser test",
                "no /usr/bin/chromium and /usr/bin/chromedriver (apt-get install chromium chromium-driver, or set ERRAND_CHROMIUM and ERRAND_CHROMEDRIVER)",
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

/// A SQLite store in a file under `dir`.
fn open_store(dir: &Path) -> Arc<dyn Store> {
    Arc::new(
        SqliteStore::open(
            dir.join("jobs.db"),
            SqliteOptions {
                create: true,
                migrate: true,
                ..SqliteOptions::default()
            },
        )
        .unwrap(),
    )
}

/// The server on a loopback port, until [`Serving::stop`].
struct Serving {
    base: String,
    stop: oneshot::Sender<()>,
    task: JoinHandle<Result<(), ServeError>>,
}

impl Serving {
    async fn start(store: &Arc<dyn Store>) -> Serving {
        let server = Server::bind(
            Arc::clone(store),
            ServerConfig {
                bind: SocketAddr::from(([127, 0, 0, 1], 0)),
                ..ServerConfig::default()
            },
        )
        .await
        .unwrap();
        let base = format!("http://{}", server.local_addr());
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(server.run(async {
            let _ = stopped.await;
        }));
        Serving { base, stop, task }
    }

    async fn stop(self) {
        let _ = self.stop.send(());
        self.task.await.unwrap().unwrap();
    }
}

/// Runs a scenario to its end or its first failed assertion; on a failure,
/// saves what the browser showed as `failure_shot` and prints the page's
/// text. The panic is returned, to be raised again by [`finish`] once the
/// browser is closed.
async fn watched(
    c: &Client,
    failure_shot: &str,
    scenario: impl Future<Output = ()>,
) -> std::thread::Result<()> {
    let result = std::panic::AssertUnwindSafe(scenario).catch_unwind().await;
    if result.is_err() {
        screenshot(c, failure_shot).await;
        if let Ok(text) = c.find(Locator::Css("body")).await {
            eprintln!(
                "the page at failure: {}",
                text.text().await.unwrap_or_default()
            );
        }
    }
    result
}

/// Closes the browser, its driver and the server (even when an assertion
/// failed), then raises the scenario's panic again.
async fn finish(c: Client, driver: Driver, serving: Serving, result: std::thread::Result<()>) {
    let _ = c.close().await;
    drop(driver);
    serving.stop().await;
    if let Err(panic) = result {
        std::panic::resume_unwind(panic);
    }
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
    let store = open_store(dir.path());
    let id = seed_dead(&store, "receipt-1017").await;
    let serving = Serving::start(&store).await;
    let base = serving.base.clone();

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
    let result = watched(&c, FAILURE_SHOT, outcome).await;
    finish(c, driver, serving, result).await;
}

const CHARTS_FAILURE_SHOT: &str = "dashboard-charts-failure.png";

/// A number in `0..1000` standing in for noise: a fixed mix of the minute
/// and a salt, the same on every run.
fn jitter(minute: i64, salt: u64) -> u64 {
    let mut x = minute.unsigned_abs() ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) % 1_000
}

/// A day of per-minute counts ending with minute `now`, as workers would
/// have written them: a busy `mail` queue and a quieter `sms` one, jobs
/// finished following the time of day with a ripple and some noise, a
/// few retries (`retryable` here and there, a burst of `timeout`s), a
/// couple of dead jobs, depth and oldest due wait sampled every minute but
/// four (one gap, 11 to 14 minutes ago), and the lateness and wait
/// histograms.
fn day_of_counts(now: i64) -> Vec<MinuteCount> {
    let mut rows = Vec::new();
    for (queue, scale, shift, salt) in [("mail", 60.0, 0, 1), ("sms", 22.0, 180, 2)] {
        let name = Name::parse("queue", queue).unwrap();
        let mut add = |minute: i64, series: Series, value: u64| {
            if value > 0 || series.is_gauge() {
                rows.push(MinuteCount {
                    queue: name.clone(),
                    minute,
                    series,
                    value,
                });
            }
        };
        for m in now - 1439..=now {
            let ago = now - m;
            let noise = jitter(m, salt) as f64 / 1_000.0 - 0.5;
            // Busiest at noon UTC (`sms` three hours later).
            let day = (m - shift).rem_euclid(1_440) as f64 / 1_440.0;
            let daily = 0.55 + 0.4 * (TAU * (day - 0.25)).sin();
            let ripple = 0.12 * (TAU * m as f64 / 23.0).sin();
            let finished = (scale * (daily + ripple + 0.15 * noise)).max(0.0);
            let part = |share: f64| (finished * share).round() as u64;
            let sometimes =
                |k: u64, per_mille: u64| u64::from(jitter(m, salt * 100 + k) < per_mille);
            add(m, Series::Finished, finished.round() as u64);

            if jitter(m, salt * 100 + 1) < 110 {
                add(
                    m,
                    Series::Retry(ErrorClass::Retryable),
                    1 + jitter(m, salt * 100 + 2) % 3,
                );
            }
            let timeouts = match (queue, ago) {
                ("mail", 22..=26) => [2, 5, 8, 6, 3][usize::try_from(ago - 22).unwrap()],
                ("mail", 600..=605) => 4,
                ("sms", _) => sometimes(3, 40),
                _ => 0,
            };
            add(m, Series::Retry(ErrorClass::Timeout), timeouts);
            let dead = match (queue, ago) {
                ("mail", 18) | ("sms", 33) | ("sms", 1_000) => 1,
                ("mail", 41) => 2,
                ("mail", 700) => 3,
                _ => 0,
            };
            add(m, Series::Dead, dead);

            if !(11..=14).contains(&ago) {
                let wave = 1.0 + 0.6 * (TAU * m as f64 / 130.0).sin();
                let depth = (scale / 5.0 * wave + finished / 4.0 + 3.0 * noise)
                    .max(0.0)
                    .round() as u64;
                add(m, Series::Depth, depth);
                add(
                    m,
                    Series::OldestDueMs,
                    300 + depth * 420 + jitter(m, salt * 100 + 4) * 2,
                );
            }

            // A third of the jobs have a deadline; most make it.
            for (bucket, value) in [
                (0, part(0.2)),
                (1, part(0.06)),
                (2, part(0.04)),
                (3, part(0.03)),
                (4, part(0.015)),
                (6, sometimes(5, 200)),
                (8, sometimes(6, 60)),
                (11, sometimes(7, 10)),
            ] {
                add(m, Series::Late(bucket), value);
            }
            for (bucket, value) in [
                (0, part(0.05)),
                (1, part(0.1)),
                (2, part(0.15)),
                (3, part(0.2)),
                (4, part(0.18)),
                (5, part(0.12)),
                (6, part(0.08)),
                (7, part(0.05)),
                (8, part(0.03)),
                (9, part(0.015)),
                (10, sometimes(8, 120)),
                (12, sometimes(9, 20)),
                (14, sometimes(10, 3)),
            ] {
                add(m, Series::Wait(bucket), value);
            }
        }
    }
    rows
}

/// Jobs for the queue table: a dead `mail` job, ready ones on both
/// queues, two scheduled `sms` jobs and a running one.
async fn seed_jobs(store: &Arc<dyn Store>) {
    seed_dead(store, "receipt-2048").await;
    let job = |kind: &str, queue: &str, n: usize| {
        NewJob::new(
            kind,
            Payload::from_json_text(format!(r#"{{"n": {n}}}"#)).unwrap(),
        )
        .unwrap()
        .on_queue(queue)
        .unwrap()
    };
    for n in 0..7 {
        store.insert(job("send-receipt", "mail", n)).await.unwrap();
    }
    for n in 0..4 {
        store.insert(job("send-code", "sms", n)).await.unwrap();
    }
    for n in 4..6 {
        let later =
            job("send-code", "sms", n).scheduled(Schedule::After(Duration::from_secs(1_800)));
        store.insert(later).await.unwrap();
    }
    let running = store
        .claim(&ClaimRequest {
            queues: vec![Name::parse("queue", "sms").unwrap()],
            limit: 1,
            lease: Duration::from_secs(600),
            rate: None,
            reclaim: true,
        })
        .await
        .unwrap();
    assert_eq!(running.len(), 1);
}

/// Where an element is drawn, in CSS pixels of the viewport.
#[derive(Debug, Deserialize)]
struct Drawn {
    left: f64,
    top: f64,
    right: f64,
    bottom: f64,
    width: f64,
    height: f64,
}

impl Drawn {
    fn visible(&self) -> bool {
        self.width > 0.0 && self.height > 0.0
    }

    fn within(&self, outer: &Drawn) -> bool {
        self.left >= outer.left - 0.5
            && self.right <= outer.right + 0.5
            && self.top >= outer.top - 0.5
            && self.bottom <= outer.bottom + 0.5
    }
}

#[derive(Debug, Deserialize)]
struct Label {
    class: String,
    text: String,
    at: Drawn,
}

/// One chart's svg as the browser laid it out.
#[derive(Debug, Deserialize)]
struct ChartSvg {
    /// The id of its `<title>` (`chart-finished-title`).
    id: String,
    at: Drawn,
    labels: Vec<Label>,
    bars: Vec<Drawn>,
    lines: Vec<Drawn>,
}

impl ChartSvg {
    fn labels(&self, class: &str) -> Vec<&Label> {
        self.labels
            .iter()
            .filter(|l| l.class.split(' ').any(|c| c == class))
            .collect()
    }
}

/// Asks the browser (WebDriver's script, not the page's: the page has
/// none) where every chart of `section.charts` and its texts, bars and
/// lines are drawn.
const LAYOUT_OF_CHARTS: &str = r"
const at = e => {
  const r = e.getBoundingClientRect();
  return {left: r.left, top: r.top, right: r.right, bottom: r.bottom, width: r.width, height: r.height};
};
return Array.from(document.querySelectorAll('section.charts svg')).map(svg => ({
  id: svg.getAttribute('aria-labelledby'),
  at: at(svg),
  labels: Array.from(svg.querySelectorAll('text')).map(t => ({
    class: t.getAttribute('class') || '', text: t.textContent, at: at(t),
  })),
  bars: Array.from(svg.querySelectorAll('rect.bar')).map(at),
  lines: Array.from(svg.querySelectorAll('polyline')).map(at),
}));
";

const CHART_IDS: [&str; 7] = [
    "finished", "dead", "retries", "depth", "oldest", "lateness", "wait",
];

/// Checks that the page's seven charts render: each svg has a real size,
/// two axis titles, three y tick labels and x tick labels, all with text
/// and drawn inside the svg; every bar chart has a visible bar and every
/// line chart a visible line (`depth_lines` of the depth chart, which the
/// gap splits in the hour window). The counted charts' y-axis titles say
/// `per` ("per minute", "per 15 min").
async fn check_charts(c: &Client, per: &str, depth_lines: usize) {
    let layout = c.execute(LAYOUT_OF_CHARTS, vec![]).await.unwrap();
    let charts: Vec<ChartSvg> = serde_json::from_value(layout).unwrap();
    let ids: Vec<String> = CHART_IDS
        .iter()
        .map(|id| format!("chart-{id}-title"))
        .collect();
    assert_eq!(
        charts.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ids,
        "7 charts in section.charts"
    );
    for (name, svg) in CHART_IDS.iter().zip(&charts) {
        assert!(
            svg.at.width > 200.0 && svg.at.height > 50.0,
            "{name} is drawn {}×{} px",
            svg.at.width,
            svg.at.height
        );
        // Three x ticks on a time axis, every other bucket (8) on a
        // histogram's.
        for (class, count) in [("axis-title", 2..=2), ("tick-y", 3..=3), ("tick-x", 3..=8)] {
            let labels = svg.labels(class);
            assert!(count.contains(&labels.len()), "{name}: {class} {labels:?}");
            for l in labels {
                assert!(
                    !l.text.trim().is_empty() && l.at.visible(),
                    "{name}: {class} {l:?} is not drawn"
                );
                assert!(
                    l.at.within(&svg.at),
                    "{name}: {class} {:?} is cut off: {:?} outside {:?}",
                    l.text,
                    l.at,
                    svg.at
                );
            }
        }
        assert!(
            svg.labels("empty").is_empty(),
            "{name} says it has nothing to draw"
        );
        let y_title = &svg.labels("y-title")[0].text;
        if ["finished", "dead", "retries"].contains(name) {
            assert!(y_title.contains(per), "{name}: y-axis title {y_title:?}");
        }
        let (drawn, what) = match *name {
            "retries" | "depth" | "oldest" => (&svg.lines, "line"),
            _ => (&svg.bars, "bar"),
        };
        assert!(
            drawn.iter().any(Drawn::visible),
            "{name}: no {what} drawn: {drawn:?}"
        );
        for d in drawn {
            assert!(d.within(&svg.at), "{name}: a {what} {d:?} outside the svg");
        }
        if *name == "depth" {
            assert_eq!(svg.lines.len(), depth_lines, "{name}: {:?}", svg.lines);
        }
    }
    // The axis titles are visible text to WebDriver too.
    let titles = c
        .find_all(Locator::Css("section.charts svg text.axis-title"))
        .await
        .unwrap();
    assert_eq!(titles.len(), 14);
    for t in titles {
        let text = t.text().await.unwrap();
        assert!(
            !text.trim().is_empty(),
            "an axis title without visible text"
        );
    }
    let legend = c
        .find(Locator::Css("section.charts ul.legend"))
        .await
        .expect("the retries' legend")
        .text()
        .await
        .unwrap();
    assert!(
        legend.contains("retryable") && legend.contains("timeout"),
        "{legend}"
    );
}

/// A screenshot of the whole page: the window is made tall enough for the
/// page (the height of its `html` element, which unlike its scroll height
/// does not grow with the window) and the browser's own frame; twice, in
/// case the new height changes the layout.
async fn full_page_screenshot(c: &Client, name: &str) {
    for _ in 0..2 {
        let sizes = c
            .execute(
                "return [Math.ceil(document.documentElement.getBoundingClientRect().height), window.outerHeight - window.innerHeight];",
                vec![],
            )
            .await
            .unwrap();
        let [page, frame] = [0, 1].map(|i| sizes[i].as_u64().expect("a height in pixels"));
        let height = u32::try_from(page + frame).unwrap().clamp(600, 4_000);
        c.set_window_size(1280, height).await.unwrap();
    }
    screenshot(c, name).await;
}

async fn heading(c: &Client) -> String {
    c.find(Locator::Css("h1"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queue_charts_render_in_the_browser() {
    let Some((chromium, chromedriver)) = browser_tools() else {
        return;
    };
    let _ = std::fs::remove_file(screenshots().join(CHARTS_FAILURE_SHOT));
    let dir = tempfile::tempdir().unwrap();
    let store = open_store(dir.path());
    seed_jobs(&store).await;
    let now = errand::core::minute_of(Timestamp::now());
    store.record_minutes(&day_of_counts(now)).await.unwrap();
    let serving = Serving::start(&store).await;
    let base = serving.base.clone();

    let driver = start_driver(&chromedriver);
    let c = open_browser(&driver, &chromium).await;
    let outcome = async {
        // Every queue, the last hour: seven charts, each drawn and labelled.
        c.goto(&format!("{base}/dashboard/queues")).await.unwrap();
        assert_eq!(heading(&c).await, "Queues");
        let svgs = c
            .find(Locator::Css("section.charts"))
            .await
            .expect("the charts")
            .find_all(Locator::Css("svg"))
            .await
            .unwrap();
        assert_eq!(svgs.len(), 7);
        check_charts(&c, "per minute", 2).await;
        full_page_screenshot(&c, "dashboard-7-queue-charts.png").await;

        // The last day: a point per 15 minutes.
        c.find(Locator::LinkText("Last day"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let url = wait_for_url(&c, "window=day").await;
        assert!(url.ends_with("/dashboard/queues?window=day"), "{url}");
        let y_title = c
            .find(Locator::Css("section.charts svg text.y-title"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(y_title.contains("per 15 min"), "{y_title}");
        check_charts(&c, "per 15 min", 1).await;

        // The mail queue's own page, from its row of the table.
        c.find(Locator::XPath(
            "//table[contains(@class, 'jobs')]//tr[td/a[text()='mail']]//a[text()='charts']",
        ))
        .await
        .expect("a charts link in the mail row")
        .click()
        .await
        .unwrap();
        wait_for_url(&c, "/dashboard/queues/mail").await;
        assert_eq!(heading(&c).await, "Queue mail");
        let row = c
            .find(Locator::Css("table.jobs tbody"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(row.contains("mail") && !row.contains("sms"), "{row}");
        check_charts(&c, "per minute", 2).await;
        c.find(Locator::LinkText("Last day"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let url = wait_for_url(&c, "window=day").await;
        assert!(url.ends_with("/dashboard/queues/mail?window=day"), "{url}");
        check_charts(&c, "per 15 min", 1).await;
        full_page_screenshot(&c, "dashboard-8-queue-charts-day.png").await;
    };
    let result = watched(&c, CHARTS_FAILURE_SHOT, outcome).await;
    finish(c, driver, serving, result).await;
}
