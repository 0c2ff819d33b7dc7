//! Reads of jobs: one job's history, audit entries and dependencies, the
//! outputs of the jobs a job depends on, and the listing.

use std::sync::LazyLock;

use errand_core::{
    AttemptRecord, AuditRecord, Dependency, Error, Job, JobDetail, JobFilter, JobId, JobState,
    Meta, Name, Payload, Result, Timestamp, WorkflowId,
};
use rusqlite::{Connection, named_params};

use crate::conn::{in_one_read, map_err};
use crate::rows::{class_col, get, job_from_row, opt_ts_col, ts_col, u32_col};

const DEPENDENCY_OUTPUTS: &str = include_str!("../queries/dependency_outputs.sql");
const DEPENDENCY_OUTPUTS_AFTER: &str = include_str!("../queries/dependency_outputs_after.sql");
const HISTORY: &str = include_str!("../queries/history.sql");
const AUDIT_OF: &str = include_str!("../queries/audit_of.sql");
const LIST: &str = include_str!("../queries/list.sql");
const LIST_MEMBER: &str = include_str!("../queries/list_member.sql");
const LIST_WORKFLOW: &str = include_str!("../queries/list_workflow.sql");
const LIST_TAG: &str = include_str!("../queries/list_tag.sql");
const LIST_META: &str = include_str!("../queries/list_meta.sql");
const DEPENDENCIES_OF: &str = include_str!("../queries/dependencies_of.sql");
const DEPENDENTS_OF: &str = include_str!("../queries/dependents_of.sql");

/// A job's dependencies, in the order they were named, and the first of
/// its dependents (blocked ones first, then by id).
pub(crate) fn dependencies(
    conn: &Connection,
    job: &Job,
) -> Result<(Vec<Dependency>, Vec<Dependency>)> {
    let read = |sql: &str, limit: i64| -> Result<Vec<Dependency>> {
        conn.prepare_cached(sql)
            .map_err(map_err)?
            .query_map(
                named_params! {":id": job.id.as_str(), ":limit": limit},
                |r| {
                    let id: String = r.get(0)?;
                    let state: Option<String> = r.get(1)?;
                    Ok((id, state, r.get::<_, bool>(2)?))
                },
            )
            .map_err(map_err)?
            .map(|row| {
                let (id, state, met) = row.map_err(map_err)?;
                Ok(Dependency {
                    id: JobId::new(id)?,
                    state: state.map(|s| s.parse()).transpose()?,
                    met,
                })
            })
            .collect()
    };
    let dependencies = if job.on_dependency_failure.is_some() {
        read(DEPENDENCIES_OF, -1)?
    } else {
        Vec::new()
    };
    let dependents = if job.has_dependents {
        read(
            DEPENDENTS_OF,
            i64::try_from(JobDetail::DEPENDENTS_SHOWN).unwrap_or(100),
        )?
    } else {
        Vec::new()
    };
    Ok((dependencies, dependents))
}

/// The outputs of the jobs `id` depends on, in the order they were named.
pub(crate) fn dependency_outputs(
    conn: &Connection,
    id: &JobId,
) -> Result<Vec<(JobId, Option<Payload>)>> {
    outputs(conn, DEPENDENCY_OUTPUTS, named_params! {":id": id.as_str()})
}

/// One page of the outputs of the jobs `id` depends on, by dependency id:
/// those after `after`, at most `limit`.
pub(crate) fn dependency_outputs_after(
    conn: &Connection,
    id: &JobId,
    after: Option<&JobId>,
    limit: u32,
) -> Result<Vec<(JobId, Option<Payload>)>> {
    let after = after.map_or("", JobId::as_str);
    outputs(
        conn,
        DEPENDENCY_OUTPUTS_AFTER,
        named_params! {":id": id.as_str(), ":after": after, ":limit": limit},
    )
}

/// The (dependency, output) rows `sql` selects with `params`.
fn outputs(
    conn: &Connection,
    sql: &str,
    params: &[(&str, &dyn rusqlite::ToSql)],
) -> Result<Vec<(JobId, Option<Payload>)>> {
    let mut stmt = conn.prepare_cached(sql).map_err(map_err)?;
    let rows = stmt
        .query_map(params, |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
        })
        .map_err(map_err)?;
    rows.map(|row| {
        let (dep, output) = row.map_err(map_err)?;
        Ok((JobId::new(dep)?, output.map(Payload::from_stored)))
    })
    .collect()
}

/// A job's attempt history and audit entries.
pub(crate) fn history(
    conn: &Connection,
    id: &JobId,
) -> Result<(Vec<AttemptRecord>, Vec<AuditRecord>)> {
    let attempts = conn
        .prepare_cached(HISTORY)
        .map_err(map_err)?
        .query_map(named_params! {":id": id.as_str()}, |r| {
            Ok(AttemptRecord {
                cycle: u32_col(r, "cycle")?,
                attempt: u32_col(r, "attempt")?,
                started_at: ts_col(r, "started_at")?,
                finished_at: opt_ts_col(r, "finished_at")?,
                outcome: r.get("outcome")?,
                error: r.get("error")?,
                error_class: class_col(r, "error_class")?,
            })
        })
        .map_err(map_err)?
        .collect::<rusqlite::Result<Vec<_>>>()
        .map_err(map_err)?;
    let audit = conn
        .prepare_cached(AUDIT_OF)
        .map_err(map_err)?
        .query_map(named_params! {":id": id.as_str()}, |r| {
            let record = AuditRecord {
                at: ts_col(r, "at")?,
                action: r.get("action")?,
                operator: r.get("operator")?,
                reason: r.get("reason")?,
                copied_to: None,
                copied_from: None,
            };
            let job: Option<String> = r.get("job_id")?;
            let copy: Option<String> = r.get("copy_id")?;
            Ok((record, job, copy))
        })
        .map_err(map_err)?
        .map(|row| {
            let (record, job, copy) = row.map_err(map_err)?;
            let job = job.map(JobId::new).transpose()?;
            let copy = copy.map(JobId::new).transpose()?;
            Ok(record.with_copy(id, job, copy))
        })
        .collect::<Result<Vec<_>>>()?;
    Ok((attempts, audit))
}

/// A job with its attempt history, audit entries, dependencies and first
/// dependents, read in one transaction so that they agree.
pub(crate) fn detail(conn: &Connection, id: &JobId) -> Result<JobDetail> {
    in_one_read(conn, |c| {
        get(c, id).and_then(|job| {
            let (history, audit) = history(c, id)?;
            let (dependencies, dependents) = dependencies(c, &job)?;
            let signals = crate::signals::signals_of(c, id)?;
            Ok(JobDetail {
                signals,
                job,
                history,
                audit,
                dependencies,
                dependents,
            })
        })
    })
}

/// The listing without a tag or workflow filter: list.sql with its members
/// (list_member.sql), two per state read through the listing index (the
/// rest of the cursor's creation instant, then the later instants) and one
/// for running jobs.
pub(crate) static LIST_STATEMENT: LazyLock<String> = LazyLock::new(|| {
    const SAME_INSTANT: &str =
        "created_at = (SELECT created_at FROM cursor) AND rowid > (SELECT seq FROM cursor)";
    const LATER: &str = "created_at > (SELECT created_at FROM cursor)";
    const AFTER_CURSOR: &str = "(created_at > (SELECT created_at FROM cursor) \
        OR (created_at = (SELECT created_at FROM cursor) AND rowid > (SELECT seq FROM cursor)))";
    let template: Vec<&str> = LIST_MEMBER
        .lines()
        .filter(|line| !line.starts_with("--"))
        .collect();
    let template = template.join("\n");
    let member = |state: JobState, source: &str, partial: &str, range: &str| {
        template
            .replace("$state", state.as_str())
            .replace("$source", source)
            .replace("$partial", partial)
            .replace("$range", range)
    };
    let mut members = Vec::new();
    for state in JobState::ALL {
        if state == JobState::Running {
            // Running jobs are read through the lease index, which holds
            // only them (without it, SQLite reads the rest of an instant
            // by rowid, through the table), all of them: one member.
            let source = "errand_jobs INDEXED BY errand_jobs_leases";
            members.push(member(state, source, "", AFTER_CURSOR));
        } else {
            // Every other state is read through the partial listing index,
            // whose condition the member must state to use it.
            for range in [SAME_INSTANT, LATER] {
                members.push(member(
                    state,
                    "errand_jobs",
                    " AND state <> 'running'",
                    range,
                ));
            }
        }
    }
    LIST.replace("$members", &members.join("\n  UNION ALL\n  "))
});

/// Jobs matching `filter`; with `meta` (a search's metadata terms), and
/// neither a tag nor a workflow, only jobs carrying its first entry.
pub(crate) fn list(conn: &Connection, filter: &JobFilter, meta: &Meta) -> Result<Vec<Job>> {
    let state = filter.state.map(JobState::as_str);
    let queue = filter.queue.as_ref().map(Name::as_str);
    let kind = filter.kind.as_ref().map(Name::as_str);
    let error = filter.error_contains.as_deref();
    let since = filter.updated_since.map(Timestamp::as_millis);
    let before = filter.updated_before.map(Timestamp::as_millis);
    let limit = filter.effective_limit();
    let after = filter.after.as_ref().map(JobId::as_str);
    let workflow = filter.workflow.as_ref().map(WorkflowId::as_str);
    let tag = filter.tag.as_deref();
    let mut params: Vec<(&str, &dyn rusqlite::ToSql)> = vec![
        (":state", &state),
        (":queue", &queue),
        (":kind", &kind),
        (":error", &error),
        (":since", &since),
        (":before", &before),
        (":limit", &limit),
        (":after", &after),
    ];
    // A tag, a workflow or a metadata entry is read through its own
    // index; the statement for a tag filters on the workflow too.
    let entry = meta.iter().next();
    let sql = if tag.is_some() {
        params.push((":tag", &tag));
        params.push((":workflow", &workflow));
        LIST_TAG
    } else if workflow.is_some() {
        params.push((":workflow", &workflow));
        LIST_WORKFLOW
    } else if let Some((key, value)) = &entry {
        params.push((":key", key));
        params.push((":value", value));
        LIST_META
    } else {
        LIST_STATEMENT.as_str()
    };
    let mut stmt = conn.prepare_cached(sql).map_err(map_err)?;
    let rows = stmt
        .query_map(params.as_slice(), job_from_row)
        .map_err(map_err)?;
    // Rows are read one by one; a spent byte budget ends the page there.
    let mut budget = filter.page_budget();
    let mut page = Vec::new();
    for job in rows {
        let job = job.map_err(map_err)?;
        let full = budget.spend(&job);
        page.push(job);
        if full {
            break;
        }
    }
    if page.is_empty()
        && let Some(after) = &filter.after
    {
        match get(conn, after) {
            Err(Error::NotFound(_)) => return Err(gone_cursor(after)),
            Err(e) => return Err(e),
            Ok(_) => {}
        }
    }
    Ok(page)
}

fn gone_cursor(after: &JobId) -> Error {
    Error::NotFound(format!(
        "{after} (the job a page starts after no longer exists, so the page cannot be placed; list again from the start)"
    ))
}
