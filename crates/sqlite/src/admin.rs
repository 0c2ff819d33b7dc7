//! The operator's operations: replay, cancel, copy, purge and reschedule
//! (pausing and capping queues are in queues.rs, the audit log in audit.rs,
//! the statistics and the workers' reports in stats.rs).
//! Each action checks that every job named is in a state it accepts, then
//! changes them all with one set-based statement (SQLite has no
//! data-modifying CTE, so the audit entries are a second). Each write runs in the writer's
//! transaction, like every other operation.

use errand_core::{
    AuditStamp, CopyRequest, Error, Job, JobId, JobState, NewJob, Reschedule, Result, Schedule,
    Timestamp,
};
use rusqlite::{Connection, named_params};

use crate::audit::audit_all;
use crate::conn::map_err;
use crate::insert::insert_many;
use crate::release::{Release, release_dependents};
use crate::rows::job_from_row;

pub(crate) const REPLAY: &str = include_str!("../queries/replay.sql");
pub(crate) const CANCEL: &str = include_str!("../queries/cancel.sql");
const CANCEL_ATTEMPTS: &str = include_str!("../queries/cancel_attempts.sql");
pub(crate) const PURGE: &str = include_str!("../queries/purge.sql");
const PURGE_STRANDS: &str = include_str!("../queries/purge_strands.sql");
const REPLAY_STRANDS: &str = include_str!("../queries/replay_strands.sql");
pub(crate) const RESCHEDULE: &str = include_str!("../queries/reschedule.sql");
const COUNT_IN_STATES: &str = include_str!("../queries/count_in_states.sql");

/// The ids as the JSON array the set-based statements read.
fn id_array<'a>(ids: impl IntoIterator<Item = &'a JobId>) -> Result<String> {
    serde_json::to_string(&ids.into_iter().map(JobId::as_str).collect::<Vec<_>>())
        .map_err(|e| Error::storage(format!("the job ids could not be encoded: {e}")))
}

/// The states as the JSON array the set-based statements read: an
/// action's accepted states, as core lists them (`ReplayRequest::ACCEPTS`
/// and its siblings).
fn state_array(states: &[JobState]) -> Result<String> {
    serde_json::to_string(&states.iter().map(|s| s.as_str()).collect::<Vec<_>>())
        .map_err(|e| Error::storage(format!("the job states could not be encoded: {e}")))
}

/// Whether every job in `ids` (a JSON array of `n` distinct ids) is in one
/// of `states` (a JSON array). The writer's transaction keeps the answer
/// true until the action that asked commits.
fn all_in(conn: &Connection, ids: &str, n: usize, states: &str) -> Result<bool> {
    let found: i64 = conn
        .prepare_cached(COUNT_IN_STATES)
        .map_err(map_err)?
        .query_row(named_params! {":ids": ids, ":states": states}, |r| r.get(0))
        .map_err(map_err)?;
    Ok(usize::try_from(found).is_ok_and(|found| found == n))
}

/// Whether `action` on the jobs in `ids` (a JSON array) would leave a job
/// waiting for good: a purge of a job a blocked job waits for, a replay
/// of a job whose dependency can no longer release it. The action is then
/// refused whole, like one naming a job in a state it does not accept.
fn strands(conn: &Connection, action: &str, ids: &str) -> Result<bool> {
    let sql = match action {
        "purge" => PURGE_STRANDS,
        "replay" => REPLAY_STRANDS,
        _ => return Ok(false),
    };
    let n: i64 = conn
        .prepare_cached(sql)
        .map_err(map_err)?
        .query_row(named_params! {":ids": ids}, |r| r.get(0))
        .map_err(map_err)?;
    Ok(n > 0)
}

/// Runs a set-based statement that answers with changed jobs.
fn changed_jobs(
    conn: &Connection,
    sql: &str,
    params: &[(&str, &dyn rusqlite::ToSql)],
) -> Result<Vec<Job>> {
    conn.prepare_cached(sql)
        .map_err(map_err)?
        .query_map(params, job_from_row)
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)
}

/// The shape every operator action on jobs takes here: when every job
/// named is in one of `states`, `change` (set-based, given the ids and
/// `states` as JSON arrays) and an `action` audit entry each — for a purge
/// written before the change, while the jobs can still be read; otherwise
/// nothing and an empty answer.
fn all_or_none<T: Default>(
    conn: &Connection,
    ids: &[JobId],
    states: &[JobState],
    action: &str,
    by: &AuditStamp,
    now: Timestamp,
    change: impl FnOnce(&str, &str) -> Result<T>,
) -> Result<T> {
    let list = id_array(ids)?;
    let states = state_array(states)?;
    if !all_in(conn, &list, ids.len(), &states)? || strands(conn, action, &list)? {
        return Ok(T::default());
    }
    let deletes = action == "purge";
    if deletes {
        audit_all(conn, &list, action, by, None, now)?;
    }
    let out = change(&list, &states)?;
    if !deletes {
        audit_all(conn, &list, action, by, None, now)?;
    }
    Ok(out)
}

/// Replays every job named, if each is in a state
/// `ReplayRequest::ACCEPTS` names; else none.
pub(crate) fn replay(
    conn: &Connection,
    ids: &[JobId],
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Vec<Job>> {
    let states = errand_core::ReplayRequest::ACCEPTS;
    all_or_none(conn, ids, states, "replay", by, now, |list, states| {
        changed_jobs(
            conn,
            REPLAY,
            named_params! {":ids": list, ":states": states, ":now": now.as_millis()},
        )
    })
}

/// Cancels every job named, if each is in a state
/// `CancelRequest::ACCEPTS` names; else none. The running ones' attempts
/// end in the history first; the dependents of the cancelled jobs are
/// released (or cancelled in turn).
pub(crate) fn cancel(
    conn: &Connection,
    ids: &[JobId],
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Vec<Job>> {
    let states = errand_core::CancelRequest::ACCEPTS;
    all_or_none(conn, ids, states, "cancel", by, now, |list, states| {
        conn.prepare_cached(CANCEL_ATTEMPTS)
            .map_err(map_err)?
            .execute(named_params! {":ids": list, ":now": now.as_millis()})
            .map_err(map_err)?;
        let params = named_params! {
            ":ids": list, ":states": states, ":operator": by.operator, ":now": now.as_millis(),
        };
        let cancelled = changed_jobs(conn, CANCEL, params)?;
        let depended_on: Vec<&str> = cancelled
            .iter()
            .filter(|j| j.has_dependents)
            .map(|j| j.id.as_str())
            .collect();
        if !depended_on.is_empty() {
            release_dependents(conn, &depended_on, Release::Failed, now)?;
        }
        Ok(cancelled)
    })
}

/// Moves every job named to a new due time and/or priority, if each is in
/// a state `RescheduleRequest::ACCEPTS` names; else none.
pub(crate) fn reschedule(
    conn: &Connection,
    ids: &[JobId],
    to: &Reschedule,
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Vec<Job>> {
    let available_at = to.run.map(|run| match run {
        Schedule::Now => now,
        Schedule::After(d) => now.plus(d),
        Schedule::At(t) => t,
    });
    all_or_none(
        conn,
        ids,
        errand_core::RescheduleRequest::ACCEPTS,
        "reschedule",
        by,
        now,
        |list, states| {
            let params = named_params! {
                ":ids": list, ":states": states, ":now": now.as_millis(),
                ":available_at": available_at.map(Timestamp::as_millis), ":priority": to.priority,
            };
            changed_jobs(conn, RESCHEDULE, params)
        },
    )
}

/// Deletes every job named, if each is in a state `PurgeRequest::ACCEPTS`
/// names; else none.
pub(crate) fn purge(
    conn: &Connection,
    ids: &[JobId],
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Vec<JobId>> {
    all_or_none(
        conn,
        ids,
        errand_core::PurgeRequest::ACCEPTS,
        "purge",
        by,
        now,
        |list, states| {
            conn.prepare_cached(PURGE)
                .map_err(map_err)?
                .query_map(named_params! {":ids": list, ":states": states}, |r| {
                    r.get::<_, String>(0)
                })
                .map_err(map_err)?
                .map(|id| JobId::new(id.map_err(map_err)?))
                .collect()
        },
    )
}

/// Inserts each copy while every original is still dead or cancelled (else
/// none), with a `copy` audit entry naming both.
pub(crate) fn copy(
    conn: &Connection,
    copies: &[(JobId, NewJob)],
    by: &AuditStamp,
    now: Timestamp,
) -> Result<Vec<Job>> {
    let originals = id_array(copies.iter().map(|(from, _)| from))?;
    let states = state_array(CopyRequest::ACCEPTS)?;
    if !all_in(conn, &originals, copies.len(), &states)? {
        return Ok(Vec::new());
    }
    let new_jobs: Vec<NewJob> = copies.iter().map(|(_, job)| job.clone()).collect();
    let inserted = insert_many(conn, &new_jobs, now)?;
    let new_ids = id_array(inserted.iter().map(|i| &i.job.id))?;
    audit_all(conn, &originals, "copy", by, Some(&new_ids), now)?;
    Ok(inserted.into_iter().map(|i| i.job).collect())
}
