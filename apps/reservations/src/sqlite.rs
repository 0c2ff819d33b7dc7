//! The SQLite backend: one file holds Errand's tables and the application's.
//!
//! Every write runs on the store's single writer thread inside its
//! `BEGIN IMMEDIATE` transaction ([`SqliteStore::write`]), so the
//! conditional statements of `pay`/`extend`/`cancel` in one process and the
//! expiry in a worker process are serialized by SQLite's write lock: each
//! sees the other's committed row.
//!
//! This file holds the rows and the user's operations (hold, pay, extend,
//! cancel, purge, reads); opening and initialising are in
//! `sqlite/schema.rs`, the expiry transition in `sqlite/expiry.rs`, the
//! replay audit in `sqlite/replay.rs` and the figures behind the statistics
//! in `sqlite/figures.rs`.

use std::time::Duration;

use errand::sqlite::rusqlite::{self, Connection, OptionalExtension, Row, named_params, params};
use errand::{SqliteStore, Timestamp};

use crate::error::{Error, Result};
use crate::model::{
    Action, Occupant, Reservation, Status, Stay, StayRequest, expiry_job_id, iso_date,
    overlap_refusal, parse_date, refusal, unknown_reservation, unknown_unit,
};
use crate::payment::{Expiry, not_waiting_for_payment, paid_signal};

mod expiry;
mod figures;
mod replay;
mod schema;

pub(crate) use schema::init;

const COLUMNS: &str = "r.id, r.unit_id, r.guest, r.status, r.hold_until, r.generation, r.created_at, \
     r.paid_at, r.cancelled_at, r.expired_at, \
     (SELECT e.lateness_ms FROM expirations e WHERE e.reservation_id = r.id ORDER BY e.expired_at DESC LIMIT 1), \
     r.stay_from, r.stay_to";

/// The SQLite backend.
#[derive(Clone, Debug)]
pub(crate) struct Sqlite {
    pub(crate) store: SqliteStore,
}

fn units_in(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached("SELECT id FROM units ORDER BY id")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

struct Raw {
    id: String,
    unit: String,
    guest: String,
    status: String,
    hold_until: i64,
    generation: u32,
    created_at: i64,
    paid_at: Option<i64>,
    cancelled_at: Option<i64>,
    expired_at: Option<i64>,
    lateness_ms: Option<i64>,
    stay_from: String,
    stay_to: String,
}

fn raw(r: &Row<'_>) -> rusqlite::Result<Raw> {
    Ok(Raw {
        id: r.get(0)?,
        unit: r.get(1)?,
        guest: r.get(2)?,
        status: r.get(3)?,
        hold_until: r.get(4)?,
        generation: r.get(5)?,
        created_at: r.get(6)?,
        paid_at: r.get(7)?,
        cancelled_at: r.get(8)?,
        expired_at: r.get(9)?,
        lateness_ms: r.get(10)?,
        stay_from: r.get(11)?,
        stay_to: r.get(12)?,
    })
}

/// A stored `YYYY-MM-DD` date.
fn stored_date(id: &str, s: &str) -> Result<time::Date> {
    parse_date(s)
        .map_err(|e| Error::Database(format!("reservation `{id}` has a bad stay date: {e}")))
}

impl Raw {
    fn into_reservation(self) -> Result<Reservation> {
        let ts = Timestamp::from_millis;
        Ok(Reservation {
            job_id: expiry_job_id(&self.id, self.generation),
            stay_from: stored_date(&self.id, &self.stay_from)?,
            stay_to: stored_date(&self.id, &self.stay_to)?,
            id: self.id,
            unit: self.unit,
            guest: self.guest,
            status: Status::parse(&self.status)?,
            hold_until: ts(self.hold_until),
            generation: self.generation,
            created_at: ts(self.created_at),
            paid_at: self.paid_at.map(ts),
            cancelled_at: self.cancelled_at.map(ts),
            expired_at: self.expired_at.map(ts),
            lateness_ms: self.lateness_ms,
        })
    }
}

fn get_in(conn: &Connection, id: &str) -> Result<Option<Reservation>> {
    conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM reservations r WHERE r.id = ?1"
    ))?
    .query_row([id], raw)
    .optional()?
    .map(Raw::into_reservation)
    .transpose()
}

/// The held or paid reservation of `unit` that shares a night with `stay`
/// (other than `except`), if any.
fn occupant_in(
    conn: &Connection,
    unit: &str,
    stay: &Stay,
    except: Option<&str>,
) -> Result<Option<Occupant>> {
    let found = conn
        .prepare_cached(
            "SELECT id, status, stay_from, stay_to, hold_until FROM reservations
             WHERE unit_id = ?1 AND status IN ('held', 'paid')
               AND stay_from < ?3 AND ?2 < stay_to AND id IS NOT ?4
             ORDER BY stay_from, id LIMIT 1",
        )?
        .query_row(
            params![unit, iso_date(stay.from), iso_date(stay.to), except],
            |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, String>(2)?,
                    r.get::<_, String>(3)?,
                    r.get::<_, i64>(4)?,
                ))
            },
        )
        .optional()?;
    found
        .map(|(id, status, from, to, hold_until)| {
            Ok(Occupant {
                status: Status::parse(&status)?,
                stay: Stay {
                    from: stored_date(&id, &from)?,
                    to: stored_date(&id, &to)?,
                },
                hold_until: Timestamp::from_millis(hold_until),
                id,
            })
        })
        .transpose()
}

impl Sqlite {
    async fn read<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T> + Send + 'static,
    {
        self.store.read(move |c| Ok(f(c))).await?
    }
    pub(crate) async fn hold(
        &self,
        unit: &str,
        guest: &str,
        stay: StayRequest,
        window: Duration,
        expiry: Expiry,
    ) -> Result<Reservation> {
        let (unit, guest) = (unit.to_owned(), guest.to_owned());
        self.store
            .write(move |conn, now| {
                let known: Option<i64> = conn
                    .prepare_cached("SELECT 1 FROM units WHERE id = ?1")?
                    .query_row([&unit], |r| r.get(0))
                    .optional()?;
                if known.is_none() {
                    return Err(unknown_unit(&unit, &units_in(conn)?));
                }
                let stay = stay.resolve(now)?;
                // Inside the write lock (BEGIN IMMEDIATE): nobody else can
                // take the nights between this check and the insert. The
                // trigger is the backstop for writers that skip the check.
                if let Some(o) = occupant_in(conn, &unit, &stay, None)? {
                    return Err(overlap_refusal(&unit, &stay, Some(&o), now));
                }
                let id = uuid::Uuid::now_v7().to_string();
                let hold_until = now.plus(window);
                conn.prepare_cached(
                    "INSERT INTO reservations (id, unit_id, guest, status, hold_until, generation, created_at, stay_from, stay_to)
                     VALUES (?1, ?2, ?3, 'held', ?4, 1, ?5, ?6, ?7)",
                )?
                .execute(params![
                    id,
                    unit,
                    guest,
                    hold_until.as_millis(),
                    now.as_millis(),
                    iso_date(stay.from),
                    iso_date(stay.to)
                ])?;
                let job = expiry.first_job(&id, hold_until, now)?;
                let inserted = errand::sqlite::enqueue_in(conn, &job, now)?;
                if !inserted.created {
                    return Err(Error::Invalid(format!(
                        "an expiry job `{}` already exists for the fresh reservation; nothing was written",
                        inserted.job.id
                    )));
                }
                get_in(conn, &id)?.ok_or_else(|| unknown_reservation(&id))
            })
            .await
    }
    pub(crate) async fn transition(
        &self,
        action: Action,
        id: &str,
        by: Option<Duration>,
    ) -> Result<Reservation> {
        let id = id.to_owned();
        self.store
            .write(move |conn, now| {
                let sql = match action {
                    Action::Pay => {
                        "UPDATE reservations SET status = 'paid', paid_at = :now
                         WHERE id = :id AND status = 'held' AND hold_until > :now"
                    }
                    Action::Cancel => {
                        "UPDATE reservations SET status = 'cancelled', cancelled_at = :now
                         WHERE id = :id AND status = 'held' AND hold_until > :now"
                    }
                    Action::Extend => {
                        "UPDATE reservations SET hold_until = hold_until + :by, generation = generation + 1
                         WHERE id = :id AND status = 'held' AND hold_until > :now"
                    }
                };
                let by_ms = by.map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
                if action == Action::Pay
                    && let Some(r) = get_in(conn, &id)?
                    && r.status == Status::Held
                    && let Some(o) = occupant_in(conn, &r.unit, &r.stay(), Some(&r.id))?
                {
                    return Err(overlap_refusal(&r.unit, &r.stay(), Some(&o), now));
                }
                let mut stmt = conn.prepare_cached(sql)?;
                let changed = if action == Action::Extend {
                    stmt.execute(named_params! {":now": now.as_millis(), ":id": id, ":by": by_ms})?
                } else {
                    stmt.execute(named_params! {":now": now.as_millis(), ":id": id})?
                };
                let found = get_in(conn, &id)?;
                let Some(r) = found else {
                    return Err(unknown_reservation(&id));
                };
                if changed != 1 {
                    return Err(refusal(action, &r, now));
                }
                if action == Action::Pay {
                    // In the payment's transaction: an expiry job waiting
                    // for it runs at once; one that is not waiting runs
                    // at the deadline and finds the hold paid.
                    let signal = paid_signal(&r.id, r.generation, now)?;
                    match errand::sqlite::signal_in(conn, &signal, now) {
                        Ok(_) => {}
                        Err(e) if not_waiting_for_payment(&e) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                if action == Action::Extend {
                    // The new deadline's job waits for the payment when the
                    // one it supersedes does.
                    let previous = errand::JobId::new(expiry_job_id(&r.id, r.generation - 1))?;
                    let previous = match errand::sqlite::job_in(conn, &previous) {
                        Ok(job) => Some(job),
                        Err(errand::Error::NotFound(_)) => None,
                        Err(e) => return Err(e.into()),
                    };
                    let job = Expiry::of(previous.as_ref()).job(
                        &r.id,
                        r.generation,
                        r.hold_until,
                        now,
                    )?;
                    let inserted = errand::sqlite::enqueue_in(conn, &job, now)?;
                    if !inserted.created {
                        return Err(Error::Invalid(format!(
                            "the expiry job `{}` of the new deadline already exists; nothing was written",
                            inserted.job.id
                        )));
                    }
                }
                Ok(r)
            })
            .await
    }
    pub(crate) async fn purge(&self, id: &str) -> Result<Reservation> {
        let id = id.to_owned();
        self.store
            .write(move |conn, _now| {
                let r = get_in(conn, &id)?.ok_or_else(|| unknown_reservation(&id))?;
                conn.prepare_cached("DELETE FROM expirations WHERE reservation_id = ?1")?
                    .execute([&id])?;
                conn.prepare_cached("DELETE FROM reservations WHERE id = ?1")?
                    .execute([&id])?;
                Ok(r)
            })
            .await
    }
    pub(crate) async fn get(&self, id: &str) -> Result<Option<Reservation>> {
        let id = id.to_owned();
        self.read(move |c| get_in(c, &id)).await
    }
    pub(crate) async fn list(&self) -> Result<Vec<Reservation>> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM reservations r ORDER BY r.created_at, r.id LIMIT 100000"
            ))?;
            let rows = stmt.query_map([], raw)?;
            rows.map(|r| r.map_err(Error::from).and_then(Raw::into_reservation))
                .collect()
        })
        .await
    }
}
