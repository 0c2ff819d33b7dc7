#![allow(clippy::unwrap_used)]
//! The crash exercise with a real SIGKILL: a worker dies after the receipt
//! committed and before it acknowledged. Another worker, after the 1-second
//! lease, delivers again; the sink's key on the job id keeps one receipt.

mod common;

use std::time::Duration;

use common::*;

/// Longer than the 1-second lease, on the real clock: the exercise is about
/// a lease running out, so this wait is the point, not a timing assertion.
const PAST_THE_LEASE: Duration = Duration::from_millis(1200);

#[test]
fn a_worker_killed_after_the_effect_is_recovered_without_a_second_receipt() {
    let db = Db::init();
    let id = pay(&db);

    let crashed = run(&["work", db.arg(), "--crash-after-effect"]);
    assert!(
        killed_by_sigkill(&crashed),
        "expected death by signal 9, got {:?}; stderr: {}",
        crashed.status,
        stderr(&crashed)
    );
    assert!(
        stdout(&crashed).is_empty(),
        "a killed worker reports nothing"
    );
    // The effect committed; the acknowledgment never happened.
    let r = receipts(&db);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["job_id"], id.as_str());
    assert_eq!(r[0]["attempt"], 1);
    let job = only_job(&db);
    assert_eq!(job["state"], "running");
    assert_eq!(job["attempts"], 1);
    assert!(job["lease_until"].is_string());

    std::thread::sleep(PAST_THE_LEASE);

    let line = ok(&["work", db.arg()]);
    assert_eq!(line.trim(), format!("job {id} attempt 2 acknowledged=true"));

    let job = only_job(&db);
    assert_eq!(job["id"], id.as_str());
    assert_eq!(job["state"], "done");
    assert_eq!(job["attempts"], 2);
    assert_eq!(job["replays"], 0);
    assert!(job["lease_until"].is_null());
    let r = receipts(&db);
    assert_eq!(r.len(), 1, "the repeated delivery must not add a receipt");
    assert_eq!(r[0]["attempt"], 1, "the first delivery's row is kept");
    assert_eq!(ok(&["work", db.arg()]).trim(), "idle");
}

#[test]
fn a_crash_on_the_final_attempt_ends_dead_with_a_lease_expired_reason() {
    let db = Db::init();
    let id = pay(&db);

    // Attempts 1 and 2 fail against the unavailable dependency.
    for attempt in 1..=2 {
        let r = report(&work_until_busy(&db, &["--unavailable"]));
        assert_eq!(r["outcome"], "retry_scheduled");
        assert_eq!(r["attempt"], attempt);
    }
    // Attempt 3 delivers the receipt and dies before acknowledging.
    let crashed = work_until_busy(&db, &["--crash-after-effect"]);
    assert!(
        killed_by_sigkill(&crashed),
        "{:?}: {}",
        crashed.status,
        stderr(&crashed)
    );
    let job = only_job(&db);
    assert_eq!(job["state"], "running");
    assert_eq!(job["attempts"], 3);
    assert_eq!(receipts(&db).len(), 1);

    std::thread::sleep(PAST_THE_LEASE);

    // The next claim finds the expired final attempt and buries it; with
    // nothing else due, the worker is idle.
    let r = json(&["work", db.arg()]);
    assert_eq!(r["outcome"], "idle");
    let job = only_job(&db);
    assert_eq!(job["state"], "dead", "{job}");
    assert_eq!(job["attempts"], 3);
    assert_eq!(job["last_error_class"], "lease_expired");
    assert!(
        job["last_error"]
            .as_str()
            .unwrap()
            .contains("lease expired"),
        "{job}"
    );
    assert!(job["lease_until"].is_null());

    // Replay finishes it without a second receipt.
    ok(&["replay", db.arg(), &id, "--by", "tester"]);
    let r = json(&["work", db.arg()]);
    assert_eq!(r["outcome"], "acknowledged");
    assert_eq!(only_job(&db)["state"], "done");
    assert_eq!(receipts(&db).len(), 1);
}
