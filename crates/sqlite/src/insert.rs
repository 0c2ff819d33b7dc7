//! Enqueue: one job or many inserted on a connection — the writer's
//! transaction or an application's own — with the unique or debounced job
//! that stands in for one, its tags, the batch it joins and the
//! dependencies it waits for.

use std::collections::{HashMap, HashSet};

use errand_core::{
    Error, Inserted, Job, JobId, JobState, NewJob, Result, Schedule, Timestamp, TraceParent,
    WorkflowId,
};
use rusqlite::{Connection, OptionalExtension, named_params};

use crate::conn::{json_list, map_err};
use crate::release::{Release, release_dependents};
use crate::rows::{get, job_from_row};

const INSERT: &str = include_str!("../queries/insert.sql");
const INSERT_MANY: &str = include_str!("../queries/insert_many.sql");
const INSERT_TAGS: &str = include_str!("../queries/insert_tags.sql");
const INSERT_META: &str = include_str!("../queries/insert_meta.sql");
const FIND_UNIQUE: &str = include_str!("../queries/find_unique.sql");
const DEBOUNCE: &str = include_str!("../queries/debounce.sql");
const DEPENDENCY_STATES: &str = include_str!("../queries/dependency_states.sql");
const LINK_DEPENDENCIES: &str = include_str!("../queries/link_dependencies.sql");
const MARK_DEPENDED_ON: &str = include_str!("../queries/mark_depended_on.sql");
const MET_AT_INSERT: &str = include_str!("../queries/met_at_insert.sql");

fn due_time(schedule: Schedule, now: Timestamp) -> Timestamp {
    match schedule {
        Schedule::Now => now,
        Schedule::After(d) => now.plus(d),
        Schedule::At(t) => t,
    }
}

/// Inserts `job` on `conn` (inside whatever transaction the caller has
/// open), or returns the existing job with the same id.
pub fn insert(conn: &Connection, job: &NewJob, now: Timestamp) -> Result<Inserted> {
    // These take more than one statement: insert_many runs them under a
    // savepoint of its own (a transaction when the caller has none).
    if !job.depends_on.is_empty()
        || !job.tags.is_empty()
        || !job.meta.is_empty()
        || job.batch.is_some()
        || job.unique.is_some()
        || job.wait.is_some()
    {
        return insert_many(conn, std::slice::from_ref(job), now)?
            .pop()
            .ok_or_else(|| Error::storage("inserting one job answered with none"));
    }
    job.validate()?;
    let id = job.id.clone().unwrap_or_else(JobId::generate);
    let inserted = conn
        .prepare_cached(INSERT)
        .map_err(map_err)?
        .query_row(
            named_params! {
                ":id": id.as_str(),
                ":queue": job.queue.as_str(),
                ":kind": job.kind.as_str(),
                ":payload": job.payload.as_str(),
                ":priority": job.priority,
                ":max_attempts": job.max_attempts,
                ":max_lease_expiries": job.max_lease_expiries,
                ":give_up_at": job.give_up_after.map(|d| now.plus(d).as_millis()),
                ":available_at": due_time(job.schedule, now).as_millis(),
                ":now": now.as_millis(),
                ":key_name": job.key.as_ref().map(|k| k.name.as_str()),
                ":key_limit": job.key.as_ref().map(|k| k.limit),
                ":key_ordered": job.key.as_ref().is_some_and(|k| k.ordered),
                ":deadline": job.deadline.map(Timestamp::as_millis),
                ":traceparent": job.traceparent.as_ref().map(TraceParent::as_str),
                ":workflow": job.workflow.as_ref().map(WorkflowId::as_str),
                ":meta": errand_core::meta_to_stored(&job.meta),
                ":unique_key": job.unique_key(),
            },
            job_from_row,
        )
        .optional()
        .map_err(map_err)?;
    match inserted {
        Some(job) => Ok(Inserted { job, created: true }),
        None => Ok(Inserted {
            job: get(conn, &id)?,
            created: false,
        }),
    }
}

/// The job that stands in for a unique or debounced `job`, if one does
/// (a debounced twin is pushed later and takes `job`'s payload first).
/// The caller holds the write transaction, so no other enqueue of the key
/// runs between this look and the insert that follows it.
fn stand_in(conn: &Connection, job: &NewJob, now: Timestamp) -> Result<Option<Inserted>> {
    let Some(probe) = job.unique_probe(now) else {
        return Ok(None);
    };
    let states = if probe.states.is_empty() {
        None
    } else {
        Some(json_list(
            &probe.states.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
        )?)
    };
    let found = conn
        .prepare_cached(FIND_UNIQUE)
        .map_err(map_err)?
        .query_row(
            named_params! {
                ":key": probe.key,
                ":after": probe.created_after.map(Timestamp::as_millis),
                ":states": states,
                ":unstarted": probe.unstarted,
            },
            job_from_row,
        )
        .optional()
        .map_err(map_err)?;
    let Some(found) = found else {
        return Ok(None);
    };
    errand_core::check_found_in_batch(job, &found)?;
    let Some(at) = probe.push_to else {
        return Ok(Some(Inserted {
            job: found,
            created: false,
        }));
    };
    let pushed = conn
        .prepare_cached(DEBOUNCE)
        .map_err(map_err)?
        .query_row(
            named_params! {
                ":id": found.id.as_str(),
                ":at": at.as_millis(),
                ":payload": job.payload.as_str(),
                ":now": now.as_millis(),
            },
            job_from_row,
        )
        .optional()
        .map_err(map_err)?;
    Ok(pushed.map(|job| Inserted {
        job,
        created: false,
    }))
}

/// Jobs per multi-row insert statement (25 parameters each, far under
/// SQLite's 32,766).
const INSERT_CHUNK: usize = 256;

/// Parameters per job in a multi-row insert.
const PER_JOB: usize = 25;

/// The multi-row insert for `rows` jobs: `?1` is the time, then
/// [`PER_JOB`] parameters per job (see insert_many.sql).
fn insert_many_sql(rows: usize) -> String {
    let mut values = Vec::with_capacity(rows);
    for r in 0..rows {
        let p = |k: usize| format!("?{}", 2 + r * PER_JOB + k);
        values.push(format!(
            "({}, {}, {}, {}, {}, {}, 0, {}, 0, {}, {}, {}, ?1, ?1, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {}, {})",
            p(0),
            p(1),
            p(2),
            p(14),
            p(3),
            p(4),
            p(5),
            p(6),
            p(7),
            p(8),
            p(9),
            p(10),
            p(11),
            p(12),
            p(13),
            p(15),
            p(16),
            p(17),
            p(18),
            p(19),
            p(20),
            p(21),
            p(22),
            p(23),
            p(24)
        ));
    }
    INSERT_MANY.replace("__VALUES__", &values.join(",\n    "))
}

/// Inserts `jobs` on `conn` (inside whatever transaction the caller has
/// open) with one statement per 256 jobs, each like [`insert`]: in input
/// order, for each job the new row, or the existing one with its id (also
/// when the batch repeats an id: the first occurrence is created).
pub fn insert_many(conn: &Connection, jobs: &[NewJob], now: Timestamp) -> Result<Vec<Inserted>> {
    // Under a savepoint of its own, so the call is all or nothing however
    // many statements it takes — in the caller's transaction, or in one of
    // its own taken for writing at once (a deferred one that read first,
    // as a unique look-up does, could not then write if another connection
    // wrote meanwhile, and would fail busy at once).
    let own = conn.is_autocommit();
    let (begin, commit, rollback) = if own {
        ("BEGIN IMMEDIATE", "COMMIT", "ROLLBACK")
    } else {
        (
            "SAVEPOINT errand_insert_many",
            "RELEASE errand_insert_many",
            "ROLLBACK TO errand_insert_many; RELEASE errand_insert_many",
        )
    };
    conn.execute_batch(begin).map_err(map_err)?;
    let result = insert_many_statements(conn, jobs, now);
    let end = if result.is_ok() { commit } else { rollback };
    conn.execute_batch(end).map_err(map_err)?;
    result
}

/// Runs the statements of [`insert_many`] inside its savepoint or transaction.
fn insert_many_statements(
    conn: &Connection,
    jobs: &[NewJob],
    now: Timestamp,
) -> Result<Vec<Inserted>> {
    let mut ids = Vec::with_capacity(jobs.len());
    for job in jobs {
        job.validate()?;
        ids.push(job.id.clone().unwrap_or_else(JobId::generate));
    }
    if let [job] = jobs
        && let Some(found) = stand_in(conn, job, now)?
    {
        return Ok(vec![found]);
    }
    errand_core::check_unique_batch(jobs)?;
    crate::batch::join(conn, jobs, now)?;
    errand_core::check_dependencies(jobs)?;
    let created = insert_rows(conn, jobs, &ids, now)?;
    // A repeated id is created from its first occurrence: only that one's
    // dependencies and tags are its own.
    let mut seen: HashSet<&str> = HashSet::with_capacity(ids.len());
    let made: Vec<bool> = ids
        .iter()
        .map(|id| seen.insert(id.as_str()) && created.contains(id.as_str()))
        .collect();
    let edges: Vec<(&str, &[JobId])> = jobs
        .iter()
        .zip(&ids)
        .zip(&made)
        .filter(|((job, _), made)| **made && !job.depends_on.is_empty())
        .map(|((job, id), _)| (id.as_str(), job.depends_on.as_slice()))
        .collect();
    if !edges.is_empty() {
        link_dependencies(conn, &edges, now)?;
    }
    insert_tags(conn, jobs, &ids, &made, now)?;
    insert_meta(conn, jobs, &ids, &made, now)?;
    in_input_order(conn, jobs, ids, created, now)
}

/// Writes the rows of `jobs` in statements of [`INSERT_CHUNK`] jobs; answers the ids created.
fn insert_rows(
    conn: &Connection,
    jobs: &[NewJob],
    ids: &[JobId],
    now: Timestamp,
) -> Result<HashSet<String>> {
    let full_chunk = FULL_CHUNK_SQL.get_or_init(|| insert_many_sql(INSERT_CHUNK));
    let mut created: HashSet<String> = HashSet::with_capacity(jobs.len());
    // Rows are written depth by depth when the jobs depend on each other
    // (a row stays where it is written, and a graph runs wave by wave);
    // everything else below keeps the order given.
    let order: Vec<usize> =
        errand_core::storage_order(ids, jobs).unwrap_or_else(|| (0..jobs.len()).collect());
    for chunk in order.chunks(INSERT_CHUNK) {
        let sql = if chunk.len() == INSERT_CHUNK {
            std::borrow::Cow::Borrowed(full_chunk.as_str())
        } else {
            std::borrow::Cow::Owned(insert_many_sql(chunk.len()))
        };
        let mut stmt = conn.prepare_cached(&sql).map_err(map_err)?;
        stmt.raw_bind_parameter(1, now.as_millis())
            .map_err(map_err)?;
        for (r, &i) in chunk.iter().enumerate() {
            bind_row(&mut stmt, r, &jobs[i], &ids[i], now)?;
        }
        let mut rows = stmt.raw_query();
        while let Some(row) = rows.next().map_err(map_err)? {
            created.insert(row.get(0).map_err(map_err)?);
        }
    }
    Ok(created)
}

/// Binds the [`PER_JOB`] parameters of `job`, stored as `id`, as row `r` of a multi-row insert.
fn bind_row(
    stmt: &mut rusqlite::CachedStatement<'_>,
    r: usize,
    job: &NewJob,
    id: &JobId,
    now: Timestamp,
) -> Result<()> {
    let at = |k: usize| 2 + r * PER_JOB + k;
    let key = job.key.as_ref();
    let mut bind = |k: usize, v: &dyn rusqlite::ToSql| -> Result<()> {
        stmt.raw_bind_parameter(at(k), v).map_err(map_err)
    };
    bind(0, &id.as_str())?;
    bind(1, &job.queue.as_str())?;
    bind(2, &job.kind.as_str())?;
    bind(3, &job.payload.as_str())?;
    bind(4, &job.priority)?;
    bind(5, &job.max_attempts)?;
    bind(6, &job.max_lease_expiries)?;
    bind(7, &job.give_up_after.map(|d| now.plus(d).as_millis()))?;
    bind(8, &due_time(job.schedule, now).as_millis())?;
    bind(9, &key.map(|k| k.name.as_str()))?;
    bind(10, &key.map(|k| k.limit))?;
    bind(11, &key.is_some_and(|k| k.ordered))?;
    bind(12, &job.deadline.map(Timestamp::as_millis))?;
    bind(13, &job.traceparent.as_ref().map(TraceParent::as_str))?;
    let blocked = !job.depends_on.is_empty();
    let state = if blocked {
        "blocked"
    } else if job.wait.is_some() {
        "waiting"
    } else {
        "ready"
    };
    bind(14, &state)?;
    bind(15, &u32::try_from(job.depends_on.len()).unwrap_or(u32::MAX))?;
    bind(16, &blocked.then(|| job.on_dependency_failure.as_str()))?;
    bind(17, &job.workflow.as_ref().map(WorkflowId::as_str))?;
    bind(18, &errand_core::tags_to_stored(&job.tags))?;
    bind(19, &errand_core::meta_to_stored(&job.meta))?;
    bind(20, &job.unique_key())?;
    bind(21, &job.batch.as_ref().map(WorkflowId::as_str))?;
    let wait = job.wait.as_ref();
    bind(22, &wait.map(|w| w.signal.as_str()))?;
    bind(
        23,
        &wait
            .and_then(|w| w.timeout)
            .map(|d| now.plus(d).as_millis()),
    )?;
    bind(24, &wait.map(|w| w.on_timeout.as_str()))?;
    Ok(())
}

/// The tag rows of the jobs just made (`made`, by position).
fn insert_tags(
    conn: &Connection,
    jobs: &[NewJob],
    ids: &[JobId],
    made: &[bool],
    now: Timestamp,
) -> Result<()> {
    let rows: Vec<(&str, &str)> = made_jobs(jobs, ids, made)
        .flat_map(|(job, id)| job.tags.iter().map(move |t| (id.as_str(), t.as_str())))
        .collect();
    insert_side_rows(conn, INSERT_TAGS, "tags", &rows, now)
}

/// The metadata rows of the jobs just made (`made`, by position).
fn insert_meta(
    conn: &Connection,
    jobs: &[NewJob],
    ids: &[JobId],
    made: &[bool],
    now: Timestamp,
) -> Result<()> {
    let rows: Vec<(&str, &str, &str)> = made_jobs(jobs, ids, made)
        .flat_map(|(job, id)| {
            job.meta
                .iter()
                .map(move |(k, v)| (id.as_str(), k.as_str(), v.as_str()))
        })
        .collect();
    insert_side_rows(conn, INSERT_META, "metadata", &rows, now)
}

/// The jobs of an insert that were made, with their ids.
fn made_jobs<'a>(
    jobs: &'a [NewJob],
    ids: &'a [JobId],
    made: &'a [bool],
) -> impl Iterator<Item = (&'a NewJob, &'a JobId)> {
    jobs.iter()
        .zip(ids)
        .zip(made)
        .filter(|(_, made)| **made)
        .map(|(pair, _)| pair)
}

/// Writes a job's side rows (tags, metadata entries): `sql` takes them as
/// one JSON array (`:rows`) stamped with the jobs' creation time (`:now`).
fn insert_side_rows<T: serde::Serialize>(
    conn: &Connection,
    sql: &str,
    what: &str,
    rows: &[T],
    now: Timestamp,
) -> Result<()> {
    if rows.is_empty() {
        return Ok(());
    }
    let rows =
        serde_json::to_string(rows).map_err(|e| Error::storage(format!("encoding {what}: {e}")))?;
    conn.prepare_cached(sql)
        .map_err(map_err)?
        .execute(named_params! {":rows": rows, ":now": now.as_millis()})
        .map_err(map_err)?;
    Ok(())
}

/// The answer of an insert, in input order: each job `created` as it was
/// written (read back when its dependencies may have changed it), and for
/// every other id the stored job it found (which must be in the batch its
/// job names).
fn in_input_order(
    conn: &Connection,
    jobs: &[NewJob],
    ids: Vec<JobId>,
    mut created: HashSet<String>,
    now: Timestamp,
) -> Result<Vec<Inserted>> {
    jobs.iter()
        .zip(ids)
        .map(|(job, id)| {
            if job.depends_on.is_empty() && created.remove(id.as_str()) {
                Ok(Inserted {
                    job: new_row(job, id, now),
                    created: true,
                })
            } else {
                let created = created.remove(id.as_str());
                let stored = get(conn, &id)?;
                if !created {
                    errand_core::check_found_in_batch(job, &stored)?;
                }
                Ok(Inserted {
                    job: stored,
                    created,
                })
            }
        })
        .collect()
}

/// Records the dependencies of jobs just inserted `blocked` (`edges`: each
/// new job with the jobs it depends on). Every dependency must be stored
/// (it may have been inserted by the same call); it is marked as having
/// dependents, and the dependencies that have already ended release the
/// new jobs at once, by the same rule as a settlement.
fn link_dependencies(conn: &Connection, edges: &[(&str, &[JobId])], now: Timestamp) -> Result<()> {
    let wanted = errand_core::wanted_dependencies(edges);
    let list = json_list(&wanted)?;
    let mut states: HashMap<String, JobState> = HashMap::with_capacity(wanted.len());
    {
        let mut stmt = conn.prepare_cached(DEPENDENCY_STATES).map_err(map_err)?;
        let rows = stmt
            .query_map(named_params! {":ids": list}, |r| {
                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
            })
            .map_err(map_err)?;
        for row in rows {
            let (id, state) = row.map_err(map_err)?;
            states.insert(id, state.parse::<JobState>()?);
        }
    }
    let plan = errand_core::plan_links(edges, &states)?;
    let rows: Vec<(&str, &str, u32, bool)> = plan
        .edges
        .iter()
        .map(|e| (e.job, e.depends_on, e.position, e.met))
        .collect();
    let rows = serde_json::to_string(&rows)
        .map_err(|e| Error::storage(format!("encoding dependencies: {e}")))?;
    conn.prepare_cached(LINK_DEPENDENCIES)
        .map_err(map_err)?
        .execute(named_params! {":edges": rows})
        .map_err(map_err)?;
    conn.prepare_cached(MARK_DEPENDED_ON)
        .map_err(map_err)?
        .execute(named_params! {":ids": list})
        .map_err(map_err)?;
    if !plan.met_at_insert.is_empty() {
        let met = serde_json::to_string(&plan.met_at_insert)
            .map_err(|e| Error::storage(format!("encoding dependencies: {e}")))?;
        conn.prepare_cached(MET_AT_INSERT)
            .map_err(map_err)?
            .execute(named_params! {":met": met})
            .map_err(map_err)?;
    }
    if !plan.failed.is_empty() {
        release_dependents(conn, &plan.failed, Release::Failed, now)?;
    }
    Ok(())
}

static FULL_CHUNK_SQL: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The row insert_many.sql writes for `job`: every column is known, so it
/// is built here rather than read back (reading 5,000 payloads back was a
/// tenth of a bulk insert). The conformance suite compares it with the
/// stored row.
fn new_row(job: &NewJob, id: JobId, now: Timestamp) -> Job {
    Job {
        id,
        queue: job.queue.clone(),
        kind: job.kind.clone(),
        state: if job.wait.is_some() {
            JobState::Waiting
        } else {
            JobState::Ready
        },
        payload: job.payload.clone(),
        priority: job.priority,
        attempts: 0,
        max_attempts: job.max_attempts,
        replays: 0,
        lease_expiries: 0,
        max_lease_expiries: job.max_lease_expiries,
        give_up_at: job.give_up_after.map(|d| now.plus(d)),
        available_at: due_time(job.schedule, now),
        created_at: now,
        updated_at: now,
        lease_until: None,
        attempt_started_at: None,
        last_error: None,
        last_error_class: None,
        finished_at: None,
        key: job.key.clone(),
        deadline: job.deadline,
        traceparent: job.traceparent.clone(),
        waiting_on: 0,
        on_dependency_failure: None,
        has_dependents: false,
        output: None,
        progress: None,
        workflow: job.workflow.clone(),
        tags: job.tags.clone(),
        meta: job.meta.clone(),
        unique_key: job.unique_key(),
        batch: job.batch.clone(),
        awaiting: job.wait.as_ref().map(|w| errand_core::Awaiting {
            signal: w.signal.clone(),
            until: w.timeout.map(|d| now.plus(d)),
            on_timeout: w.on_timeout,
        }),
        resumed_by: None,
        added_by: None,
    }
}
