//! The PostgreSQL backend: Errand's tables in the schema `errand`, the
//! application's in the schema `reservations`, one database.
//!
//! Every transition is one conditional `UPDATE` in a `READ COMMITTED`
//! transaction on a connection from the store's pool. Two transitions of
//! the same reservation (an expiry and a payment, say) meet at the row
//! lock: the second waits for the first to commit, then re-evaluates its
//! `WHERE` against the committed row and changes nothing. Time is the
//! server's `now()`, the clock Errand uses for the job's due time.

use std::time::Duration;

use errand::{PgOptions, PgStore, Timestamp};
use time::OffsetDateTime;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::{Error, Result};
use crate::model::{
    APP_HISTORY_TABLE, APP_SCHEMA_VERSION, Action, AuditEntry, AuditRow, Decision, ExpiryRun,
    Figures, InitReport, LegacyOverlap, Occupant, RecentLateness, Reservation, SEED_UNITS, Status,
    Stay, StayRequest, changed_detail, expiry_job, expiry_job_id, legacy_overlap_refusal,
    overlap_refusal, refusal, unknown_reservation, unknown_unit,
};

mod embedded {
    refinery::embed_migrations!("migrations/postgres");
}

/// The schema of the application's tables.
pub(crate) const APP_SCHEMA: &str = "reservations";

const COLUMNS: &str = "r.id, r.unit_id, r.guest, r.status, r.hold_until, r.generation, r.created_at, \
     r.paid_at, r.cancelled_at, r.expired_at, \
     (SELECT e.lateness_ms FROM reservations.expirations e WHERE e.reservation_id = r.id ORDER BY e.expired_at DESC LIMIT 1), \
     r.stay_from, r.stay_to";

type Tx<'a> = deadpool_postgres::Transaction<'a>;

/// The PostgreSQL backend.
#[derive(Clone, Debug)]
pub(crate) struct Pg {
    pub(crate) store: PgStore,
}

fn history_table() -> String {
    format!("{APP_SCHEMA}.{APP_HISTORY_TABLE}")
}

fn ts(t: OffsetDateTime) -> Timestamp {
    let ms = t.unix_timestamp_nanos().div_euclid(1_000_000);
    Timestamp::from_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

fn odt(t: Timestamp) -> Result<OffsetDateTime> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(t.as_millis()) * 1_000_000)
        .map_err(|e| Error::Invalid(format!("the time {t:?} is out of range: {e}")))
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// Rewords the library's connection errors for this program's users. The
/// URL is never echoed (it may hold a password).
fn open_error(e: errand::Error) -> Error {
    match e {
        errand::Error::NotErrand(_) => not_initialised("no Errand tables"),
        errand::Error::SchemaOutdated(detail) => not_initialised(&detail),
        errand::Error::SchemaTooNew(detail) => Error::SchemaTooNew(format!(
            "the PostgreSQL database was written by a newer program ({detail}); upgrade reservations before using it"
        )),
        errand::Error::Invalid(m) => Error::Database(m),
        errand::Error::Storage { message, .. } => Error::Database(message),
        other => Error::from(other),
    }
}

fn not_initialised(what: &str) -> Error {
    Error::Database(format!(
        "the PostgreSQL database is not a reservations database ({what}); run `reservations init` with the same URL first"
    ))
}

async fn app_schema_version(client: &tokio_postgres::Client) -> Result<Option<i64>> {
    let exists: Option<String> = client
        .query_one("SELECT to_regclass($1)::text", &[&history_table()])
        .await?
        .try_get(0)?;
    if exists.is_none() {
        return Ok(None);
    }
    let v: Option<i32> = client
        .query_one(
            &format!("SELECT max(version) FROM {}", history_table()),
            &[],
        )
        .await?
        .try_get(0)?;
    Ok(v.map(i64::from))
}

fn too_new(v: i64) -> Error {
    Error::SchemaTooNew(format!(
        "the PostgreSQL database was written by a newer program (reservations schema version {v}, this program knows up to {APP_SCHEMA_VERSION}); upgrade reservations before using it"
    ))
}

/// Applies Errand's and the application's migrations and seeds the units.
pub(crate) async fn init(url: &str) -> Result<InitReport> {
    let store = PgStore::connect(
        url,
        PgOptions {
            migrate: true,
            pool_size: 2,
            ..PgOptions::default()
        },
    )
    .await
    .map_err(open_error)?;
    let mut client = store.pool().get().await?;
    match app_schema_version(&client).await? {
        Some(v) if v > APP_SCHEMA_VERSION => return Err(too_new(v)),
        Some(1) => {
            let found = legacy_overlaps(&client).await?;
            if !found.is_empty() {
                return Err(legacy_overlap_refusal(&found));
            }
        }
        _ => {}
    }
    client
        .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {APP_SCHEMA}"))
        .await?;
    let pg: &mut tokio_postgres::Client = &mut client;
    embedded::migrations::runner()
        .set_migration_table_name(history_table())
        .run_async(pg)
        .await
        .map_err(|e| migration_error(&e.to_string()))?;
    let tx = client.transaction().await?;
    let mut created_units = Vec::new();
    for (id, name) in SEED_UNITS {
        let n = tx
            .execute(
                "INSERT INTO reservations.units (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                &[&id, &name],
            )
            .await?;
        if n == 1 {
            created_units.push(id.to_owned());
        }
    }
    let units = units_in(&tx).await?;
    tx.commit().await?;
    Ok(InitReport {
        backend: "postgres",
        created_units,
        units,
    })
}

/// Names the fix when the server lacks the extension the overlap
/// constraint needs.
fn migration_error(text: &str) -> Error {
    if text.contains("btree_gist") {
        Error::Migration(format!(
            "{text}; the constraint that keeps two stays of one unit apart needs the PostgreSQL extension btree_gist: install the server's contrib modules (the postgresql-contrib package), or have a superuser run `CREATE EXTENSION btree_gist` in this database, then run `reservations init` again"
        ))
    } else {
        Error::Migration(text.to_owned())
    }
}

/// On a database of schema version 1 (no stays): the held or paid
/// reservations that would share a night once each gets the night of the
/// day it was made.
async fn legacy_overlaps(client: &tokio_postgres::Client) -> Result<Vec<LegacyOverlap>> {
    client
        .query(
            "SELECT unit_id, ((created_at AT TIME ZONE 'UTC')::date)::text AS night,
                    array_agg(id ORDER BY id)
             FROM reservations.reservations WHERE status IN ('held', 'paid')
             GROUP BY unit_id, night HAVING count(*) > 1
             ORDER BY unit_id, night LIMIT 100",
            &[],
        )
        .await?
        .iter()
        .map(|r| {
            Ok(LegacyOverlap {
                unit: r.try_get(0)?,
                night: r.try_get(1)?,
                ids: r.try_get(2)?,
            })
        })
        .collect()
}

/// Whether `e` is the overlap constraint refusing a row.
fn is_overlap(e: &Error) -> bool {
    matches!(e, Error::Refused(m) if m.contains(crate::model::OVERLAP))
}

/// The held or paid reservation of `unit` that shares a night with `stay`
/// (other than `except`), if any.
async fn occupant_in<C: deadpool_postgres::GenericClient + Sync>(
    c: &C,
    unit: &str,
    stay: &Stay,
    except: Option<&str>,
) -> Result<Option<Occupant>> {
    let row = c
        .query_opt(
            "SELECT id, status, stay_from, stay_to, hold_until FROM reservations.reservations
             WHERE unit_id = $1 AND status IN ('held', 'paid')
               AND daterange(stay_from, stay_to) && daterange($2, $3)
               AND id IS DISTINCT FROM $4
             ORDER BY stay_from, id LIMIT 1",
            &[&unit, &stay.from, &stay.to, &except],
        )
        .await?;
    row.map(|r| {
        Ok(Occupant {
            id: r.try_get(0)?,
            status: Status::parse(r.try_get(1)?)?,
            stay: Stay {
                from: r.try_get(2)?,
                to: r.try_get(3)?,
            },
            hold_until: ts(r.try_get(4)?),
        })
    })
    .transpose()
}

async fn units_in(tx: &Tx<'_>) -> Result<Vec<String>> {
    let rows = tx
        .query("SELECT id FROM reservations.units ORDER BY id", &[])
        .await?;
    Ok(rows
        .iter()
        .map(|r| r.try_get(0))
        .collect::<std::result::Result<_, _>>()?)
}

fn reservation(row: &Row) -> Result<Reservation> {
    let id: String = row.try_get(0)?;
    let generation: i32 = row.try_get(5)?;
    let generation = u32::try_from(generation)
        .map_err(|_| Error::Database(format!("reservation `{id}` has generation {generation}")))?;
    let opt = |i: usize| -> Result<Option<Timestamp>> {
        Ok(row.try_get::<_, Option<OffsetDateTime>>(i)?.map(ts))
    };
    Ok(Reservation {
        job_id: expiry_job_id(&id, generation),
        unit: row.try_get(1)?,
        guest: row.try_get(2)?,
        status: Status::parse(row.try_get(3)?)?,
        hold_until: ts(row.try_get(4)?),
        generation,
        created_at: ts(row.try_get(6)?),
        paid_at: opt(7)?,
        cancelled_at: opt(8)?,
        expired_at: opt(9)?,
        lateness_ms: row.try_get(10)?,
        stay_from: row.try_get(11)?,
        stay_to: row.try_get(12)?,
        id,
    })
}

async fn get_in<C: deadpool_postgres::GenericClient + Sync>(
    c: &C,
    id: &str,
) -> Result<Option<Reservation>> {
    c.query_opt(
        &format!("SELECT {COLUMNS} FROM reservations.reservations r WHERE r.id = $1"),
        &[&id],
    )
    .await?
    .as_ref()
    .map(reservation)
    .transpose()
}

async fn db_now(tx: &Tx<'_>) -> Result<Timestamp> {
    Ok(ts(tx.query_one("SELECT now()", &[]).await?.try_get(0)?))
}

async fn minted_key_in<C: deadpool_postgres::GenericClient + Sync>(
    c: &C,
    job_id: &str,
    replays: u32,
) -> Result<Option<String>> {
    let replays = i32::try_from(replays).unwrap_or(i32::MAX);
    Ok(c.query_opt(
        "SELECT new_key FROM reservations.replay_audit
             WHERE job_id = $1 AND replay_no <= $2 AND new_key IS NOT NULL
             ORDER BY replay_no DESC LIMIT 1",
        &[&job_id, &replays],
    )
    .await?
    .map(|r| r.try_get(0))
    .transpose()?)
}

async fn expired_at_of_key(tx: &Tx<'_>, key: &str) -> Result<Option<Timestamp>> {
    Ok(tx
        .query_opt(
            "SELECT expired_at FROM reservations.expirations WHERE idempotency_key = $1",
            &[&key],
        )
        .await?
        .map(|r| r.try_get(0).map(ts))
        .transpose()?)
}

async fn record_outcome(
    tx: &Tx<'_>,
    run: &ExpiryRun,
    key: &str,
    outcome: &str,
    detail: &str,
) -> Result<()> {
    let attempt = i32::try_from(run.attempt).unwrap_or(i32::MAX);
    let replays = i32::try_from(run.replays).unwrap_or(i32::MAX);
    let params: [&(dyn ToSql + Sync); 7] = [
        &run.job_id,
        &attempt,
        &replays,
        &run.payload.reservation_id,
        &key,
        &outcome,
        &detail,
    ];
    tx.execute(
        "INSERT INTO reservations.expiry_outcomes
           (job_id, attempt, replays, reservation_id, idempotency_key, outcome, detail, at)
         VALUES ($1, $2, $3, $4, $5, $6, $7, now())",
        &params,
    )
    .await?;
    Ok(())
}

impl Pg {
    /// Connects and checks both schemas.
    pub(crate) async fn open(url: &str) -> Result<Self> {
        let store = PgStore::connect(url, PgOptions::default())
            .await
            .map_err(open_error)?;
        let client = store.pool().get().await?;
        match app_schema_version(&client).await? {
            None => return Err(not_initialised("no reservations tables")),
            Some(v) if v > APP_SCHEMA_VERSION => return Err(too_new(v)),
            Some(v) if v < APP_SCHEMA_VERSION => {
                return Err(not_initialised(&format!(
                    "reservations schema version {v}, this program needs {APP_SCHEMA_VERSION}"
                )));
            }
            Some(_) => {}
        }
        drop(client);
        Ok(Pg { store })
    }

    async fn client(&self) -> Result<deadpool_postgres::Client> {
        Ok(self.store.pool().get().await?)
    }

    pub(crate) async fn hold(
        &self,
        unit: &str,
        guest: &str,
        stay: StayRequest,
        window: Duration,
    ) -> Result<Reservation> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let known = tx
            .query_opt("SELECT 1 FROM reservations.units WHERE id = $1", &[&unit])
            .await?;
        if known.is_none() {
            let units = units_in(&tx).await?;
            return Err(unknown_unit(unit, &units));
        }
        let now = db_now(&tx).await?;
        let stay = stay.resolve(now)?;
        if let Some(o) = occupant_in(&tx, unit, &stay, None).await? {
            tx.rollback().await?;
            return Err(overlap_refusal(unit, &stay, Some(&o), now));
        }
        let id = uuid::Uuid::now_v7().to_string();
        let window_ms = millis(window);
        let params: [&(dyn ToSql + Sync); 6] =
            [&id, &unit, &guest, &window_ms, &stay.from, &stay.to];
        let inserted = tx
            .query_one(
                "INSERT INTO reservations.reservations (id, unit_id, guest, status, hold_until, generation, created_at, stay_from, stay_to)
                 VALUES ($1, $2, $3, 'held', date_trunc('milliseconds', now() + $4::bigint * interval '1 millisecond'), 1, now(), $5, $6)
                 RETURNING hold_until",
                &params,
            )
            .await
            .map_err(Error::from);
        let row = match inserted {
            Ok(row) => row,
            Err(e) if is_overlap(&e) => {
                // A concurrent hold of the same nights committed after the
                // check above: the exclusion constraint made this insert
                // wait for it, then refused it. Name the winner.
                tx.rollback().await?;
                let o = occupant_in(&client, unit, &stay, None).await?;
                return Err(overlap_refusal(unit, &stay, o.as_ref(), now));
            }
            Err(e) => return Err(e),
        };
        let hold_until = ts(row.try_get(0)?);
        let inserted = self
            .store
            .enqueue_in(&tx, &expiry_job(&id, 1, hold_until)?)
            .await?;
        if !inserted.created {
            return Err(Error::Invalid(format!(
                "an expiry job `{}` already exists for the fresh reservation; nothing was written",
                inserted.job.id
            )));
        }
        let r = get_in(&tx, &id)
            .await?
            .ok_or_else(|| unknown_reservation(&id))?;
        tx.commit().await?;
        Ok(r)
    }

    pub(crate) async fn transition(
        &self,
        action: Action,
        id: &str,
        by: Option<Duration>,
    ) -> Result<Reservation> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if action == Action::Pay
            && let Some(r) = get_in(&tx, id).await?
            && r.status == Status::Held
            && let Some(o) = occupant_in(&tx, &r.unit, &r.stay(), Some(&r.id)).await?
        {
            let now = db_now(&tx).await?;
            tx.rollback().await?;
            return Err(overlap_refusal(&r.unit, &r.stay(), Some(&o), now));
        }
        let changed = match action {
            Action::Pay => {
                tx.execute(
                    "UPDATE reservations.reservations SET status = 'paid', paid_at = now()
                     WHERE id = $1 AND status = 'held' AND hold_until > now()",
                    &[&id],
                )
                .await?
            }
            Action::Cancel => {
                tx.execute(
                    "UPDATE reservations.reservations SET status = 'cancelled', cancelled_at = now()
                     WHERE id = $1 AND status = 'held' AND hold_until > now()",
                    &[&id],
                )
                .await?
            }
            Action::Extend => {
                let by_ms = millis(by.unwrap_or_default());
                tx.execute(
                    "UPDATE reservations.reservations
                     SET hold_until = hold_until + $2::bigint * interval '1 millisecond', generation = generation + 1
                     WHERE id = $1 AND status = 'held' AND hold_until > now()",
                    &[&id, &by_ms],
                )
                .await?
            }
        };
        // After a refused UPDATE this reads the row as the statement that
        // beat it committed it (READ COMMITTED: a fresh snapshot).
        let Some(r) = get_in(&tx, id).await? else {
            tx.rollback().await?;
            return Err(unknown_reservation(id));
        };
        if changed != 1 {
            let now = db_now(&tx).await?;
            tx.rollback().await?;
            return Err(refusal(action, &r, now));
        }
        if action == Action::Extend {
            let job = expiry_job(&r.id, r.generation, r.hold_until)?;
            let inserted = self.store.enqueue_in(&tx, &job).await?;
            if !inserted.created {
                return Err(Error::Invalid(format!(
                    "the expiry job `{}` of the new deadline already exists; nothing was written",
                    inserted.job.id
                )));
            }
        }
        tx.commit().await?;
        Ok(r)
    }

    pub(crate) async fn expire(&self, run: ExpiryRun) -> Result<Decision> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        if run.simulate_timeout {
            // A real statement timeout, raised by the server (SQLSTATE 57014).
            tx.batch_execute("SET LOCAL statement_timeout = '1ms'")
                .await?;
            tx.execute("SELECT pg_sleep(1)", &[]).await?;
            return Err(Error::Timeout(
                "simulated database timeout (the statement was not cancelled)".into(),
            ));
        }
        let p = &run.payload;
        let key = minted_key_in(&tx, &run.job_id, run.replays)
            .await?
            .unwrap_or_else(|| p.idempotency_key.clone());
        if let Some(expired_at) = expired_at_of_key(&tx, &key).await? {
            let d = Decision::AlreadyDone { expired_at };
            record_outcome(&tx, &run, &key, d.as_str(), &d.detail()).await?;
            tx.commit().await?;
            return Ok(d);
        }
        let deadline = odt(p.hold_until)?;
        let updated = tx
            .query_opt(
                "UPDATE reservations.reservations SET status = 'expired', expired_at = date_trunc('milliseconds', now())
                 WHERE id = $1 AND status = 'held' AND hold_until = $2 AND hold_until <= now()
                 RETURNING expired_at, (extract(epoch FROM (expired_at - hold_until)) * 1000)::bigint",
                &[&p.reservation_id, &deadline],
            )
            .await?;
        if let Some(row) = updated {
            let expired_at: OffsetDateTime = row.try_get(0)?;
            let lateness_ms: i64 = row.try_get(1)?;
            let attempt = i32::try_from(run.attempt).unwrap_or(i32::MAX);
            let params: [&(dyn ToSql + Sync); 7] = [
                &key,
                &p.reservation_id,
                &run.job_id,
                &attempt,
                &deadline,
                &expired_at,
                &lateness_ms,
            ];
            tx.execute(
                "INSERT INTO reservations.expirations
                   (idempotency_key, reservation_id, job_id, attempt, hold_until, expired_at, lateness_ms)
                 VALUES ($1, $2, $3, $4, $5, $6, $7)",
                &params,
            )
            .await?;
            let d = Decision::Expired {
                expired_at: ts(expired_at),
                lateness_ms,
            };
            record_outcome(&tx, &run, &key, d.as_str(), &d.detail()).await?;
            tx.commit().await?;
            return Ok(d);
        }
        // No row changed. A concurrent delivery under the same key may have
        // won (its commit is visible to this new statement).
        if let Some(expired_at) = expired_at_of_key(&tx, &key).await? {
            let d = Decision::AlreadyDone { expired_at };
            record_outcome(&tx, &run, &key, d.as_str(), &d.detail()).await?;
            tx.commit().await?;
            return Ok(d);
        }
        let Some(r) = get_in(&tx, &p.reservation_id).await? else {
            tx.rollback().await?;
            return Err(Error::MissingReservation(p.reservation_id.clone()));
        };
        let now = db_now(&tx).await?;
        if r.status == Status::Held && r.hold_until == p.hold_until && r.hold_until > now {
            tx.rollback().await?;
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
            &tx,
            &run,
            &key,
            d.as_str(),
            &changed_detail(r.status, r.hold_until),
        )
        .await?;
        tx.commit().await?;
        Ok(d)
    }

    pub(crate) async fn purge(&self, id: &str) -> Result<Reservation> {
        let mut client = self.client().await?;
        let tx = client.transaction().await?;
        let Some(r) = get_in(&tx, id).await? else {
            tx.rollback().await?;
            return Err(unknown_reservation(id));
        };
        tx.execute(
            "DELETE FROM reservations.expirations WHERE reservation_id = $1",
            &[&id],
        )
        .await?;
        tx.execute(
            "DELETE FROM reservations.reservations WHERE id = $1",
            &[&id],
        )
        .await?;
        tx.commit().await?;
        Ok(r)
    }

    pub(crate) async fn recent_lateness(&self, window: Duration) -> Result<RecentLateness> {
        let client = self.client().await?;
        let window_ms = millis(window);
        let row = client
            .query_one(
                "SELECT date_trunc('milliseconds', now()),
                        (SELECT count(*) FROM reservations.expirations
                          WHERE expired_at >= now() - $1::bigint * interval '1 millisecond'),
                        (SELECT max(lateness_ms) FROM reservations.expirations
                          WHERE expired_at >= now() - $1::bigint * interval '1 millisecond'),
                        (SELECT count(*) FROM reservations.reservations
                          WHERE status = 'held' AND hold_until <= now()),
                        (SELECT (extract(epoch FROM (now() - min(hold_until))) * 1000)::bigint
                           FROM reservations.reservations
                          WHERE status = 'held' AND hold_until <= now())",
                &[&window_ms],
            )
            .await?;
        let count = |i: usize| -> Result<u64> {
            let n: i64 = row.try_get(i)?;
            Ok(u64::try_from(n).unwrap_or(0))
        };
        Ok(RecentLateness {
            at: ts(row.try_get(0)?),
            window,
            expired: count(1)?,
            max_expired_ms: row.try_get(2)?,
            overdue: count(3)?,
            max_overdue_ms: row.try_get(4)?,
        })
    }

    pub(crate) async fn get(&self, id: &str) -> Result<Option<Reservation>> {
        let client = self.client().await?;
        get_in(&client, id).await
    }

    pub(crate) async fn list(&self) -> Result<Vec<Reservation>> {
        let client = self.client().await?;
        client
            .query(
                &format!(
                    "SELECT {COLUMNS} FROM reservations.reservations r ORDER BY r.created_at, r.id LIMIT 100000"
                ),
                &[],
            )
            .await?
            .iter()
            .map(reservation)
            .collect()
    }

    pub(crate) async fn figures(&self) -> Result<Figures> {
        let client = self.client().await?;
        let lateness_ms = client
            .query(
                "SELECT lateness_ms FROM reservations.expirations ORDER BY lateness_ms",
                &[],
            )
            .await?
            .iter()
            .map(|r| r.try_get(0))
            .collect::<std::result::Result<Vec<i64>, _>>()?;
        let outcomes = client
            .query(
                "SELECT outcome, count(*) FROM reservations.expiry_outcomes GROUP BY outcome ORDER BY outcome",
                &[],
            )
            .await?
            .iter()
            .map(|r| {
                let n: i64 = r.try_get(1)?;
                Ok((r.try_get(0)?, u64::try_from(n).unwrap_or(0)))
            })
            .collect::<Result<Vec<(String, u64)>>>()?;
        let statuses = client
            .query(
                "SELECT status, count(*) FROM reservations.reservations GROUP BY status",
                &[],
            )
            .await?
            .iter()
            .map(|r| {
                let n: i64 = r.try_get(1)?;
                Ok((Status::parse(r.try_get(0)?)?, u64::try_from(n).unwrap_or(0)))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Figures {
            lateness_ms,
            outcomes,
            statuses,
            dead_jobs: 0,
        })
    }

    pub(crate) async fn minted_key(&self, job_id: &str, replays: u32) -> Result<Option<String>> {
        let client = self.client().await?;
        minted_key_in(&client, job_id, replays).await
    }

    pub(crate) async fn write_audit(&self, e: &AuditEntry) -> Result<Timestamp> {
        let client = self.client().await?;
        let replay_no = i32::try_from(e.replay_no).unwrap_or(i32::MAX);
        let params: [&(dyn ToSql + Sync); 6] = [
            &e.job_id,
            &replay_no,
            &e.operator,
            &e.reason,
            &e.old_key,
            &e.new_key,
        ];
        let row = client
            .query_one(
                "INSERT INTO reservations.replay_audit (job_id, replay_no, operator, reason, old_key, new_key, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6, date_trunc('milliseconds', clock_timestamp()))
                 ON CONFLICT (job_id, replay_no) DO UPDATE SET
                   operator = excluded.operator, reason = excluded.reason, old_key = excluded.old_key,
                   new_key = excluded.new_key, created_at = excluded.created_at
                 RETURNING created_at",
                &params,
            )
            .await?;
        Ok(ts(row.try_get(0)?))
    }

    pub(crate) async fn remove_audit(&self, e: &AuditEntry, at: Timestamp) -> Result<()> {
        let client = self.client().await?;
        let replay_no = i32::try_from(e.replay_no).unwrap_or(i32::MAX);
        let at = odt(at)?;
        client
            .execute(
                "DELETE FROM reservations.replay_audit
                 WHERE job_id = $1 AND replay_no = $2 AND operator = $3 AND created_at = $4",
                &[&e.job_id, &replay_no, &e.operator, &at],
            )
            .await?;
        Ok(())
    }

    pub(crate) async fn replay_audit(&self) -> Result<Vec<AuditRow>> {
        let client = self.client().await?;
        client
            .query(
                "SELECT job_id, replay_no, operator, reason, old_key, new_key, created_at
                 FROM reservations.replay_audit ORDER BY created_at, job_id, replay_no",
                &[],
            )
            .await?
            .iter()
            .map(|r| {
                let replay_no: i32 = r.try_get(1)?;
                Ok(AuditRow {
                    job_id: r.try_get(0)?,
                    replay_no: u32::try_from(replay_no).unwrap_or(0),
                    operator: r.try_get(2)?,
                    reason: r.try_get(3)?,
                    old_key: r.try_get(4)?,
                    new_key: r.try_get(5)?,
                    created_at: ts(r.try_get(6)?),
                })
            })
            .collect()
    }
}
