//! The replay audit on SQLite: the idempotency key a replay minted, and the
//! audit rows the operator's replays write, undo and list.

use errand::Timestamp;
use errand::sqlite::rusqlite::{self, Connection, OptionalExtension, params};

use super::Sqlite;
use crate::error::{Error, Result};
use crate::model::{AuditEntry, AuditRow};

pub(super) fn minted_key_in(
    conn: &Connection,
    job_id: &str,
    replays: u32,
) -> Result<Option<String>> {
    Ok(conn
        .prepare_cached(
            "SELECT new_key FROM replay_audit
             WHERE job_id = ?1 AND replay_no <= ?2 AND new_key IS NOT NULL
             ORDER BY replay_no DESC LIMIT 1",
        )?
        .query_row(params![job_id, replays], |r| r.get(0))
        .optional()?)
}

impl Sqlite {
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
