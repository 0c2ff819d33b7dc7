//! What the store does to its jobs as time passes: final attempts whose
//! lease expired go to `dead`, and finished jobs past their retention are
//! pruned.

use std::time::Duration;

use errand_core::{JobId, Result, Timestamp};
use rusqlite::{Connection, named_params};

use crate::conn::{Now, json_list, map_err};
use crate::release::{Release, release_dependents};
use crate::rows::{opt_ts_col, u32_col};
use crate::settle::{Held, LEASE_EXPIRED, record_attempt};

const EXPIRE_FINAL: &str = include_str!("../queries/expire_final.sql");
const PRUNE: &str = include_str!("../queries/prune.sql");
const MARK_PRUNED_EDGES: &str = include_str!("../queries/mark_pruned_edges.sql");

/// Running jobs whose final attempt's lease expired go to `dead`.
pub(crate) fn expire_final(conn: &Connection, now: Now) -> Result<Vec<JobId>> {
    let mut expired: Vec<(String, u32, u32, Option<Timestamp>, bool)> = conn
        .prepare_cached(EXPIRE_FINAL)
        .map_err(map_err)?
        .query_map(
            named_params! {":now": now.at.as_millis(), ":lease_now": now.leases.as_millis()},
            |r| {
                Ok((
                    r.get("id")?,
                    u32_col(r, "replays")?,
                    u32_col(r, "attempts")?,
                    opt_ts_col(r, "attempt_started_at")?,
                    r.get("has_dependents")?,
                ))
            },
        )
        .map_err(map_err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(map_err)?;
    // RETURNING order is unspecified; report in id order, as PostgreSQL does.
    expired.sort_by(|a, b| a.0.cmp(&b.0));
    let depended_on: Vec<&str> = expired
        .iter()
        .filter(|e| e.4)
        .map(|e| e.0.as_str())
        .collect();
    if !depended_on.is_empty() {
        release_dependents(conn, &depended_on, Release::Failed, now.at)?;
    }
    let mut out = Vec::with_capacity(expired.len());
    for (id, cycle, attempt, started_at, _) in expired {
        let held = Held {
            id: &id,
            cycle,
            attempt,
            started_at,
        };
        record_attempt(conn, held, now.at, &LEASE_EXPIRED)?;
        out.push(JobId::new(id)?);
    }
    Ok(out)
}

/// Deletes finished jobs older than `older_than` (at most `limit`).
pub(crate) fn prune(
    conn: &Connection,
    older_than: Duration,
    limit: u32,
    now: Timestamp,
) -> Result<u64> {
    let mut stmt = conn.prepare_cached(PRUNE).map_err(map_err)?;
    let mut rows = stmt
        .query(named_params! {":before": now.minus(older_than).as_millis(), ":limit": limit})
        .map_err(map_err)?;
    let mut n = 0u64;
    let mut sources: Vec<String> = Vec::new();
    while let Some(r) = rows.next().map_err(map_err)? {
        n += 1;
        let state: String = r.get(1).map_err(map_err)?;
        let has_dependents: bool = r.get(2).map_err(map_err)?;
        if has_dependents && state == "done" {
            sources.push(r.get(0).map_err(map_err)?);
        }
    }
    drop(rows);
    if !sources.is_empty() {
        let ids = json_list(&sources.iter().map(String::as_str).collect::<Vec<_>>())?;
        conn.prepare_cached(MARK_PRUNED_EDGES)
            .map_err(map_err)?
            .execute(named_params! {":ids": ids})
            .map_err(map_err)?;
    }
    Ok(n)
}
