//! Claims: the due jobs a claim may take (reclaimed leases first, then
//! ready jobs in claim order, as their concurrency keys admit them), taking
//! them under a new lease, and the rate tokens a limited claim spends.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};

use errand_core::{
    ClaimRequest, ClaimedJob, Error, Job, Lease, LeaseToken, Name, Result, Timestamp,
};
use rusqlite::{Connection, OptionalExtension, Row, named_params};

use crate::conn::{Now, map_err};
use crate::maintenance::expire_final;
use crate::rows::{col, job_from_row, opt_ts_col, u32_col};
use crate::settle::{Held, LEASE_EXPIRED, complete_many, record_attempt};

const CANDIDATES_EXPIRED: &str = include_str!("../queries/candidates_expired.sql");
const CANDIDATES_READY: &str = include_str!("../queries/candidates_ready.sql");
const CANDIDATES_EXPIRED_IN: &str = include_str!("../queries/candidates_expired_in.sql");
pub(crate) const CANDIDATES_READY_IN: &str = include_str!("../queries/candidates_ready_in.sql");
pub(crate) const CANDIDATES_READY_OF: &str = include_str!("../queries/candidates_ready_of.sql");
const CANDIDATES_CAPPED: &str = include_str!("../queries/candidates_capped.sql");
const CAPPED_QUEUES: &str = include_str!("../queries/capped_queues.sql");
const KEY_RUNNING: &str = include_str!("../queries/key_running.sql");
const KEY_NEXT: &str = include_str!("../queries/key_next.sql");
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

/// One due ready row as the candidate scan reads it.
struct ReadyRow {
    id: String,
    rowid: i64,
    queue: String,
    key: Option<(String, u32, bool)>,
}

/// A ready job the claim may take: its id, its row's rowid (the plain
/// claim finds rows by it, one B-tree search instead of the id index's and
/// then the table's) and whether it has a concurrency key.
struct Candidate {
    id: String,
    rowid: i64,
    keyed: bool,
}

/// Up to `limit` due ready jobs in claim order, passing over keyed jobs
/// their key does not admit now. Each key met is looked up once (its
/// running count and its earliest ready jobs), so a saturated key's backlog
/// costs one index step per row, not a statement.
fn ready_candidates(
    conn: &Connection,
    queues: Scope<'_>,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Candidate>> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    let read = |r: &Row<'_>| -> rusqlite::Result<ReadyRow> {
        let key = match r.get::<_, Option<String>>(2)? {
            Some(name) => Some((name, u32_col(r, "key_limit")?, r.get(4)?)),
            None => None,
        };
        Ok(ReadyRow {
            id: r.get(0)?,
            queue: r.get(1)?,
            key,
            rowid: r.get(5)?,
        })
    };
    let mut stmt = conn
        .prepare_cached(match queues {
            Scope::All => CANDIDATES_READY,
            Scope::One(_) => CANDIDATES_READY_OF,
            Scope::Some(_) => CANDIDATES_READY_IN,
            Scope::Capped(_) => CANDIDATES_CAPPED,
        })
        .map_err(map_err)?;
    let ms = now.as_millis();
    let mut rows = match queues {
        Scope::All => stmt.query(named_params! {":now": ms}),
        Scope::One(q) | Scope::Capped(q) => stmt.query(named_params! {":now": ms, ":queue": q}),
        Scope::Some(q) => stmt.query(named_params! {":now": ms, ":queues": q}),
    }
    .map_err(map_err)?;
    let mut admitted: HashMap<(String, String), HashSet<String>> = HashMap::new();
    while let Some(row) = rows.next().map_err(map_err)? {
        let row = read(row).map_err(map_err)?;
        let keyed = row.key.is_some();
        if let Some((key, key_limit, ordered)) = row.key {
            let ids = match admitted.entry((row.queue, key)) {
                Entry::Occupied(e) => e.into_mut(),
                Entry::Vacant(e) => {
                    let (queue, key) = e.key();
                    let ids = admitted_by_key(conn, queue, key, key_limit, ordered, now)?;
                    e.insert(ids)
                }
            };
            if !ids.remove(&row.id) {
                continue;
            }
        }
        out.push(Candidate {
            id: row.id,
            rowid: row.rowid,
            keyed,
        });
        if out.len() >= limit as usize {
            break;
        }
    }
    Ok(out)
}

/// The ready jobs of one key that may start now: its earliest-enqueued due
/// jobs up to its free slots; for an ordered key its first ready job, and
/// only if that one is due.
fn admitted_by_key(
    conn: &Connection,
    queue: &str,
    key: &str,
    key_limit: u32,
    ordered: bool,
    now: Timestamp,
) -> Result<HashSet<String>> {
    let running: u32 = conn
        .prepare_cached(KEY_RUNNING)
        .map_err(map_err)?
        .query_row(named_params! {":queue": queue, ":key": key}, |r| {
            u32_col(r, "count(*)")
        })
        .map_err(map_err)?;
    let slots = key_limit.saturating_sub(running);
    if slots == 0 {
        return Ok(HashSet::new());
    }
    let ms = now.as_millis();
    let next = conn
        .prepare_cached(KEY_NEXT)
        .map_err(map_err)?
        .query_map(
            named_params! {
                ":queue": queue, ":key": key, ":ordered": ordered,
                ":now": ms, ":slots": slots,
            },
            |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)),
        )
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)?;
    Ok(next
        .into_iter()
        .filter(|(_, due)| *due <= ms)
        .map(|(id, _)| id)
        .collect())
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

/// The queues a claim reads ready jobs from.
#[derive(Clone, Copy)]
enum Scope<'a> {
    /// Every queue.
    All,
    /// One queue, read in claim order from its range of the due index.
    One(&'a str),
    /// Several queues: a JSON array of their names.
    Some(&'a str),
    /// One capped queue, read like `One` (the others leave capped queues
    /// out).
    Capped(&'a str),
}

/// Due ready jobs of the capped queues the claim reads (none named: every
/// queue), each queue's up to its free slots — its cap less its running
/// jobs — in queue order, `limit` at most. The writer's one transaction
/// makes the count and the claim one step.
fn capped_candidates(
    conn: &Connection,
    req: &ClaimRequest,
    now: Timestamp,
    limit: u32,
) -> Result<Vec<Candidate>> {
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    let caps = conn
        .prepare_cached(CAPPED_QUEUES)
        .map_err(map_err)?
        .query_map([], |r| Ok((r.get::<_, String>(0)?, u32_col(r, "free")?)))
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)?;
    for (queue, free) in caps {
        let named = req.queues.is_empty() || req.queues.iter().any(|q| q.as_str() == queue);
        let room = limit.saturating_sub(u32::try_from(out.len()).unwrap_or(u32::MAX));
        if named && free > 0 && room > 0 {
            out.extend(ready_candidates(
                conn,
                Scope::Capped(&queue),
                now,
                free.min(room),
            )?);
        }
    }
    Ok(out)
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
    // Capped queues first: the others' scans leave them out.
    let mut ready = capped_candidates(conn, req, now, rest)?;
    let rest = rest.saturating_sub(u32::try_from(ready.len()).unwrap_or(u32::MAX));
    ready.extend(ready_candidates(conn, scope, now, rest)?);
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
