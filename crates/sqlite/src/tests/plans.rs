//! The query plans of the statements that must read an index, and the
//! row layouts and orders the statements rely on.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use errand_core::{JobFilter, JobId, JobState, NewJob, Payload, Timestamp};
use rusqlite::Connection;

use crate::admin::{CANCEL, PURGE, REPLAY, RESCHEDULE};
use crate::candidates::{CANDIDATES_READY_IN, CANDIDATES_READY_OF, RANGE_DUE};
use crate::claim::CLAIM_MANY;
use crate::insert::insert_many;
use crate::reads::{LIST_STATEMENT, list};
use crate::release::release_statements;
use crate::rows::{JOB_COLUMNS, col, get};
use crate::settle::COMPLETE_MANY;

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

/// The ranges a claim across every queue merges beside a paused or capped
/// queue are read from the due index by queue, bounded by queue, priority
/// and due time, in claim order: a range is read no further than its due
/// jobs, and nothing is sorted.
#[test]
fn a_merged_claim_reads_each_range_of_the_index_in_claim_order() {
    let mut conn = Connection::open_in_memory().unwrap();
    crate::schema::migrate(&mut conn).unwrap();
    let plan = plan_of(&conn, RANGE_DUE);
    assert!(
        job_reads(&plan).iter().any(|l| l.contains(
            "USING INDEX errand_jobs_due_by_queue (queue=? AND priority=? AND available_at<?)"
        )),
        "{plan:?}"
    );
    assert!(!plan.iter().any(|l| l.contains("TEMP B-TREE")), "{plan:?}");
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
            let page = list(&conn, &filter, &errand_core::Meta::new()).unwrap();
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
    assert_eq!(count(same_instant), 6, "{plan:#?}");
    assert_eq!(count(later), 6, "{plan:#?}");
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

/// The operator's set-based actions find the jobs they change by id, as
/// the batch statements do: a plan that walked the index on `state`
/// instead would read every job in the states the action accepts.
#[test]
fn operator_actions_look_jobs_up_by_id() {
    let mut conn = Connection::open_in_memory().unwrap();
    crate::schema::migrate(&mut conn).unwrap();
    for sql in [REPLAY, CANCEL, PURGE, RESCHEDULE] {
        let plan = plan_of(&conn, sql);
        let jobs: Vec<&String> = plan.iter().filter(|l| l.contains("errand_jobs")).collect();
        assert_eq!(jobs.len(), 1, "{sql}\n{plan:#?}");
        assert!(
            jobs[0].starts_with(
                "SEARCH errand_jobs USING INDEX sqlite_autoindex_errand_jobs_1 (id=?)"
            ),
            "{sql}\n{plan:#?}"
        );
    }
}

/// The look for waits that timed out, which every worker makes once a
/// second, and the statement that ends them, read the index of the waits
/// that time out, never the table.
#[test]
fn the_waits_that_timed_out_are_found_through_their_index() {
    let mut conn = Connection::open_in_memory().unwrap();
    crate::schema::migrate(&mut conn).unwrap();
    for sql in [
        include_str!("../../queries/waits_due.sql"),
        include_str!("../../queries/expire_waits.sql"),
    ] {
        let plan = plan_of(&conn, sql);
        let reads = job_reads(&plan);
        // A range of the index bounded by the time, not the whole index.
        assert!(
            reads
                .iter()
                .any(|l| l.contains("INDEX errand_jobs_await_timeouts")
                    && l.ends_with("(await_until>? AND await_until<?)")),
            "{sql}\n{plan:#?}"
        );
        assert!(
            reads.iter().all(|l| !l.starts_with("SCAN errand_jobs")),
            "{sql}\n{plan:#?}"
        );
    }
}
