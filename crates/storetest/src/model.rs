//! A model-based test: random operation sequences applied to a small
//! reference model of the contract and to a real store, compared after every
//! step. The clock moves only through `Advance`.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::admin;
use errand_core::{
    CancelRequest, ClaimRequest, Error, ErrorClass, Failure, JobFilter, JobId, JobState, KeyLimit,
    Lease, ManualClock, NewJob, Payload, ReplayRequest, RetryAt, Schedule, Store, Timestamp,
};

/// One step of a sequence. Indices pick among jobs or handed-out leases
/// modulo their count, so every generated sequence is meaningful. (Field
/// meanings follow from their names: ids, lease indices, milliseconds.)
#[allow(missing_docs)]
#[derive(Clone, Debug)]
pub enum Op {
    /// Insert job `id` (one of a few names, so duplicates happen), with
    /// concurrency key `key` (see [`key_of`]).
    Enqueue {
        id: u8,
        max_attempts: u8,
        max_lost: u8,
        delay_ms: u16,
        key: u8,
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
    NotFound,
    Swept(Vec<String>),
    Skip,
}

fn name(id: u8) -> String {
    format!("job-{}", id % 6)
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
    fn live(&self, lease: usize, now: i64) -> Option<&str> {
        let (id, _) = self.leases.get(lease)?;
        let j = self.jobs.get(id)?;
        (j.state == JobState::Running
            && j.owner == Some(lease)
            && j.lease_until.is_some_and(|u| u > now))
        .then_some(id.as_str())
    }

    fn expire_final(&mut self, now: i64) -> Vec<String> {
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
            } => {
                let id = name(id);
                if !self.jobs.contains_key(&id) {
                    self.created += 1;
                    self.jobs.insert(
                        id,
                        MJob {
                            state: JobState::Ready,
                            attempts: 0,
                            max_attempts: u32::from(max_attempts % 3 + 1),
                            replays: 0,
                            lease_expiries: 0,
                            max_lease_expiries: u32::from(max_lost % 3 + 1),
                            available_at: now + i64::from(delay_ms),
                            lease_until: None,
                            owner: None,
                            created_seq: self.created,
                            key: key_of(key),
                        },
                    );
                }
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
                Res::Ok
            }
            Op::Advance { .. } => Res::Ok,
            Op::Sweep => Res::Swept(self.expire_final(now)),
            Op::Replay { id } => {
                let Some(j) = self.jobs.get_mut(&name(id)) else {
                    return Res::NotFound;
                };
                if !matches!(j.state, JobState::Dead | JobState::Cancelled) {
                    return Res::Refused;
                }
                j.state = JobState::Ready;
                j.attempts = 0;
                j.lease_expiries = 0;
                j.replays += 1;
                j.available_at = now;
                Res::Ok
            }
            Op::Cancel { id } => {
                let Some(j) = self.jobs.get_mut(&name(id)) else {
                    return Res::NotFound;
                };
                if !matches!(j.state, JobState::Ready | JobState::Running) {
                    return Res::Refused;
                }
                j.state = JobState::Cancelled;
                j.lease_until = None;
                j.owner = None;
                Res::Ok
            }
        }
    }
}

fn reduce<T>(r: errand_core::Result<T>) -> Res {
    match r {
        Ok(_) => Res::Ok,
        Err(Error::LeaseLost { .. }) => Res::LeaseLost,
        Err(Error::InvalidState { .. }) => Res::Refused,
        Err(Error::NotFound(_)) => Res::NotFound,
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
        } => {
            let job = NewJob::new("model", Payload::default())
                .and_then(|j| j.with_max_attempts(u32::from(max_attempts % 3 + 1)))
                .and_then(|j| j.with_max_lease_expiries(u32::from(max_lost % 3 + 1)))
                .map(|j| j.with_id(JobId::new(name(id)).unwrap_or_else(|_| JobId::generate())))
                .map(|j| j.scheduled(Schedule::After(ms(delay_ms))))
                .and_then(|j| match key_of(key) {
                    Some((k, limit)) => j.with_key(k, limit),
                    None => Ok(j),
                });
            match job {
                Ok(job) => reduce(store.insert(job).await),
                Err(e) => panic!("bad generated job: {e}"),
            }
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
            reduce(admin(store).replay(&req).await)
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
            reduce(admin(store).cancel(&req).await)
        }
    }
}

/// Applies `ops` to the model and to `store` (driven by `clock`), and
/// panics at the first step where they disagree.
pub async fn check(store: Arc<dyn Store>, clock: ManualClock, ops: Vec<Op>) {
    let mut model = Model::default();
    let mut leases = Vec::new();
    for (step, op) in ops.iter().enumerate() {
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
                j.attempts,
                j.max_attempts,
                j.replays,
                j.available_at,
                j.lease_until,
            );
            let want = (
                m.state,
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
        3 => (any::<u8>(), any::<u8>(), any::<u8>(), prop_oneof![Just(0u16), 0u16..3000], any::<u8>()).prop_map(|(id, max_attempts, max_lost, delay_ms, key)| Op::Enqueue { id, max_attempts, max_lost, delay_ms, key }),
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
    ]
}
