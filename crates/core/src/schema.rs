//! Whether a database holds Errand's schema at the version this program
//! uses: one judgment, and one wording of each refusal, for every backend.

use crate::{Error, Result};

/// The schema version this build of Errand uses, the same number on every
/// backend: each version is one migration per backend.
pub const SCHEMA_VERSION: i64 = 1;

/// The name of version 1's migration in a schema history. Development
/// builds before release 0.1 recorded another first migration, and their
/// databases are refused ([`SchemaStatus::Unreleased`]).
pub const BASELINE_NAME: &str = "baseline";

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
    /// Errand's schema as a development build before release 0.1 left it
    /// (its history does not begin with the baseline): nothing upgrades
    /// it; it must be recreated.
    Unreleased {
        /// The last version its history records.
        found: i64,
    },
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

    /// The status of a database whose schema history records `found` as
    /// its last version and `first` as the name of its version 1 (`None`
    /// and `None`: it has no Errand tables), for a program that uses
    /// version `wanted`. A history that does not begin with the baseline
    /// is a development build's.
    pub fn of_history(found: Option<i64>, first: Option<&str>, wanted: i64) -> Self {
        match found {
            Some(v) if first != Some(BASELINE_NAME) => SchemaStatus::Unreleased { found: v },
            found => SchemaStatus::of_version(found, wanted),
        }
    }

    /// Whether `errand migrate` can bring the database to this program's
    /// version: everything but a newer schema, a development build's and a
    /// file that is not a database.
    pub fn migratable(self) -> bool {
        !matches!(
            self,
            SchemaStatus::Newer { .. }
                | SchemaStatus::Unreleased { .. }
                | SchemaStatus::NotADatabase
        )
    }

    /// `Ok` for [`SchemaStatus::Current`]; otherwise the refusal to use the
    /// database `db` (a path, or "schema NAME") as it is, naming the fix.
    ///
    /// # Errors
    /// [`Error::NotADatabase`] for nothing there or not a database,
    /// [`Error::NotErrand`], [`Error::SchemaOutdated`],
    /// [`Error::SchemaTooNew`] or [`Error::SchemaUnreleased`].
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
            SchemaStatus::Unreleased { found } => Err(Error::SchemaUnreleased(format!(
                "{db} (schema history at development version {found})"
            ))),
        }
    }

    /// `Ok` unless migrating cannot help: the refusal of
    /// [`require_current`](Self::require_current) for a newer schema or a
    /// file that is not a database.
    ///
    /// # Errors
    /// [`Error::SchemaTooNew`], [`Error::SchemaUnreleased`] or
    /// [`Error::NotADatabase`].
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

    /// A history that begins with the baseline is judged by its version; one
    /// that begins otherwise is a development build's, whatever its version.
    #[test]
    fn a_history_is_judged_by_its_first_migration() {
        assert_eq!(
            SchemaStatus::of_history(None, None, 1),
            SchemaStatus::NotErrand
        );
        assert_eq!(
            SchemaStatus::of_history(Some(1), Some(BASELINE_NAME), 1),
            SchemaStatus::Current(1)
        );
        assert_eq!(
            SchemaStatus::of_history(Some(2), Some(BASELINE_NAME), 1),
            SchemaStatus::Newer { found: 2, known: 1 }
        );
        for (found, first) in [
            (22, Some("jobs")),
            (17, Some("jobs")),
            (1, Some("jobs")),
            (3, None),
        ] {
            assert_eq!(
                SchemaStatus::of_history(Some(found), first, 1),
                SchemaStatus::Unreleased { found },
                "{first:?}"
            );
        }
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
            (
                SchemaStatus::Unreleased { found: 22 },
                Some("schema_unreleased"),
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
