//! # Field Notes receipts
//!
//! The reference application of Errand on SQLite: a document-publishing
//! service where a fixed demo author pays from a simulated wallet to
//! publish a document, and a background job delivers the receipt.
//!
//! * [`app`] holds the schema, the seed data, the payment (one transaction:
//!   debit, payment row, publish, enqueue the receipt job whose id is the
//!   payment id), the idempotent receipt sink and the operator views.
//! * [`work`] is the one-shot receipt worker and its retry policy.
//! * [`http`] is the JSON API (`GET /documents`, `GET /wallet`,
//!   `POST /payments`).
//!
//! The `fieldnotes` binary is a thin command line over these modules.
#![deny(missing_docs)]

pub mod app;
pub mod error;
pub mod http;
pub mod work;

pub use error::{
    EXIT_NOT_FOUND, EXIT_OK, EXIT_REFUSED, EXIT_RUNTIME, EXIT_USAGE, Error, PayRefusal, Result,
};

/// The library example of the repository's README — this application's
/// payment and receipt in miniature — compiled as a doctest so that it
/// stays true (not run: it serves until Ctrl-C).
#[doc = include_str!("../../../README.md")]
#[cfg(doctest)]
pub struct RepositoryReadmeDoctests;
