//! The replay audit on PostgreSQL: the idempotency key a replay minted,
//! and the audit rows the operator's replays write, undo and list.

use errand::Timestamp;
use tokio_postgres::types::ToSql;

use super::{Pg, odt, ts};
use crate::error::Result;
use crate::model::{AuditEntry, AuditRow};

pub(super) async fn minted_key_in<C: deadpool_postgres::GenericClient + Sync>(
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

impl Pg {
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
