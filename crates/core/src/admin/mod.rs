//! [`Admin`]: every operator action over any store, with its policy in one
//! place — the request checked, each job named once, a refusal explained,
//! the audit entry worded. A backend only runs the set-based, all-or-none
//! step ([`AdminStore`]); the CLI, the HTTP API, the dashboard and the
//! applications all come through here, so they refuse and record alike.

mod bulk;
mod job_actions;
mod key_actions;
mod queue_actions;
mod reads;
mod schedule_actions;
mod workflow_actions;

pub use bulk::{BulkAction, BulkOutcome, BulkRequest, Planned};
pub use key_actions::{MAX_ROTATE_BATCH, Rotation};

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::ids::JobId;
use crate::job::Job;
use crate::new_job::NewJob;
use crate::requests::CopyRequest;
use crate::stamp::AuditStamp;
use crate::stamp::MAX_REASON_BYTES;
use crate::state::JobState;
use crate::store::{AdminStore, JobStore, Store};

/// How many jobs one step of a workflow action changes at a time.
const WORKFLOW_CHUNK: usize = 1000;

/// How many times an action is tried again when the jobs it was refused
/// for turn out, on a second look, to be in states it accepts (another
/// process changed them in between).
const RACES_TOLERATED: usize = 3;

/// The operator's actions on a store.
///
/// Each action is all or none: it changes every job named or, refusing,
/// none, and says which job stopped it and why. A job named twice is acted
/// on once. Every change writes an audit entry with the operator and the
/// reason.
#[derive(Clone, Debug)]
pub struct Admin {
    /// The operator's seam: every action and listing.
    store: Arc<dyn AdminStore>,
    /// The worker's seam, for reading a named job as it is now.
    jobs: Arc<dyn JobStore>,
}

impl Admin {
    /// The operator's actions on `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Admin {
            store: store.clone(),
            jobs: store,
        }
    }

    /// The operator's actions through `operator`, reading single jobs
    /// through `jobs`: the two seams of one backend (or a stand-in for
    /// one of them).
    pub fn over(jobs: Arc<dyn JobStore>, operator: Arc<dyn AdminStore>) -> Self {
        Admin {
            store: operator,
            jobs,
        }
    }

    /// The worker's seam of the store acted on (to enqueue beside an
    /// action, or read a job).
    pub fn jobs(&self) -> &Arc<dyn JobStore> {
        &self.jobs
    }

    /// Jobs an action answers with, their payloads and outputs opened with
    /// the store's keys where it holds them.
    fn opened(&self, mut jobs: Vec<Job>) -> Vec<Job> {
        for job in &mut jobs {
            crate::encryption::open_job(self.jobs.keyring(), job);
        }
        jobs
    }

    /// One job, opened as [`Admin::opened`] does.
    fn opened_one(&self, mut job: Job) -> Job {
        crate::encryption::open_job(self.jobs.keyring(), &mut job);
        job
    }

    /// The copy of the job `id`, with its original's dependencies, or why
    /// it cannot be made.
    async fn copy_of(&self, id: &JobId) -> Result<NewJob> {
        let mut original = self.jobs.get(id).await?;
        if !CopyRequest::accepts(original.state) {
            return Err(refusal(&original, CopyRequest::REFUSED));
        }
        // A copy is sealed for its own id: the original's payload must open.
        if let Err(why) = crate::encryption::open_in_place(
            self.jobs.keyring(),
            crate::encryption::Field::Payload,
            &original.id,
            &mut original.payload,
        ) {
            return Err(refusal(
                &original,
                &format!("its payload cannot be read to copy it: {why}"),
            ));
        }
        if original.on_dependency_failure.is_none() {
            return NewJob::copy_of(&original, Vec::new());
        }
        let detail = self.store.detail(id).await?;
        if let Some(gone) = detail.dependencies.iter().find(|d| d.state.is_none()) {
            return Err(refusal(
                &original,
                &format!(
                    "it depends on job {}, which is gone (purged or pruned), so a copy could \
                     never read its inputs: enqueue the work again as a new job",
                    gone.id
                ),
            ));
        }
        let depends_on = detail.dependencies.into_iter().map(|d| d.id).collect();
        NewJob::copy_of(&original, depends_on)
    }

    /// Runs `step` (one all-or-none backend step over `ids`); when it
    /// changes none of the jobs named, finds the job that stopped it: one
    /// in a state other than `accepts.0` (refused with the hint
    /// `accepts.1`), or one the `guard` stops. If every job is acceptable
    /// on that second look, another process changed them in between, and
    /// the step (which changed nothing) is tried again.
    async fn all_or_refusal<T, F, Fut>(
        &self,
        ids: &[JobId],
        accepts: (&[JobState], &str),
        guard: Guard,
        step: F,
    ) -> Result<Vec<T>>
    where
        F: Fn() -> Fut,
        Fut: std::future::Future<Output = Result<Vec<T>>>,
    {
        let (allowed, hint) = accepts;
        for _ in 0..RACES_TOLERATED {
            let changed = step().await?;
            if changed.len() == ids.len() {
                return Ok(changed);
            }
            if !changed.is_empty() {
                return Err(partial(changed.len(), ids.len()));
            }
            for id in ids {
                let job = self.jobs.get(id).await?;
                if !allowed.contains(&job.state) {
                    return Err(refusal(&job, hint));
                }
                if let Some(refused) = self.guarded(guard, ids, &job).await? {
                    return Err(refused);
                }
            }
        }
        Err(raced(ids))
    }

    /// Why `guard` stops an action on `job` (one of `ids`), if it does.
    async fn guarded(&self, guard: Guard, ids: &[JobId], job: &Job) -> Result<Option<Error>> {
        let needs_detail = match guard {
            Guard::StateOnly => false,
            Guard::NoWaitingDependents => job.has_dependents,
            Guard::Releasable => job.waiting_on > 0,
        };
        if !needs_detail {
            return Ok(None);
        }
        let detail = match self.store.detail(&job.id).await {
            Ok(detail) => detail,
            // Gone since: the next round reports it.
            Err(Error::NotFound(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        Ok(match guard {
            Guard::StateOnly => None,
            Guard::NoWaitingDependents => crate::deps::purge_would_strand(&detail),
            Guard::Releasable => crate::deps::replay_would_strand(&detail, ids),
        })
    }
}

/// A rule besides a job's state that an action's store step checks in its
/// own statement (so no other transaction can slip in between a check and
/// the change), and that [`Admin`] explains when the step refuses.
#[derive(Clone, Copy, Debug)]
enum Guard {
    /// The state alone decides.
    StateOnly,
    /// A purge leaves no blocked job waiting for a job that is gone.
    NoWaitingDependents,
    /// A replay puts no job back to wait for a dependency that can no
    /// longer release it ([`crate::DependencyFailure::may_wait_for`]).
    Releasable,
}

/// The ids in their first-named order, each once.
fn distinct(ids: &[JobId]) -> Vec<JobId> {
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    ids.iter().filter(|id| seen.insert(*id)).cloned().collect()
}

/// `items` in the order of `ids` (a backend answers in its own order).
fn in_order<T>(ids: &[JobId], mut items: Vec<T>, id_of: impl Fn(&T) -> &JobId) -> Vec<T> {
    let rank: std::collections::HashMap<&JobId, usize> =
        ids.iter().enumerate().map(|(i, id)| (id, i)).collect();
    items.sort_by_key(|item| rank.get(id_of(item)).copied().unwrap_or(usize::MAX));
    items
}

fn stamp(operator: &str, reason: Option<&str>) -> AuditStamp {
    AuditStamp {
        operator: operator.to_owned(),
        reason: reason.map(str::to_owned),
    }
}

fn refusal(job: &Job, hint: &str) -> Error {
    Error::InvalidState {
        id: job.id.to_string(),
        state: job.state.to_string(),
        hint: hint.to_owned(),
    }
}

/// A backend step that changed some of the jobs named but not all has
/// broken its contract; trying it again could act twice on those it did
/// change, so the action stops and says so.
fn partial(changed: usize, named: usize) -> Error {
    Error::storage(format!(
        "the store changed {changed} of the {named} jobs named, where it must change all or \
         none; this is a defect in the storage backend: check the audit log for what changed"
    ))
}

fn raced(ids: &[JobId]) -> Error {
    Error::Busy(format!(
        "the {} job(s) named kept changing while the action ran (other processes are \
         working on them); nothing was changed by it",
        ids.len()
    ))
}

/// An audit reason that starts with what changed: `change` alone, or
/// `change: reason`. Refused when the whole is longer than a reason may
/// be.
fn reason_after(change: &str, reason: Option<&str>) -> Result<String> {
    let Some(reason) = reason else {
        return Ok(change.to_owned());
    };
    let whole = format!("{change}: {reason}");
    if whole.len() > MAX_REASON_BYTES {
        return Err(Error::invalid(format!(
            "the reason is {} bytes too long once the change ({change}) is written before it; \
             shorten it to at most {} bytes",
            whole.len() - MAX_REASON_BYTES,
            MAX_REASON_BYTES.saturating_sub(change.len() + 2)
        )));
    }
    Ok(whole)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(names: &[&str]) -> Vec<JobId> {
        names.iter().map(|n| JobId::new(*n).unwrap()).collect()
    }

    #[test]
    fn each_job_is_named_once_in_first_named_order() {
        assert_eq!(
            distinct(&ids(&["b", "a", "b", "c", "a"])),
            ids(&["b", "a", "c"])
        );
    }

    #[test]
    fn answers_follow_the_request_order() {
        let order = ids(&["c", "a", "b"]);
        assert_eq!(in_order(&order, ids(&["a", "b", "c"]), |id| id), order);
    }

    #[test]
    fn the_change_is_written_before_the_reason_and_the_whole_is_bounded() {
        assert_eq!(reason_after("priority 5", None).unwrap(), "priority 5");
        assert_eq!(
            reason_after("run now", Some("customer waiting")).unwrap(),
            "run now: customer waiting"
        );
        let long = "x".repeat(MAX_REASON_BYTES - 5);
        let err = reason_after("run now", Some(&long)).unwrap_err();
        assert!(err.to_string().contains("shorten it"), "{err}");
    }
}
