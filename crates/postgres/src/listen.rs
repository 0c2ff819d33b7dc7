//! Wake-ups through `LISTEN/NOTIFY`, with polling as the fallback.
//!
//! One task per store holds a dedicated connection that listens on the
//! channel `<schema>.errand_jobs` (the insert trigger notifies it) and bumps a
//! counter that idle workers wait on, and on `<schema>.errand_finished`
//! (the trigger on a waited-for job's end notifies its id), which wakes
//! those waiting for that job. After every (re)connection it checks
//! itself: it sends a probe notification through the pool and expects to
//! hear it. A transaction-pooling proxy (PgBouncer in transaction mode)
//! accepts `LISTEN` but never delivers; the self-test notices, logs an error
//! that says so, and workers fall back to polling. A lost listening
//! connection is re-established after a pause.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use errand_core::WorkSignal;
use futures_util::StreamExt;
use tokio::sync::{oneshot, watch};
use tokio_postgres::{AsyncMessage, NoTls};

/// The payload of the self-test notification.
const PROBE: &str = "__errand_probe__";
/// How long the self-test waits for its own probe.
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(3);
/// Pause before re-establishing a lost listening connection.
const RECONNECT_PAUSE: Duration = Duration::from_secs(1);

/// Shared state of a store's listener.
#[derive(Debug)]
pub(crate) struct Listener {
    wake: watch::Sender<u64>,
    /// Whether the last self-test heard its probe.
    healthy: AtomicBool,
    /// The same, for those who wait until it has.
    heard_probe: watch::Sender<bool>,
    /// Those waiting for a job to end, by job id.
    finishes: Mutex<HashMap<String, watch::Sender<u64>>>,
}

/// Owned by the store (shared by its clones): when the last clone is
/// dropped, the listening task stops and closes its connection.
#[derive(Debug)]
pub(crate) struct ListenerHandle {
    pub(crate) listener: Arc<Listener>,
    stop: tokio_util::sync::CancellationToken,
}

impl Drop for ListenerHandle {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Listener {
    /// Starts the listening task.
    pub(crate) fn start(
        config: tokio_postgres::Config,
        pool: deadpool_postgres::Pool,
        channels: Channels,
    ) -> ListenerHandle {
        let listener = Arc::new(Listener {
            wake: watch::Sender::new(0),
            healthy: AtomicBool::new(false),
            heard_probe: watch::Sender::new(false),
            finishes: Mutex::new(HashMap::new()),
        });
        let stop = tokio_util::sync::CancellationToken::new();
        let (me, stopped) = (listener.clone(), stop.clone());
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    r = me.listen_once(&config, &pool, &channels) => {
                        if let Err(e) = r {
                            tracing::warn!(error = %e, "the LISTEN connection failed; polling until it is back");
                        }
                    }
                    () = stopped.cancelled() => return,
                }
                me.set_healthy(false);
                // Whatever was notified meanwhile is found by the next poll;
                // wake the waiters so they poll now.
                me.bump();
                me.bump_all_finishes();
                tokio::select! {
                    () = tokio::time::sleep(RECONNECT_PAUSE) => {}
                    () = stopped.cancelled() => return,
                }
            }
        });
        ListenerHandle { listener, stop }
    }

    /// Wakes idle workers, and everyone waiting for a job to end: after
    /// a reconnection, what was notified meanwhile is found by looking.
    fn bump(&self) {
        self.wake.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn bump_all_finishes(&self) {
        for waiting in self.lock_finishes().values() {
            waiting.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    /// Wakes those waiting for job `id` to end.
    fn finished(&self, id: &str) {
        if let Some(waiting) = self.lock_finishes().get(id) {
            waiting.send_modify(|n| *n = n.wrapping_add(1));
        }
    }

    fn lock_finishes(&self) -> std::sync::MutexGuard<'_, HashMap<String, watch::Sender<u64>>> {
        self.finishes
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A signal that fires when job `id` may have ended (or the
    /// listening connection came back, when it may have ended unheard).
    pub(crate) fn finish_signal(self: &Arc<Self>, id: &str) -> PgFinishSignal {
        let rx = self
            .lock_finishes()
            .entry(id.to_owned())
            .or_insert_with(|| watch::Sender::new(0))
            .subscribe();
        PgFinishSignal {
            rx: Some(rx),
            id: id.to_owned(),
            listener: Arc::clone(self),
        }
    }

    /// How many wake-ups there have been (every notification heard, and
    /// every reconnection).
    pub(crate) fn heard(&self) -> u64 {
        *self.wake.borrow()
    }

    /// Whether notifications are known to arrive.
    pub(crate) fn healthy(&self) -> bool {
        self.healthy.load(Ordering::SeqCst)
    }

    fn set_healthy(&self, ok: bool) {
        self.healthy.store(ok, Ordering::SeqCst);
        self.heard_probe.send_replace(ok);
    }

    /// Waits (at most `limit`) until notifications are known to arrive:
    /// the listening connection listens and heard its own probe.
    pub(crate) async fn until_healthy(&self, limit: Duration) {
        let mut heard = self.heard_probe.subscribe();
        let _ = tokio::time::timeout(limit, heard.wait_for(|ok| *ok)).await;
    }

    pub(crate) fn signal(&self) -> PgSignal {
        PgSignal(self.wake.subscribe())
    }

    async fn listen_once(
        &self,
        config: &tokio_postgres::Config,
        pool: &deadpool_postgres::Pool,
        channels: &Channels,
    ) -> Result<(), String> {
        let channel = channels.jobs.as_str();
        let (client, mut conn) = config.connect(NoTls).await.map_err(|e| e.to_string())?;
        let (probe_tx, probe_rx) = oneshot::channel::<()>();
        let mut probe_tx = Some(probe_tx);
        let (done_tx, mut done_rx) = oneshot::channel::<String>();
        let pump = async {
            let mut messages = futures_util::stream::poll_fn(move |cx| conn.poll_message(cx));
            while let Some(msg) = messages.next().await {
                match msg {
                    Ok(AsyncMessage::Notification(n))
                        if n.channel() == channel && n.payload() == PROBE =>
                    {
                        if let Some(tx) = probe_tx.take() {
                            let _ = tx.send(());
                        }
                    }
                    Ok(AsyncMessage::Notification(n)) if n.channel() == channels.finished => {
                        self.finished(n.payload());
                    }
                    Ok(AsyncMessage::Notification(_)) => self.bump(),
                    Ok(_) => {}
                    Err(e) => return e.to_string(),
                }
            }
            "the server closed the connection".to_owned()
        };
        let work = async {
            client
                .batch_execute(&format!(
                    "LISTEN \"{channel}\"; LISTEN \"{}\"",
                    channels.finished
                ))
                .await
                .map_err(|e| e.to_string())?;
            // A job may have ended before this connection listened: those
            // waiting for one look again now.
            self.bump_all_finishes();
            let ok = self_test(probe_rx, async {
                let c = pool.get().await.map_err(|e| e.to_string())?;
                c.execute("SELECT pg_notify($1, $2)", &[&channel, &PROBE])
                    .await
                    .map(|_| ())
                    .map_err(|e| e.to_string())
            })
            .await;
            self.set_healthy(ok);
            if ok {
                tracing::debug!(channel, "LISTEN/NOTIFY self-test passed");
            } else {
                tracing::error!(
                    channel,
                    "LISTEN/NOTIFY self-test failed: a notification sent through the pool never arrived \
                     (is a transaction-pooling proxy in the way?); workers fall back to polling, \
                     so new jobs start up to one poll interval late"
                );
            }
            // Keep the client alive while the pump runs.
            let reason = (&mut done_rx).await.unwrap_or_default();
            drop(client);
            Err::<(), String>(reason)
        };
        tokio::select! {
            reason = pump => {
                let _ = done_tx.send(reason.clone());
                Err(reason)
            }
            r = work => r,
        }
    }
}

/// Sends a probe and waits for it to come back. `true` when it arrived.
pub(crate) async fn self_test<F>(arrived: oneshot::Receiver<()>, send: F) -> bool
where
    F: std::future::Future<Output = Result<(), String>>,
{
    if let Err(e) = send.await {
        tracing::warn!(error = %e, "could not send the LISTEN/NOTIFY probe");
        return false;
    }
    matches!(
        tokio::time::timeout(PROBE_TIMEOUT, arrived).await,
        Ok(Ok(()))
    )
}

/// The channels a store's listener listens on.
#[derive(Clone, Debug)]
pub(crate) struct Channels {
    /// Inserts of due jobs (the payload is the queue).
    pub(crate) jobs: String,
    /// Ends of jobs someone waits for (the payload is the job's id).
    pub(crate) finished: String,
}

/// One waiter's view of the listener: fires when its job may have ended.
#[derive(Debug)]
pub(crate) struct PgFinishSignal {
    rx: Option<watch::Receiver<u64>>,
    id: String,
    listener: Arc<Listener>,
}

/// How long a waiter for a job's end waits between looks while the
/// listener's notifications are known not to arrive.
const UNHEARD_LOOK_EVERY: Duration = Duration::from_secs(1);

#[async_trait]
impl WorkSignal for PgFinishSignal {
    /// While notifications are known not to arrive (a pooler swallowing
    /// them, the connection being re-established), it says "look again"
    /// every second: an end may have gone unheard.
    async fn wait(&mut self, timeout: Duration) -> bool {
        let Some(rx) = self.rx.as_mut() else {
            return false;
        };
        let unheard = !self.listener.healthy() && timeout > UNHEARD_LOOK_EVERY;
        let limit = if unheard { UNHEARD_LOOK_EVERY } else { timeout };
        match tokio::time::timeout(limit, rx.changed()).await {
            Ok(Ok(())) => true,
            // The listener is gone with its store.
            Ok(Err(_)) => false,
            Err(_) => unheard,
        }
    }
}

impl Drop for PgFinishSignal {
    /// The last waiter for a job takes its entry away.
    fn drop(&mut self) {
        drop(self.rx.take());
        let mut finishes = self.listener.lock_finishes();
        if finishes
            .get(&self.id)
            .is_some_and(|waiting| waiting.receiver_count() == 0)
        {
            finishes.remove(&self.id);
        }
    }
}

/// A worker's view of the listener.
#[derive(Debug)]
pub struct PgSignal(watch::Receiver<u64>);

#[async_trait]
impl WorkSignal for PgSignal {
    async fn wait(&mut self, timeout: Duration) -> bool {
        matches!(
            tokio::time::timeout(timeout, self.0.changed()).await,
            Ok(Ok(()))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_self_test_fails_when_the_probe_never_arrives() {
        let (_keep, rx) = oneshot::channel::<()>();
        assert!(!self_test(rx, async { Ok(()) }).await);
    }

    #[tokio::test]
    async fn the_self_test_passes_when_the_probe_arrives() {
        let (tx, rx) = oneshot::channel::<()>();
        assert!(
            self_test(
                rx,
                async move { tx.send(()).map_err(|_| "closed".to_owned()) }
            )
            .await
        );
    }

    #[tokio::test]
    async fn the_self_test_fails_when_the_probe_cannot_be_sent() {
        let (_keep, rx) = oneshot::channel::<()>();
        assert!(!self_test(rx, async { Err("no connection".to_owned()) }).await);
    }
}
