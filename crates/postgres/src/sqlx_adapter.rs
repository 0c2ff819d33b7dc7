//! Enqueue and complete inside a `sqlx` PostgreSQL transaction (feature
//! `sqlx`).
//!
//! Many Rust web services hold their transactions in `sqlx`; this adapter
//! lets them add a job to the same transaction, so the job commits with the
//! business rows or not at all. It runs the same statement as
//! [`crate::PgStore::enqueue_in`], with the same validation, and the same
//! insert trigger wakes idle workers at commit. A handler can likewise
//! acknowledge its job in the transaction that writes its effect
//! ([`complete_in`]), so the job is done exactly when the effect commits.
//!
//! ```no_run
//! # async fn pay(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
//! # let job = errand_core::NewJob::new("receipt", errand_core::Payload::default())?;
//! let mut tx = pool.begin().await?;
//! sqlx::query("UPDATE wallet SET cents = cents - 500").execute(&mut *tx).await?;
//! errand_postgres::sqlx_adapter::enqueue_in(&mut tx, "errand", job).await?;
//! tx.commit().await?;
//! # Ok(())
//! # }
//! ```
//!
//! (Compiled, not run, as a test: it needs a server.)

use errand_core::{Error, IntoNewJob, JobId, Lease, Result, Schedule};
use sqlx::Row;

use crate::queries::Queries;

/// What an enqueue did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enqueued {
    /// The job's id (generated when the job had none).
    pub id: JobId,
    /// `false` when a job with this id already existed (nothing was created).
    pub created: bool,
}

/// What a completion did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completed {
    /// The job, now `done` (once the transaction commits).
    pub id: JobId,
    /// The attempt that completed it.
    pub attempt: u32,
    /// Whether the job had dependents, released by the same transaction.
    pub released_dependents: bool,
}

fn map_sqlx(e: sqlx::Error) -> Error {
    match e.as_database_error() {
        Some(db)
            if db.code().as_deref() == Some("42P01") || db.code().as_deref() == Some("3F000") =>
        {
            Error::SchemaOutdated(db.message().to_owned())
        }
        Some(db) => {
            let message = db.message().to_owned();
            Error::storage_caused_by(message, e)
        }
        None => Error::storage_caused_by(format!("sqlx: {e}"), e),
    }
}

/// Inserts `job` (a [`errand_core::NewJob`] or a typed job's arguments) on `conn`
/// (typically `&mut *tx` of an open transaction), in Errand's tables under
/// `schema`. An existing id creates nothing.
pub async fn enqueue_in(
    conn: &mut sqlx::PgConnection,
    schema: &str,
    job: impl IntoNewJob,
) -> Result<Enqueued> {
    let job = job.into_new_job()?;
    job.validate()?;
    if !job.depends_on.is_empty() {
        return Err(Error::invalid(
            "this adapter does not enqueue jobs with dependencies yet: enqueue them with \
             PgStore::enqueue_in on a tokio-postgres transaction, or through the store",
        ));
    }
    if job.batch.is_some() {
        return Err(Error::invalid(
            "this adapter does not add jobs to batches yet: enqueue them with \
             PgStore::enqueue_in on a tokio-postgres transaction, or through the store",
        ));
    }
    if job.unique.is_some() {
        return Err(Error::invalid(
            "this adapter does not enqueue unique or debounced jobs yet: enqueue them with \
             PgStore::enqueue_in on a tokio-postgres transaction, or through the store",
        ));
    }
    if !job.tags.is_empty() {
        return Err(Error::invalid(
            "this adapter does not enqueue jobs with tags yet: enqueue them with \
             PgStore::enqueue_in on a tokio-postgres transaction, or through the store",
        ));
    }
    // Only the statement this call runs, not the store's whole set.
    // A workflow step's row in errand_workflow_steps and the metadata's
    // rows in errand_job_meta go in with the job.
    let insert = Queries::fill(
        &crate::quote_schema(schema)?,
        &if job.workflow.is_some() || !job.meta.is_empty() {
            crate::queries::side_rows(include_str!("../queries/insert.sql"))
        } else {
            include_str!("../queries/insert.sql").to_owned()
        },
    );
    let id = job.id.clone().unwrap_or_else(JobId::generate);
    let (at, delay): (Option<String>, i64) = match job.schedule {
        Schedule::Now => (None, 0),
        Schedule::After(d) => (None, i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        Schedule::At(t) => (Some(t.to_rfc3339()), 0),
    };
    let max =
        i32::try_from(job.max_attempts).map_err(|_| Error::invalid("max attempts out of range"))?;
    // Times travel as RFC 3339 text and are cast by the statement.
    let row = sqlx::query(&insert)
        .bind(None::<String>)
        .bind(id.as_str())
        .bind(job.queue.as_str())
        .bind(job.kind.as_str())
        .bind(job.payload.as_str())
        .bind(job.priority)
        .bind(max)
        .bind(at)
        .bind(delay)
        .bind(
            i32::try_from(job.max_lease_expiries)
                .map_err(|_| Error::invalid("lost-lease budget out of range"))?,
        )
        .bind(
            job.give_up_after
                .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
        )
        .bind(job.key.as_ref().map(|k| k.name.as_str()))
        .bind(crate::insert::key_limit(&job)?)
        .bind(job.key.as_ref().is_some_and(|k| k.ordered))
        .bind(job.deadline.map(|t| t.to_rfc3339()))
        .bind(
            job.traceparent
                .as_ref()
                .map(errand_core::TraceParent::as_str),
        )
        .bind(job.workflow.as_ref().map(errand_core::WorkflowId::as_str))
        .bind(errand_core::meta_to_stored(&job.meta))
        .bind(None::<String>)
        .fetch_optional(&mut *conn)
        .await
        .map_err(map_sqlx)?;
    let created = match row {
        Some(row) => {
            let got: String = row.try_get("id").map_err(map_sqlx)?;
            got == id.as_str()
        }
        None => false,
    };
    Ok(Enqueued { id, created })
}

/// Acknowledges a claimed job on `conn` — typically `&mut *tx` of the
/// handler's own open transaction — so the job is `done` exactly when the
/// handler's writes commit (transactional completion), the same statements
/// as [`crate::PgStore::complete_in`]. Fenced: when the lease is no longer
/// the job's (it expired and another worker claimed the job, or it was
/// cancelled) nothing is written and [`Error::LeaseLost`] comes back; roll
/// the transaction back then. The handler returns `Outcome::Completed`
/// afterwards (the runtime then settles nothing more).
///
/// The job's dependents, if it has any, are released by the same
/// transaction. The two statements run under a savepoint inside the
/// caller's transaction (however it was opened), or in a transaction of
/// their own on a connection outside any, so the job and its dependents'
/// release always commit together.
///
/// ```no_run
/// # async fn handle(pool: sqlx::PgPool, lease: errand_core::Lease) -> Result<(), Box<dyn std::error::Error>> {
/// let mut tx = pool.begin().await?;
/// sqlx::query("INSERT INTO receipts (order_id) VALUES ('o-1')").execute(&mut *tx).await?;
/// errand_postgres::sqlx_adapter::complete_in(&mut tx, "errand", &lease).await?;
/// tx.commit().await?;
/// # Ok(())
/// # }
/// ```
pub async fn complete_in(
    conn: &mut sqlx::PgConnection,
    schema: &str,
    lease: &Lease,
) -> Result<Completed> {
    let quoted = crate::quote_schema(schema)?;
    let statements = Statements {
        complete: Queries::fill(&quoted, include_str!("../queries/complete.sql")),
        // The job ends done: its dependents take the release for
        // acknowledged jobs, as the store's own completion does.
        release: Queries::fill(&quoted, &crate::queries::release_done_text()),
    };
    // The two statements commit together (see `open_own`).
    let joined = open_own(conn).await?;
    let done = complete_and_release(conn, &statements, lease).await;
    close_own(conn, joined, done.is_ok()).await?;
    let (attempts, has_dependents) = done?;
    Ok(Completed {
        id: lease.id.clone(),
        attempt: u32::try_from(attempts).unwrap_or(lease.attempt),
        released_dependents: has_dependents,
    })
}

/// The statements a completion runs, filled with the schema.
struct Statements {
    complete: String,
    release: String,
}

/// Makes the statements that follow all or nothing: inside the caller's
/// transaction (however it was opened — sqlx's own bookkeeping does not
/// know a plain `BEGIN`) through a savepoint of ours, or, on a connection
/// outside any, in a transaction of ours. Answers whether it joined the
/// caller's; [`close_own`] ends what it opened.
async fn open_own(conn: &mut sqlx::PgConnection) -> Result<bool> {
    let probe = sqlx::query("SAVEPOINT errand_own")
        .execute(&mut *conn)
        .await
        .map(|_| ());
    match probe {
        Ok(()) => Ok(true),
        Err(e) if e.as_database_error().and_then(|d| d.code()).as_deref() == Some("25P01") => {
            run(conn, "BEGIN").await?;
            Ok(false)
        }
        Err(e) => Err(map_sqlx(e)),
    }
}

/// Keeps (`ok`) or undoes what followed [`open_own`].
async fn close_own(conn: &mut sqlx::PgConnection, joined: bool, ok: bool) -> Result<()> {
    match (ok, joined) {
        (true, true) => run(conn, "RELEASE SAVEPOINT errand_own").await,
        (true, false) => run(conn, "COMMIT").await,
        (false, true) => {
            run(conn, "ROLLBACK TO SAVEPOINT errand_own").await?;
            run(conn, "RELEASE SAVEPOINT errand_own").await
        }
        (false, false) => run(conn, "ROLLBACK").await,
    }
}

/// Runs one statement that answers nothing.
async fn run(conn: &mut sqlx::PgConnection, sql: &'static str) -> Result<()> {
    sqlx::query(sql)
        .execute(conn)
        .await
        .map(|_| ())
        .map_err(map_sqlx)
}

/// The fenced completion and, when the job has dependents, their release;
/// the job's attempt count and whether it had dependents.
async fn complete_and_release(
    conn: &mut sqlx::PgConnection,
    queries: &Statements,
    lease: &Lease,
) -> Result<(i32, bool)> {
    // $1 now (the server's), $2 id, $3 token, $4 no output, $5 this
    // transaction releases the dependents.
    let row = sqlx::query(&queries.complete)
        .bind(None::<String>)
        .bind(lease.id.as_str())
        .bind(lease.token.as_str())
        .bind(None::<String>)
        .bind(true)
        .fetch_optional(&mut *conn)
        .await
        .map_err(map_sqlx)?;
    let Some(row) = row else {
        return Err(Error::LeaseLost {
            id: lease.id.to_string(),
            attempt: lease.attempt,
        });
    };
    let has_dependents: bool = row.try_get("has_dependents").map_err(map_sqlx)?;
    let attempts: i32 = row.try_get("attempts").map_err(map_sqlx)?;
    if has_dependents {
        // As the store's own release: JIT off for this transaction (its
        // estimates are loose, its work a few key look-ups), then the
        // release statement.
        sqlx::query("SELECT set_config('jit', 'off', true)")
            .execute(&mut *conn)
            .await
            .map_err(map_sqlx)?;
        sqlx::query(&queries.release)
            .bind(None::<String>)
            .bind(vec![lease.id.as_str()])
            .execute(&mut *conn)
            .await
            .map_err(map_sqlx)?;
    }
    Ok((attempts, has_dependents))
}

/// What a signal sent in a `sqlx` transaction did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SignalSent {
    /// The job.
    pub id: JobId,
    /// `true`: the job waited for it and is ready once the transaction
    /// commits; `false`: it is kept for the job's next wait of its name.
    pub delivered: bool,
}

/// Sends a signal on `conn` — typically `&mut *tx` of the application's
/// open transaction — so it is delivered (or kept) exactly when the
/// application's rows commit, and not at all if they roll back: the same
/// statements as [`crate::PgStore::signal_in`]. A signal that may be kept
/// (`buffer`) leaves the job's row locked until the transaction ends. On a
/// connection outside any transaction the
/// statements run in one of their own. A signal the job is not waiting for
/// (and that did not ask to be kept) is refused with
/// [`Error::InvalidState`], saying what the job waits for, and writes
/// nothing; an unknown job is [`Error::NotFound`].
///
/// ```no_run
/// # async fn paid(pool: sqlx::PgPool) -> Result<(), Box<dyn std::error::Error>> {
/// let signal = errand_core::NewSignal::new(errand_core::JobId::new("hold-42")?, "paid")?
///     .with_payload_text(r#"{"payment": "p-9"}"#)?;
/// let mut tx = pool.begin().await?;
/// sqlx::query("UPDATE holds SET paid = true WHERE id = 42").execute(&mut *tx).await?;
/// errand_postgres::sqlx_adapter::signal_in(&mut tx, "errand", &signal).await?;
/// tx.commit().await?;
/// # Ok(())
/// # }
/// ```
pub async fn signal_in(
    conn: &mut sqlx::PgConnection,
    schema: &str,
    signal: &errand_core::NewSignal,
) -> Result<SignalSent> {
    signal.validate()?;
    let quoted = crate::quote_schema(schema)?;
    let joined = open_own(conn).await?;
    let sent = send(conn, &quoted, signal).await;
    close_own(conn, joined, sent.is_ok()).await?;
    sent
}

/// signal.sql, after the lock of the job's row for a signal that may be
/// kept; a refusal read from the job.
async fn send(
    conn: &mut sqlx::PgConnection,
    quoted: &str,
    signal: &errand_core::NewSignal,
) -> Result<SignalSent> {
    let id = signal.job.as_str();
    sqlx::query(&Queries::fill(
        quoted,
        include_str!("../queries/lock_jobs.sql"),
    ))
    .bind(vec![id])
    .execute(&mut *conn)
    .await
    .map_err(map_sqlx)?;
    let (operator, reason) = match &signal.by {
        Some(stamp) => (Some(stamp.operator.as_str()), stamp.reason.as_deref()),
        None => (None, None),
    };
    let row = sqlx::query(&Queries::fill(
        quoted,
        include_str!("../queries/signal.sql"),
    ))
    .bind(None::<String>)
    .bind(id)
    .bind(signal.name.as_str())
    .bind(signal.payload_text())
    .bind(signal.buffer)
    .bind(operator)
    .bind(reason)
    .fetch_one(&mut *conn)
    .await
    .map_err(map_sqlx)?;
    let kept: i64 = row.try_get("kept").map_err(map_sqlx)?;
    let delivered: Option<String> = row.try_get("id").map_err(map_sqlx)?;
    if delivered.is_some() || kept > 0 {
        return Ok(SignalSent {
            id: signal.job.clone(),
            delivered: delivered.is_some(),
        });
    }
    let job = sqlx::query(&Queries::fill(
        quoted,
        "SELECT state, await_signal::text AS await_signal FROM __SCHEMA__.errand_jobs WHERE id = $1",
    ))
    .bind(id)
    .fetch_optional(&mut *conn)
    .await
    .map_err(map_sqlx)?
    .ok_or_else(|| Error::NotFound(id.to_owned()))?;
    let state: String = job.try_get("state").map_err(map_sqlx)?;
    let awaits: Option<String> = job.try_get("await_signal").map_err(map_sqlx)?;
    let state = state.parse::<errand_core::JobState>()?;
    let awaits = awaits
        .map(|a| errand_core::Name::parse("signal", a))
        .transpose()?;
    Err(errand_core::signal_refusal(
        id,
        state,
        awaits.as_ref(),
        &signal.name,
    ))
}
