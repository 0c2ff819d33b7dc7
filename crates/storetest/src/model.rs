//! A model-based test: random operation sequences applied to a small
//! reference model of the contract and to a real store, compared after every
//! step. The clock moves only through `Advance`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::admin;
use errand_core::{
    Await, CancelRequest, ClaimRequest, DependencyFailure, Error, ErrorClass, Failure, JobFilter,
    JobId, JobState, KeyLimit, Lease, ManualClock, NewJob, NewSignal, OnAwaitTimeout, Payload,
    ReplayRequest, RetryAt, Schedule, Store, Timestamp,
};

/// One step of a sequence. Indices pick among jobs or handed-out leases
/// modulo their count, so every generated sequence is meaningful. (Field
/// meanings follow from their names: ids, lease indices, milliseconds.)
#[allow(missing_docs)]
#[derive(Clone, Debug)]
pub enum Op {
    /// Insert job `id` (one of a few names, so duplicates happen), with
    /// concurrency key `key` (see `key_of`), or, when `deps` names jobs
    /// (bit n: the n-th name; see `deps_of`), depending on them under
    /// the policy `policy` picks (and then without a key).
    Enqueue {
        id: u8,
        max_attempts: u8,
        max_lost: u8,
        delay_ms: u16,
        key: u8,
        deps: u8,
        policy: u8,
    },
    /// Claim up to `limit` jobs with a lease.
    Claim { limit: u8, lease_ms: u16 },
    /// Acknowledge the n-th lease handed out.
    Complete { lease: u8 },
    /// Fail the n-th lease: retry after a delay, or permanently.
    Fail { lease: u8, retry_ms: Option<u16> },
    /// Snooze the n-th lease.
    Snooze { lease: u8, delay_ms: u16 },
    /// Release the n-th lease.
    Release { lease: u8 },
    /// Renew the n-th lease.
    Heartbeat { lease: u8, lease_ms: u16 },
    /// Move the clock forward.
    Advance { ms: u16 },
    /// Run the expired-lease sweep.
    Sweep,
    /// Operator replay of job `id`.
    Replay { id: u8 },
    /// Operator cancel of job `id`.
    Cancel { id: u8 },
    /// Insert job `id` unique by the key `u0` or `u1` (`key`): `rule` 0
    /// unique for `ms` + 1, 1 unique while ready or running, 2 debounced by
    /// `ms` + 1.
    EnqueueUnique { id: u8, key: u8, rule: u8, ms: u16 },
    /// Suspend the n-th lease's job until the signal `go`, at most
    /// `timeout_ms` + 1 (none: no timeout), then the policy `policy` picks.
    Suspend {
        lease: u8,
        timeout_ms: Option<u16>,
        policy: u8,
    },
    /// Send the signal `go` to job `id`, kept when `buffer` and the job is
    /// not waiting for it.
    Signal { id: u8, buffer: bool },
    /// End the waits that timed out.
    ExpireWaits,
    /// Complete the n-th lease adding the child `child` (one of the job
    /// names, so it often exists already and is refused), with an attempt
    /// budget from `max_attempts`: the step's waiting dependents wait for
    /// it too.
    CompleteAdding {
        lease: u8,
        child: u8,
        max_attempts: u8,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct MJob {
    state: JobState,
    attempts: u32,
    max_attempts: u32,
    replays: u32,
    lease_expiries: u32,
    max_lease_expiries: u32,
    available_at: i64,
    lease_until: Option<i64>,
    /// Which handed-out lease currently owns the job.
    owner: Option<usize>,
    created_seq: usize,
    key: Option<(&'static str, KeyLimit)>,
    /// The jobs it depends on, its policy, and the dependencies counted
    /// met so far (it waits for the others).
    deps: Vec<String>,
    policy: DependencyFailure,
    met: BTreeSet<String>,
    /// When it was created (ms), and the unique key it was enqueued with.
    created_at: i64,
    unique_key: Option<String>,
    /// While waiting for the signal `go`: when the wait times out (if it
    /// does) and what happens then.
    wait: Option<(Option<i64>, OnAwaitTimeout)>,
    /// Signals `go` kept for its next wait.
    kept: u32,
}

impl MJob {
    fn waiting_on(&self) -> u32 {
        u32::try_from(self.deps.len() - self.met.len()).unwrap_or(u32::MAX)
    }
}

/// The reference model.
#[derive(Debug, Default)]
struct Model {
    jobs: BTreeMap<String, MJob>,
    /// Handed-out leases: (job id, attempt).
    leases: Vec<(String, u32)>,
    created: usize,
}

/// What an operation returned, reduced to what both sides must agree on.
#[derive(Debug, PartialEq, Eq)]
enum Res {
    Ok,
    Claimed(Vec<(String, u32)>),
    LeaseLost,
    Refused,
    Invalid,
    NotFound,
    Swept(Vec<String>),
    /// A signal kept for a later wait.
    Kept,
    Skip,
}

fn name(id: u8) -> String {
    format!("job-{}", id % 6)
}

/// The dependencies a generated job names: the names whose bit is set.
fn deps_of(deps: u8) -> Vec<String> {
    (0..6u8)
        .filter(|n| deps & (1 << n) != 0)
        .map(name)
        .collect()
}

fn await_policy_of(policy: u8) -> OnAwaitTimeout {
    OnAwaitTimeout::ALL[usize::from(policy) % OnAwaitTimeout::ALL.len()]
}

fn policy_of(policy: u8) -> DependencyFailure {
    DependencyFailure::ALL[usize::from(policy) % DependencyFailure::ALL.len()]
}

/// The concurrency key of a generated job: none (half the time), key `a`
/// with a limit of 2, or the ordered key `o`.
fn key_of(key: u8) -> Option<(&'static str, KeyLimit)> {
    match key % 4 {
        0 | 1 => None,
        2 => Some(("a", KeyLimit::Concurrent(2))),
        _ => Some(("o", KeyLimit::Ordered)),
    }
}

impl Model {
    /// The operation as both sides apply it: an enqueue's dependencies are
    /// narrowed to jobs that exist, other than the job itself, so most
    /// generated dependents are valid (the refusals of unknown ids and of a
    /// self-dependency are conformance cases of their own).
    fn resolve(&self, op: &Op) -> Op {
        let mut op = op.clone();
        if let Op::Enqueue { id, deps, .. } = &mut op {
            let own = name(*id);
            for n in 0..6u8 {
                let d = name(n);
                if d == own || !self.jobs.contains_key(&d) {
                    *deps &= !(1 << n);
                }
            }
        }
        op
    }

    fn live(&self, lease: usize, now: i64) -> Option<&str> {
        let (id, _) = self.leases.get(lease)?;
        let j = self.jobs.get(id)?;
        (j.state == JobState::Running
            && j.owner == Some(lease)
            && j.lease_until.is_some_and(|u| u > now))
        .then_some(id.as_str())
    }

    /// Releases the dependents of `sources` (jobs that just ended, with
    /// the state they ended in), by the rule: an edge out of a done job, or
    /// into a `run` dependent, is met (a blocked dependent that waits for
    /// nothing more is ready, due at its own time or now); a blocked
    /// `cancel` dependent of a dead or cancelled job, or `wait` dependent of
    /// a cancelled one, is cancelled, and its own dependents follow.
    fn release(&mut self, sources: &[(String, JobState)], now: i64) {
        let mut work: Vec<(String, JobState)> = sources.to_vec();
        while let Some((src, ended)) = work.pop() {
            for (id, j) in self.jobs.iter_mut() {
                if !j.deps.contains(&src) || j.met.contains(&src) {
                    continue;
                }
                if ended == JobState::Done || j.policy == DependencyFailure::Run {
                    j.met.insert(src.clone());
                    if j.state == JobState::Blocked && j.waiting_on() == 0 {
                        j.state = JobState::Ready;
                        j.available_at = j.available_at.max(now);
                    }
                } else if j.state == JobState::Blocked
                    && (j.policy == DependencyFailure::Cancel
                        || (j.policy == DependencyFailure::Wait && ended == JobState::Cancelled))
                {
                    j.state = JobState::Cancelled;
                    work.push((id.clone(), JobState::Cancelled));
                }
            }
        }
    }

    /// Completes the n-th lease adding `child`: lost unless the lease is
    /// live; refused, changing nothing, when `child` exists; otherwise the
    /// step is done, the child is new and ready, each blocked dependent
    /// still waiting for the step waits for the child too, and the step
    /// releases its dependents.
    fn complete_adding(&mut self, lease: u8, child: &str, max_attempts: u8, now: i64) -> Res {
        if self.leases.is_empty() {
            return Res::Skip;
        }
        let n = usize::from(lease) % self.leases.len();
        let Some(step) = self.live(n, now).map(str::to_owned) else {
            return Res::LeaseLost;
        };
        if self.jobs.contains_key(child) {
            return Res::Invalid;
        }
        if let Some(j) = self.jobs.get_mut(&step) {
            j.state = JobState::Done;
            j.lease_until = None;
            j.owner = None;
        }
        for j in self.jobs.values_mut() {
            if j.state == JobState::Blocked && j.deps.contains(&step) && !j.met.contains(&step) {
                j.deps.push(child.to_owned());
            }
        }
        self.created += 1;
        self.jobs.insert(
            child.to_owned(),
            MJob {
                state: JobState::Ready,
                attempts: 0,
                max_attempts: u32::from(max_attempts % 3 + 1),
                replays: 0,
                lease_expiries: 0,
                max_lease_expiries: errand_core::DEFAULT_MAX_LEASE_EXPIRIES,
                available_at: now,
                lease_until: None,
                owner: None,
                created_seq: self.created,
                key: None,
                deps: Vec::new(),
                policy: DependencyFailure::Wait,
                met: BTreeSet::new(),
                created_at: now,
                unique_key: None,
                wait: None,
                kept: 0,
            },
        );
        self.release(&[(step, JobState::Done)], now);
        Res::Ok
    }

    fn expire_final(&mut self, now: i64) -> Vec<String> {
        let dead = self.expire_final_only(now);
        let sources: Vec<(String, JobState)> =
            dead.iter().map(|id| (id.clone(), JobState::Dead)).collect();
        self.release(&sources, now);
        dead
    }

    fn expire_final_only(&mut self, now: i64) -> Vec<String> {
        let mut dead = Vec::new();
        for (id, j) in self.jobs.iter_mut() {
            if j.state == JobState::Running
                && j.lease_until.is_some_and(|u| u <= now)
                && (j.attempts >= j.max_attempts || j.lease_expiries + 1 >= j.max_lease_expiries)
            {
                j.state = JobState::Dead;
                j.lease_expiries += 1;
                j.lease_until = None;
                j.owner = None;
                dead.push(id.clone());
            }
        }
        dead
    }

    /// The ready jobs their key admits now: for each key, its earliest
    /// enqueued due jobs up to its free slots; for an ordered key its first
    /// ready job, only if due and none of the key runs. Unkeyed due jobs are
    /// all admitted.
    fn admitted(&self, now: i64) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        let mut by_seq: Vec<(&String, &MJob)> = self.jobs.iter().collect();
        by_seq.sort_by_key(|(_, j)| j.created_seq);
        for (id, j) in &by_seq {
            if j.key.is_none() && j.state == JobState::Ready && j.available_at <= now {
                out.insert((*id).clone());
            }
        }
        for key in ["a", "o"] {
            let of_key = || {
                by_seq
                    .iter()
                    .filter(move |(_, j)| j.key.is_some_and(|k| k.0 == key))
            };
            let running = of_key()
                .filter(|(_, j)| j.state == JobState::Running)
                .count();
            let mut ready = of_key().filter(|(_, j)| j.state == JobState::Ready);
            match of_key().next().and_then(|(_, j)| j.key) {
                None => {}
                Some((_, KeyLimit::Ordered)) => {
                    if running == 0
                        && let Some((id, j)) = ready.next()
                        && j.available_at <= now
                    {
                        out.insert((*id).clone());
                    }
                }
                Some((_, KeyLimit::Concurrent(n))) => {
                    let slots = (n as usize).saturating_sub(running);
                    out.extend(
                        ready
                            .filter(|(_, j)| j.available_at <= now)
                            .take(slots)
                            .map(|(id, _)| (*id).clone()),
                    );
                }
            }
        }
        out
    }

    /// A claim. Without keyed jobs among the admitted ones the choice is
    /// exact: reclaimable expired leases first (oldest lease first), then
    /// admitted ready jobs by due time and id. With keyed ones the stores
    /// may order across keys differently (PostgreSQL visits keys best
    /// first), so the store's `choice` is accepted if it is a valid claim:
    /// the same expired jobs first, then as many distinct admitted jobs as
    /// the limit and the admitted set allow.
    fn claim(&mut self, limit: u8, lease_ms: u16, now: i64, choice: &[String]) -> Res {
        self.expire_final(now);
        let limit = usize::from(limit % 4);
        let mut expired: Vec<(i64, String)> = self
            .jobs
            .iter()
            .filter(|(_, j)| {
                j.state == JobState::Running
                    && j.lease_until.is_some_and(|u| u <= now)
                    && j.attempts < j.max_attempts
                    && j.lease_expiries + 1 < j.max_lease_expiries
            })
            .map(|(id, j)| (j.lease_until.unwrap_or(0), id.clone()))
            .collect();
        expired.sort();
        let admitted = self.admitted(now);
        let mut ready: Vec<(i64, String)> = admitted
            .iter()
            .filter_map(|id| self.jobs.get(id).map(|j| (j.available_at, id.clone())))
            .collect();
        ready.sort();
        let exact: Vec<String> = expired
            .iter()
            .cloned()
            .chain(ready)
            .map(|(_, id)| id)
            .take(limit)
            .collect();
        let keyed_admitted = admitted
            .iter()
            .any(|id| self.jobs.get(id).is_some_and(|j| j.key.is_some()));
        let n_expired = expired.len().min(limit);
        let valid_choice = choice.len() == exact.len()
            && choice[..n_expired] == exact[..n_expired]
            && choice[n_expired..].iter().all(|id| admitted.contains(id))
            && choice.iter().collect::<BTreeSet<_>>().len() == choice.len();
        let picked = if keyed_admitted && valid_choice {
            choice.to_vec()
        } else {
            exact
        };
        let mut out = Vec::new();
        for id in picked {
            let lease_no = self.leases.len();
            if let Some(j) = self.jobs.get_mut(&id) {
                if j.state == JobState::Running {
                    j.lease_expiries += 1;
                }
                j.state = JobState::Running;
                j.attempts += 1;
                j.lease_until = Some(now + i64::from(lease_ms) + 1);
                j.owner = Some(lease_no);
                self.leases.push((id.clone(), j.attempts));
                out.push((id, j.attempts));
            }
        }
        Res::Claimed(out)
    }

    fn apply(&mut self, op: &Op, now: i64) -> Res {
        match *op {
            Op::Enqueue {
                id,
                max_attempts,
                max_lost,
                delay_ms,
                key,
                deps,
                policy,
            } => {
                let id = name(id);
                let deps = deps_of(deps);
                if deps.contains(&id) {
                    return Res::Invalid;
                }
                if self.jobs.contains_key(&id) {
                    return Res::Ok;
                }
                if deps.iter().any(|d| !self.jobs.contains_key(d)) {
                    return Res::Invalid;
                }
                let state = |d: &String| self.jobs.get(d).map(|j| j.state);
                let met: BTreeSet<String> = deps
                    .iter()
                    .filter(|d| state(d) == Some(JobState::Done))
                    .cloned()
                    .collect();
                let failed: Vec<(String, JobState)> = deps
                    .iter()
                    .filter_map(|d| match state(d) {
                        Some(s @ (JobState::Dead | JobState::Cancelled)) => Some((d.clone(), s)),
                        _ => None,
                    })
                    .collect();
                self.created += 1;
                self.jobs.insert(
                    id,
                    MJob {
                        state: if met.len() == deps.len() {
                            JobState::Ready
                        } else {
                            JobState::Blocked
                        },
                        attempts: 0,
                        max_attempts: u32::from(max_attempts % 3 + 1),
                        replays: 0,
                        lease_expiries: 0,
                        max_lease_expiries: u32::from(max_lost % 3 + 1),
                        available_at: now + i64::from(delay_ms),
                        lease_until: None,
                        owner: None,
                        created_seq: self.created,
                        key: if deps.is_empty() { key_of(key) } else { None },
                        policy: policy_of(policy),
                        deps,
                        met,
                        created_at: now,
                        unique_key: None,
                        wait: None,
                        kept: 0,
                    },
                );
                self.release(&failed, now);
                Res::Ok
            }
            Op::EnqueueUnique { id, key, rule, ms } => {
                let key = format!("u{}", key % 2);
                let span = i64::from(ms) + 1;
                // The newest job with the key (ties: the greatest id) that
                // stands in under the rule.
                let stand_in = self
                    .jobs
                    .iter()
                    .filter(|(_, j)| j.unique_key.as_deref() == Some(key.as_str()))
                    .filter(|(_, j)| match rule % 3 {
                        0 => j.created_at > now - span,
                        1 => matches!(j.state, JobState::Ready | JobState::Running),
                        _ => j.state == JobState::Ready && j.attempts == 0,
                    })
                    .max_by(|a, b| (a.1.created_at, a.0).cmp(&(b.1.created_at, b.0)))
                    .map(|(id, _)| id.clone());
                if let Some(found) = stand_in {
                    if rule % 3 == 2
                        && let Some(j) = self.jobs.get_mut(&found)
                    {
                        j.available_at = now + span;
                    }
                    return Res::Ok;
                }
                let id = name(id);
                if self.jobs.contains_key(&id) {
                    return Res::Ok;
                }
                self.created += 1;
                self.jobs.insert(
                    id,
                    MJob {
                        state: JobState::Ready,
                        attempts: 0,
                        max_attempts: 2,
                        replays: 0,
                        lease_expiries: 0,
                        max_lease_expiries: 2,
                        available_at: now + if rule % 3 == 2 { span } else { 0 },
                        lease_until: None,
                        owner: None,
                        created_seq: self.created,
                        key: None,
                        policy: DependencyFailure::Wait,
                        deps: Vec::new(),
                        met: BTreeSet::new(),
                        created_at: now,
                        unique_key: Some(key),
                        wait: None,
                        kept: 0,
                    },
                );
                Res::Ok
            }
            Op::Claim { .. } => unreachable!("claims go through Model::claim"),
            Op::Complete { lease }
            | Op::Fail { lease, .. }
            | Op::Snooze { lease, .. }
            | Op::Release { lease }
            | Op::Heartbeat { lease, .. } => {
                if self.leases.is_empty() {
                    return Res::Skip;
                }
                let n = usize::from(lease) % self.leases.len();
                let Some(id) = self.live(n, now).map(str::to_owned) else {
                    return Res::LeaseLost;
                };
                let Some(j) = self.jobs.get_mut(&id) else {
                    return Res::LeaseLost;
                };
                match *op {
                    Op::Complete { .. } => {
                        j.state = JobState::Done;
                    }
                    Op::Fail { retry_ms, .. } => match retry_ms {
                        Some(ms) if j.attempts < j.max_attempts => {
                            j.state = JobState::Ready;
                            j.available_at = now + i64::from(ms);
                        }
                        _ => j.state = JobState::Dead,
                    },
                    Op::Snooze { delay_ms, .. } => {
                        j.state = JobState::Ready;
                        j.attempts -= 1;
                        j.available_at = now + i64::from(delay_ms);
                    }
                    Op::Release { .. } => {
                        j.state = JobState::Ready;
                        j.attempts -= 1;
                        j.available_at = now;
                    }
                    Op::Heartbeat { lease_ms, .. } => {
                        j.lease_until = Some(now + i64::from(lease_ms) + 1);
                        return Res::Ok;
                    }
                    _ => {}
                }
                j.lease_until = None;
                j.owner = None;
                let ended = j.state;
                if matches!(ended, JobState::Done | JobState::Dead) {
                    self.release(&[(id, ended)], now);
                }
                Res::Ok
            }
            Op::CompleteAdding {
                lease,
                child,
                max_attempts,
            } => self.complete_adding(lease, &name(child), max_attempts, now),
            Op::Advance { .. } => Res::Ok,
            Op::Sweep => Res::Swept(self.expire_final(now)),
            Op::Replay { id } => {
                // Refused, too, when it would wait for a dependency that
                // can no longer release it.
                let stranded = self.jobs.get(&name(id)).is_some_and(|j| {
                    j.deps.iter().any(|d| {
                        !j.met.contains(d)
                            && !j.policy.may_wait_for(self.jobs.get(d).map(|dep| dep.state))
                    })
                });
                let Some(j) = self.jobs.get_mut(&name(id)) else {
                    return Res::NotFound;
                };
                if !matches!(j.state, JobState::Dead | JobState::Cancelled) || stranded {
                    return Res::Refused;
                }
                j.state = if j.waiting_on() > 0 {
                    JobState::Blocked
                } else {
                    JobState::Ready
                };
                j.attempts = 0;
                j.lease_expiries = 0;
                j.replays += 1;
                j.available_at = now;
                Res::Ok
            }
            Op::Cancel { id } => {
                let id = name(id);
                let Some(j) = self.jobs.get_mut(&id) else {
                    return Res::NotFound;
                };
                if !errand_core::CancelRequest::accepts(j.state) {
                    return Res::Refused;
                }
                j.state = JobState::Cancelled;
                j.lease_until = None;
                j.owner = None;
                j.wait = None;
                self.release(&[(id, JobState::Cancelled)], now);
                Res::Ok
            }
            Op::Suspend {
                lease,
                timeout_ms,
                policy,
            } => {
                if self.leases.is_empty() {
                    return Res::Skip;
                }
                let n = usize::from(lease) % self.leases.len();
                let Some(id) = self.live(n, now).map(str::to_owned) else {
                    return Res::LeaseLost;
                };
                let Some(j) = self.jobs.get_mut(&id) else {
                    return Res::LeaseLost;
                };
                j.attempts -= 1;
                j.lease_until = None;
                j.owner = None;
                if j.kept > 0 {
                    j.kept -= 1;
                    j.state = JobState::Ready;
                    j.available_at = now;
                } else {
                    j.state = JobState::Waiting;
                    let until = timeout_ms.map(|ms| now + i64::from(ms) + 1);
                    j.wait = Some((until, await_policy_of(policy)));
                }
                Res::Ok
            }
            Op::Signal { id, buffer } => {
                let Some(j) = self.jobs.get_mut(&name(id)) else {
                    return Res::NotFound;
                };
                if j.state == JobState::Waiting {
                    j.state = JobState::Ready;
                    j.available_at = j.available_at.max(now);
                    j.wait = None;
                    Res::Ok
                } else if buffer && !j.state.is_final() {
                    j.kept += 1;
                    Res::Kept
                } else {
                    Res::Refused
                }
            }
            Op::ExpireWaits => Res::Swept(self.expire_waits(now)),
        }
    }

    /// Ends the waits that timed out by `now`, each by its policy; returns
    /// the jobs, by id.
    fn expire_waits(&mut self, now: i64) -> Vec<String> {
        let mut ended = Vec::new();
        let mut sources = Vec::new();
        for (id, j) in &mut self.jobs {
            let Some((Some(until), policy)) = j.wait else {
                continue;
            };
            if j.state != JobState::Waiting || until > now {
                continue;
            }
            j.wait = None;
            match policy {
                OnAwaitTimeout::Run => {
                    j.state = JobState::Ready;
                    j.available_at = j.available_at.max(now);
                }
                OnAwaitTimeout::Fail => j.state = JobState::Dead,
                OnAwaitTimeout::Cancel => j.state = JobState::Cancelled,
            }
            if j.state != JobState::Ready {
                sources.push((id.clone(), j.state));
            }
            ended.push(id.clone());
        }
        self.release(&sources, now);
        ended
    }
}

fn reduce<T>(r: errand_core::Result<T>) -> Res {
    match r {
        Ok(_) => Res::Ok,
        Err(Error::LeaseLost { .. }) => Res::LeaseLost,
        Err(Error::InvalidState { .. }) => Res::Refused,
        Err(Error::NotFound(_)) => Res::NotFound,
        Err(Error::Invalid(_)) => Res::Invalid,
        Err(e) => panic!("unexpected store error: {e}"),
    }
}

fn ms(n: u16) -> Duration {
    Duration::from_millis(u64::from(n))
}

async fn apply_store(store: &Arc<dyn Store>, leases: &mut Vec<Lease>, op: &Op) -> Res {
    let pick =
        |leases: &Vec<Lease>, n: u8| leases.get(usize::from(n) % leases.len().max(1)).cloned();
    match *op {
        Op::Enqueue {
            id,
            max_attempts,
            max_lost,
            delay_ms,
            key,
            deps,
            policy,
        } => {
            let deps = deps_of(deps);
            let keyed = if deps.is_empty() { key_of(key) } else { None };
            let job = NewJob::new("model", Payload::default())
                .and_then(|j| j.with_max_attempts(u32::from(max_attempts % 3 + 1)))
                .and_then(|j| j.with_max_lease_expiries(u32::from(max_lost % 3 + 1)))
                .map(|j| j.with_id(JobId::new(name(id)).unwrap_or_else(|_| JobId::generate())))
                .map(|j| j.scheduled(Schedule::After(ms(delay_ms))))
                .and_then(|j| match keyed {
                    Some((k, limit)) => j.with_key(k, limit),
                    None => Ok(j),
                })
                .map(|j| {
                    let with_deps = deps
                        .iter()
                        .filter_map(|d| JobId::new(d.as_str()).ok())
                        .fold(j, NewJob::depends_on);
                    if deps.is_empty() {
                        with_deps
                    } else {
                        with_deps.on_dependency_failure(policy_of(policy))
                    }
                });
            match job {
                Ok(job) => reduce(store.insert(job).await),
                Err(e) => panic!("bad generated job: {e}"),
            }
        }
        Op::EnqueueUnique {
            id,
            key,
            rule,
            ms: span,
        } => {
            let span = ms(span) + Duration::from_millis(1);
            let job = NewJob::new("model", Payload::default())
                .and_then(|j| j.with_max_attempts(2))
                .and_then(|j| j.with_max_lease_expiries(2))
                .map(|j| j.with_id(JobId::new(name(id)).unwrap_or_else(|_| JobId::generate())));
            let job = match job {
                Ok(j) => match rule % 3 {
                    0 => j.unique_for(span),
                    1 => j.unique_while(&[JobState::Ready, JobState::Running]),
                    _ => j.debounce(span),
                },
                Err(e) => panic!("bad generated job: {e}"),
            };
            reduce(
                store
                    .insert(job.with_unique_key(&format!("u{}", key % 2)))
                    .await,
            )
        }
        Op::Claim { limit, lease_ms } => {
            let req = ClaimRequest {
                queues: vec![],
                limit: u32::from(limit % 4),
                // +1 so a zero-length lease is never requested.
                lease: ms(lease_ms) + Duration::from_millis(1),
                rate: None,
                reclaim: true,
            };
            match store.claim(&req).await {
                Ok(claimed) => Res::Claimed(
                    claimed
                        .into_iter()
                        .map(|c| {
                            leases.push(c.lease.clone());
                            (c.job.id.to_string(), c.lease.attempt)
                        })
                        .collect(),
                ),
                Err(e) => panic!("claim failed: {e}"),
            }
        }
        Op::Complete { lease } => match pick(leases, lease) {
            None => Res::Skip,
            Some(l) => reduce(store.complete(&l).await),
        },
        Op::CompleteAdding {
            lease,
            child,
            max_attempts,
        } => match pick(leases, lease) {
            None => Res::Skip,
            Some(l) => {
                let job = NewJob::new("model", Payload::default())
                    .and_then(|j| j.with_max_attempts(u32::from(max_attempts % 3 + 1)))
                    .map(|j| {
                        j.with_id(JobId::new(name(child)).unwrap_or_else(|_| JobId::generate()))
                    });
                match job {
                    Ok(job) => reduce(store.complete_with_children(&l, None, &[job]).await),
                    Err(_) => Res::Invalid,
                }
            }
        },
        Op::Fail { lease, retry_ms } => match pick(leases, lease) {
            None => Res::Skip,
            Some(l) => {
                let failure = Failure {
                    error: "model failure".into(),
                    class: if retry_ms.is_some() {
                        ErrorClass::Retryable
                    } else {
                        ErrorClass::Permanent
                    },
                    retry: retry_ms.map(|m| RetryAt::After(ms(m))),
                };
                reduce(store.fail(&l, failure).await)
            }
        },
        Op::Snooze { lease, delay_ms } => match pick(leases, lease) {
            None => Res::Skip,
            Some(l) => reduce(store.snooze(&l, ms(delay_ms)).await),
        },
        Op::Release { lease } => match pick(leases, lease) {
            None => Res::Skip,
            Some(l) => reduce(store.release(&l).await),
        },
        Op::Heartbeat { lease, lease_ms } => match pick(leases, lease) {
            None => Res::Skip,
            Some(l) => reduce(
                store
                    .heartbeat(&l, ms(lease_ms) + Duration::from_millis(1))
                    .await,
            ),
        },
        Op::Advance { .. } => Res::Ok,
        Op::Sweep => match store.sweep_expired().await {
            Ok(r) => Res::Swept(r.dead.iter().map(ToString::to_string).collect()),
            Err(e) => panic!("sweep failed: {e}"),
        },
        Op::Replay { id } => {
            let Ok(id) = JobId::new(name(id)) else {
                return Res::Skip;
            };
            let req = ReplayRequest {
                ids: vec![id],
                operator: "model".into(),
                reason: None,
            };
            reduce(admin(store).replay_jobs(&req).await)
        }
        Op::Cancel { id } => {
            let Ok(id) = JobId::new(name(id)) else {
                return Res::Skip;
            };
            let req = CancelRequest {
                ids: vec![id],
                operator: "model".into(),
                reason: None,
            };
            reduce(admin(store).cancel_jobs(&req).await)
        }
        Op::Suspend {
            lease,
            timeout_ms,
            policy,
        } => match pick(leases, lease) {
            None => Res::Skip,
            Some(l) => {
                let mut wait = Await::new("go").unwrap_or_else(|e| panic!("{e}"));
                wait.timeout = timeout_ms.map(|n| ms(n) + Duration::from_millis(1));
                wait.on_timeout = await_policy_of(policy);
                reduce(store.suspend(&l, &wait).await)
            }
        },
        Op::Signal { id, buffer } => {
            let Ok(id) = JobId::new(name(id)) else {
                return Res::Skip;
            };
            let mut signal = NewSignal::new(id, "go").unwrap_or_else(|e| panic!("{e}"));
            signal.buffer = buffer;
            match store.signal(&signal).await {
                Ok(s) if s.delivered => Res::Ok,
                Ok(_) => Res::Kept,
                Err(e) => reduce::<()>(Err(e)),
            }
        }
        Op::ExpireWaits => match store.expire_waits(1000).await {
            Ok(jobs) => {
                let mut ids: Vec<String> = jobs.iter().map(|j| j.id.to_string()).collect();
                ids.sort();
                Res::Swept(ids)
            }
            Err(e) => panic!("expire_waits failed: {e}"),
        },
    }
}

/// Applies `ops` to the model and to `store` (driven by `clock`), and
/// panics at the first step where they disagree.
pub async fn check(store: Arc<dyn Store>, clock: ManualClock, ops: Vec<Op>) {
    let mut model = Model::default();
    let mut leases = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        let op = &model.resolve(op);
        if let Op::Advance { ms: n } = op {
            clock.advance(ms(*n));
        }
        let now = errand_core::Clock::now(&clock).as_millis();
        let got = apply_store(&store, &mut leases, op).await;
        let expected = match (op, &got) {
            (Op::Claim { limit, lease_ms }, Res::Claimed(choice)) => {
                let ids: Vec<String> = choice.iter().map(|(id, _)| id.clone()).collect();
                model.claim(*limit, *lease_ms, now, &ids)
            }
            _ => model.apply(op, now),
        };
        assert_eq!(got, expected, "step {step}: {op:?} returned differently");
        let jobs = store
            .list(&JobFilter {
                limit: Some(100),
                ..JobFilter::default()
            })
            .await
            .unwrap_or_else(|e| panic!("list failed: {e}"));
        assert_eq!(jobs.len(), model.jobs.len(), "step {step}: job count");
        for j in jobs {
            let m = model
                .jobs
                .get(j.id.as_str())
                .unwrap_or_else(|| panic!("step {step}: unexpected job {}", j.id));
            let seen = (
                j.state,
                j.waiting_on,
                j.attempts,
                j.max_attempts,
                j.replays,
                j.available_at,
                j.lease_until,
            );
            let want = (
                m.state,
                m.waiting_on(),
                m.attempts,
                m.max_attempts,
                m.replays,
                Timestamp::from_millis(m.available_at),
                m.lease_until.map(Timestamp::from_millis),
            );
            assert_eq!(
                seen, want,
                "step {step}: {op:?} left job {} differently (seq {})",
                j.id, m.created_seq
            );
            assert!(
                j.attempts <= j.max_attempts,
                "step {step}: attempts over the budget"
            );
        }
    }
}

/// The proptest strategy for one operation.
pub fn op_strategy() -> impl proptest::strategy::Strategy<Value = Op> {
    use proptest::prelude::*;
    prop_oneof![
        3 => (any::<u8>(), any::<u8>(), any::<u8>(), prop_oneof![Just(0u16), 0u16..3000], any::<u8>(), prop_oneof![Just(0u8), any::<u8>()], any::<u8>()).prop_map(|(id, max_attempts, max_lost, delay_ms, key, deps, policy)| Op::Enqueue { id, max_attempts, max_lost, delay_ms, key, deps, policy }),
        4 => (any::<u8>(), 1u16..2000).prop_map(|(limit, lease_ms)| Op::Claim { limit, lease_ms }),
        2 => any::<u8>().prop_map(|lease| Op::Complete { lease }),
        2 => (any::<u8>(), proptest::option::of(0u16..3000)).prop_map(|(lease, retry_ms)| Op::Fail { lease, retry_ms }),
        1 => (any::<u8>(), 0u16..3000).prop_map(|(lease, delay_ms)| Op::Snooze { lease, delay_ms }),
        1 => any::<u8>().prop_map(|lease| Op::Release { lease }),
        1 => (any::<u8>(), 1u16..2000).prop_map(|(lease, lease_ms)| Op::Heartbeat { lease, lease_ms }),
        3 => prop_oneof![Just(1u16), 0u16..2500].prop_map(|ms| Op::Advance { ms }),
        1 => Just(Op::Sweep),
        1 => any::<u8>().prop_map(|id| Op::Replay { id }),
        1 => any::<u8>().prop_map(|id| Op::Cancel { id }),
        2 => (any::<u8>(), any::<u8>(), any::<u8>(), prop_oneof![Just(0u16), 0u16..3000]).prop_map(|(id, key, rule, ms)| Op::EnqueueUnique { id, key, rule, ms }),
        2 => (any::<u8>(), proptest::option::of(0u16..3000), any::<u8>()).prop_map(|(lease, timeout_ms, policy)| Op::Suspend { lease, timeout_ms, policy }),
        3 => (any::<u8>(), any::<bool>()).prop_map(|(id, buffer)| Op::Signal { id, buffer }),
        1 => Just(Op::ExpireWaits),
        2 => (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(lease, child, max_attempts)| Op::CompleteAdding { lease, child, max_attempts }),
    ]
}
