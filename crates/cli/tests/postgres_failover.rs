#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Failover to a streaming standby: workers and `errand serve` connected
//! with a multi-host URL (`target_session_attrs=read-write`) go on after
//! the primary is killed and the standby promoted, with no restart, while
//! an enqueuer keeps adding jobs. The pair is started by `scripts/pg-pair.sh` (it needs
//! root, to run the server tools as `postgres`, and the server binaries);
//! the test says SKIPPED where it cannot, and fails under CI.

use std::collections::HashSet;
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const JOBS: usize = 2000;

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/pg-pair.sh")
}

/// A primary and a standby (`scripts/pg-pair.sh`), stopped when dropped.
struct Pair {
    dir: PathBuf,
    url: String,
    _keep: tempfile::TempDir,
}

impl Pair {
    fn start(mode: &str) -> Option<Pair> {
        let root = std::fs::read_dir("/usr/lib/postgresql").is_ok()
            && Command::new("id")
                .arg("-u")
                .output()
                .is_ok_and(|o| o.stdout.starts_with(b"0"));
        if !root {
            return None;
        }
        let keep = tempfile::tempdir().unwrap();
        // The server tools run as `postgres`: they must reach the pair's
        // directory.
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(keep.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let dir = keep.path().join("pair");
        let out = Command::new("bash")
            .arg(script())
            .args(["start", dir.to_str().unwrap(), mode])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg-pair.sh start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let url = String::from_utf8(out.stdout).unwrap().trim().to_owned();
        Some(Pair {
            dir,
            url,
            _keep: keep,
        })
    }

    fn run(&self, action: &str) {
        let out = Command::new("bash")
            .arg(script())
            .args([action, self.dir.to_str().unwrap()])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg-pair.sh {action}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .arg(script())
            .args(["stop", self.dir.to_str().unwrap_or_default()])
            .status();
    }
}

/// psql's answer, or `None` when it failed (the server is away).
fn psql(url: &str, sql: &str) -> Option<String> {
    let out = Command::new("psql")
        .args([url, "-Atq", "-c", sql])
        .env("PGCONNECT_TIMEOUT", "2")
        .stderr(Stdio::null())
        .output()
        .ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn done(url: &str) -> Option<usize> {
    psql(
        url,
        "SELECT count(*) FROM errand.errand_jobs WHERE state = 'done'",
    )?
    .parse()
    .ok()
}

fn wait_for(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn worker(url: &str, dir: &Path) -> Child {
    let cmd = format!(
        "echo \"$ERRAND_JOB_ID\" >> {log}; touch {sink}/\"$ERRAND_JOB_ID\"",
        log = dir.join("executions.log").display(),
        sink = dir.join("sink").display(),
    );
    Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["--db", url, "--schema", "errand", "work"])
        .args(["--concurrency", "4", "--poll", "100ms", "--lease", "2s"])
        .args(["--retry-base", "100ms", "--retry-max", "1s", "--exec", &cmd])
        .env("ERRAND_LOG", "error")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// `errand serve` on a free port; its child and address.
fn serve(url: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args([
            "--db",
            url,
            "--schema",
            "errand",
            "serve",
            "--bind",
            "127.0.0.1:0",
        ])
        .env("ERRAND_LOG", "error")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (child, addr)
}

/// Enqueues `extra-N` jobs one at a time until told to stop; the ids whose
/// enqueue was acknowledged (psql succeeded: the commit returned).
fn enqueuer(url: String, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut acknowledged = Vec::new();
        let mut n = 0;
        while !stop.load(Ordering::Relaxed) {
            n += 1;
            let id = format!("extra-{n}");
            if psql(&url, &format!("SELECT errand.enqueue('k', id => '{id}')")).is_some() {
                acknowledged.push(id);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        acknowledged
    })
}

/// Kills the primary in the middle of a drain and promotes the standby;
/// returns how long after the promotion the first job finished.
fn failover(mode: &str) -> Option<Duration> {
    let Some(pair) = Pair::start(mode) else {
        errand_testsupport::skip(
            "the failover test",
            "a primary and standby need root and the server binaries (/usr/lib/postgresql/*/bin)",
        );
        return None;
    };
    let url = pair.url.clone();
    let migrated = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["--db", &url, "--schema", "errand", "migrate"])
        .output()
        .unwrap();
    assert!(migrated.status.success(), "{migrated:?}");
    let enqueued = psql(
        &url,
        &format!(
            "SELECT count(errand.enqueue('k', id => 'job-' || g)) FROM generate_series(1, {JOBS}) g"
        ),
    );
    assert_eq!(enqueued.as_deref(), Some(JOBS.to_string().as_str()));
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir(work.path().join("sink")).unwrap();
    let mut workers: Vec<Child> = (0..2).map(|_| worker(&url, work.path())).collect();
    let (mut server, api) = serve(&url);
    let http = reqwest::blocking::Client::new();
    let stop = Arc::new(AtomicBool::new(false));
    let adding = enqueuer(url.clone(), stop.clone());

    wait_for("some jobs done", Duration::from_secs(120), || {
        done(&url).is_some_and(|n| n >= 300)
    });
    let killed = Instant::now();
    pair.run("promote");
    let promoted = Instant::now();
    let promotion = promoted - killed;
    let at_promotion = Mutex::new(None);
    wait_for(
        "a job done on the new primary",
        Duration::from_secs(60),
        || {
            let now = done(&url);
            let mut first = at_promotion.lock().unwrap();
            match (*first, now) {
                (None, Some(n)) => {
                    *first = Some(n);
                    false
                }
                (Some(before), Some(n)) => n > before,
                _ => false,
            }
        },
    );
    let recovered = promoted.elapsed();
    // Both workers' LISTEN connections are back, on the new primary.
    wait_for(
        "both workers listening again",
        Duration::from_secs(60),
        || {
            psql(
                &url,
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN %'",
            )
            .is_some_and(|n| n.parse::<usize>().is_ok_and(|n| n >= 2))
        },
    );
    let listening = promoted.elapsed();
    // The server finds the new primary too: an enqueue through the API
    // (a write) succeeds.
    wait_for(
        "an enqueue through errand serve",
        Duration::from_secs(60),
        || {
            http.post(format!("{api}/v1/jobs"))
                .json(&serde_json::json!({"kind": "k", "id": "through-the-api"}))
                .send()
                .is_ok_and(|r| r.status().is_success())
        },
    );
    let serving = promoted.elapsed();
    let _ = server.kill();
    let _ = server.wait();
    // The enqueuer goes on a while on the new primary.
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::Relaxed);
    let acknowledged = adding.join().unwrap();
    wait_for("every job done", Duration::from_secs(240), || {
        psql(
            &url,
            "SELECT count(*) FROM errand.errand_jobs WHERE state <> 'done'",
        )
        .as_deref()
            == Some("0")
    });
    for w in &workers {
        let _ = Command::new("kill")
            .args(["-TERM", &w.id().to_string()])
            .status();
    }
    for w in &mut workers {
        assert!(
            w.wait().unwrap().success(),
            "a worker did not drain cleanly"
        );
    }

    let stored: HashSet<String> = psql(&url, "SELECT id FROM errand.errand_jobs")
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let lost: Vec<&String> = acknowledged
        .iter()
        .filter(|id| !stored.contains(*id))
        .collect();
    let sink: HashSet<String> = std::fs::read_dir(work.path().join("sink"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let executions = std::fs::read_to_string(work.path().join("executions.log")).unwrap();
    // Every job stored ran at least once, and everything done ran.
    assert!(stored.is_subset(&sink), "a stored job never ran");
    assert!(stored.len() >= JOBS, "{} jobs stored", stored.len());
    assert!(!acknowledged.is_empty(), "the enqueuer got nothing through");
    if mode == "sync" {
        // A commit returns only once the standby has it.
        assert!(lost.is_empty(), "acknowledged enqueues lost: {lost:?}");
    }
    eprintln!(
        "failover ({mode}): kill and promotion {promotion:?}, first job done {recovered:?} \
         after it, both listening {listening:?} after it, the API writing {serving:?} after it; \
         {} jobs, {} \
         executions; {} enqueues acknowledged, {} of them lost",
        stored.len(),
        executions.lines().count(),
        acknowledged.len(),
        lost.len()
    );
    Some(recovered)
}

#[test]
fn workers_and_enqueues_go_on_after_a_failover_with_synchronous_replication() {
    failover("sync");
}

#[test]
fn workers_go_on_after_a_failover_with_asynchronous_replication() {
    failover("async");
}
