#![allow(clippy::unwrap_used)]
//! The outage exercise: three failed deliveries on a backoff schedule, a
//! visible dead letter, idle workers, then a deliberate replay.

mod common;

use std::time::Duration;

use common::*;

#[test]
fn an_exhausted_job_waits_dead_until_an_operator_replays_it() {
    let db = Db::init();
    let id = pay(&db);

    // Attempt 1: due at once.
    let first = json(&["work", db.arg(), "--unavailable"]);
    assert_eq!(first["outcome"], "retry_scheduled");
    assert_eq!(first["job_id"], id.as_str());
    assert_eq!(first["attempt"], 1);
    assert_eq!(first["error"], "receipt_unavailable");
    let job = only_job(&db);
    assert_eq!(job["state"], "ready");
    assert_eq!(job["last_error"], "receipt_unavailable");
    // The next attempt is scheduled in the future and persisted.
    assert_eq!(job["available_at"], first["available_at"]);

    // Attempts 2 and 3, each once its backoff has passed.
    let second = report(&work_until_busy(&db, &["--unavailable"]));
    assert_eq!(second["outcome"], "retry_scheduled");
    assert_eq!(second["attempt"], 2);
    let third = work_until_busy(&db, &["--unavailable"]);
    let line = stdout(&third);
    let third = report(&third);
    assert_eq!(third["outcome"], "dead", "{line}");
    assert_eq!(third["attempt"], 3);
    assert_eq!(third["acknowledged"], false);

    let job = only_job(&db);
    assert_eq!(job["state"], "dead");
    assert_eq!(job["attempts"], 3);
    assert_eq!(job["max_attempts"], 3);
    assert_eq!(job["last_error"], "receipt_unavailable");
    assert_eq!(job["replays"], 0);
    assert_eq!(receipts(&db).len(), 0);

    // A dead job is not work: workers stay idle, even after a while.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(ok(&["work", db.arg()]).trim(), "idle");
    assert_eq!(ok(&["work", db.arg(), "--unavailable"]).trim(), "idle");
    assert_eq!(only_job(&db)["state"], "dead");

    // The operator replays it, with a name and a reason.
    let out = ok(&[
        "replay",
        db.arg(),
        &id,
        "--by",
        "ops-alice",
        "--reason",
        "receipt provider restored",
    ]);
    assert!(out.contains(&id), "{out}");
    // --by and --reason reach Errand's audit entry (what a replay does to
    // the job is Errand's conformance case
    // `replay_only_from_dead_or_cancelled_and_is_audited`).
    let (operator, reason): (String, String) = db
        .conn()
        .query_row(
            "SELECT operator, reason FROM errand_audit WHERE job_id = ?1 AND action = 'replay'",
            [&id],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .unwrap();
    assert_eq!(operator, "ops-alice");
    assert_eq!(reason, "receipt provider restored");

    let line = ok(&["work", db.arg()]);
    assert_eq!(line.trim(), format!("job {id} attempt 1 acknowledged=true"));
    assert_eq!(only_job(&db)["state"], "done");
    let r = receipts(&db);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["job_id"], id.as_str());
    assert_eq!(r[0]["payment_id"], id.as_str());
    assert_eq!(r[0]["document_id"], "document-7");
}

#[test]
fn the_human_work_line_names_the_retry_and_the_dead_letter() {
    let db = Db::init();
    let id = pay(&db);
    let line = ok(&["work", db.arg(), "--unavailable"]);
    assert!(
        line.starts_with(&format!(
            "job {id} attempt 1 acknowledged=false retry_scheduled available_at="
        )),
        "{line}"
    );
    assert!(
        line.trim_end().ends_with("error=\"receipt_unavailable\""),
        "{line}"
    );
    assert_eq!(line.lines().count(), 1);
}

#[test]
fn replay_defaults_the_operator_to_the_os_user() {
    let db = Db::init();
    let id = pay(&db);
    for _ in 0..3 {
        work_until_busy(&db, &["--unavailable"]);
    }
    assert_eq!(only_job(&db)["state"], "dead");
    let o = std::process::Command::new(BIN)
        .args(["replay", db.arg(), &id])
        .env("USER", "carol")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let operator: String = db
        .conn()
        .query_row("SELECT operator FROM errand_audit", [], |r| r.get(0))
        .unwrap();
    assert_eq!(operator, "carol");

    // Dead again, then replayed with neither $USER nor $LOGNAME.
    for _ in 0..3 {
        work_until_busy(&db, &["--unavailable"]);
    }
    let o = std::process::Command::new(BIN)
        .args(["replay", db.arg(), &id])
        .env_remove("USER")
        .env_remove("LOGNAME")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let operator: String = db
        .conn()
        .query_row(
            "SELECT operator FROM errand_audit ORDER BY seq DESC LIMIT 1",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(operator, "unknown");
    assert_eq!(only_job(&db)["replays"], 2);
}
