//! The expiry worker: the handler, its policy, and the one-shot and service
//! modes.
//!
//! Policy: 7 attempts per replay cycle; a retryable failure waits on
//! Errand's exponential-plus-proportional-jitter policy with a 5 s base, a
//! 15-minute cap and up to 20% jitter: `min(max, base·2^(attempt−1))`, so
//! the waits after attempts 1–6 are 5, 10, 20, 40, 80 and 160 s (each plus
//! up to 20%); attempt 7 is the last. A missing reservation or an invalid
//! payload is permanent (dead at once). A database timeout is retried and
//! recorded under the error class `timeout`; every other database failure
//! is retried under `retryable`. A retry only moves the job's delivery
//! time: the deadline it enforces is in its payload and in the reservation
//! row, and neither changes.
//!
//! The handler runs the transition and returns; the worker acknowledges in
//! a separate transaction. A crash between the two redelivers the job after
//! its lease, and the recorded idempotency key turns the redelivery into
//! `already-done`.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use errand::{
    Handler, JobContext, KindOptions, Name, Outcome, RetryPolicy, Runtime, Timestamp, WorkOutcome,
    WorkReport, Worker, WorkerConfig, handler_fn,
};
use serde::Serialize;

use crate::app::{App, Decision, EXPIRY_KIND, EXPIRY_QUEUE, ExpiryPayload, ExpiryRun};
use crate::error::Result;

/// The retry policy of failed expiries.
pub const RETRY: RetryPolicy = RetryPolicy::ExponentialProportional {
    base: Duration::from_secs(5),
    max: Duration::from_secs(15 * 60),
    percent: 20,
};
/// The default lease of a claim (renewed every third of it while the
/// handler runs).
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
/// The default poll interval of an idle service worker.
pub const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// How `work` behaves.
#[derive(Clone, Debug)]
pub struct WorkOptions {
    /// Lease length of each claim.
    pub lease: Duration,
    /// Service mode: how often an idle worker looks for due work.
    pub poll: Duration,
    /// Service mode: most expiries at once.
    pub concurrency: usize,
    /// Make every expiry transaction fail with a real database timeout.
    pub simulate_db_timeout: bool,
    /// Test switch: pause this long in the handler before the transition
    /// (the lease is renewed meanwhile), so a drill can kill the worker
    /// mid-handler.
    pub pause: Option<Duration>,
    /// Test switch: SIGKILL this process right after a transition commits,
    /// before the acknowledgment (a redelivery drill).
    pub crash_after_transition: bool,
}

impl Default for WorkOptions {
    fn default() -> Self {
        WorkOptions {
            lease: DEFAULT_LEASE,
            poll: DEFAULT_POLL,
            concurrency: 4,
            simulate_db_timeout: false,
            pause: None,
            crash_after_transition: false,
        }
    }
}

/// What the handler concluded about one attempt, kept until the attempt is
/// settled and reported.
#[derive(Clone, Debug)]
struct Note {
    reservation_id: Option<String>,
    decision: Option<Decision>,
}

type Notes = Arc<Mutex<HashMap<(String, u32), Note>>>;

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// One settled attempt, as `work` prints it.
#[derive(Clone, Debug, Serialize)]
pub struct WorkLine {
    /// `idle`, `acknowledged`, `retry_scheduled`, `dead`, `snoozed`,
    /// `lease_lost`, …
    pub outcome: &'static str,
    /// The job, unless idle.
    pub job_id: Option<String>,
    /// The attempt number, unless idle.
    pub attempt: Option<u32>,
    /// What the transition decided: `expired`, `already-done`, `changed`,
    /// `not-yet-due`; absent when it failed.
    pub result: Option<&'static str>,
    /// The reservation.
    pub reservation_id: Option<String>,
    /// For `expired`: how late, in milliseconds.
    pub lateness_ms: Option<i64>,
    /// A short explanation of the result.
    pub detail: Option<String>,
    /// Whether the job was acknowledged as done.
    pub acknowledged: bool,
    /// When the job is due again (retry or snooze).
    pub available_at: Option<Timestamp>,
    /// The recorded error of a failed attempt.
    pub error: Option<String>,
}

impl WorkLine {
    fn of(report: &WorkReport, note: Option<Note>) -> Self {
        let note = note.unwrap_or(Note {
            reservation_id: None,
            decision: None,
        });
        WorkLine {
            outcome: report.outcome.as_str(),
            job_id: report.job_id.as_ref().map(ToString::to_string),
            attempt: report.attempt,
            result: note.decision.as_ref().map(Decision::as_str),
            reservation_id: note.reservation_id,
            lateness_ms: match &note.decision {
                Some(Decision::Expired { lateness_ms, .. }) => Some(*lateness_ms),
                _ => None,
            },
            detail: note.decision.as_ref().map(Decision::detail),
            acknowledged: report.acknowledged,
            available_at: report.available_at,
            error: report.error.clone(),
        }
    }
}

impl fmt::Display for WorkLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (Some(id), Some(attempt)) = (&self.job_id, self.attempt) else {
            return f.write_str("idle");
        };
        write!(f, "job {id} attempt {attempt}:")?;
        if let Some(r) = self.result {
            write!(f, " {r}")?;
        }
        if let Some(res) = &self.reservation_id {
            write!(f, " reservation={res}")?;
        }
        if let Some(ms) = self.lateness_ms {
            write!(f, " lateness_ms={ms}")?;
        }
        write!(f, "; {}", self.outcome)?;
        if let Some(t) = self.available_at {
            write!(f, " available_at={t}")?;
        }
        if let Some(e) = &self.error {
            write!(f, " error={e:?}")?;
        }
        Ok(())
    }
}

/// The expiry handler.
fn handler(app: App, options: WorkOptions, notes: Notes) -> Arc<dyn Handler> {
    Arc::new(handler_fn(move |ctx: JobContext| {
        let (app, options, notes) = (app.clone(), options.clone(), notes.clone());
        async move {
            let key = (ctx.id().to_string(), ctx.attempt());
            let outcome = handle(&app, &options, &ctx, |note| {
                lock(&notes).insert(key.clone(), note);
            })
            .await;
            if matches!(outcome, Outcome::Success) && options.crash_after_transition {
                crash_now();
            }
            outcome
        }
    }))
}

async fn handle(
    app: &App,
    options: &WorkOptions,
    ctx: &JobContext,
    mut note: impl FnMut(Note),
) -> Outcome {
    if ctx.job.kind.as_str() != EXPIRY_KIND {
        return Outcome::permanent(format!(
            "reservations has no handler for jobs of kind `{}`",
            ctx.job.kind
        ));
    }
    let payload: ExpiryPayload = match ctx.payload() {
        Ok(p) => p,
        Err(e) => return Outcome::permanent(format!("invalid payload: {e}")),
    };
    if let Err(e) = payload.validate() {
        return Outcome::permanent(format!("invalid payload: {e}"));
    }
    note(Note {
        reservation_id: Some(payload.reservation_id.clone()),
        decision: None,
    });
    if let Some(pause) = options.pause {
        tracing::info!(job = %ctx.id(), ?pause, "pausing before the transition (test switch)");
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = ctx.lease_lost() => {
                return Outcome::retry("the lease was lost while the handler paused");
            }
        }
    }
    let run = ExpiryRun {
        job_id: ctx.id().to_string(),
        attempt: ctx.attempt(),
        replays: ctx.job.replays,
        payload: payload.clone(),
        simulate_timeout: options.simulate_db_timeout,
    };
    match app.expire(run).await {
        Ok(decision) => {
            tracing::info!(job = %ctx.id(), attempt = ctx.attempt(), reservation = %payload.reservation_id, result = decision.as_str(), "expiry decided");
            let outcome = match &decision {
                // Delivered before the deadline on the database clock: come
                // back at the deadline without spending an attempt.
                Decision::NotYetDue { hold_until, now } => Outcome::Snooze {
                    delay: hold_until.since(*now),
                },
                _ => Outcome::Success,
            };
            note(Note {
                reservation_id: Some(payload.reservation_id),
                decision: Some(decision),
            });
            outcome
        }
        Err(e) if e.is_permanent() => Outcome::permanent(e),
        // A database that did not answer in time: retried on the policy,
        // recorded under the class `timeout` so retries by class tell it
        // apart.
        Err(e) if e.is_timeout() => Outcome::timed_out(e),
        // Other database failures may pass too: retry on the policy.
        Err(e) => Outcome::retry(e),
    }
}

/// Ends this process with SIGKILL, as a power cut or an OOM kill would.
fn crash_now() -> ! {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    eprintln!(
        "reservations: crash switch: the transition is committed; killing this worker (SIGKILL) before it acknowledges"
    );
    if let Err(e) = kill(Pid::this(), Signal::SIGKILL) {
        eprintln!("reservations: SIGKILL failed ({e}); aborting instead");
    }
    std::process::abort()
}

fn queue() -> Result<Name> {
    Ok(Name::parse("queue", EXPIRY_QUEUE)?)
}

/// Claims at most one due expiry job, runs it, settles it.
pub async fn work_once(app: &App, options: &WorkOptions) -> Result<WorkLine> {
    let notes: Notes = Arc::default();
    let worker = Worker::new(
        app.store(),
        WorkerConfig {
            queues: vec![queue()?],
            lease: options.lease,
            retry: RETRY,
            heartbeat: true,
            ..WorkerConfig::default()
        },
    );
    let report = worker
        .run_once(handler(app.clone(), options.clone(), notes.clone()))
        .await?;
    let note = match (&report.job_id, report.attempt) {
        (Some(id), Some(attempt)) => lock(&notes).remove(&(id.to_string(), attempt)),
        _ => None,
    };
    Ok(WorkLine::of(&report, note))
}

/// Runs expiry jobs until `shutdown` completes, then drains. Calls
/// `on_line` with every settled attempt.
pub async fn work_service<F>(
    app: &App,
    options: &WorkOptions,
    on_line: Arc<dyn Fn(&WorkLine) + Send + Sync>,
    shutdown: F,
) -> Result<errand::RunStats>
where
    F: Future<Output = ()>,
{
    let notes: Notes = Arc::default();
    let hook_notes = notes.clone();
    let runtime = Runtime::builder(app.store())
        .handler_dyn(
            EXPIRY_KIND,
            handler(app.clone(), options.clone(), notes.clone()),
        )?
        .kind_options(
            EXPIRY_KIND,
            KindOptions {
                retry: Some(RETRY),
                deadline: None,
            },
        )?
        .queue(EXPIRY_QUEUE, options.concurrency)?
        .lease(options.lease)
        .poll(options.poll)
        .on_report(Arc::new(move |report: &WorkReport| {
            let note = match (&report.job_id, report.attempt) {
                (Some(id), Some(attempt)) => lock(&hook_notes).remove(&(id.to_string(), attempt)),
                _ => None,
            };
            if report.outcome != WorkOutcome::Idle {
                on_line(&WorkLine::of(report, note));
            }
        }))
        .build()?;
    Ok(runtime.run_until(shutdown).await?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_retry_schedule_is_5s_doubling_with_up_to_20_percent_jitter() {
        let s = |n| RETRY.delay_for(n, 0.0).as_secs();
        assert_eq!((1..=6).map(s).collect::<Vec<_>>(), [5, 10, 20, 40, 80, 160]);
        assert_eq!(RETRY.delay_for(1, 0.999_999).as_millis() / 100, 59);
        assert_eq!(RETRY.delay_for(30, 0.0), Duration::from_secs(900));
        assert!(RETRY.delay_for(30, 0.999_999) < Duration::from_secs(1080));
    }
}
