//! Whether a database holds Errand's schema at the version this program
//! uses: one judgment, and one wording of each refusal, for every backend.

use crate::{Error, Result};

/// What a database holds, as far as Errand is concerned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchemaStatus {
    /// Nothing is there: no SQLite file at the path. (A PostgreSQL schema
    /// that does not exist is [`SchemaStatus::NotErrand`]: the database is
    /// there, and `errand migrate` creates the schema with the tables.)
    Missing,
    /// Something is there that is not a database of this backend (a text
    /// file, for SQLite).
    NotADatabase,
    /// A database without Errand's tables (an empty SQLite file counts as
    /// one): `errand migrate` adds them.
    NotErrand,
    /// Errand's schema at an older version: `errand migrate` upgrades it.
    Older {
        /// The version the database is at.
        found: i64,
        /// The version this program needs.
        wanted: i64,
    },
    /// Errand's schema at the version this program uses.
    Current(i64),
    /// Errand's schema at a newer version than this program knows.
    Newer {
        /// The version the database is at.
        found: i64,
        /// The newest version this program knows.
        known: i64,
    },
}

impl SchemaStatus {
    /// The status of a database whose schema history says `found` (`None`:
    /// it has no Errand tables), for a program that uses version `wanted`.
    pub fn of_version(found: Option<i64>, wanted: i64) -> Self {
        match found {
            None => SchemaStatus::NotErrand,
            Some(v) if v < wanted => SchemaStatus::Older { found: v, wanted },
            Some(v) if v > wanted => SchemaStatus::Newer {
                found: v,
                known: wanted,
            },
            Some(v) => SchemaStatus::Current(v),
        }
    }

    /// Whether `errand migrate` can bring the database to this program's
    /// version: everything but a newer schema and a file that is not a
    /// database.
    pub fn migratable(self) -> bool {
        !matches!(
            self,
            SchemaStatus::Newer { .. } | SchemaStatus::NotADatabase
        )
    }

    /// `Ok` for [`SchemaStatus::Current`]; otherwise the refusal to use the
    /// database `db` (a path, or "schema NAME") as it is, naming the fix.
    ///
    /// # Errors
    /// [`Error::NotADatabase`] for nothing there or not a database,
    /// [`Error::NotErrand`], [`Error::SchemaOutdated`] or
    /// [`Error::SchemaTooNew`].
    pub fn require_current(self, db: &str) -> Result<()> {
        match self {
            SchemaStatus::Current(_) => Ok(()),
            // Only a SQLite store finds nothing at all (on PostgreSQL a
            // missing schema is `NotErrand`: the database is there).
            SchemaStatus::Missing => Err(Error::NotADatabase(format!(
                "no database at {db}; create it with `errand migrate --db {db}` (or check the path)"
            ))),
            // Only a SQLite store finds something that is not a database
            // (a PostgreSQL URL names a server, which says so itself).
            SchemaStatus::NotADatabase => Err(Error::NotADatabase(format!(
                "{db} is not a SQLite database; check the --db path"
            ))),
            SchemaStatus::NotErrand => Err(Error::NotErrand(db.to_owned())),
            SchemaStatus::Older { found, wanted } => Err(Error::SchemaOutdated(format!(
                "{db} is at schema version {found}, this program needs {wanted}"
            ))),
            SchemaStatus::Newer { found, known } => Err(Error::SchemaTooNew(format!(
                "{db} is at schema version {found}, this program knows up to {known}"
            ))),
        }
    }

    /// `Ok` unless migrating cannot help: the refusal of
    /// [`require_current`](Self::require_current) for a newer schema or a
    /// file that is not a database.
    ///
    /// # Errors
    /// [`Error::SchemaTooNew`] or [`Error::NotADatabase`].
    pub fn require_migratable(self, db: &str) -> Result<()> {
        if self.migratable() {
            Ok(())
        } else {
            self.require_current(db)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_is_judged_against_the_one_wanted() {
        assert_eq!(SchemaStatus::of_version(None, 8), SchemaStatus::NotErrand);
        assert_eq!(
            SchemaStatus::of_version(Some(7), 8),
            SchemaStatus::Older {
                found: 7,
                wanted: 8
            }
        );
        assert_eq!(
            SchemaStatus::of_version(Some(8), 8),
            SchemaStatus::Current(8)
        );
        assert_eq!(
            SchemaStatus::of_version(Some(9), 8),
            SchemaStatus::Newer { found: 9, known: 8 }
        );
    }

    /// Each status but the current one is refused with its own variant,
    /// which names the database; migrating is refused only where it
    /// cannot help.
    #[test]
    fn each_status_has_its_refusal() {
        let cases = [
            (SchemaStatus::Missing, Some("not_a_database"), true),
            (SchemaStatus::NotADatabase, Some("not_a_database"), false),
            (SchemaStatus::NotErrand, Some("not_errand"), true),
            (
                SchemaStatus::Older {
                    found: 1,
                    wanted: 2,
                },
                Some("schema_outdated"),
                true,
            ),
            (SchemaStatus::Current(2), None, true),
            (
                SchemaStatus::Newer { found: 3, known: 2 },
                Some("schema_too_new"),
                false,
            ),
        ];
        for (status, code, migratable) in cases {
            let refusal = status.require_current("db.sqlite").err();
            assert_eq!(refusal.as_ref().map(Error::code), code, "{status:?}");
            if let Some(e) = refusal {
                assert!(e.to_string().contains("db.sqlite"), "{e}");
            }
            assert_eq!(status.migratable(), migratable, "{status:?}");
            assert_eq!(
                status.require_migratable("db.sqlite").is_ok(),
                migratable,
                "{status:?}"
            );
        }
    }
}
