//! Driver and pool errors as Errand's errors.

use errand_core::Error;

/// Maps a driver error to Errand's error.
pub(crate) fn map_err(e: tokio_postgres::Error) -> Error {
    use tokio_postgres::error::SqlState;
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        if *code == SqlState::UNDEFINED_TABLE || *code == SqlState::INVALID_SCHEMA_NAME {
            return Error::SchemaOutdated(db.message().to_owned());
        }
        if *code == SqlState::DISK_FULL || *code == SqlState::OUT_OF_MEMORY {
            return Error::StorageFull(db.message().to_owned());
        }
        if *code == SqlState::T_R_SERIALIZATION_FAILURE
            || *code == SqlState::T_R_DEADLOCK_DETECTED
            || *code == SqlState::LOCK_NOT_AVAILABLE
        {
            return Error::Busy(db.message().to_owned());
        }
        if *code == SqlState::CHECK_VIOLATION || *code == SqlState::INVALID_TEXT_REPRESENTATION {
            return Error::invalid(db.message().to_owned());
        }
        let message = format!("{}: {}", code.code(), db.message());
        return Error::storage_caused_by(message, e);
    }
    Error::storage_caused_by(format!("PostgreSQL: {e}"), e)
}

pub(crate) fn pool_err(e: deadpool_postgres::PoolError) -> Error {
    match e {
        deadpool_postgres::PoolError::Backend(e) => map_err(e),
        other => Error::storage(format!("cannot get a PostgreSQL connection: {other}")),
    }
}
