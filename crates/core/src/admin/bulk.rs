//! One operator action over a selection — jobs named by id, or chosen by a
//! filter with a bound — in one call: the selection read when it has to
//! be (a filter, a dry run, a purge's answer), each job judged by the
//! action's own rule, and the action taken all or none.

use serde::Serialize;

use crate::brief::JobBrief;
use crate::error::Result;
use crate::ids::JobId;
use crate::job::Job;
use crate::requests::{Copied, CopyRequest, PurgeRequest, ReplayRequest, Selection};
use crate::state::JobState;

use super::Admin;

/// What a bulk action does to the jobs it selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BulkAction {
    /// Replay them in place ([`Admin::replay_jobs`]).
    Replay,
    /// Copy them under new ids, leaving the originals
    /// ([`Admin::copy_jobs`]; `errand replay --new-key`).
    Copy,
    /// Delete them for good ([`Admin::purge_jobs`]; the reason is
    /// required).
    Purge,
}

impl BulkAction {
    /// The states the action accepts, and what it says of any other.
    fn rule(self) -> (&'static [JobState], &'static str) {
        match self {
            BulkAction::Replay => (ReplayRequest::ACCEPTS, ReplayRequest::REFUSED),
            BulkAction::Copy => (CopyRequest::ACCEPTS, CopyRequest::REFUSED),
            BulkAction::Purge => (PurgeRequest::ACCEPTS, PurgeRequest::REFUSED),
        }
    }

    /// Why the action would refuse a job in `state`, if it would.
    pub fn refusal(self, state: JobState) -> Option<&'static str> {
        let (accepts, refused) = self.rule();
        (!accepts.contains(&state)).then_some(refused)
    }
}

/// An operator's action over a selection.
#[derive(Clone, Debug)]
pub struct BulkRequest {
    /// What to do.
    pub action: BulkAction,
    /// To which jobs.
    pub jobs: Selection,
    /// Who asks (1–200 bytes, one line).
    pub operator: String,
    /// Why (required for a purge).
    pub reason: Option<String>,
    /// Only say what would be done; change nothing.
    pub dry_run: bool,
}

/// One job of a dry run, and whether the action would take it.
#[derive(Clone, Debug, Serialize)]
pub struct Planned {
    /// The job as it is now.
    #[serde(flatten)]
    pub job: JobBrief,
    /// Why the action would refuse it (and so change nothing at all), or
    /// `None` when it would take it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub refused: Option<&'static str>,
}

/// What a bulk action did, or in a dry run would do.
#[derive(Clone, Debug)]
pub enum BulkOutcome {
    /// A dry run: the jobs selected, each with its verdict; nothing changed.
    Planned(Vec<Planned>),
    /// The jobs replayed, in the order selected.
    Replayed(Vec<Job>),
    /// The copies made, in the order selected.
    Copied(Vec<Copied>),
    /// The jobs purged, as they were just before.
    Purged(Vec<JobBrief>),
}

impl BulkOutcome {
    /// How many jobs it names.
    pub fn len(&self) -> usize {
        match self {
            BulkOutcome::Planned(jobs) => jobs.len(),
            BulkOutcome::Replayed(jobs) => jobs.len(),
            BulkOutcome::Copied(copies) => copies.len(),
            BulkOutcome::Purged(jobs) => jobs.len(),
        }
    }

    /// Whether it names no job (the selection matched none).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Admin {
    /// Acts on the jobs a selection names, all or none, in one call: the
    /// action's operator and reason are checked first (so a dry run
    /// rehearses exactly what would run); a filter is read in pages into
    /// at most its limit of jobs; a dry run answers with each job and its
    /// verdict; otherwise the action is taken on them as
    /// [`Admin::replay_jobs`], [`Admin::copy_jobs`] or
    /// [`Admin::purge_jobs`] take it, and a refusal names the job that
    /// stopped it. Jobs named by id are not read before a replay or copy:
    /// the action's own statement judges them. A selection that matches
    /// nothing changes nothing and answers with no jobs.
    ///
    /// # Errors
    /// As the action, and as [`Admin::selected`].
    pub async fn act_on_selection(&self, req: &BulkRequest) -> Result<BulkOutcome> {
        self.check_audit_fields(req)?;
        let (ids, briefs) = match &req.jobs {
            Selection::Ids(ids) if !req.dry_run && req.action != BulkAction::Purge => {
                (ids.clone(), Vec::new())
            }
            jobs => {
                let briefs = self.selected(jobs).await?;
                if req.dry_run {
                    return Ok(BulkOutcome::Planned(planned(req.action, briefs)));
                }
                (briefs.iter().map(|j| j.id.clone()).collect(), briefs)
            }
        };
        if ids.is_empty() {
            return Ok(empty(req.action));
        }
        self.take(req, ids, briefs).await
    }

    /// The action's own check of its operator and reason, with no jobs.
    fn check_audit_fields(&self, req: &BulkRequest) -> Result<()> {
        let (operator, reason) = (req.operator.clone(), req.reason.clone());
        match req.action {
            BulkAction::Replay => ReplayRequest {
                ids: Vec::new(),
                operator,
                reason,
            }
            .validate(),
            BulkAction::Copy => CopyRequest {
                ids: Vec::new(),
                operator,
                reason,
            }
            .validate(),
            BulkAction::Purge => PurgeRequest {
                ids: Vec::new(),
                operator,
                reason: reason.unwrap_or_default(),
            }
            .validate(),
        }
    }

    /// Takes the action on `ids` (selected as `briefs` when they were read).
    async fn take(
        &self,
        req: &BulkRequest,
        ids: Vec<JobId>,
        briefs: Vec<JobBrief>,
    ) -> Result<BulkOutcome> {
        let (operator, reason) = (req.operator.clone(), req.reason.clone());
        Ok(match req.action {
            BulkAction::Replay => BulkOutcome::Replayed(
                self.replay_jobs(&ReplayRequest {
                    ids,
                    operator,
                    reason,
                })
                .await?,
            ),
            BulkAction::Copy => BulkOutcome::Copied(
                self.copy_jobs(&CopyRequest {
                    ids,
                    operator,
                    reason,
                })
                .await?,
            ),
            BulkAction::Purge => {
                let purged = self
                    .purge_jobs(&PurgeRequest {
                        ids,
                        operator,
                        reason: reason.unwrap_or_default(),
                    })
                    .await?;
                BulkOutcome::Purged(
                    briefs
                        .into_iter()
                        .filter(|j| purged.contains(&j.id))
                        .collect(),
                )
            }
        })
    }
}

fn planned(action: BulkAction, briefs: Vec<JobBrief>) -> Vec<Planned> {
    briefs
        .into_iter()
        .map(|job| Planned {
            refused: action.refusal(job.state),
            job,
        })
        .collect()
}

fn empty(action: BulkAction) -> BulkOutcome {
    match action {
        BulkAction::Replay => BulkOutcome::Replayed(Vec::new()),
        BulkAction::Copy => BulkOutcome::Copied(Vec::new()),
        BulkAction::Purge => BulkOutcome::Purged(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_action_refuses_by_its_own_rule() {
        assert_eq!(BulkAction::Replay.refusal(JobState::Dead), None);
        assert_eq!(BulkAction::Replay.refusal(JobState::Cancelled), None);
        assert_eq!(
            BulkAction::Replay.refusal(JobState::Done),
            Some(ReplayRequest::REFUSED)
        );
        assert_eq!(
            BulkAction::Copy.refusal(JobState::Running),
            Some(CopyRequest::REFUSED)
        );
        assert_eq!(BulkAction::Purge.refusal(JobState::Dead), None);
        assert_eq!(
            BulkAction::Purge.refusal(JobState::Cancelled),
            Some(PurgeRequest::REFUSED)
        );
    }
}
