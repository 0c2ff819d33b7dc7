#![allow(clippy::unwrap_used)]
//! A hold whose expiry job waits for its payment (`hold --await-payment`),
//! on both backends, through the real binary: the job is `waiting` until
//! the payment's own transaction signals it (`paid`), then ends at once
//! without touching the paid hold; an unpaid hold's job runs when its wait
//! times out at the deadline and expires the hold, once.

mod common;

use common::*;

both!(
    a_payment_ends_the_waiting_expiry_job_at_once,
    an_unpaid_hold_expires_when_its_wait_times_out,
    an_extended_holds_new_job_waits_for_the_payment_too,
);

fn hold_awaiting(db: &Db, unit: &str, window: &str) -> serde_json::Value {
    hold_with(db, unit, window, &["--await-payment"])
}

fn a_payment_ends_the_waiting_expiry_job_at_once(db: Db) {
    let db = db.init();
    let r = hold_awaiting(&db, "unit-101", "15m");
    let id = r["id"].as_str().unwrap();
    let waiting = job(&db, r["job_id"].as_str().unwrap());
    assert_eq!(waiting["state"], "waiting", "{waiting}");
    // Nothing to run while it waits, though it is due.
    let idle = json(&["work", db.arg(), "--once"]);
    assert_eq!(idle["outcome"], "idle", "{idle}");

    json(&["pay", db.arg(), id]);
    let ready = job(&db, r["job_id"].as_str().unwrap());
    assert_eq!(ready["state"], "ready", "the payment signalled it: {ready}");
    // It runs now, fifteen minutes before the deadline, and ends.
    let ran = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(ran["job_id"], r["job_id"]);
    assert_eq!(ran["result"], "changed", "{ran}");
    assert_eq!(ran["detail"], "it is paid now; not expired");
    assert_eq!(ran["outcome"], "acknowledged");
    assert_eq!(reservation(&db, id)["status"], "paid");
    let done = job(&db, r["job_id"].as_str().unwrap());
    assert_eq!(done["state"], "done", "{done}");
}

fn an_unpaid_hold_expires_when_its_wait_times_out(db: Db) {
    let db = db.init();
    let r = hold_awaiting(&db, "unit-102", "1s");
    let id = r["id"].as_str().unwrap();
    assert_eq!(job(&db, r["job_id"].as_str().unwrap())["state"], "waiting");
    // A one-shot worker ends the waits that timed out before it claims.
    let ran = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(ran["job_id"], r["job_id"]);
    assert_eq!(ran["result"], "expired", "{ran}");
    let done = reservation(&db, id);
    assert_eq!(done["status"], "expired");
    let lateness = ms(&done["expired_at"]) - ms(&done["hold_until"]);
    assert!(lateness >= 0, "never expired before the deadline: {done}");
    // Paying after the deadline is refused, and signals nothing.
    fails(&["pay", db.arg(), id], 4);
    let s = stats(&db);
    assert_eq!(s["outcomes"]["expired"], 1, "{s}");
}

fn an_extended_holds_new_job_waits_for_the_payment_too(db: Db) {
    let db = db.init();
    let r = hold_awaiting(&db, "unit-201", "15m");
    let id = r["id"].as_str().unwrap();
    let e = json(&["extend", db.arg(), id, "--by", "10m"]);
    let (old, new) = (r["job_id"].as_str().unwrap(), e["job_id"].as_str().unwrap());
    assert_ne!(old, new);
    assert_eq!(job(&db, old)["state"], "waiting");
    let waiting = job(&db, new);
    assert_eq!(waiting["state"], "waiting", "{waiting}");
    // The payment signals the current deadline's job; the old one waits
    // until its own deadline and then finds the hold changed.
    json(&["pay", db.arg(), id]);
    assert_eq!(job(&db, new)["state"], "ready");
    assert_eq!(job(&db, old)["state"], "waiting");
    let ran = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(ran["job_id"], new, "{ran}");
    assert_eq!(ran["result"], "changed", "{ran}");
    // A hold made without waiting is extended without waiting.
    let plain = hold(&db, "unit-301", "15m");
    let pe = json(&[
        "extend",
        db.arg(),
        plain["id"].as_str().unwrap(),
        "--by",
        "1m",
    ]);
    assert_eq!(job(&db, pe["job_id"].as_str().unwrap())["state"], "ready");
}
