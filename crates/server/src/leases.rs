//! The remote-worker endpoints: a worker in any language leases due jobs
//! over HTTP and settles each with the lease it was given.
//!
//! Every settlement is one [`Store`](errand::Store) call fenced by the
//! lease token, exactly as an in-process worker's: the store changes the
//! job only while it is `running`, the token is the current one and the
//! lease has not expired. A refusal is a 409 `lease_lost` and nothing
//! changes. The token is the lease holder's secret: it is checked to be a
//! token's shape (32 lowercase hex digits) before it goes anywhere, and it
//! never appears in an error message.
//!
//! A failure reported without a retry time is scheduled by
//! [`errand::failure_for`] on the server's retry policy, the code every
//! other worker uses; `retry_in`/`retry_at` is the worker's own hint (a
//! provider's Retry-After).

use errand::encryption::{Field, open_in_place, open_signal};
use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use errand::core::FailResult;
use errand::{
    ClaimRequest, ClaimedJob, ErrorClass, Job, JobId, Lease, Name, RetryAt, Timestamp, WorkOutcome,
};
use serde::{Deserialize, Serialize};

use crate::problem::Problem;
use crate::request::{
    Answer, App, MAX_REASON_BYTES, audit_text, body_json, detail_of, job_id, json,
};

/// The most jobs one lease request takes.
const MAX_BATCH: u32 = 100;
/// The most queues one lease request names.
const MAX_QUEUES: usize = 100;
/// A lease (and a heartbeat's extension) when the worker names none.
const DEFAULT_LEASE: Duration = Duration::from_secs(30);
const MIN_LEASE: Duration = Duration::from_secs(1);
const MAX_LEASE: Duration = Duration::from_secs(3600);
/// The longest a lease request may wait for work.
const MAX_WAIT: Duration = Duration::from_secs(30);
/// The longest retry delay or snooze a worker may ask for.
const MAX_DELAY: Duration = Duration::from_secs(365 * 24 * 3600);
/// How often a waiting lease request claims again without a wake-up
/// signal (jobs enqueued by another process into a SQLite file, a
/// PostgreSQL listener that is reconnecting, retries falling due).
const POLL: Duration = Duration::from_secs(1);
/// A lease token: 128 random bits as 32 lowercase hex digits.
const TOKEN_LEN: usize = 32;
const MAX_ATTEMPT: u32 = 1000;

const LEASE_EXAMPLE: &str = r#"{"queues": ["email"], "limit": 10, "lease": "30s", "wait": "20s"}"#;
const HELD_EXAMPLE: &str = r#"{"token": "<lease.token>", "attempt": 1}"#;
const COMPLETE_EXAMPLE: &str =
    r#"{"token": "<lease.token>", "attempt": 1, "output": {"rows": 120}}"#;
const HEARTBEAT_EXAMPLE: &str = r#"{"token": "<lease.token>", "attempt": 1, "extend": "30s"}"#;
const FAIL_EXAMPLE: &str =
    r#"{"token": "<lease.token>", "attempt": 1, "error": "SMTP timeout", "class": "retryable"}"#;
const AWAIT_EXAMPLE: &str = r#"{"token": "<lease.token>", "attempt": 1, "signal": "approved", "timeout": "24h", "on_timeout": "cancel"}"#;
const SNOOZE_EXAMPLE: &str = r#"{"token": "<lease.token>", "attempt": 1, "delay": "5m"}"#;
const CANCEL_EXAMPLE: &str =
    r#"{"token": "<lease.token>", "attempt": 1, "reason": "the order was withdrawn"}"#;

// ---- POST /v1/leases ------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LeaseBody {
    queues: Option<Vec<String>>,
    limit: Option<u32>,
    lease: Option<String>,
    wait: Option<String>,
}

#[derive(Serialize)]
struct Leased<'a> {
    jobs: Vec<LeasedJob<'a>>,
}

#[derive(Serialize)]
struct LeasedJob<'a> {
    job: &'a Job,
    lease: LeaseView<'a>,
    /// The signal that ended the job's latest wait, with its payload.
    #[serde(skip_serializing_if = "Option::is_none")]
    signal: Option<errand::ReceivedSignal>,
}

/// What the worker presents to settle: the job id, the token, the attempt.
#[derive(Serialize)]
struct LeaseView<'a> {
    id: &'a JobId,
    token: &'a str,
    attempt: u32,
    lease_until: Option<Timestamp>,
}

impl<'a> LeasedJob<'a> {
    fn of(claimed: &'a ClaimedJob, signal: Option<errand::ReceivedSignal>) -> Self {
        LeasedJob {
            signal,
            job: &claimed.job,
            lease: LeaseView {
                id: &claimed.lease.id,
                token: claimed.lease.token.as_str(),
                attempt: claimed.lease.attempt,
                lease_until: claimed.job.lease_until,
            },
        }
    }
}

/// A duration field within `min..=max`; `range` says so in words.
pub(crate) fn within(
    field: &str,
    text: &str,
    min: Duration,
    max: Duration,
    range: &str,
) -> Result<Duration, Problem> {
    let d = errand::parse_duration(text)
        .map_err(|e| Problem::invalid(format!("`{field}`: {}", detail_of(e))))?;
    if d < min || d > max {
        return Err(Problem::invalid(format!(
            "`{field}` must be {range} (got {text:?})"
        )));
    }
    Ok(d)
}

/// A lease length or extension: 1 s to 1 h, 30 s when not given.
fn lease_length(field: &str, text: Option<String>) -> Result<Duration, Problem> {
    text.map_or(Ok(DEFAULT_LEASE), |t| {
        within(field, &t, MIN_LEASE, MAX_LEASE, "from 1s to 1h")
    })
}

/// A retry delay or snooze: up to 365 days.
fn delay(field: &str, text: &str) -> Result<Duration, Problem> {
    within(field, text, Duration::ZERO, MAX_DELAY, "at most 365d")
}

fn queues(names: Option<Vec<String>>) -> Result<Vec<Name>, Problem> {
    let Some(names) = names else {
        return Ok(Vec::new());
    };
    if names.is_empty() || names.len() > MAX_QUEUES {
        return Err(Problem::invalid(format!(
            "`queues` must name 1 to {MAX_QUEUES} queues (got {}); leave it out to lease from every queue",
            names.len()
        )));
    }
    let mut queues = Vec::with_capacity(names.len());
    for name in names {
        let name = Name::parse("queue", name)?;
        if !queues.contains(&name) {
            queues.push(name);
        }
    }
    Ok(queues)
}

pub(crate) async fn lease(State(app): State<App>, headers: HeaderMap, body: Body) -> Answer {
    let req: LeaseBody = body_json(&app, &headers, body, LEASE_EXAMPLE).await?;
    let limit = match req.limit {
        None => 1,
        Some(n @ 1..=MAX_BATCH) => n,
        Some(n) => {
            return Err(Problem::invalid(format!(
                "`limit` must be from 1 to {MAX_BATCH} (got {n})"
            )));
        }
    };
    let claim = ClaimRequest {
        queues: queues(req.queues)?,
        limit,
        lease: lease_length("lease", req.lease)?,
        rate: None,
        reclaim: true,
    };
    let wait = req
        .wait
        .map(|t| within("wait", &t, Duration::ZERO, MAX_WAIT, "at most 30s"))
        .transpose()?;
    let claimed = claim_waiting(&app, &claim, wait).await?;
    app.minutes.started(&claimed);
    let claimed = readable(&app, claimed).await?;
    // The signals of jobs a signal resumed, read for those alone.
    let mut jobs = Vec::with_capacity(claimed.len());
    for c in &claimed {
        let signal = match c.job.resumed_by {
            Some(_) => opened_signal(&app, &c.job.id).await?,
            None => None,
        };
        jobs.push(LeasedJob::of(c, signal));
    }
    json(StatusCode::OK, &Leased { jobs })
}

/// Claims; with `wait`, claims again whenever the store signals new work
/// (and at least every [`POLL`]) until a job is claimed, the wait is over
/// or the server shuts down.
async fn claim_waiting(
    app: &App,
    req: &ClaimRequest,
    wait: Option<Duration>,
) -> Result<Vec<ClaimedJob>, Problem> {
    let Some(wait) = wait else {
        return Ok(app.store.claim(req).await?);
    };
    let deadline = tokio::time::Instant::now() + wait;
    // Subscribed before the first claim: work that arrives between a claim
    // and the wait is not missed.
    let mut signal = app.store.work_signal();
    let mut stopping = app.stopping.clone();
    loop {
        let claimed = app.store.claim(req).await?;
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        if !claimed.is_empty() || left.is_zero() || *stopping.borrow() {
            return Ok(claimed);
        }
        tokio::select! {
            _ = signal.wait(left.min(POLL)) => {}
            () = stop_asked(&mut stopping) => {}
        }
    }
}

/// Completes when the server asks to stop; never if it cannot ask.
pub(crate) async fn stop_asked(stopping: &mut tokio::sync::watch::Receiver<bool>) {
    if stopping.wait_for(|stop| *stop).await.is_err() {
        std::future::pending::<()>().await;
    }
}

// ---- settling -------------------------------------------------------------

/// The lease a request presents. The attempt is optional: it picks the
/// retry delay and is 0 ("not given") otherwise; the token alone fences.
fn held(
    path: Result<Path<String>, PathRejection>,
    token: String,
    attempt: Option<u32>,
) -> Result<Lease, Problem> {
    let id = job_id(path)?;
    let shaped = token.len() == TOKEN_LEN
        && token
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !shaped {
        // The token itself is not repeated: it may be someone's secret.
        return Err(Problem::invalid(format!(
            "`token` must be the {TOKEN_LEN} lowercase hexadecimal digits of the lease (`lease.token` in the answer of POST /v1/leases); got {} characters that are not one",
            token.chars().count()
        )));
    }
    if let Some(n) = attempt
        && !(1..=MAX_ATTEMPT).contains(&n)
    {
        return Err(Problem::invalid(format!(
            "`attempt` must be the lease's attempt number, from 1 to {MAX_ATTEMPT} (got {n})"
        )));
    }
    Ok(Lease {
        id,
        token: errand::core::LeaseToken::from_string(token),
        attempt: attempt.unwrap_or(0),
    })
}

/// A store answer, with a refusal by the fence as `lease_lost`.
fn fenced<T>(lease: &Lease, result: errand::Result<T>) -> Result<T, Problem> {
    result.map_err(|e| match e {
        errand::Error::LeaseLost { .. } => Problem::lease_lost(&lease.id),
        other => Problem::from(other),
    })
}

#[derive(Serialize)]
struct Settled<'a> {
    outcome: &'static str,
    job: &'a Job,
}

/// Counts a settlement for the dashboard's charts and, when the interval
/// has passed, writes the counts in the background (a failed write keeps
/// them for the next).
fn count(app: &App, outcome: WorkOutcome, class: Option<ErrorClass>, job: &Job) {
    app.minutes
        .settled(&job.queue, outcome, class, job.deadline);
    if app.minutes.write_due(app.chart_counts_every) {
        let (minutes, store) = (app.minutes.clone(), app.store.clone());
        tokio::spawn(async move {
            if let Err(e) = minutes.flush(store.as_ref()).await {
                tracing::warn!(error = %e, "writing the charts' per-minute counts failed; they are kept for the next write");
            }
        });
    }
}

fn settled(outcome: WorkOutcome, job: &Job) -> Answer {
    json(
        StatusCode::OK,
        &Settled {
            outcome: outcome.as_str(),
            job,
        },
    )
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeldBody {
    token: String,
    attempt: Option<u32>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HeartbeatBody {
    token: String,
    attempt: Option<u32>,
    extend: Option<String>,
    /// How far the worker has got, stored with the renewal.
    progress: Option<ProgressBody>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ProgressBody {
    percent: u8,
    message: Option<String>,
}

#[derive(Serialize)]
struct Renewed {
    lease_until: Timestamp,
}

pub(crate) async fn heartbeat(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req: HeartbeatBody = body_json(&app, &headers, body, HEARTBEAT_EXAMPLE).await?;
    let lease = held(path, req.token, req.attempt)?;
    let extend = lease_length("extend", req.extend)?;
    let renewed = match req.progress {
        None => app.store.heartbeat(&lease, extend).await,
        Some(p) => {
            if p.percent > 100 {
                return Err(Problem::invalid(format!(
                    "`progress.percent` must be 0 to 100 (got {})",
                    p.percent
                )));
            }
            let report = errand::core::Progress::new(p.percent, p.message, lease.attempt);
            app.store
                .heartbeat_with_progress(&lease, extend, &report)
                .await
        }
    };
    let lease_until = fenced(&lease, renewed)?;
    json(StatusCode::OK, &Renewed { lease_until })
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CompleteBody {
    token: String,
    attempt: Option<u32>,
    /// The job's result, kept with it for its dependents.
    output: Option<errand::Payload>,
    /// Jobs the step adds to its workflow as it completes, each as
    /// `POST /v1/jobs` takes one; its dependents wait for them too.
    #[serde(default)]
    children: Vec<errand::core::JobJson>,
}

#[derive(Serialize)]
struct SettledWithChildren<'a> {
    outcome: &'static str,
    job: &'a Job,
    /// The children as stored.
    children: &'a [Job],
    /// How many of the step's dependents wait for them.
    dependents: u64,
}

/// The children of a completion, each checked as an enqueue is; a refusal
/// names the child by its place in the list.
fn children(app: &App, given: Vec<errand::core::JobJson>) -> Result<Vec<errand::NewJob>, Problem> {
    given
        .into_iter()
        .enumerate()
        .map(|(i, json)| {
            json.into_spec()
                .and_then(|spec| spec.build_limited(app.max_payload))
                .map_err(|e| match e {
                    errand::Error::Invalid(m) => Problem::invalid(format!("`children[{i}]`: {m}")),
                    other => Problem::from(other),
                })
        })
        .collect()
}

pub(crate) async fn complete(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req: CompleteBody = body_json(&app, &headers, body, COMPLETE_EXAMPLE).await?;
    let lease = held(path, req.token, req.attempt)?;
    let output = match req.output {
        Some(output) => Some(errand::Payload::output(output.as_str()).map_err(Problem::from)?),
        None => None,
    };
    if !req.children.is_empty() {
        let jobs = children(&app, req.children)?;
        let added = fenced(
            &lease,
            app.store
                .complete_with_children(&lease, output.as_ref(), &jobs)
                .await,
        )?;
        count(&app, WorkOutcome::Acknowledged, None, &added.job);
        return json(
            StatusCode::OK,
            &SettledWithChildren {
                outcome: WorkOutcome::Acknowledged.as_str(),
                job: &added.job,
                children: &added.children,
                dependents: added.dependents,
            },
        );
    }
    let done = match &output {
        None => app.store.complete(&lease).await,
        Some(output) => app.store.complete_with_output(&lease, output).await,
    };
    let job = fenced(&lease, done)?;
    count(&app, WorkOutcome::Acknowledged, None, &job);
    settled(WorkOutcome::Acknowledged, &job)
}

pub(crate) async fn release(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req: HeldBody = body_json(&app, &headers, body, HELD_EXAMPLE).await?;
    let lease = held(path, req.token, req.attempt)?;
    let job = fenced(&lease, app.store.release(&lease).await)?;
    settled(WorkOutcome::Released, &job)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FailBody {
    token: String,
    attempt: Option<u32>,
    error: String,
    class: Option<String>,
    retry_in: Option<String>,
    retry_at: Option<String>,
}

/// The classes a worker may report; the others (`lease_expired`,
/// `lost_lease`, `cancelled`) are recorded by the store itself.
fn reported_class(class: Option<&str>) -> Result<ErrorClass, Problem> {
    match class {
        None | Some("retryable") => Ok(ErrorClass::Retryable),
        Some("timeout") => Ok(ErrorClass::Timeout),
        Some("permanent") => Ok(ErrorClass::Permanent),
        Some(other) => Err(Problem::invalid(format!(
            "`class` must be retryable (the default), timeout or permanent (got {:?}); to cancel the job use POST /v1/leases/{{id}}/cancel",
            other.chars().take(40).collect::<String>()
        ))),
    }
}

pub(crate) async fn fail(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req: FailBody = body_json(&app, &headers, body, FAIL_EXAMPLE).await?;
    let lease = held(path, req.token, req.attempt)?;
    audit_text("error", &req.error, MAX_REASON_BYTES, true)?;
    let class = reported_class(req.class.as_deref())?;
    let hint = match (req.retry_in, req.retry_at) {
        (Some(_), Some(_)) => {
            return Err(Problem::invalid(
                "give `retry_in` or `retry_at`, not both (or neither, for the server's retry policy)",
            ));
        }
        (Some(d), None) => Some(RetryAt::After(delay("retry_in", &d)?)),
        (None, Some(t)) => {
            Some(RetryAt::At(Timestamp::parse_rfc3339(&t).map_err(|e| {
                Problem::invalid(format!("`retry_at`: {}", detail_of(e)))
            })?))
        }
        (None, None) => None,
    };
    if class == ErrorClass::Permanent && hint.is_some() {
        return Err(Problem::invalid(
            "a permanent failure is not retried: leave out `retry_in` and `retry_at`, or report class retryable",
        ));
    }
    let attempt = match lease.attempt {
        // Only the policy's delay needs the attempt; read it when the
        // worker did not say (the fence below still decides).
        0 if class != ErrorClass::Permanent && hint.is_none() => {
            match app.store.get(&lease.id).await {
                Ok(job) => job.attempts,
                Err(errand::Error::NotFound(_)) => return Err(Problem::lease_lost(&lease.id)),
                Err(e) => return Err(e.into()),
            }
        }
        n => n,
    };
    let failure = errand::failure_for(req.error, class, hint, attempt, &app.retry, || {
        rand::random::<f64>()
    });
    let job = fenced(&lease, app.store.fail(&lease, failure).await)?;
    let outcome = match FailResult::of(&job) {
        FailResult::Dead => WorkOutcome::Dead,
        FailResult::Retrying(_) => WorkOutcome::RetryScheduled,
    };
    count(&app, outcome, Some(class), &job);
    settled(outcome, &job)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct AwaitLeaseBody {
    token: String,
    attempt: Option<u32>,
    signal: String,
    timeout: Option<String>,
    on_timeout: Option<String>,
}

/// `POST /v1/leases/{id}/await`: the handler suspends its job until the
/// signal (`{"signal": …, "timeout": …, "on_timeout": …}`), giving the
/// attempt back; the job is `waiting` (or `ready` at once, when a signal
/// of that name was kept for it).
pub(crate) async fn suspend(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req: AwaitLeaseBody = body_json(&app, &headers, body, AWAIT_EXAMPLE).await?;
    let lease = held(path, req.token, req.attempt)?;
    let wait = crate::signals::wait_of(&req.signal, req.timeout, req.on_timeout)?;
    let job = fenced(&lease, app.store.suspend(&lease, &wait).await)?;
    settled(WorkOutcome::Awaiting, &job)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SnoozeBody {
    token: String,
    attempt: Option<u32>,
    delay: String,
}

pub(crate) async fn snooze(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req: SnoozeBody = body_json(&app, &headers, body, SNOOZE_EXAMPLE).await?;
    let lease = held(path, req.token, req.attempt)?;
    let delay = delay("delay", &req.delay)?;
    let job = fenced(&lease, app.store.snooze(&lease, delay).await)?;
    settled(WorkOutcome::Snoozed, &job)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    token: String,
    attempt: Option<u32>,
    reason: String,
}

pub(crate) async fn cancel(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let req: CancelBody = body_json(&app, &headers, body, CANCEL_EXAMPLE).await?;
    let lease = held(path, req.token, req.attempt)?;
    audit_text("reason", &req.reason, MAX_REASON_BYTES, true)?;
    let job = fenced(&lease, app.store.cancel_running(&lease, &req.reason).await)?;
    settled(WorkOutcome::Cancelled, &job)
}

/// The claimed jobs with their payloads opened with the store's keys; a
/// job whose payload does not open is failed for good at once, saying
/// why (no worker given it could read it), and left out.
async fn readable(app: &App, claimed: Vec<ClaimedJob>) -> Result<Vec<ClaimedJob>, Problem> {
    let keys = app.store.keyring();
    let mut readable = Vec::with_capacity(claimed.len());
    for mut c in claimed {
        let job = &mut c.job;
        match open_in_place(keys, Field::Payload, &job.id, &mut job.payload) {
            Ok(()) => readable.push(c),
            Err(why) => {
                let failure = errand::Failure {
                    error: format!("the payload of job `{}` cannot be read: {why}", job.id),
                    class: errand::ErrorClass::Permanent,
                    retry: None,
                };
                app.store.fail(&c.lease, failure).await?;
            }
        }
    }
    Ok(readable)
}

/// The signal that ended job `id`'s latest wait, its payload opened.
async fn opened_signal(app: &App, id: &JobId) -> Result<Option<errand::ReceivedSignal>, Problem> {
    let mut signal = app.store.received_signal(id).await?;
    open_signal(app.store.keyring(), id, &mut signal)?;
    Ok(signal)
}
