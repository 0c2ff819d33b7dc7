//! Maintenance: the sweep that moves final attempts whose lease expired to
//! `dead` (also run by a claim that reclaims), and the pruning of finished
//! jobs. The per-minute counts are pruned in minutes.rs.

use std::time::Duration;

use errand_core::{JobId, Result, SweepReport};
use time::OffsetDateTime;

use crate::conn::{Conn, query, query_opt};
use crate::error::map_err;
use crate::queries::Queries;
use crate::rows::{col, ids_where, millis};
use crate::settle::release_dependents;

/// Final attempts whose lease expired go to `dead`, and their dependents
/// are released. Runs in a transaction the caller holds.
pub(crate) async fn expire_final<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
) -> Result<Vec<JobId>> {
    let rows = query(client, &q.expire_final, &[&now]).await?;
    let ended = ids_where(&rows, 1)?;
    release_dependents(client, q, now, &ended).await?;
    rows.iter()
        .map(|r| JobId::new(col::<String>(r, 0)?))
        .collect()
}

/// Moves final attempts whose lease expired to `dead` and releases their
/// dependents, in a transaction of its own.
pub(crate) async fn sweep(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
) -> Result<SweepReport> {
    let tx = client.transaction().await.map_err(map_err)?;
    let dead = expire_final(&tx, q, now).await?;
    tx.commit().await.map_err(map_err)?;
    Ok(SweepReport { dead })
}

/// Deletes finished jobs older than `older_than` (at most `limit`).
pub(crate) async fn prune<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    older_than: Duration,
    limit: u32,
) -> Result<u64> {
    let (age, limit) = (millis(older_than), i64::from(limit));
    let row = query_opt(client, &q.prune, &[&now, &age, &limit]).await?;
    let n: i64 = row.as_ref().map_or(Ok(0), |r| col(r, 0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}
