//! Payments: the receipt job's payload, one payment in one transaction,
//! and payments under an idempotency key with their stored answers.

use errand::sqlite::rusqlite::{Connection, OptionalExtension, params};
use errand::{JobArgs, JobId, JobOptions, NewJob, SqliteStore, Timestamp};
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{RECEIPT_KIND, RECEIPT_MAX_ATTEMPTS, RECEIPT_QUEUE};
use crate::error::{Error, PayRefusal, Result};

/// The payload of a receipt job.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiptPayload {
    /// The payment (also the job id).
    pub payment_id: String,
    /// The document paid for.
    pub document_id: String,
    /// The amount paid.
    pub amount_cents: i64,
}

/// A receipt is a typed job: its kind, queue and attempt budget are
/// written here once, for the enqueue in [`pay_in`] and the handler in
/// `work.rs` alike.
impl JobArgs for ReceiptPayload {
    const KIND: &'static str = RECEIPT_KIND;
    fn options() -> JobOptions {
        JobOptions {
            queue: Some(RECEIPT_QUEUE),
            max_attempts: Some(RECEIPT_MAX_ATTEMPTS),
            ..JobOptions::default()
        }
    }
}

/// A committed payment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Payment {
    /// The payment id (a UUIDv7).
    pub payment_id: String,
    /// The receipt job's id: always equal to the payment id.
    pub job_id: String,
    /// The document now published.
    pub document_id: String,
    /// The amount debited.
    pub amount_cents: i64,
    /// The wallet's balance after the debit.
    pub balance_cents: i64,
    /// When the payment committed (RFC 3339).
    pub created_at: String,
}

/// Makes one payment on `conn`, inside the transaction the caller has open:
/// checks the document exists, is not published and is affordable, debits
/// the wallet, records the payment, publishes the document and enqueues the
/// receipt job whose id is the payment id. A refusal writes nothing.
///
/// All of it runs on the store's single writer, so the checks and the
/// writes cannot interleave with another payment.
pub fn pay_in(
    conn: &Connection,
    now: Timestamp,
    document_id: &str,
) -> Result<std::result::Result<Payment, PayRefusal>> {
    let found: Option<(String, i64, Option<i64>)> = conn
        .query_row(
            "SELECT author_id, price_cents, published_at FROM documents WHERE id = ?1",
            [document_id],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .optional()?;
    let Some((author_id, price, published_at)) = found else {
        return Ok(Err(PayRefusal::UnknownDocument {
            document_id: document_id.to_owned(),
        }));
    };
    if published_at.is_some() {
        return Ok(Err(PayRefusal::AlreadyPublished {
            document_id: document_id.to_owned(),
        }));
    }
    let balance: i64 = conn.query_row(
        "SELECT balance_cents FROM authors WHERE id = ?1",
        [&author_id],
        |r| r.get(0),
    )?;
    if balance < price {
        return Ok(Err(PayRefusal::InsufficientFunds {
            document_id: document_id.to_owned(),
            price_cents: price,
            balance_cents: balance,
        }));
    }

    let payment_id = uuid::Uuid::now_v7().to_string();
    let debited = conn.execute(
        "UPDATE authors SET balance_cents = balance_cents - ?1 WHERE id = ?2 AND balance_cents >= ?1",
        params![price, author_id],
    )?;
    conn.execute(
        "INSERT INTO payments (id, author_id, document_id, amount_cents, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
        params![payment_id, author_id, document_id, price, now.as_millis()],
    )?;
    let published = conn.execute(
        "UPDATE documents SET published_at = ?1, payment_id = ?2 WHERE id = ?3 AND published_at IS NULL",
        params![now.as_millis(), payment_id, document_id],
    )?;
    if debited != 1 || published != 1 {
        // Cannot happen while every write goes through the single writer;
        // refuse loudly rather than commit half a payment.
        return Err(Error::Invalid(format!(
            "the payment for `{document_id}` lost a race it should not be able to lose; nothing was written"
        )));
    }
    let payload = ReceiptPayload {
        payment_id: payment_id.clone(),
        document_id: document_id.to_owned(),
        amount_cents: price,
    };
    let job = NewJob::of(&payload)?.with_id(JobId::new(payment_id.clone())?);
    let inserted = errand::sqlite::enqueue_in(conn, &job, now)?;
    if !inserted.created {
        return Err(Error::Invalid(format!(
            "a job with the fresh payment id `{payment_id}` already exists; nothing was written"
        )));
    }
    Ok(Ok(Payment {
        job_id: inserted.job.id.to_string(),
        payment_id,
        document_id: document_id.to_owned(),
        amount_cents: price,
        balance_cents: balance - price,
        created_at: now.to_rfc3339(),
    }))
}

/// Makes one payment in one transaction (see [`pay_in`]). A refusal is
/// [`Error::Refused`].
pub async fn pay(store: &SqliteStore, document_id: &str) -> Result<Payment> {
    let document_id = document_id.to_owned();
    store
        .write(move |conn, now| pay_in(conn, now, &document_id)?.map_err(Error::Refused))
        .await
}

/// A validated `Idempotency-Key`: 1 to 200 printable ASCII characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// Longest accepted key.
    pub const MAX_LEN: usize = 200;

    /// Validates a key.
    pub fn parse(key: &str) -> Result<Self> {
        if key.is_empty() || key.len() > Self::MAX_LEN {
            return Err(Error::Invalid(format!(
                "an Idempotency-Key must be 1 to {} characters long (got {})",
                Self::MAX_LEN,
                key.len()
            )));
        }
        if !key.chars().all(|c| (' '..='~').contains(&c)) {
            return Err(Error::Invalid(
                "an Idempotency-Key may hold only printable ASCII characters".into(),
            ));
        }
        Ok(IdempotencyKey(key.to_owned()))
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// The answer to a payment request, as the HTTP API gives it: a status and
/// a JSON body. With an idempotency key it is stored and given again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PayAnswer {
    /// The HTTP status (201, or the refusal's).
    pub status: u16,
    /// The JSON body, exactly as first sent.
    pub body: String,
    /// Whether this is a stored answer to an earlier request.
    pub replayed: bool,
}

impl PayAnswer {
    /// The answer for a payment or a refusal.
    pub fn of(outcome: &std::result::Result<Payment, PayRefusal>) -> Self {
        match outcome {
            Ok(p) => PayAnswer {
                status: 201,
                body: json!({
                    "payment_id": p.payment_id,
                    "job_id": p.job_id,
                    "document_id": p.document_id,
                    "amount_cents": p.amount_cents,
                    "balance_cents": p.balance_cents,
                    "created_at": p.created_at,
                })
                .to_string(),
                replayed: false,
            },
            Err(r) => PayAnswer {
                status: r.http_status(),
                body: error_body(r.code(), &r.to_string()),
                replayed: false,
            },
        }
    }
}

/// The JSON error body every API error uses.
pub fn error_body(code: &str, message: &str) -> String {
    json!({ "error": code, "message": message }).to_string()
}

/// Makes a payment under an idempotency key: the first request's answer
/// (payment or refusal) is stored with the key in the same transaction as
/// the payment, and every later request with the key gets that answer back
/// without paying again. Reusing a key for another document is refused.
pub async fn pay_idempotent(
    store: &SqliteStore,
    document_id: &str,
    key: &IdempotencyKey,
) -> Result<PayAnswer> {
    let document_id = document_id.to_owned();
    let key = key.clone();
    store
        .write(move |conn, now| {
            let stored: Option<(String, i64, String)> = conn
                .query_row(
                    "SELECT document_id, status, body FROM idempotency_keys WHERE key = ?1",
                    [key.as_str()],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .optional()?;
            if let Some((first, status, body)) = stored {
                if first != document_id {
                    return Err(Error::IdempotencyKeyReused {
                        first,
                        requested: document_id,
                    });
                }
                let status = u16::try_from(status)
                    .map_err(|_| Error::Invalid(format!("stored status {status} is invalid")))?;
                return Ok(PayAnswer {
                    status,
                    body,
                    replayed: true,
                });
            }
            let answer = PayAnswer::of(&pay_in(conn, now, &document_id)?);
            conn.execute(
                "INSERT INTO idempotency_keys (key, document_id, status, body, created_at) VALUES (?1, ?2, ?3, ?4, ?5)",
                params![key.as_str(), document_id, answer.status, answer.body, now.as_millis()],
            )?;
            Ok(answer)
        })
        .await
}
