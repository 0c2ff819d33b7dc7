//! Enqueueing: one job or many in one statement, jobs with dependencies
//! (their edges and the release of those whose dependencies had already
//! ended), and the unique or debounced job that stands in for a new one.

use errand_core::{
    Error, Inserted, Job, JobId, JobState, NewJob, Result, Schedule, Timestamp, TraceParent,
    WorkflowId,
};
use time::OffsetDateTime;

use crate::conn::{Conn, Param, Pipelined, query, query_opt, require_transaction};
use crate::error::map_err;
use crate::queries::Queries;
use crate::reads::get;
use crate::rows::{col, from_odt, job_from_row, jobs_from_rows, millis, to_odt};
use crate::settle::release_dependents;

/// Jobs per statement of a large `insert_many`.
const INSERT_CHUNK: usize = 1_000;

/// Whether `job` has rows of its own beside the job's (tags, metadata
/// entries, a workflow step), which only the [`side_rows`] statement writes.
pub(crate) fn has_side_rows(job: &NewJob) -> bool {
    !job.tags.is_empty() || !job.meta.is_empty() || job.workflow.is_some()
}

/// Whether `job` goes through insert_many.sql even alone: it has side
/// rows, or waits for a signal (columns insert.sql does not carry).
fn needs_bulk_statement(job: &NewJob) -> bool {
    has_side_rows(job) || job.wait.is_some()
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
    if needs_bulk_statement(job) {
        // Its tag or workflow-step rows, or its wait, come with the bulk
        // insert.
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
    if let [job] = jobs {
        job.validate()?;
        if let Some(found) = stand_in(client, q, now, job).await? {
            return Ok(vec![found]);
        }
    }
    errand_core::check_unique_batch(jobs)?;
    crate::batch::join(client, q, now, jobs).await?;
    let columns = InsertColumns::of(jobs)?;
    let statement = bulk_statement(q, jobs);
    let created: Vec<Job> = query(client, statement, &columns.params(&now))
        .await
        .and_then(|rows| jobs_from_rows(&rows))?;
    in_input_order(client, q, &columns.ids, jobs, created).await
}

/// The form of insert_many.sql a batch takes: without the conflict clause
/// when the store generates every id (none can be stored already), and
/// writing tag, metadata and workflow-step rows when a job has any.
fn bulk_statement<'q>(q: &'q Queries, jobs: &[NewJob]) -> &'q str {
    let fresh = jobs.iter().all(|j| j.id.is_none());
    match (fresh, jobs.iter().any(has_side_rows)) {
        (true, false) => &q.insert_fresh,
        (true, true) => &q.insert_fresh_side_rows,
        (false, false) => &q.insert_many,
        (false, true) => &q.insert_many_side_rows,
    }
}

/// The jobs of a bulk insert as insert_many.sql takes them: one array per
/// column. The columns most batches leave empty are sent as one NULL
/// ([`nulls_as_none`]).
struct InsertColumns<'a> {
    ids: Vec<String>,
    queues: Vec<&'a str>,
    kinds: Vec<&'a str>,
    payloads: Vec<&'a str>,
    prios: Vec<i16>,
    maxes: Vec<i32>,
    ats: Vec<Option<OffsetDateTime>>,
    delays: Vec<i64>,
    max_losts: Vec<i32>,
    give_ups: Vec<Option<i64>>,
    key_names: Vec<Option<&'a str>>,
    key_limits: Vec<Option<i32>>,
    key_ordered: Vec<bool>,
    deadlines: Option<Vec<Option<OffsetDateTime>>>,
    traceparents: Option<Vec<Option<&'a str>>>,
    waiting: Option<Vec<Option<i32>>>,
    policies: Option<Vec<Option<&'a str>>>,
    workflows: Option<Vec<Option<&'a str>>>,
    tags: Option<Vec<Option<String>>>,
    metas: Option<Vec<Option<String>>>,
    unique_keys: Option<Vec<Option<String>>>,
    batches: Option<Vec<Option<&'a str>>>,
    await_signals: Option<Vec<Option<&'a str>>>,
    await_fors: Option<Vec<Option<i64>>>,
    await_policies: Option<Vec<Option<&'static str>>>,
}

impl<'a> InsertColumns<'a> {
    /// Validates each job and encodes it into the columns; a job without
    /// an id gets a fresh one.
    fn of(jobs: &'a [NewJob]) -> Result<Self> {
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
        let mut await_signals: Vec<Option<&str>> = Vec::with_capacity(n);
        let mut await_fors: Vec<Option<i64>> = Vec::with_capacity(n);
        let mut await_policies: Vec<Option<&'static str>> = Vec::with_capacity(n);
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
            await_signals.push(job.wait.as_ref().map(|w| w.signal.as_str()));
            await_fors.push(job.wait.as_ref().and_then(|w| w.timeout).map(millis));
            await_policies.push(job.wait.as_ref().map(|w| w.on_timeout.as_str()));
        }
        Ok(InsertColumns {
            ids,
            queues,
            kinds,
            payloads,
            prios,
            maxes,
            ats,
            delays,
            max_losts,
            give_ups,
            key_names,
            key_limits,
            key_ordered,
            deadlines: nulls_as_none(deadlines),
            traceparents: nulls_as_none(traceparents),
            waiting: nulls_as_none(waiting),
            policies: nulls_as_none(policies),
            workflows: nulls_as_none(workflows),
            tags: nulls_as_none(tags),
            metas: nulls_as_none(metas),
            unique_keys: nulls_as_none(unique_keys),
            batches: nulls_as_none(batches),
            await_signals: nulls_as_none(await_signals),
            await_fors: nulls_as_none(await_fors),
            await_policies: nulls_as_none(await_policies),
        })
    }

    /// The statement's parameters: `now`, then the columns.
    fn params<'p>(&'p self, now: &'p Option<OffsetDateTime>) -> [Param<'p>; 26] {
        [
            now,
            &self.ids,
            &self.queues,
            &self.kinds,
            &self.payloads,
            &self.prios,
            &self.maxes,
            &self.ats,
            &self.delays,
            &self.max_losts,
            &self.give_ups,
            &self.key_names,
            &self.key_limits,
            &self.key_ordered,
            &self.deadlines,
            &self.traceparents,
            &self.waiting,
            &self.policies,
            &self.workflows,
            &self.tags,
            &self.metas,
            &self.unique_keys,
            &self.batches,
            &self.await_signals,
            &self.await_fors,
            &self.await_policies,
        ]
    }
}

/// Inserts jobs none of which is linked (no dependencies, uniqueness or
/// batch) on a pooled connection: in one statement, or a large batch in
/// statements of [`INSERT_CHUNK`] jobs pipelined in one transaction.
pub(crate) async fn insert_many_in_chunks(
    client: &deadpool_postgres::Client,
    q: &Queries,
    now: Option<OffsetDateTime>,
    jobs: &[NewJob],
) -> Result<Vec<Inserted>> {
    if jobs.len() <= INSERT_CHUNK {
        return insert_many(client, q, now, jobs).await;
    }
    // A large batch goes as statements of INSERT_CHUNK jobs, sent
    // together in one transaction: PostgreSQL inserts one chunk while
    // this side encodes the next and reads the last one's rows. The
    // statement is prepared first, so the chunks are sent — and run —
    // in input order.
    // (Each chunk picks its form of the statement, `bulk_statement`:
    // every form a chunk may pick is prepared.)
    let mut forms: Vec<&str> = jobs
        .chunks(INSERT_CHUNK)
        .map(|c| bulk_statement(q, c))
        .collect();
    forms.sort_unstable();
    forms.dedup();
    for statement in forms {
        client.prepare_cached(statement).await.map_err(map_err)?;
    }
    let tx = Pipelined::new(client);
    let result = async {
        let inserts = futures_util::future::try_join_all(
            jobs.chunks(INSERT_CHUNK)
                .map(|chunk| insert_many(client, q, now, chunk)),
        );
        let (_, parts) = tokio::try_join!(
            biased;
            async { client.batch_execute("BEGIN").await.map_err(map_err) },
            inserts
        )?;
        client.batch_execute("COMMIT").await.map_err(map_err)?;
        Ok(parts.concat())
    }
    .await;
    tx.end(result).await
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
