//! The operator's replay of a dead expiry job, audited by Errand and by
//! the application's `replay_audit`.

use errand::{Job, JobId, JobState, ReplayRequest, Timestamp};
use serde::Serialize;

use super::{App, Backend, JobView};
use crate::error::{Error, Result};
use crate::model::{AuditEntry, EXPIRY_KIND, ExpiryPayload, Status, idempotency_key, validate_id};

impl App {
    /// Replays one dead expiry job: a fresh attempt budget, the same job id,
    /// audited by Errand (operator and reason) and by the application's
    /// `replay_audit` (the key kept or minted). The idempotency key is kept
    /// unless `new_key` is set, which needs `confirm_eligible` as well and a
    /// reservation that is still held.
    pub async fn replay(&self, req: &Replay) -> Result<ReplayReport> {
        check_replay_flags(req.new_key, req.confirm_eligible)?;
        validate_id("an operator name", &req.operator)?;
        let id = JobId::new(req.job_id.as_str()).map_err(|e| match e {
            errand::Error::Invalid(m) => Error::Invalid(m),
            other => Error::from(other),
        })?;
        let job = self.dead_expiry_job(&id).await?;
        let payload: Option<ExpiryPayload> = job.payload.decode().ok();
        let current_key = match (&payload, self.minted_key(id.as_str(), job.replays).await?) {
            (_, Some(k)) => k,
            (Some(p), None) => p.idempotency_key.clone(),
            (None, None) => String::new(),
        };
        let new_key = if req.new_key {
            Some(self.mint_replay_key(&id, payload.as_ref()).await?)
        } else {
            None
        };
        let entry = AuditEntry {
            job_id: id.to_string(),
            replay_no: job.replays.saturating_add(1),
            operator: req.operator.clone(),
            reason: req.reason.clone(),
            old_key: current_key.clone(),
            new_key: new_key.clone(),
        };
        let reason = replay_reason(req.reason.as_deref(), &current_key, new_key.as_deref())?;
        let request = ReplayRequest {
            ids: vec![id.clone()],
            operator: req.operator.clone(),
            reason: Some(reason),
        };
        let job = self.replay_with_audit(&entry, &request).await?;
        Ok(ReplayReport {
            job: JobView::from(&job),
            operator: req.operator.clone(),
            idempotency_key: new_key.clone().unwrap_or(current_key.clone()),
            previous_key: new_key.is_some().then_some(current_key),
            new_key: new_key.is_some(),
        })
    }

    /// The job `id`, refused unless it exists and is a dead expiry job.
    async fn dead_expiry_job(&self, id: &JobId) -> Result<Job> {
        let job = match self.admin().job(id).await {
            Ok(job) => job,
            Err(errand::Error::NotFound(_)) => {
                return Err(Error::NotFound(format!(
                    "no job `{id}` (list them with `reservations jobs DB`); nothing was changed"
                )));
            }
            Err(e) => return Err(e.into()),
        };
        if job.kind.as_str() != EXPIRY_KIND {
            return Err(Error::Refused(format!(
                "job `{id}` is a `{}` job, not an expiry job; nothing was changed",
                job.kind
            )));
        }
        if job.state != JobState::Dead {
            return Err(Error::Refused(format!(
                "job `{id}` is {}, not dead: only a dead expiry job can be replayed; nothing was changed",
                job.state
            )));
        }
        Ok(job)
    }

    /// Mints a new idempotency key for job `id`, refused unless its reservation is still held.
    async fn mint_replay_key(&self, id: &JobId, payload: Option<&ExpiryPayload>) -> Result<String> {
        let Some(p) = payload else {
            return Err(Error::Refused(format!(
                "job `{id}` has an invalid payload; a new key cannot help it; nothing was changed"
            )));
        };
        let r = self.get(&p.reservation_id).await.map_err(|e| match e {
            Error::NotFound(_) => Error::Refused(format!(
                "reservation `{}` does not exist, so it is not eligible for a new expiry key; nothing was changed",
                p.reservation_id
            )),
            other => other,
        })?;
        if r.status != Status::Held {
            return Err(Error::Refused(format!(
                "reservation `{}` is {}, so it is not eligible to expire again; a new key is refused; replay without --new-key to keep the key; nothing was changed",
                r.id, r.status
            )));
        }
        Ok(format!(
            "{}:replay-{}",
            idempotency_key(&p.reservation_id, p.hold_until),
            uuid::Uuid::now_v7()
        ))
    }

    /// Writes the audit row, then has Errand replay the job (removing the row if that fails).
    async fn replay_with_audit(&self, entry: &AuditEntry, request: &ReplayRequest) -> Result<Job> {
        // The application's audit row first (with the minted key the next
        // cycle must use), then Errand's replay. Errand offers no replay
        // inside an application transaction, so a failed replay removes the
        // row again; a row left by a crash in between is overwritten by the
        // next replay of the same cycle.
        let written_at = self.write_audit(entry).await?;
        let replayed = match self.admin().replay_jobs(request).await {
            Ok(mut jobs) => jobs.pop(),
            Err(e) => {
                if let Err(cleanup) = self.remove_audit(entry, written_at).await {
                    tracing::warn!(error = %cleanup, "removing the audit row of a failed replay failed");
                }
                return Err(match e {
                    errand::Error::InvalidState { id, state, .. } => Error::Refused(format!(
                        "job `{id}` is {state}, not dead: only a dead expiry job can be replayed; nothing was changed"
                    )),
                    other => other.into(),
                });
            }
        };
        let id = &entry.job_id;
        replayed.ok_or_else(|| Error::NotFound(format!("no job `{id}`")))
    }

    async fn write_audit(&self, entry: &AuditEntry) -> Result<Timestamp> {
        match &self.backend {
            Backend::Sqlite(s) => s.write_audit(entry.clone()).await,
            Backend::Postgres(p) => p.write_audit(entry).await,
        }
    }

    async fn remove_audit(&self, entry: &AuditEntry, at: Timestamp) -> Result<()> {
        match &self.backend {
            Backend::Sqlite(s) => s.remove_audit(entry.clone(), at).await,
            Backend::Postgres(p) => p.remove_audit(entry, at).await,
        }
    }
}

/// The reason Errand records: the operator's, then a note of the key kept or minted; checked.
fn replay_reason(given: Option<&str>, current_key: &str, new_key: Option<&str>) -> Result<String> {
    let mut reason = given.unwrap_or_default().to_owned();
    let note = match new_key {
        Some(k) => format!("new idempotency key {k} (was {current_key}), eligibility confirmed"),
        None => format!("idempotency key kept: {current_key}"),
    };
    if !reason.is_empty() {
        reason.push_str("; ");
    }
    reason.push_str(&note);
    // Checked before anything is written, with the note this program
    // adds, so the refusal names what the user can change.
    if !errand::core::is_audit_text(&reason, errand::core::MAX_REASON_BYTES, true) {
        return Err(Error::Invalid(format!(
            "--reason is not accepted: with the note \"{note}\" added it must be at most {} bytes of text without control characters (line breaks and tabs are allowed)",
            errand::core::MAX_REASON_BYTES
        )));
    }
    Ok(reason)
}

/// Refuses `--new-key` without `--confirm-eligible` and the other way
/// round, with a message that says why.
pub fn check_replay_flags(new_key: bool, confirm_eligible: bool) -> Result<()> {
    match (new_key, confirm_eligible) {
        (true, false) => Err(Error::Invalid(
            "--new-key alone is refused: a new idempotency key lets the expiry happen again; check that the reservation is still eligible to expire, then pass --new-key --confirm-eligible; nothing was changed".into(),
        )),
        (false, true) => Err(Error::Invalid(
            "--confirm-eligible alone is refused: it confirms a new idempotency key, so it goes with --new-key; without both, replay keeps the job's key; nothing was changed".into(),
        )),
        _ => Ok(()),
    }
}

/// An operator's replay request.
#[derive(Clone, Debug)]
pub struct Replay {
    /// The dead expiry job.
    pub job_id: String,
    /// Who replays it.
    pub operator: String,
    /// Why.
    pub reason: Option<String>,
    /// Mint a new idempotency key.
    pub new_key: bool,
    /// The operator checked that the reservation is still eligible.
    pub confirm_eligible: bool,
}

/// What a replay did.
#[derive(Clone, Debug, Serialize)]
pub struct ReplayReport {
    /// The job after the replay.
    pub job: JobView,
    /// Who replayed it.
    pub operator: String,
    /// The idempotency key the next delivery uses.
    pub idempotency_key: String,
    /// The key it replaced, when a new one was minted.
    pub previous_key: Option<String>,
    /// Whether a new key was minted.
    pub new_key: bool,
}
