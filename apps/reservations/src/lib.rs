//! # Reservation holds
//!
//! The second reference application of Errand: a property-management hold
//! service whose background job has a business deadline, races with user
//! actions, and must never act late twice or extend a guest's hold by
//! accident. It runs on SQLite (a file path) and on PostgreSQL (a
//! `postgres://` URL).
//!
//! * [`app`] opens and initialises the database (Errand's schema plus the
//!   application's own, migrated by `refinery` into its own history table)
//!   and holds the business operations: `hold` (the reservation and its
//!   expiry job in one transaction), `pay`, `extend`, `cancel`, the expiry
//!   transition itself, the operator views and replay.
//! * [`expiry`] is the worker: the handler, its retry policy (7 attempts,
//!   5 s base doubling, capped at 15 minutes, plus up to 20% jitter) and the
//!   one-shot and service modes.
//! * [`stats`] turns the recorded lateness and outcomes into percentiles and
//!   a Prometheus exposition.
//!
//! ## Design decisions
//!
//! * **The deadline is business data, the delivery time is transport
//!   data.** The hold's `hold_until` lives in the reservation row and is
//!   copied into the job's payload; the job's `available_at` starts equal to
//!   it, and only `available_at` moves on a retry. The expiry compares the
//!   *stored* deadline with the database clock, so no retry, however late,
//!   can move a deadline, and an extension (which writes a new deadline and a
//!   new job) makes the old job a no-op.
//! * **One conditional transition.** The expiry is a single `UPDATE … WHERE
//!   status = 'held' AND hold_until = <the job's deadline> AND hold_until <=
//!   now`, and `pay`, `extend` and `cancel` are single `UPDATE … WHERE status
//!   = 'held' AND hold_until > now`. Whichever commits first wins; the other
//!   changes no row and reports why. On SQLite the write lock serializes
//!   them; on PostgreSQL the row lock does, and the loser's `WHERE` is
//!   re-evaluated against the winner's committed row.
//! * **At-least-once delivery, idempotent effect.** The transition commits
//!   in the application's transaction together with a row keyed by the job's
//!   idempotency key; the worker acknowledges afterwards. A redelivery (a
//!   crash between the two, a lost lease) finds the key and reports
//!   `already-done` without a second transition.
#![deny(missing_docs)]

pub mod app;
pub mod error;
pub mod expiry;
mod model;
mod payment;
mod pg;
mod sqlite;
pub mod stats;

pub use error::{
    EXIT_NOT_FOUND, EXIT_OK, EXIT_REFUSED, EXIT_RUNTIME, EXIT_THRESHOLD, EXIT_USAGE, Error, Result,
};
