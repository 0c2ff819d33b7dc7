//! Versioned migrations (refinery) and the schema-version check.

use errand_core::{Error, Result};
use rusqlite::{Connection, OptionalExtension};

use crate::map_err;

mod embedded {
    refinery::embed_migrations!("migrations");
}

const HISTORY_TABLE: &str = "errand_schema_history";

/// The schema version this build of the library expects.
pub const SCHEMA_VERSION: i64 = 2;

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
    if let Some(v) = schema_version(conn)?
        && v > SCHEMA_VERSION
    {
        return Err(Error::SchemaTooNew(format!(
            "database schema version {v}, this program knows up to {SCHEMA_VERSION}"
        )));
    }
    embedded::migrations::runner()
        .set_migration_table_name(HISTORY_TABLE)
        .run(conn)
        .map_err(|e| Error::Storage(format!("migration failed: {e}")))?;
    Ok(())
}

/// Checks that the schema is exactly the one this build expects.
pub(crate) fn check(conn: &Connection) -> Result<()> {
    match schema_version(conn)? {
        None => Err(Error::SchemaOutdated(
            "this database has no Errand tables".into(),
        )),
        Some(v) if v < SCHEMA_VERSION => Err(Error::SchemaOutdated(format!(
            "schema version {v}, this program needs {SCHEMA_VERSION}"
        ))),
        Some(v) if v > SCHEMA_VERSION => Err(Error::SchemaTooNew(format!(
            "database schema version {v}, this program knows up to {SCHEMA_VERSION}"
        ))),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
