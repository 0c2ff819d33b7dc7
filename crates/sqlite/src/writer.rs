//! The single writer thread and its group commit.
//!
//! Every write to the database goes through one thread that owns the write
//! connection. It takes the first operation queued to it, then everything
//! else already waiting (up to a bound), and runs them all in one
//! `BEGIN IMMEDIATE` transaction, each inside its own savepoint: an
//! operation that fails is rolled back to its savepoint without undoing the
//! others. Results are handed back only after `COMMIT` returns, so no caller
//! ever hears "done" for a write that is not durable.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;

use errand_core::{Clock, Error, Timestamp};
use rusqlite::{Connection, TransactionBehavior};
use tokio::sync::oneshot;

use crate::conn::map_err;

/// Most operations committed together in one transaction.
const MAX_BATCH: usize = 256;

/// One queued write.
pub(crate) trait WriteOp: Send {
    /// Runs inside the batch transaction; returns `false` if it failed (its
    /// savepoint is then rolled back).
    fn run(&mut self, conn: &Connection, now: Timestamp) -> bool;
    /// Delivers the result: the op's own error, or the commit's outcome.
    fn finish(self: Box<Self>, commit: Result<(), &Error>);
}

struct TypedOp<T, E, F> {
    f: Option<F>,
    out: Option<Result<T, E>>,
    reply: oneshot::Sender<Result<T, E>>,
}

impl<T, E, F> WriteOp for TypedOp<T, E, F>
where
    T: Send,
    E: From<Error> + Send,
    F: FnOnce(&Connection, Timestamp) -> Result<T, E> + Send,
{
    fn run(&mut self, conn: &Connection, now: Timestamp) -> bool {
        match self.f.take() {
            Some(f) => {
                let out = f(conn, now);
                let ok = out.is_ok();
                self.out = Some(out);
                ok
            }
            None => false,
        }
    }

    fn finish(self: Box<Self>, commit: Result<(), &Error>) {
        let result = match (self.out, commit) {
            (Some(Err(e)), _) => Err(e),
            (Some(Ok(v)), Ok(())) => Ok(v),
            (_, Err(e)) => Err(E::from(e.clone())),
            (None, Ok(())) => Err(E::from(Error::storage(
                "the operation was not run because its batch was abandoned",
            ))),
        };
        // The caller may have gone away; its result is then nobody's concern.
        let _ = self.reply.send(result);
    }
}

/// The handle callers use to queue writes.
#[derive(Debug, Clone)]
pub(crate) struct Writer {
    tx: mpsc::Sender<Box<dyn WriteOp>>,
    /// Transactions the writer thread has committed.
    commits: Arc<AtomicU64>,
}

impl Writer {
    /// Starts the writer thread on `conn`.
    pub(crate) fn start(conn: Connection, clock: Arc<dyn Clock>) -> Result<Writer, Error> {
        let (tx, rx) = mpsc::channel::<Box<dyn WriteOp>>();
        let commits = Arc::new(AtomicU64::new(0));
        let counter = commits.clone();
        thread::Builder::new()
            .name("errand-sqlite-writer".into())
            .spawn(move || run(conn, clock, rx, &counter))
            .map_err(|e| Error::storage(format!("cannot start the writer thread: {e}")))?;
        Ok(Writer { tx, commits })
    }

    /// How many transactions the writer thread has committed so far.
    pub(crate) fn commits(&self) -> u64 {
        self.commits.load(Ordering::Relaxed)
    }

    /// Queues `f` and returns a receiver for its result.
    pub(crate) fn submit<T, E, F>(&self, f: F) -> oneshot::Receiver<Result<T, E>>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&Connection, Timestamp) -> Result<T, E> + Send + 'static,
    {
        let (reply, rx) = oneshot::channel();
        let op = Box::new(TypedOp {
            f: Some(f),
            out: None,
            reply,
        });
        if let Err(mpsc::SendError(op)) = self.tx.send(op) {
            op.finish(Err(&Error::Closed("the writer thread has stopped".into())));
        }
        rx
    }
}

fn run(
    mut conn: Connection,
    clock: Arc<dyn Clock>,
    rx: mpsc::Receiver<Box<dyn WriteOp>>,
    commits: &AtomicU64,
) {
    while let Ok(first) = rx.recv() {
        let mut ops = vec![first];
        while ops.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        let commit = run_batch(&mut conn, clock.as_ref(), &mut ops);
        if commit.is_ok() {
            commits.fetch_add(1, Ordering::Relaxed);
        }
        for op in ops {
            op.finish(commit.as_ref().map(|_| ()));
        }
    }
}

fn run_batch(
    conn: &mut Connection,
    clock: &dyn Clock,
    ops: &mut [Box<dyn WriteOp>],
) -> Result<(), Error> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(map_err)?;
    for op in ops.iter_mut() {
        tx.execute_batch("SAVEPOINT errand_op").map_err(map_err)?;
        let ok = op.run(&tx, clock.now());
        if tx.is_autocommit() {
            // SQLite rolled the whole transaction back (disk full, I/O
            // error): nothing of this batch is durable, and running more
            // operations would commit them outside any transaction.
            return Err(Error::storage(
                "SQLite rolled back the write transaction; nothing in it was saved",
            ));
        }
        let end = if ok {
            "RELEASE errand_op"
        } else {
            "ROLLBACK TO errand_op; RELEASE errand_op"
        };
        tx.execute_batch(end).map_err(map_err)?;
    }
    tx.commit().map_err(map_err)
}
