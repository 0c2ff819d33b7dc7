//! The expiry transition on SQLite: the conditional `UPDATE` against the
//! job's deadline, the expiration row keyed by the idempotency key, the
//! recorded outcome of every delivery, and the simulated busy database.

use std::path::{Path, PathBuf};
use std::time::Duration;

use errand::Timestamp;
use errand::sqlite::rusqlite::{Connection, OptionalExtension, named_params, params};

use super::replay::minted_key_in;
use super::{Sqlite, get_in};
use crate::error::{Error, Result};
use crate::model::{Decision, ExpiryRun, Status, changed_detail};

/// Makes this store's transaction fail the way a busy database does: a
/// second connection asks for the write lock this store's writer holds and
/// gives up after 1 ms with `SQLITE_BUSY`, the error SQLite returns when
/// another process keeps the database locked past the busy timeout.
fn simulated_timeout(path: &Path) -> Result<()> {
    let probe = Connection::open(path)?;
    probe.busy_timeout(Duration::from_millis(1))?;
    probe.execute_batch("BEGIN IMMEDIATE; ROLLBACK;")?;
    Err(Error::Timeout(
        "simulated database timeout (the lock probe was not blocked)".into(),
    ))
}

fn record_outcome(
    conn: &Connection,
    run: &ExpiryRun,
    key: &str,
    outcome: &str,
    detail: &str,
    now: Timestamp,
) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO expiry_outcomes (job_id, attempt, replays, reservation_id, idempotency_key, outcome, detail, at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        run.job_id,
        run.attempt,
        run.replays,
        run.payload.reservation_id,
        key,
        outcome,
        detail,
        now.as_millis()
    ])?;
    Ok(())
}

fn expired_at_of_key(conn: &Connection, key: &str) -> Result<Option<Timestamp>> {
    Ok(conn
        .prepare_cached("SELECT expired_at FROM expirations WHERE idempotency_key = ?1")?
        .query_row([key], |r| r.get(0))
        .optional()?
        .map(Timestamp::from_millis))
}

/// The expiry transition, inside the writer's transaction.
fn expire_in(conn: &Connection, path: &Path, run: &ExpiryRun, now: Timestamp) -> Result<Decision> {
    if run.simulate_timeout {
        simulated_timeout(path)?;
    }
    let p = &run.payload;
    let key =
        minted_key_in(conn, &run.job_id, run.replays)?.unwrap_or_else(|| p.idempotency_key.clone());
    if let Some(expired_at) = expired_at_of_key(conn, &key)? {
        let d = Decision::AlreadyDone { expired_at };
        record_outcome(conn, run, &key, d.as_str(), &d.detail(), now)?;
        return Ok(d);
    }
    let changed = conn
        .prepare_cached(
            "UPDATE reservations SET status = 'expired', expired_at = :now
             WHERE id = :id AND status = 'held' AND hold_until = :deadline AND hold_until <= :now",
        )?
        .execute(named_params! {
            ":now": now.as_millis(),
            ":id": p.reservation_id,
            ":deadline": p.hold_until.as_millis(),
        })?;
    if changed == 1 {
        let lateness_ms = now.as_millis() - p.hold_until.as_millis();
        conn.prepare_cached(
            "INSERT INTO expirations (idempotency_key, reservation_id, job_id, attempt, hold_until, expired_at, lateness_ms)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        )?
        .execute(params![
            key,
            p.reservation_id,
            run.job_id,
            run.attempt,
            p.hold_until.as_millis(),
            now.as_millis(),
            lateness_ms
        ])?;
        let d = Decision::Expired {
            expired_at: now,
            lateness_ms,
        };
        record_outcome(conn, run, &key, d.as_str(), &d.detail(), now)?;
        return Ok(d);
    }
    let Some(r) = get_in(conn, &p.reservation_id)? else {
        return Err(Error::MissingReservation(p.reservation_id.clone()));
    };
    if r.status == Status::Held && r.hold_until == p.hold_until && r.hold_until > now {
        return Ok(Decision::NotYetDue {
            hold_until: r.hold_until,
            now,
        });
    }
    let d = Decision::Changed {
        status: r.status,
        hold_until: r.hold_until,
    };
    record_outcome(
        conn,
        run,
        &key,
        d.as_str(),
        &changed_detail(r.status, r.hold_until),
        now,
    )?;
    Ok(d)
}

impl Sqlite {
    pub(crate) async fn expire(&self, run: ExpiryRun) -> Result<Decision> {
        let path: PathBuf = self.store.path().to_path_buf();
        self.store
            .write(move |conn, now| expire_in(conn, &path, &run, now))
            .await
    }
}
