//! The harness's library part: the crash points and the steppable clock
//! the `errand-crashable` binary installs (see `crash`).

pub mod crash;
