//! The queue operations in PostgreSQL's dialect.

use std::time::Duration;

use errand_core::{
    AttemptRecord, AuditRecord, ClaimRequest, ClaimedJob, Dependency, Error, ErrorClass, Failure,
    Inserted, Job, JobDetail, JobFilter, JobId, JobState, Lease, LeaseToken, Name, NewJob, Payload,
    Result, RetryAt, Schedule, Timestamp, TraceParent, WorkflowId,
};
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::conn::{Conn, Param, Pipelined, query, query_opt, read_snapshot, require_transaction};
use crate::error::map_err;
use crate::queries::Queries;
use crate::rows::{
    JobCols, LEASE_TOKEN, bad_row, col, from_odt, ids_where, job_from_row, jobs_from_rows, millis,
    to_odt, u32_of,
};

/// How many steps of `workflow` are in each state.
pub(crate) async fn workflow_counts<C: Conn>(
    client: &C,
    q: &Queries,
    workflow: &WorkflowId,
) -> Result<Vec<(JobState, u64)>> {
    let mut counts = Vec::new();
    for row in query(client, &q.workflow_counts, &[&workflow.as_str()]).await? {
        let state: &str = col(&row, 0)?;
        let n: i64 = col(&row, 1)?;
        counts.push((
            state.parse::<JobState>().map_err(bad_row)?,
            u64::try_from(n).unwrap_or(0),
        ));
    }
    Ok(counts)
}

/// The first `first` dependency edges of each job in `ids`, each with how
/// many its job has.
pub(crate) async fn dependency_edges<C: Conn>(
    client: &C,
    q: &Queries,
    ids: &[JobId],
    first: u32,
) -> Result<Vec<errand_core::StepEdge>> {
    let ids: Vec<&str> = ids.iter().map(JobId::as_str).collect();
    let first = i64::from(first);
    let mut edges = Vec::new();
    for row in query(client, &q.dependency_edges, &[&ids, &first]).await? {
        edges.push(errand_core::StepEdge {
            job: JobId::new(col::<String>(&row, 0)?).map_err(bad_row)?,
            depends_on: JobId::new(col::<String>(&row, 1)?).map_err(bad_row)?,
            of: u32::try_from(col::<i64>(&row, 2)?).unwrap_or(u32::MAX),
        });
    }
    Ok(edges)
}

/// The outputs of the jobs `id` depends on, in the order they were named.
pub(crate) async fn dependency_outputs<C: Conn>(
    client: &C,
    q: &Queries,
    id: &JobId,
) -> Result<Vec<(JobId, Option<Payload>)>> {
    outputs(&query(client, &q.dependency_outputs, &[&id.as_str()]).await?)
}

/// One page of the outputs of the jobs `id` depends on, by dependency id:
/// those after `after`, at most `limit`.
pub(crate) async fn dependency_outputs_after<C: Conn>(
    client: &C,
    q: &Queries,
    id: &JobId,
    after: Option<&JobId>,
    limit: u32,
) -> Result<Vec<(JobId, Option<Payload>)>> {
    let after = after.map_or("", JobId::as_str);
    let limit = i64::from(limit);
    let params: [Param<'_>; 3] = [&id.as_str(), &after, &limit];
    outputs(&query(client, &q.dependency_outputs_after, &params).await?)
}

/// The (dependency, output) rows of a dependency-outputs statement.
fn outputs(rows: &[Row]) -> Result<Vec<(JobId, Option<Payload>)>> {
    rows.iter()
        .map(|r| {
            let dep: String = r.try_get(0).map_err(map_err)?;
            let output: Option<String> = r.try_get(1).map_err(map_err)?;
            Ok((JobId::new(dep)?, output.map(Payload::from_stored)))
        })
        .collect()
}

/// Whether `job` has rows of its own beside the job's (tags, a workflow
/// step), which only the [`side_rows`] statement writes.
pub(crate) fn has_side_rows(job: &NewJob) -> bool {
    !job.tags.is_empty() || job.workflow.is_some()
}

/// Inserts a job, or returns the existing one with the same id.
pub(crate) async fn insert<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    job: &NewJob,
) -> Result<Inserted> {
    if !job.depends_on.is_empty() || job.batch.is_some() {
        // Under a savepoint: a refusal after the batch was opened (a job
        // found in another batch) leaves nothing behind.
        return insert_linked(client, q, now, std::slice::from_ref(job))
            .await?
            .pop()
            .ok_or_else(|| Error::storage("inserting one job answered with none"));
    }
    if has_side_rows(job) {
        // Its tag or workflow-step rows come with the bulk insert.
        return insert_many(client, q, now, std::slice::from_ref(job))
            .await?
            .pop()
            .ok_or_else(|| Error::storage("inserting one job answered with none"));
    }
    job.validate()?;
    if let Some(found) = stand_in(client, q, now, job).await? {
        return Ok(found);
    }
    let id = job.id.clone().unwrap_or_else(JobId::generate);
    let (at, delay): (Option<OffsetDateTime>, i64) = match job.schedule {
        Schedule::Now => (None, 0),
        Schedule::After(d) => (None, millis(d)),
        Schedule::At(t) => (Some(to_odt(t)), 0),
    };
    let max =
        i32::try_from(job.max_attempts).map_err(|_| Error::invalid("max attempts out of range"))?;
    let max_lost = i32::try_from(job.max_lease_expiries)
        .map_err(|_| Error::invalid("lost-lease budget out of range"))?;
    let give_up: Option<i64> = job.give_up_after.map(millis);
    let row = query_opt(
        client,
        &q.insert,
        &[
            &now,
            &id.as_str(),
            &job.queue.as_str(),
            &job.kind.as_str(),
            &job.payload.as_str(),
            &job.priority,
            &max,
            &at,
            &delay,
            &max_lost,
            &give_up,
            &job.key.as_ref().map(|k| k.name.as_str()),
            &key_limit(job)?,
            &job.key.as_ref().is_some_and(|k| k.ordered),
            &job.deadline.map(to_odt),
            &job.traceparent.as_ref().map(TraceParent::as_str),
            &job.workflow.as_ref().map(WorkflowId::as_str),
            &errand_core::meta_to_stored(&job.meta),
            &job.unique_key(),
        ],
    )
    .await?;
    match row {
        Some(row) => Ok(Inserted {
            job: job_from_row(&row)?,
            created: true,
        }),
        None => Ok(Inserted {
            job: get(client, q, &id).await?,
            created: false,
        }),
    }
}

/// Inserts jobs of which some have dependencies, inside a transaction the
/// caller holds (a savepoint of its own makes the call all or nothing; on a
/// connection outside a transaction it is refused): the jobs, as
/// [`insert_many`] does, then for the new ones with dependencies their
/// edges, after locking every dependency — each must be stored, possibly
/// by this call. Dependencies that have already ended release the new
/// jobs at once, by the rule a settlement follows.
pub(crate) async fn insert_linked<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    jobs: &[NewJob],
) -> Result<Vec<Inserted>> {
    errand_core::check_dependencies(jobs)?;
    if let Err(e) = client.rows("SAVEPOINT errand_linked", &[]).await {
        let in_no_transaction =
            e.code() == Some(&tokio_postgres::error::SqlState::NO_ACTIVE_SQL_TRANSACTION);
        return Err(if in_no_transaction {
            Error::invalid(if jobs.iter().all(|j| j.depends_on.is_empty()) {
                "a job joining a batch must be enqueued inside a transaction: open one on the \
                 connection and commit it after the call"
            } else {
                "jobs with dependencies must be enqueued inside a transaction: open one on the \
                 connection and commit it after the call"
            })
        } else {
            map_err(e)
        });
    }
    let result = link(client, q, now, jobs).await;
    let end = if result.is_ok() {
        "RELEASE SAVEPOINT errand_linked"
    } else {
        "ROLLBACK TO SAVEPOINT errand_linked"
    };
    client.rows(end, &[]).await.map_err(map_err)?;
    result
}

async fn link<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    jobs: &[NewJob],
) -> Result<Vec<Inserted>> {
    // Ids are chosen here so the edges can name the new jobs.
    let jobs: Vec<NewJob> = jobs
        .iter()
        .map(|j| {
            let mut j = j.clone();
            j.id.get_or_insert_with(JobId::generate);
            j
        })
        .collect();
    let mut inserted = insert_many(client, q, now, &jobs).await?;
    let edges: Vec<(&str, &[JobId])> = jobs
        .iter()
        .zip(&inserted)
        .filter(|(job, ins)| ins.created && !job.depends_on.is_empty())
        .map(|(job, ins)| (ins.job.id.as_str(), job.depends_on.as_slice()))
        .collect();
    if edges.is_empty() {
        return Ok(inserted);
    }
    let wanted = errand_core::wanted_dependencies(&edges);
    let mut states = std::collections::HashMap::with_capacity(wanted.len());
    for r in query(client, &q.lock_dependencies, &[&wanted]).await? {
        let state: &str = col(&r, 1)?;
        states.insert(col::<String>(&r, 0)?, state.parse::<JobState>()?);
    }
    let plan = errand_core::plan_links(&edges, &states)?;
    let edge_jobs: Vec<&str> = plan.edges.iter().map(|e| e.job).collect();
    let edge_deps: Vec<&str> = plan.edges.iter().map(|e| e.depends_on).collect();
    let positions: Vec<i32> = plan
        .edges
        .iter()
        .map(|e| i32::try_from(e.position).unwrap_or(i32::MAX))
        .collect();
    let met: Vec<bool> = plan.edges.iter().map(|e| e.met).collect();
    query(
        client,
        &q.link_dependencies,
        &[&edge_jobs, &edge_deps, &positions, &met],
    )
    .await?;
    if !plan.met_at_insert.is_empty() {
        let (ids, counts): (Vec<&str>, Vec<i32>) = plan
            .met_at_insert
            .iter()
            .map(|(id, n)| (*id, i32::try_from(*n).unwrap_or(i32::MAX)))
            .unzip();
        query(client, &q.met_at_insert, &[&ids, &counts]).await?;
    }
    release_dependents(client, q, now, &plan.failed).await?;
    // The new jobs with dependencies as they stand now (released, or
    // cancelled, by dependencies that had ended).
    let linked: Vec<&str> = edges.iter().map(|(job, _)| *job).collect();
    let fresh: std::collections::HashMap<String, Job> = query(client, &q.get_many, &[&linked])
        .await?
        .iter()
        .map(|r| job_from_row(r).map(|j| (j.id.to_string(), j)))
        .collect::<Result<_>>()?;
    for ins in &mut inserted {
        if ins.created
            && let Some(job) = fresh.get(ins.job.id.as_str())
        {
            ins.job = job.clone();
        }
    }
    Ok(inserted)
}

/// A job's dependencies, in the order they were named, and the first of
/// its dependents (blocked ones first, then by id).
pub(crate) async fn dependencies<C: Conn>(
    client: &C,
    q: &Queries,
    job: &Job,
) -> Result<(Vec<Dependency>, Vec<Dependency>)> {
    let read = |rows: Vec<Row>| -> Result<Vec<Dependency>> {
        rows.iter()
            .map(|r| {
                let state: Option<String> = col(r, 1)?;
                Ok(Dependency {
                    id: JobId::new(col::<String>(r, 0)?).map_err(bad_row)?,
                    state: state
                        .map(|s| s.parse::<JobState>())
                        .transpose()
                        .map_err(bad_row)?,
                    met: col(r, 2)?,
                })
            })
            .collect()
    };
    let id = job.id.as_str();
    let dependencies = if job.on_dependency_failure.is_some() {
        read(query(client, &q.dependencies_of, &[&id]).await?)?
    } else {
        Vec::new()
    };
    let dependents = if job.has_dependents {
        let limit = i64::try_from(JobDetail::DEPENDENTS_SHOWN).unwrap_or(100);
        read(query(client, &q.dependents_of, &[&id, &limit]).await?)?
    } else {
        Vec::new()
    };
    Ok((dependencies, dependents))
}

/// A job's per-key limit as the schema stores it.
pub(crate) fn key_limit(job: &NewJob) -> Result<Option<i32>> {
    job.key
        .as_ref()
        .map(|k| i32::try_from(k.limit).map_err(|_| Error::invalid("key limit out of range")))
        .transpose()
}

/// `None` (a NULL array, which `unnest` pads with NULLs) when every value
/// is NULL: most batches carry no deadlines or trace contexts, and sending
/// a NULL for each cost a twentieth of a bulk enqueue.
fn nulls_as_none<T>(values: Vec<Option<T>>) -> Option<Vec<Option<T>>> {
    values.iter().any(Option::is_some).then_some(values)
}

/// The job that stands in for a unique or debounced `job`, if one does (a
/// debounced twin is pushed later and takes `job`'s payload first). Takes
/// the key's advisory lock for the rest of the transaction `client` must
/// hold, so enqueues of one key look and insert one after another.
async fn stand_in<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    job: &NewJob,
) -> Result<Option<Inserted>> {
    let at = now.map_or_else(Timestamp::now, from_odt);
    let Some(probe) = job.unique_probe(at) else {
        return Ok(None);
    };
    require_transaction(client, "a unique or debounced job").await?;
    query(client, &q.unique_lock, &[&probe.key]).await?;
    let states: Option<Vec<&str>> =
        (!probe.states.is_empty()).then(|| probe.states.iter().map(|s| s.as_str()).collect());
    let found = query_opt(
        client,
        &q.find_unique,
        &[
            &probe.key,
            &probe.created_after.map(to_odt),
            &states,
            &probe.unstarted,
        ],
    )
    .await?;
    let Some(found) = found else {
        return Ok(None);
    };
    let found = job_from_row(&found)?;
    errand_core::check_found_in_batch(job, &found)?;
    let Some(push_to) = probe.push_to else {
        return Ok(Some(Inserted {
            job: found,
            created: false,
        }));
    };
    let pushed = query_opt(
        client,
        &q.debounce,
        &[
            &found.id.as_str(),
            &to_odt(push_to),
            &job.payload.as_str(),
            &now,
        ],
    )
    .await?;
    // A twin that started meanwhile is no longer waiting: the job is
    // enqueued as if none had been found (the key's lock is still held).
    match pushed {
        Some(row) => Ok(Some(Inserted {
            job: job_from_row(&row)?,
            created: false,
        })),
        None => Ok(None),
    }
}

/// Inserts many jobs in one statement; existing ids are returned as they
/// are, with `created: false`. Results follow the input order.
pub(crate) async fn insert_many<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    jobs: &[NewJob],
) -> Result<Vec<Inserted>> {
    let n = jobs.len();
    let (mut ids, mut queues, mut kinds, mut payloads) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut prios, mut maxes, mut ats, mut delays) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let mut max_losts: Vec<i32> = Vec::with_capacity(n);
    let mut give_ups: Vec<Option<i64>> = Vec::with_capacity(n);
    let mut key_names: Vec<Option<&str>> = Vec::with_capacity(n);
    let mut key_limits: Vec<Option<i32>> = Vec::with_capacity(n);
    let mut key_ordered: Vec<bool> = Vec::with_capacity(n);
    let mut deadlines: Vec<Option<OffsetDateTime>> = Vec::with_capacity(n);
    let mut traceparents: Vec<Option<&str>> = Vec::with_capacity(n);
    let mut waiting: Vec<Option<i32>> = Vec::with_capacity(n);
    let mut policies: Vec<Option<&str>> = Vec::with_capacity(n);
    let mut workflows: Vec<Option<&str>> = Vec::with_capacity(n);
    let mut tags: Vec<Option<String>> = Vec::with_capacity(n);
    let mut metas: Vec<Option<String>> = Vec::with_capacity(n);
    let mut unique_keys: Vec<Option<String>> = Vec::with_capacity(n);
    let mut batches: Vec<Option<&str>> = Vec::with_capacity(n);
    if let [job] = jobs {
        job.validate()?;
        if let Some(found) = stand_in(client, q, now, job).await? {
            return Ok(vec![found]);
        }
    }
    errand_core::check_unique_batch(jobs)?;
    crate::batch::join(client, q, now, jobs).await?;
    for job in jobs {
        job.validate()?;
        ids.push(job.id.clone().unwrap_or_else(JobId::generate).to_string());
        queues.push(job.queue.as_str());
        kinds.push(job.kind.as_str());
        payloads.push(job.payload.as_str());
        prios.push(job.priority);
        maxes.push(
            i32::try_from(job.max_attempts)
                .map_err(|_| Error::invalid("max attempts out of range"))?,
        );
        let (at, delay) = match job.schedule {
            Schedule::Now => (None, 0),
            Schedule::After(d) => (None, millis(d)),
            Schedule::At(t) => (Some(to_odt(t)), 0),
        };
        ats.push(at);
        delays.push(delay);
        max_losts.push(
            i32::try_from(job.max_lease_expiries)
                .map_err(|_| Error::invalid("lost-lease budget out of range"))?,
        );
        give_ups.push(job.give_up_after.map(millis));
        key_names.push(job.key.as_ref().map(|k| k.name.as_str()));
        key_limits.push(key_limit(job)?);
        key_ordered.push(job.key.as_ref().is_some_and(|k| k.ordered));
        deadlines.push(job.deadline.map(to_odt));
        traceparents.push(job.traceparent.as_ref().map(TraceParent::as_str));
        let blocked = !job.depends_on.is_empty();
        waiting.push(blocked.then(|| i32::try_from(job.depends_on.len()).unwrap_or(i32::MAX)));
        policies.push(blocked.then(|| job.on_dependency_failure.as_str()));
        workflows.push(job.workflow.as_ref().map(WorkflowId::as_str));
        tags.push(errand_core::tags_to_stored(&job.tags));
        metas.push(errand_core::meta_to_stored(&job.meta));
        unique_keys.push(job.unique_key());
        batches.push(job.batch.as_ref().map(WorkflowId::as_str));
    }
    let statement = if jobs.iter().any(has_side_rows) {
        &q.insert_many_side_rows
    } else {
        &q.insert_many
    };
    let created: Vec<Job> = query(
        client,
        statement,
        &[
            &now,
            &ids,
            &queues,
            &kinds,
            &payloads,
            &prios,
            &maxes,
            &ats,
            &delays,
            &max_losts,
            &give_ups,
            &key_names,
            &key_limits,
            &key_ordered,
            &nulls_as_none(deadlines),
            &nulls_as_none(traceparents),
            &nulls_as_none(waiting),
            &nulls_as_none(policies),
            &nulls_as_none(workflows),
            &nulls_as_none(tags),
            &nulls_as_none(metas),
            &nulls_as_none(unique_keys),
            &nulls_as_none(batches),
        ],
    )
    .await
    .and_then(|rows| jobs_from_rows(&rows))?;
    in_input_order(client, q, &ids, jobs, created).await
}

/// The answer of a bulk insert, in input order: the jobs `created`, and
/// for every other id the stored job it found (which must be in the batch
/// its job names). A duplicate id inside one call is created once, by its
/// first occurrence.
async fn in_input_order<C: Conn>(
    client: &C,
    q: &Queries,
    ids: &[String],
    jobs: &[NewJob],
    created: Vec<Job>,
) -> Result<Vec<Inserted>> {
    let mut by_id: std::collections::HashMap<String, Inserted> = created
        .into_iter()
        .map(|job| (job.id.to_string(), Inserted { job, created: true }))
        .collect();
    let missing: Vec<&str> = ids
        .iter()
        .filter(|id| !by_id.contains_key(*id))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        for row in query(client, &q.get_many, &[&missing]).await? {
            let job = job_from_row(&row)?;
            by_id.insert(
                job.id.to_string(),
                Inserted {
                    job,
                    created: false,
                },
            );
        }
    }
    let mut out = Vec::with_capacity(ids.len());
    let mut seen = std::collections::HashSet::new();
    for (id, job) in ids.iter().zip(jobs) {
        let entry = by_id
            .get(id)
            .cloned()
            .ok_or_else(|| Error::storage(format!("job `{id}` vanished during a bulk insert")))?;
        let created = entry.created && seen.insert(id.as_str());
        if !entry.created {
            errand_core::check_found_in_batch(job, &entry.job)?;
        }
        out.push(Inserted {
            job: entry.job,
            created,
        });
    }
    Ok(out)
}

/// One job by id.
pub(crate) async fn get<C: Conn>(client: &C, q: &Queries, id: &JobId) -> Result<Job> {
    match query_opt(client, &q.get, &[&id.as_str()]).await? {
        Some(row) => job_from_row(&row),
        None => Err(Error::NotFound(id.to_string())),
    }
}

/// Final attempts whose lease expired go to `dead`, and their dependents
/// are released. Runs in a transaction the caller holds.
pub(crate) async fn expire_final<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
) -> Result<Vec<JobId>> {
    let rows = query(client, &q.expire_final, &[&now]).await?;
    let ended = ids_where(&rows, 1)?;
    release_dependents(client, q, now, &ended).await?;
    rows.iter()
        .map(|r| JobId::new(col::<String>(r, 0)?))
        .collect()
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
/// sweep of expired final attempts (when the request reclaims) and the key
/// lock are sent together; then the claim (whose snapshot follows the
/// lock) and `COMMIT`. The claim is `claim.sql`, or the smaller
/// `claim_ready.sql` when it neither reclaims nor holds the key lock. An error
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
        client.prepare_cached(&q.key_lock),
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
    let (_, acked, _, locked, granted) = tokio::try_join!(
        biased;
        async { client.batch_execute(begin).await.map_err(map_err) },
        async {
            if leases.is_empty() {
                Ok(Vec::new())
            } else {
                complete_many(client, q, now, leases, true).await
            }
        },
        async {
            if req.reclaim {
                expire_final(client, q, now).await
            } else {
                Ok(Vec::new())
            }
        },
        async {
            if asked == 0 {
                return Ok(0);
            }
            let rows = query(client, &q.key_lock, &[&now, &queues]).await?;
            rows.first().map_or(Ok(0), |r| col::<i64>(r, 0))
        },
        async {
            match &req.rate {
                Some(rate) => take_tokens(client, q, now, &rate.bucket, rate.limit, asked)
                    .await
                    .map(Some),
                None => Ok(None),
            }
        },
    )?;
    let limit = i64::from(granted.map_or(asked, |g| g.min(asked)));
    let tokens: Vec<LeaseToken> = (0..limit).map(|_| LeaseToken::generate()).collect();
    let token_text: Vec<&str> = tokens.iter().map(LeaseToken::as_str).collect();
    let keyed = locked > 0;
    let params: [Param<'_>; 7] = [
        &now,
        &limit,
        &queues,
        &token_text,
        &lease,
        &keyed,
        &req.reclaim,
    ];
    let claim = async {
        if limit == 0 {
            Ok(Vec::new())
        } else if !keyed && !req.reclaim {
            // Neither expired leases nor keyed jobs to look at: the
            // smaller statement, with the same order and rechecks,
            // resuming where the last claim stopped if it may.
            let (priority, at, id) = match resume {
                Some(r) => (Some(r.priority), Some(r.available_at), Some(r.id.as_str())),
                None => (None, None, None),
            };
            let params: [Param<'_>; 8] = [
                &now,
                &limit,
                &queues,
                &token_text,
                &lease,
                &priority,
                &at,
                &id,
            ];
            query(client, &q.claim_ready, &params).await
        } else {
            query(client, &q.claim, &params).await
        }
    };
    let rows = match (&req.rate, granted) {
        (Some(rate), Some(granted)) => {
            // The tokens to give back are known once the claim has
            // answered: one more round trip, for rate-limited claims only.
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
            rows
        }
        _ => {
            let (rows, committed) = tokio::join!(biased; claim, client.batch_execute("COMMIT"));
            // A failed claim aborts the transaction: COMMIT then rolls back.
            let rows = rows?;
            committed.map_err(map_err)?;
            rows
        }
    };
    let jobs = jobs_from_rows(&rows)?;
    let token_at = rows
        .first()
        .map(|r| JobCols::of(r).map(|c| c.0[LEASE_TOKEN]))
        .transpose()?
        .unwrap_or(0);
    let claimed = rows
        .iter()
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
        .collect::<Result<Vec<_>>>()?;
    // The last ready job taken (not a reclaimed lease), where the next
    // claim may resume; none after a claim that came up short.
    let next = if rows.len() < usize::try_from(limit).unwrap_or(usize::MAX) {
        None
    } else {
        match rows
            .iter()
            .rev()
            .find(|r| r.try_get::<_, i32>("src").is_ok_and(|src| src == 1))
        {
            Some(row) => Some(ResumeKey {
                priority: row.try_get("priority").map_err(map_err)?,
                available_at: row.try_get("available_at").map_err(map_err)?,
                id: row.try_get("id").map_err(map_err)?,
            }),
            None => None,
        }
    };
    Ok((acked, claimed, next))
}

/// Runs a fenced statement whose parameters start with now, id, token.
pub(crate) async fn fenced<C: Conn>(
    client: &C,
    sql: &str,
    now: Option<OffsetDateTime>,
    lease: &Lease,
    extra: &[Param<'_>],
) -> Result<Job> {
    let (id, token) = (lease.id.as_str(), lease.token.as_str());
    let mut params: Vec<Param<'_>> = vec![&now, &id, &token];
    params.extend_from_slice(extra);
    match query_opt(client, sql, &params).await? {
        Some(row) => job_from_row(&row),
        None => Err(Error::LeaseLost {
            id: lease.id.to_string(),
            attempt: lease.attempt,
        }),
    }
}

/// A failure's retry as the fail statements take it: an absolute time or
/// a delay in milliseconds (neither: dead).
pub(crate) fn retry_params(failure: &Failure) -> (Option<OffsetDateTime>, Option<i64>) {
    match failure.retry {
        None => (None, None),
        Some(RetryAt::At(t)) => (Some(to_odt(t)), None),
        Some(RetryAt::After(d)) => (None, Some(millis(d))),
    }
}

/// Records many failures in one statement (`fail_many.sql`); returns, in
/// input order, each failed job or `None` where the lease was lost.
/// Fenced failures of many jobs in one statement. `releasing`: as for
/// [`complete_many`] — in the caller's transaction, the dependents of the
/// jobs it kills are released here; otherwise a job with dependents is
/// left alone (`None`).
pub(crate) async fn fail_many<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    items: &[(Lease, Failure)],
    releasing: bool,
) -> Result<Vec<Option<Job>>> {
    let n = items.len();
    let (mut ids, mut tokens, mut errors, mut classes) = (
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
        Vec::with_capacity(n),
    );
    let (mut ats, mut delays): (Vec<Option<OffsetDateTime>>, Vec<Option<i64>>) =
        (Vec::with_capacity(n), Vec::with_capacity(n));
    for (lease, failure) in items {
        ids.push(lease.id.as_str());
        tokens.push(lease.token.as_str());
        errors.push(failure.error.as_str());
        classes.push(failure.class.as_str());
        let (at, delay) = retry_params(failure);
        ats.push(at);
        delays.push(delay);
    }
    let rows = query(
        client,
        &q.fail_many,
        &[
            &now, &ids, &tokens, &errors, &classes, &ats, &delays, &releasing,
        ],
    )
    .await?;
    let mut out: Vec<Option<Job>> = vec![None; n];
    for row in &rows {
        let at: i64 = row.try_get("failed_n").map_err(map_err)?;
        let slot = usize::try_from(at - 1)
            .ok()
            .and_then(|i| out.get_mut(i))
            .ok_or_else(|| bad_row(format!("a failure at position {at} of {n}")))?;
        *slot = Some(job_from_row(row)?);
    }
    if releasing {
        let ended: Vec<&str> = out
            .iter()
            .flatten()
            .filter(|j| j.has_dependents && j.finished_at.is_some())
            .map(|j| j.id.as_str())
            .collect();
        release_dependents(client, q, now, &ended).await?;
    }
    Ok(out)
}

/// Fenced snooze or release.
pub(crate) async fn snooze<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    lease: &Lease,
    delay: Duration,
    outcome: &str,
) -> Result<Job> {
    let delay = millis(delay);
    fenced(client, &q.snooze, now, lease, &[&delay, &outcome]).await
}

/// Fenced lease extension.
pub(crate) async fn heartbeat<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    lease: &Lease,
    extend: Duration,
    progress: Option<&str>,
) -> Result<Timestamp> {
    let (id, token, ms) = (lease.id.as_str(), lease.token.as_str(), millis(extend));
    match query_opt(client, &q.heartbeat, &[&now, &id, &token, &ms, &progress]).await? {
        Some(row) => Ok(from_odt(row.try_get(0).map_err(map_err)?)),
        None => Err(Error::LeaseLost {
            id: lease.id.to_string(),
            attempt: lease.attempt,
        }),
    }
}

/// A job with its history and audit entries, read in one snapshot.
pub(crate) async fn detail(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    id: &JobId,
) -> Result<JobDetail> {
    let tx = read_snapshot(client).await?;
    let job = get(&tx, q, id).await?;
    let history = query(&tx, &q.history, &[&id.as_str()])
        .await?
        .iter()
        .map(|r| {
            let class: Option<String> = r.try_get("error_class").map_err(map_err)?;
            Ok(AttemptRecord {
                cycle: u32_of(r.try_get("cycle").map_err(map_err)?)?,
                attempt: u32_of(r.try_get("attempt").map_err(map_err)?)?,
                started_at: from_odt(r.try_get("started_at").map_err(map_err)?),
                finished_at: r
                    .try_get::<_, Option<OffsetDateTime>>("finished_at")
                    .map_err(map_err)?
                    .map(from_odt),
                outcome: r.try_get("outcome").map_err(map_err)?,
                error: r.try_get("error").map_err(map_err)?,
                error_class: class
                    .map(|c| c.parse::<ErrorClass>())
                    .transpose()
                    .map_err(bad_row)?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let audit = query(&tx, &q.audit_of, &[&id.as_str()])
        .await?
        .iter()
        .map(|r| {
            let record = AuditRecord {
                at: from_odt(r.try_get("at").map_err(map_err)?),
                action: r.try_get("action").map_err(map_err)?,
                operator: r.try_get("operator").map_err(map_err)?,
                reason: r.try_get("reason").map_err(map_err)?,
                copied_to: None,
                copied_from: None,
            };
            let job_of = |col: &str| -> Result<Option<JobId>> {
                r.try_get::<_, Option<String>>(col)
                    .map_err(map_err)?
                    .map(JobId::new)
                    .transpose()
            };
            Ok(record.with_copy(id, job_of("job_id")?, job_of("copy_id")?))
        })
        .collect::<Result<Vec<_>>>()?;
    let (dependencies, dependents) = dependencies(&tx, q, &job).await?;
    tx.commit().await.map_err(map_err)?;
    Ok(JobDetail {
        job,
        history,
        audit,
        dependencies,
        dependents,
    })
}

/// Jobs matching a filter.
pub(crate) async fn list<C: Conn>(client: &C, q: &Queries, f: &JobFilter) -> Result<Vec<Job>> {
    let args = ListArgs::of(f);
    let page = query(client, args.statement(q), &args.params())
        .await
        .and_then(|rows| jobs_from_rows(&rows))?;
    placed(client, q, f, page).await
}

/// A listing with a byte budget: read through a portal a few rows at a
/// time, so a page of large payloads stops near its budget instead of
/// bringing every row up to the limit into memory.
pub(crate) async fn list_within_budget(
    client: &mut deadpool_postgres::Object,
    q: &Queries,
    f: &JobFilter,
) -> Result<Vec<Job>> {
    let tx = client.transaction().await.map_err(map_err)?;
    let args = ListArgs::of(f);
    let stmt = tx
        .prepare_cached(args.statement(q))
        .await
        .map_err(map_err)?;
    let portal = tx.bind(&stmt, &args.params()).await.map_err(map_err)?;
    let mut budget = f.page_budget();
    let mut page: Vec<Job> = Vec::new();
    // Start small; then ask for as many rows as the budget left would hold
    // at the largest row seen so far (4 to 64).
    let (mut ask, mut largest, mut spent) = (4_usize, 1_usize, 0_usize);
    'read: loop {
        let rows = tx
            .query_portal(&portal, i32::try_from(ask).unwrap_or(64))
            .await
            .map_err(map_err)?;
        let fetched = rows.len();
        for job in jobs_from_rows(&rows)? {
            let bytes = errand_core::listed_bytes(&job);
            (largest, spent) = (largest.max(bytes), spent + bytes);
            let full = budget.spend(&job);
            page.push(job);
            if full {
                break 'read;
            }
        }
        if fetched < ask {
            break;
        }
        let left = f.max_bytes.unwrap_or(0).saturating_sub(spent);
        ask = (left / largest).clamp(4, 64);
    }
    tx.commit().await.map_err(map_err)?;
    placed(client, q, f, page).await
}

/// The listing statement's parameters.
struct ListArgs<'a> {
    state: Option<&'a str>,
    queue: Option<&'a str>,
    kind: Option<&'a str>,
    error: Option<&'a str>,
    since: Option<OffsetDateTime>,
    before: Option<OffsetDateTime>,
    limit: i64,
    after: Option<&'a str>,
    workflow: Option<&'a str>,
    tag: Option<&'a str>,
}

impl<'a> ListArgs<'a> {
    fn of(f: &'a JobFilter) -> Self {
        ListArgs {
            state: f.state.map(JobState::as_str),
            queue: f.queue.as_ref().map(Name::as_str),
            kind: f.kind.as_ref().map(Name::as_str),
            error: f.error_contains.as_deref(),
            since: f.updated_since.map(to_odt),
            before: f.updated_before.map(to_odt),
            limit: i64::from(f.effective_limit()),
            after: f.after.as_ref().map(JobId::as_str),
            workflow: f.workflow.as_ref().map(WorkflowId::as_str),
            tag: f.tag.as_deref(),
        }
    }

    /// The statement: a tag or a workflow is read through its own index
    /// (the tag's statement filters on the workflow too).
    fn statement<'q>(&self, q: &'q Queries) -> &'q str {
        if self.tag.is_some() {
            &q.list_tag
        } else if self.workflow.is_some() {
            &q.list_workflow
        } else {
            &q.list
        }
    }

    fn params(&self) -> Vec<Param<'_>> {
        let mut params: Vec<Param<'_>> = vec![
            &self.state,
            &self.queue,
            &self.kind,
            &self.error,
            &self.since,
            &self.before,
            &self.limit,
            &self.after,
        ];
        if self.tag.is_some() {
            params.push(&self.workflow);
            params.push(&self.tag);
        } else if self.workflow.is_some() {
            params.push(&self.workflow);
        }
        params
    }
}

/// An empty page after a cursor whose job is gone is an error: the page
/// cannot be placed.
async fn placed<C: Conn>(
    client: &C,
    q: &Queries,
    f: &JobFilter,
    page: Vec<Job>,
) -> Result<Vec<Job>> {
    if page.is_empty()
        && let Some(after) = &f.after
    {
        let found = query(client, &q.get, &[&after.as_str()]).await?;
        if found.is_empty() {
            return Err(Error::NotFound(format!(
                "{after} (the job a page starts after no longer exists, so the page cannot be placed; list again from the start)"
            )));
        }
    }
    Ok(page)
}

/// Deletes finished jobs older than `older_than` (at most `limit`).
pub(crate) async fn prune<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    older_than: Duration,
    limit: u32,
) -> Result<u64> {
    let (age, limit) = (millis(older_than), i64::from(limit));
    let row = query_opt(client, &q.prune, &[&now, &age, &limit]).await?;
    let n: i64 = row.as_ref().map_or(Ok(0), |r| col(r, 0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Fenced acknowledgment of many jobs in one statement. `releasing`: the
/// caller runs this in a transaction, and the dependents of the jobs it
/// ends are released here, in it; otherwise a job with dependents is left
/// unacknowledged (`false`) for [`settle_releasing`].
pub(crate) async fn complete_many<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    leases: &[Lease],
    releasing: bool,
) -> Result<Vec<bool>> {
    let ids: Vec<&str> = leases.iter().map(|l| l.id.as_str()).collect();
    let tokens: Vec<&str> = leases.iter().map(|l| l.token.as_str()).collect();
    let rows = query(client, &q.complete_many, &[&now, &ids, &tokens, &releasing]).await?;
    if releasing {
        let ended = ids_where(&rows, 2)?;
        release_with(client, &q.release_done, now, &ended).await?;
    }
    let mut done: std::collections::HashSet<(String, String)> = rows
        .iter()
        .map(|r| Ok((col(r, 0)?, col(r, 1)?)))
        .collect::<Result<_>>()?;
    // A lease listed twice is acknowledged once: its repeats found the job
    // already done, as they would one call after another.
    Ok(leases
        .iter()
        .map(|l| done.remove(&(l.id.to_string(), l.token.as_str().to_owned())))
        .collect())
}

/// Releases the dependents of `ended` (jobs this transaction has just
/// ended, or that a new job depends on and had already ended): release.sql,
/// which must run after the statement that ended them, in the same
/// transaction.
pub(crate) async fn release_dependents<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    ended: &[&str],
) -> Result<()> {
    release_with(client, &q.release, now, ended).await
}

/// Runs a release statement (`release.sql`, or `release_done.sql` for jobs
/// the caller has just acknowledged) for `ended`.
async fn release_with<C: Conn>(
    client: &C,
    sql: &str,
    now: Option<OffsetDateTime>,
    ended: &[&str],
) -> Result<()> {
    if !ended.is_empty() {
        // The statement's estimates are loose (a recursive cascade, rows
        // reached through arrays) while its work is a few key lookups: with
        // JIT on, compiling it for such estimates took 1.5 s of a 2 ms
        // release. Off for the rest of this transaction only.
        // Both sent back to back, in this order: one round trip.
        let params: [Param<'_>; 2] = [&now, &ended];
        tokio::try_join!(
            biased;
            query(client, "SELECT set_config('jit', 'off', true)", &[]),
            query(client, sql, &params),
        )?;
    }
    Ok(())
}

/// A fenced settlement (`sql` takes now, the id, the token, `extra`, then
/// whether the caller releases dependents) run on its own first, the fast
/// way; a job with dependents, which that leaves alone, is settled again by
/// [`settle_releasing`].
pub(crate) async fn settle(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    sql: &str,
    lease: &Lease,
    extra: &[Param<'_>],
) -> Result<Job> {
    match fenced(&*client, sql, now, lease, &with_flag(extra, &false)).await {
        Err(Error::LeaseLost { .. }) => settle_releasing(client, q, now, sql, lease, extra).await,
        other => other,
    }
}

/// A fenced settlement in a transaction that also releases the dependents
/// of the job if it ended: both commit together or neither does.
pub(crate) async fn settle_releasing(
    client: &mut deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    sql: &str,
    lease: &Lease,
    extra: &[Param<'_>],
) -> Result<Job> {
    let tx = client.transaction().await.map_err(map_err)?;
    let job = settled_in(&tx, q, now, sql, lease, extra).await?;
    tx.commit().await.map_err(map_err)?;
    Ok(job)
}

/// A fenced settlement on `client`, inside a transaction the caller holds,
/// releasing the job's dependents if it ended.
pub(crate) async fn settled_in<C: Conn>(
    client: &C,
    q: &Queries,
    now: Option<OffsetDateTime>,
    sql: &str,
    lease: &Lease,
    extra: &[Param<'_>],
) -> Result<Job> {
    let job = fenced(client, sql, now, lease, &with_flag(extra, &true)).await?;
    if job.has_dependents && job.finished_at.is_some() {
        // The statement just ended it: a job it made done releases its
        // dependents the short way (no cascade to run).
        let sql = if job.state == errand_core::JobState::Done {
            &q.release_done
        } else {
            &q.release
        };
        release_with(client, sql, now, &[job.id.as_str()]).await?;
    }
    Ok(job)
}

/// A settlement's parameters: `extra`, then whether the caller releases
/// dependents (the statement's last parameter).
fn with_flag<'a>(extra: &[Param<'a>], releasing: &'a bool) -> Vec<Param<'a>> {
    let mut params = extra.to_vec();
    params.push(releasing);
    params
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
