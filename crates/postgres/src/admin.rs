//! The operator's operations in PostgreSQL's dialect: replay, cancel,
//! purge and reschedule (each one statement that locks the jobs named,
//! changes them all only if all qualify, and writes their audit entries),
//! copy, workers' reports and the statistics (pausing and capping queues
//! are in queues.rs, the audit log in audit.rs).

use errand_core::{
    AuditStamp, CancelRequest, CopyRequest, Error, Job, JobId, JobState, NewJob, PurgeRequest,
    QueueSample, ReplayRequest, Reschedule, RescheduleRequest, Result, Schedule, Stats, StatsRead,
    StatsRequest, WindowRow, WorkerMetrics, WorkerReport, WorkerSeen, assemble_stats,
};
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::conn::{Conn, Param, query, query_opt, read_committed, read_snapshot};
use crate::error::map_err;
use crate::insert::{insert_linked, insert_many};
use crate::queries::Queries;
use crate::rows::{from_odt, job_from_row, millis, to_odt};
use crate::settle::release_dependents;
use crate::{counts, queues};

fn count(row: &Row, col: &str) -> Result<u64> {
    let n: i64 = row.try_get(col).map_err(map_err)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// The ids as the text array the set-based statements read.
fn id_array<'a>(ids: impl IntoIterator<Item = &'a JobId>) -> Vec<&'a str> {
    ids.into_iter().map(JobId::as_str).collect()
}

/// The names of the states an operator action accepts (its request's
/// `ACCEPTS`), as the text array its statement reads.
fn state_names(states: &[JobState]) -> Vec<&'static str> {
    states.iter().copied().map(JobState::as_str).collect()
}

/// Runs an operator statement that changes every job named or none
/// (`replay.sql`, `cancel.sql`: each takes now, the ids, the operator, the
/// reason and the states the action accepts) and answers with the jobs it
/// changed.
pub(crate) async fn jobs_action<C: Conn>(
    client: &C,
    sql: &str,
    now: Option<OffsetDateTime>,
    ids: &[JobId],
    accepts: &[JobState],
    by: &AuditStamp,
) -> Result<Vec<Job>> {
    let ids = id_array(ids);
    let accepts = state_names(accepts);
    query(
        client,
        sql,
        &[&now, &ids, &by.operator, &by.reason, &accepts],
    )
    .await?
    .iter()
    .map(job_from_row)
    .collect()
}

/// Cancels every job named, if each is in a state a cancel accepts
/// ([`CancelRequest::ACCEPTS`]); else none. The dependents of the jobs cancelled are released (or cancelled
/// in turn) by the same transaction.
pub(crate) async fn cancel(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    ids: &[JobId],
    by: &AuditStamp,
) -> Result<Vec<Job>> {
    let tx = client.transaction().await.map_err(map_err)?;
    let cancelled = jobs_action(&tx, &q.cancel, now, ids, CancelRequest::ACCEPTS, by).await?;
    let ended: Vec<&str> = cancelled
        .iter()
        .filter(|j| j.has_dependents)
        .map(|j| j.id.as_str())
        .collect();
    release_dependents(&tx, q, now, &ended).await?;
    tx.commit().await.map_err(map_err)?;
    Ok(cancelled)
}

/// Moves every job named to a new due time and/or priority, if each is in
/// a state a reschedule accepts ([`RescheduleRequest::ACCEPTS`]); else none.
pub(crate) async fn reschedule<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    ids: &[JobId],
    to: &Reschedule,
    by: &AuditStamp,
) -> Result<Vec<Job>> {
    let ids = id_array(ids);
    let (at, delay_ms) = match to.run {
        None => (None, None),
        Some(Schedule::Now) => (None, Some(0)),
        Some(Schedule::After(d)) => (None, Some(millis(d))),
        Some(Schedule::At(t)) => (Some(to_odt(t)), None),
    };
    let accepts = state_names(RescheduleRequest::ACCEPTS);
    let params: [Param<'_>; 8] = [
        &now,
        &ids,
        &by.operator,
        &by.reason,
        &at,
        &delay_ms,
        &to.priority,
        &accepts,
    ];
    query(client, &q.reschedule, &params)
        .await?
        .iter()
        .map(job_from_row)
        .collect()
}

/// Replays every job named, if each is dead or cancelled and none would
/// wait for a dependency that can no longer release it; else none. Its
/// unmet dependencies are locked first, in the same transaction.
pub(crate) async fn replay(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    ids: &[JobId],
    by: &AuditStamp,
) -> Result<Vec<Job>> {
    let tx = read_committed(client).await?;
    query(&tx, &q.lock_unmet_dependencies, &[&id_array(ids)]).await?;
    let replayed = jobs_action(&tx, &q.replay, now, ids, ReplayRequest::ACCEPTS, by).await?;
    tx.commit().await.map_err(map_err)?;
    Ok(replayed)
}

/// Deletes every job named, if each is dead and no blocked job waits for
/// any of them; else none. The rows are locked first, in the same
/// transaction.
pub(crate) async fn purge(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    ids: &[JobId],
    by: &AuditStamp,
) -> Result<Vec<JobId>> {
    let ids = id_array(ids);
    let tx = read_committed(client).await?;
    query(&tx, &q.lock_jobs, &[&ids]).await?;
    let accepts = state_names(PurgeRequest::ACCEPTS);
    let purged = query(
        &tx,
        &q.purge,
        &[&now, &ids, &by.operator, &by.reason, &accepts],
    )
    .await?
    .iter()
    .map(|r| JobId::new(r.try_get::<_, String>("id").map_err(map_err)?))
    .collect::<Result<Vec<_>>>()?;
    tx.commit().await.map_err(map_err)?;
    Ok(purged)
}

/// Inserts each copy while every original is still dead or cancelled (else
/// none), with a `copy` audit entry naming both: the originals locked and
/// checked, the copies inserted, the entries written, in one transaction.
pub(crate) async fn copy(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    copies: &[(JobId, NewJob)],
    by: &AuditStamp,
) -> Result<Vec<Job>> {
    let originals = id_array(copies.iter().map(|(from, _)| from));
    let tx = read_committed(client).await?;
    if copies.iter().any(|(_, job)| !job.depends_on.is_empty()) {
        query(&tx, &q.lock_copied_dependencies, &[&originals]).await?;
    }
    let accepts = state_names(CopyRequest::ACCEPTS);
    let qualify = query(&tx, &q.copy_check, &[&originals, &accepts])
        .await?
        .first()
        .map(|r| count(r, "qualify"))
        .transpose()?
        .unwrap_or(0);
    if usize::try_from(qualify).ok() != Some(copies.len()) {
        return Ok(Vec::new()); // dropping the transaction releases the locks
    }
    let new_jobs: Vec<NewJob> = copies.iter().map(|(_, job)| job.clone()).collect();
    let inserted = if new_jobs.iter().any(|j| !j.depends_on.is_empty()) {
        insert_linked(&tx, q, now, &new_jobs).await?
    } else {
        insert_many(&tx, q, now, &new_jobs).await?
    };
    let new_ids = id_array(inserted.iter().map(|i| &i.job.id));
    query(
        &tx,
        &q.copy_audit,
        &[&now, &originals, &new_ids, &by.operator, &by.reason],
    )
    .await?;
    tx.commit().await.map_err(map_err)?;
    Ok(inserted.into_iter().map(|i| i.job).collect())
}

/// Upserts a worker's report.
pub(crate) async fn report_worker<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    w: &WorkerReport,
) -> Result<()> {
    w.validate()?;
    let queues = encode_queues(w)?;
    let metrics = encode_metrics(&w.metrics)?;
    let started = to_odt(w.started_at);
    write_report(client, q, now, w, &queues, started, &metrics).await
}

fn encode_queues(w: &WorkerReport) -> Result<String> {
    serde_json::to_string(&w.queues)
        .map_err(|e| Error::invalid(format!("a worker's queues could not be encoded: {e}")))
}

fn encode_metrics(m: &WorkerMetrics) -> Result<String> {
    serde_json::to_string(m)
        .map_err(|e| Error::invalid(format!("a worker's counters could not be encoded: {e}")))
}

/// A one-shot run's report: its counts are added to those stored under its
/// id, in one transaction that locks the stored row. The run that finds no
/// row inserts one; a run racing it waits on the row and adds to it.
pub(crate) async fn report_one_shot(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    w: &WorkerReport,
) -> Result<()> {
    w.validate()?;
    let queues = encode_queues(w)?;
    let started = to_odt(w.started_at);
    let tx = client.transaction().await.map_err(map_err)?;
    let first = format!(
        "INSERT INTO {}.errand_workers (id, host, pid, queues, started_at, last_cycle_at, metrics)
         VALUES ($2, $3, $4, $5::text::jsonb, $6, coalesce($1::timestamptz, now()), $7::text::jsonb)
         ON CONFLICT (id) DO NOTHING",
        q.schema
    );
    let inserted = tx
        .execute(
            &first,
            &[
                &now,
                &w.id,
                &w.host,
                &i64::from(w.pid),
                &queues,
                &started,
                &encode_metrics(&w.metrics)?,
            ],
        )
        .await
        .map_err(map_err)?;
    if inserted == 0 {
        let stored = format!(
            "SELECT metrics::text AS metrics FROM {}.errand_workers WHERE id = $1::text FOR UPDATE",
            q.schema
        );
        let row = tx.query_one(&stored, &[&w.id]).await.map_err(map_err)?;
        let stored: String = row.try_get("metrics").map_err(map_err)?;
        let mut totals = serde_json::from_str::<WorkerMetrics>(&stored).map_err(|e| {
            Error::storage(format!("worker {}'s counters are not readable: {e}", w.id))
        })?;
        totals.add_all(&w.metrics);
        write_report(&tx, q, now, w, &queues, started, &encode_metrics(&totals)?).await?;
    }
    tx.commit().await.map_err(map_err)
}

async fn write_report<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    w: &WorkerReport,
    queues: &str,
    started: OffsetDateTime,
    metrics: &str,
) -> Result<()> {
    query(
        client,
        &q.report_worker,
        &[
            &now,
            &w.id,
            &w.host,
            &i64::from(w.pid),
            &queues,
            &started,
            &metrics,
        ],
    )
    .await
    .map(drop)
}

async fn workers<C: Conn>(client: &C, q: &Queries) -> Result<Vec<WorkerSeen>> {
    let sql = format!(
        "SELECT id, host, pid, queues::text AS queues, started_at, last_cycle_at,
                metrics::text AS metrics
         FROM {}.errand_workers ORDER BY last_cycle_at DESC LIMIT 1000",
        q.schema
    );
    query(client, &sql, &[])
        .await?
        .iter()
        .map(|r| {
            let id: String = r.try_get("id").map_err(map_err)?;
            let queues: String = r.try_get("queues").map_err(map_err)?;
            let metrics: String = r.try_get("metrics").map_err(map_err)?;
            let pid: i64 = r.try_get("pid").map_err(map_err)?;
            Ok(WorkerSeen {
                host: r.try_get("host").map_err(map_err)?,
                pid: u32::try_from(pid).unwrap_or(0),
                queues: serde_json::from_str(&queues).map_err(|e| {
                    Error::storage(format!("worker {id}'s queues are not readable: {e}"))
                })?,
                metrics: serde_json::from_str(&metrics).map_err(|e| {
                    Error::storage(format!("worker {id}'s counters are not readable: {e}"))
                })?,
                started_at: from_odt(r.try_get("started_at").map_err(map_err)?),
                last_cycle_at: from_odt(r.try_get("last_cycle_at").map_err(map_err)?),
                id,
            })
        })
        .collect()
}

/// The statistics, read in one snapshot.
pub(crate) async fn stats(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    req: &StatsRequest,
) -> Result<Stats> {
    let tx = read_snapshot(client).await?;
    // The snapshot's time: every comparison below uses it.
    let now_row = query_opt(
        &tx,
        "SELECT coalesce($1::timestamptz, now()) AS now",
        &[&now],
    )
    .await?
    .ok_or_else(|| Error::storage("the server did not say what time it is"))?;
    let at: OffsetDateTime = now_row.try_get("now").map_err(map_err)?;
    // JIT compilation of this statement (its estimated cost is high, the
    // real one small) took 300 ms of a 320 ms read.
    tx.batch_execute("SET LOCAL jit = off")
        .await
        .map_err(map_err)?;
    let cap = i64::from(req.cap);
    let mut samples = Vec::new();
    for r in query(&tx, &q.stats_sample, &[&Some(at), &(cap + 1)]).await? {
        let oldest: Option<OffsetDateTime> = r.try_get("oldest").map_err(map_err)?;
        samples.push(QueueSample {
            queue: r.try_get("queue").map_err(map_err)?,
            due: count(&r, "due")?,
            scheduled: count(&r, "scheduled")?,
            oldest_due_at: oldest.map(from_odt),
            ready_read: count(&r, "ready_read")?,
            running: count(&r, "running")?,
            live: count(&r, "live")?,
            dead: count(&r, "dead")?,
            blocked: count(&r, "blocked")?,
            waiting: count(&r, "waiting")?,
        });
    }
    let window = query(
        &tx,
        &q.stats_window,
        &[&Some(at), &millis(req.window), &(cap + 1)],
    )
    .await?
    .iter()
    .map(|r| {
        Ok(WindowRow {
            queue: r.try_get("queue").map_err(map_err)?,
            dead: r.try_get("dead").map_err(map_err)?,
            class: r.try_get("class").map_err(map_err)?,
            n: count(r, "n")?,
        })
    })
    .collect::<Result<Vec<_>>>()?;
    let read = StatsRead {
        samples,
        window,
        paused: queues::paused(&tx, q).await?,
        limits: queues::limits(&tx, q).await?,
        counted: counts::stored(&tx, q).await?,
        workers: workers(&tx, q).await?,
    };
    tx.commit().await.map_err(map_err)?;
    assemble_stats(req, from_odt(at), read)
}
