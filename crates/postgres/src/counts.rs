//! Exact counts past the statistics' cap: every queue's jobs per state
//! counted whole (`counts.sql`) and stored in `errand_counts` by a running
//! service, and read back by the statistics.

use std::collections::BTreeMap;

use errand_core::{ExactCount, Result};
use time::OffsetDateTime;

use crate::conn::{Conn, query, read_committed};
use crate::error::map_err;
use crate::queries::Queries;
use crate::rows::from_odt;

/// Counts every queue's jobs per state and stores the counts in place of
/// the last ones, in one transaction; returns them.
pub(crate) async fn count_exactly(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
) -> Result<Vec<ExactCount>> {
    let tx = read_committed(client).await?;
    // Keeps the planner from compiling a statement this short.
    tx.batch_execute("SET LOCAL jit = off")
        .await
        .map_err(map_err)?;
    let at: OffsetDateTime = query(&tx, "SELECT coalesce($1::timestamptz, now())", &[&now])
        .await?
        .first()
        .map(|r| r.try_get(0).map_err(map_err))
        .transpose()?
        .unwrap_or_else(OffsetDateTime::now_utc);
    let mut sums: BTreeMap<(String, String), i64> = BTreeMap::new();
    for r in query(&tx, &q.counts, &[&Some(at)]).await? {
        let key = (
            r.try_get("queue").map_err(map_err)?,
            r.try_get("state").map_err(map_err)?,
        );
        *sums.entry(key).or_default() += r.try_get::<_, i64>("n").map_err(map_err)?;
    }
    let (queues, rest): (Vec<&str>, Vec<(&str, i64)>) = sums
        .iter()
        .map(|((queue, state), n)| (queue.as_str(), (state.as_str(), *n)))
        .unzip();
    let (states, ns): (Vec<&str>, Vec<i64>) = rest.into_iter().unzip();
    tx.batch_execute(&format!("DELETE FROM {}.errand_counts", q.schema))
        .await
        .map_err(map_err)?;
    let insert = format!(
        "INSERT INTO {}.errand_counts (queue, state, n, counted_at)
         SELECT c.queue, c.state, c.n, $4 FROM unnest($1::text[], $2::text[], $3::bigint[])
             AS c (queue, state, n)",
        q.schema
    );
    query(&tx, &insert, &[&queues, &states, &ns, &at]).await?;
    tx.commit().await.map_err(map_err)?;
    let counted_at = from_odt(at);
    Ok(sums
        .into_iter()
        .map(|((queue, state), n)| ExactCount {
            queue,
            state,
            n: u64::try_from(n).unwrap_or(0),
            counted_at,
        })
        .collect())
}

/// The stored counts.
pub(crate) async fn stored<C: Conn>(client: &C, q: &Queries) -> Result<Vec<ExactCount>> {
    let sql = format!(
        "SELECT queue, state, n, counted_at FROM {}.errand_counts ORDER BY queue, state",
        q.schema
    );
    query(client, &sql, &[])
        .await?
        .iter()
        .map(|r| {
            Ok(ExactCount {
                queue: r.try_get("queue").map_err(map_err)?,
                state: r.try_get("state").map_err(map_err)?,
                n: u64::try_from(r.try_get::<_, i64>("n").map_err(map_err)?).unwrap_or(0),
                counted_at: from_odt(r.try_get("counted_at").map_err(map_err)?),
            })
        })
        .collect()
}
