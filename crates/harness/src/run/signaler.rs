//! The signals plan's senders. While the run lasts, every job waiting for
//! the signal `go` gets one from an `errand signal` process; a third of
//! those processes are SIGKILLed a few milliseconds after they start, so
//! a sender may die before, during or after its commit and its sender
//! cannot know which. A job stays waiting until a sender gets through;
//! one whose signal committed refuses the next (it no longer waits).
//! `signals.log` has one line per sender: `sent ID N ok|refused|killed|failed`.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use errand::{Admin, JobFilter, JobId, JobState, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::watch;

use super::backend::Backend;
use crate::check::SignalHistory;
use crate::handle::append;

/// The senders, running until [`Signaler::finish`].
pub(super) struct Signaler {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<Result<(u64, u64)>>,
}

impl Signaler {
    pub(super) fn start(
        store: &Arc<dyn Store>,
        errand: &Path,
        backend: &Backend,
        dir: &Path,
        seed: u64,
    ) -> Signaler {
        let (stop, stopped) = watch::channel(false);
        let senders = Senders {
            admin: Admin::new(store.clone()),
            errand: errand.to_path_buf(),
            db_args: backend.db_args(),
            log: dir.join("signals.log"),
        };
        let task = tokio::spawn(senders.run(seed, stopped));
        Signaler { stop, task }
    }

    /// Stops the senders and reads, for each job that waited (`awaiting`),
    /// how many signals were delivered to it.
    pub(super) async fn finish(
        self,
        store: &dyn Store,
        awaiting: &[String],
    ) -> Result<SignalHistory> {
        let _ = self.stop.send(true);
        let (sent, killed) = self.task.await.context("the signal senders panicked")??;
        let mut history = SignalHistory {
            sent,
            senders_killed: killed,
            ..SignalHistory::default()
        };
        for id in awaiting {
            match store.detail(&JobId::new(id.clone())?).await {
                Ok(d) => {
                    let delivered = d.signals.iter().filter(|s| s.delivered_at.is_some());
                    history
                        .deliveries
                        .insert(id.clone(), delivered.count() as u64);
                }
                // An enqueue that failed left no job.
                Err(errand::Error::NotFound(_)) => {}
                Err(e) => return Err(e).context("read a waiting job's signals"),
            }
        }
        Ok(history)
    }
}

struct Senders {
    admin: Admin,
    errand: PathBuf,
    db_args: Vec<String>,
    log: PathBuf,
}

impl Senders {
    async fn run(self, seed: u64, mut stopped: watch::Receiver<bool>) -> Result<(u64, u64)> {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5167_6e61_6c73);
        let (mut sent, mut killed) = (0u64, 0u64);
        let filter = JobFilter {
            state: Some(JobState::Waiting),
            limit: Some(200),
            ..JobFilter::default()
        };
        while !*stopped.borrow() {
            // A failed read (a restart, a full disk) is tried again.
            let waiting = self.admin.list(&filter).await.unwrap_or_default();
            for job in waiting {
                let kill_after = rng
                    .random_bool(1.0 / 3.0)
                    .then(|| Duration::from_millis(rng.random_range(0..20)));
                let (errand, db_args) = (self.errand.clone(), self.db_args.clone());
                let id = job.id.to_string();
                let outcome = tokio::task::spawn_blocking(move || {
                    send(&errand, &db_args, &id, sent, kill_after)
                })
                .await
                .context("a signal sender's thread failed")??;
                if outcome == "killed" {
                    killed += 1;
                }
                append(&self.log, &format!("sent {} {sent} {outcome}", job.id))?;
                sent += 1;
            }
            tokio::select! {
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
                _ = stopped.changed() => {}
            }
        }
        Ok((sent, killed))
    }
}

/// One `errand signal ID go` process, SIGKILLed after `kill_after` if it
/// has not ended by then.
fn send(
    errand: &Path,
    db_args: &[String],
    id: &str,
    n: u64,
    kill_after: Option<Duration>,
) -> Result<&'static str> {
    let mut child = Command::new(errand)
        .args(db_args)
        .args(["signal", id, "go", "--by", "harness"])
        .args(["--payload", &format!("{{\"sender\": {n}}}")])
        .env("ERRAND_LOG", "off")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("spawn {}", errand.display()))?;
    if let Some(after) = kill_after {
        std::thread::sleep(after);
        if child
            .try_wait()
            .context("look at a signal sender")?
            .is_none()
        {
            let _ = child.kill();
            let _ = child.wait();
            return Ok("killed");
        }
    }
    let status = child.wait().context("wait for a signal sender")?;
    Ok(match status.code() {
        Some(0) => "ok",
        Some(4) => "refused",
        _ => "failed",
    })
}
