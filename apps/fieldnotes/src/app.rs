//! The Field Notes database: schema, seed data, payments, the receipt sink
//! and the operator views.
//!
//! Errand's tables and the application's live in one SQLite file. Errand's
//! schema comes from the library's migrations; the application's from
//! `migrations/` in this package, applied by `refinery` and recorded in
//! `fieldnotes_schema_history`.
//!
//! This file opens and initialises the database and reads the documents
//! and the wallet; the payments live in `app/payments.rs`, the receipt sink
//! in `app/receipts.rs` and the operator's view of the queue in
//! `app/admin.rs`. All of it is reached through this module.

use std::path::Path;

use errand::sqlite::SchemaStatus;
use errand::sqlite::rusqlite::{self, Connection, OptionalExtension, params};
use errand::{SqliteOptions, SqliteStore, Timestamp};
use serde::Serialize;

use crate::error::{Error, Result};

mod admin;
mod payments;
mod receipts;

pub use admin::{JobView, default_operator, jobs, replay};
pub use payments::{
    IdempotencyKey, PayAnswer, Payment, ReceiptPayload, error_body, pay, pay_idempotent, pay_in,
};
pub use receipts::{Receipt, deliver_receipt, receipts};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::PayRefusal;

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
