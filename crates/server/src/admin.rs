//! The operator's routes: statistics, the audited purge of dead jobs, the
//! audit log, and `/metrics` (the queues' pauses and caps are in
//! `queues.rs`, the stored schedules in `schedules.rs`).

use std::time::Duration;

use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use errand::{AuditFilter, JobId, Name, PurgeRequest, Stats, StatsRequest};
use prometheus_client::encoding::{EncodeMetric, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;
use serde::Deserialize;

use crate::problem::Problem;
use crate::request::{
    Answer, App, body_json, duration_field, given, job_id, json, page_limit, who_and_why,
};

/// The longest statistics window.
const MAX_WINDOW: Duration = Duration::from_secs(7 * 86_400);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct StatsQuery {
    window: Option<String>,
}

fn stats_request(window: Option<String>) -> Result<StatsRequest, Problem> {
    let mut req = StatsRequest::default();
    if let Some(w) = duration_field("window", window.filter(|w| !w.is_empty()))? {
        if w.is_zero() || w > MAX_WINDOW {
            return Err(Problem::invalid(
                "`window` must be longer than zero and at most 7 days (`15m`, `1h`)",
            ));
        }
        req.window = w;
    }
    Ok(req)
}

/// `GET /v1/stats?window=15m`
pub(crate) async fn stats(
    State(app): State<App>,
    query: Result<Query<StatsQuery>, QueryRejection>,
) -> Answer {
    let Query(q) = query.map_err(|r| {
        Problem::malformed_json(format!("{}; the one parameter is window", r.body_text()))
    })?;
    let stats = app.admin.stats(&stats_request(q.window)?).await?;
    json(StatusCode::OK, &stats)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChartsQuery {
    queue: Option<String>,
    window: Option<String>,
}

/// `GET /v1/charts?queue=Q&window=hour|day`: the per-minute counts behind
/// the dashboard's charts, added up per slot.
pub(crate) async fn charts(
    State(app): State<App>,
    query: Result<Query<ChartsQuery>, QueryRejection>,
) -> Answer {
    let Query(q) = query.map_err(|r| {
        Problem::malformed_json(format!(
            "{}; the parameters are queue and window",
            r.body_text()
        ))
    })?;
    let queue = q
        .queue
        .filter(|q| !q.is_empty())
        .map(|q| Name::parse("queue", q))
        .transpose()?;
    let window = match q.window.as_deref() {
        None | Some("") => errand::ChartWindow::default(),
        Some(w) => w.parse()?,
    };
    let charts = app
        .admin
        .charts(queue, window, errand::Timestamp::now())
        .await?;
    json(StatusCode::OK, &charts)
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PurgeBody {
    operator: String,
    reason: String,
}

const PURGE_EXAMPLE: &str =
    r#"{"operator": "alice", "reason": "poison payload, customer refunded"}"#;

/// `POST /v1/jobs/{id}/purge`
pub(crate) async fn purge(
    State(app): State<App>,
    path: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    body: Body,
) -> Answer {
    let id = job_id(path)?;
    let req: PurgeBody = body_json(&app, &headers, body, PURGE_EXAMPLE).await?;
    who_and_why(&req.operator, Some(&req.reason))?;
    let purged = app
        .admin
        .purge_jobs(&PurgeRequest {
            ids: vec![id],
            operator: req.operator,
            reason: req.reason,
        })
        .await?;
    json(StatusCode::OK, &serde_json::json!({"purged": purged}))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AuditQuery {
    job: Option<String>,
    queue: Option<String>,
    schedule: Option<String>,
    before: Option<String>,
    limit: Option<String>,
}

/// `GET /v1/audit?job=&queue=&schedule=&before=&limit=`
pub(crate) async fn audit(
    State(app): State<App>,
    query: Result<Query<AuditQuery>, QueryRejection>,
) -> Answer {
    let Query(q) = query.map_err(|r| {
        Problem::malformed_json(format!(
            "{}; the parameters are job, queue, schedule, before and limit",
            r.body_text()
        ))
    })?;
    let limit = page_limit(q.limit)?;
    let before = match given(q.before) {
        None => None,
        Some(t) => Some(t.parse::<u64>().map_err(|_| {
            Problem::invalid(format!(
                "before {t:?} is not valid: give the `seq` of the last entry of the previous page"
            ))
        })?),
    };
    let filter = AuditFilter {
        job: given(q.job).map(JobId::new).transpose()?,
        queue: given(q.queue)
            .map(|s| Name::parse("queue", s))
            .transpose()?,
        schedule: given(q.schedule)
            .map(|s| Name::parse("schedule", s))
            .transpose()?,
        before,
        limit: Some(limit),
    };
    let entries = app.admin.audit_log(&filter).await?;
    let next = if entries.len() >= limit as usize {
        entries.last().map(|e| e.seq)
    } else {
        None
    };
    json(
        StatusCode::OK,
        &serde_json::json!({"entries": entries, "next": next}),
    )
}

// ---- GET /metrics -----------------------------------------------------------

/// A histogram already counted elsewhere (the workers' reports, summed):
/// encoded as it is.
#[derive(Debug)]
struct Counted {
    sum: f64,
    count: u64,
    /// (upper bound, observations in that bucket), not cumulative.
    buckets: Vec<(f64, u64)>,
}

impl Counted {
    fn of(h: &errand::Histogram) -> Self {
        let mut buckets: Vec<(f64, u64)> = errand::LATENCY_BUCKETS_MS
            .iter()
            .map(|ms| (*ms as f64 / 1000.0, 0))
            .chain(std::iter::once((f64::INFINITY, 0)))
            .collect();
        for (slot, n) in buckets.iter_mut().zip(&h.counts) {
            slot.1 = *n;
        }
        Counted {
            sum: h.sum_ms as f64 / 1000.0,
            count: h.count(),
            buckets,
        }
    }
}

impl EncodeMetric for Counted {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        encoder.encode_histogram::<NoLabelSet>(self.sum, self.count, &self.buckets, None)
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

type Labels = Vec<(&'static str, String)>;

/// Which of a worker's counters a metric exports.
type CounterOf = fn(&errand::WorkerMetrics) -> u64;

/// One histogram per worker, each under its labels.
#[derive(Debug)]
struct PerWorker(Vec<(Labels, Counted)>);

impl EncodeMetric for PerWorker {
    fn encode(&self, mut encoder: MetricEncoder<'_>) -> Result<(), std::fmt::Error> {
        for (labels, h) in &self.0 {
            h.encode(encoder.encode_family(labels)?)?;
        }
        Ok(())
    }

    fn metric_type(&self) -> MetricType {
        MetricType::Histogram
    }
}

fn gauge_family(registry: &mut Registry, name: &str, help: &str) -> Family<Labels, Gauge> {
    let f = Family::<Labels, Gauge>::default();
    registry.register(name, help, f.clone());
    f
}

fn as_i64(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The Prometheus text of the operator signals (docs/http-api.md lists them).
pub(crate) fn render_metrics(stats: &Stats) -> Result<String, std::fmt::Error> {
    let mut r = Registry::default();
    register_queue_metrics(&mut r, stats);
    register_worker_metrics(&mut r, stats);
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &r)?;
    Ok(spell_infinities(&out))
}

/// Each queue's jobs by state, leases, oldest due age, pause, cap, and the
/// recent window's retries and dead letters; the truncation flags.
fn register_queue_metrics(r: &mut Registry, stats: &Stats) {
    let jobs = gauge_family(
        r,
        "errand_jobs",
        "Jobs per queue and state (ready = due now, scheduled = due later); each queue's count stops past the cap, see errand_jobs_truncated",
    );
    let truncated = gauge_family(
        r,
        "errand_jobs_truncated",
        "1 when some queue's count of the state went past the cap and is a lower bound",
    );
    let leases = gauge_family(
        r,
        "errand_leases",
        "Running jobs per queue by lease: live or expired (its worker is gone or stalled)",
    );
    let oldest = Family::<Labels, Gauge<f64, std::sync::atomic::AtomicU64>>::default();
    r.register(
        "errand_oldest_due_age_seconds",
        "Age of the oldest job that is due and not started, per queue",
        oldest.clone(),
    );
    let paused = gauge_family(
        r,
        "errand_queue_paused",
        "1 when an operator paused the queue",
    );
    let cap = gauge_family(
        r,
        "errand_queue_concurrency_limit",
        "How many of the queue's jobs may run at once across every process; absent: no cap",
    );
    let window = format!("{}s", stats.window_secs);
    let retries = gauge_family(
        r,
        "errand_retries_recent",
        "Failed attempts to be retried in the recent window, per queue and error class",
    );
    let dead = gauge_family(
        r,
        "errand_dead_letters_recent",
        "Jobs that went dead in the recent window, per queue and error class (the dead-letter rate is this over the window)",
    );
    for q in &stats.queues {
        let name = q.queue.to_string();
        let c = &q.counts;
        for (state, n) in [
            ("blocked", c.blocked),
            ("waiting", c.waiting),
            ("ready", c.ready),
            ("scheduled", c.scheduled),
            ("running", c.running),
            ("dead", c.dead),
        ] {
            jobs.get_or_create(&vec![("queue", name.clone()), ("state", state.into())])
                .set(as_i64(n));
        }
        for (kind, n) in [("live", c.active_leases), ("expired", c.expired_leases)] {
            leases
                .get_or_create(&vec![("queue", name.clone()), ("lease", kind.into())])
                .set(as_i64(n));
        }
        oldest
            .get_or_create(&vec![("queue", name.clone())])
            .set(c.oldest_due_age_ms.unwrap_or(0) as f64 / 1000.0);
        paused
            .get_or_create(&vec![("queue", name.clone())])
            .set(i64::from(q.paused));
        if let Some(n) = q.concurrency_limit {
            cap.get_or_create(&vec![("queue", name.clone())])
                .set(i64::from(n));
        }
        for (class, n) in &c.retries {
            retries
                .get_or_create(&vec![
                    ("queue", name.clone()),
                    ("class", class.clone()),
                    ("window", window.clone()),
                ])
                .set(as_i64(*n));
        }
        for (class, n) in &c.dead_letters {
            dead.get_or_create(&vec![
                ("queue", name.clone()),
                ("class", class.clone()),
                ("window", window.clone()),
            ])
            .set(as_i64(*n));
        }
    }
    for state in ["ready", "running", "dead"] {
        truncated
            .get_or_create(&vec![("state", state.into())])
            .set(i64::from(stats.truncated.iter().any(|t| t == state)));
    }
}

/// The workers still reporting: how many, the time since the last claim
/// cycle, and each worker's counters and latency histograms.
fn register_worker_metrics(r: &mut Registry, stats: &Stats) {
    let window = format!("{}s", stats.window_secs);
    // Only the workers still reporting: a worker gone for longer than the
    // window has no series (its last counts would otherwise linger as if
    // it were alive until its report is deleted a day later).
    let recent: Vec<&errand::WorkerSeen> = stats.recent_workers().collect();
    let workers = Gauge::<i64>::default();
    r.register(
        "errand_workers",
        format!("Worker processes that reported in the last {}", window),
        workers.clone(),
    );
    workers.set(i64::try_from(recent.len()).unwrap_or(i64::MAX));
    let since = Gauge::<f64, std::sync::atomic::AtomicU64>::default();
    r.register(
        "errand_seconds_since_last_worker_cycle",
        "Seconds since any worker last completed a claim cycle (+Inf when none ever reported)",
        since.clone(),
    );
    since.set(
        stats
            .since_last_worker_cycle_ms
            .map_or(f64::INFINITY, |ms| ms as f64 / 1000.0),
    );
    // Each worker's counters are its own and only grow, so they are
    // exported per worker: a sum over the stored reports would drop when a
    // silent worker's report is deleted, which Prometheus reads as a reset.
    let counters: Vec<(&str, &str, CounterOf)> = vec![
        (
            "errand_worker_cycles",
            "Claim cycles completed, per worker",
            |m| m.cycles,
        ),
        (
            "errand_attempts_started",
            "Attempts started, per worker",
            |m| m.started,
        ),
        (
            "errand_deadline_met",
            "Jobs with a business deadline that succeeded on time, per worker",
            |m| m.on_time,
        ),
        (
            "errand_deadline_missed",
            "Jobs with a business deadline that succeeded late, per worker",
            |m| m.late,
        ),
    ];
    let labels = |w: &errand::WorkerSeen| -> Labels {
        vec![("worker", w.id.clone()), ("host", w.host.clone())]
    };
    for (name, help, value) in counters {
        let family = Family::<Labels, Counter>::default();
        for w in &recent {
            family.get_or_create(&labels(w)).inc_by(value(&w.metrics));
        }
        r.register(name, help, family);
    }
    let per_worker = |pick: fn(&errand::WorkerMetrics) -> &errand::Histogram| {
        PerWorker(
            recent
                .iter()
                .map(|w| (labels(w), Counted::of(pick(&w.metrics))))
                .collect(),
        )
    };
    r.register(
        "errand_start_latency_seconds",
        "From when a job was due to when its attempt started, per worker",
        per_worker(|m| &m.start_latency),
    );
    r.register(
        "errand_lateness_seconds",
        "How late past its business deadline a job succeeded (0 when on time), per worker",
        per_worker(|m| &m.lateness),
    );
}

/// The encoder writes an infinite sample value as Rust prints it (`inf`);
/// OpenMetrics and Prometheus spell it `+Inf` (and `-Inf`). A sample's value
/// is the last field of its line (no timestamps or exemplars are written),
/// and label values cannot end a line (they are quoted, newlines escaped).
fn spell_infinities(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 8);
    for line in text.lines() {
        if !line.starts_with('#') {
            if let Some(head) = line.strip_suffix(" -inf") {
                out.push_str(head);
                out.push_str(" -Inf\n");
                continue;
            }
            if let Some(head) = line.strip_suffix(" inf") {
                out.push_str(head);
                out.push_str(" +Inf\n");
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// `GET /metrics`
pub(crate) async fn metrics(State(app): State<App>) -> Answer {
    let stats = app.admin.stats(&StatsRequest::default()).await?;
    let body = render_metrics(&stats)
        .map_err(|_| Problem::internal("the metrics could not be encoded".to_owned()))?;
    Ok((
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
        )],
        body,
    )
        .into_response())
}
