//! Batches: a set of jobs with callbacks — `on_success` when every job is
//! done, `on_finish` when every job has ended, whatever the state. Jobs are
//! added while the batch is open; sealing it enqueues the callbacks once,
//! each a dependent of every job of the batch, so the settlement that ends
//! the last job releases it in its own transaction, exactly once.

use serde::Serialize;

use crate::clock::Timestamp;
use crate::error::{Error, Result};
use crate::ids::JobId;
use crate::job::DependencyFailure;
use crate::job::Job;
use crate::labels::WorkflowId;
use crate::new_job::MAX_DEPENDENCIES;
use crate::new_job::NewJob;
use crate::workflow::StateCount;

/// The most jobs one batch holds (each callback depends on all of them).
pub const MAX_BATCH_JOBS: usize = MAX_DEPENDENCIES;

/// A batch's id: the rules of a workflow id (1–200 bytes of letters,
/// digits and `-_.:@/+=`).
pub type BatchId = WorkflowId;

/// Sealing a batch: no job may be added after it, and its callbacks are
/// enqueued (each optional).
#[derive(Clone, Debug)]
pub struct BatchSeal {
    /// The batch.
    pub batch: BatchId,
    /// Runs once every job of the batch is done. A job that dies keeps it
    /// waiting (an operator may replay that job); one that is cancelled
    /// cancels it.
    pub on_success: Option<NewJob>,
    /// Runs once every job of the batch has ended: done, dead or
    /// cancelled.
    pub on_finish: Option<NewJob>,
}

/// A stored batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Batch {
    /// Its id.
    pub id: BatchId,
    /// When its first job was added (or it was sealed empty).
    pub created_at: Timestamp,
    /// When it was sealed; `None` while jobs may still be added.
    pub sealed_at: Option<Timestamp>,
    /// The `on_success` callback's job id, once sealed with one.
    pub on_success: Option<JobId>,
    /// The `on_finish` callback's job id, once sealed with one.
    pub on_finish: Option<JobId>,
    /// Its jobs.
    pub total: u64,
    /// How many of its jobs are in each state (states with none left out).
    pub states: Vec<StateCount>,
}

/// A batch with its callbacks' jobs, as the operator surfaces show it.
#[derive(Clone, Debug, Serialize)]
pub struct BatchView {
    /// The batch.
    #[serde(flatten)]
    pub batch: Batch,
    /// The `on_success` callback, if sealed with one and still stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_success_job: Option<Job>,
    /// The `on_finish` callback, if sealed with one and still stored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_finish_job: Option<Job>,
}

impl BatchSeal {
    /// The callbacks to insert when the batch holding `members` is sealed,
    /// `on_success` first: each depends on every member (`wait` for
    /// `on_success`, `run` for `on_finish`) and is given an id now if it
    /// has none.
    ///
    /// # Errors
    /// [`Error::Invalid`] when a callback already has dependencies of its
    /// own, is unique, or the batch holds more than [`MAX_BATCH_JOBS`].
    pub fn callbacks(&self, members: &[JobId]) -> Result<Callbacks> {
        let jobs = self.callback_jobs(members)?;
        let id_of =
            |given: bool, job: Option<&NewJob>| job.filter(|_| given).and_then(|j| j.id.clone());
        Ok(Callbacks {
            on_success: id_of(self.on_success.is_some(), jobs.first()),
            on_finish: id_of(self.on_finish.is_some(), jobs.last()),
            jobs,
        })
    }

    fn callback_jobs(&self, members: &[JobId]) -> Result<Vec<NewJob>> {
        if members.len() > MAX_BATCH_JOBS {
            return Err(Error::invalid(format!(
                "batch {} holds {} jobs; a batch holds at most {MAX_BATCH_JOBS}",
                self.batch,
                members.len()
            )));
        }
        let mut out = Vec::new();
        for (job, policy) in [
            (&self.on_success, DependencyFailure::Wait),
            (&self.on_finish, DependencyFailure::Run),
        ] {
            let Some(job) = job else { continue };
            if !job.depends_on.is_empty() || job.unique.is_some() || job.batch.is_some() {
                return Err(Error::invalid(
                    "a batch callback depends on the batch's jobs alone: give it no \
                     dependencies of its own, no uniqueness and no batch",
                ));
            }
            let mut job = job.clone();
            job.id.get_or_insert_with(JobId::generate);
            job.depends_on = members.to_vec();
            job.on_dependency_failure = policy;
            out.push(job);
        }
        Ok(out)
    }
}

/// A seal's callbacks: the jobs to insert, and the ids a seal records.
#[derive(Clone, Debug)]
pub struct Callbacks {
    /// The callback jobs, `on_success` first.
    pub jobs: Vec<NewJob>,
    /// The `on_success` callback's id, if there is one.
    pub on_success: Option<JobId>,
    /// The `on_finish` callback's id, if there is one.
    pub on_finish: Option<JobId>,
}

/// Refuses a seal whose callback was not created (its id names a job
/// already stored, which would not wait for the batch).
///
/// # Errors
/// [`Error::Invalid`] naming the id.
pub fn check_callbacks_created(inserted: &[crate::store::Inserted]) -> Result<()> {
    match inserted.iter().find(|i| !i.created) {
        Some(i) => Err(Error::invalid(format!(
            "a batch callback's id {} already names a stored job: give the callback a new id, \
             or none",
            i.job.id
        ))),
        None => Ok(()),
    }
}

/// The refusal for adding jobs to a sealed batch.
pub(crate) fn sealed(batch: &BatchId) -> Error {
    Error::invalid(format!(
        "batch {batch} is sealed: no job can be added to it; start a new batch"
    ))
}

/// Refuses jobs that would take a batch past [`MAX_BATCH_JOBS`].
///
/// # Errors
/// [`Error::Invalid`] saying how many it holds.
pub fn check_batch_size(batch: &BatchId, held: u64, adding: usize) -> Result<()> {
    let after = usize::try_from(held)
        .unwrap_or(usize::MAX)
        .saturating_add(adding);
    if after > MAX_BATCH_JOBS {
        return Err(Error::invalid(format!(
            "batch {batch} holds {held} jobs; adding {adding} would pass the limit of \
             {MAX_BATCH_JOBS}: start another batch"
        )));
    }
    Ok(())
}

/// Refuses a job that names a batch when the stored job found in its
/// place — the one with its id, or the one its unique or debounce key
/// stands for — is not in that batch: a job belongs to one batch at most,
/// and answering with the other job would leave the batch named without
/// the work it was asked to hold (sealed, its callbacks would run without
/// it). Nothing is written: the caller refuses the whole call.
///
/// # Errors
/// [`Error::Invalid`] naming the job found and the batch it is in.
pub fn check_found_in_batch(asked: &NewJob, found: &Job) -> Result<()> {
    let Some(named) = &asked.batch else {
        return Ok(());
    };
    if found.batch.as_ref() == Some(named) {
        return Ok(());
    }
    let by = match (&asked.id, &found.unique_key) {
        (Some(id), _) if *id == found.id => "its id".to_owned(),
        (_, Some(key)) => format!("its unique key {key}"),
        _ => "its id".to_owned(),
    };
    let held = found
        .batch
        .as_ref()
        .map_or_else(|| "in no batch".to_owned(), |b| format!("in batch {b}"));
    Err(Error::invalid(format!(
        "job {} already stands for this job (by {by}) and is {held}, not in batch {named}: a \
         job belongs to one batch; enqueue it without the batch to get that job, or under \
         another id or key to add new work to batch {named}",
        found.id
    )))
}

/// Refuses adding to `batch` when it is sealed.
///
/// # Errors
/// [`Error::Invalid`] when `sealed_at` is set.
pub fn check_open(batch: &BatchId, sealed_at: Option<Timestamp>) -> Result<()> {
    match sealed_at {
        Some(_) => Err(sealed(batch)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::Payload;

    fn job(kind: &str) -> NewJob {
        NewJob::new(kind, Payload::default()).unwrap()
    }

    #[test]
    fn callbacks_depend_on_every_member_with_their_policies() {
        let seal = BatchSeal {
            batch: BatchId::new("b").unwrap(),
            on_success: Some(job("notify")),
            on_finish: Some(job("cleanup").with_id(JobId::new("c").unwrap())),
        };
        let members = vec![JobId::new("m1").unwrap(), JobId::new("m2").unwrap()];
        let all = seal.callbacks(&members).unwrap();
        assert_eq!(all.on_success, all.jobs[0].id);
        assert_eq!(all.on_finish.as_ref().map(JobId::as_str), Some("c"));
        let cbs = all.jobs;
        assert_eq!(cbs.len(), 2);
        assert_eq!(cbs[0].depends_on, members);
        assert_eq!(cbs[0].on_dependency_failure, DependencyFailure::Wait);
        assert!(cbs[0].id.is_some());
        assert_eq!(cbs[1].on_dependency_failure, DependencyFailure::Run);
        assert_eq!(cbs[1].id.as_ref().map(JobId::as_str), Some("c"));
        let none = BatchSeal {
            on_success: None,
            on_finish: None,
            ..seal.clone()
        };
        let none = none.callbacks(&members).unwrap();
        assert!(none.jobs.is_empty() && none.on_success.is_none() && none.on_finish.is_none());
        let finish_only = BatchSeal {
            batch: BatchId::new("b").unwrap(),
            on_success: None,
            on_finish: Some(job("cleanup")),
        }
        .callbacks(&members)
        .unwrap();
        assert!(finish_only.on_success.is_none());
        assert_eq!(finish_only.on_finish, finish_only.jobs[0].id);
        let own_deps = BatchSeal {
            on_success: Some(job("x").depends_on(JobId::new("m1").unwrap())),
            ..seal
        };
        assert!(own_deps.callbacks(&members).is_err());
        let in_batch = BatchSeal {
            on_success: Some(job("x").in_batch(BatchId::new("b").unwrap())),
            on_finish: None,
            batch: BatchId::new("b").unwrap(),
        };
        assert!(in_batch.callbacks(&members).is_err());
    }

    #[test]
    fn sizes_and_sealing_are_checked() {
        let b = BatchId::new("b").unwrap();
        assert!(check_batch_size(&b, 9_999, 1).is_ok());
        assert!(
            check_batch_size(&b, 9_999, 2)
                .unwrap_err()
                .to_string()
                .contains("10000")
        );
        assert!(check_open(&b, None).is_ok());
        let err = check_open(&b, Some(Timestamp::from_millis(1))).unwrap_err();
        assert!(err.to_string().contains("is sealed"), "{err}");
    }
}
