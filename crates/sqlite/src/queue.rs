//! The queue operations, each run inside a write transaction on the writer
//! thread (or inside a caller's own transaction, for enqueue).
//!
//! Every transition of a job is one conditional `UPDATE … RETURNING`; the
//! history and audit rows that follow it are written in the same
//! transaction only when the transition took place.

use std::sync::LazyLock;

use errand_core::{
    AttemptRecord, AuditRecord, Dependency, Error, Job, JobDetail, JobFilter, JobId, JobState,
    Name, Payload, Result, Timestamp, WorkflowId,
};
use rusqlite::{Connection, named_params};

use crate::conn::{json_list, map_err};
use crate::rows::{class_col, get, job_from_row, opt_ts_col, ts_col, u32_col};

const DEPENDENCY_OUTPUTS: &str = include_str!("../queries/dependency_outputs.sql");
const DEPENDENCY_OUTPUTS_AFTER: &str = include_str!("../queries/dependency_outputs_after.sql");
const AUDIT: &str = include_str!("../queries/audit.sql");
const HISTORY: &str = include_str!("../queries/history.sql");
const AUDIT_OF: &str = include_str!("../queries/audit_of.sql");
const LIST: &str = include_str!("../queries/list.sql");
const LIST_MEMBER: &str = include_str!("../queries/list_member.sql");
const LIST_WORKFLOW: &str = include_str!("../queries/list_workflow.sql");
const LIST_TAG: &str = include_str!("../queries/list_tag.sql");
const WORKFLOW_COUNTS: &str = include_str!("../queries/workflow_counts.sql");
const DEPENDENCY_EDGES: &str = include_str!("../queries/dependency_edges.sql");
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

pub(crate) struct AuditRow<'a> {
    pub(crate) job: Option<&'a JobId>,
    pub(crate) queue: &'a Name,
    pub(crate) action: &'a str,
    pub(crate) operator: &'a str,
    pub(crate) reason: Option<&'a str>,
    /// For a `copy`: the new job.
    pub(crate) copy: Option<&'a JobId>,
    /// For a schedule's action: the schedule.
    pub(crate) schedule: Option<&'a Name>,
}

pub(crate) fn audit(conn: &Connection, row: &AuditRow<'_>, now: Timestamp) -> Result<()> {
    conn.prepare_cached(AUDIT)
        .map_err(map_err)?
        .execute(named_params! {
            ":id": row.job.map(JobId::as_str), ":queue": row.queue.as_str(),
            ":action": row.action, ":operator": row.operator,
            ":reason": row.reason, ":now": now.as_millis(),
            ":copy": row.copy.map(JobId::as_str),
            ":schedule": row.schedule.map(Name::as_str),
        })
        .map_err(map_err)?;
    Ok(())
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

/// The listing without a tag or workflow filter: list.sql with its members
/// (list_member.sql), two per state read through the listing index (the
/// rest of the cursor's creation instant, then the later instants) and one
/// for running jobs.
static LIST_STATEMENT: LazyLock<String> = LazyLock::new(|| {
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

/// Jobs matching `filter`.
pub(crate) fn list(conn: &Connection, filter: &JobFilter) -> Result<Vec<Job>> {
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
    // A tag or a workflow is read through its own index; the statement
    // for a tag filters on the workflow too.
    let sql = if tag.is_some() {
        params.push((":tag", &tag));
        params.push((":workflow", &workflow));
        LIST_TAG
    } else if workflow.is_some() {
        params.push((":workflow", &workflow));
        LIST_WORKFLOW
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

/// How many steps of `workflow` are in each state.
pub(crate) fn workflow_counts(
    conn: &Connection,
    workflow: &WorkflowId,
) -> Result<Vec<(JobState, u64)>> {
    let mut stmt = conn.prepare_cached(WORKFLOW_COUNTS).map_err(map_err)?;
    let rows = stmt
        .query_map(named_params! {":workflow": workflow.as_str()}, |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
        })
        .map_err(map_err)?;
    let mut counts = Vec::new();
    for row in rows {
        let (state, n) = row.map_err(map_err)?;
        counts.push((state.parse::<JobState>()?, u64::try_from(n).unwrap_or(0)));
    }
    Ok(counts)
}

/// The dependency edges of the jobs in `ids`.
pub(crate) fn dependency_edges(
    conn: &Connection,
    ids: &[JobId],
    first: u32,
) -> Result<Vec<errand_core::StepEdge>> {
    let list = json_list(&ids.iter().map(JobId::as_str).collect::<Vec<_>>())?;
    let mut stmt = conn.prepare_cached(DEPENDENCY_EDGES).map_err(map_err)?;
    let rows = stmt
        .query_map(named_params! {":ids": list, ":first": first}, |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                u32_col(r, 2)?,
            ))
        })
        .map_err(map_err)?;
    let mut edges = Vec::new();
    for row in rows {
        let (job, dep, total) = row.map_err(map_err)?;
        edges.push(errand_core::StepEdge {
            job: JobId::new(job)?,
            depends_on: JobId::new(dep)?,
            of: total,
        });
    }
    Ok(edges)
}

fn gone_cursor(after: &JobId) -> Error {
    Error::NotFound(format!(
        "{after} (the job a page starts after no longer exists, so the page cannot be placed; list again from the start)"
    ))
}

#[cfg(test)]
mod plan_tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::claim::{CANDIDATES_READY_IN, CANDIDATES_READY_OF, CLAIM_MANY};
    use crate::insert::insert_many;
    use crate::release::release_statements;
    use crate::rows::{JOB_COLUMNS, col};
    use crate::settle::COMPLETE_MANY;
    use errand_core::NewJob;

    /// The lines of `sql`'s query plan on `conn` (parameters unbound: the
    /// plan only).
    fn plan_of(conn: &Connection, sql: &str) -> Vec<String> {
        let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let mut rows = stmt.raw_query();
        let mut plan = Vec::new();
        while let Some(r) = rows.next().unwrap() {
            plan.push(r.get(3).unwrap());
        }
        plan
    }

    /// The lines of `plan` that read the job table, under its own name or
    /// as `j`.
    fn job_reads(plan: &[String]) -> Vec<&String> {
        plan.iter()
            .filter(|l| {
                l.contains("errand_jobs") || l.starts_with("SEARCH j ") || l.starts_with("SCAN j")
            })
            .collect()
    }

    /// Every job's kind, in the order the rows are stored.
    fn kinds_by_rowid(conn: &Connection) -> Vec<String> {
        conn.prepare("SELECT kind FROM errand_jobs ORDER BY rowid")
            .unwrap()
            .query_map([], |r| r.get(0))
            .unwrap()
            .collect::<rusqlite::Result<_>>()
            .unwrap()
    }

    /// A claim of one named queue reads that queue's ready jobs in claim
    /// order from the index and sorts nothing, so it stops after the jobs it
    /// takes however large the queue's backlog (a list of queues has to
    /// sort what it reads).
    #[test]
    fn a_claim_of_one_queue_reads_the_index_in_claim_order() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let one = plan_of(&conn, CANDIDATES_READY_OF);
        assert!(
            job_reads(&one)
                .iter()
                .any(|l| l.contains("USING INDEX errand_jobs_due_by_queue (queue=?")),
            "{one:?}"
        );
        assert!(!one.iter().any(|l| l.contains("TEMP B-TREE")), "{one:?}");
        let several = plan_of(&conn, CANDIDATES_READY_IN);
        assert!(
            several.iter().any(|l| l.contains("TEMP B-TREE")),
            "{several:?}"
        );
    }

    /// `insert_many` on an application's connection is all or nothing even
    /// when it takes several statements and no transaction is open: a
    /// failure in the second statement (here a trigger refusing one job)
    /// leaves none of the first statement's jobs behind.
    #[test]
    fn insert_many_on_a_bare_connection_is_all_or_nothing() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        conn.execute_batch(
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON errand_jobs WHEN NEW.id = 'boom'
             BEGIN SELECT RAISE(ABORT, 'injected failure'); END;",
        )
        .unwrap();
        let job = |id: &str| {
            NewJob::new("k", Payload::default())
                .unwrap()
                .with_id(JobId::new(id).unwrap())
        };
        let mut jobs: Vec<NewJob> = (0..300).map(|i| job(&format!("j{i}"))).collect();
        jobs[280] = job("boom");
        let now = Timestamp::from_millis(1_795_996_800_000);
        let err = insert_many(&conn, &jobs, now).unwrap_err();
        assert!(err.to_string().contains("injected"), "{err}");
        let count: i64 = conn
            .query_row("SELECT count(*) FROM errand_jobs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(count, 0);
        assert!(conn.is_autocommit(), "no transaction is left open");
        jobs[280] = job("j280");
        assert_eq!(insert_many(&conn, &jobs, now).unwrap().len(), 300);
    }

    /// Chains built one at a time are written depth by depth — the rows
    /// a wave of claims rewrites side by side — across the statements a
    /// large call takes, while the call answers, and the stored rows hold,
    /// exactly what was asked, in the order asked.
    #[test]
    fn jobs_that_depend_on_each_other_are_written_depth_by_depth() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let mut wf = errand_core::Workflow::new();
        let mut asked = Vec::new();
        // 100 chains of 3: 300 jobs, more than one statement's 256.
        for chain in 0..100 {
            let mut before: Option<JobId> = None;
            for n in 0..3 {
                let step = NewJob::new(&format!("s{n}-c{chain:03}"), Payload::default()).unwrap();
                let id = match before.take() {
                    Some(prev) => wf.step_after(step, &[&prev]),
                    None => wf.step(step),
                };
                asked.push(id.clone());
                before = Some(id);
            }
        }
        let now = Timestamp::from_millis(1_795_996_800_000);
        let inserted = insert_many(&conn, &wf.into_jobs(), now).unwrap();
        let answered: Vec<JobId> = inserted.iter().map(|i| i.job.id.clone()).collect();
        assert_eq!(answered, asked, "answered in the order asked");
        assert!(inserted.iter().all(|i| i.created));
        let by_rowid = kinds_by_rowid(&conn);
        let mut depth_by_depth = by_rowid.clone();
        depth_by_depth.sort();
        assert_eq!(
            by_rowid, depth_by_depth,
            "every first step, then every second, …"
        );
        assert_eq!(by_rowid.len(), 300);
        for i in &inserted {
            let kind = i.job.kind.as_str();
            let mut stored = get(&conn, &i.job.id).unwrap();
            assert_eq!(stored.has_dependents, !kind.starts_with("s2"), "{kind}");
            assert_eq!(
                stored.waiting_on,
                u32::from(!kind.starts_with("s0")),
                "{kind}"
            );
            // The answer describes a row as inserted, before later jobs of
            // the call named it as a dependency.
            stored.has_dependents = i.job.has_dependents;
            assert_eq!(stored, i.job);
        }
        let edges: i64 = conn
            .query_row("SELECT count(*) FROM errand_dependencies", [], |r| r.get(0))
            .unwrap();
        assert_eq!(edges, 200, "each later step waits for the one before it");
    }

    /// Jobs created at the same instant are listed in the order they were
    /// stored, across states, and keyset pages of any size walk that order
    /// exactly once, before the jobs of later instants.
    #[test]
    fn jobs_created_together_are_listed_in_the_order_stored() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let at = |ms: i64| Timestamp::from_millis(1_795_996_800_000 + ms);
        let single = |kind: &str, ms| {
            let job = NewJob::new(kind, Payload::default()).unwrap();
            insert_many(&conn, &[job], at(ms)).unwrap();
        };
        single("earlier", 0);
        // Ten chains of three, built chain by chain: stored depth by depth,
        // so their ids (generated chain by chain) are not the stored order.
        let mut wf = errand_core::Workflow::new();
        for chain in 0..10 {
            let mut before: Option<JobId> = None;
            for n in 0..3 {
                let step = NewJob::new(&format!("s{n}-c{chain}"), Payload::default()).unwrap();
                before = Some(match before.take() {
                    Some(prev) => wf.step_after(step, &[&prev]),
                    None => wf.step(step),
                });
            }
        }
        insert_many(&conn, &wf.into_jobs(), at(1)).unwrap();
        single("later", 2);
        let stored = kinds_by_rowid(&conn);
        assert_eq!(stored[0], "earlier");
        assert_eq!(stored[1], "s0-c0");
        assert_eq!(stored[11], "s1-c0", "depth by depth");
        assert_eq!(stored[31], "later");
        let walk = |state: Option<JobState>, limit: u32| {
            let mut seen = Vec::new();
            let mut after: Option<JobId> = None;
            for _ in 0..=stored.len() {
                let filter = JobFilter {
                    state,
                    limit: Some(limit),
                    after: after.clone(),
                    ..JobFilter::default()
                };
                let page = list(&conn, &filter).unwrap();
                assert!(page.len() <= limit as usize);
                let Some(last) = page.last() else {
                    return seen;
                };
                after = Some(last.id.clone());
                seen.extend(page.iter().map(|j| j.kind.as_str().to_owned()));
            }
            panic!("pages of {limit} did not end: the cursor did not advance");
        };
        for limit in [1, 2, 7, 100] {
            assert_eq!(walk(None, limit), stored, "pages of {limit}");
        }
        // One state: the same order, that state's jobs only.
        let blocked: Vec<String> = stored
            .iter()
            .filter(|k| k.starts_with("s1") || k.starts_with("s2"))
            .cloned()
            .collect();
        for limit in [1, 3, 100] {
            assert_eq!(walk(Some(JobState::Blocked), limit), blocked);
        }
    }

    /// The listing's plan: every read of `errand_jobs` is an index search
    /// (or, for running jobs, a read of the lease index, which holds only
    /// them), never a scan of the table nor of the whole of an instant.
    /// Listing used to scan and sort the whole table for every page (~150
    /// ms at 1,000,000 jobs, docs/dashboard.md); this fails if a rewrite of
    /// list.sql, list_member.sql or the listing index brings that back.
    #[test]
    fn the_listing_seeks_the_listing_index() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let plan = plan_of(&conn, LIST_STATEMENT.as_str());
        // Reads of the table, under its own name or as `j` (the page's
        // rows, read by rowid).
        let reads = job_reads(&plan);
        for read in &reads {
            assert!(
                read.starts_with("SEARCH errand_jobs USING INDEX")
                    || read.starts_with("SEARCH errand_jobs USING INTEGER PRIMARY KEY (rowid=?)")
                    || read.starts_with("SEARCH j USING INTEGER PRIMARY KEY (rowid=?)")
                    || read.starts_with("SCAN errand_jobs USING INDEX errand_jobs_leases"),
                "{read}\n{plan:#?}"
            );
        }
        assert!(
            reads
                .iter()
                .any(|l| l.starts_with("SEARCH j USING INTEGER PRIMARY KEY (rowid=?)")),
            "the page's rows are read by rowid: {plan:#?}"
        );
        let count = |needle: &str| reads.iter().filter(|l| l.contains(needle)).count();
        // Two index ranges per state but running: the rest of the cursor's
        // instant, and the later instants.
        let same_instant = "USING INDEX errand_jobs_state (state=? AND created_at=? AND rowid>?)";
        let later = "USING INDEX errand_jobs_state (state=? AND created_at>?)";
        assert_eq!(count(same_instant), 5, "{plan:#?}");
        assert_eq!(count(later), 5, "{plan:#?}");
        // Running jobs are outside the listing index: their one member
        // reads the lease index, which holds only them (at most the slots).
        assert_eq!(
            count("SCAN errand_jobs USING INDEX errand_jobs_leases"),
            1,
            "{plan:#?}"
        );
    }

    /// The positions job rows are read at name the right columns.
    #[test]
    fn column_positions_match_the_column_list() {
        let at = [
            (col::ID, "id"),
            (col::QUEUE, "queue"),
            (col::KIND, "kind"),
            (col::STATE, "state"),
            (col::PAYLOAD, "payload"),
            (col::PRIORITY, "priority"),
            (col::ATTEMPTS, "attempts"),
            (col::MAX_ATTEMPTS, "max_attempts"),
            (col::REPLAYS, "replays"),
            (col::LEASE_EXPIRIES, "lease_expiries"),
            (col::MAX_LEASE_EXPIRIES, "max_lease_expiries"),
            (col::GIVE_UP_AT, "give_up_at"),
            (col::AVAILABLE_AT, "available_at"),
            (col::CREATED_AT, "created_at"),
            (col::UPDATED_AT, "updated_at"),
            (col::LEASE_TOKEN, "lease_token"),
            (col::LEASE_UNTIL, "lease_until"),
            (col::LAST_ERROR, "last_error"),
            (col::LAST_ERROR_CLASS, "last_error_class"),
            (col::FINISHED_AT, "finished_at"),
            (col::KEY_NAME, "key_name"),
            (col::KEY_LIMIT, "key_limit"),
            (col::KEY_ORDERED, "key_ordered"),
            (col::ATTEMPT_STARTED_AT, "attempt_started_at"),
        ];
        for (i, name) in at {
            assert_eq!(JOB_COLUMNS[i], name);
        }
    }

    /// Releasing the dependents of acknowledged jobs reads the unmet edges
    /// out of each job from the edge index alone, without reading the jobs
    /// themselves (their acknowledgment just set them done), and visits
    /// the job table only to change each dependent, found by id. A rewrite
    /// that reads the acknowledged jobs again, or the edge table, doubles
    /// the seeks of the commonest settlement that has dependents; this
    /// fails if one does.
    #[test]
    fn a_release_after_acknowledgments_reads_edges_from_the_index_alone() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        let [_, _, _, release_done] = release_statements();
        let plan = plan_of(&conn, release_done);
        let edges: Vec<&String> = plan.iter().filter(|l| l.contains(" e ")).collect();
        assert_eq!(
            edges,
            ["SEARCH e USING COVERING INDEX errand_dependencies_of (depends_on=? AND met=?)"],
            "{plan:#?}"
        );
        let jobs = job_reads(&plan);
        assert_eq!(
            jobs,
            ["SEARCH j USING INDEX sqlite_autoindex_errand_jobs_1 (id=?)"],
            "{plan:#?}"
        );
    }

    /// The batch statements find their jobs by rowid (claims) or id
    /// (acknowledgments). Without statistics SQLite's planner prefers an
    /// index on `state` — a scan of every ready (or running) job per batch
    /// — unless the statement keeps it from doing so; this fails if a
    /// rewrite loses that.
    #[test]
    fn batch_claims_and_acknowledgments_look_jobs_up_by_key() {
        let mut conn = Connection::open_in_memory().unwrap();
        crate::schema::migrate(&mut conn).unwrap();
        for (sql, search) in [
            (
                CLAIM_MANY,
                "SEARCH errand_jobs USING INTEGER PRIMARY KEY (rowid=?)",
            ),
            (
                COMPLETE_MANY,
                "SEARCH errand_jobs USING INDEX sqlite_autoindex_errand_jobs_1 (id=?)",
            ),
        ] {
            let plan = plan_of(&conn, sql);
            let jobs: Vec<&String> = plan.iter().filter(|l| l.contains("errand_jobs")).collect();
            assert_eq!(jobs.len(), 1, "{sql}\n{plan:#?}");
            assert!(jobs[0].starts_with(search), "{sql}\n{plan:#?}");
        }
    }
}
