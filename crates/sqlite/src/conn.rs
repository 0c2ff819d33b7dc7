//! What the statement runners of every file share: SQLite's errors as
//! Errand's, the clock readings an operation runs by, ids as the JSON
//! array the set-based statements read, and a read transaction.

use errand_core::{Error, Result, Timestamp};
use rusqlite::Connection;

/// Maps a SQLite error to Errand's error, naming the cause; any other
/// failure keeps the `rusqlite::Error` as its `source()`.
pub(crate) fn map_err(e: rusqlite::Error) -> Error {
    use rusqlite::ErrorCode;
    if let rusqlite::Error::SqliteFailure(f, _) = &e {
        match f.code {
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                return Error::Busy(e.to_string());
            }
            ErrorCode::DiskFull => return Error::StorageFull(e.to_string()),
            ErrorCode::NotADatabase => {
                return Error::NotADatabase(format!(
                    "the file is not a SQLite database ({e}); check the --db path"
                ));
            }
            _ => {}
        }
    }
    Error::storage_caused_by(e.to_string(), e)
}

/// The clock readings one operation runs by: `at` stamps rows and
/// schedules; `leases` judges whether a lease has expired. They differ only
/// for a while after the host's clock stepped forward (see
/// [`errand_core::StepGuard`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Now {
    pub(crate) at: Timestamp,
    pub(crate) leases: Timestamp,
}

pub(crate) fn json_list(ids: &[&str]) -> Result<String> {
    serde_json::to_string(ids).map_err(|e| Error::storage(format!("encoding job ids: {e}")))
}

/// Runs `f` on `conn` in one read transaction, so that what it reads
/// agrees.
pub(crate) fn in_one_read<T>(
    conn: &Connection,
    f: impl FnOnce(&Connection) -> Result<T>,
) -> Result<T> {
    conn.execute_batch("BEGIN").map_err(map_err)?;
    let out = f(conn);
    conn.execute_batch("COMMIT").map_err(map_err)?;
    out
}
