//! Settlements under a live lease (complete, fail, snooze or release,
//! cancel a running job), the heartbeat that extends a lease, and the
//! release of the dependents of jobs that ended.

use std::time::Duration;

use errand_core::{Error, Failure, Job, Lease, Result, RetryAt, Timestamp};
use time::OffsetDateTime;

use crate::conn::{Conn, Param, in_transaction, query, query_opt};
use crate::error::map_err;
use crate::queries::Queries;
use crate::reads::get;
use crate::rows::{bad_row, col, from_odt, ids_where, job_from_row, millis, to_odt};

/// Runs a fenced statement whose parameters start with now, id, token.
pub(crate) async fn fenced<C: Conn>(
    client: &C,
    sql: &str,
    now: Option<OffsetDateTime>,
    lease: &Lease,
    extra: &[Param<'_>],
) -> Result<Job> {
    let (id, token) = (lease.id.as_str(), lease.token.as_str());
    let mut params: Vec<Param<'_>> = vec![&now, &id, &token];
    params.extend_from_slice(extra);
    match query_opt(client, sql, &params).await? {
        Some(row) => job_from_row(&row),
        None => Err(Error::LeaseLost {
            id: lease.id.to_string(),
            attempt: lease.attempt,
        }),
    }
}

/// A fenced settlement (`sql` takes now, the id, the token, `extra`, then
/// whether the caller releases dependents) run on its own first, the fast
/// way; a job with dependents, which that leaves alone, is settled again by
/// [`settle_releasing`].
pub(crate) async fn settle(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    sql: &str,
    lease: &Lease,
    extra: &[Param<'_>],
) -> Result<Job> {
    match fenced(&*client, sql, now, lease, &with_flag(extra, &false)).await {
        Err(Error::LeaseLost { .. }) => settle_releasing(client, q, now, sql, lease, extra).await,
        other => other,
    }
}

/// A fenced settlement in a transaction that also releases the dependents
/// of the job if it ended: both commit together or neither does.
pub(crate) async fn settle_releasing(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    sql: &str,
    lease: &Lease,
    extra: &[Param<'_>],
) -> Result<Job> {
    let tx = client.transaction().await.map_err(map_err)?;
    let job = settled_in(&tx, q, now, sql, lease, extra).await?;
    tx.commit().await.map_err(map_err)?;
    Ok(job)
}

/// A fenced settlement on `client`, inside a transaction the caller holds,
/// releasing the job's dependents if it ended.
pub(crate) async fn settled_in<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    sql: &str,
    lease: &Lease,
    extra: &[Param<'_>],
) -> Result<Job> {
    let job = fenced(client, sql, now, lease, &with_flag(extra, &true)).await?;
    if job.has_dependents && job.finished_at.is_some() {
        // The statement just ended it: a job it made done releases its
        // dependents the short way (no cascade to run).
        let sql = if job.state == errand_core::JobState::Done {
            &q.release_done
        } else {
            &q.release
        };
        release_with(client, sql, now, &[job.id.as_str()]).await?;
    }
    Ok(job)
}

/// A settlement's parameters: `extra`, then whether the caller releases
/// dependents (the statement's last parameter).
fn with_flag<'a>(extra: &[Param<'a>], releasing: &'a bool) -> Vec<Param<'a>> {
    let mut params = extra.to_vec();
    params.push(releasing);
    params
}

/// [`crate::PgStore::complete_in`]: the fenced completion of a claimed job on
/// the caller's connection. One statement for a job without dependents;
/// a job with dependents is settled again with their release, inside the
/// caller's transaction, and refused outside one.
pub(crate) async fn complete_in<C: Conn>(
    conn: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    lease: &Lease,
) -> Result<Job> {
    let no_output: Option<&str> = None;
    // One statement for a job without dependents, in a transaction or
    // not; it leaves a job with dependents alone.
    match fenced(conn, &q.complete, now, lease, &[&no_output, &false]).await {
        Err(Error::LeaseLost { .. }) => {}
        other => return other,
    }
    if !in_transaction(conn).await? {
        let job = match get(conn, q, &lease.id).await {
            Ok(job) => Some(job),
            Err(Error::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        // Running in this attempt under a live lease (the token is not
        // read back; a wrong one is refused inside a transaction as
        // lost).
        let at = now.map_or_else(errand_core::Timestamp::now, from_odt);
        let ours = job.as_ref().is_some_and(|job| {
            job.state == errand_core::JobState::Running
                && job.attempts == lease.attempt
                && job.lease_until.is_some_and(|until| until > at)
        });
        return Err(if ours && job.as_ref().is_some_and(|j| j.has_dependents) {
            Error::invalid(format!(
                "job {} has dependents, whose release must commit with its completion: \
                 call complete_in inside a transaction (BEGIN, complete_in, COMMIT)",
                lease.id
            ))
        } else {
            Error::LeaseLost {
                id: lease.id.to_string(),
                attempt: lease.attempt,
            }
        });
    }
    settled_in(conn, q, now, &q.complete, lease, &[&no_output]).await
}

/// Fenced acknowledgment of many jobs in one statement. `releasing`: the
/// caller runs this in a transaction, and the dependents of the jobs it
/// ends are released here, in it; otherwise a job with dependents is left
/// unacknowledged (`false`) for [`settle_releasing`].
pub(crate) async fn complete_many<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    leases: &[Lease],
    releasing: bool,
) -> Result<Vec<bool>> {
    let ids: Vec<&str> = leases.iter().map(|l| l.id.as_str()).collect();
    let tokens: Vec<&str> = leases.iter().map(|l| l.token.as_str()).collect();
    let rows = query(client, &q.complete_many, &[&now, &ids, &tokens, &releasing]).await?;
    if releasing {
        let ended = ids_where(&rows, 2)?;
        release_with(client, &q.release_done, now, &ended).await?;
    }
    let mut done: std::collections::HashSet<(String, String)> = rows
        .iter()
        .map(|r| Ok((col(r, 0)?, col(r, 1)?)))
        .collect::<Result<_>>()?;
    // A lease listed twice is acknowledged once: its repeats found the job
    // already done, as they would one call after another.
    Ok(leases
        .iter()
        .map(|l| done.remove(&(l.id.to_string(), l.token.as_str().to_owned())))
        .collect())
}

/// Acknowledges many leases: in one statement on its own, the fast way;
/// the jobs it leaves alone (those with dependents, and lost leases) are
/// settled again, together, in one transaction that releases the
/// dependents. Answers in input order, `false` where the lease was lost.
pub(crate) async fn complete_leases(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    leases: &[Lease],
) -> Result<Vec<bool>> {
    let mut acked = complete_many(&*client, q, now, leases, false).await?;
    // Jobs with dependents (and lost leases) are left alone by the
    // statement above; they are settled again, together, in one
    // transaction that releases the dependents.
    let left: Vec<usize> = (0..leases.len()).filter(|&i| !acked[i]).collect();
    if !left.is_empty() {
        let again: Vec<Lease> = left.iter().map(|&i| leases[i].clone()).collect();
        let tx = client.transaction().await.map_err(map_err)?;
        let settled = complete_many(&tx, q, now, &again, true).await?;
        tx.commit().await.map_err(map_err)?;
        for (i, ok) in left.into_iter().zip(settled) {
            acked[i] = ok;
        }
    }
    Ok(acked)
}

/// A failure's retry as the fail statements take it: an absolute time or
/// a delay in milliseconds (neither: dead).
pub(crate) fn retry_params(failure: &Failure) -> (Option<OffsetDateTime>, Option<i64>) {
    match failure.retry {
        None => (None, None),
        Some(RetryAt::At(t)) => (Some(to_odt(t)), None),
        Some(RetryAt::After(d)) => (None, Some(millis(d))),
    }
}

/// Records many failures in one statement (`fail_many.sql`); returns, in
/// input order, each failed job or `None` where the lease was lost.
/// Fenced failures of many jobs in one statement. `releasing`: as for
/// [`complete_many`] — in the caller's transaction, the dependents of the
/// jobs it kills are released here; otherwise a job with dependents is
/// left alone (`None`).
pub(crate) async fn fail_many<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    items: &[(Lease, Failure)],
    releasing: bool,
) -> Result<Vec<Option<Job>>> {
    let n = items.len();
    let (mut ids, mut tokens, mut errors, mut classes) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut ats, mut delays): (Vec<Option<OffsetDateTime>>, Vec<Option<i64>>) =
        (Vec::with_capacity(n), Vec::with_capacity(n));
    for (lease, failure) in items {
        ids.push(lease.id.as_str());
        tokens.push(lease.token.as_str());
        errors.push(failure.error.as_str());
        classes.push(failure.class.as_str());
        let (at, delay) = retry_params(failure);
        ats.push(at);
        delays.push(delay);
    }
    let rows = query(
        client,
        &q.fail_many,
        &[
            &now, &ids, &tokens, &errors, &classes, &ats, &delays, &releasing,
        ],
    )
    .await?;
    let mut out: Vec<Option<Job>> = vec![None; n];
    for row in &rows {
        let at: i64 = row.try_get("failed_n").map_err(map_err)?;
        let slot = usize::try_from(at - 1)
            .ok()
            .and_then(|i| out.get_mut(i))
            .ok_or_else(|| bad_row(format!("a failure at position {at} of {n}")))?;
        *slot = Some(job_from_row(row)?);
    }
    if releasing {
        let ended: Vec<&str> = out
            .iter()
            .flatten()
            .filter(|j| j.has_dependents && j.finished_at.is_some())
            .map(|j| j.id.as_str())
            .collect();
        release_dependents(client, q, now, &ended).await?;
    }
    Ok(out)
}

/// Records many failures (already validated, at least one): in one
/// statement on its own, the fast way; the jobs it leaves alone (those with
/// dependents, and lost leases) are settled again, together, in one
/// transaction that releases the dependents. Answers in input order,
/// `None` where the lease was lost.
pub(crate) async fn fail_leases(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    items: &[(Lease, Failure)],
) -> Result<Vec<Option<Job>>> {
    let mut failed = fail_many(&*client, q, now, items, false).await?;
    // Jobs with dependents (and lost leases) are left alone by the
    // statement above; they are settled again, together, in one
    // transaction that releases the dependents.
    let left: Vec<usize> = (0..items.len()).filter(|&i| failed[i].is_none()).collect();
    if !left.is_empty() {
        let again: Vec<(Lease, Failure)> = left.iter().map(|&i| items[i].clone()).collect();
        let tx = client.transaction().await.map_err(map_err)?;
        let settled = fail_many(&tx, q, now, &again, true).await?;
        tx.commit().await.map_err(map_err)?;
        for (i, job) in left.into_iter().zip(settled) {
            failed[i] = job;
        }
    }
    Ok(failed)
}

/// Fenced snooze or release.
pub(crate) async fn snooze<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    lease: &Lease,
    delay: Duration,
    outcome: &str,
) -> Result<Job> {
    let delay = millis(delay);
    fenced(client, &q.snooze, now, lease, &[&delay, &outcome]).await
}

/// Fenced lease extension.
pub(crate) async fn heartbeat<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    lease: &Lease,
    extend: Duration,
    progress: Option<&str>,
) -> Result<Timestamp> {
    let (id, token, ms) = (lease.id.as_str(), lease.token.as_str(), millis(extend));
    match query_opt(client, &q.heartbeat, &[&now, &id, &token, &ms, &progress]).await? {
        Some(row) => Ok(from_odt(row.try_get(0).map_err(map_err)?)),
        None => Err(Error::LeaseLost {
            id: lease.id.to_string(),
            attempt: lease.attempt,
        }),
    }
}

/// Releases the dependents of `ended` (jobs this transaction has just
/// ended, or that a new job depends on and had already ended): release.sql,
/// which must run after the statement that ended them, in the same
/// transaction.
pub(crate) async fn release_dependents<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    ended: &[&str],
) -> Result<()> {
    release_with(client, &q.release, now, ended).await
}

/// Runs a release statement (`release.sql`, or `release_done.sql` for jobs
/// the caller has just acknowledged) for `ended`.
pub(crate) async fn release_with<C: Conn>(
    client: &C,
    sql: &str,
    now: Option<OffsetDateTime>,
    ended: &[&str],
) -> Result<()> {
    if !ended.is_empty() {
        // The statement's estimates are loose (a recursive cascade, rows
        // reached through arrays) while its work is a few key lookups: with
        // JIT on, compiling it for such estimates took 1.5 s of a 2 ms
        // release. Off for the rest of this transaction only.
        // Both sent back to back, in this order: one round trip.
        let params: [Param<'_>; 2] = [&now, &ended];
        tokio::try_join!(
            biased;
            query(client, "SELECT set_config('jit', 'off', true)", &[]),
            query(client, sql, &params),
        )?;
    }
    Ok(())
}
