//! `errand wait`: wait for jobs to end, and say how they ended in the exit
//! code (0 done, 7 dead, 8 cancelled, 9 timed out).

use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use errand::{Client, Error, Job, JobState, Store};

use crate::args::WaitArgs;
use crate::exit::{Failure, WAIT_TIMED_OUT, WAITED_CANCELLED, WAITED_DEAD};
use crate::output::{self, outln};

/// Waits for each job in turn, all within one `--timeout`.
pub(crate) async fn wait(store: Arc<dyn Store>, a: WaitArgs) -> Result<ExitCode, Failure> {
    let ids = crate::ids(a.ids)?;
    let client = Client::new(store.clone());
    let until = a.timeout.and_then(|t| Instant::now().checked_add(t));
    let mut jobs: Vec<Job> = Vec::with_capacity(ids.len());
    let mut timed_out = false;
    for id in &ids {
        let left = until.map_or(Duration::MAX, |u| {
            u.saturating_duration_since(Instant::now())
        });
        match client.wait(id, left).await {
            Ok(job) => jobs.push(job),
            Err(Error::TimedOut(_)) => {
                timed_out = true;
                let mut job = store.get(id).await?;
                errand::encryption::open_job(store.keyring(), &mut job);
                jobs.push(job);
            }
            Err(e) => return Err(e.into()),
        }
    }
    if a.json {
        output::json(&jobs)?;
    } else {
        for job in &jobs {
            outln!("{}", line(job));
        }
    }
    Ok(ExitCode::from(code(&jobs, timed_out)))
}

/// How one job stands when the wait is over.
fn line(job: &Job) -> String {
    match (job.state, job.last_error.as_deref()) {
        (JobState::Dead, Some(error)) => format!("{} dead: {}", job.id, output::escaped(error)),
        (state, _) if state.is_final() => format!("{} {state}", job.id),
        (state, _) => format!("{} still {state} (the timeout passed)", job.id),
    }
}

/// The exit code: 9 if any job has not ended, else 7 if any is dead, else
/// 8 if any is cancelled, else 0.
fn code(jobs: &[Job], timed_out: bool) -> u8 {
    if timed_out {
        WAIT_TIMED_OUT
    } else if jobs.iter().any(|j| j.state == JobState::Dead) {
        WAITED_DEAD
    } else if jobs.iter().any(|j| j.state == JobState::Cancelled) {
        WAITED_CANCELLED
    } else {
        0
    }
}
