//! The SQLite backend: one file holds Errand's tables and the application's.
//!
//! Every write runs on the store's single writer thread inside its
//! `BEGIN IMMEDIATE` transaction ([`SqliteStore::write`]), so the
//! conditional statements of `pay`/`extend`/`cancel` in one process and the
//! expiry in a worker process are serialized by SQLite's write lock: each
//! sees the other's committed row.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use errand::sqlite::SchemaStatus;
use errand::sqlite::rusqlite::{self, Connection, OptionalExtension, Row, named_params, params};
use errand::{Clock, SqliteOptions, SqliteStore, Timestamp};

use crate::error::{Error, Result};
use crate::model::{
    APP_HISTORY_TABLE, APP_SCHEMA_VERSION, Action, AuditEntry, AuditRow, Decision, ExpiryRun,
    Figures, InitReport, LegacyOverlap, Occupant, RecentLateness, Reservation, SEED_UNITS, Status,
    Stay, StayRequest, changed_detail, expiry_job, expiry_job_id, iso_date, legacy_overlap_refusal,
    overlap_refusal, parse_date, refusal, unknown_reservation, unknown_unit,
};

mod embedded {
    refinery::embed_migrations!("migrations/sqlite");
}

const COLUMNS: &str = "r.id, r.unit_id, r.guest, r.status, r.hold_until, r.generation, r.created_at, \
     r.paid_at, r.cancelled_at, r.expired_at, \
     (SELECT e.lateness_ms FROM expirations e WHERE e.reservation_id = r.id ORDER BY e.expired_at DESC LIMIT 1), \
     r.stay_from, r.stay_to";

/// The SQLite backend.
#[derive(Clone, Debug)]
pub(crate) struct Sqlite {
    pub(crate) store: SqliteStore,
}

// ---------------------------------------------------------------------------
// Opening and initialising

fn check_file(path: &Path, allow_missing: bool) -> Result<()> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if allow_missing {
                return Ok(());
            }
            return Err(Error::Database(format!(
                "no database at {shown}; create it with `reservations init {shown}` (or check the path)"
            )));
        }
        Err(e) => return Err(Error::Database(format!("cannot read {shown}: {e}"))),
    };
    if meta.is_dir() {
        return Err(Error::Database(format!(
            "{shown} is a directory; pass the path of a database file or a postgres:// URL"
        )));
    }
    // Looked at read-only: an empty file is an empty SQLite database
    // (`init` may fill it).
    match errand::sqlite::schema_status(path) {
        Ok(SchemaStatus::NotADatabase) => Err(not_a_database(path)),
        Ok(_) => Ok(()),
        Err(e) => Err(Error::Database(format!("cannot read {shown}: {e}"))),
    }
}

fn not_a_database(path: &Path) -> Error {
    Error::Database(format!(
        "{} is not a SQLite database; pass a file made by `reservations init` or a postgres:// URL",
        path.display()
    ))
}

fn not_initialised(path: &Path, what: &str) -> Error {
    Error::Database(format!(
        "{} is not a reservations database ({what}); run `reservations init {}` first",
        path.display(),
        path.display()
    ))
}

fn open_error(path: &Path, e: errand::Error) -> Error {
    match e {
        errand::Error::NotErrand(_) => not_initialised(path, "no Errand tables"),
        errand::Error::SchemaOutdated(detail) => not_initialised(path, &detail),
        errand::Error::SchemaTooNew(detail) => Error::SchemaTooNew(format!(
            "{} was written by a newer program ({detail}); upgrade reservations before using it",
            path.display()
        )),
        other => Error::from(other),
    }
}

fn app_schema_version(conn: &Connection) -> Result<Option<i64>> {
    let exists: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [APP_HISTORY_TABLE],
            |r| r.get(0),
        )
        .optional()?;
    if exists.is_none() {
        return Ok(None);
    }
    Ok(conn.query_row(
        &format!("SELECT MAX(version) FROM {APP_HISTORY_TABLE}"),
        [],
        |r| r.get(0),
    )?)
}

fn too_new(path: &Path, v: i64) -> Error {
    Error::SchemaTooNew(format!(
        "{} was written by a newer program (reservations schema version {v}, this program knows up to {APP_SCHEMA_VERSION}); upgrade reservations before using it",
        path.display()
    ))
}

/// Checks both schema versions on read-only connections, so a database of
/// another program is left exactly as it was.
fn check_schemas(path: &Path) -> Result<()> {
    let status = errand::sqlite::schema_status(path).map_err(|e| open_error(path, e))?;
    if matches!(status, SchemaStatus::Missing | SchemaStatus::NotADatabase) {
        check_file(path, false)?;
        return Err(not_a_database(path));
    }
    status
        .require_current("Errand's schema")
        .map_err(|e| open_error(path, e))?;
    let conn = errand::sqlite::open_read_only(path).map_err(|e| open_error(path, e))?;
    match app_schema_version(&conn)? {
        None => Err(not_initialised(path, "no reservations tables")),
        Some(v) if v > APP_SCHEMA_VERSION => Err(too_new(path, v)),
        Some(v) if v < APP_SCHEMA_VERSION => Err(not_initialised(
            path,
            &format!("reservations schema version {v}, this program needs {APP_SCHEMA_VERSION}"),
        )),
        Some(_) => Ok(()),
    }
}

/// Creates the file if needed, applies Errand's and the application's
/// migrations and seeds the units. Changes nothing that exists.
pub(crate) fn init(path: &Path) -> Result<InitReport> {
    check_file(path, true)?;
    let store = SqliteStore::open(
        path,
        SqliteOptions {
            create: true,
            migrate: true,
            ..SqliteOptions::default()
        },
    )
    .map_err(|e| open_error(path, e))?;
    drop(store);

    let mut conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.execute_batch("PRAGMA foreign_keys = ON")?;
    match app_schema_version(&conn)? {
        Some(v) if v > APP_SCHEMA_VERSION => return Err(too_new(path, v)),
        Some(1) => {
            let found = legacy_overlaps(&conn)?;
            if !found.is_empty() {
                return Err(legacy_overlap_refusal(&found));
            }
        }
        _ => {}
    }
    embedded::migrations::runner()
        .set_migration_table_name(APP_HISTORY_TABLE)
        .run(&mut conn)
        .map_err(|e| Error::Migration(e.to_string()))?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut created_units = Vec::new();
    for (id, name) in SEED_UNITS {
        let n = tx.execute(
            "INSERT OR IGNORE INTO units (id, name) VALUES (?1, ?2)",
            params![id, name],
        )?;
        if n == 1 {
            created_units.push(id.to_owned());
        }
    }
    let units = units_in(&tx)?;
    tx.commit()?;
    Ok(InitReport {
        backend: "sqlite",
        created_units,
        units,
    })
}

/// On a database of schema version 1 (no stays): the held or paid
/// reservations that would share a night once each gets the night of the
/// day it was made.
fn legacy_overlaps(conn: &Connection) -> Result<Vec<LegacyOverlap>> {
    let mut stmt = conn.prepare(
        "SELECT unit_id, date(created_at / 1000, 'unixepoch') AS night, group_concat(id, ' ')
         FROM reservations WHERE status IN ('held', 'paid')
         GROUP BY unit_id, night HAVING count(*) > 1
         ORDER BY unit_id, night LIMIT 100",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    rows.map(|row| {
        let (unit, night, ids) = row?;
        let mut ids: Vec<String> = ids.split(' ').map(str::to_owned).collect();
        ids.sort();
        Ok(LegacyOverlap { unit, night, ids })
    })
    .collect()
}

fn units_in(conn: &Connection) -> Result<Vec<String>> {
    let mut stmt = conn.prepare_cached("SELECT id FROM units ORDER BY id")?;
    let rows = stmt.query_map([], |r| r.get(0))?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

// ---------------------------------------------------------------------------
// Rows

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

fn minted_key_in(conn: &Connection, job_id: &str, replays: u32) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT new_key FROM replay_audit
             WHERE job_id = ?1 AND replay_no <= ?2 AND new_key IS NOT NULL
             ORDER BY replay_no DESC LIMIT 1",
        )?
        .query_row(params![job_id, replays], |r| r.get(0))
        .optional()?)
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
    /// Opens an initialised database.
    pub(crate) fn open(path: &Path, clock: Option<Arc<dyn Clock>>) -> Result<Self> {
        check_file(path, false)?;
        check_schemas(path)?;
        let mut options = SqliteOptions::default();
        if let Some(c) = clock {
            options.clock = c;
        }
        let store = SqliteStore::open(path, options).map_err(|e| open_error(path, e))?;
        Ok(Sqlite { store })
    }

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
                let inserted = errand::sqlite::enqueue_in(conn, &expiry_job(&id, 1, hold_until)?, now)?;
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
                if action == Action::Extend {
                    let job = expiry_job(&r.id, r.generation, r.hold_until)?;
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

    pub(crate) async fn recent_lateness(&self, window: Duration) -> Result<RecentLateness> {
        let now = self.store.now();
        self.read(move |c| {
            let since = now.minus(window);
            let (expired, max_expired_ms): (i64, Option<i64>) = c
                .prepare_cached(
                    "SELECT count(*), max(lateness_ms) FROM expirations WHERE expired_at >= ?1",
                )?
                .query_row([since.as_millis()], |r| Ok((r.get(0)?, r.get(1)?)))?;
            let (overdue, oldest): (i64, Option<i64>) = c
                .prepare_cached(
                    "SELECT count(*), min(hold_until) FROM reservations
                     WHERE status = 'held' AND hold_until <= ?1",
                )?
                .query_row([now.as_millis()], |r| Ok((r.get(0)?, r.get(1)?)))?;
            Ok(RecentLateness {
                at: now,
                window,
                expired: u64::try_from(expired).unwrap_or(0),
                max_expired_ms,
                overdue: u64::try_from(overdue).unwrap_or(0),
                max_overdue_ms: oldest.map(|t| now.as_millis().saturating_sub(t)),
            })
        })
        .await
    }

    pub(crate) async fn expire(&self, run: ExpiryRun) -> Result<Decision> {
        let path: PathBuf = self.store.path().to_path_buf();
        self.store
            .write(move |conn, now| expire_in(conn, &path, &run, now))
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

    pub(crate) async fn figures(&self) -> Result<Figures> {
        self.read(|c| {
            let lateness_ms = c
                .prepare_cached("SELECT lateness_ms FROM expirations ORDER BY lateness_ms")?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<i64>>>()?;
            let outcomes = c
                .prepare_cached(
                    "SELECT outcome, count(*) FROM expiry_outcomes GROUP BY outcome ORDER BY outcome",
                )?
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
                .map(|r| r.map(|(o, n)| (o, u64::try_from(n).unwrap_or(0))))
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let statuses = c
                .prepare_cached("SELECT status, count(*) FROM reservations GROUP BY status")?
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
                .collect::<rusqlite::Result<Vec<_>>>()?
                .into_iter()
                .map(|(s, n)| Ok((Status::parse(&s)?, u64::try_from(n).unwrap_or(0))))
                .collect::<Result<Vec<_>>>()?;
            Ok(Figures {
                lateness_ms,
                outcomes,
                statuses,
                dead_jobs: 0,
            })
        })
        .await
    }

    pub(crate) async fn minted_key(&self, job_id: &str, replays: u32) -> Result<Option<String>> {
        let job_id = job_id.to_owned();
        self.read(move |c| minted_key_in(c, &job_id, replays)).await
    }

    pub(crate) async fn write_audit(&self, e: AuditEntry) -> Result<Timestamp> {
        self.store
            .write(move |conn, now| {
                conn.prepare_cached(
                    "INSERT INTO replay_audit (job_id, replay_no, operator, reason, old_key, new_key, created_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
                     ON CONFLICT (job_id, replay_no) DO UPDATE SET
                       operator = excluded.operator, reason = excluded.reason, old_key = excluded.old_key,
                       new_key = excluded.new_key, created_at = excluded.created_at",
                )?
                .execute(params![
                    e.job_id,
                    e.replay_no,
                    e.operator,
                    e.reason,
                    e.old_key,
                    e.new_key,
                    now.as_millis()
                ])?;
                Ok::<_, Error>(now)
            })
            .await
    }

    pub(crate) async fn remove_audit(&self, e: AuditEntry, at: Timestamp) -> Result<()> {
        self.store
            .write(move |conn, _now| {
                conn.execute(
                    "DELETE FROM replay_audit
                     WHERE job_id = ?1 AND replay_no = ?2 AND operator = ?3 AND created_at = ?4",
                    params![e.job_id, e.replay_no, e.operator, at.as_millis()],
                )?;
                Ok::<_, Error>(())
            })
            .await
    }

    pub(crate) async fn replay_audit(&self) -> Result<Vec<AuditRow>> {
        self.read(|c| {
            let mut stmt = c.prepare_cached(
                "SELECT job_id, replay_no, operator, reason, old_key, new_key, created_at
                 FROM replay_audit ORDER BY created_at, job_id, replay_no",
            )?;
            let rows = stmt.query_map([], |r| {
                Ok(AuditRow {
                    job_id: r.get(0)?,
                    replay_no: r.get(1)?,
                    operator: r.get(2)?,
                    reason: r.get(3)?,
                    old_key: r.get(4)?,
                    new_key: r.get(5)?,
                    created_at: Timestamp::from_millis(r.get(6)?),
                })
            })?;
            Ok(rows.collect::<rusqlite::Result<_>>()?)
        })
        .await
    }
}
