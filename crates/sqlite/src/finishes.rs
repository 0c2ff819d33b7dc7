//! Those waiting for a job to end (`Client::wait`), told when it has.
//!
//! SQLite has no notifications between processes, so one thread per store
//! — started by the first waiter, and idle while nobody waits — watches
//! the file for them all: when the file changed (`PRAGMA data_version` on
//! its own connection, which counts commits by every other connection,
//! this process's writer included), one statement finds which of the jobs
//! waited for have ended or are gone, and only their waiters are woken.
//! This process's own commits nudge the thread, so it looks at once; other
//! processes' commits are seen at its next look, at most [`LOOK_EVERY`]
//! later. However many wait, a process reads the change counter once per
//! look and the jobs at most once per change.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, Weak};
use std::time::Duration;

use async_trait::async_trait;
use errand_core::{Result, WorkSignal};
use rusqlite::Connection;
use tokio::sync::watch;

use crate::SqliteOptions;
use crate::conn::map_err;

/// How often the thread looks for other processes' commits.
pub(crate) const LOOK_EVERY: Duration = Duration::from_millis(100);

/// The jobs waited for, by id, and the thread that watches them.
#[derive(Debug)]
pub(crate) struct Finishes {
    waiting: Mutex<HashMap<String, watch::Sender<u64>>>,
    /// Nudges the thread, once started.
    nudge: OnceLock<SyncSender<()>>,
}

impl Finishes {
    pub(crate) fn new() -> Arc<Finishes> {
        Arc::new(Finishes {
            waiting: Mutex::new(HashMap::new()),
            nudge: OnceLock::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
        self.waiting.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Tells the thread that this process committed (nothing when nobody
    /// waits, or a nudge is already pending).
    pub(crate) fn nudge(&self) {
        if let Some(nudge) = self.nudge.get() {
            match nudge.try_send(()) {
                Ok(()) | Err(TrySendError::Full(())) | Err(TrySendError::Disconnected(())) => {}
            }
        }
    }

    /// A signal that fires once job `id` has ended or is gone, starting
    /// the watching thread on the first call.
    pub(crate) fn signal(
        self: &Arc<Self>,
        id: &str,
        path: &Path,
        options: &SqliteOptions,
    ) -> Result<FinishSignal> {
        if self.nudge.get().is_none() {
            let conn = crate::open_connection(path, options, false)?;
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            if self.nudge.set(tx).is_ok() {
                let watched = Arc::downgrade(self);
                std::thread::Builder::new()
                    .name("errand-sqlite-finishes".into())
                    .spawn(move || watch_file(&conn, &watched, &rx))
                    .map_err(|e| {
                        errand_core::Error::storage(format!(
                            "could not start the thread that watches for jobs ending: {e}"
                        ))
                    })?;
            }
        }
        let rx = self
            .lock()
            .entry(id.to_owned())
            .or_insert_with(|| watch::Sender::new(0))
            .subscribe();
        self.nudge();
        Ok(FinishSignal {
            rx: Some(rx),
            id: id.to_owned(),
            finishes: Arc::clone(self),
        })
    }
}

/// The watching thread: looks whenever nudged or every [`LOOK_EVERY`],
/// until the store is dropped.
fn watch_file(conn: &Connection, finishes: &Weak<Finishes>, nudged: &Receiver<()>) {
    let mut seen: Option<i64> = None;
    loop {
        match nudged.recv_timeout(LOOK_EVERY) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        let Some(finishes) = finishes.upgrade() else {
            return;
        };
        let ids: Vec<String> = finishes.lock().keys().cloned().collect();
        if ids.is_empty() {
            seen = None;
            continue;
        }
        match look(conn, &ids, &mut seen) {
            Ok(ended) => {
                let waiting = finishes.lock();
                for id in ended {
                    if let Some(tx) = waiting.get(&id) {
                        tx.send_modify(|n| *n = n.wrapping_add(1));
                    }
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "could not look for jobs that ended; waking every waiter to look itself");
                for tx in finishes.lock().values() {
                    tx.send_modify(|n| *n = n.wrapping_add(1));
                }
            }
        }
    }
}

/// The ids among `ids` whose jobs have ended or are gone, when the file
/// changed since `seen` (none otherwise).
fn look(conn: &Connection, ids: &[String], seen: &mut Option<i64>) -> Result<Vec<String>> {
    let version: i64 = conn
        .query_row("PRAGMA data_version", [], |r| r.get(0))
        .map_err(map_err)?;
    if *seen == Some(version) {
        return Ok(Vec::new());
    }
    *seen = Some(version);
    let wanted = serde_json::to_string(ids)
        .map_err(|e| errand_core::Error::storage(format!("encoding the ids waited for: {e}")))?;
    let mut stmt = conn
        .prepare_cached(include_str!("../queries/ended_of.sql"))
        .map_err(map_err)?;
    let ended = stmt
        .query_map([wanted], |r| r.get::<_, String>(0))
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<String>>>()
        .map_err(map_err)?;
    Ok(ended)
}

/// One waiter's signal: fires once its job has ended or is gone.
#[derive(Debug)]
pub(crate) struct FinishSignal {
    rx: Option<watch::Receiver<u64>>,
    id: String,
    finishes: Arc<Finishes>,
}

#[async_trait]
impl WorkSignal for FinishSignal {
    async fn wait(&mut self, timeout: Duration) -> bool {
        let Some(rx) = self.rx.as_mut() else {
            return false;
        };
        matches!(
            tokio::time::timeout(timeout, rx.changed()).await,
            Ok(Ok(()))
        )
    }
}

impl Drop for FinishSignal {
    /// The last waiter for a job takes its entry away.
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut waiting = self.finishes.lock();
        if waiting
            .get(&self.id)
            .is_some_and(|tx| tx.receiver_count() == 0)
        {
            waiting.remove(&self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use errand_core::{ClaimRequest, JobStore, NewJob, Payload};

    use super::*;
    use crate::SqliteStore;

    /// The watcher reads the jobs only when the file changed, and names
    /// exactly the jobs waited for that have ended or are gone.
    #[tokio::test]
    async fn a_look_names_the_ended_and_gone_jobs_only_after_a_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.db");
        let options = SqliteOptions {
            create: true,
            migrate: true,
            ..SqliteOptions::default()
        };
        let store = SqliteStore::open(&path, options.clone()).unwrap();
        for id in ["a", "b"] {
            let job = NewJob::new("k", Payload::from_json_text("{}").unwrap())
                .unwrap()
                .with_id(errand_core::JobId::new(id).unwrap());
            store.insert(job).await.unwrap();
        }
        let conn = crate::open_connection(&path, &options, false).unwrap();
        let ids = vec!["a".to_owned(), "b".to_owned(), "gone".to_owned()];
        let mut seen = None;
        assert_eq!(look(&conn, &ids, &mut seen).unwrap(), ["gone"]);
        assert!(
            look(&conn, &ids, &mut seen).unwrap().is_empty(),
            "no change, no read"
        );
        let claimed = store
            .claim(&ClaimRequest {
                queues: Vec::new(),
                limit: 1,
                lease: Duration::from_secs(30),
                rate: None,
                reclaim: false,
            })
            .await
            .unwrap();
        assert_eq!(
            look(&conn, &ids, &mut seen).unwrap(),
            ["gone"],
            "a claim ends nothing"
        );
        store.complete(&claimed[0].lease).await.unwrap();
        let ended = look(&conn, &ids, &mut seen).unwrap();
        assert_eq!(ended, [claimed[0].job.id.as_str(), "gone"]);
    }
}
