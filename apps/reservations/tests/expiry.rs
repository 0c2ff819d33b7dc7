#![allow(clippy::unwrap_used)]
//! The expiry job on both backends, through the real binary: an extension
//! makes the old job report `changed`; a redelivery after the transition
//! committed reports `already-done`; a missing reservation or an invalid
//! payload is dead at once; a database timeout is retried without touching
//! the deadline; replay keeps the idempotency key unless an operator mints
//! a new one with both flags.

mod common;

use std::time::Duration;

use common::*;
use errand::{ClaimRequest, ErrorClass, Failure, JobId, Name, NewJob, Payload, Timestamp};
use reservations::app::{App, EXPIRY_KIND, EXPIRY_QUEUE};

both!(
    extend_then_the_old_job_reports_changed_and_the_new_job_expires_at_the_new_deadline,
    a_redelivery_after_the_transition_committed_is_already_done,
    a_missing_reservation_is_dead_at_once,
    an_invalid_payload_is_dead_at_once,
    a_database_timeout_is_retried_later_and_never_moves_the_deadline,
    replay_keeps_the_key_and_a_new_key_needs_both_flags_and_an_eligible_hold,
);

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn extend_then_the_old_job_reports_changed_and_the_new_job_expires_at_the_new_deadline(db: Db) {
    let db = db.init();
    let r = hold(&db, "unit-101", "1s");
    let id = r["id"].as_str().unwrap();
    let e = json(&["extend", db.arg(), id, "--by", "1s"]);
    assert_eq!(ms(&e["hold_until"]), ms(&r["hold_until"]) + 1000);

    // The old job comes due first, at the old deadline.
    let first = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(first["job_id"], r["job_id"]);
    assert_eq!(first["result"], "changed", "{first}");
    assert_eq!(first["outcome"], "acknowledged");
    let now = reservation(&db, id);
    assert_eq!(
        now["status"], "held",
        "the old job must not expire the extended hold"
    );
    assert_eq!(now["hold_until"], e["hold_until"]);
    assert!(now["expired_at"].is_null());

    // The new job expires it at the new deadline.
    let second = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(second["job_id"], e["job_id"]);
    assert_eq!(second["result"], "expired", "{second}");
    let done = reservation(&db, id);
    assert_eq!(done["status"], "expired");
    assert_eq!(done["hold_until"], e["hold_until"]);
    let lateness = ms(&done["expired_at"]) - ms(&done["hold_until"]);
    assert!(lateness >= 0, "never expired before the new deadline");
    assert_eq!(done["lateness_ms"], lateness);
    assert_eq!(second["lateness_ms"], lateness);

    let s = stats(&db);
    assert_eq!(s["outcomes"]["changed"], 1);
    assert_eq!(s["outcomes"]["expired"], 1);
    assert_eq!(s["outcomes"]["already-done"], 0);
    assert_eq!(s["lateness_ms"]["count"], 1);
    assert_eq!(s["lateness_ms"]["max"], lateness);
    for j in jobs(&db) {
        assert_eq!(j["state"], "done", "{j}");
        assert_eq!(j["attempts"], 1, "{j}");
    }
}

fn a_redelivery_after_the_transition_committed_is_already_done(db: Db) {
    let db = db.init();
    let r = hold(&db, "unit-101", "1ms");
    let id = r["id"].as_str().unwrap();
    let job_id = r["job_id"].as_str().unwrap();

    // The worker commits the transition and dies before acknowledging.
    let crashed = work_until_busy(
        &db,
        &["--lease", "1s"],
        &[("RESERVATIONS_CRASH_AFTER_TRANSITION", "1")],
    );
    assert!(
        killed_by_sigkill(&crashed),
        "expected death by SIGKILL, got {:?}: {}",
        crashed.status,
        stderr(&crashed)
    );
    let expired = reservation(&db, id);
    assert_eq!(expired["status"], "expired");
    let j = job(&db, job_id);
    assert_eq!(j["state"], "running", "never acknowledged");
    assert_eq!(j["attempts"], 1);

    // After the lease another worker gets the same job again.
    let again = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(again["job_id"], job_id);
    assert_eq!(again["attempt"], 2);
    assert_eq!(again["result"], "already-done", "{again}");
    assert_eq!(again["outcome"], "acknowledged");
    assert!(again["lateness_ms"].is_null());

    // No second transition: the expiry time and the lateness are the first.
    let after = reservation(&db, id);
    assert_eq!(after["expired_at"], expired["expired_at"]);
    assert_eq!(after["lateness_ms"], expired["lateness_ms"]);
    let s = stats(&db);
    assert_eq!(s["outcomes"]["expired"], 1);
    assert_eq!(s["outcomes"]["already-done"], 1);
    assert_eq!(s["lateness_ms"]["count"], 1);
    let j = job(&db, job_id);
    assert_eq!(j["state"], "done");
    assert_eq!(j["attempts"], 2);
}

/// Enqueues an expiry job directly through the library.
fn enqueue(db: &Db, id: &str, payload: serde_json::Value) {
    let db = db.arg().to_owned();
    let id = id.to_owned();
    block_on(async move {
        let app = App::open(&db).await.unwrap();
        let job = NewJob::new(EXPIRY_KIND, Payload::from_value(&payload).unwrap())
            .unwrap()
            .on_queue(EXPIRY_QUEUE)
            .unwrap()
            .with_id(JobId::new(id).unwrap())
            .with_max_attempts(7)
            .unwrap();
        assert!(app.store().insert(job).await.unwrap().created);
    });
}

fn a_missing_reservation_is_dead_at_once(db: Db) {
    let db = db.init();
    let key = format!("expire:ghost:{}", now_ms());
    enqueue(
        &db,
        "expire:ghost:1",
        serde_json::json!({
            "reservation_id": "ghost",
            "hold_until": Timestamp::from_millis(now_ms()),
            "idempotency_key": key,
        }),
    );
    let r = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(r["outcome"], "dead", "{r}");
    assert_eq!(r["attempt"], 1);
    assert!(
        r["error"]
            .as_str()
            .unwrap()
            .contains("reservation `ghost` does not exist"),
        "{r}"
    );
    let j = job(&db, "expire:ghost:1");
    assert_eq!(j["state"], "dead");
    assert_eq!(j["attempts"], 1, "no retries");
    assert_eq!(j["last_error_class"], "permanent");
    assert_eq!(ok(&["work", db.arg(), "--once"]).trim(), "idle");
    let s = stats(&db);
    assert_eq!(s["dead_jobs"], 1);
    assert_eq!(s["outcomes"]["expired"], 0);
}

fn an_invalid_payload_is_dead_at_once(db: Db) {
    let db = db.init();
    enqueue(&db, "expire:junk:1", serde_json::json!({"reservation": 7}));
    let r = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(r["outcome"], "dead", "{r}");
    assert!(
        r["error"].as_str().unwrap().contains("invalid payload"),
        "{r}"
    );
    let j = job(&db, "expire:junk:1");
    assert_eq!(
        (j["state"].as_str(), j["attempts"].as_u64()),
        (Some("dead"), Some(1))
    );
    assert_eq!(j["last_error_class"], "permanent");
}

fn a_database_timeout_is_retried_later_and_never_moves_the_deadline(db: Db) {
    let db = db.init();
    for (unit, flags, env) in [
        ("unit-101", vec!["--simulate-db-timeout"], vec![]),
        (
            "unit-102",
            vec![],
            vec![("RESERVATIONS_SIMULATE_DB_TIMEOUT", "true")],
        ),
    ] {
        let r = hold(&db, unit, "1ms");
        let id = r["id"].as_str().unwrap();
        let job_id = r["job_id"].as_str().unwrap();
        let before = now_ms();
        let w = report(&work_until_busy(&db, &flags, &env));
        let after = now_ms();
        assert_eq!(w["job_id"], job_id);
        assert_eq!(w["outcome"], "retry_scheduled", "{w}");
        assert!(
            w["error"].as_str().unwrap().contains("database timeout"),
            "{w}"
        );
        assert!(w["result"].is_null(), "the transition did not happen: {w}");
        // Errand's policy: 5 s base, doubling, +≤20%: 5–6 s after attempt 1.
        let due = ms(&w["available_at"]);
        assert!(
            due >= before + 5_000 && due < after + 6_000,
            "due in {} ms",
            due - after
        );

        let j = job(&db, job_id);
        assert_eq!(j["state"], "ready");
        assert_eq!(j["attempts"], 1);
        assert_eq!(
            j["last_error_class"], "timeout",
            "a database timeout is retried under its own class"
        );
        assert_eq!(j["available_at"], w["available_at"]);
        // Only the delivery time moved: the business deadline, in the
        // reservation and in the job's payload, is the one the hold made.
        assert_eq!(j["hold_until"], r["hold_until"]);
        let now = reservation(&db, id);
        assert_eq!(now["status"], "held");
        assert_eq!(now["hold_until"], r["hold_until"]);
        assert_eq!(now["generation"], 1);
    }
    let s = stats(&db);
    assert_eq!(
        s["outcomes"],
        serde_json::json!({"expired": 0, "already-done": 0, "changed": 0})
    );
}

/// Claims the due expiry job and fails it permanently through the library:
/// a dead job for the tests of replay.
fn bury(db: &Db, job_id: &str) {
    let db = db.arg().to_owned();
    let job_id = job_id.to_owned();
    block_on(async move {
        let store = App::open(&db).await.unwrap().store();
        let req = ClaimRequest {
            queues: vec![Name::parse("queue", EXPIRY_QUEUE).unwrap()],
            limit: 1,
            lease: Duration::from_secs(30),
            rate: None,
            reclaim: true,
        };
        let claimed = loop {
            if let Some(c) = store.claim(&req).await.unwrap().pop() {
                break c;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(claimed.job.id.as_str(), job_id);
        let failure = Failure {
            error: "test: the expiry was abandoned".into(),
            class: ErrorClass::Permanent,
            retry: None,
        };
        store.fail(&claimed.lease, failure).await.unwrap();
    });
}

fn replay_keeps_the_key_and_a_new_key_needs_both_flags_and_an_eligible_hold(db: Db) {
    let db = db.init();

    // A: the expiry committed, the worker died, the job ended dead. Replay
    // keeps the key, so the replayed job finds it and changes nothing.
    let a = hold(&db, "unit-101", "1ms");
    let (a_id, a_job) = (a["id"].as_str().unwrap(), a["job_id"].as_str().unwrap());
    let key = job(&db, a_job)["idempotency_key"]
        .as_str()
        .unwrap()
        .to_owned();
    let crashed = work_until_busy(
        &db,
        &["--lease", "1s"],
        &[("RESERVATIONS_CRASH_AFTER_TRANSITION", "1")],
    );
    assert!(killed_by_sigkill(&crashed));
    let expired = reservation(&db, a_id);
    assert_eq!(expired["status"], "expired");
    bury(&db, a_job);
    assert_eq!(job(&db, a_job)["state"], "dead");

    let before = snapshot(&db);
    let err = fails(&["replay", db.arg(), a_job, "--new-key"], 2);
    assert!(err.contains("--new-key alone is refused"), "{err}");
    let err = fails(
        &["replay", db.arg(), a_job, "--new-key", "--confirm-eligible"],
        4,
    );
    assert!(err.contains("is expired, so it is not eligible"), "{err}");
    // A reason the store would take alone, but not with the key note this
    // program adds: refused before anything is written, naming --reason.
    let long = "r".repeat(1990);
    let err = fails(&["replay", db.arg(), a_job, "--reason", &long], 2);
    assert!(err.contains("--reason is not accepted"), "{err}");
    assert!(err.contains("idempotency key kept"), "{err}");
    assert_eq!(snapshot(&db), before, "a refused replay writes nothing");

    let replayed = json(&[
        "replay",
        db.arg(),
        a_job,
        "--by",
        "ops-ana",
        "--reason",
        "worker crashed",
    ]);
    assert_eq!(replayed["new_key"], false);
    assert_eq!(replayed["idempotency_key"], key.as_str());
    assert_eq!(replayed["job"]["state"], "ready");
    let w = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(w["job_id"], a_job);
    assert_eq!(w["result"], "already-done", "{w}");
    let after = reservation(&db, a_id);
    assert_eq!(
        after["expired_at"], expired["expired_at"],
        "no second transition"
    );

    // B: a held hold whose expiry job died before it ran. With both flags an
    // operator mints a new key; the replayed job expires the hold under it.
    let b = hold(&db, "unit-102", "1ms");
    let (b_id, b_job) = (b["id"].as_str().unwrap(), b["job_id"].as_str().unwrap());
    let old_key = job(&db, b_job)["idempotency_key"]
        .as_str()
        .unwrap()
        .to_owned();
    bury(&db, b_job);
    let minted = json(&[
        "replay",
        db.arg(),
        b_job,
        "--new-key",
        "--confirm-eligible",
        "--by",
        "ops-ben",
        "--reason",
        "guest confirmed the hold lapsed",
    ]);
    assert_eq!(minted["new_key"], true);
    assert_eq!(minted["previous_key"], old_key.as_str());
    let new_key = minted["idempotency_key"].as_str().unwrap();
    assert_ne!(new_key, old_key);
    assert_eq!(
        job(&db, b_job)["idempotency_key"],
        new_key,
        "jobs shows the key in force"
    );
    let w = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(
        (w["job_id"].as_str(), w["result"].as_str()),
        (Some(b_job), Some("expired"))
    );
    assert_eq!(reservation(&db, b_id)["status"], "expired");

    // Both replays are in Errand's audit log (operator, reason, key) and in
    // the application's.
    let (db_arg, a_job, b_job, new_key) = (
        db.arg().to_owned(),
        a_job.to_owned(),
        b_job.to_owned(),
        new_key.to_owned(),
    );
    block_on(async move {
        let app = App::open(&db_arg).await.unwrap();
        let store = app.store();
        let a_audit = store
            .detail(&JobId::new(a_job.clone()).unwrap())
            .await
            .unwrap()
            .audit;
        assert_eq!(a_audit[0].operator, "ops-ana");
        let reason = a_audit[0].reason.clone().unwrap();
        assert!(
            reason.contains("worker crashed") && reason.contains("key kept"),
            "{reason}"
        );
        let b_audit = store
            .detail(&JobId::new(b_job.clone()).unwrap())
            .await
            .unwrap()
            .audit;
        let reason = b_audit[0].reason.clone().unwrap();
        assert_eq!(b_audit[0].operator, "ops-ben");
        assert!(
            reason.contains(&new_key) && reason.contains("eligibility confirmed"),
            "{reason}"
        );
        let rows = app.replay_audit().await.unwrap();
        assert_eq!(rows.len(), 2);
        let a_row = rows.iter().find(|r| r.job_id == a_job).unwrap();
        assert_eq!((a_row.replay_no, a_row.new_key.as_deref()), (1, None));
        let b_row = rows.iter().find(|r| r.job_id == b_job).unwrap();
        assert_eq!(b_row.new_key.as_deref(), Some(new_key.as_str()));
        assert_eq!(b_row.operator, "ops-ben");
    });
}
