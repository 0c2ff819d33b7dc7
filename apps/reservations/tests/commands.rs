#![allow(clippy::unwrap_used)]
//! The command table on both backends: init, hold, pay, extend,
//! cancel, list and stats; refused transitions exit non-zero with a clear
//! message and write nothing; bad input is named.

mod common;

use common::*;

both!(
    init_is_idempotent_and_seeds_units,
    a_hold_commits_with_its_expiry_job_due_at_the_deadline,
    pay_extend_and_cancel_change_a_held_reservation,
    refused_transitions_exit_non_zero_and_write_nothing,
    bad_input_is_named_and_writes_nothing,
    replay_refuses_a_lone_new_key_or_confirmation,
);

fn init_is_idempotent_and_seeds_units(db: Db) {
    // Before init every command names the fix.
    let err = fails(&["list", db.arg()], 2);
    assert!(err.contains("reservations init"), "{err}");

    let first = json(&["init", db.arg()]);
    assert_eq!(first["backend"], db.backend);
    let units = first["units"].as_array().unwrap().clone();
    assert!(units.len() >= 3, "a few units: {first}");
    assert_eq!(first["created_units"], first["units"]);

    let r = hold(&db, units[0].as_str().unwrap(), "15m");
    let again = json(&["init", db.arg()]);
    assert_eq!(again["created_units"].as_array().unwrap().len(), 0);
    assert_eq!(again["units"], first["units"]);
    // Running it again changed nothing that existed.
    let listed = list(&db);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], r["id"]);
    assert_eq!(listed[0]["status"], "held");
}

fn a_hold_commits_with_its_expiry_job_due_at_the_deadline(db: Db) {
    let db = db.init();
    let before = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let r = json(&["hold", db.arg(), "--unit", "unit-101", "--guest", "Ada"]);
    let id = r["id"].as_str().unwrap();
    assert_eq!(r["status"], "held");
    assert_eq!(r["unit"], "unit-101");
    assert_eq!(r["guest"], "Ada");
    assert!(r["expired_at"].is_null());
    // The default window is 15 minutes.
    let window = ms(&r["hold_until"]) - ms(&r["created_at"]);
    assert!((899_990..=900_000).contains(&window), "window {window} ms");
    assert!(ms(&r["created_at"]) >= before - 1000);

    let listed = reservation(&db, id);
    for field in ["id", "status", "hold_until", "expired_at"] {
        assert!(listed.get(field).is_some(), "list --json has {field}");
    }
    assert_eq!(listed["hold_until"], r["hold_until"]);

    // Its expiry job: due at the deadline, carrying the deadline as
    // business data, 7 attempts.
    let j = job(&db, r["job_id"].as_str().unwrap());
    assert_eq!(j["state"], "ready");
    assert_eq!(j["available_at"], r["hold_until"]);
    assert_eq!(j["hold_until"], r["hold_until"]);
    assert_eq!(j["reservation_id"], id);
    assert_eq!(j["max_attempts"], 7);
    assert_eq!(j["attempts"], 0);
    assert!(j["idempotency_key"].as_str().unwrap().contains(id));

    // The text form names the id and the deadline.
    let line = ok(&[
        "hold",
        db.arg(),
        "--unit",
        "unit-102",
        "--guest",
        "Bob",
        "--window",
        "90s",
    ]);
    assert!(line.starts_with("held reservation "), "{line}");
    assert!(line.contains("hold_until="), "{line}");
    assert_eq!(jobs(&db).len(), 2);
}

fn pay_extend_and_cancel_change_a_held_reservation(db: Db) {
    let db = db.init();
    let paid = hold(&db, "unit-101", "10m");
    let p = json(&["pay", db.arg(), paid["id"].as_str().unwrap()]);
    assert_eq!(p["status"], "paid");
    assert!(p["paid_at"].is_string());
    assert_eq!(p["hold_until"], paid["hold_until"]);

    let cancelled = hold(&db, "unit-102", "10m");
    let c = json(&["cancel", db.arg(), cancelled["id"].as_str().unwrap()]);
    assert_eq!(c["status"], "cancelled");
    assert!(c["cancelled_at"].is_string());

    let extended = hold(&db, "unit-201", "10m");
    let e = json(&[
        "extend",
        db.arg(),
        extended["id"].as_str().unwrap(),
        "--by",
        "5m",
    ]);
    assert_eq!(e["status"], "held");
    assert_eq!(e["generation"], 2);
    assert_eq!(
        ms(&e["hold_until"]) - ms(&extended["hold_until"]),
        300_000,
        "extend moves the deadline by exactly --by"
    );
    // The new deadline has its own job, scheduled in the same transaction;
    // the old one stays as it was and will find the deadline changed.
    assert_ne!(e["job_id"], extended["job_id"]);
    let new_job = job(&db, e["job_id"].as_str().unwrap());
    assert_eq!(new_job["available_at"], e["hold_until"]);
    assert_eq!(new_job["hold_until"], e["hold_until"]);
    let old_job = job(&db, extended["job_id"].as_str().unwrap());
    assert_eq!(old_job["state"], "ready");
    assert_eq!(old_job["hold_until"], extended["hold_until"]);

    let statuses: Vec<(String, String)> = list(&db)
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(statuses.len(), 3);
    let s = stats(&db);
    assert_eq!(s["reservations"]["paid"], 1);
    assert_eq!(s["reservations"]["cancelled"], 1);
    assert_eq!(s["reservations"]["held"], 1);
}

fn refused_transitions_exit_non_zero_and_write_nothing(db: Db) {
    let db = db.init();
    let paid = hold(&db, "unit-101", "10m");
    let paid_id = paid["id"].as_str().unwrap();
    json(&["pay", db.arg(), paid_id]);
    let cancelled = hold(&db, "unit-102", "10m");
    let cancelled_id = cancelled["id"].as_str().unwrap();
    json(&["cancel", db.arg(), cancelled_id]);
    // A hold whose deadline passed and that a worker expired.
    let expired = hold(&db, "unit-201", "1ms");
    let expired_id = expired["id"].as_str().unwrap();
    let r = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(r["result"], "expired");
    // A hold whose deadline passed that no worker has expired yet.
    let lapsed = hold(&db, "unit-301", "1ms");
    let lapsed_id = lapsed["id"].as_str().unwrap();
    poll_until(std::time::Duration::from_secs(5), "the deadline", || {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64;
        (now > ms(&lapsed["hold_until"]) + 5).then_some(())
    });

    let before = snapshot(&db);
    let cases: Vec<(Vec<&str>, i32, &str)> = vec![
        (vec!["pay", db.arg(), expired_id], 4, "expired at"),
        (
            vec!["extend", db.arg(), expired_id, "--by", "5m"],
            4,
            "expired at",
        ),
        (vec!["cancel", db.arg(), expired_id], 4, "expired at"),
        (vec!["pay", db.arg(), paid_id], 4, "already paid"),
        (
            vec!["extend", db.arg(), paid_id, "--by", "5m"],
            4,
            "already paid",
        ),
        (vec!["cancel", db.arg(), paid_id], 4, "already paid"),
        (vec!["pay", db.arg(), cancelled_id], 4, "was cancelled"),
        (
            vec!["extend", db.arg(), cancelled_id, "--by", "1m"],
            4,
            "was cancelled",
        ),
        (vec!["pay", db.arg(), lapsed_id], 4, "ran out at"),
        (
            vec!["extend", db.arg(), lapsed_id, "--by", "1h"],
            4,
            "ran out at",
        ),
        (vec!["cancel", db.arg(), lapsed_id], 4, "ran out at"),
        (
            vec!["pay", db.arg(), "no-such-id"],
            3,
            "no reservation `no-such-id`",
        ),
        (
            vec!["extend", db.arg(), "no-such-id", "--by", "1m"],
            3,
            "no reservation",
        ),
        (vec!["cancel", db.arg(), "no-such-id"], 3, "no reservation"),
    ];
    for (args, code, says) in cases {
        let err = fails(&args, code);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(err.contains("cannot be") || code == 3, "{args:?}: {err}");
    }
    assert_eq!(snapshot(&db), before, "a refused transition writes nothing");
    assert_eq!(reservation(&db, lapsed_id)["status"], "held");
}

fn bad_input_is_named_and_writes_nothing(db: Db) {
    let db = db.init();
    let r = hold(&db, "unit-101", "10m");
    let id = r["id"].as_str().unwrap();
    let before = snapshot(&db);

    let err = fails(
        &[
            "hold",
            db.arg(),
            "--unit",
            "unit-101",
            "--guest",
            "A",
            "--window",
            "ten minutes",
        ],
        2,
    );
    assert!(err.contains("not a duration"), "{err}");
    let err = fails(
        &[
            "hold",
            db.arg(),
            "--unit",
            "unit-101",
            "--guest",
            "A",
            "--window",
            "5 fortnights",
        ],
        2,
    );
    assert!(err.contains("unknown time unit"), "{err}");
    let err = fails(
        &[
            "hold",
            db.arg(),
            "--unit",
            "unit-101",
            "--guest",
            "A",
            "--window",
            "0s",
        ],
        2,
    );
    assert!(err.contains("between 1ms and"), "{err}");
    let err = fails(&["extend", db.arg(), id, "--by", "-5m"], 2);
    assert!(err.contains("--by"), "{err}");
    let err = fails(&["hold", db.arg(), "--unit", "unit-999", "--guest", "A"], 3);
    assert!(
        err.contains("no unit `unit-999`") && err.contains("unit-101"),
        "{err}"
    );
    let err = fails(&["hold", db.arg(), "--unit", "unit-101", "--guest", " "], 2);
    assert!(err.contains("guest name"), "{err}");
    assert_eq!(snapshot(&db), before, "bad input writes nothing");

    // Bad databases.
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.db");
    let err = fails(&["list", missing.to_str().unwrap()], 2);
    assert!(
        err.contains("no database at") && err.contains("reservations init"),
        "{err}"
    );
    assert!(!missing.exists(), "a missing database is not created");
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "not a database at all").unwrap();
    let err = fails(&["list", text.to_str().unwrap()], 2);
    assert!(err.contains("not a SQLite database"), "{err}");
    assert_eq!(
        std::fs::read_to_string(&text).unwrap(),
        "not a database at all"
    );
    let err = fails(&["list", "mysql://localhost/app"], 2);
    assert!(err.contains("unknown database scheme"), "{err}");
    let err = fails(&["list", "postgres://nobody@127.0.0.1:1/none"], 2);
    assert!(err.contains("cannot connect to PostgreSQL"), "{err}");
    let err = fails(&["list", dir.path().to_str().unwrap()], 2);
    assert!(err.contains("is a directory"), "{err}");
}

fn replay_refuses_a_lone_new_key_or_confirmation(db: Db) {
    let db = db.init();
    let r = hold(&db, "unit-101", "10m");
    let job_id = r["job_id"].as_str().unwrap();
    let before = snapshot(&db);
    let err = fails(&["replay", db.arg(), job_id, "--new-key"], 2);
    assert!(err.contains("--new-key alone is refused"), "{err}");
    assert!(err.contains("--confirm-eligible"), "{err}");
    let err = fails(&["replay", db.arg(), job_id, "--confirm-eligible"], 2);
    assert!(err.contains("--confirm-eligible alone is refused"), "{err}");
    // Both flags on a job that is not dead: refused by state.
    let err = fails(
        &[
            "replay",
            db.arg(),
            job_id,
            "--new-key",
            "--confirm-eligible",
        ],
        4,
    );
    assert!(err.contains("is ready, not dead"), "{err}");
    let err = fails(&["replay", db.arg(), "expire:nope:1"], 3);
    assert!(err.contains("no job `expire:nope:1`"), "{err}");
    assert_eq!(snapshot(&db), before);
}
