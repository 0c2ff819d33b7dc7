//! Claims: the short transaction that acknowledges finished jobs and
//! claims due ones, the rate-limit tokens a claim takes, and where the
//! next claim across every queue may resume.

use std::future::Future;
use std::time::Duration;

use errand_core::{ClaimRate, ClaimRequest, ClaimedJob, JobId, Lease, LeaseToken, Name, Result};
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::PgStore;
use crate::conn::{Conn, Param, Pipelined, query, query_opt};
use crate::error::map_err;
use crate::maintenance::expire_final;
use crate::queries::Queries;
use crate::rows::{JobCols, LEASE_TOKEN, col, jobs_from_rows, millis};
use crate::settle::complete_many;

/// How long a claim across every queue may resume where the last one
/// stopped before it walks the due index from the start again.
pub(crate) const RESUME_FOR: Duration = Duration::from_secs(1);

/// Where the next claim across every queue may resume its walk of the due
/// index, shared by the store's clones.
///
/// Resuming skips the entries of jobs already claimed (dead until vacuum
/// removes them), but also any job that came to sort before the resume
/// point since: a higher priority or an earlier due time enqueued, a retry
/// or replay, a queue resumed, a job another claimer had locked and gave
/// back. So the point is forgotten whenever this store writes such a job,
/// whenever the listener hears an insert (from any process), when a claim
/// comes up short, and a second after it was set: such a job waits at most
/// that long.
#[derive(Debug, Default)]
pub(crate) struct Resume {
    /// Writes through this store that may put a job before the point.
    writes: std::sync::atomic::AtomicU64,
    point: std::sync::Mutex<Option<ResumePoint>>,
}

/// Bumps the store's write count when dropped.
pub(crate) struct Touched<'a>(&'a Resume);

impl Drop for Touched<'_> {
    fn drop(&mut self) {
        self.0
            .writes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[derive(Debug)]
struct ResumePoint {
    key: ResumeKey,
    /// The store's generation when the claim that set it began.
    generation: u64,
    set_at: std::time::Instant,
}

impl PgStore {
    /// Changes whenever a job may have come to sort before the resume
    /// point: a write through this store, or a notification heard.
    fn generation(&self) -> u64 {
        let writes = self.resume.writes.load(std::sync::atomic::Ordering::SeqCst);
        let heard = self.listener.get().map_or(0, |h| h.listener.heard());
        writes.wrapping_add(heard)
    }

    /// Notes a write that may put a job before the resume point, once the
    /// write has ended (when the guard is dropped): a claim that began
    /// earlier may not have seen the job, and must not pass the point on.
    pub(crate) fn touched(&self) -> Touched<'_> {
        Touched(&self.resume)
    }

    /// Claims, resuming where the last claim across every queue stopped
    /// when it may, and records where the next may resume.
    pub(crate) async fn claim_resuming(
        &self,
        leases: &[Lease],
        req: &ClaimRequest,
    ) -> Result<(Vec<bool>, Vec<ClaimedJob>)> {
        req.validate()?;
        let all_queues = req.queues.is_empty();
        let generation = self.generation();
        let resume = if all_queues && !req.reclaim {
            let point = self
                .resume
                .point
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            point
                .as_ref()
                .filter(|p| p.generation == generation && p.set_at.elapsed() < RESUME_FOR)
                .map(|p| p.key.clone())
        } else {
            None
        };
        let client = self.client().await?;
        let (acked, claimed, next) = claim(
            &client,
            &self.queries,
            self.now(),
            leases,
            req,
            resume.as_ref(),
        )
        .await?;
        if all_queues {
            let mut point = self
                .resume
                .point
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            *point = next.map(|key| ResumePoint {
                key,
                generation,
                set_at: std::time::Instant::now(),
            });
        }
        Ok((acked, claimed))
    }
}

/// Where a claim across every queue resumes its walk of the due index:
/// the priority, due time and id of the last ready job the previous claim
/// took (see `claim_ready.sql`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct ResumeKey {
    pub(crate) priority: i16,
    pub(crate) available_at: OffsetDateTime,
    pub(crate) id: String,
}

/// What a claim gave back: the acknowledgments' verdicts, the claimed
/// jobs, and where the next claim may resume (`None`: from the start).
pub(crate) type ClaimOutcome = (Vec<bool>, Vec<ClaimedJob>, Option<ResumeKey>);

/// How a claim across every queue begins its transaction. Its statements
/// run generic plans (planned once per connection), and those plans must
/// read the due index in claim order and stop at the limit. Left to its
/// estimates, PostgreSQL prefers, once the table has statistics, to read
/// the whole backlog and sort it: the paused-queue filter and the row
/// lock under the limit make the index look dear, and a claim of 256 from
/// a 100,000-job backlog then took 40 ms instead of 1 ms. So the scans and
/// sorts it could use instead are priced out for this transaction (every
/// statement in it has an index made for it), and JIT, which such prices
/// would start, is off.
pub(crate) const ALL_QUEUES_CLAIM: &str = "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; \
     SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; \
     SET LOCAL enable_sort = off; SET LOCAL jit = off";

/// Acknowledges `leases` (none: a plain claim) and claims due jobs in one
/// short transaction of two round trips: `BEGIN`, the acknowledgments, the
/// sweep of expired final attempts (when the request reclaims), the key
/// lock and the capped queues' locks are sent together; then the claim
/// (whose snapshot follows the locks) and `COMMIT`. The claim is
/// `claim.sql`, or the smaller `claim_ready.sql` when it neither reclaims
/// nor holds a lock. An error
/// rolls everything back (nothing acknowledged, nothing claimed) — except
/// in the one case the client cannot tell: the claim failing before it was
/// sent (its parameters not encodable) while the `COMMIT` behind it goes
/// out; the runtime then retries the acknowledgments, which, fenced, find
/// their jobs done.
pub(crate) async fn claim(
    client: &deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    leases: &[Lease],
    req: &ClaimRequest,
    resume: Option<&ResumeKey>,
) -> Result<ClaimOutcome> {
    // The request was validated by the caller (`ClaimRequest::validate`).
    // Every statement prepared first (no round trip once cached), so each
    // goes on the wire when first polled — in the order written below.
    tokio::try_join!(
        client.prepare_cached(&q.complete_many),
        client.prepare_cached(&q.expire_final),
        client.prepare_cached(&q.claim_locks),
        client.prepare_cached(&q.claim),
        client.prepare_cached(&q.claim_ready),
        async {
            if req.rate.is_some() {
                client.prepare_cached(&q.take_tokens).await?;
                client.prepare_cached(&q.give_back_tokens).await?;
            }
            Ok(())
        },
    )
    .map_err(map_err)?;
    let tx = Pipelined::new(client);
    let result = claim_in_transaction(client, q, now, leases, req, resume).await;
    tx.end(result).await
}

/// The claim's statements, in the transaction they open: the first round
/// trip (`BEGIN` or [`ALL_QUEUES_CLAIM`], the acknowledgments, the sweep,
/// the key lock, the capped queues' locks, the rate-limit tokens), then the
/// claim and `COMMIT`.
async fn claim_in_transaction(
    client: &deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    leases: &[Lease],
    req: &ClaimRequest,
    resume: Option<&ResumeKey>,
) -> Result<ClaimOutcome> {
    let asked = req.limit.min(10_000);
    let queues: Option<Vec<&str>> =
        (!req.queues.is_empty()).then(|| req.queues.iter().map(Name::as_str).collect());
    let lease = millis(req.lease);
    // A claim across every queue runs generic plans: PostgreSQL otherwise
    // plans these statements afresh at every execution (a sixth of its
    // time in a burn-down). A claim of named queues keeps plans made for
    // its queues: generically planned, it would walk the due index past
    // other queues' backlog.
    let begin = if queues.is_none() {
        ALL_QUEUES_CLAIM
    } else {
        "BEGIN"
    };
    // Sent in this order on one connection, without waiting in between.
    // A rate-limited claim takes up to `asked` tokens here (its upsert
    // holds the bucket's row until the commit), claims no more jobs than it
    // was granted, and gives the rest back before committing.
    let (_, acked, _, locks, granted) = tokio::try_join!(
        biased;
        async { client.batch_execute(begin).await.map_err(map_err) },
        acknowledge(client, q, now, leases),
        expire_if_reclaiming(client, q, now, req.reclaim),
        take_locks(client, q, now, &queues, asked),
        take_claim_tokens(client, q, now, req, asked),
    )?;
    let limit = i64::from(granted.map_or(asked, |g| g.min(asked)));
    // The named queues whose ready jobs the ordinary scans read: not the
    // paused and capped ones with due jobs (read past, row by row).
    let ready_queues: Option<Vec<&str>> = queues.as_ref().map(|named| {
        named
            .iter()
            .copied()
            .filter(|q| !locks.due.iter().any(|e| e == q))
            .collect()
    });
    let tokens: Vec<LeaseToken> = (0..limit).map(|_| LeaseToken::generate()).collect();
    let token_text: Vec<&str> = tokens.iter().map(LeaseToken::as_str).collect();
    let args = ClaimArgs {
        now,
        limit,
        queues: &queues,
        tokens: &token_text,
        lease,
        keyed: locks.keyed,
        reclaim: req.reclaim,
        capped: &locks.capped,
        // A claim of named queues reads their own ranges already.
        ranged: !locks.due.is_empty() && queues.is_none(),
        ready_queues: &ready_queues,
        resume,
    };
    let claim = claim_due_rows(client, q, &args);
    let rows = match (&req.rate, granted) {
        (Some(rate), Some(granted)) => {
            claim_and_give_back_tokens(client, q, claim, rate, granted).await?
        }
        _ => claim_and_commit(client, claim).await?,
    };
    let claimed = claimed_jobs(&rows)?;
    let next = resume_key_after(&rows, limit)?;
    Ok((acked, claimed, next))
}

/// The acknowledgments a claim carries (none: a plain claim), settled in
/// the claim's transaction, which releases their jobs' dependents.
async fn acknowledge(
    client: &deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    leases: &[Lease],
) -> Result<Vec<bool>> {
    if leases.is_empty() {
        Ok(Vec::new())
    } else {
        complete_many(client, q, now, leases, true).await
    }
}

/// A claim that reclaims first moves final attempts whose lease expired
/// to `dead` (`expire_final.sql`).
async fn expire_if_reclaiming(
    client: &deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    reclaim: bool,
) -> Result<Vec<JobId>> {
    if reclaim {
        expire_final(client, q, now).await
    } else {
        Ok(Vec::new())
    }
}

/// The locks a claim took before it claims, and the queues the ordinary
/// scans leave out (`Queries::claim_locks`: `key_lock.sql`, then
/// `cap_lock.sql`).
#[derive(Debug, Default)]
struct Locks {
    /// Whether it took the key lock (keyed jobs are due).
    keyed: bool,
    /// The capped queues whose locks it took (due jobs and a free slot).
    capped: Vec<String>,
    /// The paused and capped queues among the claimed ones with due jobs
    /// (the ordinary scans leave them out, and would walk past them).
    due: Vec<String>,
}

/// Takes the key lock when keyed jobs are due in the claimed queues, and
/// the locks of the capped queues with due jobs and a free slot; lists
/// the paused and capped queues with due jobs. A claim of nothing sends
/// nothing.
async fn take_locks(
    client: &deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    queues: &Option<Vec<&str>>,
    asked: u32,
) -> Result<Locks> {
    let mut locks = Locks::default();
    if asked == 0 {
        return Ok(locks);
    }
    for r in &query(client, &q.claim_locks, &[&now, queues]).await? {
        let locked = col::<bool>(r, 1)?;
        match col::<Option<String>>(r, 0)? {
            // key_lock.sql's row.
            None => locks.keyed = locked,
            Some(queue) => {
                if locked {
                    locks.capped.push(queue.clone());
                }
                locks.due.push(queue);
            }
        }
    }
    Ok(locks)
}

/// A rate-limited claim's tokens: up to `asked` taken from its bucket
/// (`None`: the claim has no rate limit).
async fn take_claim_tokens(
    client: &deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    req: &ClaimRequest,
    asked: u32,
) -> Result<Option<u32>> {
    match &req.rate {
        Some(rate) => take_tokens(client, q, now, &rate.bucket, rate.limit, asked)
            .await
            .map(Some),
        None => Ok(None),
    }
}

/// The claim statement's parameters.
struct ClaimArgs<'a> {
    now: Option<OffsetDateTime>,
    /// How many jobs to claim at most.
    limit: i64,
    queues: &'a Option<Vec<&'a str>>,
    /// One fresh lease token per job it may claim.
    tokens: &'a Vec<&'a str>,
    /// The lease, in milliseconds.
    lease: i64,
    /// Whether the claim holds the key lock (keyed jobs are due).
    keyed: bool,
    reclaim: bool,
    /// The capped queues whose locks the claim holds.
    capped: &'a [String],
    /// Whether to read every other queue's ranges of the due index rather
    /// than walk it past paused and capped queues' due jobs.
    ranged: bool,
    /// The named queues the ordinary scans read ready jobs from (`None`:
    /// every queue).
    ready_queues: &'a Option<Vec<&'a str>>,
    resume: Option<&'a ResumeKey>,
}

/// Claims due jobs (and expired leases, when the request reclaims):
/// `claim.sql`, or the smaller `claim_ready.sql`.
async fn claim_due_rows(
    client: &deadpool_postgres::Client,
    q: &Queries,
    a: &ClaimArgs<'_>,
) -> Result<Vec<Row>> {
    if a.limit == 0 {
        Ok(Vec::new())
    } else if !a.keyed && !a.reclaim && a.capped.is_empty() && !a.ranged {
        // Neither expired leases, keyed jobs nor capped or paused queues'
        // due jobs to look at: the smaller statement, with the same order
        // and rechecks, resuming where the last claim stopped if it may.
        if a.ready_queues.as_ref().is_some_and(Vec::is_empty) {
            return Ok(Vec::new());
        }
        let (priority, at, id) = match a.resume {
            Some(r) => (Some(r.priority), Some(r.available_at), Some(r.id.as_str())),
            None => (None, None, None),
        };
        let params: [Param<'_>; 8] = [
            &a.now,
            &a.limit,
            a.ready_queues,
            a.tokens,
            &a.lease,
            &priority,
            &at,
            &id,
        ];
        query(client, &q.claim_ready, &params).await
    } else {
        let params: [Param<'_>; 10] = [
            &a.now,
            &a.limit,
            a.queues,
            a.tokens,
            &a.lease,
            &a.keyed,
            &a.reclaim,
            &a.capped,
            &a.ranged,
            a.ready_queues,
        ];
        query(client, &q.claim, &params).await
    }
}

/// Sends `claim` and `COMMIT` back to back.
async fn claim_and_commit(
    client: &deadpool_postgres::Client,
    claim: impl Future<Output = Result<Vec<Row>>>,
) -> Result<Vec<Row>> {
    let (rows, committed) = tokio::join!(biased; claim, client.batch_execute("COMMIT"));
    // A failed claim aborts the transaction: COMMIT then rolls back.
    let rows = rows?;
    committed.map_err(map_err)?;
    Ok(rows)
}

/// A rate-limited claim: the tokens to give back are known once the claim
/// has answered, so the give-back and `COMMIT` follow it, back to back
/// (one more round trip, for rate-limited claims only).
async fn claim_and_give_back_tokens(
    client: &deadpool_postgres::Client,
    q: &Queries,
    claim: impl Future<Output = Result<Vec<Row>>>,
    rate: &ClaimRate,
    granted: u32,
) -> Result<Vec<Row>> {
    let rows = claim.await?;
    let unspent = granted.saturating_sub(u32::try_from(rows.len()).unwrap_or(u32::MAX));
    let (given, committed) = tokio::join!(
        biased;
        async {
            if unspent == 0 {
                return Ok(Vec::new());
            }
            let (name, burst) = (rate.bucket.as_str(), f64::from(rate.limit.burst));
            let unspent = i32::try_from(unspent).unwrap_or(i32::MAX);
            query(client, &q.give_back_tokens, &[&name, &unspent, &burst]).await
        },
        client.batch_execute("COMMIT"),
    );
    // A failed give-back aborts the transaction: COMMIT then rolls
    // back.
    given?;
    committed.map_err(map_err)?;
    Ok(rows)
}

/// The jobs the claim's rows hold, each with the lease it was claimed
/// under.
fn claimed_jobs(rows: &[Row]) -> Result<Vec<ClaimedJob>> {
    let jobs = jobs_from_rows(rows)?;
    let token_at = rows
        .first()
        .map(|r| JobCols::of(r).map(|c| c.0[LEASE_TOKEN]))
        .transpose()?
        .unwrap_or(0);
    rows.iter()
        .zip(jobs)
        .map(|(row, job)| {
            let token: String = row.try_get(token_at).map_err(map_err)?;
            Ok(ClaimedJob {
                lease: Lease {
                    id: job.id.clone(),
                    token: LeaseToken::from_string(token),
                    attempt: job.attempts,
                },
                job,
            })
        })
        .collect()
}

/// The last ready job taken (not a reclaimed lease), where the next
/// claim may resume; none after a claim that came up short.
fn resume_key_after(rows: &[Row], limit: i64) -> Result<Option<ResumeKey>> {
    if rows.len() < usize::try_from(limit).unwrap_or(usize::MAX) {
        return Ok(None);
    }
    match rows
        .iter()
        .rev()
        .find(|r| r.try_get::<_, i32>("src").is_ok_and(|src| src == 1))
    {
        Some(row) => Ok(Some(ResumeKey {
            priority: row.try_get("priority").map_err(map_err)?,
            available_at: row.try_get("available_at").map_err(map_err)?,
            id: row.try_get("id").map_err(map_err)?,
        })),
        None => Ok(None),
    }
}

/// Takes up to `want` tokens from a shared bucket.
pub(crate) async fn take_tokens<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    bucket: &errand_core::RateBucket,
    limit: errand_core::RateLimit,
    want: u32,
) -> Result<u32> {
    limit.validate()?;
    let want = i32::try_from(want).unwrap_or(i32::MAX);
    let burst = f64::from(limit.burst);
    let row = query_opt(
        client,
        &q.take_tokens,
        &[&now, &bucket.as_str(), &want, &limit.per_second, &burst],
    )
    .await?;
    let granted: i32 = row.as_ref().map_or(Ok(0), |r| col(r, 0))?;
    Ok(u32::try_from(granted).unwrap_or(0))
}
