//! The queue operations, each run inside a write transaction on the writer
//! thread (or inside a caller's own transaction, for enqueue).
//!
//! Every transition of a job is one conditional `UPDATE … RETURNING`; the
//! history and audit rows that follow it are written in the same
//! transaction only when the transition took place.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::LazyLock;
use std::time::Duration;

use errand_core::{
    AttemptRecord, AuditRecord, ClaimRequest, ClaimedJob, Dependency, Error, ErrorClass, Failure,
    Job, JobDetail, JobFilter, JobId, JobState, Lease, LeaseToken, Name, Payload, Result, RetryAt,
    Timestamp, WorkflowId,
};
use rusqlite::{Connection, OptionalExtension, Row, named_params};

use crate::conn::{Now, json_list, map_err};
use crate::release::{Release, release_dependents};
use crate::rows::{class_col, col, get, job_from_row, opt_ts_col, ts_col, u32_col};

const EXPIRE_FINAL: &str = include_str!("../queries/expire_final.sql");
const CANDIDATES_EXPIRED: &str = include_str!("../queries/candidates_expired.sql");
const CANDIDATES_READY: &str = include_str!("../queries/candidates_ready.sql");
const CANDIDATES_EXPIRED_IN: &str = include_str!("../queries/candidates_expired_in.sql");
const CANDIDATES_READY_IN: &str = include_str!("../queries/candidates_ready_in.sql");
const CANDIDATES_READY_OF: &str = include_str!("../queries/candidates_ready_of.sql");
const KEY_RUNNING: &str = include_str!("../queries/key_running.sql");
const KEY_NEXT: &str = include_str!("../queries/key_next.sql");
const CLAIM: &str = include_str!("../queries/claim.sql");
const CLAIM_MANY: &str = include_str!("../queries/claim_many.sql");
const COMPLETE_MANY: &str = include_str!("../queries/complete_many.sql");
const COMPLETE: &str = include_str!("../queries/complete.sql");
const DEPENDENCY_OUTPUTS: &str = include_str!("../queries/dependency_outputs.sql");
const DEPENDENCY_OUTPUTS_AFTER: &str = include_str!("../queries/dependency_outputs_after.sql");
const FAIL: &str = include_str!("../queries/fail.sql");
const SNOOZE: &str = include_str!("../queries/snooze.sql");
const CANCEL_RUNNING: &str = include_str!("../queries/cancel_running.sql");
const HEARTBEAT: &str = include_str!("../queries/heartbeat.sql");
const ATTEMPT_RECORD: &str = include_str!("../queries/attempt_record.sql");
const HELD: &str = "SELECT replays, attempts, attempt_started_at FROM errand_jobs WHERE id = :id";
const AUDIT: &str = include_str!("../queries/audit.sql");
const HISTORY: &str = include_str!("../queries/history.sql");
const AUDIT_OF: &str = include_str!("../queries/audit_of.sql");
const LIST: &str = include_str!("../queries/list.sql");
const LIST_MEMBER: &str = include_str!("../queries/list_member.sql");
const LIST_WORKFLOW: &str = include_str!("../queries/list_workflow.sql");
const LIST_TAG: &str = include_str!("../queries/list_tag.sql");
const WORKFLOW_COUNTS: &str = include_str!("../queries/workflow_counts.sql");
const DEPENDENCY_EDGES: &str = include_str!("../queries/dependency_edges.sql");
const PRUNE: &str = include_str!("../queries/prune.sql");
const MARK_PRUNED_EDGES: &str = include_str!("../queries/mark_pruned_edges.sql");
const TAKE_TOKENS: &str = include_str!("../queries/take_tokens.sql");
const GIVE_BACK_TOKENS: &str = include_str!("../queries/give_back_tokens.sql");
const DEPENDENCIES_OF: &str = include_str!("../queries/dependencies_of.sql");
const DEPENDENTS_OF: &str = include_str!("../queries/dependents_of.sql");

/// A job's dependencies, in the order they were named, and the first of
/// its dependents (blocked ones first, then by id).
pub(crate) fn dependencies(
    conn: &Connection,
    job: &Job,
) -> Result<(Vec<Dependency>, Vec<Dependency>)> {
    let read = |sql: &str, limit: i64| -> Result<Vec<Dependency>> {
        conn.prepare_cached(sql)
            .map_err(map_err)?
            .query_map(
                named_params! {":id": job.id.as_str(), ":limit": limit},
                |r| {
                    let id: String = r.get(0)?;
                    let state: Option<String> = r.get(1)?;
                    Ok((id, state, r.get::<_, bool>(2)?))
                },
            )
            .map_err(map_err)?
            .map(|row| {
                let (id, state, met) = row.map_err(map_err)?;
                Ok(Dependency {
                    id: JobId::new(id)?,
                    state: state.map(|s| s.parse()).transpose()?,
                    met,
                })
            })
            .collect()
    };
    let dependencies = if job.on_dependency_failure.is_some() {
        read(DEPENDENCIES_OF, -1)?
    } else {
        Vec::new()
    };
    let dependents = if job.has_dependents {
        read(
            DEPENDENTS_OF,
            i64::try_from(JobDetail::DEPENDENTS_SHOWN).unwrap_or(100),
        )?
    } else {
        Vec::new()
    };
    Ok((dependencies, dependents))
}

/// The attempt a job row holds: its number, cycle and start.
#[derive(Clone, Copy)]
struct Held<'a> {
    id: &'a str,
    cycle: u32,
    attempt: u32,
    started_at: Option<Timestamp>,
}

impl<'a> Held<'a> {
    /// The attempt `job` holds (read after a settlement that kept its
    /// attempt count).
    fn of(job: &'a Job) -> Self {
        Held {
            id: job.id.as_str(),
            cycle: job.replays,
            attempt: job.attempts,
            started_at: job.attempt_started_at,
        }
    }
}

/// How an attempt ended.
struct Ended<'a> {
    outcome: &'a str,
    error: Option<&'a str>,
    class: Option<ErrorClass>,
}

const LEASE_EXPIRED: Ended<'static> = Ended {
    outcome: "lease_expired",
    error: Some("lease expired before the attempt was settled"),
    class: Some(ErrorClass::LeaseExpired),
};

/// Writes the attempt a job row held to the history, finished at `now`.
fn record_attempt(
    conn: &Connection,
    held: Held<'_>,
    now: Timestamp,
    ended: &Ended<'_>,
) -> Result<()> {
    conn.prepare_cached(ATTEMPT_RECORD)
        .map_err(map_err)?
        .execute(named_params! {
            ":id": held.id,
            ":cycle": held.cycle,
            ":attempt": held.attempt,
            // Every way into `running` sets the start; a missing one
            // (impossible) is recorded as the finish.
            ":started_at": held.started_at.unwrap_or(now).as_millis(),
            ":now": now.as_millis(),
            ":outcome": ended.outcome,
            ":error": ended.error,
            ":class": ended.class.map(ErrorClass::as_str),
        })
        .map_err(map_err)?;
    Ok(())
}

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
        })
        .map_err(map_err)?;
    let ms = now.as_millis();
    let mut rows = match queues {
        Scope::All => stmt.query(named_params! {":now": ms}),
        Scope::One(q) => stmt.query(named_params! {":now": ms, ":queue": q}),
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
    let ready = ready_candidates(conn, scope, now, rest)?;
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

/// Fenced acknowledgment of many jobs in one statement; for each lease, in
/// order, whether it was acknowledged.
pub(crate) fn complete_many(conn: &Connection, leases: &[Lease], now: Now) -> Result<Vec<bool>> {
    let mut seen = HashSet::with_capacity(leases.len());
    if !leases.iter().all(|l| seen.insert(l.id.as_str())) {
        // The same job twice: one statement could not tell which token
        // won; settle them one by one, in order.
        return leases
            .iter()
            .map(|l| match complete_at(conn, l, None, now) {
                Ok(_) => Ok(true),
                Err(Error::LeaseLost { .. }) => Ok(false),
                Err(e) => Err(e),
            })
            .collect();
    }
    let pairs: Vec<[&str; 2]> = leases
        .iter()
        .map(|l| [l.id.as_str(), l.token.as_str()])
        .collect();
    let pairs = serde_json::to_string(&pairs)
        .map_err(|e| Error::storage(format!("encoding acknowledgments: {e}")))?;
    let acked: HashMap<String, bool> = conn
        .prepare_cached(COMPLETE_MANY)
        .map_err(map_err)?
        .query_map(
            named_params! {
                ":leases": pairs,
                ":now": now.at.as_millis(),
                ":lease_now": now.leases.as_millis(),
            },
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .map_err(map_err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(map_err)?;
    let depended_on: Vec<&str> = acked
        .iter()
        .filter(|(_, has)| **has)
        .map(|(id, _)| id.as_str())
        .collect();
    if !depended_on.is_empty() {
        release_dependents(conn, &depended_on, Release::Done, now.at)?;
    }
    Ok(leases
        .iter()
        .map(|l| acked.contains_key(l.id.as_str()))
        .collect())
}

/// Runs a fenced `UPDATE … RETURNING *`; no row means the lease is lost.
fn fenced(
    conn: &Connection,
    sql: &str,
    lease: &Lease,
    now: Now,
    extra: &[(&str, &dyn rusqlite::ToSql)],
) -> Result<Job> {
    let now_ms = now.at.as_millis();
    let lease_now_ms = now.leases.as_millis();
    let id = lease.id.as_str();
    let token = lease.token.as_str();
    let mut params: Vec<(&str, &dyn rusqlite::ToSql)> = vec![
        (":id", &id),
        (":token", &token),
        (":now", &now_ms),
        (":lease_now", &lease_now_ms),
    ];
    params.extend_from_slice(extra);
    conn.prepare_cached(sql)
        .map_err(map_err)?
        .query_row(params.as_slice(), job_from_row)
        .optional()
        .map_err(map_err)?
        .ok_or_else(|| Error::LeaseLost {
            id: lease.id.to_string(),
            attempt: lease.attempt,
        })
}

/// Fenced acknowledgment inside a write transaction the caller has open
/// (`SqliteStore::write`): the job is done only if `lease` still holds at
/// `now`.
pub fn complete(conn: &Connection, lease: &Lease, now: Timestamp) -> Result<Job> {
    complete_on(
        conn,
        lease,
        Now {
            at: now,
            leases: now,
        },
    )
}

/// An acknowledgment on an application's connection: inside the caller's
/// transaction, or — on a connection in autocommit — inside one of its
/// own, so the job's completion and its dependents' release commit
/// together rather than as two commits a crash could split.
pub(crate) fn complete_on(conn: &Connection, lease: &Lease, now: Now) -> Result<Job> {
    if !conn.is_autocommit() {
        return complete_at(conn, lease, None, now);
    }
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(map_err)?;
    let job = complete_at(&tx, lease, None, now)?;
    tx.commit().map_err(map_err)?;
    Ok(job)
}

/// Fenced acknowledgment, recording `output` with the job if given.
pub(crate) fn complete_at(
    conn: &Connection,
    lease: &Lease,
    output: Option<&Payload>,
    now: Now,
) -> Result<Job> {
    // The succeeding attempt stays on the job row (history.sql reads it).
    let output = output.map(Payload::as_str);
    let job = fenced(conn, COMPLETE, lease, now, &[(":output", &output)])?;
    released(conn, job, now.at)
}

/// The outputs of the jobs `id` depends on, in the order they were named.
pub(crate) fn dependency_outputs(
    conn: &Connection,
    id: &JobId,
) -> Result<Vec<(JobId, Option<Payload>)>> {
    outputs(conn, DEPENDENCY_OUTPUTS, named_params! {":id": id.as_str()})
}

/// One page of the outputs of the jobs `id` depends on, by dependency id:
/// those after `after`, at most `limit`.
pub(crate) fn dependency_outputs_after(
    conn: &Connection,
    id: &JobId,
    after: Option<&JobId>,
    limit: u32,
) -> Result<Vec<(JobId, Option<Payload>)>> {
    let after = after.map_or("", JobId::as_str);
    outputs(
        conn,
        DEPENDENCY_OUTPUTS_AFTER,
        named_params! {":id": id.as_str(), ":after": after, ":limit": limit},
    )
}

/// The (dependency, output) rows `sql` selects with `params`.
fn outputs(
    conn: &Connection,
    sql: &str,
    params: &[(&str, &dyn rusqlite::ToSql)],
) -> Result<Vec<(JobId, Option<Payload>)>> {
    let mut stmt = conn.prepare_cached(sql).map_err(map_err)?;
    let rows = stmt
        .query_map(params, |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
        })
        .map_err(map_err)?;
    rows.map(|row| {
        let (dep, output) = row.map_err(map_err)?;
        Ok((JobId::new(dep)?, output.map(Payload::from_stored)))
    })
    .collect()
}

/// `job` as a settlement left it, after releasing its dependents if it
/// ended and has any.
fn released(conn: &Connection, job: Job, now: Timestamp) -> Result<Job> {
    if job.has_dependents && job.finished_at.is_some() {
        let how = if job.state == JobState::Done {
            Release::Done
        } else {
            Release::Failed
        };
        release_dependents(conn, &[job.id.as_str()], how, now)?;
    }
    Ok(job)
}

/// Fenced failure.
pub(crate) fn fail(conn: &Connection, lease: &Lease, failure: &Failure, clock: Now) -> Result<Job> {
    let now = clock.at;
    let retry_at: Option<i64> = failure.retry.map(|r| match r {
        RetryAt::After(d) => now.plus(d).as_millis(),
        RetryAt::At(t) => t.as_millis(),
    });
    let class = failure.class.as_str();
    let job = fenced(
        conn,
        FAIL,
        lease,
        clock,
        &[
            (":retry_at", &retry_at),
            (":error", &failure.error),
            (":class", &class),
        ],
    )?;
    let outcome = if job.state == JobState::Dead {
        "dead"
    } else {
        "retry"
    };
    let ended = Ended {
        outcome,
        error: Some(&failure.error),
        class: Some(failure.class),
    };
    record_attempt(conn, Held::of(&job), now, &ended)?;
    released(conn, job, now)
}

/// Fenced snooze (`release` is a snooze due now).
pub(crate) fn snooze(
    conn: &Connection,
    lease: &Lease,
    delay: Duration,
    now: Now,
    outcome: &str,
) -> Result<Job> {
    let at = now.at.plus(delay).as_millis();
    let job = fenced(conn, SNOOZE, lease, now, &[(":available_at", &at)])?;
    // The attempt was given back: the row's count is one lower than the
    // attempt that ran.
    let held = Held {
        attempt: job.attempts + 1,
        ..Held::of(&job)
    };
    let ended = Ended {
        outcome,
        error: None,
        class: None,
    };
    record_attempt(conn, held, now.at, &ended)?;
    Ok(job)
}

/// Fenced cancel by the handler.
pub(crate) fn cancel_running(
    conn: &Connection,
    lease: &Lease,
    reason: &str,
    now: Now,
) -> Result<Job> {
    let job = fenced(conn, CANCEL_RUNNING, lease, now, &[(":reason", &reason)])?;
    let ended = Ended {
        outcome: "cancelled",
        error: Some(reason),
        class: Some(ErrorClass::Cancelled),
    };
    record_attempt(conn, Held::of(&job), now.at, &ended)?;
    released(conn, job, now.at)
}

/// Fenced lease extension.
pub(crate) fn heartbeat(
    conn: &Connection,
    lease: &Lease,
    extend: Duration,
    progress: Option<&str>,
    clock: Now,
) -> Result<Timestamp> {
    let now = clock.at;
    let until = now.plus(extend).as_millis();
    conn.prepare_cached(HEARTBEAT)
        .map_err(map_err)?
        .query_row(
            named_params! {
                ":id": lease.id.as_str(),
                ":token": lease.token.as_str(),
                ":now": now.as_millis(),
                ":lease_now": clock.leases.as_millis(),
                ":lease_until": until,
                ":progress": progress,
            },
            |r| r.get::<_, i64>(0),
        )
        .optional()
        .map_err(map_err)?
        .map(Timestamp::from_millis)
        .ok_or_else(|| Error::LeaseLost {
            id: lease.id.to_string(),
            attempt: lease.attempt,
        })
}

pub(crate) struct AuditRow<'a> {
    pub(crate) job: Option<&'a JobId>,
    pub(crate) queue: &'a Name,
    pub(crate) action: &'a str,
    pub(crate) operator: &'a str,
    pub(crate) reason: Option<&'a str>,
    /// For a `copy`: the new job.
    pub(crate) copy: Option<&'a JobId>,
    /// For a schedule's action: the schedule.
    pub(crate) schedule: Option<&'a Name>,
}

pub(crate) fn audit(conn: &Connection, row: &AuditRow<'_>, now: Timestamp) -> Result<()> {
    conn.prepare_cached(AUDIT)
        .map_err(map_err)?
        .execute(named_params! {
            ":id": row.job.map(JobId::as_str), ":queue": row.queue.as_str(),
            ":action": row.action, ":operator": row.operator,
            ":reason": row.reason, ":now": now.as_millis(),
            ":copy": row.copy.map(JobId::as_str),
            ":schedule": row.schedule.map(Name::as_str),
        })
        .map_err(map_err)?;
    Ok(())
}

/// A job's attempt history and audit entries.
pub(crate) fn history(
    conn: &Connection,
    id: &JobId,
) -> Result<(Vec<AttemptRecord>, Vec<AuditRecord>)> {
    let attempts = conn
        .prepare_cached(HISTORY)
        .map_err(map_err)?
        .query_map(named_params! {":id": id.as_str()}, |r| {
            Ok(AttemptRecord {
                cycle: u32_col(r, "cycle")?,
                attempt: u32_col(r, "attempt")?,
                started_at: ts_col(r, "started_at")?,
                finished_at: opt_ts_col(r, "finished_at")?,
                outcome: r.get("outcome")?,
                error: r.get("error")?,
                error_class: class_col(r, "error_class")?,
            })
        })
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)?;
    let audit = conn
        .prepare_cached(AUDIT_OF)
        .map_err(map_err)?
        .query_map(named_params! {":id": id.as_str()}, |r| {
            let record = AuditRecord {
                at: ts_col(r, "at")?,
                action: r.get("action")?,
                operator: r.get("operator")?,
                reason: r.get("reason")?,
                copied_to: None,
                copied_from: None,
            };
            let job: Option<String> = r.get("job_id")?;
            let copy: Option<String> = r.get("copy_id")?;
            Ok((record, job, copy))
        })
        .map_err(map_err)?
        .map(|row| {
            let (record, job, copy) = row.map_err(map_err)?;
            let job = job.map(JobId::new).transpose()?;
            let copy = copy.map(JobId::new).transpose()?;
            Ok(record.with_copy(id, job, copy))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((attempts, audit))
}

/// The listing without a tag or workflow filter: list.sql with its members
/// (list_member.sql), two per state read through the listing index (the
/// rest of the cursor's creation instant, then the later instants) and one
/// for running jobs.
static LIST_STATEMENT: LazyLock<String> = LazyLock::new(|| {
    const SAME_INSTANT: &str =
        "created_at = (SELECT created_at FROM cursor) AND rowid > (SELECT seq FROM cursor)";
    const LATER: &str = "created_at > (SELECT created_at FROM cursor)";
    const AFTER_CURSOR: &str = "(created_at > (SELECT created_at FROM cursor) \
        OR (created_at = (SELECT created_at FROM cursor) AND rowid > (SELECT seq FROM cursor)))";
    let template: Vec<&str> = LIST_MEMBER
        .lines()
        .filter(|line| !line.starts_with("--"))
        .collect();
    let template = template.join("\n");
    let member = |state: JobState, source: &str, partial: &str, range: &str| {
        template
            .replace("$state", state.as_str())
            .replace("$source", source)
            .replace("$partial", partial)
            .replace("$range", range)
    };
    let mut members = Vec::new();
    for state in JobState::ALL {
        if state == JobState::Running {
            // Running jobs are read through the lease index, which holds
            // only them (without it, SQLite reads the rest of an instant
            // by rowid, through the table), all of them: one member.
            let source = "errand_jobs INDEXED BY errand_jobs_leases";
            members.push(member(state, source, "", AFTER_CURSOR));
        } else {
            // Every other state is read through the partial listing index,
            // whose condition the member must state to use it.
            for range in [SAME_INSTANT, LATER] {
                members.push(member(
                    state,
                    "errand_jobs",
                    " AND state <> 'running'",
                    range,
                ));
            }
        }
    }
    LIST.replace("$members", &members.join("\n  UNION ALL\n  "))
});

/// Jobs matching `filter`.
pub(crate) fn list(conn: &Connection, filter: &JobFilter) -> Result<Vec<Job>> {
    let state = filter.state.map(JobState::as_str);
    let queue = filter.queue.as_ref().map(Name::as_str);
    let kind = filter.kind.as_ref().map(Name::as_str);
    let error = filter.error_contains.as_deref();
    let since = filter.updated_since.map(Timestamp::as_millis);
    let before = filter.updated_before.map(Timestamp::as_millis);
    let limit = filter.effective_limit();
    let after = filter.after.as_ref().map(JobId::as_str);
    let workflow = filter.workflow.as_ref().map(WorkflowId::as_str);
    let tag = filter.tag.as_deref();
    let mut params: Vec<(&str, &dyn rusqlite::ToSql)> = vec![
        (":state", &state),
        (":queue", &queue),
        (":kind", &kind),
        (":error", &error),
        (":since", &since),
        (":before", &before),
        (":limit", &limit),
        (":after", &after),
    ];
    // A tag or a workflow is read through its own index; the statement
    // for a tag filters on the workflow too.
    let sql = if tag.is_some() {
        params.push((":tag", &tag));
        params.push((":workflow", &workflow));
        LIST_TAG
    } else if workflow.is_some() {
        params.push((":workflow", &workflow));
        LIST_WORKFLOW
    } else {
        LIST_STATEMENT.as_str()
    };
    let mut stmt = conn.prepare_cached(sql).map_err(map_err)?;
    let rows = stmt
        .query_map(params.as_slice(), job_from_row)
        .map_err(map_err)?;
    // Rows are read one by one; a spent byte budget ends the page there.
    let mut budget = filter.page_budget();
    let mut page = Vec::new();
    for job in rows {
        let job = job.map_err(map_err)?;
        let full = budget.spend(&job);
        page.push(job);
        if full {
            break;
        }
    }
    if page.is_empty()
        && let Some(after) = &filter.after
    {
        match get(conn, after) {
            Err(Error::NotFound(_)) => return Err(gone_cursor(after)),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
    }
    Ok(page)
}

/// How many steps of `workflow` are in each state.
pub(crate) fn workflow_counts(
    conn: &Connection,
    workflow: &WorkflowId,
) -> Result<Vec<(JobState, u64)>> {
    let mut stmt = conn.prepare_cached(WORKFLOW_COUNTS).map_err(map_err)?;
    let rows = stmt
        .query_map(named_params! {":workflow": workflow.as_str()}, |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .map_err(map_err)?;
    let mut counts = Vec::new();
    for row in rows {
        let (state, n) = row.map_err(map_err)?;
        counts.push((state.parse::<JobState>()?, u64::try_from(n).unwrap_or(0)));
    }
    Ok(counts)
}

/// The dependency edges of the jobs in `ids`.
pub(crate) fn dependency_edges(
    conn: &Connection,
    ids: &[JobId],
    first: u32,
) -> Result<Vec<errand_core::StepEdge>> {
    let list = json_list(&ids.iter().map(JobId::as_str).collect::<Vec<_>>())?;
    let mut stmt = conn.prepare_cached(DEPENDENCY_EDGES).map_err(map_err)?;
    let rows = stmt
        .query_map(named_params! {":ids": list, ":first": first}, |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                u32_col(r, 2)?,
            ))
        })
        .map_err(map_err)?;
    let mut edges = Vec::new();
    for row in rows {
        let (job, dep, total) = row.map_err(map_err)?;
        edges.push(errand_core::StepEdge {
            job: JobId::new(job)?,
            depends_on: JobId::new(dep)?,
            of: total,
        });
    }
    Ok(edges)
}

fn gone_cursor(after: &JobId) -> Error {
    Error::NotFound(format!(
        "{after} (the job a page starts after no longer exists, so the page cannot be placed; list again from the start)"
    ))
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

#[cfg(test)]
mod plan_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::insert::insert_many;
    use crate::release::release_statements;
    use crate::rows::JOB_COLUMNS;
    use errand_core::NewJob;

    /// The lines of `sql`'s query plan on `conn` (parameters unbound: the
    /// plan only).
    fn plan_of(conn: &Connection, sql: &str) -> Vec<String> {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let mut rows = stmt.raw_query();
        let mut plan = Vec::new();
        while let Some(r) = rows.next().unwrap() {
            plan.push(r.get(3).unwrap());
        }
        plan
    }

    /// The lines of `plan` that read the job table, under its own name or
    /// as `j`.
    fn job_reads(plan: &[String]) -> Vec<&String> {
        plan.iter()
            .filter(|l| {
                l.contains("errand_jobs") || l.starts_with("SEARCH j ") || l.starts_with("SCAN j")
            })
            .collect()
    }

    /// Every job's kind, in the order the rows are stored.
    fn kinds_by_rowid(conn: &Connection) -> Vec<String> {
        conn.prepare("SELECT kind FROM errand_jobs ORDER BY rowid")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// A claim of one named queue reads that queue's ready jobs in claim
    /// order from the index and sorts nothing, so it stops after the jobs it
    /// takes however large the queue's backlog (a list of queues has to
    /// sort what it reads).
    #[test]
    fn a_claim_of_one_queue_reads_the_index_in_claim_order() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let one = plan_of(&conn, CANDIDATES_READY_OF);
        assert!(
            job_reads(&one)
                .iter()
                .any(|l| l.contains("USING INDEX errand_jobs_due_by_queue (queue=?")),
            "{one:?}"
        );
        assert!(!one.iter().any(|l| l.contains("TEMP B-TREE")), "{one:?}");
        let several = plan_of(&conn, CANDIDATES_READY_IN);
        assert!(
            several.iter().any(|l| l.contains("TEMP B-TREE")),
            "{several:?}"
        );
    }

    /// `insert_many` on an application's connection is all or nothing even
    /// when it takes several statements and no transaction is open: a
    /// failure in the second statement (here a trigger refusing one job)
    /// leaves none of the first statement's jobs behind.
    #[test]
    fn insert_many_on_a_bare_connection_is_all_or_nothing() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON errand_jobs WHEN NEW.id = 'boom'
             BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
        )
        .unwrap();
        let job = |id: &str| {
            NewJob::new("k", Payload::default())
                .unwrap()
                .with_id(JobId::new(id).unwrap())
        };
        let mut jobs: Vec<NewJob> = (0..300).map(|i| job(&format!("j{i}"))).collect();
        jobs[280] = job("boom");
        let now = Timestamp::from_millis(1_795_996_800_000);
        let err = insert_many(&conn, &jobs, now).unwrap_err();
        assert!(err.to_string().contains("injected"), "{err}");
        let count: i64 = conn
            .query_row("SELECT count(*) FROM errand_jobs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 0);
        assert!(conn.is_autocommit(), "no transaction is left open");
        jobs[280] = job("j280");
        assert_eq!(insert_many(&conn, &jobs, now).unwrap().len(), 300);
    }

    /// Chains built one at a time are written depth by depth — the rows
    /// a wave of claims rewrites side by side — across the statements a
    /// large call takes, while the call answers, and the stored rows hold,
    /// exactly what was asked, in the order asked.
    #[test]
    fn jobs_that_depend_on_each_other_are_written_depth_by_depth() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let mut wf = errand_core::Workflow::new();
        let mut asked = Vec::new();
        // 100 chains of 3: 300 jobs, more than one statement's 256.
        for chain in 0..100 {
            let mut before: Option<JobId> = None;
            for n in 0..3 {
                let step = NewJob::new(&format!("s{n}-c{chain:03}"), Payload::default()).unwrap();
                let id = match before.take() {
                    Some(prev) => wf.step_after(step, &[&prev]),
                    None => wf.step(step),
                };
                asked.push(id.clone());
                before = Some(id);
            }
        }
        let now = Timestamp::from_millis(1_795_996_800_000);
        let inserted = insert_many(&conn, &wf.into_jobs(), now).unwrap();
        let answered: Vec<JobId> = inserted.iter().map(|i| i.job.id.clone()).collect();
        assert_eq!(answered, asked, "answered in the order asked");
        assert!(inserted.iter().all(|i| i.created));
        let by_rowid = kinds_by_rowid(&conn);
        let mut depth_by_depth = by_rowid.clone();
        depth_by_depth.sort();
        assert_eq!(
            by_rowid, depth_by_depth,
            "every first step, then every second, …"
        );
        assert_eq!(by_rowid.len(), 300);
        for i in &inserted {
            let kind = i.job.kind.as_str();
            let mut stored = get(&conn, &i.job.id).unwrap();
            assert_eq!(stored.has_dependents, !kind.starts_with("s2"), "{kind}");
            assert_eq!(
                stored.waiting_on,
                u32::from(!kind.starts_with("s0")),
                "{kind}"
            );
            // The answer describes a row as inserted, before later jobs of
            // the call named it as a dependency.
            stored.has_dependents = i.job.has_dependents;
            assert_eq!(stored, i.job);
        }
        let edges: i64 = conn
            .query_row("SELECT count(*) FROM errand_dependencies", [], |r| r.get(0))
            .unwrap();
        assert_eq!(edges, 200, "each later step waits for the one before it");
    }

    /// Jobs created at the same instant are listed in the order they were
    /// stored, across states, and keyset pages of any size walk that order
    /// exactly once, before the jobs of later instants.
    #[test]
    fn jobs_created_together_are_listed_in_the_order_stored() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let at = |ms: i64| Timestamp::from_millis(1_795_996_800_000 + ms);
        let single = |kind: &str, ms| {
            let job = NewJob::new(kind, Payload::default()).unwrap();
            insert_many(&conn, &[job], at(ms)).unwrap();
        };
        single("earlier", 0);
        // Ten chains of three, built chain by chain: stored depth by depth,
        // so their ids (generated chain by chain) are not the stored order.
        let mut wf = errand_core::Workflow::new();
        for chain in 0..10 {
            let mut before: Option<JobId> = None;
            for n in 0..3 {
                let step = NewJob::new(&format!("s{n}-c{chain}"), Payload::default()).unwrap();
                before = Some(match before.take() {
                    Some(prev) => wf.step_after(step, &[&prev]),
                    None => wf.step(step),
                });
            }
        }
        insert_many(&conn, &wf.into_jobs(), at(1)).unwrap();
        single("later", 2);
        let stored = kinds_by_rowid(&conn);
        assert_eq!(stored[0], "earlier");
        assert_eq!(stored[1], "s0-c0");
        assert_eq!(stored[11], "s1-c0", "depth by depth");
        assert_eq!(stored[31], "later");
        let walk = |state: Option<JobState>, limit: u32| {
            let mut seen = Vec::new();
            let mut after: Option<JobId> = None;
            for _ in 0..=stored.len() {
                let filter = JobFilter {
                    state,
                    limit: Some(limit),
                    after: after.clone(),
                    ..JobFilter::default()
                };
                let page = list(&conn, &filter).unwrap();
                assert!(page.len() <= limit as usize);
                let Some(last) = page.last() else {
                    return seen;
                };
                after = Some(last.id.clone());
                seen.extend(page.iter().map(|j| j.kind.as_str().to_owned()));
            }
            panic!("pages of {limit} did not end: the cursor did not advance");
        };
        for limit in [1, 2, 7, 100] {
            assert_eq!(walk(None, limit), stored, "pages of {limit}");
        }
        // One state: the same order, that state's jobs only.
        let blocked: Vec<String> = stored
            .iter()
            .filter(|k| k.starts_with("s1") || k.starts_with("s2"))
            .cloned()
            .collect();
        for limit in [1, 3, 100] {
            assert_eq!(walk(Some(JobState::Blocked), limit), blocked);
        }
    }

    /// The listing's plan: every read of `errand_jobs` is an index search
    /// (or, for running jobs, a read of the lease index, which holds only
    /// them), never a scan of the table nor of the whole of an instant.
    /// Listing used to scan and sort the whole table for every page (~150
    /// ms at 1,000,000 jobs, docs/dashboard.md); this fails if a rewrite of
    /// list.sql, list_member.sql or the listing index brings that back.
    #[test]
    fn the_listing_seeks_the_listing_index() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let plan = plan_of(&conn, LIST_STATEMENT.as_str());
        // Reads of the table, under its own name or as `j` (the page's
        // rows, read by rowid).
        let reads = job_reads(&plan);
        for read in &reads {
            assert!(
                read.starts_with("SEARCH errand_jobs USING INDEX")
                    || read.starts_with("SEARCH errand_jobs USING INTEGER PRIMARY KEY (rowid=?)")
                    || read.starts_with("SEARCH j USING INTEGER PRIMARY KEY (rowid=?)")
                    || read.starts_with("SCAN errand_jobs USING INDEX errand_jobs_leases"),
                "{read}\n{plan:#?}"
            );
        }
        assert!(
            reads
                .iter()
                .any(|l| l.starts_with("SEARCH j USING INTEGER PRIMARY KEY (rowid=?)")),
            "the page's rows are read by rowid: {plan:#?}"
        );
        let count = |needle: &str| reads.iter().filter(|l| l.contains(needle)).count();
        // Two index ranges per state but running: the rest of the cursor's
        // instant, and the later instants.
        let same_instant = "USING INDEX errand_jobs_state (state=? AND created_at=? AND rowid>?)";
        let later = "USING INDEX errand_jobs_state (state=? AND created_at>?)";
        assert_eq!(count(same_instant), 5, "{plan:#?}");
        assert_eq!(count(later), 5, "{plan:#?}");
        // Running jobs are outside the listing index: their one member
        // reads the lease index, which holds only them (at most the slots).
        assert_eq!(
            count("SCAN errand_jobs USING INDEX errand_jobs_leases"),
            1,
            "{plan:#?}"
        );
    }

    /// The positions job rows are read at name the right columns.
    #[test]
    fn column_positions_match_the_column_list() {
        let at = [
            (col::ID, "id"),
            (col::QUEUE, "queue"),
            (col::KIND, "kind"),
            (col::STATE, "state"),
            (col::PAYLOAD, "payload"),
            (col::PRIORITY, "priority"),
            (col::ATTEMPTS, "attempts"),
            (col::MAX_ATTEMPTS, "max_attempts"),
            (col::REPLAYS, "replays"),
            (col::LEASE_EXPIRIES, "lease_expiries"),
            (col::MAX_LEASE_EXPIRIES, "max_lease_expiries"),
            (col::GIVE_UP_AT, "give_up_at"),
            (col::AVAILABLE_AT, "available_at"),
            (col::CREATED_AT, "created_at"),
            (col::UPDATED_AT, "updated_at"),
            (col::LEASE_TOKEN, "lease_token"),
            (col::LEASE_UNTIL, "lease_until"),
            (col::LAST_ERROR, "last_error"),
            (col::LAST_ERROR_CLASS, "last_error_class"),
            (col::FINISHED_AT, "finished_at"),
            (col::KEY_NAME, "key_name"),
            (col::KEY_LIMIT, "key_limit"),
            (col::KEY_ORDERED, "key_ordered"),
            (col::ATTEMPT_STARTED_AT, "attempt_started_at"),
        ];
        for (i, name) in at {
            assert_eq!(JOB_COLUMNS[i], name);
        }
    }

    /// Releasing the dependents of acknowledged jobs reads the unmet edges
    /// out of each job from the edge index alone, without reading the jobs
    /// themselves (their acknowledgment just set them done), and visits
    /// the job table only to change each dependent, found by id. A rewrite
    /// that reads the acknowledged jobs again, or the edge table, doubles
    /// the seeks of the commonest settlement that has dependents; this
    /// fails if one does.
    #[test]
    fn a_release_after_acknowledgments_reads_edges_from_the_index_alone() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let [_, _, _, release_done] = release_statements();
        let plan = plan_of(&conn, release_done);
        let edges: Vec<&String> = plan.iter().filter(|l| l.contains(" e ")).collect();
        assert_eq!(
            edges,
            ["SEARCH e USING COVERING INDEX errand_dependencies_of (depends_on=? AND met=?)"],
            "{plan:#?}"
        );
        let jobs = job_reads(&plan);
        assert_eq!(
            jobs,
            ["SEARCH j USING INDEX sqlite_autoindex_errand_jobs_1 (id=?)"],
            "{plan:#?}"
        );
    }

    /// The batch statements find their jobs by rowid (claims) or id
    /// (acknowledgments). Without statistics SQLite's planner prefers an
    /// index on `state` — a scan of every ready (or running) job per batch
    /// — unless the statement keeps it from doing so; this fails if a
    /// rewrite loses that.
    #[test]
    fn batch_claims_and_acknowledgments_look_jobs_up_by_key() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        for (sql, search) in [
            (
                CLAIM_MANY,
                "SEARCH errand_jobs USING INTEGER PRIMARY KEY (rowid=?)",
            ),
            (
                COMPLETE_MANY,
                "SEARCH errand_jobs USING INDEX sqlite_autoindex_errand_jobs_1 (id=?)",
            ),
        ] {
            let plan = plan_of(&conn, sql);
            let jobs: Vec<&String> = plan.iter().filter(|l| l.contains("errand_jobs")).collect();
            assert_eq!(jobs.len(), 1, "{sql}\n{plan:#?}");
            assert!(jobs[0].starts_with(search), "{sql}\n{plan:#?}");
        }
    }
}
