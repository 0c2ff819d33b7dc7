//! Opening a store: the files it refuses and leaves as they were, the
//! connection settings it applies, and its readers, writer and wake-up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use errand_core::{ClaimRequest, Error, JobStore, NewJob, Notifier, Result};
use rusqlite::Connection;

use crate::conn::map_err;
use crate::{
    SCHEMA_VERSION, SchemaStatus, SqliteOptions, SqliteStore, Synchronous, schema, schema_status,
};

fn pragma(store: &SqliteStore, name: &'static str) -> String {
    store
        .read_blocking(|c| {
            c.query_row(&format!("PRAGMA {name}"), [], |r| {
                r.get::<_, rusqlite::types::Value>(0)
            })
            .map(|v| format!("{v:?}"))
            .map_err(map_err)
        })
        .unwrap()
}

#[test]
fn a_storage_failure_keeps_the_sqlite_error_as_its_source() {
    use std::error::Error as _;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(
        dir.path().join("src.db"),
        SqliteOptions {
            create: true,
            migrate: true,
            ..SqliteOptions::default()
        },
    )
    .unwrap();
    let err = store
        .read_blocking(|c| {
            c.query_row("SELECT no_such_column FROM errand_jobs", [], |r| {
                r.get::<_, i64>(0)
            })
            .map_err(map_err)
        })
        .unwrap_err();
    assert_eq!(err.code(), "storage", "{err}");
    let source = err.source().expect("the driver's error");
    let sqlite = source
        .downcast_ref::<rusqlite::Error>()
        .expect("a rusqlite::Error");
    assert!(sqlite.to_string().contains("no_such_column"), "{sqlite}");
}

/// A store reads on the reader it opened with, though no new one could
/// be opened now (here the file is gone; in a server, descriptors can
/// run out); a reader opened later that fails is a storage failure,
/// not the caller's invalid input.
#[test]
fn reads_need_no_new_connection_and_a_late_open_is_a_storage_failure() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gone.db");
    let store = SqliteStore::open(
        &path,
        SqliteOptions {
            create: true,
            migrate: true,
            ..SqliteOptions::default()
        },
    )
    .unwrap();
    std::fs::remove_file(&path).unwrap();
    let inner = store.clone();
    let (jobs, nested) = store
        .read_blocking(move |c| {
            let jobs: i64 = c
                .query_row("SELECT count(*) FROM errand_jobs", [], |r| r.get(0))
                .map_err(map_err)?;
            // The only reader is in use: this one must be opened.
            Ok((jobs, inner.read_blocking(|_| Ok(()))))
        })
        .unwrap();
    assert_eq!(jobs, 0);
    let err = nested.expect_err("the file is gone");
    assert_eq!(err.code(), "storage", "{err}");
    assert!(err.to_string().contains("gone.db"), "{err}");
}

#[test]
fn wal_and_the_chosen_synchronous_level_are_applied() {
    let dir = tempfile::tempdir().unwrap();
    for (sync, level) in [
        (Synchronous::Full, "Integer(2)"),
        (Synchronous::Normal, "Integer(1)"),
    ] {
        let path = dir.path().join(format!("{sync:?}.db"));
        let options = SqliteOptions {
            create: true,
            migrate: true,
            synchronous: sync,
            ..Default::default()
        };
        let store = SqliteStore::open(&path, options).unwrap();
        assert_eq!(pragma(&store, "synchronous"), level);
        assert_eq!(pragma(&store, "journal_mode"), "Text(\"wal\")");
        assert_eq!(pragma(&store, "busy_timeout"), "Integer(5000)");
    }
}

#[tokio::test]
async fn an_insert_wakes_an_idle_worker_of_this_process() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        create: true,
        migrate: true,
        ..Default::default()
    };
    let store = SqliteStore::open(dir.path().join("w.db"), options).unwrap();
    let mut signal = store.work_signal();
    let waiter = tokio::spawn(async move { signal.wait(Duration::from_secs(30)).await });
    let job = NewJob::new("k", errand_core::Payload::default()).unwrap();
    store.insert(job).await.unwrap();
    assert!(
        waiter.await.unwrap(),
        "woken by the insert, not by the timeout"
    );
    // A claim does not wake anyone.
    let mut signal = store.work_signal();
    let req = ClaimRequest {
        queues: vec![],
        limit: 1,
        lease: Duration::from_secs(5),
        rate: None,
        reclaim: true,
    };
    store.claim(&req).await.unwrap();
    assert!(!signal.wait(Duration::from_millis(50)).await);
}

#[tokio::test]
async fn commits_counts_the_writer_threads_transactions() {
    let dir = tempfile::tempdir().unwrap();
    let options = SqliteOptions {
        create: true,
        migrate: true,
        ..Default::default()
    };
    let store = SqliteStore::open(dir.path().join("c.db"), options).unwrap();
    assert_eq!(
        store.commits(),
        0,
        "migrations run before the writer starts"
    );
    let job = || NewJob::new("k", errand_core::Payload::default()).unwrap();
    store.insert(job()).await.unwrap();
    assert_eq!(store.commits(), 1);
    store.insert_many(vec![job(), job(), job()]).await.unwrap();
    assert_eq!(store.commits(), 2, "one insert_many is one transaction");
    // A failed operation rolls back to its savepoint; the (empty)
    // transaction still commits.
    let err: Result<()> = store
        .write(|_, _| Err(Error::invalid("refused on purpose")))
        .await;
    assert!(err.is_err());
    assert_eq!(store.commits(), 3);
}

/// Files a store may not use as they are: each with the status
/// `schema_status` gives it and the error opening it gives.
fn foreign_files(dir: &Path) -> Vec<(PathBuf, SchemaStatus)> {
    let empty = dir.join("empty.db");
    std::fs::write(&empty, b"").unwrap();
    let other = dir.join("other.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE notes (id INTEGER PRIMARY KEY); INSERT INTO notes VALUES (1);")
        .unwrap();
    let text = dir.join("notes.txt");
    std::fs::write(&text, "not a database\n".repeat(100)).unwrap();
    // In WAL mode, as `errand migrate` leaves a database.
    let newer = dir.join("newer.db");
    let mut conn = Connection::open(&newer).unwrap();
    let mode: String = conn
        .query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");
    schema::migrate(&mut conn).unwrap();
    conn.execute(
        "INSERT INTO errand_schema_history (version, name, applied_on, checksum) VALUES (?1, 'future', '2030-01-01', '0')",
        [SCHEMA_VERSION + 1],
    )
    .unwrap();
    drop(conn);
    // As a development build before release 0.1 left a database.
    let development = dir.join("development.db");
    Connection::open(&development)
        .unwrap()
        .execute_batch(
            "CREATE TABLE errand_schema_history (version INTEGER PRIMARY KEY, name TEXT,
                 applied_on TEXT, checksum TEXT);
             INSERT INTO errand_schema_history VALUES (1, 'jobs', '2026-09-01', '1'),
                 (17, 'dependency_edges_by_source_and_met', '2026-11-30', '17');
             CREATE TABLE errand_jobs (id TEXT PRIMARY KEY);",
        )
        .unwrap();
    vec![
        (empty, SchemaStatus::NotErrand),
        (development, SchemaStatus::Unreleased { found: 17 }),
        (other, SchemaStatus::NotErrand),
        (text, SchemaStatus::NotADatabase),
        (
            newer,
            SchemaStatus::Newer {
                found: SCHEMA_VERSION + 1,
                known: SCHEMA_VERSION,
            },
        ),
    ]
}

#[test]
fn opening_without_create_or_migrate_refuses_a_foreign_file_and_leaves_it_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let files = foreign_files(dir.path());
    let listing = || {
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let before_all = listing();
    for (path, status) in files {
        let before = std::fs::read(&path).unwrap();
        assert_eq!(schema_status(&path).unwrap(), status, "{}", path.display());
        let err = SqliteStore::open(&path, SqliteOptions::default()).unwrap_err();
        let expected = match status {
            SchemaStatus::NotADatabase => matches!(err, Error::NotADatabase(_)),
            SchemaStatus::Newer { .. } => matches!(err, Error::SchemaTooNew(_)),
            SchemaStatus::Unreleased { .. } => matches!(err, Error::SchemaUnreleased(_)),
            SchemaStatus::NotErrand => matches!(err, Error::NotErrand(_)),
            _ => false,
        };
        assert!(expected, "{}: {err}", path.display());
        let after = std::fs::read(&path).unwrap();
        assert!(
            after == before,
            "{} was changed ({} bytes before, {} after)",
            path.display(),
            before.len(),
            after.len()
        );
    }
    assert_eq!(listing(), before_all, "no side files were left");
    // Looking did not switch the other program's database to WAL.
    let mode: String = Connection::open(dir.path().join("other.db"))
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "delete");
    assert_eq!(
        schema_status(&dir.path().join("missing.db")).unwrap(),
        SchemaStatus::Missing
    );
    assert!(!dir.path().join("missing.db").exists());
    assert!(schema_status(dir.path()).is_err(), "a directory");
}

#[test]
fn a_current_database_is_opened_and_a_development_builds_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ok.db");
    let options = SqliteOptions {
        create: true,
        migrate: true,
        ..Default::default()
    };
    drop(SqliteStore::open(&path, options.clone()).unwrap());
    assert_eq!(
        schema_status(&path).unwrap(),
        SchemaStatus::Current(SCHEMA_VERSION)
    );
    SqliteStore::open(&path, SqliteOptions::default()).unwrap();
    // The same tables under a history that does not begin with the
    // baseline: refused at open, and migrating does not touch it.
    Connection::open(&path)
        .unwrap()
        .execute(
            "UPDATE errand_schema_history SET name = 'jobs' WHERE version = 1",
            [],
        )
        .unwrap();
    let status = schema_status(&path).unwrap();
    assert_eq!(status, SchemaStatus::Unreleased { found: 1 });
    let err = SqliteStore::open(&path, SqliteOptions::default()).unwrap_err();
    assert!(matches!(err, Error::SchemaUnreleased(_)), "{err}");
    let err = SqliteStore::open(&path, options).unwrap_err();
    assert!(matches!(err, Error::SchemaUnreleased(_)), "{err}");
    assert!(err.to_string().contains("recreate it"), "{err}");
}

#[test]
fn an_unmigrated_database_names_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bare.db");
    let err = SqliteStore::open(
        &path,
        SqliteOptions {
            create: true,
            ..Default::default()
        },
    )
    .unwrap_err();
    assert!(matches!(err, Error::NotErrand(_)), "{err}");
    assert!(err.to_string().contains("errand migrate"));
}
