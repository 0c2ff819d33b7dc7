//! The application's error type and its exit codes.

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: a runtime failure (storage, I/O, a newer schema).
pub const EXIT_RUNTIME: u8 = 1;
/// Exit code: bad input (arguments, a database that is not usable).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the named reservation, unit or job does not exist.
pub const EXIT_NOT_FOUND: u8 = 3;
/// Exit code: refused because of the current state (already paid, expired,
/// cancelled, lapsed; a stay that overlaps another; a job that is not
/// dead). Nothing was written.
pub const EXIT_REFUSED: u8 = 4;
/// Exit code: `stats --check` found a threshold crossed (as `errand stats
/// --check` does).
pub const EXIT_THRESHOLD: u8 = 6;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The database named on the command line is not usable (missing, not
    /// SQLite, not initialised, unreachable); the message names the fix.
    #[error("{0}")]
    Database(String),

    /// The database was written by a newer program.
    #[error("{0}")]
    SchemaTooNew(String),

    /// The input was not acceptable.
    #[error("{0}")]
    Invalid(String),

    /// A reservation, unit or job does not exist.
    #[error("{0}")]
    NotFound(String),

    /// The expiry job names a reservation that does not exist: retrying
    /// cannot fix that, so the job is dead at once.
    #[error(
        "reservation `{0}` does not exist; an expiry for a missing reservation cannot succeed by retrying"
    )]
    MissingReservation(String),

    /// A business transition or an operator action was refused because of
    /// the current state; nothing was written.
    #[error("{0}")]
    Refused(String),

    /// The database did not answer in time (SQLite busy past its timeout,
    /// PostgreSQL statement or lock timeout). Retryable.
    #[error("database timeout: {0}")]
    Timeout(String),

    /// Applying the application's migrations failed.
    #[error("applying the reservations migrations failed: {0}")]
    Migration(String),

    /// An error from the job library.
    #[error(transparent)]
    Errand(errand::Error),

    /// A SQLite error in the application's own statements.
    #[error("database error: {0}")]
    Sqlite(errand::sqlite::rusqlite::Error),

    /// A PostgreSQL error in the application's own statements.
    #[error("database error: {0}")]
    Postgres(tokio_postgres::Error),
}

/// The refusal of a stay that overlaps a live hold or a paid booking of the
/// same unit. The SQLite trigger raises exactly this text, so a refusal by
/// the schema reads like the application's own.
pub const OVERLAP: &str = "the stay overlaps a live hold or a paid booking of the same unit";
/// The PostgreSQL exclusion constraint that keeps two held or paid stays
/// of one unit apart.
pub(crate) const OVERLAP_CONSTRAINT: &str = "reservations_no_overlap";

fn overlap_refused_by_schema() -> Error {
    Error::Refused(format!(
        "{OVERLAP} (refused by the database schema); choose other dates or another unit; nothing was written"
    ))
}

impl From<errand::Error> for Error {
    fn from(e: errand::Error) -> Self {
        match e {
            errand::Error::Busy(m) => Error::Timeout(m),
            other => Error::Errand(other),
        }
    }
}

impl From<errand::sqlite::rusqlite::Error> for Error {
    fn from(e: errand::sqlite::rusqlite::Error) -> Self {
        use errand::sqlite::rusqlite::{self, ErrorCode};
        if let rusqlite::Error::SqliteFailure(f, message) = &e {
            if matches!(f.code, ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked) {
                return Error::Timeout(e.to_string());
            }
            // The schema's trigger refused a row whose stay overlaps a live
            // hold or a paid booking of its unit.
            if f.code == ErrorCode::ConstraintViolation
                && message.as_deref().is_some_and(|m| m.contains(OVERLAP))
            {
                return overlap_refused_by_schema();
            }
        }
        Error::Sqlite(e)
    }
}

impl From<tokio_postgres::Error> for Error {
    fn from(e: tokio_postgres::Error) -> Self {
        use tokio_postgres::error::SqlState;
        let timeout = e.code().is_some_and(|c| {
            *c == SqlState::QUERY_CANCELED
                || *c == SqlState::LOCK_NOT_AVAILABLE
                || *c == SqlState::IDLE_IN_TRANSACTION_SESSION_TIMEOUT
        });
        if timeout {
            let msg = e
                .as_db_error()
                .map_or_else(|| e.to_string(), |d| d.message().to_owned());
            return Error::Timeout(msg);
        }
        // The exclusion constraint refused a row whose stay overlaps a live
        // hold or a paid booking of its unit.
        if e.code() == Some(&SqlState::EXCLUSION_VIOLATION)
            && e.as_db_error().and_then(|d| d.constraint()) == Some(OVERLAP_CONSTRAINT)
        {
            return overlap_refused_by_schema();
        }
        Error::Postgres(e)
    }
}

impl From<deadpool_postgres::PoolError> for Error {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        match e {
            deadpool_postgres::PoolError::Backend(e) => e.into(),
            deadpool_postgres::PoolError::Timeout(t) => {
                Error::Timeout(format!("no PostgreSQL connection in time ({t:?})"))
            }
            other => Error::Database(format!("cannot get a PostgreSQL connection: {other}")),
        }
    }
}

impl Error {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Database(_) | Error::Invalid(_) => EXIT_USAGE,
            Error::NotFound(_) | Error::MissingReservation(_) => EXIT_NOT_FOUND,
            Error::Refused(_) => EXIT_REFUSED,
            Error::Errand(e) => e.exit_code(),
            Error::SchemaTooNew(_)
            | Error::Timeout(_)
            | Error::Migration(_)
            | Error::Sqlite(_)
            | Error::Postgres(_) => EXIT_RUNTIME,
        }
    }

    /// Whether the database did not answer in time (the expiry is retried
    /// under the error class `timeout`).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout(_))
    }

    /// Whether retrying the expiry cannot help: the job goes to `dead` at
    /// once. Only a missing reservation and an invalid payload are; every
    /// database failure is retried (a timeout under its own class).
    pub fn is_permanent(&self) -> bool {
        matches!(self, Error::MissingReservation(_) | Error::Invalid(_))
    }
}

/// The application's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use errand::sqlite::rusqlite::Connection;

    #[test]
    fn the_overlap_trigger_reads_as_a_refusal() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(&format!(
            "CREATE TABLE t (x INTEGER) STRICT;
             CREATE TRIGGER t_refuse BEFORE INSERT ON t
             BEGIN SELECT RAISE(ABORT, '{OVERLAP}'); END;"
        ))
        .unwrap();
        let e = Error::from(conn.execute("INSERT INTO t VALUES (1)", []).unwrap_err());
        assert_eq!(e.exit_code(), EXIT_REFUSED, "{e}");
        assert!(e.to_string().contains(OVERLAP), "{e}");
        assert!(e.to_string().contains("nothing was written"), "{e}");
        // Another constraint stays a database error.
        conn.execute_batch("CREATE TABLE u (x INTEGER CHECK (x > 0)) STRICT;")
            .unwrap();
        let e = Error::from(conn.execute("INSERT INTO u VALUES (0)", []).unwrap_err());
        assert_eq!(e.exit_code(), EXIT_RUNTIME, "{e}");
    }
}
