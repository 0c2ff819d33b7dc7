#![allow(clippy::unwrap_used)]
//! The expiry on a manual clock (SQLite, in process): exact lateness, a
//! retry that moves only the delivery time, an extension that turns the
//! old job into `changed`. The clock drives Errand's due and lease
//! decisions and the application's deadline comparisons alike.

use std::sync::Arc;
use std::time::Duration;

use errand::{ManualClock, Timestamp};
use reservations::app::{App, Status, StayRequest};
use reservations::expiry::{WorkOptions, work_once};

const T0: Timestamp = Timestamp::from_millis(1_767_225_600_000);

async fn app_at(clock: &ManualClock) -> (tempfile::TempDir, App) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("clock.sqlite");
    App::init(path.to_str().unwrap()).await.unwrap();
    let app = App::open_sqlite_with_clock(&path, Arc::new(clock.clone())).unwrap();
    (dir, app)
}

#[tokio::test]
async fn a_retry_moves_only_the_delivery_time_and_lateness_counts_it() {
    let clock = ManualClock::new(T0);
    let (_dir, app) = app_at(&clock).await;
    let r = app
        .hold(
            "unit-101",
            "Ada",
            StayRequest::tonight(),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    assert_eq!(r.hold_until, T0.plus(Duration::from_secs(60)));

    clock.advance(Duration::from_secs(59));
    let idle = work_once(&app, &WorkOptions::default()).await.unwrap();
    assert_eq!(idle.outcome, "idle", "not due a millisecond early");

    clock.advance(Duration::from_secs(1));
    let timeout = WorkOptions {
        simulate_db_timeout: true,
        ..WorkOptions::default()
    };
    let failed = work_once(&app, &timeout).await.unwrap();
    assert_eq!(failed.outcome, "retry_scheduled");
    assert!(
        failed
            .error
            .as_deref()
            .unwrap_or("")
            .contains("database timeout")
    );
    let due = failed.available_at.unwrap();
    let now = clock_now(&clock);
    // 5 s base, up to 20% jitter: 5–6 s after the first attempt.
    assert!(due >= now.plus(Duration::from_secs(5)) && due < now.plus(Duration::from_secs(6)));
    let held = app.get(&r.id).await.unwrap();
    assert_eq!((held.status, held.hold_until), (Status::Held, r.hold_until));

    clock.advance(Duration::from_secs(6));
    let done = work_once(&app, &WorkOptions::default()).await.unwrap();
    assert_eq!(done.outcome, "acknowledged");
    assert_eq!(done.attempt, Some(2));
    assert_eq!(done.result, Some("expired"));
    assert_eq!(done.lateness_ms, Some(6_000), "deadline + 6 s, exactly");
    let expired = app.get(&r.id).await.unwrap();
    assert_eq!(expired.status, Status::Expired);
    assert_eq!(
        expired.hold_until, r.hold_until,
        "the retry never extended the hold"
    );
    assert_eq!(expired.expired_at, Some(T0.plus(Duration::from_secs(66))));
    assert_eq!(expired.lateness_ms, Some(6_000));
}

fn clock_now(clock: &ManualClock) -> Timestamp {
    use errand::Clock;
    clock.now()
}

#[tokio::test]
async fn an_extension_makes_the_old_job_report_changed_and_the_new_one_expire_on_time() {
    let clock = ManualClock::new(T0);
    let (_dir, app) = app_at(&clock).await;
    let r = app
        .hold(
            "unit-101",
            "Ada",
            StayRequest::tonight(),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    clock.advance(Duration::from_secs(30));
    let e = app.extend(&r.id, Duration::from_secs(60)).await.unwrap();
    assert_eq!(e.hold_until, T0.plus(Duration::from_secs(120)));
    assert_eq!(e.generation, 2);

    clock.advance(Duration::from_secs(31));
    let old = work_once(&app, &WorkOptions::default()).await.unwrap();
    assert_eq!(old.job_id.as_deref(), Some(r.job_id.as_str()));
    assert_eq!(old.result, Some("changed"));
    assert_eq!(old.outcome, "acknowledged");
    assert_eq!(app.get(&r.id).await.unwrap().status, Status::Held);
    assert_eq!(
        work_once(&app, &WorkOptions::default())
            .await
            .unwrap()
            .outcome,
        "idle"
    );

    clock.advance(Duration::from_secs(59));
    let new = work_once(&app, &WorkOptions::default()).await.unwrap();
    assert_eq!(new.job_id.as_deref(), Some(e.job_id.as_str()));
    assert_eq!(new.result, Some("expired"));
    assert_eq!(new.lateness_ms, Some(0));
    let figures = app.figures().await.unwrap();
    assert_eq!(figures.lateness_ms, vec![0]);
}

#[tokio::test]
async fn pay_and_extend_are_refused_from_the_deadline_on() {
    let clock = ManualClock::new(T0);
    let (_dir, app) = app_at(&clock).await;
    let r = app
        .hold(
            "unit-101",
            "Ada",
            StayRequest::tonight(),
            Duration::from_secs(60),
        )
        .await
        .unwrap();
    clock.advance(Duration::from_secs(60));
    for refused in [
        app.pay(&r.id).await,
        app.extend(&r.id, Duration::from_secs(60)).await,
        app.cancel(&r.id).await,
    ] {
        let e = refused.unwrap_err();
        assert!(e.to_string().contains("ran out at"), "{e}");
        assert_eq!(e.exit_code(), reservations::EXIT_REFUSED);
    }
    assert_eq!(app.get(&r.id).await.unwrap().status, Status::Held);
    let w = work_once(&app, &WorkOptions::default()).await.unwrap();
    assert_eq!((w.result, w.lateness_ms), (Some("expired"), Some(0)));
}
