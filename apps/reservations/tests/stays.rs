#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Stays, on both backends: a hold reserves its unit for the nights from
//! `--from` up to, not including, `--to` (tonight by default, in UTC), and
//! no two held or paid reservations of one unit share a night. The
//! application checks it inside its write transaction, and the schema
//! enforces it whoever writes the row (a trigger on SQLite, an exclusion
//! constraint on PostgreSQL). Fifty concurrent holds of one unit and stay,
//! each on its own connection, leave exactly one held.

mod common;

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use reservations::app::{App, OVERLAP, StayRequest, iso_date, parse_date};
use serde_json::Value;

both!(
    fifty_concurrent_holds_of_one_unit_and_stay_leave_exactly_one_held,
    the_schema_alone_refuses_an_overlapping_row,
    the_application_refuses_an_overlap_the_schema_no_longer_would,
    a_stay_is_tonight_by_default_and_only_held_or_paid_reservations_occupy_it,
    bad_stays_are_refused_and_write_nothing,
    a_database_made_before_stays_gives_each_reservation_the_night_it_was_made,
    a_double_booking_made_before_stays_is_named_and_blocks_the_migration,
);

const RACERS: usize = 50;

/// The README's walkthrough on today's date: its `day` helper, then each
/// of its `init` and `hold` lines up to the last one that names a date,
/// run as written in order on a fresh SQLite database, each ending with
/// the exit status the walkthrough shows after it (0 where it shows none).
#[test]
fn the_walkthrough_holds_run_as_written_on_any_day() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md"))
        .expect("read the README");
    let block = readme
        .split_once("## Walkthrough")
        .and_then(|(_, rest)| rest.split_once("```console\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block)
        .expect("the walkthrough's console block");
    let mut commands: Vec<(&str, i32)> = Vec::new();
    for line in block.lines() {
        if let Some(command) = line.strip_prefix("$ ") {
            commands.push((command, 0));
        } else if let Some(code) = line
            .strip_prefix("(exit ")
            .and_then(|rest| rest.strip_suffix(')'))
            && let Some(last) = commands.last_mut()
        {
            last.1 = code.parse().expect("an exit status");
        }
    }
    let day = commands
        .iter()
        .find(|(c, _)| c.starts_with("day()"))
        .expect("the walkthrough defines its `day` helper")
        .0;
    let last_dated = commands
        .iter()
        .rposition(|(c, _)| c.contains("$(day "))
        .expect("the walkthrough names dates with `day`");
    let dir = tempfile::tempdir().expect("a scratch directory");
    let bin = Path::new(BIN).parent().expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut ran = 0;
    for (command, code) in &commands[..=last_dated] {
        if !(command.starts_with("reservations init ") || command.starts_with("reservations hold "))
        {
            continue;
        }
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("{day}\n{command}"))
            .current_dir(dir.path())
            .env("PATH", &path)
            .output()
            .expect("run bash");
        assert_eq!(
            out.status.code(),
            Some(*code),
            "`{command}`: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        ran += 1;
    }
    assert!(ran >= 10, "only {ran} commands ran");
}

fn fifty_concurrent_holds_of_one_unit_and_stay_leave_exactly_one_held(db: Db) {
    let db = db.init();
    let url = db.arg().to_owned();
    let results: Vec<Result<String, (u8, String)>> = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap()
        .block_on(async move {
            // Every racer has its own store: on SQLite its own connection
            // and writer thread, on PostgreSQL its own connection pool.
            let mut apps = Vec::new();
            for _ in 0..RACERS {
                apps.push(App::open(&url).await.unwrap());
            }
            let start = Arc::new(tokio::sync::Barrier::new(RACERS));
            let mut set = tokio::task::JoinSet::new();
            for (i, app) in apps.into_iter().enumerate() {
                let start = start.clone();
                set.spawn(async move {
                    start.wait().await;
                    app.hold(
                        "unit-101",
                        &format!("Racer {i}"),
                        StayRequest::tonight(),
                        Duration::from_secs(15 * 60),
                    )
                    .await
                    .map(|r| r.id)
                    .map_err(|e| (e.exit_code(), e.to_string()))
                });
            }
            let mut results = Vec::new();
            while let Some(r) = set.join_next().await {
                results.push(r.unwrap());
            }
            results
        });
    let held: Vec<&String> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    let refused: Vec<&(u8, String)> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(
        held.len(),
        1,
        "exactly one of {RACERS} concurrent holds wins: {results:?}"
    );
    assert_eq!(refused.len(), RACERS - 1);
    for (code, message) in &refused {
        assert_eq!(*code, reservations::EXIT_REFUSED, "{message}");
        assert!(message.contains(OVERLAP), "{message}");
        assert!(message.contains("nothing was written"), "{message}");
    }
    // The refused holds wrote nothing: one reservation, one expiry job.
    let listed = list(&db);
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["id"], held[0].as_str());
    assert_eq!(listed[0]["status"], "held");
    assert_eq!(jobs(&db).len(), 1);
    eprintln!(
        "{}: {RACERS} concurrent holds of unit-101 tonight: 1 held, {} refused",
        db.backend,
        refused.len()
    );
}

// ---------------------------------------------------------------------------
// Writing rows directly, past the application

/// Runs `statement` on the database directly, past the application.
fn sql(db: &Db, statement: &str) -> Result<(), String> {
    if db.backend == "sqlite" {
        let conn = errand::sqlite::rusqlite::Connection::open(db.arg()).unwrap();
        conn.execute_batch(statement).map_err(|e| e.to_string())
    } else {
        let out = Command::new("psql")
            .args([db.arg(), "-q", "-v", "ON_ERROR_STOP=1", "-c", statement])
            .output()
            .expect("run psql");
        if out.status.success() {
            Ok(())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

/// An INSERT of a reservation row of `unit` for the nights `from`..`to`
/// in `status` (`held`, `paid` or `cancelled`), written past the
/// application.
fn insert_row(db: &Db, id: &str, unit: &str, status: &str, from: &str, to: &str) -> String {
    let (table, now, deadline) = if db.backend == "sqlite" {
        (
            "reservations",
            "CAST(unixepoch('subsec') * 1000 AS INTEGER)",
            "CAST(unixepoch('subsec') * 1000 AS INTEGER) + 600000",
        )
    } else {
        (
            "reservations.reservations",
            "date_trunc('milliseconds', now())",
            "date_trunc('milliseconds', now()) + interval '10 minutes'",
        )
    };
    let (paid_at, cancelled_at) = match status {
        "paid" => (now, "NULL"),
        "cancelled" => ("NULL", now),
        _ => ("NULL", "NULL"),
    };
    format!(
        "INSERT INTO {table} (id, unit_id, guest, status, hold_until, generation, created_at, paid_at, cancelled_at, stay_from, stay_to)
         VALUES ('{id}', '{unit}', 'Direct', '{status}', {deadline}, 1, {now}, {paid_at}, {cancelled_at}, '{from}', '{to}')"
    )
}

fn table(db: &Db) -> &'static str {
    if db.backend == "sqlite" {
        "reservations"
    } else {
        "reservations.reservations"
    }
}

fn refused_by_schema(db: &Db, err: &str) -> bool {
    if db.backend == "sqlite" {
        err.contains(OVERLAP)
    } else {
        err.contains("reservations_no_overlap")
    }
}

/// The stay of a reservation as JSON shows it.
fn stay_of(r: &Value) -> (String, String) {
    (
        r["stay_from"].as_str().unwrap().to_owned(),
        r["stay_to"].as_str().unwrap().to_owned(),
    )
}

fn day_after(d: &str) -> String {
    iso_date(parse_date(d).unwrap() + time::Duration::days(1))
}

fn days_after(d: &str, n: i64) -> String {
    iso_date(parse_date(d).unwrap() + time::Duration::days(n))
}

fn the_schema_alone_refuses_an_overlapping_row(db: Db) {
    let db = db.init();
    let first = json(&[
        "hold",
        db.arg(),
        "--unit",
        "unit-101",
        "--guest",
        "Ada",
        "--from",
        "2099-03-01",
        "--to",
        "2099-03-04",
    ]);
    assert_eq!(stay_of(&first), ("2099-03-01".into(), "2099-03-04".into()));
    let before = snapshot(&db);

    // A held row sharing a night, and a paid one: refused by the schema.
    for (id, status, from, to) in [
        ("direct-1", "held", "2099-03-03", "2099-03-05"),
        ("direct-2", "paid", "2099-02-27", "2099-03-02"),
        ("direct-3", "held", "2099-03-01", "2099-03-04"),
    ] {
        let err = sql(&db, &insert_row(&db, id, "unit-101", status, from, to))
            .expect_err("an overlapping row must be refused by the schema");
        assert!(refused_by_schema(&db, &err), "{id}: {err}");
    }
    assert_eq!(snapshot(&db), before, "the refused rows are not there");

    // Not over-broad: the adjacent nights, another unit, and a cancelled
    // reservation of the same nights are all accepted.
    sql(
        &db,
        &insert_row(
            &db,
            "direct-4",
            "unit-101",
            "held",
            "2099-03-04",
            "2099-03-05",
        ),
    )
    .unwrap();
    sql(
        &db,
        &insert_row(
            &db,
            "direct-5",
            "unit-102",
            "paid",
            "2099-03-01",
            "2099-03-04",
        ),
    )
    .unwrap();
    sql(
        &db,
        &insert_row(
            &db,
            "direct-6",
            "unit-101",
            "cancelled",
            "2099-03-02",
            "2099-03-03",
        ),
    )
    .unwrap();
    // Bringing the cancelled one back to `held` would share a night: the
    // schema refuses the UPDATE too.
    let err = sql(
        &db,
        &format!(
            "UPDATE {} SET status = 'held', cancelled_at = NULL WHERE id = 'direct-6'",
            table(&db)
        ),
    )
    .expect_err("an UPDATE into an overlap must be refused by the schema");
    assert!(refused_by_schema(&db, &err), "{err}");
    // So does moving a held stay onto another's nights.
    let err = sql(
        &db,
        &format!(
            "UPDATE {} SET stay_from = '2099-03-03' WHERE id = 'direct-4'",
            table(&db)
        ),
    )
    .expect_err("moving a stay into an overlap must be refused by the schema");
    assert!(refused_by_schema(&db, &err), "{err}");
    // A stay must have a night.
    let err = sql(
        &db,
        &insert_row(
            &db,
            "direct-7",
            "unit-201",
            "held",
            "2099-03-02",
            "2099-03-02",
        ),
    )
    .expect_err("an empty stay must be refused");
    assert!(
        err.contains("CHECK") || err.contains("check constraint"),
        "{err}"
    );
    let statuses: Vec<(String, String)> = list(&db)
        .iter()
        .map(|r| {
            (
                r["id"].as_str().unwrap().to_owned(),
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(statuses.len(), 4, "{statuses:?}");
    assert!(statuses.contains(&("direct-6".into(), "cancelled".into())));
}

fn the_application_refuses_an_overlap_the_schema_no_longer_would(db: Db) {
    let db = db.init();
    let first = hold(&db, "unit-101", "15m");
    let first_id = first["id"].as_str().unwrap();
    // Take the schema's backstop away, then write a double booking past
    // the application: only the application's own check is left.
    let drop = if db.backend == "sqlite" {
        "DROP TRIGGER reservations_no_overlap_insert; DROP TRIGGER reservations_no_overlap_update;"
            .to_owned()
    } else {
        "ALTER TABLE reservations.reservations DROP CONSTRAINT reservations_no_overlap".to_owned()
    };
    sql(&db, &drop).unwrap();
    let (from, to) = stay_of(&first);
    sql(
        &db,
        &insert_row(&db, "intruder", "unit-101", "held", &from, &to),
    )
    .unwrap();
    let before = snapshot(&db);

    let err = fails(
        &["hold", db.arg(), "--unit", "unit-101", "--guest", "Eve"],
        4,
    );
    assert!(err.contains(OVERLAP), "{err}");
    assert!(err.contains("unit `unit-101` is not free"), "{err}");
    assert!(
        err.contains(first_id) || err.contains("`intruder`"),
        "names the reservation in the way: {err}"
    );
    // Paying either of the two would confirm a double booking: refused.
    let err = fails(&["pay", db.arg(), first_id], 4);
    assert!(err.contains(OVERLAP) && err.contains("`intruder`"), "{err}");
    let err = fails(&["pay", db.arg(), "intruder"], 4);
    assert!(err.contains(OVERLAP) && err.contains(first_id), "{err}");
    assert_eq!(snapshot(&db), before, "the refusals wrote nothing");
}

fn a_stay_is_tonight_by_default_and_only_held_or_paid_reservations_occupy_it(db: Db) {
    let db = db.init();
    // Tonight: the UTC date the hold was made on, to the next day.
    let tonight = hold(&db, "unit-101", "15m");
    let created = errand::Timestamp::parse_rfc3339(tonight["created_at"].as_str().unwrap())
        .unwrap()
        .to_rfc3339();
    let today = created[..10].to_owned();
    assert_eq!(stay_of(&tonight), (today.clone(), day_after(&today)));
    let tonight_id = tonight["id"].as_str().unwrap();

    // The next nights are free (a stay ends on the morning its last night
    // is over); a stay sharing tonight is not.
    let next = json(&[
        "hold",
        db.arg(),
        "--unit",
        "unit-101",
        "--guest",
        "Grace",
        "--from",
        &day_after(&today),
        "--to",
        &days_after(&today, 3),
    ]);
    assert_eq!(next["status"], "held");
    let err = fails(
        &[
            "hold",
            db.arg(),
            "--unit",
            "unit-101",
            "--guest",
            "Linus",
            "--to",
            &days_after(&today, 2),
        ],
        4,
    );
    assert!(err.contains(OVERLAP), "{err}");
    assert!(err.contains(tonight_id), "names the hold in the way: {err}");
    assert!(err.contains("held for"), "{err}");
    // --from alone is one night.
    let one = json(&[
        "hold",
        db.arg(),
        "--unit",
        "unit-101",
        "--guest",
        "Tim",
        "--from",
        &days_after(&today, 3),
    ]);
    assert_eq!(
        stay_of(&one),
        (days_after(&today, 3), days_after(&today, 4))
    );
    // Another unit is free tonight; the text form shows the stay.
    let line = ok(&["hold", db.arg(), "--unit", "unit-102", "--guest", "Bob"]);
    assert!(
        line.contains(&format!("from={today} to={}", day_after(&today))),
        "{line}"
    );

    // A paid booking occupies its nights.
    json(&["pay", db.arg(), tonight_id]);
    let err = fails(
        &["hold", db.arg(), "--unit", "unit-101", "--guest", "Eve"],
        4,
    );
    assert!(err.contains(OVERLAP) && err.contains("paid for"), "{err}");

    // A cancelled reservation frees them.
    let grace = next["id"].as_str().unwrap();
    json(&["cancel", db.arg(), grace]);
    json(&[
        "hold",
        db.arg(),
        "--unit",
        "unit-101",
        "--guest",
        "Margaret",
        "--from",
        &day_after(&today),
    ]);

    // A hold whose deadline passed occupies its nights until the expiry
    // job expires it; then they are free.
    let lapsing = hold(&db, "unit-201", "1ms");
    poll_until(Duration::from_secs(5), "the deadline", || {
        let now = errand::Timestamp::now().as_millis();
        (now > ms(&lapsing["hold_until"]) + 5).then_some(())
    });
    let err = fails(
        &["hold", db.arg(), "--unit", "unit-201", "--guest", "Eve"],
        4,
    );
    assert!(
        err.contains(OVERLAP) && err.contains("no expiry worker has expired it yet"),
        "{err}"
    );
    let w = report(&work_until_busy(&db, &[], &[]));
    assert_eq!(
        (w["job_id"].as_str(), w["result"].as_str()),
        (lapsing["job_id"].as_str(), Some("expired"))
    );
    let after = hold(&db, "unit-201", "15m");
    assert_eq!(after["status"], "held");
    assert_eq!(stay_of(&after), stay_of(&lapsing));
}

fn bad_stays_are_refused_and_write_nothing(db: Db) {
    let db = db.init();
    let r = hold(&db, "unit-101", "15m");
    let (today, tomorrow) = stay_of(&r);
    let yesterday = days_after(&today, -1);
    let far = days_after(&today, 400);
    let before = snapshot(&db);
    let hold_args = |extra: &[&str]| -> Vec<String> {
        let mut v: Vec<String> = ["hold", db.arg(), "--unit", "unit-102", "--guest", "Ada"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        v.extend(extra.iter().map(|s| (*s).to_owned()));
        v
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            hold_args(&["--from", &tomorrow, "--to", &tomorrow]),
            "must be after --from",
        ),
        (
            hold_args(&["--from", &tomorrow, "--to", &today]),
            "must be after --from",
        ),
        (hold_args(&["--to", &today]), "must be after --from"),
        (hold_args(&["--from", &yesterday]), "before today"),
        (
            hold_args(&["--from", &today, "--to", &far]),
            "at most 365 nights",
        ),
        (hold_args(&["--from", "2099-13-01"]), "is not a date"),
        (hold_args(&["--from", "2099-02-30"]), "is not a date"),
        (hold_args(&["--to", "tomorrow"]), "is not a date"),
        (hold_args(&["--from", "01/03/2099"]), "YYYY-MM-DD"),
    ];
    for (args, says) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let err = fails(&args, 2);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    assert_eq!(snapshot(&db), before, "a refused stay writes nothing");
}

// ---------------------------------------------------------------------------
// Databases made before stays existed

mod v1 {
    pub mod sqlite {
        refinery::embed_migrations!("migrations/sqlite");
    }
    pub mod postgres {
        refinery::embed_migrations!("migrations/postgres");
    }
}

/// A database with Errand's schema and the application's first schema
/// version (no stays), as the previous release left it.
fn make_v1(db: &Db) {
    let target = refinery::Target::Version(1);
    if db.backend == "sqlite" {
        let store = errand::SqliteStore::open(
            db.arg(),
            errand::SqliteOptions {
                create: true,
                migrate: true,
                ..errand::SqliteOptions::default()
            },
        )
        .unwrap();
        drop(store);
        let mut conn = errand::sqlite::rusqlite::Connection::open(db.arg()).unwrap();
        let mut runner = v1::sqlite::migrations::runner().set_target(target);
        runner.set_migration_table_name("reservations_schema_history");
        runner.run(&mut conn).unwrap();
        conn.execute_batch(
            "INSERT INTO units (id, name) VALUES ('unit-101', 'a'), ('unit-102', 'b'), ('unit-201', 'c'), ('unit-301', 'd')",
        )
        .unwrap();
    } else {
        let url = db.arg().to_owned();
        block_on(async move {
            let store = errand::PgStore::connect(
                &url,
                errand::PgOptions {
                    migrate: true,
                    ..errand::PgOptions::default()
                },
            )
            .await
            .unwrap();
            drop(store);
            let (mut client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            let driver = tokio::spawn(conn);
            client
                .batch_execute("CREATE SCHEMA reservations")
                .await
                .unwrap();
            let mut runner = v1::postgres::migrations::runner().set_target(target);
            runner.set_migration_table_name("reservations.reservations_schema_history");
            runner.run_async(&mut client).await.unwrap();
            client
                .batch_execute(
                    "INSERT INTO reservations.units (id, name) VALUES ('unit-101', 'a'), ('unit-102', 'b'), ('unit-201', 'c'), ('unit-301', 'd')",
                )
                .await
                .unwrap();
            drop(client);
            let _ = driver.await;
        });
    }
}

/// A reservation row of the first schema version, made `days_ago` days
/// ago (at this time of day).
fn v1_row(db: &Db, id: &str, unit: &str, status: &str, days_ago: i64) -> String {
    if db.backend == "sqlite" {
        let made = format!("(CAST(unixepoch('subsec') * 1000 AS INTEGER) - {days_ago} * 86400000)");
        let (paid, cancelled, expired) = match status {
            "paid" => (made.as_str(), "NULL", "NULL"),
            "cancelled" => ("NULL", made.as_str(), "NULL"),
            "expired" => ("NULL", "NULL", made.as_str()),
            _ => ("NULL", "NULL", "NULL"),
        };
        format!(
            "INSERT INTO reservations (id, unit_id, guest, status, hold_until, generation, created_at, paid_at, cancelled_at, expired_at)
             VALUES ('{id}', '{unit}', 'Legacy', '{status}', {made} + 900000, 1, {made}, {paid}, {cancelled}, {expired})"
        )
    } else {
        let made = format!("(date_trunc('milliseconds', now()) - interval '{days_ago} days')");
        let (paid, cancelled, expired) = match status {
            "paid" => (made.as_str(), "NULL", "NULL"),
            "cancelled" => ("NULL", made.as_str(), "NULL"),
            "expired" => ("NULL", "NULL", made.as_str()),
            _ => ("NULL", "NULL", "NULL"),
        };
        format!(
            "INSERT INTO reservations.reservations (id, unit_id, guest, status, hold_until, generation, created_at, paid_at, cancelled_at, expired_at)
             VALUES ('{id}', '{unit}', 'Legacy', '{status}', {made} + interval '15 minutes', 1, {made}, {paid}, {cancelled}, {expired})"
        )
    }
}

fn a_database_made_before_stays_gives_each_reservation_the_night_it_was_made(db: Db) {
    make_v1(&db);
    for (id, unit, status, days_ago) in [
        ("old-paid", "unit-101", "paid", 0),
        ("old-held", "unit-102", "held", 0),
        // The same night as the held one, but expired: it occupies nothing.
        ("old-expired", "unit-102", "expired", 0),
        ("old-cancelled", "unit-101", "cancelled", 0),
        ("older-paid", "unit-101", "paid", 3),
    ] {
        sql(&db, &v1_row(&db, id, unit, status, days_ago)).unwrap();
    }
    // The new program refuses the old schema and names the fix.
    let err = fails(&["list", db.arg()], 2);
    assert!(err.contains("reservations init"), "{err}");

    json(&["init", db.arg()]);
    let listed = list(&db);
    assert_eq!(listed.len(), 5);
    let by_id = |id: &str| listed.iter().find(|r| r["id"] == id).unwrap().clone();
    for r in &listed {
        let made = errand::Timestamp::parse_rfc3339(r["created_at"].as_str().unwrap())
            .unwrap()
            .to_rfc3339();
        let night = made[..10].to_owned();
        assert_eq!(stay_of(r), (night.clone(), day_after(&night)), "{r}");
    }
    // The migrated rows occupy their nights like new ones.
    let tonight = stay_of(&by_id("old-paid"));
    for unit in ["unit-101", "unit-102"] {
        let err = fails(&["hold", db.arg(), "--unit", unit, "--guest", "New"], 4);
        assert!(err.contains(OVERLAP), "{unit}: {err}");
    }
    let fresh = hold(&db, "unit-201", "15m");
    assert_eq!(stay_of(&fresh), tonight);
    // And the schema holds them apart too.
    let err = sql(
        &db,
        &insert_row(&db, "direct", "unit-101", "held", &tonight.0, &tonight.1),
    )
    .expect_err("the schema refuses an overlap with a migrated booking");
    assert!(refused_by_schema(&db, &err), "{err}");
}

fn a_double_booking_made_before_stays_is_named_and_blocks_the_migration(db: Db) {
    make_v1(&db);
    for (id, unit, status) in [
        ("twice-a", "unit-101", "paid"),
        ("twice-b", "unit-101", "held"),
        ("alone", "unit-102", "held"),
    ] {
        sql(&db, &v1_row(&db, id, unit, status, 0)).unwrap();
    }
    let err = fails(&["init", db.arg()], 4);
    assert!(err.contains("double bookings"), "{err}");
    assert!(
        err.contains("unit `unit-101`") && err.contains("`twice-a`, `twice-b`"),
        "{err}"
    );
    assert!(!err.contains("`alone`"), "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
    // Nothing was changed: the schema is still the first version.
    let err = fails(&["list", db.arg()], 2);
    assert!(err.contains("reservations init"), "{err}");

    // The operator ends one of the two; then the migration goes through.
    let cancel = if db.backend == "sqlite" {
        "UPDATE reservations SET status = 'cancelled', cancelled_at = CAST(unixepoch('subsec') * 1000 AS INTEGER) WHERE id = 'twice-b'"
    } else {
        "UPDATE reservations.reservations SET status = 'cancelled', cancelled_at = now() WHERE id = 'twice-b'"
    };
    sql(&db, cancel).unwrap();
    json(&["init", db.arg()]);
    assert_eq!(list(&db).len(), 3);
}
