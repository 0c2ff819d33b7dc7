//! The application's error type and its exit codes.

use std::fmt;

/// Exit code: success.
pub const EXIT_OK: u8 = 0;
/// Exit code: a runtime failure (storage, I/O, a newer schema).
pub const EXIT_RUNTIME: u8 = 1;
/// Exit code: bad input (arguments, a path that is not a usable database).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: the named document or job does not exist.
pub const EXIT_NOT_FOUND: u8 = 3;
/// Exit code: refused because of the current state (already published,
/// insufficient funds, job not dead).
pub const EXIT_REFUSED: u8 = 4;

/// Why a payment was refused. Nothing is written when a payment is refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PayRefusal {
    /// No document has this id.
    UnknownDocument {
        /// The requested document.
        document_id: String,
    },
    /// The document was already paid for and published.
    AlreadyPublished {
        /// The requested document.
        document_id: String,
    },
    /// The wallet holds less than the price.
    InsufficientFunds {
        /// The requested document.
        document_id: String,
        /// Its price.
        price_cents: i64,
        /// The wallet's balance.
        balance_cents: i64,
    },
}

impl PayRefusal {
    /// The stable error code used in JSON bodies.
    pub fn code(&self) -> &'static str {
        match self {
            PayRefusal::UnknownDocument { .. } => "unknown_document",
            PayRefusal::AlreadyPublished { .. } => "already_published",
            PayRefusal::InsufficientFunds { .. } => "insufficient_funds",
        }
    }

    /// The HTTP status of the refusal.
    pub fn http_status(&self) -> u16 {
        match self {
            PayRefusal::UnknownDocument { .. } => 404,
            PayRefusal::AlreadyPublished { .. } => 409,
            PayRefusal::InsufficientFunds { .. } => 402,
        }
    }
}

impl fmt::Display for PayRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PayRefusal::UnknownDocument { document_id } => {
                write!(f, "there is no document `{document_id}`")
            }
            PayRefusal::AlreadyPublished { document_id } => write!(
                f,
                "document `{document_id}` is already published; it cannot be paid for twice"
            ),
            PayRefusal::InsufficientFunds {
                document_id,
                price_cents,
                balance_cents,
            } => write!(
                f,
                "insufficient funds: document `{document_id}` costs {price_cents} cents and the wallet holds {balance_cents} cents"
            ),
        }
    }
}

/// What went wrong in Field Notes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path is not a usable Field Notes database (missing, not SQLite,
    /// not initialised); the message names the fix.
    #[error("{0}")]
    Database(String),

    /// The database was written by a newer program.
    #[error("{0}")]
    SchemaTooNew(String),

    /// The input was not acceptable.
    #[error("{0}")]
    Invalid(String),

    /// A payment was refused; nothing was written.
    #[error("{0}")]
    Refused(PayRefusal),

    /// No job has this id.
    #[error("no job with id `{0}` in this database (copy the id from `fieldnotes jobs`)")]
    JobNotFound(String),

    /// Replay was asked for a job that is not dead.
    #[error(
        "job `{id}` is {state}, not dead: only a dead job can be replayed; nothing was changed"
    )]
    NotReplayable {
        /// The job.
        id: String,
        /// Its current state.
        state: String,
    },

    /// An idempotency key was reused for a different payment.
    #[error(
        "the Idempotency-Key was first used to pay for `{first}`, not `{requested}`; use a new key for a different payment"
    )]
    IdempotencyKeyReused {
        /// The document of the first request.
        first: String,
        /// The document of this request.
        requested: String,
    },

    /// Applying the application's migrations failed.
    #[error("applying the Field Notes migrations failed: {0}")]
    Migration(String),

    /// An error from the job library.
    #[error(transparent)]
    Errand(errand::Error),

    /// A SQL error in the application's own statements.
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
}

impl From<errand::Error> for Error {
    fn from(e: errand::Error) -> Self {
        Error::Errand(e)
    }
}

impl Error {
    /// The process exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            Error::Database(_) | Error::Invalid(_) => EXIT_USAGE,
            Error::Refused(PayRefusal::UnknownDocument { .. }) | Error::JobNotFound(_) => {
                EXIT_NOT_FOUND
            }
            Error::Refused(_)
            | Error::NotReplayable { .. }
            | Error::IdempotencyKeyReused { .. } => EXIT_REFUSED,
            Error::Errand(e) => e.exit_code(),
            Error::SchemaTooNew(_) | Error::Migration(_) | Error::Sqlite(_) => EXIT_RUNTIME,
        }
    }
}

/// Field Notes' result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
