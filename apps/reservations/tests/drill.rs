#![allow(clippy::unwrap_used)]
//! The deploy drill, on both backends: with holds in flight, a worker is
//! killed with SIGKILL in the middle of its handler (a test switch makes
//! the handler pause before its transition). Another worker, once the
//! lease has run out, finishes each expiry exactly once.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::*;

both!(a_worker_killed_mid_handler_is_replaced_and_each_expiry_happens_once);

const HOLDS: usize = 5;

fn a_worker_killed_mid_handler_is_replaced_and_each_expiry_happens_once(db: Db) {
    let db = db.init();
    let holds: Vec<(String, String)> = (0..HOLDS)
        .map(|i| {
            let r = hold_night(
                &db,
                ["unit-101", "unit-102", "unit-201"][i % 3],
                "100ms",
                i as i64,
            );
            (
                r["id"].as_str().unwrap().to_owned(),
                r["job_id"].as_str().unwrap().to_owned(),
            )
        })
        .collect();

    // Worker A claims every expiry and stalls inside the handler; its
    // heartbeat keeps the 1-second lease alive meanwhile.
    let a = spawn_worker(
        &db,
        &["--lease", "1s", "--poll", "20ms", "--concurrency", "8"],
        &[("RESERVATIONS_HANDLER_PAUSE_MS", "60000")],
    );
    poll_until(
        Duration::from_secs(20),
        "worker A to hold every job",
        || {
            let js = jobs(&db);
            (js.len() == HOLDS && js.iter().all(|j| j["state"] == "running")).then_some(())
        },
    );
    kill_worker(a);
    for (id, job_id) in &holds {
        assert_eq!(
            reservation(&db, id)["status"],
            "held",
            "A died before any transition"
        );
        let j = job(&db, job_id);
        assert_eq!(
            (j["state"].as_str(), j["attempts"].as_u64()),
            (Some("running"), Some(1))
        );
    }

    // Worker B picks the jobs up once A's leases have run out.
    let b = spawn_worker(&db, &["--lease", "1s", "--poll", "20ms"], &[]);
    poll_until(
        Duration::from_secs(30),
        "worker B to expire every hold",
        || {
            list(&db)
                .iter()
                .all(|r| r["status"] == "expired")
                .then_some(())
        },
    );
    let lines = stop_worker(b);

    assert_eq!(lines.len(), HOLDS, "one settled attempt per job: {lines:?}");
    let done: HashSet<&str> = lines
        .iter()
        .map(|l| l["job_id"].as_str().unwrap())
        .collect();
    let expected: HashSet<&str> = holds.iter().map(|(_, j)| j.as_str()).collect();
    assert_eq!(done, expected);
    for l in &lines {
        assert_eq!(l["result"], "expired", "{l}");
        assert_eq!(l["attempt"], 2, "the second attempt, after A's lease: {l}");
        assert_eq!(l["outcome"], "acknowledged", "{l}");
    }
    for (id, job_id) in &holds {
        let r = reservation(&db, id);
        assert_eq!(r["status"], "expired");
        assert!(r["lateness_ms"].as_i64().unwrap() >= 0);
        let j = job(&db, job_id);
        assert_eq!(
            (j["state"].as_str(), j["attempts"].as_u64()),
            (Some("done"), Some(2))
        );
    }
    let s = stats(&db);
    assert_eq!(s["outcomes"]["expired"], HOLDS);
    assert_eq!(s["outcomes"]["already-done"], 0);
    assert_eq!(s["outcomes"]["changed"], 0);
    assert_eq!(s["lateness_ms"]["count"], HOLDS);
}
