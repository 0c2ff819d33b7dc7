//! Settlements: a worker's fenced acknowledgment, failure, snooze,
//! release, cancel and heartbeat of the job it holds, and the attempt each
//! writes to the history.
//!
//! Every transition of a job is one conditional `UPDATE … RETURNING`; the
//! history and audit rows that follow it are written in the same
//! transaction only when the transition took place.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use errand_core::{
    Error, ErrorClass, Failure, Job, JobState, Lease, Payload, Result, RetryAt, Timestamp,
};
use rusqlite::{Connection, OptionalExtension, named_params};

use crate::conn::{Now, map_err};
use crate::release::{Release, release_dependents};
use crate::rows::job_from_row;

pub(crate) const COMPLETE_MANY: &str = include_str!("../queries/complete_many.sql");
const COMPLETE: &str = include_str!("../queries/complete.sql");
const FAIL: &str = include_str!("../queries/fail.sql");
const SNOOZE: &str = include_str!("../queries/snooze.sql");
const CANCEL_RUNNING: &str = include_str!("../queries/cancel_running.sql");
const HEARTBEAT: &str = include_str!("../queries/heartbeat.sql");
const ATTEMPT_RECORD: &str = include_str!("../queries/attempt_record.sql");

/// The attempt a job row holds: its number, cycle and start.
#[derive(Clone, Copy)]
pub(crate) struct Held<'a> {
    pub(crate) id: &'a str,
    pub(crate) cycle: u32,
    pub(crate) attempt: u32,
    pub(crate) started_at: Option<Timestamp>,
}

impl<'a> Held<'a> {
    /// The attempt `job` holds (read after a settlement that kept its
    /// attempt count).
    pub(crate) fn of(job: &'a Job) -> Self {
        Held {
            id: job.id.as_str(),
            cycle: job.replays,
            attempt: job.attempts,
            started_at: job.attempt_started_at,
        }
    }
}

/// How an attempt ended.
pub(crate) struct Ended<'a> {
    pub(crate) outcome: &'a str,
    pub(crate) error: Option<&'a str>,
    pub(crate) class: Option<ErrorClass>,
}

pub(crate) const LEASE_EXPIRED: Ended<'static> = Ended {
    outcome: "lease_expired",
    error: Some("lease expired before the attempt was settled"),
    class: Some(ErrorClass::LeaseExpired),
};

/// Writes the attempt a job row held to the history, finished at `now`.
pub(crate) fn record_attempt(
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
pub(crate) fn fenced(
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
    let job = fenced_complete(conn, lease, output, now)?;
    released(conn, job, now.at)
}

/// The fenced acknowledgment alone: the caller releases the dependents.
pub(crate) fn fenced_complete(
    conn: &Connection,
    lease: &Lease,
    output: Option<&Payload>,
    now: Now,
) -> Result<Job> {
    // The succeeding attempt stays on the job row (history.sql reads it).
    let output = output.map(Payload::as_str);
    fenced(conn, COMPLETE, lease, now, &[(":output", &output)])
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

/// Fenced failures of many jobs, in order: for each, the job as its
/// failure left it, or `None` when its lease was lost.
pub(crate) fn fail_many(
    conn: &Connection,
    items: &[(Lease, Failure)],
    now: Now,
) -> Result<Vec<Option<Job>>> {
    items
        .iter()
        .map(|(lease, failure)| match fail(conn, lease, failure, now) {
            Ok(job) => Ok(Some(job)),
            Err(Error::LeaseLost { .. }) => Ok(None),
            Err(e) => Err(e),
        })
        .collect()
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
