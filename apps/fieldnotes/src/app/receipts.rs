//! The receipt sink: delivering a receipt idempotently, and reading the
//! receipts back.

use errand::sqlite::rusqlite::{self, params};
use errand::{JobId, SqliteStore, Timestamp};
use serde::Serialize;

use super::{ReceiptPayload, read};
use crate::error::{Error, Result};

/// A row of the receipt sink.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Receipt {
    /// The job that delivered it (the primary key).
    pub job_id: String,
    /// The payment.
    pub payment_id: String,
    /// The document.
    pub document_id: String,
    /// The amount.
    pub amount_cents: i64,
    /// The attempt that delivered it first.
    pub attempt: u32,
    /// When it was delivered (RFC 3339).
    pub created_at: String,
}

/// Delivers a receipt to the sink in its own transaction. Keyed by the job
/// id with `INSERT OR IGNORE`: returns `false` when this job's receipt was
/// already there (a repeated attempt), in which case nothing changes.
pub async fn deliver_receipt(
    store: &SqliteStore,
    job_id: &JobId,
    attempt: u32,
    payload: &ReceiptPayload,
) -> Result<bool> {
    let (job_id, payload) = (job_id.to_string(), payload.clone());
    store
        .write(move |conn, now| {
            let n = conn.execute(
                "INSERT OR IGNORE INTO receipts (job_id, payment_id, document_id, amount_cents, attempt, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![
                    job_id,
                    payload.payment_id,
                    payload.document_id,
                    payload.amount_cents,
                    attempt,
                    now.as_millis()
                ],
            )?;
            Ok::<_, Error>(n == 1)
        })
        .await
}

/// Every receipt, oldest first.
pub async fn receipts(store: &SqliteStore) -> Result<Vec<Receipt>> {
    read(store, |conn| {
        let mut stmt = conn.prepare_cached(
            "SELECT job_id, payment_id, document_id, amount_cents, attempt, created_at
             FROM receipts ORDER BY created_at, job_id",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(Receipt {
                job_id: r.get(0)?,
                payment_id: r.get(1)?,
                document_id: r.get(2)?,
                amount_cents: r.get(3)?,
                attempt: r.get(4)?,
                created_at: Timestamp::from_millis(r.get(5)?).to_rfc3339(),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    })
    .await
}
