//! The Field Notes database: schema, seed data, payments, the receipt sink
//! and the operator views.
//!
//! Errand's tables and the application's live in one SQLite file. Errand's
//! schema comes from the library's migrations; the application's from
//! `migrations/` in this package, applied by `refinery` and recorded in
//! `fieldnotes_schema_history`.

use std::path::Path;

use errand::sqlite::SchemaStatus;
use errand::sqlite::rusqlite::{self, Connection, OptionalExtension, params};
use errand::{
    Admin, Job, JobArgs, JobFilter, JobId, JobOptions, NewJob, ReplayRequest, SqliteOptions,
    SqliteStore, Timestamp,
};
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::error::{Error, PayRefusal, Result};

mod embedded {
    refinery::embed_migrations!("migrations");
}

/// The version of the application schema this build knows.
pub const APP_SCHEMA_VERSION: i64 = 1;
/// Where `refinery` records the application's migrations.
pub const APP_HISTORY_TABLE: &str = "fieldnotes_schema_history";

/// The fixed demo author who owns the wallet and the documents.
pub const DEMO_AUTHOR: &str = "demo-author";
/// The wallet's balance when `init` first creates it.
pub const STARTING_BALANCE_CENTS: i64 = 10_000;
/// The document `pay` buys when none is named.
pub const DEFAULT_DOCUMENT: &str = "document-7";
/// The seeded documents: id, title, price in cents.
pub const SEED_DOCUMENTS: [(&str, &str, i64); 2] = [
    ("document-7", "Field notes no. 7", 500),
    ("document-8", "Field notes no. 8", 500),
];

/// The kind of the receipt job.
pub const RECEIPT_KIND: &str = "receipt";
/// The queue receipt jobs go to.
pub const RECEIPT_QUEUE: &str = "receipts";
/// The attempt budget of a receipt job (per replay cycle).
pub const RECEIPT_MAX_ATTEMPTS: u32 = 3;

// ---------------------------------------------------------------------------
// Opening and initialising

/// Refuses paths that cannot be a Field Notes database, with a message that
/// names the fix. `allow_missing` is for `init`, which creates the file.
fn check_file(path: &Path, allow_missing: bool) -> Result<()> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if allow_missing {
                return Ok(());
            }
            return Err(Error::Database(format!(
                "no database at {shown}; create it with `fieldnotes init {shown}` (or check the path)"
            )));
        }
        Err(e) => return Err(Error::Database(format!("cannot read {shown}: {e}"))),
    };
    if meta.is_dir() {
        return Err(Error::Database(format!(
            "{shown} is a directory; pass the path of a database file"
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
        "{} is not a SQLite database; pass a file made by `fieldnotes init`",
        path.display()
    ))
}

fn not_initialised(path: &Path, what: &str) -> Error {
    Error::Database(format!(
        "{} is not a Field Notes database ({what}); run `fieldnotes init {}` first",
        path.display(),
        path.display()
    ))
}

/// Rewords the library's open errors for this program's users.
fn open_error(path: &Path, e: errand::Error) -> Error {
    match e {
        errand::Error::NotErrand(_) => not_initialised(path, "no Errand tables"),
        errand::Error::SchemaOutdated(detail) => not_initialised(path, &detail),
        errand::Error::SchemaTooNew(detail) => Error::SchemaTooNew(format!(
            "{} was written by a newer program ({detail}); upgrade fieldnotes before using it",
            path.display()
        )),
        other => Error::Errand(other),
    }
}

/// The application schema version recorded in the database, if any.
pub fn app_schema_version(conn: &Connection) -> Result<Option<i64>> {
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

fn too_new_app_schema(path: &Path, v: i64) -> Error {
    Error::SchemaTooNew(format!(
        "{} was written by a newer program (Field Notes schema version {v}, this program knows up to {APP_SCHEMA_VERSION}); upgrade fieldnotes before using it",
        path.display()
    ))
}

/// Opens an initialised Field Notes database. Refuses a missing file, a file
/// that is not SQLite, a database without the Errand or Field Notes schema
/// (naming `fieldnotes init`), and a schema newer than this build.
pub fn open(path: impl AsRef<Path>) -> Result<SqliteStore> {
    open_with(path, SqliteOptions::default())
}

/// [`open`] with explicit store options (tests inject a clock this way).
pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<SqliteStore> {
    let path = path.as_ref();
    check_file(path, false)?;
    // Look before opening the store: opening switches the file to WAL mode,
    // and a database of another program must be left exactly as it was.
    check_schemas(path)?;
    let options = SqliteOptions {
        create: false,
        migrate: false,
        ..options
    };
    SqliteStore::open(path, options).map_err(|e| open_error(path, e))
}

/// Checks both schema versions on read-only connections.
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
        None => Err(not_initialised(path, "no Field Notes tables")),
        Some(v) if v > APP_SCHEMA_VERSION => Err(too_new_app_schema(path, v)),
        Some(v) if v < APP_SCHEMA_VERSION => Err(not_initialised(
            path,
            &format!("Field Notes schema version {v}, this program needs {APP_SCHEMA_VERSION}"),
        )),
        Some(_) => Ok(()),
    }
}

/// What `init` found and left.
#[derive(Clone, Debug, Serialize)]
pub struct InitReport {
    /// Whether this run created the wallet (false: it already existed and
    /// its money was left alone).
    pub created_wallet: bool,
    /// The wallet as it is now.
    pub wallet: Wallet,
    /// The documents as they are now.
    pub documents: Vec<Document>,
}

/// Creates the database file if needed, applies Errand's and the
/// application's migrations, and seeds the demo author (10000 cents) and
/// the two documents. Safe to run again: existing rows, and so the money,
/// are never reset.
pub fn init(path: impl AsRef<Path>) -> Result<InitReport> {
    let path = path.as_ref();
    check_file(path, true)?;
    // Errand's own migrations (and WAL mode) come with opening the store.
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
    conn.busy_timeout(std::time::Duration::from_secs(5))?;
    conn.execute_batch("PRAGMA foreign_keys = ON")?;
    if let Some(v) = app_schema_version(&conn)?
        && v > APP_SCHEMA_VERSION
    {
        return Err(too_new_app_schema(path, v));
    }
    embedded::migrations::runner()
        .set_migration_table_name(APP_HISTORY_TABLE)
        .run(&mut conn)
        .map_err(|e| Error::Migration(e.to_string()))?;

    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let created_wallet = tx.execute(
        "INSERT OR IGNORE INTO authors (id, name, balance_cents) VALUES (?1, ?2, ?3)",
        params![DEMO_AUTHOR, "Demo Author", STARTING_BALANCE_CENTS],
    )? == 1;
    for (id, title, price) in SEED_DOCUMENTS {
        tx.execute(
            "INSERT OR IGNORE INTO documents (id, author_id, title, price_cents) VALUES (?1, ?2, ?3, ?4)",
            params![id, DEMO_AUTHOR, title, price],
        )?;
    }
    let wallet = wallet_in(&tx)?;
    let documents = documents_in(&tx)?;
    tx.commit()?;
    Ok(InitReport {
        created_wallet,
        wallet,
        documents,
    })
}

/// Runs an application read on a pooled reader connection.
async fn read<T, F>(store: &SqliteStore, f: F) -> Result<T>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> Result<T> + Send + 'static,
{
    store.read(move |c| Ok(f(c))).await?
}

// ---------------------------------------------------------------------------
// Documents and the wallet

/// A document for sale.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Document {
    /// Its id, like `document-7`.
    pub id: String,
    /// Its title.
    pub title: String,
    /// Its price.
    pub price_cents: i64,
    /// Whether it was paid for and published.
    pub published: bool,
    /// When it was published (RFC 3339).
    pub published_at: Option<String>,
    /// The payment that published it.
    pub payment_id: Option<String>,
}

/// The demo author's wallet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Wallet {
    /// The author.
    pub author_id: String,
    /// The balance.
    pub balance_cents: i64,
}

fn documents_in(conn: &Connection) -> Result<Vec<Document>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, title, price_cents, published_at, payment_id FROM documents ORDER BY id",
    )?;
    let rows = stmt.query_map([], |r| {
        let published_at: Option<i64> = r.get(3)?;
        Ok(Document {
            id: r.get(0)?,
            title: r.get(1)?,
            price_cents: r.get(2)?,
            published: published_at.is_some(),
            published_at: published_at.map(|t| Timestamp::from_millis(t).to_rfc3339()),
            payment_id: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<rusqlite::Result<_>>()?)
}

fn wallet_in(conn: &Connection) -> Result<Wallet> {
    let balance = conn
        .query_row(
            "SELECT balance_cents FROM authors WHERE id = ?1",
            [DEMO_AUTHOR],
            |r| r.get(0),
        )
        .optional()?
        .ok_or_else(|| {
            Error::Database("the demo author is missing; run `fieldnotes init` again".into())
        })?;
    Ok(Wallet {
        author_id: DEMO_AUTHOR.to_owned(),
        balance_cents: balance,
    })
}

/// Every document, by id.
pub async fn documents(store: &SqliteStore) -> Result<Vec<Document>> {
    read(store, documents_in).await
}

/// The demo author's wallet.
pub async fn wallet(store: &SqliteStore) -> Result<Wallet> {
    read(store, wallet_in).await
}

// ---------------------------------------------------------------------------
// Payments

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

// ---------------------------------------------------------------------------
// The receipt sink

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

// ---------------------------------------------------------------------------
// The operator's view of the queue

/// A job as the operator sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct JobView {
    /// The stable id (the payment id).
    pub id: String,
    /// The queue.
    pub queue: String,
    /// The kind.
    pub kind: String,
    /// `ready`, `running`, `done`, `dead` or `cancelled`.
    pub state: String,
    /// Attempts started in the current replay cycle.
    pub attempts: u32,
    /// The attempt budget.
    pub max_attempts: u32,
    /// How many times an operator replayed it.
    pub replays: u32,
    /// When it is (or was) due (RFC 3339).
    pub available_at: String,
    /// End of the current lease, while running (RFC 3339).
    pub lease_until: Option<String>,
    /// The last recorded error.
    pub last_error: Option<String>,
    /// The class of the last error.
    pub last_error_class: Option<String>,
    /// When it was created (RFC 3339).
    pub created_at: String,
    /// When it reached done, dead or cancelled (RFC 3339).
    pub finished_at: Option<String>,
}

impl From<&Job> for JobView {
    fn from(j: &Job) -> Self {
        JobView {
            id: j.id.to_string(),
            queue: j.queue.to_string(),
            kind: j.kind.to_string(),
            state: j.state.as_str().to_owned(),
            attempts: j.attempts,
            max_attempts: j.max_attempts,
            replays: j.replays,
            available_at: j.available_at.to_rfc3339(),
            lease_until: j.lease_until.map(Timestamp::to_rfc3339),
            last_error: j.last_error.clone(),
            last_error_class: j.last_error_class.map(|c| c.as_str().to_owned()),
            created_at: j.created_at.to_rfc3339(),
            finished_at: j.finished_at.map(Timestamp::to_rfc3339),
        }
    }
}

impl std::fmt::Display for JobView {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} state={} attempts={} max_attempts={} replays={} available_at={} lease_until={}",
            self.id,
            self.state,
            self.attempts,
            self.max_attempts,
            self.replays,
            self.available_at,
            self.lease_until.as_deref().unwrap_or("-"),
        )?;
        match &self.last_error {
            Some(e) => write!(f, " last_error={e:?}"),
            None => f.write_str(" last_error=-"),
        }
    }
}

/// The operator's actions on the store.
fn admin(store: &SqliteStore) -> Admin {
    Admin::new(std::sync::Arc::new(store.clone()))
}

/// Every job (up to 10,000), oldest first.
pub async fn jobs(store: &SqliteStore) -> Result<Vec<JobView>> {
    let filter = JobFilter {
        limit: Some(10_000),
        ..JobFilter::default()
    };
    Ok(admin(store)
        .list(&filter)
        .await?
        .iter()
        .map(JobView::from)
        .collect())
}

/// The operator name used when `--by` is not given: `$USER`, then
/// `$LOGNAME`, else `unknown`.
pub fn default_operator() -> String {
    ["USER", "LOGNAME"]
        .into_iter()
        .filter_map(|v| std::env::var(v).ok())
        .map(|s| s.trim().to_owned())
        .find(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Replays one dead job: a fresh attempt budget, `replays` + 1, same id,
/// with the operator and reason in Errand's audit log. Refuses a job that
/// is not dead, and an unknown id, changing nothing.
pub async fn replay(
    store: &SqliteStore,
    job_id: &str,
    operator: &str,
    reason: Option<String>,
) -> Result<JobView> {
    let id = JobId::new(job_id).map_err(|e| match e {
        errand::Error::Invalid(m) => Error::Invalid(m),
        other => Error::Errand(other),
    })?;
    let admin = admin(store);
    let job = match admin.job(&id).await {
        Ok(job) => job,
        Err(errand::Error::NotFound(_)) => return Err(Error::JobNotFound(job_id.to_owned())),
        Err(e) => return Err(e.into()),
    };
    if job.state != errand::JobState::Dead {
        return Err(Error::NotReplayable {
            id: job_id.to_owned(),
            state: job.state.as_str().to_owned(),
        });
    }
    let request = ReplayRequest {
        ids: vec![id],
        operator: operator.to_owned(),
        reason,
    };
    match admin.replay(&request).await {
        Ok(jobs) => jobs
            .first()
            .map(JobView::from)
            .ok_or_else(|| Error::JobNotFound(job_id.to_owned())),
        // The state may have changed between the look and the replay; the
        // store's conditional update is the authority.
        Err(errand::Error::InvalidState { id, state, .. }) => {
            Err(Error::NotReplayable { id, state })
        }
        Err(errand::Error::NotFound(_)) => Err(Error::JobNotFound(job_id.to_owned())),
        Err(e) => Err(e.into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotency_keys_are_1_to_200_printable_ascii_characters() {
        assert!(IdempotencyKey::parse("order-1").is_ok());
        assert!(IdempotencyKey::parse("a b ~").is_ok());
        assert!(IdempotencyKey::parse(&"k".repeat(200)).is_ok());
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(201)).is_err());
        assert!(IdempotencyKey::parse("tab\t").is_err());
        assert!(IdempotencyKey::parse("café").is_err());
    }

    #[test]
    fn refusals_answer_with_their_status_and_code() {
        let r = PayRefusal::InsufficientFunds {
            document_id: "d".into(),
            price_cents: 500,
            balance_cents: 10,
        };
        let a = PayAnswer::of(&Err(r));
        assert_eq!(a.status, 402);
        let body: serde_json::Value = serde_json::from_str(&a.body).unwrap_or_default();
        assert_eq!(body["error"], "insufficient_funds");
        assert!(body["message"].as_str().unwrap_or("").contains("500"));
    }

    #[test]
    fn exit_codes_follow_the_contract() {
        use crate::error::*;
        let unknown = Error::Refused(PayRefusal::UnknownDocument {
            document_id: "x".into(),
        });
        assert_eq!(unknown.exit_code(), EXIT_NOT_FOUND);
        let published = Error::Refused(PayRefusal::AlreadyPublished {
            document_id: "x".into(),
        });
        assert_eq!(published.exit_code(), EXIT_REFUSED);
        assert_eq!(Error::JobNotFound("x".into()).exit_code(), EXIT_NOT_FOUND);
        assert_eq!(Error::Database("x".into()).exit_code(), EXIT_USAGE);
        assert_eq!(Error::SchemaTooNew("x".into()).exit_code(), EXIT_RUNTIME);
    }
}
