//! A hold whose expiry job waits for its payment
//! (`reservations hold --await-payment`): the job is enqueued `waiting` for
//! the `paid` signal until the deadline, and `pay` sends that signal in
//! the payment's own transaction.

use errand::{JobId, NewJob, Schedule, Timestamp};

use crate::error::Result;
use crate::model::{expiry_job, expiry_job_id};

/// How a new hold's expiry job waits for its deadline.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Expiry {
    /// Due at the deadline (`reservations hold`).
    #[default]
    AtDeadline,
    /// Waiting for the payment's `paid` signal until the deadline, then
    /// run (`reservations hold --await-payment`): a paid hold's job ends
    /// when the payment commits.
    AwaitingPayment,
}

impl Expiry {
    /// The first expiry job of reservation `id`, whose deadline is
    /// `hold_until`, enqueued at `now`.
    pub fn first_job(self, id: &str, hold_until: Timestamp, now: Timestamp) -> Result<NewJob> {
        self.job(id, 1, hold_until, now)
    }

    /// The expiry job of generation `generation` (an extension's new
    /// deadline is the next generation).
    pub fn job(
        self,
        id: &str,
        generation: u32,
        hold_until: Timestamp,
        now: Timestamp,
    ) -> Result<NewJob> {
        match self {
            Expiry::AtDeadline => expiry_job(id, generation, hold_until),
            Expiry::AwaitingPayment => awaiting_payment(id, generation, hold_until, now),
        }
    }

    /// How the expiry job `previous` (the one an extension supersedes)
    /// waited: for the payment while it is still `waiting`, so the new
    /// deadline's job waits for it too.
    pub fn of(previous: Option<&errand::Job>) -> Expiry {
        match previous {
            Some(job) if job.state == errand::JobState::Waiting => Expiry::AwaitingPayment,
            _ => Expiry::AtDeadline,
        }
    }
}

/// The signal a payment sends to a hold's expiry job that waits for it.
pub const PAID_SIGNAL: &str = "paid";

/// The expiry job of a hold that waits for its payment: due at once but
/// `waiting` for the `paid` signal until the deadline (`hold_until`, which
/// is `now` plus the window); then, with the `run` policy, it runs without
/// a signal and expires the hold. A payment, in its own transaction,
/// signals it, and it runs at once, finds the hold paid and ends.
pub fn awaiting_payment(
    reservation_id: &str,
    generation: u32,
    hold_until: Timestamp,
    now: Timestamp,
) -> Result<NewJob> {
    Ok(expiry_job(reservation_id, generation, hold_until)?
        .scheduled(Schedule::Now)
        .awaiting(
            PAID_SIGNAL,
            Some(hold_until.since(now)),
            errand::OnAwaitTimeout::Run,
        )?)
}

/// The `paid` signal to a hold's current expiry job (`generation`), sent
/// in the payment's transaction, carrying the payment's time.
pub fn paid_signal(
    reservation_id: &str,
    generation: u32,
    paid_at: Timestamp,
) -> Result<errand::NewSignal> {
    let job = JobId::new(expiry_job_id(reservation_id, generation))?;
    Ok(errand::NewSignal::new(job, PAID_SIGNAL)?
        .with_payload(&serde_json::json!({ "paid_at": paid_at.to_rfc3339() }))?)
}

/// Whether the answer to a `paid` signal says the job was not waiting for
/// it (a hold made without waiting for its payment, or extended since):
/// then it runs at its deadline and finds the hold paid, as before.
pub fn not_waiting_for_payment(e: &errand::Error) -> bool {
    matches!(
        e,
        errand::Error::InvalidState { .. } | errand::Error::NotFound(_)
    )
}
