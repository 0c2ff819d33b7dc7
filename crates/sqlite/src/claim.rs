//! Claims: the due jobs a claim may take (reclaimed leases first, then
//! ready jobs in claim order, as their concurrency keys admit them), taking
//! them under a new lease, and the rate tokens a limited claim spends.

use std::collections::HashMap;

use errand_core::{
    ClaimRequest, ClaimedJob, Error, Job, Lease, LeaseToken, Name, Result, Timestamp,
};
use rusqlite::{Connection, OptionalExtension, named_params};

use crate::candidates::{Scope, due_candidates};
use crate::conn::{Now, map_err};
use crate::maintenance::expire_final;
use crate::rows::{col, job_from_row, opt_ts_col, u32_col};
use crate::settle::{Held, LEASE_EXPIRED, complete_many, record_attempt};

const CANDIDATES_EXPIRED: &str = include_str!("../queries/candidates_expired.sql");
const CANDIDATES_EXPIRED_IN: &str = include_str!("../queries/candidates_expired_in.sql");
const CLAIM: &str = include_str!("../queries/claim.sql");
pub(crate) const CLAIM_MANY: &str = include_str!("../queries/claim_many.sql");
const HELD: &str = "SELECT replays, attempts, attempt_started_at FROM errand_jobs WHERE id = :id";
const TAKE_TOKENS: &str = include_str!("../queries/take_tokens.sql");
const GIVE_BACK_TOKENS: &str = include_str!("../queries/give_back_tokens.sql");

/// The queues of a claim as a JSON array, or `None` for every queue.
fn queue_param(req: &ClaimRequest) -> Option<String> {
    if req.queues.is_empty() {
        return None;
    }
    let names: Vec<&str> = req.queues.iter().map(Name::as_str).collect();
    serde_json::to_string(&names).ok()
}

/// Runs a candidate query: `sql.0` for every queue, `sql.1` for the named ones.
fn candidate_ids(
    conn: &Connection,
    sql: (&str, &str),
    queues: Option<&str>,
    lease_now: Timestamp,
    limit: u32,
) -> Result<Vec<String>> {
    if limit == 0 {
        return Ok(Vec::new());
    }
    let now = lease_now.as_millis();
    let rows = match queues {
        None => conn
            .prepare_cached(sql.0)
            .map_err(map_err)?
            .query_map(named_params! {":lease_now": now, ":limit": limit}, |r| {
                r.get(0)
            })
            .map_err(map_err)?
            .collect::<rusqlite::Result<_>>(),
        Some(q) => conn
            .prepare_cached(sql.1)
            .map_err(map_err)?
            .query_map(
                named_params! {":lease_now": now, ":limit": limit, ":queues": q},
                |r| r.get(0),
            )
            .map_err(map_err)?
            .collect::<rusqlite::Result<_>>(),
    };
    rows.map_err(map_err)
}

/// Claims up to `req.limit` due jobs.
pub(crate) fn claim(conn: &Connection, req: &ClaimRequest, clock: Now) -> Result<Vec<ClaimedJob>> {
    let now = clock.at;
    // The request was validated by the caller (`ClaimRequest::validate`).
    if req.reclaim {
        expire_final(conn, clock)?;
    }
    let queues = queue_param(req);
    let mut limit = req.limit.min(10_000);
    // A rate-limited claim takes up to `limit` tokens, claims no more jobs
    // than it was granted and gives the rest back below: the writer's one
    // transaction makes the three one step.
    let granted = match &req.rate {
        Some(rate) => {
            let granted = take_tokens(conn, &rate.bucket, rate.limit, limit, now)?;
            limit = limit.min(granted);
            Some((rate, granted))
        }
        None => None,
    };
    let expired_sql = (CANDIDATES_EXPIRED, CANDIDATES_EXPIRED_IN);
    let expired = if req.reclaim {
        candidate_ids(conn, expired_sql, queues.as_deref(), clock.leases, limit)?
    } else {
        Vec::new()
    };
    let rest = limit.saturating_sub(u32::try_from(expired.len()).unwrap_or(u32::MAX));
    let scope = match (req.queues.as_slice(), queues.as_deref()) {
        ([one], _) => Scope::One(one.as_str()),
        (_, Some(list)) => Scope::Some(list),
        (_, None) => Scope::All,
    };
    let ready = due_candidates(conn, req, scope, now, rest)?;
    let lease_until = now.plus(req.lease);
    // Claim order: reclaimed leases first, then ready jobs as the scan
    // found them.
    let order: Vec<&str> = expired
        .iter()
        .map(String::as_str)
        .chain(ready.iter().map(|c| c.id.as_str()))
        .collect();
    let mut claimed: HashMap<String, ClaimedJob> = HashMap::with_capacity(order.len());
    for id in &expired {
        if let Some(c) = claim_expired(conn, id, lease_until, clock)? {
            claimed.insert(id.clone(), c);
        }
    }
    for c in ready.iter().filter(|c| c.keyed) {
        if let Some(job) = claim_one(conn, &c.id, lease_until, clock)? {
            claimed.insert(c.id.clone(), job);
        }
    }
    let plain: Vec<i64> = ready.iter().filter(|c| !c.keyed).map(|c| c.rowid).collect();
    if !plain.is_empty() {
        let ids = serde_json::to_string(&plain)
            .map_err(|e| Error::storage(format!("encoding claim candidates: {e}")))?;
        let mut stmt = conn.prepare_cached(CLAIM_MANY).map_err(map_err)?;
        let mut rows = stmt
            .query(named_params! {
                ":ids": ids,
                ":lease_until": lease_until.as_millis(),
                ":now": now.as_millis(),
            })
            .map_err(map_err)?;
        while let Some(row) = rows.next().map_err(map_err)? {
            let job = job_from_row(row).map_err(map_err)?;
            let token = LeaseToken::from_string(row.get(col::LEASE_TOKEN).map_err(map_err)?);
            claimed.insert(job.id.as_str().to_owned(), claimed_job(job, token));
        }
    }
    if let Some((rate, granted)) = granted {
        let unspent = granted.saturating_sub(u32::try_from(claimed.len()).unwrap_or(u32::MAX));
        if unspent > 0 {
            give_back_tokens(conn, &rate.bucket, rate.limit, unspent)?;
        }
    }
    Ok(order
        .into_iter()
        .filter_map(|id| claimed.remove(id))
        .collect())
}

fn claimed_job(job: Job, token: LeaseToken) -> ClaimedJob {
    ClaimedJob {
        lease: Lease {
            id: job.id.clone(),
            token,
            attempt: job.attempts,
        },
        job,
    }
}

/// Claims one candidate with claim.sql (which also applies a key's limit).
fn claim_one(
    conn: &Connection,
    id: &str,
    lease_until: Timestamp,
    clock: Now,
) -> Result<Option<ClaimedJob>> {
    let token = LeaseToken::generate();
    let job = conn
        .prepare_cached(CLAIM)
        .map_err(map_err)?
        .query_row(
            named_params! {
                ":id": id,
                ":token": token.as_str(),
                ":lease_until": lease_until.as_millis(),
                ":now": clock.at.as_millis(),
                ":lease_now": clock.leases.as_millis(),
            },
            job_from_row,
        )
        .optional()
        .map_err(map_err)?;
    Ok(job.map(|job| claimed_job(job, token)))
}

/// Reclaims a job whose lease expired: the attempt it held goes to the
/// history once the claim has taken the job (nothing else writes between
/// the read and the claim: this is the one write transaction).
fn claim_expired(
    conn: &Connection,
    id: &str,
    lease_until: Timestamp,
    clock: Now,
) -> Result<Option<ClaimedJob>> {
    let held = conn
        .prepare_cached(HELD)
        .map_err(map_err)?
        .query_row(named_params! {":id": id}, |r| {
            Ok((
                u32_col(r, "replays")?,
                u32_col(r, "attempts")?,
                opt_ts_col(r, "attempt_started_at")?,
            ))
        })
        .optional()
        .map_err(map_err)?;
    let claimed = claim_one(conn, id, lease_until, clock)?;
    if let (Some(_), Some((cycle, attempt, started_at))) = (&claimed, held) {
        let held = Held {
            id,
            cycle,
            attempt,
            started_at,
        };
        record_attempt(conn, held, clock.at, &LEASE_EXPIRED)?;
    }
    Ok(claimed)
}

/// Takes up to `want` tokens from a shared bucket.
pub(crate) fn take_tokens(
    conn: &Connection,
    bucket: &errand_core::RateBucket,
    limit: errand_core::RateLimit,
    want: u32,
    now: Timestamp,
) -> Result<u32> {
    limit.validate()?;
    let granted: i64 = conn
        .prepare_cached(TAKE_TOKENS)
        .map_err(map_err)?
        .query_row(
            named_params! {
                ":name": bucket.as_str(), ":want": want, ":burst": f64::from(limit.burst),
                ":rate": limit.per_second, ":now": now.as_millis(),
            },
            |r| r.get(0),
        )
        .map_err(map_err)?;
    Ok(u32::try_from(granted).unwrap_or(0))
}

/// Returns `n` tokens a claim took but did not spend.
fn give_back_tokens(
    conn: &Connection,
    bucket: &errand_core::RateBucket,
    limit: errand_core::RateLimit,
    n: u32,
) -> Result<()> {
    conn.prepare_cached(GIVE_BACK_TOKENS)
        .map_err(map_err)?
        .execute(named_params! {
            ":name": bucket.as_str(), ":n": n, ":burst": f64::from(limit.burst),
        })
        .map_err(map_err)?;
    Ok(())
}

/// Acknowledges `leases`, then claims for `req`, in the caller's one write
/// operation. The claim has a savepoint of its own: a failed claim undoes
/// only itself, and the answer carries its error beside the
/// acknowledgments.
pub(crate) fn complete_and_claim(
    conn: &Connection,
    leases: &[Lease],
    req: &ClaimRequest,
    now: Now,
) -> Result<(Vec<bool>, Result<Vec<ClaimedJob>>)> {
    let acked = complete_many(conn, leases, now)?;
    conn.execute_batch("SAVEPOINT errand_claim")
        .map_err(map_err)?;
    let claimed = claim(conn, req, now);
    let end = if claimed.is_ok() {
        "RELEASE errand_claim"
    } else {
        "ROLLBACK TO errand_claim; RELEASE errand_claim"
    };
    conn.execute_batch(end).map_err(map_err)?;
    Ok((acked, claimed))
}
