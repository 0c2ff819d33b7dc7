//! The crate's unit tests (those that need more than its public API).

mod plans;
mod store;
