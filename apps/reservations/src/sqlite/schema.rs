//! Opening and initialising the SQLite database: the checks of the file
//! and of both schema versions (on read-only connections), the migrations,
//! the seed units and the refusal of a version-1 database whose holds would
//! overlap.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use errand::sqlite::SchemaStatus;
use errand::sqlite::rusqlite::{self, Connection, OptionalExtension, params};
use errand::{Clock, SqliteOptions, SqliteStore};

use super::{Sqlite, units_in};
use crate::error::{Error, Result};
use crate::model::{
    APP_HISTORY_TABLE, APP_SCHEMA_VERSION, InitReport, LegacyOverlap, SEED_UNITS,
    legacy_overlap_refusal,
};

mod embedded {
    refinery::embed_migrations!("migrations/sqlite");
}

fn check_file(path: &Path, allow_missing: bool) -> Result<()> {
    let shown = path.display();
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if allow_missing {
                return Ok(());
            }
            return Err(Error::Database(format!(
                "no database at {shown}; create it with `reservations init {shown}` (or check the path)"
            )));
        }
        Err(e) => return Err(Error::Database(format!("cannot read {shown}: {e}"))),
    };
    if meta.is_dir() {
        return Err(Error::Database(format!(
            "{shown} is a directory; pass the path of a database file or a postgres:// URL"
        )));
    }
    // Looked at read-only: an empty file is an empty SQLite database
    // (`init` may fill it).
    match errand::sqlite::schema_status(path) {
        Ok(SchemaStatus::NotADatabase) => Err(not_a_database(path)),
        Ok(_) => Ok(()),
        Err(e) => Err(Error::Database(format!("cannot read {shown}: {e}"))),
    }
}

fn not_a_database(path: &Path) -> Error {
    Error::Database(format!(
        "{} is not a SQLite database; pass a file made by `reservations init` or a postgres:// URL",
        path.display()
    ))
}

fn not_initialised(path: &Path, what: &str) -> Error {
    Error::Database(format!(
        "{} is not a reservations database ({what}); run `reservations init {}` first",
        path.display(),
        path.display()
    ))
}

fn open_error(path: &Path, e: errand::Error) -> Error {
    match e {
        errand::Error::NotErrand(_) => not_initialised(path, "no Errand tables"),
        errand::Error::SchemaOutdated(detail) => not_initialised(path, &detail),
        errand::Error::SchemaTooNew(detail) => Error::SchemaTooNew(format!(
            "{} was written by a newer program ({detail}); upgrade reservations before using it",
            path.display()
        )),
        other => Error::from(other),
    }
}

fn app_schema_version(conn: &Connection) -> Result<Option<i64>> {
    let exists: Option<i64> = conn
        .query_row(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?1",
            [APP_HISTORY_TABLE],
            |r| r.get(0),
        )
        .optional()?;
    if exists.is_none() {
        return Ok(None);
    }
    Ok(conn.query_row(
        &format!("SELECT MAX(version) FROM {APP_HISTORY_TABLE}"),
        [],
        |r| r.get(0),
    )?)
}

fn too_new(path: &Path, v: i64) -> Error {
    Error::SchemaTooNew(format!(
        "{} was written by a newer program (reservations schema version {v}, this program knows up to {APP_SCHEMA_VERSION}); upgrade reservations before using it",
        path.display()
    ))
}

/// Checks both schema versions on read-only connections, so a database of
/// another program is left exactly as it was.
fn check_schemas(path: &Path) -> Result<()> {
    let status = errand::sqlite::schema_status(path).map_err(|e| open_error(path, e))?;
    if matches!(status, SchemaStatus::Missing | SchemaStatus::NotADatabase) {
        check_file(path, false)?;
        return Err(not_a_database(path));
    }
    status
        .require_current("Errand's schema")
        .map_err(|e| open_error(path, e))?;
    let conn = errand::sqlite::open_read_only(path).map_err(|e| open_error(path, e))?;
    match app_schema_version(&conn)? {
        None => Err(not_initialised(path, "no reservations tables")),
        Some(v) if v > APP_SCHEMA_VERSION => Err(too_new(path, v)),
        Some(v) if v < APP_SCHEMA_VERSION => Err(not_initialised(
            path,
            &format!("reservations schema version {v}, this program needs {APP_SCHEMA_VERSION}"),
        )),
        Some(_) => Ok(()),
    }
}

/// Creates the file if needed, applies Errand's and the application's
/// migrations and seeds the units. Changes nothing that exists.
pub(crate) fn init(path: &Path) -> Result<InitReport> {
    check_file(path, true)?;
    let store = SqliteStore::open(
        path,
        SqliteOptions {
            create: true,
            migrate: true,
            ..SqliteOptions::default()
        },
    )
    .map_err(|e| open_error(path, e))?;
    drop(store);

    let mut conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    conn.execute_batch("PRAGMA foreign_keys = ON")?;
    match app_schema_version(&conn)? {
        Some(v) if v > APP_SCHEMA_VERSION => return Err(too_new(path, v)),
        Some(1) => {
            let found = legacy_overlaps(&conn)?;
            if !found.is_empty() {
                return Err(legacy_overlap_refusal(&found));
            }
        }
        _ => {}
    }
    embedded::migrations::runner()
        .set_migration_table_name(APP_HISTORY_TABLE)
        .run(&mut conn)
        .map_err(|e| Error::Migration(e.to_string()))?;
    let tx = conn.transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)?;
    let mut created_units = Vec::new();
    for (id, name) in SEED_UNITS {
        let n = tx.execute(
            "INSERT OR IGNORE INTO units (id, name) VALUES (?1, ?2)",
            params![id, name],
        )?;
        if n == 1 {
            created_units.push(id.to_owned());
        }
    }
    let units = units_in(&tx)?;
    tx.commit()?;
    Ok(InitReport {
        backend: "sqlite",
        created_units,
        units,
    })
}

/// On a database of schema version 1 (no stays): the held or paid
/// reservations that would share a night once each gets the night of the
/// day it was made.
fn legacy_overlaps(conn: &Connection) -> Result<Vec<LegacyOverlap>> {
    let mut stmt = conn.prepare(
        "SELECT unit_id, date(created_at / 1000, 'unixepoch') AS night, group_concat(id, ' ')
         FROM reservations WHERE status IN ('held', 'paid')
         GROUP BY unit_id, night HAVING count(*) > 1
         ORDER BY unit_id, night LIMIT 100",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })?;
    rows.map(|row| {
        let (unit, night, ids) = row?;
        let mut ids: Vec<String> = ids.split(' ').map(str::to_owned).collect();
        ids.sort();
        Ok(LegacyOverlap { unit, night, ids })
    })
    .collect()
}

impl Sqlite {
    /// Opens an initialised database.
    pub(crate) fn open(path: &Path, clock: Option<Arc<dyn Clock>>) -> Result<Self> {
        check_file(path, false)?;
        check_schemas(path)?;
        let mut options = SqliteOptions::default();
        if let Some(c) = clock {
            options.clock = c;
        }
        let store = SqliteStore::open(path, options).map_err(|e| open_error(path, e))?;
        Ok(Sqlite { store })
    }
}
