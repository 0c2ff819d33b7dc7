//! Observation points, for fault injection.
//!
//! A worker passes through a few moments the delivery contract is about: a
//! claim has committed, a lease renewal is due, a handler has finished but
//! its settlement is not written, an acknowledgment has committed. A
//! process may install one [`Probe`] that is told of each of them, so a
//! fault harness can crash the process at exactly that moment (the
//! workspace's `errand-harness` does, in its `errand-crashable` binary).
//!
//! Nothing is installed unless a program calls [`install`]; then each
//! point costs one atomic load. The `errand` command never installs one.

use std::fmt;
use std::sync::OnceLock;

use errand_core::{ClaimedJob, Lease};

/// A moment of a worker's life a [`Probe`] is told of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Point {
    /// A claim has committed; no handler has started.
    ClaimCommitted,
    /// A lease renewal is due and about to be written.
    Heartbeat,
    /// The handler has finished (its effect is done); the settlement is not
    /// yet written.
    BeforeSettle,
    /// An acknowledgment has committed; nothing is reported yet.
    SettleCommitted,
}

/// What a process wants to be told of. Every method has an empty default.
pub trait Probe: Send + Sync + fmt::Debug + 'static {
    /// The worker is at `point`.
    fn at(&self, point: Point) {
        let _ = point;
    }

    /// A claim of these jobs has committed (before [`Point::ClaimCommitted`]).
    fn claimed(&self, jobs: &[ClaimedJob]) {
        let _ = jobs;
    }

    /// Acknowledgments of these leases are about to be written in one
    /// transaction (a batch, or with the next claim).
    fn acks_sending(&self, leases: &[Lease]) {
        let _ = leases;
    }

    /// A batch of acknowledgments has committed and no waiter has been told
    /// yet: `acked[i]` says whether `leases[i]` was acknowledged.
    fn acks_committed(&self, leases: &[Lease], acked: &[bool]) {
        let _ = (leases, acked);
    }
}

static PROBE: OnceLock<Box<dyn Probe>> = OnceLock::new();

/// Installs this process's probe, once.
///
/// # Errors
/// Gives the probe back when one is already installed.
pub fn install(probe: Box<dyn Probe>) -> Result<(), Box<dyn Probe>> {
    PROBE.set(probe)
}

#[inline]
pub(crate) fn at(point: Point) {
    if let Some(p) = PROBE.get() {
        p.at(point);
    }
}

#[inline]
pub(crate) fn claimed(jobs: &[ClaimedJob]) {
    if let Some(p) = PROBE.get() {
        p.claimed(jobs);
    }
}

#[inline]
pub(crate) fn acks_sending(leases: &[Lease]) {
    if let Some(p) = PROBE.get() {
        p.acks_sending(leases);
    }
}

#[inline]
pub(crate) fn acks_committed(leases: &[Lease], acked: &[bool]) {
    if let Some(p) = PROBE.get() {
        p.acks_committed(leases, acked);
    }
}
