//! What an operator sets on a queue: a pause (claims take nothing from it)
//! and a concurrency cap (claims read it in `cap_lock.sql` and
//! `claim.sql`), each changed with its audit entry.

use errand_core::{AuditStamp, Name, PausedQueue, QueueLimit, QueueLimitRequest, Result};
use time::OffsetDateTime;

use crate::audit::queue_audit;
use crate::conn::{Conn, query, query_opt};
use crate::error::map_err;
use crate::queries::Queries;
use crate::rows::from_odt;

/// Pauses a queue; `false` when it already was.
pub(crate) async fn pause(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    queue: &Name,
    by: &AuditStamp,
) -> Result<bool> {
    let tx = client.transaction().await.map_err(map_err)?;
    let sql = format!(
        "INSERT INTO {}.errand_paused_queues (queue, operator, reason, paused_at)
         VALUES ($2, $3, $4, coalesce($1::timestamptz, now())) ON CONFLICT (queue) DO NOTHING
         RETURNING queue",
        q.schema
    );
    let done = query_opt(
        &tx,
        &sql,
        &[&now, &queue.as_str(), &by.operator, &by.reason],
    )
    .await?
    .is_some();
    if done {
        queue_audit(&tx, q, now, queue, by, "pause").await?;
    }
    tx.commit().await.map_err(map_err)?;
    Ok(done)
}

/// Resumes a queue; `false` when it was not paused.
pub(crate) async fn resume(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    queue: &Name,
    by: &AuditStamp,
) -> Result<bool> {
    let tx = client.transaction().await.map_err(map_err)?;
    let sql = format!(
        "DELETE FROM {}.errand_paused_queues WHERE queue = $1::text RETURNING queue",
        q.schema
    );
    let done = query_opt(&tx, &sql, &[&queue.as_str()]).await?.is_some();
    if done {
        queue_audit(&tx, q, now, queue, by, "resume").await?;
    }
    tx.commit().await.map_err(map_err)?;
    Ok(done)
}

/// The paused queues, by name.
pub(crate) async fn paused<C: Conn>(client: &C, q: &Queries) -> Result<Vec<PausedQueue>> {
    let sql = format!(
        "SELECT queue, operator, reason, paused_at FROM {}.errand_paused_queues ORDER BY queue",
        q.schema
    );
    query(client, &sql, &[])
        .await?
        .iter()
        .map(|r| {
            Ok(PausedQueue {
                queue: Name::parse("queue", r.try_get::<_, String>("queue").map_err(map_err)?)?,
                operator: r.try_get("operator").map_err(map_err)?,
                reason: r.try_get("reason").map_err(map_err)?,
                paused_at: from_odt(r.try_get("paused_at").map_err(map_err)?),
            })
        })
        .collect()
}

/// Sets (`Some`) or clears (`None`) a queue's cap with its audit entry, in
/// one transaction; `false` when the queue already had that cap, or had
/// none to clear.
pub(crate) async fn set_limit(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    queue: &Name,
    concurrency: Option<u32>,
    by: &AuditStamp,
) -> Result<bool> {
    let tx = client.transaction().await.map_err(map_err)?;
    let changed = match concurrency {
        Some(n) => {
            let sql = format!(
                "INSERT INTO {s}.errand_queue_limits (queue, concurrency, operator, reason, set_at)
                 VALUES ($2, $3, $4, $5, coalesce($1::timestamptz, now()))
                 ON CONFLICT (queue) DO UPDATE
                 SET concurrency = excluded.concurrency, operator = excluded.operator,
                     reason = excluded.reason, set_at = excluded.set_at
                 WHERE {s}.errand_queue_limits.concurrency <> excluded.concurrency
                 RETURNING queue",
                s = q.schema
            );
            let n = i32::try_from(n).unwrap_or(i32::MAX);
            let params: [crate::conn::Param<'_>; 5] =
                [&now, &queue.as_str(), &n, &by.operator, &by.reason];
            query_opt(&tx, &sql, &params).await?.is_some()
        }
        None => {
            let sql = format!(
                "DELETE FROM {}.errand_queue_limits WHERE queue = $1::text RETURNING queue",
                q.schema
            );
            query_opt(&tx, &sql, &[&queue.as_str()]).await?.is_some()
        }
    };
    if changed {
        let action = match concurrency {
            Some(_) => QueueLimitRequest::SET,
            None => QueueLimitRequest::CLEAR,
        };
        queue_audit(&tx, q, now, queue, by, action).await?;
    }
    tx.commit().await.map_err(map_err)?;
    Ok(changed)
}

/// The queues' caps, by name.
pub(crate) async fn limits<C: Conn>(client: &C, q: &Queries) -> Result<Vec<QueueLimit>> {
    let sql = format!(
        "SELECT queue, concurrency, operator, reason, set_at FROM {}.errand_queue_limits
         ORDER BY queue",
        q.schema
    );
    query(client, &sql, &[])
        .await?
        .iter()
        .map(|r| {
            let concurrency: i32 = r.try_get("concurrency").map_err(map_err)?;
            Ok(QueueLimit {
                queue: Name::parse("queue", r.try_get::<_, String>("queue").map_err(map_err)?)?,
                concurrency: u32::try_from(concurrency).unwrap_or(0),
                operator: r.try_get("operator").map_err(map_err)?,
                reason: r.try_get("reason").map_err(map_err)?,
                set_at: from_odt(r.try_get("set_at").map_err(map_err)?),
            })
        })
        .collect()
}
