//! The error type shared by every store and the library.

/// Errand's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What went wrong. Each variant says what the caller can do about it.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The input was not acceptable; the message says what to change.
    #[error("invalid input: {0}")]
    Invalid(String),

    /// No job has this id.
    #[error("no job with id `{0}`")]
    NotFound(String),

    /// No stored job carries this workflow id.
    #[error(
        "no workflow with id `{0}`: no stored job carries it (check the id; its steps may have been pruned)"
    )]
    NoSuchWorkflow(String),

    /// No batch has this id.
    #[error("no batch with id `{0}`: none was started or sealed under it (check the id)")]
    NoSuchBatch(String),

    /// No stored schedule has this name.
    #[error("no schedule named `{0}` is stored (check the name against the stored schedules)")]
    NoSuchSchedule(String),

    /// The job exists but its state does not allow the operation.
    #[error("job `{id}` is {state}: {hint}")]
    InvalidState {
        /// The job's id.
        id: String,
        /// The job's current state.
        state: String,
        /// What the state allows instead.
        hint: String,
    },

    /// A settlement changed no row: the lease token no longer matches, the
    /// lease expired, or the job is no longer running. The worker has lost
    /// ownership and must not touch the job again.
    #[error("lease lost for job `{id}` (attempt {attempt}): another owner or the sweep has it now")]
    LeaseLost {
        /// The job's id.
        id: String,
        /// The attempt the caller held.
        attempt: u32,
    },

    /// There is no database where one was named, or what is there is not a
    /// database of this backend (a text file, a directory). The message
    /// says where and what to pass instead.
    #[error("{0}")]
    NotADatabase(String),

    /// A database without Errand's tables (another program's, or a new
    /// empty one): `errand migrate` adds them.
    #[error(
        "{0} has no Errand tables; run `errand migrate` to add them, or check the database named"
    )]
    NotErrand(String),

    /// The database schema is older than this program expects.
    #[error("the database schema is not ready: {0}; run `errand migrate` first")]
    SchemaOutdated(String),

    /// The database schema is newer than this program knows.
    #[error(
        "the database schema is newer than this program knows ({0}); upgrade errand before using this database"
    )]
    SchemaTooNew(String),

    /// The database holds Errand's schema as a development build before
    /// release 0.1 left it: no program upgrades it; it must be recreated.
    #[error(
        "{0} holds Errand's schema from a development build before release 0.1, which this program cannot upgrade: keep what you need from it, then recreate it (move the SQLite file aside, or DROP SCHEMA ... CASCADE on PostgreSQL) and run `errand migrate`"
    )]
    SchemaUnreleased(String),

    /// The database is busy beyond the configured timeout; retry later.
    #[error("the database is busy: {0}; retry, or raise the busy timeout")]
    Busy(String),

    /// The storage is full; free space and retry. Nothing was acknowledged.
    #[error("the database storage is full: {0}; free disk space, then retry")]
    StorageFull(String),

    /// A wait ended before what it waited for happened (a job still not
    /// finished when `Client::wait`'s timeout passed); nothing changed.
    #[error("{0}")]
    TimedOut(String),

    /// The store was shut down or its writer stopped.
    #[error("the store is closed: {0}")]
    Closed(String),

    /// Any other storage failure. `source()` is the driver's own error
    /// (a `rusqlite::Error`, a `tokio_postgres::Error`, an `sqlx::Error`)
    /// when one caused it.
    #[error("storage error: {message}")]
    Storage {
        /// What failed.
        message: String,
        /// The driver's error behind it, if any.
        #[source]
        source: Option<Cause>,
    },
}

/// The error that caused another, shared so that [`Error`] stays `Clone`.
/// It dereferences to the driver's error itself, which is what
/// [`std::error::Error::source`] returns (so `downcast_ref` finds the
/// driver's type).
#[derive(Clone, Debug)]
pub struct Cause(std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>);

impl std::ops::Deref for Cause {
    type Target = dyn std::error::Error + Send + Sync + 'static;

    fn deref(&self) -> &Self::Target {
        &*self.0
    }
}

impl Error {
    /// A storage failure with no other error behind it.
    pub fn storage(message: impl Into<String>) -> Self {
        Error::Storage {
            message: message.into(),
            source: None,
        }
    }

    /// A storage failure caused by `source` (a driver's error), which
    /// [`std::error::Error::source`] returns.
    pub fn storage_caused_by(
        message: impl Into<String>,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        Error::Storage {
            message: message.into(),
            source: Some(Cause(std::sync::Arc::new(source))),
        }
    }

    /// Shorthand for [`Error::Invalid`].
    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::Invalid(msg.into())
    }

    /// A stable machine-readable code for this error (used by the CLI's JSON
    /// output and HTTP problem responses).
    pub fn code(&self) -> &'static str {
        match self {
            Error::Invalid(_) => "invalid",
            Error::NotFound(_)
            | Error::NoSuchWorkflow(_)
            | Error::NoSuchBatch(_)
            | Error::NoSuchSchedule(_) => "not_found",
            Error::InvalidState { .. } => "invalid_state",
            Error::LeaseLost { .. } => "lease_lost",
            Error::NotADatabase(_) => "not_a_database",
            Error::NotErrand(_) => "not_errand",
            Error::SchemaOutdated(_) => "schema_outdated",
            Error::SchemaTooNew(_) => "schema_too_new",
            Error::SchemaUnreleased(_) => "schema_unreleased",
            Error::Busy(_) => "busy",
            Error::TimedOut(_) => "timed_out",
            Error::StorageFull(_) => "storage_full",
            Error::Closed(_) => "closed",
            Error::Storage { .. } => "storage",
        }
    }

    /// A short title for this error, the same wherever one is shown: the
    /// API's problem documents and the dashboard's error pages.
    pub fn title(&self) -> &'static str {
        match self {
            Error::Invalid(_) => "Invalid input",
            Error::NotFound(_)
            | Error::NoSuchWorkflow(_)
            | Error::NoSuchBatch(_)
            | Error::NoSuchSchedule(_) => "Not found",
            Error::InvalidState { .. } => "Refused in this state",
            Error::LeaseLost { .. } => "Lease lost",
            Error::Busy(_) => "Database busy",
            Error::TimedOut(_) => "Timed out",
            Error::StorageFull(_) => "Storage full",
            Error::NotADatabase(_) => "No database",
            Error::NotErrand(_)
            | Error::SchemaOutdated(_)
            | Error::SchemaTooNew(_)
            | Error::SchemaUnreleased(_) => "Schema not ready",
            Error::Closed(_) => "Store closed",
            Error::Storage { .. } => "Storage error",
        }
    }

    /// The exit code a command ends with on this error: the one map the
    /// `errand` command and the reference applications share, a stable
    /// interface for scripts. 2: input the caller can fix; 3: what was
    /// named does not exist; 4: its state refuses the action; 5: the
    /// database is not Errand's, or its schema is missing, from a
    /// development build, or at another version; 1: anything else (storage,
    /// busy, closed). Every variant is placed here, so a new one must be.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Invalid(_) | Error::NotADatabase(_) => 2,
            Error::NotFound(_)
            | Error::NoSuchWorkflow(_)
            | Error::NoSuchBatch(_)
            | Error::NoSuchSchedule(_) => 3,
            Error::InvalidState { .. } | Error::LeaseLost { .. } => 4,
            Error::NotErrand(_)
            | Error::SchemaOutdated(_)
            | Error::SchemaTooNew(_)
            | Error::SchemaUnreleased(_) => 5,
            Error::Busy(_)
            | Error::TimedOut(_)
            | Error::Closed(_)
            | Error::StorageFull(_)
            | Error::Storage { .. } => 1,
        }
    }

    /// The HTTP status an answer carrying this error has: the one map the
    /// API and the dashboard share. Refusals the caller can fix are 4xx
    /// (`invalid` 400, `not_found` 404, `invalid_state` and `lease_lost`
    /// 409); conditions that pass are 503 (busy, closed, a database that is
    /// not one or not at this program's version) or 507 (storage full);
    /// anything else is 500.
    pub fn http_status(&self) -> u16 {
        match self {
            Error::Invalid(_) => 400,
            Error::NotFound(_)
            | Error::NoSuchWorkflow(_)
            | Error::NoSuchBatch(_)
            | Error::NoSuchSchedule(_) => 404,
            Error::InvalidState { .. } | Error::LeaseLost { .. } => 409,
            Error::Busy(_)
            | Error::Closed(_)
            | Error::NotADatabase(_)
            | Error::NotErrand(_)
            | Error::SchemaOutdated(_)
            | Error::SchemaTooNew(_)
            | Error::SchemaUnreleased(_) => 503,
            Error::TimedOut(_) => 504,
            Error::StorageFull(_) => 507,
            Error::Storage { .. } => 500,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every variant has its status, and each class of error lands in its
    /// class of status.
    #[test]
    fn each_error_has_one_http_status() {
        let cases = [
            (Error::invalid("x"), 400),
            (Error::NotFound("j".into()), 404),
            (Error::NoSuchWorkflow("w".into()), 404),
            (Error::NoSuchBatch("b".into()), 404),
            (Error::NoSuchSchedule("s".into()), 404),
            (
                Error::InvalidState {
                    id: "j".into(),
                    state: "done".into(),
                    hint: "h".into(),
                },
                409,
            ),
            (
                Error::LeaseLost {
                    id: "j".into(),
                    attempt: 1,
                },
                409,
            ),
            (Error::NotADatabase("n".into()), 503),
            (Error::NotErrand("o".into()), 503),
            (Error::SchemaOutdated("v1".into()), 503),
            (Error::SchemaTooNew("v99".into()), 503),
            (Error::SchemaUnreleased("db".into()), 503),
            (Error::Busy("b".into()), 503),
            (Error::TimedOut("t".into()), 504),
            (Error::StorageFull("f".into()), 507),
            (Error::Closed("c".into()), 503),
            (Error::storage("s"), 500),
        ];
        for (e, status) in cases {
            assert_eq!(e.http_status(), status, "{}", e.code());
        }
    }

    /// Every variant has its exit code, each class of error its code.
    #[test]
    fn each_error_has_one_exit_code() {
        let cases = [
            (Error::invalid("x"), 2),
            (Error::NotADatabase("n".into()), 2),
            (Error::NotFound("j".into()), 3),
            (Error::NoSuchWorkflow("w".into()), 3),
            (Error::NoSuchBatch("b".into()), 3),
            (Error::NoSuchSchedule("s".into()), 3),
            (
                Error::InvalidState {
                    id: "j".into(),
                    state: "done".into(),
                    hint: "h".into(),
                },
                4,
            ),
            (
                Error::LeaseLost {
                    id: "j".into(),
                    attempt: 1,
                },
                4,
            ),
            (Error::NotErrand("o".into()), 5),
            (Error::SchemaOutdated("v1".into()), 5),
            (Error::SchemaTooNew("v99".into()), 5),
            (Error::SchemaUnreleased("db".into()), 5),
            (Error::Busy("b".into()), 1),
            (Error::TimedOut("t".into()), 1),
            (Error::StorageFull("f".into()), 1),
            (Error::Closed("c".into()), 1),
            (Error::storage("s"), 1),
        ];
        for (e, code) in cases {
            assert_eq!(e.exit_code(), code, "{}", e.code());
        }
    }

    #[test]
    fn a_storage_error_keeps_the_error_that_caused_it() {
        use std::error::Error as _;
        let cause = std::io::Error::other("disk on fire");
        let e = Error::storage_caused_by("the write failed", cause);
        assert_eq!(e.to_string(), "storage error: the write failed");
        let source = e.source().expect("a source");
        assert_eq!(source.to_string(), "disk on fire");
        assert!(source.downcast_ref::<std::io::Error>().is_some());
        let copy = e.clone();
        assert!(copy.source().is_some(), "a clone keeps it");
        assert!(Error::storage("plain").source().is_none());
    }
}
