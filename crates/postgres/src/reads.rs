//! Reading jobs: one by id, listings (through a portal when a page has a
//! byte budget), a job's detail (history, audit entries, dependencies and
//! dependents, in one snapshot), and the outputs of a job's dependencies.

use errand_core::{
    AttemptRecord, AuditRecord, Dependency, Error, ErrorClass, Job, JobDetail, JobFilter, JobId,
    JobState, Meta, Name, Payload, ReceivedSignal, Result, SignalRecord, WorkflowId,
};
use time::OffsetDateTime;
use tokio_postgres::Row;

use crate::conn::{Conn, Param, query, query_opt, read_snapshot};
use crate::error::map_err;
use crate::queries::Queries;
use crate::rows::{bad_row, col, from_odt, job_from_row, jobs_from_rows, to_odt, u32_of};

/// One job by id.
pub(crate) async fn get<C: Conn>(client: &C, q: &Queries, id: &JobId) -> Result<Job> {
    match query_opt(client, &q.get, &[&id.as_str()]).await? {
        Some(row) => job_from_row(&row),
        None => Err(Error::NotFound(id.to_string())),
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
    let signals = signals_of(&tx, q, id).await?;
    tx.commit().await.map_err(map_err)?;
    Ok(JobDetail {
        job,
        history,
        audit,
        dependencies,
        dependents,
        signals,
    })
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

/// Jobs matching a filter.
pub(crate) async fn list<C: Conn>(
    client: &C,
    q: &Queries,
    f: &JobFilter,
    meta: &Meta,
) -> Result<Vec<Job>> {
    let args = ListArgs::of(f, meta);
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
    meta: &Meta,
) -> Result<Vec<Job>> {
    let tx = client.transaction().await.map_err(map_err)?;
    let args = ListArgs::of(f, meta);
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
    /// The first metadata entry searched, read through errand_job_meta
    /// (not with a tag or a workflow, which have their own index).
    meta_key: Option<&'a str>,
    meta_value: Option<&'a str>,
}

impl<'a> ListArgs<'a> {
    fn of(f: &'a JobFilter, meta: &'a Meta) -> Self {
        let entry = meta
            .iter()
            .next()
            .filter(|_| f.tag.is_none() && f.workflow.is_none());
        ListArgs {
            meta_key: entry.map(|(k, _)| k.as_str()),
            meta_value: entry.map(|(_, v)| v.as_str()),
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

    /// The statement: a tag, a workflow or searched metadata is read
    /// through its own index (the tag's statement filters on the workflow
    /// too).
    fn statement<'q>(&self, q: &'q Queries) -> &'q str {
        if self.tag.is_some() {
            &q.list_tag
        } else if self.workflow.is_some() {
            &q.list_workflow
        } else if self.meta_key.is_some() {
            &q.list_meta
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
        } else if self.meta_key.is_some() {
            params.push(&self.meta_key);
            params.push(&self.meta_value);
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

/// The signal that ended job `id`'s latest wait.
pub(crate) async fn received_signal<C: Conn>(
    client: &C,
    q: &Queries,
    id: &JobId,
) -> Result<Option<ReceivedSignal>> {
    let Some(row) = query_opt(client, &q.received_signal, &[&id.as_str()]).await? else {
        return Ok(None);
    };
    let payload: Option<crate::rows::JsonText> = col(&row, 1)?;
    Ok(Some(ReceivedSignal {
        name: Name::parse("signal", col::<String>(&row, 0)?).map_err(bad_row)?,
        payload: payload.map(|p| Payload::from_stored(p.0)),
        sent_at: from_odt(col(&row, 2)?),
    }))
}

/// The signals sent to job `id`, oldest first.
pub(crate) async fn signals_of<C: Conn>(
    client: &C,
    q: &Queries,
    id: &JobId,
) -> Result<Vec<SignalRecord>> {
    query(client, &q.signals_of, &[&id.as_str()])
        .await?
        .iter()
        .map(|r| {
            Ok(SignalRecord {
                seq: col(r, 0)?,
                name: Name::parse("signal", col::<String>(r, 1)?).map_err(bad_row)?,
                sent_at: from_odt(col(r, 2)?),
                delivered_at: col::<Option<OffsetDateTime>>(r, 3)?.map(from_odt),
                payload_bytes: u64::try_from(col::<i64>(r, 4)?).unwrap_or(0),
            })
        })
        .collect()
}
