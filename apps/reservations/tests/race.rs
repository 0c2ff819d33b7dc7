#![allow(clippy::unwrap_used)]
//! Paying races the expiry, on both backends: hundreds of holds whose
//! payment is fired at its deadline plus an offset from −10 ms to +15 ms,
//! while a separate worker process expires them as they come due. The
//! payments run in this process on their own connections, so on SQLite the
//! two meet at the file's write lock and on PostgreSQL at the row lock.
//!
//! Every trial must end in exactly one of the two — paid (and the expiry
//! reported `changed`) or expired (and the payment was refused) — never
//! both, and never neither.

mod common;

use std::collections::{HashMap, HashSet};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use reservations::app::{App, Status, StayRequest};
use serde_json::Value;

both!(pay_races_expiry_and_every_trial_ends_in_exactly_one);

const TRIALS: u64 = 200;
const UNITS: [&str; 4] = ["unit-101", "unit-102", "unit-201", "unit-301"];

struct Trial {
    id: String,
    job_id: String,
    offset_ms: i64,
    paid: bool,
    refusal: Option<String>,
}

/// The `i`-th night from 2099-01-01.
fn night(i: u64) -> StayRequest {
    let first = reservations::app::parse_date("2099-01-01").unwrap();
    let from = first + time::Duration::days(i as i64);
    StayRequest::dates(from, from + time::Duration::days(1))
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

fn pay_races_expiry_and_every_trial_ends_in_exactly_one(db: Db) {
    let db = db.init();
    let worker = spawn_worker(
        &db,
        &["--poll", "5ms", "--concurrency", "4", "--lease", "10s"],
        &[],
    );
    let url = db.arg().to_owned();
    let trials: Vec<Trial> = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async move {
            let app = App::open(&url).await.unwrap();
            let mut set = tokio::task::JoinSet::new();
            for i in 0..TRIALS {
                let app = app.clone();
                set.spawn(async move {
                    // Stagger the trials so the worker is never far behind.
                    tokio::time::sleep(Duration::from_millis(i * 15)).await;
                    let unit = UNITS[(i % 4) as usize];
                    // A night of its own: two holds of one unit may not
                    // share one.
                    let r = app
                        .hold(unit, "Racer", night(i), Duration::from_millis(40))
                        .await
                        .unwrap();
                    // Fire the payment at the deadline plus −10…+15 ms.
                    let offset_ms = (i % 26) as i64 - 10;
                    let wait = r.hold_until.as_millis() + offset_ms - now_ms();
                    if wait > 0 {
                        tokio::time::sleep(Duration::from_millis(wait as u64)).await;
                    }
                    let paid = app.pay(&r.id).await;
                    let refusal = match &paid {
                        Ok(_) => None,
                        Err(e) => {
                            assert_eq!(
                                e.exit_code(),
                                reservations::EXIT_REFUSED,
                                "a payment may only be refused, not fail: {e}"
                            );
                            Some(e.to_string())
                        }
                    };
                    Trial {
                        id: r.id,
                        job_id: r.job_id,
                        offset_ms,
                        paid: paid.is_ok(),
                        refusal,
                    }
                });
            }
            let mut trials = Vec::new();
            while let Some(t) = set.join_next().await {
                trials.push(t.unwrap());
            }
            // Wait for the worker to settle every hold it must expire.
            let deadline = std::time::Instant::now() + Duration::from_secs(20);
            loop {
                let list = app.list().await.unwrap();
                if list.iter().all(|r| r.status != Status::Held) {
                    break;
                }
                assert!(
                    std::time::Instant::now() < deadline,
                    "holds still held after 20 s"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            trials
        });
    let lines = stop_worker(worker);

    let listed: HashMap<String, Value> = list(&db)
        .into_iter()
        .map(|r| (r["id"].as_str().unwrap().to_owned(), r))
        .collect();
    let by_job: HashMap<String, Vec<&Value>> = lines.iter().fold(HashMap::new(), |mut m, l| {
        m.entry(l["job_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(l);
        m
    });
    assert_eq!(trials.len(), TRIALS as usize);
    assert_eq!(listed.len(), TRIALS as usize);
    let (mut paid, mut expired, mut lost_in_flight) = (0, 0, 0);
    for t in &trials {
        let r = &listed[&t.id];
        let runs = by_job.get(&t.job_id).map_or(&[][..], Vec::as_slice);
        assert_eq!(runs.len(), 1, "one expiry run per hold: {runs:?}");
        let run = runs[0];
        assert_eq!(run["outcome"], "acknowledged", "{run}");
        assert!(
            r["paid_at"].is_null() || r["expired_at"].is_null(),
            "both paid and expired: {r}"
        );
        if t.paid {
            paid += 1;
            assert_eq!(r["status"], "paid", "the payment succeeded: {r}");
            assert!(r["expired_at"].is_null());
            assert_eq!(
                run["result"], "changed",
                "a paid hold is never expired: {run}"
            );
        } else {
            expired += 1;
            assert_eq!(r["status"], "expired", "the payment was refused: {r}");
            assert!(r["paid_at"].is_null());
            assert_eq!(run["result"], "expired", "{run}");
            let refusal = t.refusal.as_deref().unwrap();
            assert!(
                refusal.contains("expired at") || refusal.contains("ran out at"),
                "{refusal}"
            );
            if refusal.contains("expired at") {
                lost_in_flight += 1;
            }
        }
    }
    let offsets: HashSet<i64> = trials.iter().map(|t| t.offset_ms).collect();
    eprintln!(
        "{}: {TRIALS} trials over offsets {:?}..{:?} ms: {paid} paid, {expired} expired ({lost_in_flight} payments refused because the expiry had already committed)",
        db.backend,
        offsets.iter().min(),
        offsets.iter().max()
    );
    assert!(
        paid > 0 && expired > 0,
        "the deadline must land inside the race: {paid} paid, {expired} expired"
    );
    let s = stats(&db);
    assert_eq!(s["outcomes"]["changed"], paid);
    assert_eq!(s["outcomes"]["expired"], expired);
    assert_eq!(s["outcomes"]["already-done"], 0);
    assert_eq!(s["lateness_ms"]["count"], expired);
    assert_eq!(s["reservations"]["held"], 0);
}
