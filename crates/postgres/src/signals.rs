//! Signals: a suspend under a live lease, the delivery (or keeping) of a
//! signal, and the waits that time out (a job's signals are read in
//! reads.rs).
//!
//! A signal that may be kept (`buffer`) and a suspend of the same job each
//! lock the job's row first, in a statement of their own, and then run
//! theirs on a snapshot taken after the lock: so one runs wholly before the
//! other, and a signal kept for a later wait is seen by the suspend that
//! follows it. A signal that is only ever delivered needs no lock: its
//! update of a waiting job is itself conditional on the row's latest
//! version, and it runs as one statement (in autocommit, one round trip).

use errand_core::{Await, Error, Job, JobId, Lease, NewSignal, Result, Signalled};
use time::OffsetDateTime;

use crate::conn::{Conn, in_transaction, query, query_opt};
use crate::queries::Queries;
use crate::reads::get;
use crate::rows::{bad_row, col, jobs_from_rows, millis};
use crate::settle::{fenced, release_dependents};

/// Locks job `id`'s row for the rest of the caller's transaction.
async fn lock<C: Conn>(client: &C, q: &Queries, id: &JobId) -> Result<()> {
    query(client, &q.lock_jobs, &[&vec![id.as_str()]]).await?;
    Ok(())
}

/// Sends `signal` (signal.sql): a signal that may be kept inside the
/// caller's transaction, after locking the job's row; one that may not on
/// any connection, as one statement.
pub(crate) async fn signal<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    signal: &NewSignal,
) -> Result<Signalled> {
    signal.validate()?;
    if signal.buffer {
        if !in_transaction(client).await? {
            return Err(Error::invalid(
                "a signal that may be kept (buffer) is sent inside a transaction (BEGIN, \
                 signal_in, COMMIT): it locks the job's row so that a suspend of the job runs \
                 wholly before or after it",
            ));
        }
        lock(client, q, &signal.job).await?;
    }
    let (operator, reason) = match &signal.by {
        Some(stamp) => (Some(stamp.operator.as_str()), stamp.reason.as_deref()),
        None => (None, None),
    };
    let row = query_opt(
        client,
        &q.signal,
        &[
            &now,
            &signal.job.as_str(),
            &signal.name.as_str(),
            &signal.payload_text(),
            &signal.buffer,
            &operator,
            &reason,
        ],
    )
    .await?
    .ok_or_else(|| bad_row("signal.sql answered with no row"))?;
    let kept: i64 = col(&row, 0)?;
    let delivered: Option<String> = row.try_get("id").map_err(crate::error::map_err)?;
    if delivered.is_some() {
        let job = jobs_from_rows(std::slice::from_ref(&row))?
            .pop()
            .ok_or_else(|| bad_row("a delivered signal answered with no job"))?;
        return Ok(Signalled {
            job,
            delivered: true,
        });
    }
    let job = get(client, q, &signal.job).await?;
    if kept > 0 {
        Ok(Signalled {
            job,
            delivered: false,
        })
    } else {
        Err(errand_core::signal_refused(&job, &signal.name))
    }
}

/// Fenced suspend inside the caller's transaction (suspend.sql).
pub(crate) async fn suspend<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    lease: &Lease,
    wait: &Await,
) -> Result<Job> {
    wait.validate()?;
    lock(client, q, &lease.id).await?;
    let timeout: Option<i64> = wait.timeout.map(millis);
    fenced(
        client,
        &q.suspend,
        now,
        lease,
        &[&wait.signal.as_str(), &timeout, &wait.on_timeout.as_str()],
    )
    .await
}

/// Ends up to `limit` waits that timed out, and releases the dependents of
/// the jobs that ended, inside the caller's transaction.
pub(crate) async fn expire_waits<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    limit: u32,
) -> Result<Vec<Job>> {
    let rows = query(client, &q.expire_waits, &[&now, &i64::from(limit)]).await?;
    let mut jobs = jobs_from_rows(&rows)?;
    // RETURNING order is unspecified; answer in id order, as SQLite does.
    jobs.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    let ended: Vec<&str> = jobs
        .iter()
        .filter(|j| j.has_dependents && j.finished_at.is_some())
        .map(|j| j.id.as_str())
        .collect();
    if !ended.is_empty() {
        release_dependents(client, q, now, &ended).await?;
    }
    Ok(jobs)
}
