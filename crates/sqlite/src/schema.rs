//! Versioned migrations (refinery) and the schema-version check.

use std::path::Path;
use std::time::Duration;

pub use errand_core::SCHEMA_VERSION;
use errand_core::{Error, Result, SchemaStatus};
use rusqlite::{Connection, ErrorCode, OpenFlags, OptionalExtension};

use crate::conn::map_err;

mod embedded {
    refinery::embed_migrations!("migrations");
}

const HISTORY_TABLE: &str = "errand_schema_history";

/// The version recorded in the database, or `None` if Errand's schema was
/// never applied.
pub fn schema_version(conn: &Connection) -> Result<Option<i64>> {
    Ok(history(conn)?.0)
}

/// The last version the schema history records and the name of its
/// version 1, or `(None, None)` without a history.
fn history(conn: &Connection) -> Result<(Option<i64>, Option<String>)> {
    let exists: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [HISTORY_TABLE],
            |r| r.get(0),
        )
        .optional()
        .map_err(map_err)?;
    if exists.is_none() {
        return Ok((None, None));
    }
    conn.query_row(
        &format!(
            "SELECT MAX(version), (SELECT name FROM {HISTORY_TABLE} WHERE version = 1) \
             FROM {HISTORY_TABLE}"
        ),
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .map_err(map_err)
}

/// What the database on `conn` holds, judged against this build's version.
fn status(conn: &Connection) -> Result<SchemaStatus> {
    let (found, first) = history(conn)?;
    Ok(SchemaStatus::of_history(
        found,
        first.as_deref(),
        SCHEMA_VERSION,
    ))
}

/// Applies every pending migration. Safe to run repeatedly; refuses a
/// database whose schema is newer than this build, or a development
/// build's from before release 0.1, and changes nothing in it.
pub fn migrate(conn: &mut Connection) -> Result<()> {
    let db = Path::new(conn.path().unwrap_or_default());
    status(conn)?.require_migratable(&shown(db))?;
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
        Ok(_) => status(&conn),
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
    match status(conn)? {
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
    if columns != crate::rows::JOB_COLUMNS {
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

    fn migrated() -> Connection {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        conn
    }

    /// Job rows are read by position, so a table whose columns differ from
    /// the expected ones is refused at open, naming the cause.
    #[test]
    fn a_job_table_with_other_columns_is_refused() {
        let conn = migrated();
        check(&conn).unwrap();
        conn.execute_batch("ALTER TABLE errand_jobs ADD COLUMN extra TEXT")
            .unwrap();
        let err = check(&conn).unwrap_err().to_string();
        assert!(err.contains("changed outside Errand's migrations"), "{err}");
    }

    #[test]
    fn the_embedded_migrations_begin_with_the_baseline_and_end_at_the_declared_version() {
        let runner = embedded::migrations::runner();
        let migrations = runner.get_migrations();
        let first = migrations.iter().min_by_key(|m| m.version()).unwrap();
        assert_eq!(
            (first.version(), first.name()),
            (1, errand_core::BASELINE_NAME)
        );
        let last = migrations.iter().map(|m| i64::from(m.version())).max();
        assert_eq!(last, Some(SCHEMA_VERSION));
        let conn = migrated();
        assert_eq!(
            status(&conn).unwrap(),
            SchemaStatus::Current(SCHEMA_VERSION)
        );
    }

    /// A database a development build left (its history begins with
    /// another first migration) is refused by `migrate`, which changes
    /// nothing in it, and by the check at open.
    #[test]
    fn a_development_build_database_is_refused_and_left_as_it_was() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("old.db");
        let mut conn = Connection::open(&path).unwrap();
        conn.execute_batch(&format!(
            "CREATE TABLE {HISTORY_TABLE} (version INTEGER PRIMARY KEY, name TEXT,
                 applied_on TEXT, checksum TEXT);
             INSERT INTO {HISTORY_TABLE} VALUES (1, 'jobs', '2026-09-01', '1'),
                 (2, 'concurrency_keys', '2026-09-02', '2'), (17, 'dependency_edges', '2026-11-30', '17');
             CREATE TABLE errand_jobs (id TEXT PRIMARY KEY, state TEXT);
             INSERT INTO errand_jobs VALUES ('kept', 'ready');"
        ))
        .unwrap();
        let before = dump(&conn);
        let err = migrate(&mut conn).unwrap_err();
        assert!(matches!(err, Error::SchemaUnreleased(_)), "{err}");
        let message = err.to_string();
        for part in [
            path.display().to_string(),
            "development version 17".into(),
            "before release 0.1".into(),
            "errand migrate".into(),
        ] {
            assert!(message.contains(&part), "{part:?} missing in: {message}");
        }
        assert_eq!(dump(&conn), before);
        assert!(matches!(check(&conn), Err(Error::SchemaUnreleased(_))));
        drop(conn);
        assert_eq!(
            schema_status(&path).unwrap(),
            SchemaStatus::Unreleased { found: 17 }
        );
    }

    /// Every schema object and every history row, in one text.
    fn dump(conn: &Connection) -> String {
        let rows: Vec<String> = conn
            .prepare(&format!(
                "SELECT sql FROM sqlite_master WHERE sql IS NOT NULL
                 UNION ALL SELECT version || ' ' || name FROM {HISTORY_TABLE}
                 UNION ALL SELECT id || ' ' || state FROM errand_jobs"
            ))
            .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
            .unwrap();
        rows.join("\n")
    }

    /// Job states and the words the library defines (actions, failure
    /// classes, outcomes) are checked for their shape only: the library
    /// holds their lists, so a new one changes no table; the rules that
    /// tie a state to other columns stay CHECKs.
    #[test]
    fn the_schema_checks_the_shape_of_states_and_library_words() {
        let conn = migrated();
        let insert = |id: &str, state: &str| {
            conn.execute(
                "INSERT INTO errand_jobs (id, queue, kind, state, payload, max_attempts,
                     available_at, created_at, updated_at, waiting_on, on_dependency_failure)
                 VALUES (?1, 'q', 'k', ?2, '{}', 3, 0, 0, 0,
                     CASE ?2 WHEN 'blocked' THEN 1 ELSE 0 END,
                     CASE ?2 WHEN 'blocked' THEN 'wait' END)",
                [id, state],
            )
        };
        insert("b", "blocked").unwrap();
        insert("r", "ready").unwrap();
        // A state of the right shape is the library's to judge.
        insert("w", "on_review").unwrap();
        for bad in ["Ready", "in progress", ""] {
            assert!(insert("x", bad).is_err(), "{bad:?}");
        }
        // A rule tying a state to other columns: only a running job has a
        // lease.
        conn.execute(
            "UPDATE errand_jobs SET state = 'running' WHERE id = 'r'",
            [],
        )
        .unwrap_err();
        conn.execute(
            "UPDATE errand_jobs SET last_error_class = 'a_new_class' WHERE id = 'r'",
            [],
        )
        .unwrap();
        conn.execute(
            "UPDATE errand_jobs SET last_error_class = 'Bad Class' WHERE id = 'r'",
            [],
        )
        .unwrap_err();
        let audit =
            |job: Option<&str>, queue: Option<&str>, action: &str, schedule: Option<&str>| {
                conn.execute(
                "INSERT INTO errand_audit (job_id, queue, action, operator, reason, at, schedule)
                 VALUES (?1, ?2, ?3, 'alice', 'why', 0, ?4)",
                rusqlite::params![job, queue, action, schedule],
            )
            };
        audit(Some("r"), Some("q"), "a_new_action", None).unwrap();
        audit(None, Some("q"), "pause", None).unwrap();
        audit(None, None, "schedule_add", Some("nightly")).unwrap();
        audit(Some("r"), Some("q"), "Not-A-Word", None).unwrap_err();
        // Nothing named, or both a job and a schedule.
        audit(None, None, "pause", None).unwrap_err();
        audit(Some("r"), None, "cancel", Some("nightly")).unwrap_err();
        // A purge says why.
        conn.execute(
            "INSERT INTO errand_audit (job_id, queue, action, operator, at)
             VALUES ('r', 'q', 'purge', 'alice', 0)",
            [],
        )
        .unwrap_err();
    }
}
