//! The PostgreSQL backend: Errand's tables in the schema `errand`, the
//! application's in the schema `reservations`, one database.
//!
//! Every transition is one conditional `UPDATE` in a `READ COMMITTED`
//! transaction on a connection from the store's pool. Two transitions of
//! the same reservation (an expiry and a payment, say) meet at the row
//! lock: the second waits for the first to commit, then re-evaluates its
//! `WHERE` against the committed row and changes nothing. Time is the
//! server's `now()`, the clock Errand uses for the job's due time.
//!
//! This file holds the rows and the user's operations (hold, pay, extend,
//! cancel, purge, reads); opening and initialising are in `pg/schema.rs`,
//! the expiry transition in `pg/expiry.rs`, the replay audit in
//! `pg/replay.rs` and the figures behind the statistics in `pg/figures.rs`.

use std::time::Duration;

use errand::{PgStore, Timestamp};
use time::OffsetDateTime;
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::{Error, Result};
use crate::model::{
    Action, Occupant, Reservation, Status, Stay, StayRequest, expiry_job_id, overlap_refusal,
    refusal, unknown_reservation, unknown_unit,
};
use crate::payment::{Expiry, not_waiting_for_payment, paid_signal};

mod expiry;
mod figures;
mod replay;
mod schema;

pub(crate) use schema::init;

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

impl Pg {
    async fn client(&self) -> Result<deadpool_postgres::Client> {
        Ok(self.store.pool().get().await?)
    }
    pub(crate) async fn hold(
        &self,
        unit: &str,
        guest: &str,
        stay: StayRequest,
        window: Duration,
        expiry: Expiry,
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
            .enqueue_in(&tx, &expiry.first_job(&id, hold_until, now)?)
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
        if action == Action::Pay {
            // In the payment's transaction: an expiry job waiting for it
            // runs at once; one that is not waiting runs at the deadline
            // and finds the hold paid. (A refusal writes nothing and
            // leaves the transaction usable.)
            let paid_at = r.paid_at.unwrap_or(r.hold_until);
            let signal = paid_signal(&r.id, r.generation, paid_at)?;
            match self.store.signal_in(&tx, &signal).await {
                Ok(_) => {}
                Err(e) if not_waiting_for_payment(&e) => {}
                Err(e) => return Err(e.into()),
            }
        }
        if action == Action::Extend {
            // The new deadline's job waits for the payment when the one it
            // supersedes does.
            let previous = errand::JobId::new(expiry_job_id(&r.id, r.generation - 1))?;
            let previous = match errand::JobStore::get(&self.store, &previous).await {
                Ok(job) => Some(job),
                Err(errand::Error::NotFound(_)) => None,
                Err(e) => return Err(e.into()),
            };
            let now = db_now(&tx).await?;
            let job = Expiry::of(previous.as_ref()).job(&r.id, r.generation, r.hold_until, now)?;
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
}
