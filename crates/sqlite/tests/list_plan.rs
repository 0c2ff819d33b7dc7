#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The listing query's plan: every read of `errand_jobs` is an index
//! search (or, for running jobs, a read of the lease index, which holds
//! only them), never a scan of the table. Listing used to scan and sort the
//! whole table for every page (~150 ms at 1,000,000 jobs,
//! docs/dashboard.md); this fails if a rewrite brings that back.

use errand_sqlite::rusqlite::Connection;
use errand_sqlite::{SqliteOptions, SqliteStore};

#[test]
fn listing_reads_index_ranges_not_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plan.db");
    let store = SqliteStore::open(
        &path,
        SqliteOptions {
            create: true,
            migrate: true,
            ..SqliteOptions::default()
        },
    )
    .unwrap();
    drop(store);
    let conn = Connection::open(&path).unwrap();
    let sql = include_str!("../queries/list.sql");
    let mut stmt = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
    let mut rows = stmt.raw_query(); // parameters unbound: the plan only
    let mut plan: Vec<String> = Vec::new();
    while let Some(r) = rows.next().unwrap() {
        plan.push(r.get(3).unwrap());
    }
    let reads: Vec<&String> = plan.iter().filter(|l| l.contains("errand_jobs")).collect();
    assert!(!reads.is_empty(), "{plan:#?}");
    for read in &reads {
        assert!(
            read.starts_with("SEARCH errand_jobs USING")
                || read.starts_with("SCAN errand_jobs USING INDEX errand_jobs_leases"),
            "{read}\n{plan:#?}"
        );
    }
    let using = |index: &str| reads.iter().filter(|l| l.contains(index)).count();
    assert_eq!(
        using("USING INDEX errand_jobs_state (state=? AND (created_at,id)>(?,?))"),
        5,
        "one index range per state but running:\n{plan:#?}"
    );
    // Running jobs are outside the listing index: their member reads the
    // lease index, which holds only running jobs (at most the slots).
    assert_eq!(
        using("USING INDEX errand_jobs_leases"),
        1,
        "running jobs through the lease index:\n{plan:#?}"
    );
}
