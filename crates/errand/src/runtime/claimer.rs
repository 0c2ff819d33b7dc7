//! A queue's claimer: waits for free slots, claims as many due jobs as it
//! has slots in one short transaction (carrying the acknowledgments that
//! wait), and starts each job in its own task.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use errand_core::{
    ClaimRate, ClaimRequest, ClaimedJob, Lease, Name, RateBucket, RateLimit, Result,
};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use super::acks::answer;
use super::{Inner, lock};

/// The rate limit of a claimer's queue, if it runs exactly one named queue
/// that has one.
fn queue_rate<'a>(
    queues: &'a [Name],
    rates: &HashMap<Name, RateLimit>,
) -> Option<(&'a Name, RateLimit)> {
    match queues {
        [q] => rates.get(q).map(|r| (q, *r)),
        _ => None,
    }
}

/// How long a claimer whose claim came up short waits (unless woken)
/// before claiming again. A rate-limited claim may have come up short
/// because the bucket ran dry rather than the queue: while jobs are
/// starting (this claim or the one before started some), it looks again
/// when the next token is due; after two claims in a row started nothing,
/// the queue is idle and it waits the poll interval, as an unlimited
/// claimer does.
fn idle_wait(rate: Option<&ClaimRate>, starting: bool, poll: Duration) -> Duration {
    match rate {
        Some(rate) if starting => Duration::try_from_secs_f64(1.0 / rate.limit.per_second)
            .unwrap_or(poll)
            .min(poll),
        _ => poll,
    }
}

impl Inner {
    /// Starts one claimer per queue, each with the queue's slots; their
    /// jobs' tasks go into `jobs`.
    pub(super) fn start_claimers(
        self: &Arc<Self>,
        queues: &[(Option<Name>, usize)],
        stop: &watch::Receiver<bool>,
        jobs: &Arc<Mutex<JoinSet<()>>>,
    ) -> JoinSet<()> {
        let mut claimers = JoinSet::new();
        for (queue, concurrency) in queues {
            let slots = Arc::new(Semaphore::new(*concurrency));
            let (me, queue) = (self.clone(), queue.clone());
            let (stop, jobs) = (stop.clone(), jobs.clone());
            claimers.spawn(async move { me.claim_loop(queue, slots, stop, jobs).await });
        }
        claimers
    }

    async fn claim_loop(
        self: Arc<Self>,
        queue: Option<Name>,
        slots: Arc<Semaphore>,
        mut stop: watch::Receiver<bool>,
        jobs: Arc<Mutex<JoinSet<()>>>,
    ) {
        let mut signal = self.settings.store.work_signal();
        let queues: Vec<Name> = queue.into_iter().collect();
        // The claim itself spends the queue's tokens, one per job it
        // claims: a claim that finds nothing due spends none.
        let rate = queue_rate(&queues, &self.settings.rates).map(|(name, limit)| ClaimRate {
            bucket: RateBucket::queue(name),
            limit,
        });
        // Whether the last claim started anything.
        let mut was_starting = false;
        // When a claim last looked for expired leases: a claimer looks once
        // per poll interval (see `ClaimRequest::reclaim`), busy or idle (an
        // idle one wakes at least that often).
        let mut reclaimed_at: Option<tokio::time::Instant> = None;
        while !*stop.borrow() {
            // Wait for one free slot, then take every other free one.
            let first = tokio::select! {
                p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
                _ = stop.changed() => return,
            };
            let mut permits = vec![first];
            while permits.len() < self.settings.batch as usize {
                match slots.clone().try_acquire_owned() {
                    Ok(p) => permits.push(p),
                    Err(_) => break,
                }
            }
            let req = ClaimRequest {
                queues: queues.clone(),
                limit: u32::try_from(permits.len()).unwrap_or(self.settings.batch),
                lease: self.settings.lease,
                rate: rate.clone(),
                reclaim: reclaimed_at.is_none_or(|at| at.elapsed() >= self.settings.poll),
            };
            if req.reclaim {
                reclaimed_at = Some(tokio::time::Instant::now());
            }
            let claimed = match self.claim_with_acks(&req).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::warn!(error = %e, "claim failed; retrying after the poll interval");
                    drop(permits);
                    tokio::select! {
                        _ = tokio::time::sleep(self.settings.poll) => {}
                        _ = stop.changed() => {}
                    }
                    continue;
                }
            };
            self.record_cycle(&claimed);
            if !claimed.is_empty() {
                crate::probe::claimed(&claimed);
                crate::probe::at(crate::probe::Point::ClaimCommitted);
            }
            let asked = permits.len();
            let got = claimed.len();
            let claimed = self.hold_back_over_rate_keys(claimed).await;
            // Jobs held back by a key's rate count as idle capacity: wait
            // before claiming again rather than churning through the key.
            let idle = got < asked || claimed.len() < got;
            for claimed in claimed {
                let Some(permit) = permits.pop() else { break };
                let token = CancellationToken::new();
                lock(&self.in_flight).insert(
                    claimed.job.id.clone(),
                    (claimed.lease.clone(), token.clone()),
                );
                let me = self.clone();
                let mut set = lock(&jobs);
                // Reap finished tasks so a long-running service holds none.
                while set.try_join_next().is_some() {}
                // Boxed: the attempt's state machine is large, and tokio
                // moves a task's future by value when it creates and
                // finishes the task; a box makes those moves a pointer's.
                set.spawn(Box::pin(async move {
                    me.run_job(claimed, token, permit).await;
                }));
            }
            drop(permits);
            let starting = got > 0;
            if idle {
                let wait = idle_wait(rate.as_ref(), starting || was_starting, self.settings.poll);
                tokio::select! {
                    _ = signal.wait(wait) => {}
                    _ = stop.changed() => {}
                }
            }
            was_starting = starting;
        }
    }

    /// Claims, sending the acknowledgments waiting (if any) in the same
    /// transaction: a busy worker settles one batch as it takes the next.
    async fn claim_with_acks(&self, req: &ClaimRequest) -> Result<Vec<ClaimedJob>> {
        let store = self.settings.store.as_ref();
        let batch = self.acks.take();
        if batch.is_empty() {
            return store.claim(req).await;
        }
        let leases: Vec<Lease> = batch.iter().map(|(l, _)| l.clone()).collect();
        crate::probe::acks_sending(&leases);
        match store.complete_and_claim(&leases, req).await {
            Ok((acked, claimed)) => {
                answer(batch, &leases, Ok(acked));
                claimed
            }
            Err(e) => {
                // Nothing was acknowledged (or, in a case the store cannot
                // tell, everything was): the batcher writes them again on
                // their own, fenced, so a claim's failure costs them
                // nothing.
                self.acks.requeue(batch);
                Err(e)
            }
        }
    }

    /// Takes one token per claimed job from its key's bucket (for queues
    /// with a per-key rate) and snoozes the jobs their key could not cover,
    /// the k-th of them by k / rate, when the bucket will have refilled
    /// for it. Returns the jobs to run.
    async fn hold_back_over_rate_keys(&self, claimed: Vec<ClaimedJob>) -> Vec<ClaimedJob> {
        let rates = &self.settings.key_rates;
        if rates.is_empty() {
            return claimed;
        }
        let mut buckets: HashMap<RateBucket, (RateLimit, Vec<usize>)> = HashMap::new();
        for (i, c) in claimed.iter().enumerate() {
            if let (Some(key), Some(rate)) = (&c.job.key, rates.get(&c.job.queue)) {
                buckets
                    .entry(RateBucket::key(&c.job.queue, key))
                    .or_insert_with(|| (*rate, Vec::new()))
                    .1
                    .push(i);
            }
        }
        let store = self.settings.store.as_ref();
        let mut held = HashSet::new();
        for (bucket, (rate, jobs)) in buckets {
            let want = u32::try_from(jobs.len()).unwrap_or(u32::MAX);
            let granted = match store.take_tokens(&bucket, rate, want).await {
                Ok(g) => g as usize,
                Err(e) => {
                    tracing::warn!(%bucket, error = %e, "taking key-rate tokens failed; holding the key's jobs back");
                    0
                }
            };
            for (k, &i) in jobs.iter().enumerate().skip(granted) {
                held.insert(i);
                let wait = (k - granted + 1) as f64 / rate.per_second;
                let lease = &claimed[i].lease;
                if let Err(e) = store.snooze(lease, Duration::from_secs_f64(wait)).await {
                    // The lease expires and the job comes back then.
                    tracing::warn!(job = %lease.id, error = %e, "snoozing a job over its key's rate failed");
                }
            }
        }
        claimed
            .into_iter()
            .enumerate()
            .filter(|(i, _)| !held.contains(i))
            .map(|(_, c)| c)
            .collect()
    }
}
