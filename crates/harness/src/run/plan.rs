//! The seeded plan of a run: the jobs (poison, ordinary, the fan-in's
//! root and sink), the nemesis's actions in time order, and the crash
//! points armed in turn.

use std::collections::VecDeque;
use std::time::Duration;

use anyhow::Result;
use errand::{JobId, NewJob, Payload};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{Fault, RunOptions};

#[derive(Clone, Copy, Debug)]
pub(super) enum Action {
    Kill(usize),
    Pause(usize, u64),
    Restart,
    Failover,
    Fill(u64),
    Jump(i64),
    KillServer,
}

/// The seeded schedule: the jobs, the nemesis's actions in time order, and
/// the crash points armed in turn. Drawn in this order from one generator,
/// so a seed replays the same run.
pub(super) struct Plan {
    pub(super) jobs: Vec<(String, bool, NewJob)>,
    pub(super) actions: Vec<(u64, Action)>,
    pub(super) crash_arms: VecDeque<String>,
}

impl Plan {
    /// The jobs that suspend themselves until a signal (signals plan).
    pub(super) fn awaiting(&self) -> Vec<String> {
        self.jobs
            .iter()
            .filter(|(_, _, job)| job.payload.as_str().contains("\"await\":true"))
            .map(|(id, _, _)| id.clone())
            .collect()
    }

    /// The steps that add children (signals plan): each with its
    /// children's ids and its join.
    pub(super) fn adders(&self) -> Vec<crate::check::Adder> {
        self.jobs
            .iter()
            .filter_map(|(id, _, job)| {
                let work: crate::handle::Work = serde_json::from_str(job.payload.as_str()).ok()?;
                (work.children > 0).then(|| crate::check::Adder {
                    step: id.clone(),
                    children: (0..work.children).map(|n| format!("{id}.c{n}")).collect(),
                    join: join_of(id),
                })
            })
            .collect()
    }

    pub(super) fn draw(opts: &RunOptions, seed: u64, fault_ms: u64) -> Result<Plan> {
        let mut rng = StdRng::seed_from_u64(seed);
        let jobs = plan_jobs(opts, &mut rng)?;
        let actions = plan_actions(opts, &mut rng, fault_ms);
        let crash_arms = plan_crash_arms(opts, &mut rng);
        Ok(Plan {
            jobs,
            actions,
            crash_arms,
        })
    }
}

/// The jobs: poison ones first, then `--jobs` ordinary ones.
fn plan_jobs(opts: &RunOptions, rng: &mut StdRng) -> Result<Vec<(String, bool, NewJob)>> {
    let has = |f: Fault| opts.plan.contains(&f);
    let mut jobs: Vec<(String, bool, NewJob)> = Vec::new();
    if has(Fault::Poison) {
        for n in 0..opts.poison {
            let job = NewJob::new("poison", Payload::default())?
                .with_id(JobId::new(format!("poison-{n}"))?)
                .with_max_lease_expiries(3)?;
            jobs.push((format!("poison-{n}"), true, job));
        }
    }
    for n in 0..opts.jobs {
        // The crash plan needs handlers that outlive a heartbeat (a third
        // of the lease): one job in ten works for 0.4–0.75 of a lease.
        let long = has(Fault::Crash) && rng.random_bool(0.1);
        let ms: u64 = if long {
            rng.random_range(opts.lease_ms * 2 / 5..opts.lease_ms * 3 / 4)
        } else {
            rng.random_range(10..opts.job_ms_max.max(11))
        };
        let fail_first = u32::from(rng.random_bool(0.05));
        // The signals plan: one job in four suspends itself on its first
        // run until the signal `go`.
        let wait = has(Fault::Signals) && rng.random_bool(0.25);
        // And one other in twelve adds children as it completes, which a
        // join waits for; half of those SIGKILL their worker on the first
        // attempt, after writing the children. (None under --fan-in, whose
        // sink counts its inputs, nor under the http plan, whose requests
        // carry no dependencies.)
        let adds = has(Fault::Signals)
            && !opts.fan_in
            && !has(Fault::Http)
            && !wait
            && rng.random_bool(1.0 / 12.0);
        let kill_adding = adds && rng.random_bool(0.5);
        let mut work = serde_json::json!({"ms": ms, "fail_first": fail_first, "await": wait});
        if adds {
            work["children"] = CHILDREN.into();
            work["kill_adding"] = kill_adding.into();
        }
        let payload = Payload::from_value(&work)?;
        let id = format!("j{n:06}");
        let mut job = NewJob::new("work", payload)?.with_id(JobId::new(id.clone())?);
        if opts.fan_in {
            job = job.depends_on(JobId::new(FAN_ROOT)?);
        }
        // The clock plan schedules one job in five up to 1.5 leases ahead:
        // the steps must lose no schedule.
        if has(Fault::Clock) && rng.random_bool(0.2) {
            let ms = rng.random_range(100..opts.lease_ms * 3 / 2);
            job = job.scheduled(errand::Schedule::After(Duration::from_millis(ms)));
        }
        jobs.push((id.clone(), false, job));
        if adds {
            // The join reads the step's output and each child's.
            let expect = CHILDREN as usize + 1;
            let join = NewJob::new(
                "work",
                Payload::from_value(&serde_json::json!({"ms": 10, "expect": expect}))?,
            )?
            .with_id(JobId::new(join_of(&id))?)
            .depends_on(JobId::new(id)?);
            jobs.push((
                join.id.as_ref().map(JobId::to_string).unwrap_or_default(),
                false,
                join,
            ));
        }
    }
    if opts.fan_in {
        // The root goes first and the sink last: the load enqueues in
        // order, so every dependency is stored before its dependents.
        let at = jobs.iter().position(|(_, poison, _)| !poison).unwrap_or(0);
        let root = NewJob::new("work", Payload::from_value(&serde_json::json!({"ms": 10}))?)?
            .with_id(JobId::new(FAN_ROOT)?);
        jobs.insert(at, (FAN_ROOT.to_owned(), false, root));
        let leaves: Vec<JobId> = jobs
            .iter()
            .filter(|(id, poison, _)| !poison && id != FAN_ROOT)
            .map(|(id, _, _)| JobId::new(id.clone()))
            .collect::<errand::Result<_>>()?;
        let expect = leaves.len();
        let sink = leaves.into_iter().fold(
            NewJob::new(
                "sink",
                Payload::from_value(&serde_json::json!({"expect": expect}))?,
            )?
            .with_id(JobId::new(FAN_SINK)?),
            NewJob::depends_on,
        );
        jobs.push((FAN_SINK.to_owned(), false, sink));
    }
    Ok(jobs)
}

/// How many children a step that adds some adds (signals plan).
const CHILDREN: u32 = 3;

/// The join of step `id`, which waits for the step and its children.
fn join_of(id: &str) -> String {
    format!("{id}.join")
}

/// The fan-out/fan-in's root and sink (`--fan-in`).
const FAN_ROOT: &str = "root";
const FAN_SINK: &str = "sink";

/// The nemesis's actions, each at a time within the fault phase.
fn plan_actions(opts: &RunOptions, rng: &mut StdRng, fault_ms: u64) -> Vec<(u64, Action)> {
    let has = |f: Fault| opts.plan.contains(&f);
    let mut actions: Vec<(u64, Action)> = Vec::new();
    let at =
        |rng: &mut StdRng, lo: f64, hi: f64| (rng.random_range(lo..hi) * fault_ms as f64) as u64;
    if has(Fault::Kill) {
        for _ in 0..opts.kills {
            let t = at(rng, 0.1, 0.7);
            actions.push((t, Action::Kill(rng.random_range(0..opts.workers as usize))));
        }
    }
    if has(Fault::Pause) {
        for _ in 0..opts.pauses {
            let t = at(rng, 0.1, 0.7);
            let len = (opts.lease_ms as f64 * rng.random_range(2.0..3.0)) as u64;
            actions.push((
                t,
                Action::Pause(rng.random_range(0..opts.workers as usize), len),
            ));
        }
    }
    if has(Fault::DiskFull) {
        // Disjoint slots over 10–70% of the fault phase, full for about
        // half of each.
        let n = f64::from(opts.fulls.max(1));
        for i in 0..opts.fulls {
            let slot = 0.6 / n;
            let start = 0.1 + slot * f64::from(i);
            let t = at(rng, start, start + slot * 0.3);
            let len = (rng.random_range(0.4..0.6) * slot * fault_ms as f64) as u64;
            actions.push((t, Action::Fill(len)));
        }
    }
    if has(Fault::Clock) {
        // Disjoint slots over 15–75% of the fault phase: forward 3–6 leases,
        // back 1–2 leases (less than the step before, so the workers' clock
        // never ends behind the load generator's), forward again…
        let n = f64::from(opts.jumps.max(1));
        let lease = opts.lease_ms as f64;
        for i in 0..opts.jumps {
            let slot = 0.6 / n;
            let start = 0.15 + slot * f64::from(i);
            let t = at(rng, start, start + slot * 0.5);
            let step = if i % 2 == 0 {
                (lease * rng.random_range(3.0..6.0)) as i64
            } else {
                -((lease * rng.random_range(1.0..2.0)) as i64)
            };
            actions.push((t, Action::Jump(step)));
        }
    }
    if has(Fault::Http) {
        for _ in 0..opts.server_kills {
            actions.push((at(rng, 0.05, 0.65), Action::KillServer));
        }
    }
    if has(Fault::Restart) {
        for _ in 0..opts.restarts {
            actions.push((at(rng, 0.15, 0.5), Action::Restart));
        }
    }
    if has(Fault::Failover) {
        for _ in 0..opts.failovers {
            actions.push((at(rng, 0.1, 0.7), Action::Failover));
        }
    }
    actions.sort_by_key(|(t, _)| *t);
    actions
}

/// Crash points for worker spawns in the fault phase, in turn: the point,
/// after how many passes it fires.
fn plan_crash_arms(opts: &RunOptions, rng: &mut StdRng) -> VecDeque<String> {
    let mut arms = VecDeque::new();
    if !opts.plan.contains(&Fault::Crash) {
        return arms;
    }
    let points = errand_harness::crash::FAILPOINTS;
    for i in 0..opts.crashes as usize {
        let point = points[i % points.len()];
        let passes: u32 = match point {
            "heartbeat" => rng.random_range(0..2),
            "claim-committed" => rng.random_range(0..4),
            _ => rng.random_range(0..6),
        };
        arms.push_back(if passes == 0 {
            format!("{point}=return")
        } else {
            format!("{point}={passes}*off->return")
        });
    }
    arms
}
