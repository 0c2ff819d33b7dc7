//! The checker: figures over the recorded history and the final database.
//! Pure functions over plain data, so every figure has a unit test that
//! makes it non-zero.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde::Serialize;

mod children;

pub use children::{Adder, ChildHistory};

/// What the load generator learned about one id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Enqueue {
    /// The insert returned the job.
    Ok,
    /// The insert was refused before anything was written.
    Failed,
    /// The insert errored and its outcome is unknown.
    Ambiguous,
}

/// One id the load generator tried to enqueue.
#[derive(Clone, Debug)]
pub struct Intent {
    pub status: Enqueue,
    pub poison: bool,
}

/// A job as the database has it at the end.
#[derive(Clone, Debug)]
pub struct FinalJob {
    pub state: String,
    pub attempts: u32,
    pub max_attempts: u32,
    pub last_error_class: Option<String>,
    /// (attempt, started_at ms, finished_at ms, outcome)
    pub history: Vec<(u32, i64, Option<i64>, Option<String>)>,
}

/// A handler start from `exec.log`.
#[derive(Clone, Debug)]
pub struct Start {
    pub id: String,
    pub attempt: u32,
    pub worker: i32,
    pub at: i64,
}

/// One `errand work --json` report line, with the worker that printed it.
#[derive(Clone, Debug)]
pub struct Report {
    pub worker: i32,
    pub id: String,
    pub attempt: u32,
    pub outcome: String,
    pub acknowledged: bool,
}

/// Everything the checker reads.
#[derive(Clone, Debug, Default)]
pub struct History {
    pub intents: BTreeMap<String, Intent>,
    /// Every job id the final listing returned (duplicates kept).
    pub listed: Vec<String>,
    /// Details of every distinct listed id.
    pub jobs: HashMap<String, FinalJob>,
    pub starts: Vec<Start>,
    /// `(id, applied)` from `effects.log`.
    pub effects: Vec<(String, bool)>,
    pub reports: Vec<Report>,
    /// Worker outages: (worker pid, ms) — nemesis kills, poison kills and
    /// SIGSTOPs.
    pub deaths: Vec<(i32, i64)>,
    /// Crash points that fired: (point, worker pid, ms), from the workers'
    /// stderr. Also in `deaths`.
    pub crash_points: Vec<(String, i32, i64)>,
    /// "Storage full" errors the load generator and the workers saw.
    pub storage_full: u64,
    /// Forward clock steps taken while a worker held a lease (clock plan).
    pub forward_steps_over_leases: u64,
    /// HTTP enqueue requests that failed (connection refused or cut, 5xx)
    /// and were retried with the same id (http plan).
    pub http_requests_failed: u64,
    /// Retries answered "already exists": the request that failed had
    /// committed the job, and its answer was lost with the server.
    pub http_found_existing: u64,
    /// Server kills that landed while a request was in flight.
    pub http_kills_mid_request: u64,
    pub lease_ms: u64,
    pub integrity: Option<String>,
    /// The signals plan's senders and deliveries.
    pub signals: SignalHistory,
    /// The signals plan's steps that add children, and their joins.
    pub children: ChildHistory,
}

/// What the signals plan did: the senders it started and killed, and for
/// each job that suspended itself until a signal, how many signals were
/// delivered to it.
#[derive(Clone, Debug, Default)]
pub struct SignalHistory {
    pub deliveries: BTreeMap<String, u64>,
    pub sent: u64,
    pub senders_killed: u64,
}

/// The counters a plan must see above 0 (or, for live reclaims, at 0):
/// without them the run proved nothing about its faults.
#[derive(Clone, Copy, Debug, Default)]
pub struct Require {
    /// Pause plans: stale-token rejections.
    pub stale_tokens: bool,
    /// Kill and pause plans: a recovery sample.
    pub recovery: bool,
    /// Crash plan: a crash point fired.
    pub crash_points: bool,
    /// Disk-full plan: a storage-full error.
    pub storage_full: bool,
    /// Clock plan: a forward step over held leases, and no live lease
    /// reclaimed.
    pub no_live_reclaims: bool,
    /// HTTP plan: a failed (retried) enqueue request.
    pub http_failures: bool,
    /// Signals plan: a signal sender killed.
    pub signals: bool,
    /// Failover with asynchronous replication: the last commits the
    /// standby had not received are lost with the primary — acknowledged
    /// enqueues (`lost`) and acknowledged settlements
    /// (`acks_not_recorded`, whose jobs run again). Counted and shown,
    /// not violations.
    pub replication_losses: bool,
}

/// The checker's figures.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Figures {
    pub enqueued_ok: u64,
    pub enqueued_failed: u64,
    pub enqueued_ambiguous: u64,
    pub executions: u64,
    pub redeliveries: u64,
    pub completed: u64,
    pub dead: u64,
    pub effects_applied: u64,
    pub effect_repeats: u64,
    pub stale_token_rejections: u64,
    pub worker_outages: u64,
    /// Crash-point SIGKILLs by point (crash plan).
    pub crash_point_kills: BTreeMap<String, u64>,
    /// "Storage full" errors seen by the load generator and the workers
    /// (disk-full plan).
    pub storage_full_errors: u64,
    /// Leases reclaimed from a worker that was alive and running: the
    /// attempt's history row says `lease_expired`, and its worker had no
    /// outage (kill, crash, pause) between the attempt's start and the
    /// job's next start. Must be 0 in the clock plan (a clock step must not
    /// steal live leases); elsewhere it shows heartbeats starved by load.
    pub live_lease_reclaims: u64,
    /// Forward clock steps taken while a handler ran (clock plan; must be
    /// above 0 there, or the steps proved nothing).
    pub forward_steps_over_leases: u64,
    /// HTTP enqueues that failed and were retried with the same id (http
    /// plan; must be above 0 there, or no kill hit a request).
    pub http_requests_failed: u64,
    /// Of those, retries answered "already exists" (the lost answer's job
    /// had committed): each must still be exactly one job.
    pub http_found_existing: u64,
    /// Server SIGKILLs that landed while a request was in flight (http
    /// plan; must be above 0 there).
    pub http_kills_mid_request: u64,
    /// Signals plan: `errand signal` processes started, and SIGKILLed
    /// before they ended (must be above 0 there).
    pub signals_sent: u64,
    pub signal_senders_killed: u64,
    /// Signals delivered to the jobs that suspended themselves.
    pub signals_delivered: u64,
    /// Such jobs that took more than one signal, and such jobs done
    /// without one: each must be 0.
    pub signals_delivered_twice: u64,
    pub awaiting_done_without_signal: u64,
    /// Signals plan: children stored by the steps that add them, and
    /// workers SIGKILLed by such a step right after it wrote its children
    /// (must be above 0 there).
    pub children_added: u64,
    pub child_adders_killed: u64,
    /// Joins that started before every child of their step had finished,
    /// or read fewer outputs than were recorded: must be 0.
    pub joins_released_early: u64,
    // Safety: each must be 0.
    pub lost: u64,
    pub duplicate_jobs: u64,
    pub duplicate_effects: u64,
    pub unexpected: u64,
    pub stuck: u64,
    pub attempts_over_max: u64,
    pub overlapping_valid_leases: u64,
    pub acks_not_recorded: u64,
    pub poison_not_quarantined: u64,
    pub recovery_samples: u64,
    pub recovery_p50_ms: Option<u64>,
    pub recovery_p99_ms: Option<u64>,
    pub recovery_max_ms: Option<u64>,
    pub lease_ms: u64,
    pub integrity_check: String,
}

impl Figures {
    /// The safety figures, each of which must be 0.
    pub fn safety(&self) -> [(&'static str, u64); 9] {
        [
            ("lost", self.lost),
            ("duplicate_jobs", self.duplicate_jobs),
            ("duplicate_effects", self.duplicate_effects),
            ("unexpected", self.unexpected),
            ("stuck", self.stuck),
            ("attempts_over_max", self.attempts_over_max),
            ("overlapping_valid_leases", self.overlapping_valid_leases),
            ("acks_not_recorded", self.acks_not_recorded),
            ("poison_not_quarantined", self.poison_not_quarantined),
        ]
    }

    /// Why the run failed, if it did.
    pub fn violations(&self, require: &Require) -> Vec<String> {
        let lost_with_the_primary =
            |name: &str| require.replication_losses && matches!(name, "lost" | "acks_not_recorded");
        let mut v: Vec<String> = self
            .safety()
            .iter()
            .filter(|(name, n)| *n != 0 && !lost_with_the_primary(name))
            .map(|(name, n)| format!("{name} = {n} (must be 0)"))
            .collect();
        if self.integrity_check != "ok" && self.integrity_check != "n/a" {
            v.push(format!("integrity_check = {}", self.integrity_check));
        }
        if require.stale_tokens && self.stale_token_rejections == 0 {
            v.push("stale_token_rejections = 0: the pauses proved nothing".into());
        }
        if require.crash_points && self.crash_point_kills.values().sum::<u64>() == 0 {
            v.push("no crash point fired: the crash plan proved nothing".into());
        }
        if require.storage_full && self.storage_full_errors == 0 {
            v.push("no storage-full error: the disk-full plan proved nothing".into());
        }
        if require.no_live_reclaims && self.forward_steps_over_leases == 0 {
            v.push(
                "no forward clock step while a lease was held: the clock plan proved nothing"
                    .into(),
            );
        }
        if require.no_live_reclaims && self.live_lease_reclaims != 0 {
            v.push(format!(
                "live_lease_reclaims = {} (must be 0 under clock steps)",
                self.live_lease_reclaims
            ));
        }
        if require.http_failures && self.http_kills_mid_request == 0 {
            v.push("no server kill landed mid-request: the http plan proved nothing".into());
        }
        for (name, n) in [
            ("signals_delivered_twice", self.signals_delivered_twice),
            (
                "awaiting_done_without_signal",
                self.awaiting_done_without_signal,
            ),
            ("joins_released_early", self.joins_released_early),
        ] {
            if n != 0 {
                v.push(format!("{name} = {n} (must be 0)"));
            }
        }
        if require.signals && self.signal_senders_killed == 0 {
            v.push("no signal sender was killed: the signals plan proved nothing".into());
        }
        if require.signals && self.child_adders_killed == 0 {
            v.push(
                "no step was killed while adding children: the signals plan proved nothing \
                 about them"
                    .into(),
            );
        }
        if require.recovery && self.recovery_samples == 0 {
            v.push("no recovery sample: no kill hit a job in flight".into());
        }
        v
    }
}

fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted.get(rank.clamp(1, sorted.len()) - 1).copied()
}

const SETTLED_OK: &str = "succeeded";

/// Computes every figure.
pub fn check(h: &History) -> Figures {
    let mut f = Figures {
        lease_ms: h.lease_ms,
        integrity_check: h.integrity.clone().unwrap_or_else(|| "n/a".into()),
        worker_outages: h.deaths.len() as u64,
        storage_full_errors: h.storage_full,
        forward_steps_over_leases: h.forward_steps_over_leases,
        http_requests_failed: h.http_requests_failed,
        http_found_existing: h.http_found_existing,
        http_kills_mid_request: h.http_kills_mid_request,
        ..Figures::default()
    };
    for intent in h.intents.values() {
        match intent.status {
            Enqueue::Ok => f.enqueued_ok += 1,
            Enqueue::Failed => f.enqueued_failed += 1,
            Enqueue::Ambiguous => f.enqueued_ambiguous += 1,
        }
    }
    let applied = count_listing_and_effects(h, &mut f);
    // Executions, and the starts of each job (runs of 100,000 jobs need
    // lookups, not scans).
    let mut starts_of: HashMap<&str, Vec<&Start>> = HashMap::new();
    for s in &h.starts {
        starts_of.entry(s.id.as_str()).or_default().push(s);
    }
    f.executions = h.starts.len() as u64;
    let executed: BTreeSet<&str> = h.starts.iter().map(|s| s.id.as_str()).collect();
    f.redeliveries = f.executions - executed.len() as u64;
    f.unexpected += executed.iter().filter(|id| !may_exist(h, id)).count() as u64;
    judge_final_states(h, &applied, &mut f);
    count_overlapping_leases(h, &mut f);
    judge_reports(h, &mut f);
    count_live_lease_reclaims(h, &starts_of, &mut f);
    for (point, _, _) in &h.crash_points {
        *f.crash_point_kills.entry(point.clone()).or_insert(0) += 1;
    }
    recovery_latency(h, &starts_of, &mut f);
    judge_signals(h, &mut f);
    children::judge_children(h, &starts_of, &mut f);
    f
}

/// The signals plan: every job that suspended itself took exactly one
/// signal once it is done (a second would be a double delivery; none, a
/// job that ran without the signal it waited for). One still waiting at
/// the end is `stuck`, judged with the final states.
fn judge_signals(h: &History, f: &mut Figures) {
    let s = &h.signals;
    f.signals_sent = s.sent;
    f.signal_senders_killed = s.senders_killed;
    for (id, delivered) in &s.deliveries {
        f.signals_delivered += delivered;
        if *delivered > 1 {
            f.signals_delivered_twice += 1;
        }
        let done = h.jobs.get(id).is_some_and(|j| j.state == "done");
        if done && *delivered == 0 {
            f.awaiting_done_without_signal += 1;
        }
    }
}

/// The ids the checker accepts in the database: acknowledged or ambiguous.
fn may_exist(h: &History, id: &str) -> bool {
    h.intents
        .get(id)
        .is_some_and(|i| i.status != Enqueue::Failed)
}

/// `duplicate_jobs` and `unexpected` over the listing; the effects applied
/// and repeated. Returns how many times each job's effect was applied.
fn count_listing_and_effects<'h>(h: &'h History, f: &mut Figures) -> HashMap<&'h str, u64> {
    let mut seen = BTreeSet::new();
    for id in &h.listed {
        if !seen.insert(id.as_str()) {
            f.duplicate_jobs += 1;
        }
        if !may_exist(h, id) {
            f.unexpected += 1;
        }
    }

    // Effects.
    let mut applied: HashMap<&str, u64> = HashMap::new();
    for (id, was_applied) in &h.effects {
        if *was_applied {
            f.effects_applied += 1;
            *applied.entry(id).or_default() += 1;
        } else {
            f.effect_repeats += 1;
        }
        if !may_exist(h, id) {
            f.unexpected += 1;
        }
    }
    f.duplicate_effects = applied.values().map(|n| n.saturating_sub(1)).sum();

    applied
}

/// Each job's final state against what was enqueued: lost, stuck, done,
/// dead, a poison job not quarantined, attempts over the maximum.
fn judge_final_states(h: &History, applied: &HashMap<&str, u64>, f: &mut Figures) {
    for (id, intent) in &h.intents {
        let job = h.jobs.get(id);
        match (intent.status, job) {
            (Enqueue::Ok, None) => f.lost += 1,
            (_, Some(j)) => {
                match j.state.as_str() {
                    "done" => {
                        f.completed += 1;
                        if !applied.contains_key(id.as_str()) {
                            // Done, yet no handler ever applied its effect.
                            f.lost += 1;
                        }
                    }
                    "dead" => f.dead += 1,
                    "ready" | "running" => {
                        f.stuck += 1;
                        if intent.status == Enqueue::Ok {
                            f.lost += 1;
                        }
                    }
                    _ => {
                        if intent.status == Enqueue::Ok {
                            f.lost += 1;
                        }
                    }
                }
                if intent.poison
                    && !(j.state == "dead" && j.last_error_class.as_deref() == Some("lost_lease"))
                {
                    f.poison_not_quarantined += 1;
                }
                let over_history = j.history.len() as u32 > j.max_attempts;
                if j.attempts > j.max_attempts || over_history {
                    f.attempts_over_max += 1;
                }
            }
            (_, None) => {}
        }
    }
    f.attempts_over_max += h
        .starts
        .iter()
        .filter(|s| {
            h.jobs
                .get(&s.id)
                .is_some_and(|j| s.attempt > j.max_attempts)
        })
        .count() as u64;
}

/// Settled intervals that overlap: `overlapping_valid_leases`.
fn count_overlapping_leases(h: &History, f: &mut Figures) {
    for j in h.jobs.values() {
        let ok: Vec<(i64, i64)> = j
            .history
            .iter()
            .filter(|(_, _, _, o)| o.as_deref() == Some(SETTLED_OK))
            .map(|(_, s, e, _)| (*s, e.unwrap_or(i64::MAX)))
            .collect();
        for (i, a) in ok.iter().enumerate() {
            for b in ok.iter().skip(i + 1) {
                if a.0 <= b.1 && b.0 <= a.1 {
                    f.overlapping_valid_leases += 1;
                }
            }
        }
    }
}

/// The workers' reports: stale tokens refused, and acknowledgments the
/// database must show.
fn judge_reports(h: &History, f: &mut Figures) {
    for r in &h.reports {
        if r.outcome == "lease_lost" {
            f.stale_token_rejections += 1;
        }
        if r.acknowledged && r.outcome == "acknowledged" {
            let recorded = h.jobs.get(&r.id).is_some_and(|j| {
                j.history
                    .iter()
                    .any(|(a, _, _, o)| *a == r.attempt && o.as_deref() == Some(SETTLED_OK))
            });
            if !recorded {
                f.acks_not_recorded += 1;
            }
        }
    }
}

/// Attempts whose lease expired while their worker was not down:
/// `live_lease_reclaims`.
fn count_live_lease_reclaims(h: &History, starts_of: &HashMap<&str, Vec<&Start>>, f: &mut Figures) {
    for (id, job) in &h.jobs {
        for (attempt, claimed_at, _, outcome) in &job.history {
            if outcome.as_deref() != Some("lease_expired") {
                continue;
            }
            let of_job = starts_of.get(id.as_str()).map_or(&[][..], Vec::as_slice);
            let Some(start) = of_job.iter().find(|s| s.attempt == *attempt) else {
                continue; // no handler started (a crash right after the claim)
            };
            // From the claim: a worker killed between its claim and its
            // handler's first line leaves an orphan that starts after the
            // death.
            let from = start.at.min(*claimed_at);
            let next = of_job
                .iter()
                .filter(|s| s.at >= start.at && s.attempt > *attempt)
                .map(|s| s.at)
                .min()
                .unwrap_or(i64::MAX);
            let outage = h
                .deaths
                .iter()
                .any(|(pid, t)| *pid == start.worker && *t >= from && *t <= next);
            if !outage {
                f.live_lease_reclaims += 1;
            }
        }
    }
}

/// Recovery latency: from a worker's death to the next start of each job
/// it held (started by it, never reported settled by it).
fn recovery_latency(h: &History, starts_of: &HashMap<&str, Vec<&Start>>, f: &mut Figures) {
    let settled: BTreeSet<(i32, &str, u32)> = h
        .reports
        .iter()
        .filter(|r| r.outcome != "lease_lost")
        .map(|r| (r.worker, r.id.as_str(), r.attempt))
        .collect();
    let mut by_worker: HashMap<i32, Vec<&Start>> = HashMap::new();
    for s in &h.starts {
        by_worker.entry(s.worker).or_default().push(s);
    }
    let mut samples = Vec::new();
    for (pid, died) in &h.deaths {
        let of_worker = by_worker.get(pid).map_or(&[][..], Vec::as_slice);
        for s in of_worker
            .iter()
            .filter(|s| s.at <= *died && !settled.contains(&(*pid, s.id.as_str(), s.attempt)))
        {
            let next = starts_of
                .get(s.id.as_str())
                .map_or(&[][..], Vec::as_slice)
                .iter()
                .filter(|n| n.at > *died)
                .map(|n| n.at)
                .min();
            if let Some(next) = next {
                samples.push(u64::try_from(next - died).unwrap_or(0));
            }
        }
    }
    samples.sort_unstable();
    f.recovery_samples = samples.len() as u64;
    f.recovery_p50_ms = percentile(&samples, 50.0);
    f.recovery_p99_ms = percentile(&samples, 99.0);
    f.recovery_max_ms = samples.last().copied();
}

/// The human table.
pub fn table(f: &Figures, require: &Require) -> String {
    let opt = |v: Option<u64>| v.map_or("-".to_owned(), |v| format!("{v} ms"));
    let mut rows: Vec<(String, String)> = vec![
        (
            "enqueued ok / failed / ambiguous".into(),
            format!(
                "{} / {} / {}",
                f.enqueued_ok, f.enqueued_failed, f.enqueued_ambiguous
            ),
        ),
        ("executions".into(), f.executions.to_string()),
        ("redeliveries".into(), f.redeliveries.to_string()),
        ("completed".into(), f.completed.to_string()),
        ("dead".into(), f.dead.to_string()),
        (
            "effects applied / repeats".into(),
            format!("{} / {}", f.effects_applied, f.effect_repeats),
        ),
        (
            "worker outages (kills + pauses)".into(),
            f.worker_outages.to_string(),
        ),
        (
            "stale_token_rejections".into(),
            f.stale_token_rejections.to_string(),
        ),
    ];
    rows.push((
        "live_lease_reclaims".into(),
        f.live_lease_reclaims.to_string(),
    ));
    if f.forward_steps_over_leases > 0 {
        rows.push((
            "forward clock steps over held leases".into(),
            f.forward_steps_over_leases.to_string(),
        ));
    }
    if f.http_requests_failed > 0 {
        rows.push((
            "HTTP: kills mid-request / failed requests retried / found existing".into(),
            format!(
                "{} / {} / {}",
                f.http_kills_mid_request, f.http_requests_failed, f.http_found_existing
            ),
        ));
    }
    if f.storage_full_errors > 0 {
        rows.push((
            "storage-full errors (load + workers)".into(),
            f.storage_full_errors.to_string(),
        ));
    }
    if !f.crash_point_kills.is_empty() {
        let kills: Vec<String> = f
            .crash_point_kills
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect();
        rows.push(("crash-point kills".into(), kills.join(", ")));
    }
    for (name, n) in f.safety() {
        let rule = if require.replication_losses && matches!(name, "lost" | "acks_not_recorded") {
            "lost with the primary: counted"
        } else {
            "must be 0"
        };
        rows.push((format!("{name} ({rule})"), n.to_string()));
    }
    rows.push((
        format!("recovery p50 / p99 / max (n={})", f.recovery_samples),
        format!(
            "{} / {} / {}   (lease {} ms)",
            opt(f.recovery_p50_ms),
            opt(f.recovery_p99_ms),
            opt(f.recovery_max_ms),
            f.lease_ms
        ),
    ));
    rows.push(("sqlite integrity_check".into(), f.integrity_check.clone()));
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("  {k:<width$}  {v}\n"))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn job(state: &str, history: Vec<(u32, i64, Option<i64>, Option<String>)>) -> FinalJob {
        FinalJob {
            state: state.into(),
            attempts: history.len() as u32,
            max_attempts: 25,
            last_error_class: None,
            history,
        }
    }

    fn ok(a: u32, s: i64, e: i64) -> (u32, i64, Option<i64>, Option<String>) {
        (a, s, Some(e), Some("succeeded".into()))
    }

    fn start(id: &str, attempt: u32, worker: i32, at: i64) -> Start {
        Start {
            id: id.into(),
            attempt,
            worker,
            at,
        }
    }

    /// A clean history: one job enqueued, run twice (a kill), done, one effect.
    fn clean() -> History {
        let mut h = History {
            lease_ms: 1000,
            ..History::default()
        };
        h.intents.insert(
            "a".into(),
            Intent {
                status: Enqueue::Ok,
                poison: false,
            },
        );
        h.listed.push("a".into());
        h.jobs.insert(
            "a".into(),
            job(
                "done",
                vec![
                    (1, 0, Some(1100), Some("lease_expired".into())),
                    ok(2, 1100, 1200),
                ],
            ),
        );
        h.starts = vec![start("a", 1, 7, 10), start("a", 2, 8, 1150)];
        h.effects = vec![("a".into(), true)];
        h.deaths = vec![(7, 50)];
        h.reports = vec![Report {
            worker: 8,
            id: "a".into(),
            attempt: 2,
            outcome: "acknowledged".into(),
            acknowledged: true,
        }];
        h
    }

    #[test]
    fn a_signal_delivered_twice_or_a_waiting_job_run_without_one_is_a_violation() {
        let mut h = clean();
        h.signals.deliveries.insert("a".into(), 1);
        let f = check(&h);
        let require = Require {
            signals: true,
            ..Require::default()
        };
        assert_eq!(f.signals_delivered, 1);
        let v = f.violations(&require);
        assert!(
            v.iter().any(|v| v.contains("no signal sender was killed")),
            "{v:?}"
        );
        h.signals.senders_killed = 1;
        let v = check(&h).violations(&require);
        assert!(
            v.iter()
                .any(|v| v.contains("no step was killed while adding children")),
            "{v:?}"
        );
        h.children.adders_killed = 1;
        assert!(check(&h).violations(&require).is_empty());
        h.signals.deliveries.insert("a".into(), 2);
        let v = check(&h).violations(&require);
        assert_eq!(v, ["signals_delivered_twice = 1 (must be 0)"]);
        h.signals.deliveries.insert("a".into(), 0);
        let v = check(&h).violations(&require);
        assert_eq!(v, ["awaiting_done_without_signal = 1 (must be 0)"]);
    }

    #[test]
    fn a_clean_history_has_no_violation_and_one_recovery_sample() {
        let f = check(&clean());
        assert!(
            f.violations(&Require {
                recovery: true,
                ..Require::default()
            })
            .is_empty(),
            "{f:?}"
        );
        assert_eq!((f.executions, f.redeliveries, f.completed), (2, 1, 1));
        assert_eq!(f.recovery_samples, 1);
        assert_eq!(f.recovery_p50_ms, Some(1100));
        assert!(
            !f.violations(&Require {
                stale_tokens: true,
                recovery: true,
                ..Require::default()
            })
            .is_empty(),
            "stale tokens required"
        );
    }

    #[test]
    fn an_asynchronous_failover_counts_its_losses_and_judges_the_rest() {
        let f = Figures {
            lost: 2,
            acks_not_recorded: 1,
            integrity_check: "n/a".into(),
            ..Figures::default()
        };
        let sync = f.violations(&Require::default());
        assert_eq!(
            sync,
            ["lost = 2 (must be 0)", "acks_not_recorded = 1 (must be 0)"]
        );
        let losses = Require {
            replication_losses: true,
            ..Require::default()
        };
        assert!(f.violations(&losses).is_empty());
        assert!(table(&f, &losses).contains("lost (lost with the primary: counted)"));
        let stuck = Figures { stuck: 1, ..f };
        assert_eq!(stuck.violations(&losses), ["stuck = 1 (must be 0)"]);
    }

    #[test]
    fn a_crash_plan_without_a_fired_crash_point_is_a_violation() {
        let mut h = clean();
        assert!(
            !check(&h)
                .violations(&Require {
                    crash_points: true,
                    ..Require::default()
                })
                .is_empty()
        );
        h.crash_points.push(("before-settle".into(), 7, 50));
        let f = check(&h);
        assert_eq!(f.crash_point_kills.get("before-settle"), Some(&1));
        assert!(
            f.violations(&Require {
                crash_points: true,
                ..Require::default()
            })
            .is_empty(),
            "{f:?}"
        );
    }

    #[test]
    fn a_reclaim_from_a_worker_without_an_outage_is_a_live_lease_reclaim() {
        let f = check(&clean());
        assert_eq!(f.live_lease_reclaims, 0, "worker 7 was killed first");
        let mut h = clean();
        h.deaths.clear();
        let f = check(&h);
        assert_eq!(f.live_lease_reclaims, 1);
        assert!(f.violations(&Require::default()).is_empty());
        h.forward_steps_over_leases = 1;
        let f = check(&h);
        assert_eq!(
            f.violations(&Require {
                no_live_reclaims: true,
                ..Require::default()
            }),
            vec!["live_lease_reclaims = 1 (must be 0 under clock steps)".to_owned()]
        );
        // An outage after the job's next start does not explain the reclaim.
        h.deaths.push((7, 2000));
        assert_eq!(check(&h).live_lease_reclaims, 1);
        // A worker killed after its claim, before its orphaned handler
        // logged the start, does.
        let mut h = clean();
        h.starts[0].at = 60;
        assert_eq!(check(&h).live_lease_reclaims, 0);
    }

    #[test]
    fn each_plans_required_counter_is_a_violation_when_zero() {
        let h = clean();
        let plans = [
            Require {
                http_failures: true,
                ..Require::default()
            },
            Require {
                storage_full: true,
                ..Require::default()
            },
            Require {
                no_live_reclaims: true,
                ..Require::default()
            },
        ];
        for plan in plans {
            assert_eq!(check(&h).violations(&plan).len(), 1, "{plan:?}");
        }
        let mut h = clean();
        h.http_kills_mid_request = 1;
        h.storage_full = 3;
        h.forward_steps_over_leases = 1;
        for plan in plans {
            assert!(check(&h).violations(&plan).is_empty(), "{plan:?}");
        }
    }

    #[test]
    fn every_safety_figure_can_fire() {
        let mut h = clean();
        // lost: an acknowledged id missing from the database.
        h.intents.insert(
            "gone".into(),
            Intent {
                status: Enqueue::Ok,
                poison: false,
            },
        );
        // unexpected: a job nobody enqueued, and an effect for it.
        h.listed.push("ghost".into());
        h.effects.push(("ghost".into(), true));
        // duplicate_jobs.
        h.listed.push("a".into());
        // duplicate_effects.
        h.effects.push(("a".into(), true));
        // stuck (and lost: acknowledged but not finished).
        h.intents.insert(
            "s".into(),
            Intent {
                status: Enqueue::Ok,
                poison: false,
            },
        );
        h.jobs.insert("s".into(), job("running", vec![]));
        // attempts_over_max.
        h.starts.push(start("a", 26, 8, 2000));
        // overlapping_valid_leases: two accepted settlements of b overlapping.
        h.intents.insert(
            "b".into(),
            Intent {
                status: Enqueue::Ok,
                poison: false,
            },
        );
        h.effects.push(("b".into(), true));
        h.jobs.insert(
            "b".into(),
            job("done", vec![ok(1, 0, 500), ok(2, 400, 900)]),
        );
        // acks_not_recorded: a report of an ack the history does not hold.
        h.reports.push(Report {
            worker: 8,
            id: "a".into(),
            attempt: 1,
            outcome: "acknowledged".into(),
            acknowledged: true,
        });
        // poison_not_quarantined.
        h.intents.insert(
            "p".into(),
            Intent {
                status: Enqueue::Ok,
                poison: true,
            },
        );
        h.jobs.insert("p".into(), job("done", vec![ok(1, 0, 1)]));
        h.effects.push(("p".into(), true));
        let f = check(&h);
        for (name, n) in f.safety() {
            assert!(n > 0, "{name} did not fire: {f:?}");
        }
        assert_eq!(f.lost, 2);
        assert_eq!(f.stuck, 1);
    }

    #[test]
    fn ambiguous_ids_may_be_present_or_absent_but_failed_ones_must_be_absent() {
        let mut h = clean();
        h.intents.insert(
            "maybe".into(),
            Intent {
                status: Enqueue::Ambiguous,
                poison: false,
            },
        );
        assert!(check(&h).violations(&Require::default()).is_empty());
        h.intents.insert(
            "no".into(),
            Intent {
                status: Enqueue::Failed,
                poison: false,
            },
        );
        h.listed.push("no".into());
        h.jobs.insert("no".into(), job("ready", vec![]));
        let f = check(&h);
        assert_eq!(f.unexpected, 1);
        assert_eq!(f.stuck, 1);
    }

    #[test]
    fn a_zombies_lease_lost_reports_count_as_stale_token_rejections() {
        let mut h = clean();
        h.reports.push(Report {
            worker: 7,
            id: "a".into(),
            attempt: 1,
            outcome: "lease_lost".into(),
            acknowledged: false,
        });
        let f = check(&h);
        assert_eq!(f.stale_token_rejections, 1);
        assert!(
            f.violations(&Require {
                stale_tokens: true,
                recovery: true,
                ..Require::default()
            })
            .is_empty()
        );
        // A refused settlement does not release the job: it was still held.
        assert_eq!(f.recovery_samples, 1);
        // An accepted one does.
        h.reports[1].outcome = "retry_scheduled".into();
        assert_eq!(check(&h).recovery_samples, 0);
    }

    #[test]
    fn percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&[5], 99.0), Some(5));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
