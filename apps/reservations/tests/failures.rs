#![allow(clippy::unwrap_used, clippy::expect_used)]
//! How failures and lateness show, on both backends: a database timeout is
//! retried under the error class `timeout` (so retries by class tell it
//! apart), a purged reservation sends its pending expiry job dead at once
//! (a permanent failure), `jobs` names the idempotency key in force and the
//! error class, and `stats --check --max-lateness` exits 6 when holds
//! expire, or wait to expire, too late.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use errand::{ManualClock, StatsRequest, Timestamp};
use reservations::app::{App, StayRequest};
use reservations::expiry::{WorkOptions, work_once};
use reservations::stats::check_lateness;

both!(
    a_database_timeout_is_retried_under_the_timeout_class,
    a_purged_reservation_sends_its_pending_expiry_job_dead_at_once,
    stats_check_exits_6_when_a_hold_expires_or_waits_too_late,
);

/// Errand's retries by error class over the recent window, all queues.
fn retries_by_class(db: &Db) -> std::collections::BTreeMap<String, u64> {
    let url = db.arg().to_owned();
    block_on(async move {
        let app = App::open(&url).await.unwrap();
        app.store()
            .stats(&StatsRequest::default())
            .await
            .unwrap()
            .totals()
            .retries
    })
}

/// The `jobs` text line of one job.
fn jobs_line(db: &Db, job_id: &str) -> String {
    ok(&["jobs", db.arg()])
        .lines()
        .find(|l| l.starts_with(&format!("{job_id} ")))
        .unwrap_or_else(|| panic!("no line for {job_id}"))
        .to_owned()
}

fn a_database_timeout_is_retried_under_the_timeout_class(db: Db) {
    let db = db.init();
    let r = hold(&db, "unit-101", "1ms");
    let job_id = r["job_id"].as_str().unwrap();
    let w = report(&work_until_busy(&db, &["--simulate-db-timeout"], &[]));
    assert_eq!(w["outcome"], "retry_scheduled", "{w}");
    assert!(
        w["error"].as_str().unwrap().contains("database timeout"),
        "{w}"
    );

    let j = job(&db, job_id);
    assert_eq!(j["last_error_class"], "timeout", "{j}");
    assert_eq!(j["state"], "ready");
    let retries = retries_by_class(&db);
    assert_eq!(retries.get("timeout"), Some(&1), "{retries:?}");
    assert_eq!(retries.get("retryable"), None, "{retries:?}");

    // The text form names the key in force and the class.
    let line = jobs_line(&db, job_id);
    let key = j["idempotency_key"].as_str().unwrap();
    assert!(line.contains(&format!(" key={key}")), "{line}");
    assert!(line.contains(" error_class=timeout"), "{line}");
    assert!(line.contains("last_error=\"database timeout"), "{line}");
}

fn a_purged_reservation_sends_its_pending_expiry_job_dead_at_once(db: Db) {
    let db = db.init();
    let r = hold(&db, "unit-101", "1ms");
    let (id, job_id) = (r["id"].as_str().unwrap(), r["job_id"].as_str().unwrap());
    let kept = hold(&db, "unit-102", "15m");

    let line = ok(&["purge-reservation", db.arg(), id]);
    assert!(
        line.starts_with(&format!("purged reservation {id} ")),
        "{line}"
    );
    assert!(
        line.contains(job_id) && line.contains("dead at once"),
        "{line}"
    );
    let listed = list(&db);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["id"], kept["id"]);
    // Its night is free again.
    assert_eq!(hold(&db, "unit-101", "15m")["status"], "held");
    let err = fails(&["purge-reservation", db.arg(), id], 3);
    assert!(err.contains(&format!("no reservation `{id}`")), "{err}");

    // The expiry job finds no reservation: dead on its first attempt.
    let w = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(w["job_id"], job_id);
    assert_eq!(w["outcome"], "dead", "{w}");
    assert_eq!(w["attempt"], 1);
    let j = job(&db, job_id);
    assert_eq!(
        (j["state"].as_str(), j["attempts"].as_u64()),
        (Some("dead"), Some(1))
    );
    assert_eq!(j["last_error_class"], "permanent");
    let line = jobs_line(&db, job_id);
    assert!(line.contains(" state=dead "), "{line}");
    assert!(line.contains(" error_class=permanent"), "{line}");
    assert!(
        line.contains(&format!(" key={}", j["idempotency_key"].as_str().unwrap())),
        "{line}"
    );
    assert!(line.contains("does not exist"), "{line}");
    assert_eq!(stats(&db)["dead_jobs"], 1);
    assert!(retries_by_class(&db).is_empty(), "never retried");
}

fn stats_check_exits_6_when_a_hold_expires_or_waits_too_late(db: Db) {
    let db = db.init();
    let check = |max: &str| {
        run(&[
            "stats",
            db.arg(),
            "--check",
            "--max-lateness",
            max,
            "--json",
        ])
    };
    // Nothing yet: ok.
    let o = check("1ms");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["lateness"]["expired"], 0);

    // A hold 100 ms past its deadline that no worker expired: crossed for
    // a threshold below that, not for one far above.
    let r = hold(&db, "unit-101", "1ms");
    poll_until(Duration::from_secs(5), "the deadline", || {
        (Timestamp::now().as_millis() > ms(&r["hold_until"]) + 100).then_some(())
    });
    let o = check("50ms");
    assert_eq!(o.status.code(), Some(6), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["lateness"]["overdue"], 1);
    assert!(
        v["lateness"]["max_overdue_ms"].as_i64().unwrap() > 100,
        "{v}"
    );
    let text = run(&["stats", db.arg(), "--check", "--max-lateness", "50ms"]);
    assert_eq!(text.status.code(), Some(6));
    let out = stdout(&text);
    assert!(
        out.starts_with("CROSSED lateness: 1 hold(s) are past their deadline"),
        "{out}"
    );
    assert!(out.contains("is an expiry worker running?"), "{out}");
    assert_eq!(check("1h").status.code(), Some(0));

    // Expired at least 100 ms late: crossed below that, ok far above.
    let w = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(w["result"], "expired");
    let lateness = w["lateness_ms"].as_i64().unwrap();
    assert!(lateness > 100);
    let o = check("50ms");
    assert_eq!(o.status.code(), Some(6));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["lateness"]["expired"], 1);
    assert_eq!(v["lateness"]["max_expired_ms"], lateness);
    assert_eq!(v["lateness"]["overdue"], 0);
    assert_eq!(v["max_lateness_ms"], 50);
    let out = stdout(&run(&[
        "stats",
        db.arg(),
        "--check",
        "--max-lateness",
        "50ms",
    ]));
    assert!(
        out.starts_with("CROSSED lateness: a hold expired ")
            && out.contains("above --max-lateness 50ms"),
        "{out}"
    );
    let o = run(&["stats", db.arg(), "--check", "--max-lateness", "1h"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stdout(&o).starts_with("ok: 1 expiries in the last 15m"),
        "{}",
        stdout(&o)
    );

    // Bad use is refused with exit 2.
    let err = fails(&["stats", db.arg(), "--check"], 2);
    assert!(err.contains("--max-lateness"), "{err}");
    let err = fails(&["stats", db.arg(), "--max-lateness", "1s"], 2);
    assert!(err.contains("--check"), "{err}");
    let err = fails(&["stats", db.arg(), "--check", "--max-lateness", "soon"], 2);
    assert!(err.contains("not a duration"), "{err}");
}

/// On a manual clock: an expiry counts while it is inside the window, and
/// no longer once the window has moved past it.
#[tokio::test]
async fn the_window_decides_which_expiries_count() {
    let t0 = Timestamp::from_millis(1_767_225_600_000);
    let clock = ManualClock::new(t0);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clock.sqlite");
    App::init(path.to_str().unwrap()).await.unwrap();
    let app = App::open_sqlite_with_clock(&path, Arc::new(clock.clone())).unwrap();
    app.hold(
        "unit-101",
        "Ada",
        StayRequest::tonight(),
        Duration::from_secs(60),
    )
    .await
    .unwrap();
    clock.advance(Duration::from_secs(90));
    let w = work_once(&app, &WorkOptions::default()).await.unwrap();
    assert_eq!((w.result, w.lateness_ms), (Some("expired"), Some(30_000)));
    let window = Duration::from_secs(15 * 60);
    let l = app.recent_lateness(window).await.unwrap();
    assert_eq!((l.expired, l.max_expired_ms), (1, Some(30_000)));
    assert!(!check_lateness(&l, Duration::from_secs(29)).ok);
    assert!(
        check_lateness(&l, Duration::from_secs(30)).ok,
        "strictly above"
    );

    // The window reaches back exactly `window`: the expiry counts up to
    // then, and not a millisecond later.
    clock.advance(window);
    assert_eq!(app.recent_lateness(window).await.unwrap().expired, 1);
    clock.advance(Duration::from_millis(1));
    let l = app.recent_lateness(window).await.unwrap();
    assert_eq!((l.expired, l.max_expired_ms), (0, None));
    assert!(check_lateness(&l, Duration::from_secs(1)).ok);
}
