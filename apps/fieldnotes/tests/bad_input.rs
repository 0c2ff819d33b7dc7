#![allow(clippy::unwrap_used)]
//! Bad input through the real binary: a clear message on stderr, a
//! non-zero exit code, and nothing written.

mod common;

use common::*;
use fieldnotes::{EXIT_NOT_FOUND, EXIT_REFUSED, EXIT_RUNTIME, EXIT_USAGE};

fn code(o: &std::process::Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn assert_fails(o: &std::process::Output, exit: u8, message: &str) {
    let err = stderr(o);
    assert_eq!(
        code(o),
        i32::from(exit),
        "stderr: {err}\nstdout: {}",
        stdout(o)
    );
    assert!(err.starts_with("fieldnotes: "), "{err}");
    assert!(err.contains(message), "expected {message:?} in: {err}");
    assert!(stdout(o).is_empty(), "{}", stdout(o));
}

#[test]
fn paying_for_an_unknown_document_writes_nothing() {
    let db = Db::init();
    let o = run(&["pay", db.arg(), "--document", "document-404"]);
    assert_fails(&o, EXIT_NOT_FOUND, "no document `document-404`");
    assert_eq!(db.balance(), 10_000);
    assert_eq!(db.count("payments"), 0);
    assert_eq!(db.count("errand_jobs"), 0);
}

#[test]
fn paying_twice_for_a_document_is_refused() {
    let db = Db::init();
    pay(&db);
    let o = run(&["pay", db.arg()]);
    assert_fails(&o, EXIT_REFUSED, "already published");
    assert_eq!(db.balance(), 9_500);
    assert_eq!(db.count("payments"), 1);
    assert_eq!(db.count("errand_jobs"), 1);
}

#[test]
fn paying_without_funds_is_refused() {
    let db = Db::init();
    db.conn()
        .execute("UPDATE authors SET balance_cents = 499", [])
        .unwrap();
    let o = run(&["pay", db.arg(), "--document", "document-8"]);
    assert_fails(&o, EXIT_REFUSED, "insufficient funds");
    assert_eq!(db.balance(), 499);
    assert_eq!(db.count("errand_jobs"), 0);
}

#[test]
fn replaying_an_unknown_job_is_refused() {
    let db = Db::init();
    let o = run(&["replay", db.arg(), "0190aaaa-0000-7000-8000-000000000000"]);
    assert_fails(&o, EXIT_NOT_FOUND, "no job with id");
    assert_eq!(db.count("errand_audit"), 0);

    let o = run(&["replay", db.arg(), "not a job id"]);
    assert_fails(&o, EXIT_USAGE, "job id");
}

#[test]
fn replaying_a_job_that_is_not_dead_changes_nothing() {
    let db = Db::init();
    let id = pay(&db);
    // Ready.
    let o = run(&["replay", db.arg(), &id]);
    assert_fails(&o, EXIT_REFUSED, "is ready, not dead");
    // Done.
    ok(&["work", db.arg()]);
    let before = only_job(&db);
    let o = run(&["replay", db.arg(), &id, "--by", "x"]);
    assert_fails(&o, EXIT_REFUSED, "is done, not dead");
    assert_eq!(only_job(&db), before);
    assert_eq!(db.count("errand_audit"), 0);
    assert_eq!(receipts(&db).len(), 1);
}

#[test]
fn a_missing_database_is_refused_and_not_created() {
    let db = Db::empty();
    for args in [
        vec!["jobs", db.arg()],
        vec!["work", db.arg()],
        vec!["pay", db.arg()],
        vec!["receipts", db.arg()],
        vec!["replay", db.arg(), "some-id"],
        vec!["serve", db.arg(), "--port", "0"],
    ] {
        let o = run(&args);
        assert_fails(&o, EXIT_USAGE, "no database at");
        assert!(stderr(&o).contains("fieldnotes init"), "{}", stderr(&o));
        assert!(!db.path.exists(), "{args:?} created the file");
    }
    let names: Vec<_> = std::fs::read_dir(db.dir.path()).unwrap().collect();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn a_file_that_is_not_sqlite_is_refused_and_left_alone() {
    let db = Db::empty();
    let text = "these are my field notes, not a database\n".repeat(20);
    std::fs::write(&db.path, &text).unwrap();
    for args in [
        vec!["jobs", db.arg()],
        vec!["work", db.arg()],
        vec!["pay", db.arg()],
        vec!["init", db.arg()],
    ] {
        let o = run(&args);
        assert_fails(&o, EXIT_USAGE, "is not a SQLite database");
    }
    assert_eq!(std::fs::read_to_string(&db.path).unwrap(), text);
    assert_eq!(std::fs::read_dir(db.dir.path()).unwrap().count(), 1);
}

#[test]
fn a_database_without_field_notes_tables_names_init() {
    // An empty file, a SQLite file of another program, and a file with
    // only Errand's tables.
    let empty = Db::empty();
    std::fs::write(&empty.path, "").unwrap();
    let other = Db::empty();
    other
        .conn()
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY)")
        .unwrap();
    let errand_only = Db::empty();
    drop(
        errand::SqliteStore::open(
            &errand_only.path,
            errand::SqliteOptions {
                create: true,
                migrate: true,
                ..Default::default()
            },
        )
        .unwrap(),
    );
    for db in [&empty, &other, &errand_only] {
        for cmd in ["jobs", "work", "pay", "receipts"] {
            let o = run(&[cmd, db.arg()]);
            assert_fails(&o, EXIT_USAGE, "not a Field Notes database");
            assert!(
                stderr(&o).contains(&format!("fieldnotes init {}", db.arg())),
                "{}",
                stderr(&o)
            );
        }
    }
    // Looking did not change the other program's file (not even to WAL).
    let mode: String = other
        .conn()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    // `init` is the fix.
    ok(&["init", errand_only.arg()]);
    assert_eq!(json(&["jobs", errand_only.arg()]), serde_json::json!([]));
}

#[test]
fn a_database_with_a_newer_errand_schema_is_refused() {
    let db = Db::init();
    pay(&db);
    db.conn()
        .execute(
            "INSERT INTO errand_schema_history (version, name, applied_on, checksum)
             VALUES (99, 'future', '2030-01-01T00:00:00Z', '0')",
            [],
        )
        .unwrap();
    for cmd in ["jobs", "work", "pay", "receipts", "init"] {
        let o = run(&[cmd, db.arg()]);
        assert_fails(&o, EXIT_RUNTIME, "newer");
        assert!(stderr(&o).contains("99"), "{}", stderr(&o));
    }
    // Nothing was touched.
    assert_eq!(db.balance(), 9_500);
    let state: String = db
        .conn()
        .query_row("SELECT state FROM errand_jobs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(state, "ready");
    assert_eq!(db.count("receipts"), 0);
}

#[test]
fn a_database_with_a_newer_field_notes_schema_is_refused() {
    let db = Db::init();
    db.conn()
        .execute(
            "INSERT INTO fieldnotes_schema_history (version, name, applied_on, checksum)
             VALUES (42, 'future', '2030-01-01T00:00:00Z', '0')",
            [],
        )
        .unwrap();
    for cmd in ["jobs", "work", "pay", "init"] {
        let o = run(&[cmd, db.arg()]);
        assert_fails(&o, EXIT_RUNTIME, "newer");
    }
    assert_eq!(db.count("payments"), 0);
}

#[test]
fn usage_errors_exit_2() {
    let o = run(&["pay"]);
    assert_eq!(code(&o), 2);
    let o = run(&["work", "x.db", "--no-such-flag"]);
    assert_eq!(code(&o), 2);
    let o = run(&["serve", "x.db", "--port", "99999"]);
    assert_eq!(code(&o), 2);
}
