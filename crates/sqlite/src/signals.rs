//! Signals: a suspend under a live lease, the delivery (or keeping) of a
//! signal, the waits that time out, and the reads of a job's signals. The
//! writer runs one operation at a time, so a signal and a suspend of the
//! same job never interleave.

use errand_core::{
    Await, Error, Job, JobId, JobState, Lease, Name, NewSignal, Payload, ReceivedSignal, Result,
    SignalRecord, Signalled, Timestamp,
};
use rusqlite::{Connection, OptionalExtension, named_params};

use crate::audit::{AuditRow, audit};
use crate::conn::{Now, map_err};
use crate::release::{Release, note_ready, release_dependents};
use crate::rows::{get, job_from_row, opt_ts_col, ts_col, u64_col};
use crate::settle::{Ended, Held, fenced, record_attempt};

const SIGNAL_DELIVER: &str = include_str!("../queries/signal_deliver.sql");
const SIGNAL_INSERT: &str = include_str!("../queries/signal_insert.sql");
const SIGNAL_KEPT: &str = include_str!("../queries/signal_kept.sql");
const SUSPEND: &str = include_str!("../queries/suspend.sql");
const EXPIRE_WAITS: &str = include_str!("../queries/expire_waits.sql");
const WAITS_DUE: &str = include_str!("../queries/waits_due.sql");
const RECEIVED_SIGNAL: &str = include_str!("../queries/received_signal.sql");
const SIGNALS_OF: &str = include_str!("../queries/signals_of.sql");

/// Sends `signal` on `conn`, inside whatever transaction the caller has
/// open (the one a [`crate::SqliteStore::write`] closure is given, with
/// its `now`), so it is delivered or kept exactly when the caller's rows
/// commit; the rules of [`errand_core::JobStore::signal`].
pub fn signal(conn: &Connection, signal: &NewSignal, now: Timestamp) -> Result<Signalled> {
    signal.validate()?;
    let seq: i64 = conn
        .query_row(
            "SELECT coalesce(max(seq), 0) + 1 FROM errand_signals",
            [],
            |r| r.get(0),
        )
        .map_err(map_err)?;
    let woke = conn
        .prepare_cached(SIGNAL_DELIVER)
        .map_err(map_err)?
        .query_row(
            named_params! {
                ":id": signal.job.as_str(), ":name": signal.name.as_str(),
                ":seq": seq, ":now": now.as_millis(),
            },
            job_from_row,
        )
        .optional()
        .map_err(map_err)?;
    let (job, delivered) = match woke {
        Some(job) => {
            note_ready();
            (job, true)
        }
        None => {
            let job = get(conn, &signal.job)?;
            if !signal.buffer || job.state.is_final() {
                return Err(errand_core::signal_refused(&job, &signal.name));
            }
            (job, false)
        }
    };
    conn.prepare_cached(SIGNAL_INSERT)
        .map_err(map_err)?
        .execute(named_params! {
            ":seq": seq, ":id": signal.job.as_str(), ":name": signal.name.as_str(),
            ":payload": signal.payload_text(), ":now": now.as_millis(),
            ":delivered_at": delivered.then(|| now.as_millis()),
        })
        .map_err(map_err)?;
    if let Some(stamp) = &signal.by {
        let row = AuditRow {
            job: Some(&job.id),
            queue: &job.queue,
            action: "signal",
            operator: &stamp.operator,
            reason: stamp.reason.as_deref(),
            copy: None,
            schedule: None,
        };
        audit(conn, &row, now)?;
    }
    Ok(Signalled { job, delivered })
}

/// Fenced suspend: the job waits for `wait`'s signal, or takes at once
/// the oldest one kept for it.
pub(crate) fn suspend(conn: &Connection, lease: &Lease, wait: &Await, now: Now) -> Result<Job> {
    wait.validate()?;
    let kept: Option<i64> = conn
        .prepare_cached(SIGNAL_KEPT)
        .map_err(map_err)?
        .query_row(
            named_params! {":id": lease.id.as_str(), ":name": wait.signal.as_str()},
            |r| r.get(0),
        )
        .map_err(map_err)?;
    let until = wait.timeout.map(|d| now.at.plus(d).as_millis());
    let (name, policy) = (wait.signal.as_str(), wait.on_timeout.as_str());
    let job = fenced(
        conn,
        SUSPEND,
        lease,
        now,
        &[
            (":kept", &kept),
            (":name", &name),
            (":until", &until),
            (":policy", &policy),
        ],
    )?;
    if let Some(seq) = kept {
        conn.execute(
            "UPDATE errand_signals SET delivered_at = :now WHERE seq = :seq",
            named_params! {":now": now.at.as_millis(), ":seq": seq},
        )
        .map_err(map_err)?;
        note_ready();
    }
    // The attempt was given back: the row's count is one lower than the
    // attempt that ran.
    let held = Held {
        attempt: job.attempts + 1,
        ..Held::of(&job)
    };
    let ended = Ended {
        outcome: "awaiting",
        error: None,
        class: None,
    };
    record_attempt(conn, held, now.at, &ended)?;
    Ok(job)
}

/// Whether some wait has timed out by `now` (one probe of
/// errand_jobs_await_timeouts).
pub(crate) fn waits_due(conn: &Connection, now: Timestamp) -> Result<bool> {
    conn.prepare_cached(WAITS_DUE)
        .map_err(map_err)?
        .query_row(named_params! {":now": now.as_millis()}, |_| Ok(()))
        .optional()
        .map(|found| found.is_some())
        .map_err(map_err)
}

/// Ends up to `limit` waits that timed out, releasing the dependents of
/// the jobs that ended.
pub(crate) fn expire_waits(conn: &Connection, limit: u32, now: Timestamp) -> Result<Vec<Job>> {
    let mut jobs: Vec<Job> = conn
        .prepare_cached(EXPIRE_WAITS)
        .map_err(map_err)?
        .query_map(
            named_params! {":now": now.as_millis(), ":limit": limit},
            job_from_row,
        )
        .map_err(map_err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(map_err)?;
    // RETURNING order is unspecified; answer in id order.
    jobs.sort_by(|a, b| a.id.as_str().cmp(b.id.as_str()));
    let ended: Vec<&str> = jobs
        .iter()
        .filter(|j| j.has_dependents && j.finished_at.is_some())
        .map(|j| j.id.as_str())
        .collect();
    if !ended.is_empty() {
        release_dependents(conn, &ended, Release::Failed, now)?;
    }
    if jobs.iter().any(|j| j.state == JobState::Ready) {
        note_ready();
    }
    Ok(jobs)
}

/// The signal that ended job `id`'s latest wait.
pub(crate) fn received(conn: &Connection, id: &JobId) -> Result<Option<ReceivedSignal>> {
    let row = conn
        .prepare_cached(RECEIVED_SIGNAL)
        .map_err(map_err)?
        .query_row(named_params! {":id": id.as_str()}, |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                ts_col(r, 2)?,
            ))
        })
        .optional()
        .map_err(map_err)?;
    row.map(|(name, payload, sent_at)| {
        Ok(ReceivedSignal {
            name: stored_name(name)?,
            payload: payload.map(Payload::from_stored),
            sent_at,
        })
    })
    .transpose()
}

/// The signals sent to job `id`, oldest first.
pub(crate) fn signals_of(conn: &Connection, id: &JobId) -> Result<Vec<SignalRecord>> {
    let rows: Vec<(i64, String, Timestamp, Option<Timestamp>, u64)> = conn
        .prepare_cached(SIGNALS_OF)
        .map_err(map_err)?
        .query_map(named_params! {":id": id.as_str()}, |r| {
            Ok((
                r.get(0)?,
                r.get(1)?,
                ts_col(r, 2)?,
                opt_ts_col(r, 3)?,
                u64_col(r, 4)?,
            ))
        })
        .map_err(map_err)?
        .collect::<rusqlite::Result<_>>()
        .map_err(map_err)?;
    rows.into_iter()
        .map(|(seq, name, sent_at, delivered_at, payload_bytes)| {
            Ok(SignalRecord {
                seq,
                name: stored_name(name)?,
                sent_at,
                delivered_at,
                payload_bytes,
            })
        })
        .collect()
}

fn stored_name(name: String) -> Result<Name> {
    Name::parse("signal", name)
        .map_err(|e| Error::storage(format!("a stored signal's name does not parse: {e}")))
}
