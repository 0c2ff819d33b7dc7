#![allow(clippy::unwrap_used)]
//! `fieldnotes work` reports each run to the store as `errand work --once`
//! does, so the operator's signals see Field Notes' workers: the time since
//! the last worker cycle, and `errand stats --check
//! --max-since-worker-cycle`.

mod common;

use std::process::Command;

use common::*;
use errand::{AdminStore, Stats, StatsRequest};

fn stats(db: &Db) -> Stats {
    let store = fieldnotes::app::open(&db.path).unwrap();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(store.stats(&StatsRequest::default()))
        .unwrap()
}

/// `errand stats --check --max-since-worker-cycle 1h` on the database:
/// its exit code and output, when the `errand` binary is built.
fn errand_check(db: &Db) -> Option<(Option<i32>, String)> {
    let errand = errand_bin()?;
    let o = Command::new(errand)
        .args([
            "--db",
            db.arg(),
            "stats",
            "--check",
            "--max-since-worker-cycle",
            "1h",
        ])
        .output()
        .unwrap();
    Some((o.status.code(), format!("{}{}", stdout(&o), stderr(&o))))
}

#[test]
fn each_work_run_reports_a_claim_cycle() {
    let db = Db::init();
    let before = stats(&db);
    assert_eq!(before.since_last_worker_cycle_ms, None, "no worker ran yet");
    if let Some((code, out)) = errand_check(&db) {
        assert_ne!(
            code,
            Some(0),
            "the check fires before any worker ran: {out}"
        );
        assert!(out.contains("no worker has reported"), "{out}");
    }

    pay(&db);
    let r = report(&run(&["work", db.arg(), "--json"]));
    assert_eq!(r["outcome"], "acknowledged", "{r}");
    let after = stats(&db);
    assert!(after.since_last_worker_cycle_ms.is_some(), "{after:?}");
    assert_eq!(after.workers.len(), 1, "{:?}", after.workers);
    assert_eq!(after.workers[0].metrics.cycles, 1);
    assert_eq!(after.workers[0].metrics.started, 1);
    if let Some((code, out)) = errand_check(&db) {
        assert_eq!(code, Some(0), "{out}");
    }

    // An idle run is a claim cycle too, reported under the same worker.
    assert_eq!(ok(&["work", db.arg()]).trim(), "idle");
    let idle = stats(&db);
    assert_eq!(idle.workers.len(), 1, "{:?}", idle.workers);
    assert_eq!(idle.workers[0].metrics.cycles, 2);
    assert_eq!(idle.workers[0].metrics.started, 1);
}
