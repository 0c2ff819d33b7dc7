//! The expiry transition on PostgreSQL: the conditional `UPDATE` against
//! the job's deadline, the expiration row keyed by the idempotency key, and
//! the recorded outcome of every delivery.

use errand::Timestamp;
use time::OffsetDateTime;
use tokio_postgres::types::ToSql;

use super::replay::minted_key_in;
use super::{Pg, Tx, db_now, get_in, odt, ts};
use crate::error::{Error, Result};
use crate::model::{Decision, ExpiryRun, Status, changed_detail};

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
}
