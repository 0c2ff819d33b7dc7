//! A benchmark's configuration checked flag by flag against its workload,
//! with the defaults filled in.

use std::time::Duration;

use errand::DbTarget;

use super::{
    DEFAULT_BACKLOG, DEFAULT_CLAIMED, DEFAULT_CONTINUOUS, DEFAULT_FAN_OUT, DEFAULT_JOBS,
    DEFAULT_ROWS, DEFAULT_SAMPLES, DEFAULT_SLOTS, DEFAULT_SNAPSHOT, DEFAULT_WAITERS,
    DEFAULT_WAITERS_IDLE, ENQUEUE_BATCHES,
};
use crate::{BenchConfig, BenchError, Result, Workload};

fn invalid(message: impl Into<String>) -> BenchError {
    BenchError::Invalid(message.into())
}

/// The configuration with every default filled in and every flag checked
/// against the workload.
pub(super) struct Resolved {
    pub(super) jobs: u64,
    pub(super) jobs_given: bool,
    pub(super) batches: Vec<u32>,
    pub(super) backlog: u32,
    pub(super) concurrency: usize,
    pub(super) duration: Duration,
    pub(super) rate: Option<f64>,
    pub(super) job_time: Duration,
    pub(super) rows: u64,
    pub(super) stall: Duration,
    pub(super) meta: errand::core::Meta,
}

/// Checks every flag of `c` against its workload and fills in the defaults the flags leave.
pub(super) fn resolve(c: &BenchConfig) -> Result<Resolved> {
    use Workload::*;
    let w = c.workload;
    let postgres = matches!(DbTarget::parse(&c.db)?, DbTarget::Postgres(_));
    if c.jobs == Some(0) {
        return Err(invalid("--jobs must be at least 1"));
    }
    if c.jobs.is_some() && w == Continuous {
        return Err(invalid(
            "continuous runs for --duration with a backlog of --batch jobs; it takes no --jobs",
        ));
    }
    if let Some(b) = c.batch {
        check_batch(w, b)?;
    }
    if let Some(n) = c.concurrency {
        check_concurrency(w, n)?;
    }
    if let Some(d) = c.duration {
        check_duration(w, d, postgres)?;
    }
    if let Some(r) = c.rate {
        check_rate(w, r)?;
    }
    if !c.job_time.is_zero() && matches!(w, Enqueue | ClaimCost | FanOut | Waiters) {
        return Err(invalid(format!(
            "--job-time applies to workloads that run jobs, not to {}",
            w.as_str()
        )));
    }
    if let Some(r) = c.rows {
        check_rows(w, r)?;
    }
    if !c.meta.is_empty() && !matches!(w, BurnDown | RetryHeavy | Workflow) {
        return Err(invalid(format!(
            "--meta applies to the drains (burn-down, retry-heavy, workflow), not to {}",
            w.as_str()
        )));
    }
    errand::core::check_meta(&c.meta).map_err(|e| invalid(format!("--meta: {e}")))?;
    if c.stall.is_zero() {
        return Err(invalid("the stall timeout must be longer than zero"));
    }
    let default_jobs = match w {
        Latency | Signals => DEFAULT_SAMPLES,
        ClaimCost => DEFAULT_CLAIMED,
        FanOut => DEFAULT_FAN_OUT,
        Waiters => DEFAULT_WAITERS,
        Continuous => 0,
        _ => DEFAULT_JOBS,
    };
    Ok(Resolved {
        jobs: c.jobs.unwrap_or(default_jobs),
        jobs_given: c.jobs.is_some(),
        batches: match (w, c.batch) {
            (Enqueue, Some(b)) => vec![b],
            (Enqueue, None) => ENQUEUE_BATCHES.to_vec(),
            _ => Vec::new(),
        },
        backlog: c.batch.unwrap_or(DEFAULT_BACKLOG),
        concurrency: c
            .concurrency
            .unwrap_or(if w == Enqueue { 1 } else { DEFAULT_SLOTS }),
        duration: c.duration.unwrap_or(match w {
            ClaimCost => DEFAULT_SNAPSHOT,
            Waiters => DEFAULT_WAITERS_IDLE,
            _ => DEFAULT_CONTINUOUS,
        }),
        rate: c.rate,
        job_time: c.job_time,
        rows: c.rows.unwrap_or(DEFAULT_ROWS),
        stall: c.stall,
        meta: c.meta.clone(),
    })
}

/// Refuses a `--batch` the workload `w` takes none of, or out of range.
fn check_batch(w: Workload, b: u32) -> Result<()> {
    if !matches!(w, Workload::Enqueue | Workload::Continuous) {
        return Err(invalid(format!(
            "--batch applies to enqueue (jobs per call) and continuous (the backlog), not to {}",
            w.as_str()
        )));
    }
    if !(1..=100_000).contains(&b) {
        return Err(invalid(format!(
            "--batch must be between 1 and 100000 (got {b})"
        )));
    }
    Ok(())
}

/// Refuses a `--concurrency` for claim-cost, or out of range.
fn check_concurrency(w: Workload, n: usize) -> Result<()> {
    if w == Workload::ClaimCost {
        return Err(invalid(
            "claim-cost times one claim at a time; it takes no --concurrency",
        ));
    }
    if !(1..=10_000).contains(&n) {
        return Err(invalid(format!(
            "--concurrency must be between 1 and 10000 (got {n})"
        )));
    }
    Ok(())
}

/// Refuses a `--duration` the workload takes none of (claim-cost: PostgreSQL only), or of zero.
fn check_duration(w: Workload, d: Duration, postgres: bool) -> Result<()> {
    match w {
        Workload::Continuous | Workload::Waiters => {}
        Workload::ClaimCost if postgres => {}
        Workload::ClaimCost => {
            return Err(invalid(
                "--duration sets how long claim-cost holds a PostgreSQL snapshot; SQLite has none to hold",
            ));
        }
        _ => {
            return Err(invalid(format!(
                "--duration applies to continuous, claim-cost and waiters, not to {}",
                w.as_str()
            )));
        }
    }
    if d.is_zero() {
        return Err(invalid("--duration must be longer than zero"));
    }
    Ok(())
}

/// Refuses a `--rate` for any workload but latency, or out of range.
fn check_rate(w: Workload, r: f64) -> Result<()> {
    if w != Workload::Latency {
        return Err(invalid(format!(
            "--rate applies to latency, not to {}",
            w.as_str()
        )));
    }
    if !(r.is_finite() && r > 0.0 && r <= 1_000_000.0) {
        return Err(invalid(format!(
            "--rate must be a number of jobs per second above 0 and at most 1000000 (got {r})"
        )));
    }
    Ok(())
}

/// Refuses `--rows` for any workload but claim-cost, or of zero.
fn check_rows(w: Workload, r: u64) -> Result<()> {
    if w != Workload::ClaimCost {
        return Err(invalid(format!(
            "--rows applies to claim-cost, not to {}",
            w.as_str()
        )));
    }
    if r == 0 {
        return Err(invalid("--rows must be at least 1"));
    }
    Ok(())
}
