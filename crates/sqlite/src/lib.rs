//! # errand-sqlite
//!
//! Errand's embedded store: a single SQLite file, zero setup.
//!
//! ## Design decisions
//!
//! * **One writer thread, group commit.** Concurrent writers on one SQLite
//!   file fight over the write lock (`SQLITE_BUSY` storms); one writer that
//!   batches beats many that fight. Every write — enqueue, claim,
//!   settlement, replay, and the application's own writes passed to
//!   [`SqliteStore::write`] — is queued to a dedicated thread that owns the
//!   write connection, commits everything waiting in one `BEGIN IMMEDIATE`
//!   transaction, and gives each operation its own savepoint so one failure
//!   does not undo the others. Results are released only after `COMMIT`.
//!   Measured on the project's machine, `rusqlite` on its own thread was
//!   1.2–3× faster than `sqlx`'s SQLite driver.
//! * **WAL, `synchronous = FULL` by default.** An acknowledged write survives
//!   power loss. `NORMAL` is an opt-in: it survives a process crash but may
//!   lose the last transactions on power loss.
//! * **Several processes may share a file.** Each process has its own writer;
//!   SQLite's lock and the busy timeout serialize them.
//! * **Time is the host's clock**, injectable for tests ([`SqliteOptions::clock`]).
//! * **SQL lives in `queries/*.sql`**, the schema in `migrations/`, applied by
//!   `refinery` and recorded in `errand_schema_history`.
#![deny(missing_docs)]

mod admin;
mod admin_store;
mod audit;
mod batch;
mod candidates;
mod children;
mod claim;
mod conn;
mod counts;
mod finishes;
mod insert;
mod job_store;
mod maintenance;
mod minutes;
mod queues;
mod reads;
mod rekey;
mod release;
mod rows;
mod schedules;
mod schema;
mod seal;
mod settle;
mod signals;
mod stats;
mod workflows;
mod writer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
#[cfg(doc)]
use errand_core::JobStore;
use errand_core::{
    Clock, Error, Inserted, IntoNewJob, Job, JobId, Lease, NewJob, Notifier, Result, StepGuard,
    SystemClock, Timestamp, WorkSignal,
};
use rusqlite::{Connection, OpenFlags};

use crate::conn::{Now, map_err};

pub use errand_core::SchemaStatus;
pub use insert::{insert as enqueue_in, insert_many as enqueue_many_in};
pub use rows::get as job_in;
pub use rusqlite;
pub use schema::{SCHEMA_VERSION, migrate, open_read_only, schema_status, schema_version};
pub use settle::complete as complete_in;
pub use signals::signal as signal_in;

use writer::Writer;

use errand_core::encryption::Keyring;

/// How durable a commit is (`PRAGMA synchronous`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Every commit is on disk before it returns: survives power loss.
    #[default]
    Full,
    /// Survives a process crash; the last commits may be lost on power loss.
    Normal,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

impl std::str::FromStr for Synchronous {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s.to_ascii_lowercase().as_str() {
            "full" => Ok(Synchronous::Full),
            "normal" => Ok(Synchronous::Normal),
            _ => Err(Error::invalid(format!(
                "synchronous must be `full` or `normal`, not {s:?}"
            ))),
        }
    }
}

/// How to open a store.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// Create the file if it does not exist (only `migrate` and
    /// application set-up do this; other commands refuse a missing file).
    pub create: bool,
    /// Apply pending migrations on open.
    pub migrate: bool,
    /// Durability of commits.
    pub synchronous: Synchronous,
    /// How long to wait for another process's write lock.
    pub busy_timeout: Duration,
    /// The clock for every due and lease decision.
    pub clock: Arc<dyn Clock>,
    /// The keys payloads, outputs and signal payloads are sealed with as
    /// they are written (see `errand_core::encryption`); `None` stores
    /// them as given.
    pub keys: Option<Arc<Keyring>>,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        SqliteOptions {
            create: false,
            migrate: false,
            synchronous: Synchronous::Full,
            busy_timeout: Duration::from_secs(5),
            clock: Arc::new(SystemClock),
            keys: None,
        }
    }
}

/// The SQLite store. Cheap to clone; clones share the writer thread.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    writer: Writer,
    /// Bumped after commits that may have made work due (in-process wake-up).
    wake: tokio::sync::watch::Sender<u64>,
    /// Those waiting for a job to end.
    finishes: Arc<finishes::Finishes>,
    readers: Mutex<Vec<Connection>>,
    /// How many reads may run at once: each holds a blocking thread and a
    /// connection, so many at once (10,000 waiters reading their jobs)
    /// would cost a thread and a connection each; the rest queue here.
    reading: tokio::sync::Semaphore,
    options: SqliteOptions,
    /// Keeps lease decisions on the old timeline after the host's clock
    /// steps forward (not for a manual clock: tests move it on purpose).
    steps: Arc<StepGuard>,
}

impl fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .field("synchronous", &self.inner.options.synchronous)
            .finish()
    }
}

fn configure(conn: &Connection, options: &SqliteOptions) -> Result<()> {
    conn.busy_timeout(options.busy_timeout).map_err(map_err)?;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
        options.synchronous.pragma()
    ))
    .map_err(map_err)
}

pub(crate) fn open_connection(
    path: &Path,
    options: &SqliteOptions,
    create: bool,
) -> Result<Connection> {
    let mut flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    if create {
        flags |= OpenFlags::SQLITE_OPEN_CREATE;
    }
    let conn = Connection::open_with_flags(path, flags)
        .map_err(|e| Error::invalid(format!("cannot open the database {}: {e}", path.display())))?;
    configure(&conn, options)?;
    Ok(conn)
}

impl SqliteStore {
    /// Opens (and with `options.create`, creates) the database at `path`.
    ///
    /// Fails with a message naming the fix when the file is missing, is not
    /// a SQLite database, has no Errand schema or an older one (run
    /// `errand migrate`), or has a newer schema than this program knows.
    ///
    /// The file is first looked at read-only ([`schema_status`]) and a
    /// file this program cannot use is refused exactly as it was: without
    /// `options.create` or `options.migrate` only an Errand database at
    /// this program's schema version is then opened for writing (and set
    /// to WAL mode); with them, anything migrating can bring there (a
    /// newer schema, a development build's and a file that is not a
    /// database are refused untouched).
    pub fn open(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let status = schema::inspect(&path, options.busy_timeout)?;
        if options.create || options.migrate {
            status.require_migratable(&schema::shown(&path))?;
        } else {
            status.require_current(&schema::shown(&path))?;
        }
        if !options.create && !path.exists() {
            SchemaStatus::Missing.require_current(&schema::shown(&path))?;
        }
        if path.is_dir() {
            return Err(Error::NotADatabase(format!(
                "{} is a directory; pass the path of a database file",
                path.display()
            )));
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty())
            && options.create
            && !dir.exists()
        {
            return Err(Error::NotADatabase(format!(
                "cannot create the database {}: the directory {} does not exist; create it first (mkdir -p {}) or name a database in an existing directory",
                path.display(),
                dir.display(),
                dir.display()
            )));
        }
        let mut conn = open_connection(&path, &options, options.create)?;
        // WAL is a property of the file: set it once, from the writer side.
        let mode: String = conn
            .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
            .map_err(map_err)?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(Error::storage(format!(
                "SQLite refused WAL mode (journal_mode is {mode}); is the file on a network or read-only file system?"
            )));
        }
        if options.migrate {
            schema::migrate(&mut conn)?;
        }
        schema::check(&conn)?;
        // One reader is opened now, while the file is known to be good:
        // a process short of file descriptors later (a server holding many
        // sockets) still answers reads, and a reader that cannot be opened
        // is refused here, with the writer, not at some later read.
        let reader = open_connection(&path, &options, false)?;
        let writer = Writer::start(conn, options.clock.clone())?;
        Ok(SqliteStore {
            inner: Arc::new(Inner {
                path,
                writer,
                wake: tokio::sync::watch::Sender::new(0),
                finishes: finishes::Finishes::new(),
                readers: Mutex::new(vec![reader]),
                reading: tokio::sync::Semaphore::new(MAX_READS_AT_ONCE),
                options,
                steps: Arc::new(StepGuard::new()),
            }),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// How many write transactions this store's writer thread has
    /// committed since the store was opened: one per group commit, however
    /// many operations it carried. Commits by other processes or other
    /// stores on the same file are not counted. `errand bench` divides it
    /// by the jobs processed ("commits per job").
    pub fn commits(&self) -> u64 {
        self.inner.writer.commits()
    }

    /// The store's clock.
    pub fn now(&self) -> Timestamp {
        self.inner.options.clock.now()
    }

    /// Enqueues `job` (a [`NewJob`] or a typed job's arguments) on `conn`
    /// — the application's own open transaction, or the connection a
    /// [`SqliteStore::write`] closure is given — so the job commits or
    /// rolls back with the application's rows. Stamped with the store's
    /// clock. An existing id returns the existing job and creates nothing.
    /// The same call as `PgStore::enqueue_in`, without the `await`.
    ///
    /// A job enqueued on a connection of its own is seen by this process's
    /// idle workers at their next poll; one enqueued inside
    /// [`SqliteStore::write`] wakes them at once.
    pub fn enqueue_in(&self, conn: &Connection, job: impl IntoNewJob) -> Result<Inserted> {
        let mut job = job.into_new_job()?;
        self.seal_jobs(std::slice::from_mut(&mut job))?;
        insert::insert(conn, &job, self.now())
    }

    /// Enqueues many jobs on `conn`, all or none, like
    /// [`SqliteStore::enqueue_in`].
    pub fn enqueue_many_in(&self, conn: &Connection, jobs: &[NewJob]) -> Result<Vec<Inserted>> {
        let jobs = errand_core::encryption::sealed_jobs(self.inner.options.keys.as_deref(), jobs)?;
        insert::insert_many(conn, &jobs, self.now())
    }

    /// Seals the payloads of jobs about to be written (with the store's
    /// keys, if any).
    pub(crate) fn seal_jobs(&self, jobs: &mut [NewJob]) -> Result<()> {
        errand_core::encryption::seal_new_jobs(self.inner.options.keys.as_deref(), jobs)
    }

    /// The output job `id` completes with, sealed with the store's keys.
    pub(crate) fn seal_output<'a>(
        &self,
        id: &errand_core::JobId,
        output: Option<&'a errand_core::Payload>,
    ) -> Result<Option<std::borrow::Cow<'a, errand_core::Payload>>> {
        errand_core::encryption::seal_output(self.inner.options.keys.as_deref(), id, output)
    }

    /// Acknowledges a claimed job on `conn` — the handler's own open
    /// transaction — so the job is done exactly when the handler's writes
    /// commit. Fenced like [`JobStore::complete`]: a lost lease returns
    /// [`Error::LeaseLost`], and the caller must roll its transaction back.
    /// The handler then returns `Outcome::Completed`. On a connection in
    /// autocommit the call opens a transaction of its own, so a job's
    /// completion and its dependents' release still commit together.
    pub fn complete_in(&self, conn: &Connection, lease: &Lease) -> Result<Job> {
        settle::complete_on(conn, lease, self.lease_clock())
    }

    /// [`SqliteStore::complete_in`] that also adds `children` to the job's
    /// workflow, as [`JobStore::complete_with_children`] does: the job is
    /// done with its children, its waiting dependents wait for them too,
    /// and all of it commits with the handler's writes on `conn` or not at
    /// all (on a connection in autocommit the call opens a transaction of
    /// its own). A lost lease is [`Error::LeaseLost`], a refused child
    /// [`Error::Invalid`]; either way nothing was written by the call, and
    /// the caller rolls back what it wrote. The handler then returns
    /// `Outcome::Completed`.
    pub fn complete_with_children_in(
        &self,
        conn: &Connection,
        lease: &Lease,
        output: Option<&errand_core::Payload>,
        children: &[NewJob],
    ) -> Result<errand_core::ChildrenAdded> {
        let mut children = children.to_vec();
        errand_core::check_children(&mut children)?;
        self.seal_jobs(&mut children)?;
        let sealed = self.seal_output(&lease.id, output)?;
        let output = sealed.as_deref();
        let now = self.lease_clock();
        if !conn.is_autocommit() {
            return children::complete_adding(conn, lease, output, children, now);
        }
        let tx =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
                .map_err(conn::map_err)?;
        let added = children::complete_adding(&tx, lease, output, children, now)?;
        tx.commit().map_err(conn::map_err)?;
        Ok(added)
    }

    /// Now, with the clock leases are judged by (the store's own
    /// settlements' guard against a clock that stepped forward).
    fn lease_clock(&self) -> Now {
        let at = self.now();
        let leases = if self.inner.options.clock.is_manual() {
            at
        } else {
            self.inner.steps.leases_now(at, std::time::Instant::now())
        };
        Now { at, leases }
    }

    /// Sends a signal on `conn` — the application's own open transaction
    /// (inside [`SqliteStore::write`]) — so it is delivered (or kept)
    /// exactly when the application's rows commit, and not at all if they
    /// roll back. The same rules as [`JobStore::signal`]: delivered to a
    /// job waiting for it, kept with `buffer`, refused otherwise
    /// ([`Error::InvalidState`]; the caller decides whether to roll back).
    pub fn signal_in(
        &self,
        conn: &Connection,
        signal: &errand_core::NewSignal,
    ) -> Result<errand_core::Signalled> {
        let signal =
            errand_core::encryption::seal_signal(self.inner.options.keys.as_deref(), signal)?;
        signals::signal(conn, &signal, self.now())
    }

    /// Runs `f` on the writer thread inside the shared write transaction
    /// (its own savepoint), and returns its result once the transaction has
    /// committed. Use it to write application rows and enqueue jobs
    /// atomically: call [`enqueue_in`] (with the `now` given to `f`, the
    /// transaction's time) or [`SqliteStore::enqueue_in`] inside `f`.
    ///
    /// `f` must not commit, roll back or start transactions itself; an error
    /// it returns rolls back its own writes only.
    pub async fn write<T, E, F>(&self, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&Connection, Timestamp) -> Result<T, E> + Send + 'static,
    {
        let out = self.submit(f).await;
        if out.is_ok() {
            self.wake();
        }
        out
    }

    async fn submit<T, E, F>(&self, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&Connection, Timestamp) -> Result<T, E> + Send + 'static,
    {
        let out = match self.inner.writer.submit(f).await {
            Ok(r) => r,
            Err(_) => Err(E::from(Error::Closed("the writer thread stopped".into()))),
        };
        // A commit may have ended a job someone waits for.
        self.inner.finishes.nudge();
        out
    }

    /// A signal that fires once job `id` has ended or is gone (see
    /// `finishes.rs`).
    fn finish_signal_of(&self, id: &JobId) -> Result<finishes::FinishSignal> {
        self.inner
            .finishes
            .signal(id.as_str(), &self.inner.path, &self.inner.options)
    }

    /// Tells this process's idle workers that work may be due.
    fn wake(&self) {
        self.inner.wake.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// [`SqliteStore::write`] for code outside an async runtime. Must not be
    /// called from inside one.
    pub fn write_blocking<T, E, F>(&self, f: F) -> Result<T, E>
    where
        T: Send + 'static,
        E: From<Error> + Send + 'static,
        F: FnOnce(&Connection, Timestamp) -> Result<T, E> + Send + 'static,
    {
        let out = match self.inner.writer.submit(f).blocking_recv() {
            Ok(r) => r,
            Err(_) => Err(E::from(Error::Closed("the writer thread stopped".into()))),
        };
        if out.is_ok() {
            self.wake();
        }
        out
    }

    /// Runs a read-only `f` on a pooled reader connection (WAL readers never
    /// block the writer).
    pub async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        let _turn = self
            .inner
            .reading
            .acquire()
            .await
            .map_err(|_| Error::Closed("the store's readers were closed".into()))?;
        let inner = self.inner.clone();
        tokio::task::spawn_blocking(move || inner.with_reader(f))
            .await
            .map_err(|e| Error::storage(format!("reader task failed: {e}")))?
    }

    /// [`SqliteStore::read`] for code outside an async runtime.
    pub fn read_blocking<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T>,
    {
        self.inner.with_reader(f)
    }

    /// Runs one of the store's own operations on the writer, with the
    /// time it runs by and the time leases are judged by.
    async fn op<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection, Now) -> Result<T> + Send + 'static,
    {
        let steps = self.inner.steps.clone();
        let manual = self.inner.options.clock.is_manual();
        let (out, released) = self
            .submit(move |c, at| {
                let leases = if manual {
                    at
                } else {
                    steps.leases_now(at, std::time::Instant::now())
                };
                let before = release::releases_so_far();
                let out = f(c, Now { at, leases })?;
                Ok((out, release::releases_so_far() != before))
            })
            .await?;
        // A settlement that released dependents made work due.
        if released {
            self.wake();
        }
        Ok(out)
    }
}

impl Inner {
    fn with_reader<T, F>(&self, f: F) -> Result<T>
    where
        F: FnOnce(&Connection) -> Result<T>,
    {
        let pooled = self.readers.lock().ok().and_then(|mut v| v.pop());
        let conn = match pooled {
            Some(c) => c,
            // Every pooled reader is busy. The file opened well before, so
            // a failure now is the system's (out of file descriptors, the
            // file gone), not the caller's input.
            None => open_connection(&self.path, &self.options, false).map_err(|e| match e {
                Error::Invalid(message) => Error::storage(message),
                other => other,
            })?,
        };
        let out = f(&conn);
        if let Ok(mut v) = self.readers.lock()
            && v.len() < 4
        {
            v.push(conn);
        }
        out
    }
}

impl Notifier for SqliteStore {
    fn work_signal(&self) -> Box<dyn WorkSignal> {
        Box::new(Signal(self.inner.wake.subscribe()))
    }
}

/// How many of a store's reads run at once (the pool keeps 4 connections
/// open; a read beyond them opens one for itself).
const MAX_READS_AT_ONCE: usize = 8;

/// The in-process wake-up of a SQLite store. Workers in other processes
/// sharing the file poll.
#[derive(Debug)]
struct Signal(tokio::sync::watch::Receiver<u64>);

#[async_trait]
impl WorkSignal for Signal {
    async fn wait(&mut self, timeout: Duration) -> bool {
        matches!(
            tokio::time::timeout(timeout, self.0.changed()).await,
            Ok(Ok(()))
        )
    }
}

#[cfg(test)]
mod tests;

/// The examples of this crate's README, compiled and run as doctests so
/// that the README stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
