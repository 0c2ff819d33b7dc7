//! Versioned migrations (refinery) and the schema-version check.

use std::path::Path;
use std::time::Duration;

use errand_core::{Error, Result, SchemaStatus};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension};

use crate::map_err;

mod embedded {
    refinery::embed_migrations!("migrations");
}

const HISTORY_TABLE: &str = "errand_schema_history";

/// The schema version this build of the library expects.
pub const SCHEMA_VERSION: i64 = 17;

/// The version recorded in the database, or `None` if Errand's schema was
/// never applied.
pub fn schema_version(conn: &Connection) -> Result<Option<i64>> {
    let exists: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [HISTORY_TABLE],
            |r| r.get(0),
        )
        .optional()
        .map_err(map_err)?;
    if exists.is_none() {
        return Ok(None);
    }
    conn.query_row(
        &format!("SELECT MAX(version) FROM {HISTORY_TABLE}"),
        [],
        |r| r.get(0),
    )
    .map_err(map_err)
}

/// Applies every pending migration. Safe to run repeatedly; refuses a
/// database whose schema is newer than this build.
pub fn migrate(conn: &mut Connection) -> Result<()> {
    let db = Path::new(conn.path().unwrap_or_default());
    SchemaStatus::of_version(schema_version(conn)?, SCHEMA_VERSION)
        .require_migratable(&shown(db))?;
    embedded::migrations::runner()
        .set_migration_table_name(HISTORY_TABLE)
        .run(conn)
        .map_err(|e| Error::storage(format!("migration failed: {e}")))?;
    Ok(())
}

/// How a refusal names the database at `path`.
pub(crate) fn shown(path: &Path) -> String {
    path.display().to_string()
}

/// Looks at the file at `path` without changing it (a read-only
/// connection: no journal mode is set, an empty file stays empty) and says
/// whether it is an Errand database this program can use as it is.
///
/// # Errors
/// The path is a directory, or the file cannot be read (permissions, a
/// damaged database, a lock held longer than 5 seconds).
pub fn schema_status(path: &Path) -> Result<SchemaStatus> {
    inspect(path, Duration::from_secs(5))
}

/// [`schema_status`] waiting at most `busy_timeout` for another process's lock.
pub(crate) fn inspect(path: &Path, busy_timeout: Duration) -> Result<SchemaStatus> {
    let shown = path.display();
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(SchemaStatus::Missing),
        Err(e) => return Err(Error::invalid(format!("cannot read {shown}: {e}"))),
        Ok(m) if m.is_dir() => {
            return Err(Error::NotADatabase(format!(
                "{shown} is a directory; pass the path of a database file"
            )));
        }
        Ok(_) => {}
    }
    let conn = read_only(path, busy_timeout)?;
    // The first read of the schema is what finds out whether the file is a
    // database at all.
    let tables: rusqlite::Result<i64> =
        conn.query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0));
    match tables {
        Err(rusqlite::Error::SqliteFailure(f, _)) if f.code == ErrorCode::NotADatabase => {
            Ok(SchemaStatus::NotADatabase)
        }
        Err(e) => Err(map_err(e)),
        Ok(_) => Ok(SchemaStatus::of_version(
            schema_version(&conn)?,
            SCHEMA_VERSION,
        )),
    }
}

/// A read-only connection to a WAL-mode database creates its `-wal` and
/// `-shm` files when they are missing, and cannot remove them when it
/// closes. A WAL-mode database without a `-wal` file is not open anywhere
/// and holds everything in its main file, so it is read as immutable
/// instead (no locks, no side files): this returns the `file:` URI that
/// says so, or `None` to open the path as usual. (A process that opens the
/// database and checkpoints into it during this short look can at worst
/// make the look fail; a database it reports as usable is checked again
/// once opened for writing.)
fn immutable_uri(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::ffi::OsStrExt;
    let mut header = [0u8; 20];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut header))
        .ok()?;
    // The file format's write and read versions are 2 in WAL mode.
    let wal = header.starts_with(b"SQLite format 3\0") && header[18] == 2 && header[19] == 2;
    let mut log = path.as_os_str().to_owned();
    log.push("-wal");
    if !wal || Path::new(&log).exists() {
        return None;
    }
    let absolute = std::path::absolute(path).ok()?;
    let mut uri = String::from("file:");
    for &b in absolute.as_os_str().as_bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            uri.push(char::from(b));
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push_str("?immutable=1");
    Some(uri)
}

/// A read-only connection to the database at `path` that changes nothing
/// on disk: no journal mode is set and no side file is left next to it
/// (a WAL-mode database nobody has open is read as immutable). For a look
/// at a file before deciding to use it, as [`schema_status`] does; it
/// waits at most 5 seconds for another process's lock.
///
/// # Errors
/// The file cannot be opened. A file that is not a database is found out
/// by the first query, which fails with `SQLITE_NOTADB`.
pub fn open_read_only(path: &Path) -> Result<Connection> {
    read_only(path, Duration::from_secs(5))
}

fn read_only(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_URI;
    let conn = match immutable_uri(path) {
        Some(uri) => Connection::open_with_flags(uri, flags),
        None => Connection::open_with_flags(path, flags),
    }
    .map_err(|e| Error::invalid(format!("cannot open the database {}: {e}", path.display())))?;
    conn.busy_timeout(busy_timeout).map_err(map_err)?;
    Ok(conn)
}

/// Checks that the schema is exactly the one this build expects.
pub(crate) fn check(conn: &Connection) -> Result<()> {
    match SchemaStatus::of_version(schema_version(conn)?, SCHEMA_VERSION) {
        SchemaStatus::Current(_) => check_job_columns(conn),
        refused => refused.require_current(&shown(Path::new(conn.path().unwrap_or_default()))),
    }
}

/// Job rows are read by position: the table must have exactly the columns
/// the code expects, in order.
fn check_job_columns(conn: &Connection) -> Result<()> {
    let columns: Vec<String> = conn
        .prepare("SELECT name FROM pragma_table_info('errand_jobs') ORDER BY cid")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(map_err)?;
    if columns != crate::queue::JOB_COLUMNS {
        return Err(Error::storage(format!(
            "errand_jobs has the columns {columns:?}, not the ones schema version \
             {SCHEMA_VERSION} defines; the table was changed outside Errand's migrations"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use errand_core::{AdminStore, JobStore};
    use errand_core::{JobId, JobState, Lease, LeaseToken};

    /// A database file migrated to an older version, to seed rows into.
    fn at_version(version: i32) -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = Connection::open(dir.path().join("up.db")).unwrap();
        embedded::migrations::runner()
            .set_target(refinery::Target::Version(version))
            .set_migration_table_name(HISTORY_TABLE)
            .run(&mut conn)
            .unwrap();
        (dir, conn)
    }

    /// Closes the seeding connection and opens the store, which migrates.
    fn upgrade(dir: &tempfile::TempDir, conn: Connection) -> crate::SqliteStore {
        drop(conn);
        crate::SqliteStore::open(
            dir.path().join("up.db"),
            crate::SqliteOptions {
                migrate: true,
                ..crate::SqliteOptions::default()
            },
        )
        .unwrap()
    }

    /// Job rows are read by position, so a table whose columns differ from
    /// the expected ones is refused at open, naming the cause.
    #[test]
    fn a_job_table_with_other_columns_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        check(&conn).unwrap();
        conn.execute_batch("ALTER TABLE errand_jobs ADD COLUMN extra TEXT")
            .unwrap();
        let err = check(&conn).unwrap_err().to_string();
        assert!(err.contains("changed outside Errand's migrations"), "{err}");
    }

    /// A database at V2 with a running job (its attempt open in the history
    /// table) and a done one upgrades to V3: the running attempt moves onto
    /// the job row, shows once and open, and the job settles normally.
    #[tokio::test]
    async fn v3_moves_a_running_attempt_onto_the_job_row() {
        let (dir, conn) = at_version(2);
        // Times in ms: the open attempt started at 1000, the job last
        // changed at 2000.
        conn.execute_batch(
            "INSERT INTO errand_jobs (id, queue, kind, state, payload, attempts, max_attempts,
                 available_at, created_at, updated_at, lease_token, lease_until, finished_at)
             VALUES ('run', 'default', 'k', 'running', '{}', 2, 5, 0, 0, 2000, 'tok', 9000000000000, NULL),
                    ('fin', 'default', 'k', 'done', '{}', 1, 5, 0, 0, 2000, NULL, NULL, 2000);
             INSERT INTO errand_attempts (job_id, cycle, attempt, started_at, finished_at, outcome)
             VALUES ('run', 0, 1, 100, 500, 'retry'),
                    ('run', 0, 2, 1000, NULL, NULL),
                    ('fin', 0, 1, 1500, 2000, 'succeeded');",
        )
        .unwrap();
        let store = upgrade(&dir, conn);
        let run = store.detail(&JobId::new("run").unwrap()).await.unwrap();
        let summary: Vec<(u32, i64, Option<&str>, bool)> = run
            .history
            .iter()
            .map(|r| {
                (
                    r.attempt,
                    r.started_at.as_millis(),
                    r.outcome.as_deref(),
                    r.finished_at.is_some(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            vec![(1, 100, Some("retry"), true), (2, 1000, None, false)],
            "the open attempt shows once, still open, with its own start"
        );
        let fin = store.detail(&JobId::new("fin").unwrap()).await.unwrap();
        assert_eq!(fin.history.len(), 1, "a done job's history is unchanged");
        let lease = Lease {
            id: JobId::new("run").unwrap(),
            token: LeaseToken::from_string("tok".into()),
            attempt: 2,
        };
        store.complete(&lease).await.unwrap();
        let run = store.detail(&JobId::new("run").unwrap()).await.unwrap();
        let outcomes: Vec<Option<&str>> =
            run.history.iter().map(|r| r.outcome.as_deref()).collect();
        assert_eq!(outcomes, vec![Some("retry"), Some("succeeded")]);
    }

    /// A database at V3 with audit entries (one of a job that still exists,
    /// one of a job pruned since) upgrades to V4: the entries keep their
    /// order and fields, gain the queue of a job that still exists, and the
    /// log takes the new actions.
    #[tokio::test]
    async fn v4_keeps_the_audit_log_and_widens_it() {
        let (dir, conn) = at_version(3);
        conn.execute_batch(
            "INSERT INTO errand_jobs (id, queue, kind, state, payload, attempts, max_attempts,
                 available_at, created_at, updated_at, finished_at)
             VALUES ('kept', 'mail', 'k', 'dead', '{}', 1, 1, 0, 0, 2000, 2000);
             INSERT INTO errand_audit (job_id, action, operator, reason, at)
             VALUES ('gone', 'cancel', 'alice', NULL, 100),
                    ('kept', 'replay', 'bob', 'fixed', 200);",
        )
        .unwrap();
        let store = upgrade(&dir, conn);
        let log = store
            .audit_log(&errand_core::AuditFilter::default())
            .await
            .unwrap();
        let summary: Vec<String> = log
            .iter()
            .map(|e| {
                format!(
                    "{} {:?} {:?} {} {}",
                    e.action,
                    e.job_id.as_ref().map(JobId::as_str),
                    e.queue.as_ref().map(errand_core::Name::as_str),
                    e.operator,
                    e.at.as_millis(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                r#"replay Some("kept") Some("mail") bob 200"#,
                r#"cancel Some("gone") None alice 100"#,
            ]
        );
        let purge = errand_core::PurgeRequest {
            ids: vec![JobId::new("kept").unwrap()],
            operator: "carol".into(),
            reason: "done with it".into(),
        };
        errand_core::Admin::new(std::sync::Arc::new(store.clone()))
            .purge(&purge)
            .await
            .unwrap();
        let log = store
            .audit_log(&errand_core::AuditFilter::default())
            .await
            .unwrap();
        assert_eq!(log.len(), 3);
        assert_eq!(log[0].action, "purge");
        assert!(log[0].seq > log[1].seq);
    }

    /// A database at V6 with audit entries upgrades to V7: the entries keep
    /// their sequence numbers and fields, and the log takes a `copy` entry
    /// that names both jobs and shows in each job's history.
    #[tokio::test]
    async fn v7_keeps_the_audit_log_and_records_copies() {
        let (dir, conn) = at_version(6);
        conn.execute_batch(
            "INSERT INTO errand_jobs (id, queue, kind, state, payload, attempts, max_attempts,
                 available_at, created_at, updated_at, finished_at)
             VALUES ('kept', 'mail', 'k', 'dead', '{}', 1, 1, 0, 0, 2000, 2000);
             INSERT INTO errand_audit (seq, job_id, queue, action, operator, reason, at)
             VALUES (7, 'gone', 'mail', 'cancel', 'alice', NULL, 100),
                    (9, NULL, 'mail', 'pause', 'bob', 'deploy', 200);",
        )
        .unwrap();
        let store = upgrade(&dir, conn);
        let log = store
            .audit_log(&errand_core::AuditFilter::default())
            .await
            .unwrap();
        let summary: Vec<String> = log
            .iter()
            .map(|e| {
                format!(
                    "{} {} {:?} {} {:?} {}",
                    e.seq,
                    e.action,
                    e.job_id.as_ref().map(JobId::as_str),
                    e.operator,
                    e.reason,
                    e.at.as_millis(),
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                r#"9 pause None bob Some("deploy") 200"#,
                r#"7 cancel Some("gone") alice None 100"#,
            ]
        );
        let copied = errand_core::Admin::new(std::sync::Arc::new(store.clone()))
            .copy(&errand_core::CopyRequest {
                ids: vec![JobId::new("kept").unwrap()],
                operator: "carol".into(),
                reason: Some("fixed the template".into()),
            })
            .await
            .unwrap();
        assert_eq!(copied.len(), 1);
        let log = store
            .audit_log(&errand_core::AuditFilter::default())
            .await
            .unwrap();
        assert_eq!(log.len(), 3);
        assert_eq!(log[0].action, "copy");
        assert!(log[0].seq > 9, "new entries follow the kept ones");
        assert_eq!(log[0].copy_id.as_ref(), Some(&copied[0].job.id));
        let copy = store.detail(&copied[0].job.id).await.unwrap();
        assert_eq!(copy.audit.len(), 1, "the copy's history shows its origin");
    }

    /// V14 rebuilds the audit table for the schedule actions: every entry
    /// is kept with its sequence number and fields, and new entries follow.
    #[tokio::test]
    async fn v14_keeps_the_audit_log_and_records_schedule_changes() {
        let (dir, conn) = at_version(13);
        conn.execute_batch(
            "INSERT INTO errand_audit (seq, job_id, queue, action, operator, reason, at, copy_id)
             VALUES (3, 'a', 'mail', 'copy', 'alice', 'again', 100, 'b'),
                    (5, NULL, 'mail', 'pause', 'bob', NULL, 200, NULL),
                    (8, 'c', 'mail', 'reschedule', 'carol', 'run now', 300, NULL);",
        )
        .unwrap();
        let store = upgrade(&dir, conn);
        let summary = |log: &[errand_core::AuditEntry]| -> Vec<String> {
            log.iter()
                .map(|e| {
                    format!(
                        "{} {} {:?} {:?} {:?} {} {:?} {}",
                        e.seq,
                        e.action,
                        e.job_id.as_ref().map(JobId::as_str),
                        e.copy_id.as_ref().map(JobId::as_str),
                        e.schedule.as_ref().map(errand_core::Name::as_str),
                        e.operator,
                        e.reason,
                        e.at.as_millis(),
                    )
                })
                .collect()
        };
        let log = store
            .audit_log(&errand_core::AuditFilter::default())
            .await
            .unwrap();
        assert_eq!(
            summary(&log),
            [
                r#"8 reschedule Some("c") None None carol Some("run now") 300"#,
                r#"5 pause None None None bob None 200"#,
                r#"3 copy Some("a") Some("b") None alice Some("again") 100"#,
            ]
        );
        let def = errand_core::ScheduleDefinition::new(
            "nightly",
            "0 3 * * *",
            "report",
            errand_core::Payload::default(),
        )
        .unwrap();
        let admin = errand_core::Admin::new(std::sync::Arc::new(store.clone()));
        admin
            .add_schedule(&errand_core::ScheduleAdd {
                definition: def,
                replace: false,
                operator: "dan".into(),
                reason: None,
            })
            .await
            .unwrap();
        let log = store
            .audit_log(&errand_core::AuditFilter::default())
            .await
            .unwrap();
        assert_eq!(log.len(), 4);
        assert_eq!(log[0].action, "schedule_add");
        assert!(log[0].seq > 8, "new entries follow the kept ones");
        // The copy index still finds the entry that made a copy.
        let of_copy = store
            .audit_log(&errand_core::AuditFilter {
                job: Some(JobId::new("b").unwrap()),
                ..errand_core::AuditFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(of_copy.len(), 1);
    }

    /// A database at V7 with a job in each state upgrades to V8: the
    /// listing still finds every job by state (running ones through the
    /// lease index), the running job settles, and retention still prunes
    /// finished jobs through the now partial listing index.
    #[tokio::test]
    async fn v8_lists_every_state_and_prunes_after_the_listing_index_narrows() {
        let (dir, conn) = at_version(7);
        conn.execute_batch(
            "INSERT INTO errand_jobs (id, queue, kind, state, payload, attempts, max_attempts,
                 available_at, created_at, updated_at, lease_token, lease_until, finished_at)
             VALUES ('r', 'default', 'k', 'ready', '{}', 0, 5, 0, 1, 1, NULL, NULL, NULL),
                    ('g', 'default', 'k', 'running', '{}', 1, 5, 0, 2, 2, 'tok', 9000000000000, NULL),
                    ('d', 'default', 'k', 'done', '{}', 1, 5, 0, 3, 3, NULL, NULL, 3),
                    ('x', 'default', 'k', 'dead', '{}', 5, 5, 0, 4, 4, NULL, NULL, 4),
                    ('c', 'default', 'k', 'cancelled', '{}', 0, 5, 0, 5, 5, NULL, NULL, 5);",
        )
        .unwrap();
        let store = upgrade(&dir, conn);
        let listed = |state: Option<JobState>| {
            let store = &store;
            async move {
                let filter = errand_core::JobFilter {
                    state,
                    ..errand_core::JobFilter::default()
                };
                let jobs = store.list(&filter).await.unwrap();
                jobs.iter()
                    .map(|j| j.id.as_str().to_owned())
                    .collect::<Vec<_>>()
                    .join(",")
            }
        };
        assert_eq!(listed(None).await, "r,g,d,x,c");
        for (state, id) in [
            (JobState::Ready, "r"),
            (JobState::Running, "g"),
            (JobState::Done, "d"),
            (JobState::Dead, "x"),
            (JobState::Cancelled, "c"),
        ] {
            assert_eq!(listed(Some(state)).await, id, "{state:?}");
        }
        let lease = Lease {
            id: JobId::new("g").unwrap(),
            token: LeaseToken::from_string("tok".into()),
            attempt: 1,
        };
        store.complete(&lease).await.unwrap();
        assert_eq!(listed(Some(JobState::Done)).await, "g,d");
        assert_eq!(listed(Some(JobState::Running)).await, "");
        // Done and cancelled jobs finished at 3, 5 and now; only the
        // running job's fresh `done` row is younger than a day.
        let pruned = store
            .prune(std::time::Duration::from_secs(86_400), 100)
            .await
            .unwrap();
        assert_eq!(pruned, 2);
        assert_eq!(listed(None).await, "r,g,x");
        let index: String = Connection::open(dir.path().join("up.db"))
            .unwrap()
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'errand_jobs_state'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(index.contains("WHERE state <> 'running'"), "{index}");
    }

    #[test]
    fn the_embedded_migrations_end_at_the_declared_version() {
        let runner = embedded::migrations::runner();
        let last = runner
            .get_migrations()
            .iter()
            .map(|m| i64::from(m.version()))
            .max();
        assert_eq!(last, Some(SCHEMA_VERSION));
    }
}
