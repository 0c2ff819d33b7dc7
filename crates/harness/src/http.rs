//! The HTTP-server plan: an `errand serve` process the load generator
//! enqueues through, which the nemesis SIGKILLs mid-enqueue. Clients retry
//! with the same job id until they get an answer; the API answers an
//! existing id with the job it has (200) and creates nothing, so a request
//! whose response was lost in the crash is safe to repeat.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::json;

use crate::check::Enqueue;

/// The server process, restarted on the same port after each kill.
#[derive(Debug)]
pub struct Server {
    errand: PathBuf,
    db_args: Vec<String>,
    dir: PathBuf,
    port: u16,
    child: Option<Child>,
    /// SIGKILLed, not yet reaped.
    killed: bool,
    respawn_at: Option<Instant>,
    spawned: u32,
}

impl Server {
    /// Starts `errand serve` on a free loopback port.
    pub fn start(errand: &Path, db_args: &[String], dir: &Path) -> Result<Server> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .context("find a free port for errand serve")?
            .port();
        let mut server = Server {
            errand: errand.to_path_buf(),
            db_args: db_args.to_vec(),
            dir: dir.to_path_buf(),
            port,
            child: None,
            killed: false,
            respawn_at: None,
            spawned: 0,
        };
        server.spawn()?;
        Ok(server)
    }

    /// The API's base URL.
    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn spawn(&mut self) -> Result<()> {
        self.spawned += 1;
        let out = std::fs::File::create(self.dir.join(format!("server-{}.out", self.spawned)))
            .context("create the server's stdout file")?;
        let err = std::fs::File::create(self.dir.join(format!("server-{}.err", self.spawned)))
            .context("create the server's stderr file")?;
        let child = Command::new(&self.errand)
            .args(&self.db_args)
            .args(["serve", "--bind", &format!("127.0.0.1:{}", self.port)])
            .env("ERRAND_LOG", "warn")
            .env_remove("ERRAND_TOKEN")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("spawn {} serve", self.errand.display()))?;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILLs the server; returns its pid, or `None` if it was down
    /// (or already killed and not yet reaped).
    pub fn kill(&mut self) -> Option<u32> {
        if self.killed {
            return None;
        }
        let child = self.child.as_mut()?;
        let pid = child.id();
        child.kill().ok()?;
        self.killed = true;
        Some(pid)
    }

    /// Reaps a dead server and starts a new one 300 ms later. Returns what
    /// happened, for the nemesis log.
    pub fn tick(&mut self, now: Instant) -> Result<Option<String>> {
        if let Some(child) = self.child.as_mut()
            && let Some(status) = child.try_wait().context("wait for the server")?
        {
            let pid = child.id();
            self.child = None;
            self.killed = false;
            self.respawn_at = Some(now + Duration::from_millis(300));
            return Ok(Some(format!("server (pid {pid}) exited: {status}")));
        }
        if self.child.is_none() && self.respawn_at.is_some_and(|r| r <= now) {
            self.respawn_at = None;
            self.spawn()?;
            let pid = self.child.as_ref().map_or(0, Child::id);
            return Ok(Some(format!("server restarted (pid {pid})")));
        }
        Ok(None)
    }

    /// SIGTERM, then SIGKILL after five seconds.
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            if let Ok(pid) = i32::try_from(child.id()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGTERM,
                );
            }
            let by = Instant::now() + Duration::from_secs(5);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < by {
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// What one HTTP enqueue came to.
#[derive(Clone, Copy, Debug)]
pub struct Posted {
    pub status: Enqueue,
    /// Transport errors and 5xx answers before the final one.
    pub errors: u64,
    /// The final answer was 200 "already exists" after an error: an earlier
    /// try had committed and its answer was lost.
    pub found_existing: bool,
}

/// POSTs one job, retrying with the same id (every 100 ms, for up to 30 s)
/// while the server is down or the outcome unknown.
pub async fn enqueue(
    client: &reqwest::Client,
    base: &str,
    id: &str,
    kind: &str,
    payload: &errand::Payload,
    in_flight: &AtomicU64,
    started: &tokio::sync::Notify,
) -> Posted {
    let body = json!({"kind": kind, "id": id, "payload": payload});
    let url = format!("{base}/v1/jobs");
    let mut errors = 0;
    for _ in 0..300 {
        in_flight.fetch_add(1, Ordering::SeqCst);
        started.notify_one();
        let answer = client.post(&url).json(&body).send().await;
        in_flight.fetch_sub(1, Ordering::SeqCst);
        match answer {
            Ok(r) if r.status() == reqwest::StatusCode::CREATED => {
                return Posted {
                    status: Enqueue::Ok,
                    errors,
                    found_existing: false,
                };
            }
            Ok(r) if r.status() == reqwest::StatusCode::OK => {
                return Posted {
                    status: Enqueue::Ok,
                    errors,
                    found_existing: true,
                };
            }
            Ok(r) if r.status().is_client_error() => {
                return Posted {
                    status: Enqueue::Failed,
                    errors,
                    found_existing: false,
                };
            }
            Ok(_) | Err(_) => {
                errors += 1;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Posted {
        status: Enqueue::Ambiguous,
        errors,
        found_existing: false,
    }
}
