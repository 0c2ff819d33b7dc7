//! The SQLite side: opened read-only, checked (schema version, columns,
//! live leases), read a page at a time in key order, and summed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use errand_core::{Error, Result};
use errand_sqlite::rusqlite::{self, Connection, OpenFlags, params_from_iter};
use serde_json::Value;

use crate::digest::{self, Checksum};
use crate::tables::{JOBS, STEPS, TABLES, Table};

/// A page of rows, each its values in column order as sent to PostgreSQL.
pub(crate) type Rows = Vec<Vec<Value>>;

/// The SQLite database a transfer reads.
#[derive(Clone)]
pub(crate) struct Source {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
}

/// A running job whose lease has not expired: a worker may be at it.
#[derive(Debug)]
pub(crate) struct LiveLease {
    pub(crate) job: String,
    pub(crate) until_ms: i64,
    pub(crate) others: u64,
}

impl Source {
    /// Opens the database at `path` read-only, after checking that it is
    /// an Errand database at this program's schema version.
    pub(crate) fn open(path: &Path) -> Result<Source> {
        let shown = path.display().to_string();
        errand_sqlite::schema_status(path)?.require_current(&shown)?;
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(path, flags)
            .map_err(|e| Error::invalid(format!("cannot open {shown}: {e}")))?;
        conn.busy_timeout(std::time::Duration::from_secs(5))
            .map_err(sqlite_error)?;
        let path = std::fs::canonicalize(path)
            .map_err(|e| Error::invalid(format!("cannot resolve {shown}: {e}")))?;
        let source = Source {
            conn: Arc::new(Mutex::new(conn)),
            path,
        };
        source.with(check_tables)?;
        Ok(source)
    }

    /// The database's absolute path: what a resumed transfer recognises
    /// its source by.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection (on the caller's thread).
    fn with<T>(&self, f: impl FnOnce(&Connection) -> Result<T>) -> Result<T> {
        let conn = self
            .conn
            .lock()
            .map_err(|_| Error::storage("the SQLite connection was poisoned by a panic"))?;
        f(&conn)
    }

    /// Runs `f` on the connection on a blocking thread.
    pub(crate) async fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let me = self.clone();
        tokio::task::spawn_blocking(move || me.with(f))
            .await
            .map_err(|e| Error::storage(format!("reading the SQLite database failed: {e}")))?
    }

    /// The running job with the latest lease that has not expired at
    /// `now_ms`, if any, and how many others there are.
    pub(crate) async fn live_lease(&self, now_ms: i64) -> Result<Option<LiveLease>> {
        self.run(move |conn| {
            let found: Option<(String, i64, i64)> = conn
                .query_row(
                    "SELECT id, lease_until, count(*) OVER () FROM errand_jobs
                     WHERE state = 'running' AND lease_until > ?1
                     ORDER BY lease_until DESC LIMIT 1",
                    [now_ms],
                    |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
                )
                .map(Some)
                .or_else(|e| match e {
                    rusqlite::Error::QueryReturnedNoRows => Ok(None),
                    e => Err(e),
                })
                .map_err(sqlite_error)?;
            Ok(found.map(|(job, until_ms, n)| LiveLease {
                job,
                until_ms,
                others: u64::try_from(n - 1).unwrap_or(0),
            }))
        })
        .await
    }

    /// Starts the read transaction every page of a copy is read in (one
    /// snapshot of the whole database), or ends it.
    pub(crate) async fn snapshot(&self, begin: bool) -> Result<()> {
        self.run(move |conn| {
            let sql = if begin {
                // The first read fixes the snapshot.
                "BEGIN; SELECT count(*) FROM errand_jobs;"
            } else {
                "COMMIT"
            };
            conn.execute_batch(sql).map_err(sqlite_error)
        })
        .await
    }

    /// Up to `limit` rows of `table` after the key `after` (from the start
    /// without one), in key order.
    pub(crate) async fn page(
        &self,
        table: &'static Table,
        after: Option<Vec<Value>>,
        limit: usize,
    ) -> Result<Rows> {
        self.run(move |conn| read_page(conn, table, after.as_deref(), limit))
            .await
    }

    /// Rows per table.
    pub(crate) async fn counts(&self) -> Result<BTreeMap<&'static str, u64>> {
        self.run(|conn| {
            let mut counts = BTreeMap::new();
            for t in TABLES {
                counts.insert(
                    t.name,
                    count(conn, &format!("SELECT count(*) FROM {}", t.name))?,
                );
            }
            let steps = "SELECT count(*) FROM errand_jobs WHERE workflow IS NOT NULL";
            counts.insert(STEPS.name, count(conn, steps)?);
            Ok(counts)
        })
        .await
    }

    /// Jobs per state.
    pub(crate) async fn states(&self) -> Result<BTreeMap<String, u64>> {
        self.run(|conn| {
            let mut stmt = conn
                .prepare("SELECT state, count(*) FROM errand_jobs GROUP BY state")
                .map_err(sqlite_error)?;
            let rows = stmt
                .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                .map_err(sqlite_error)?;
            rows.map(|r| {
                r.map(|(s, n)| (s, u64::try_from(n).unwrap_or(0)))
                    .map_err(sqlite_error)
            })
            .collect()
        })
        .await
    }

    /// Every table's checksum, the workflow steps' (derived from the jobs)
    /// among them, each read in one statement.
    pub(crate) async fn checksums(&self) -> Result<BTreeMap<&'static str, Checksum>> {
        self.run(|conn| {
            let mut sums = BTreeMap::new();
            for t in TABLES {
                sums.insert(t.name, checksum(conn, t, &select(t))?);
            }
            let steps =
                "SELECT workflow, created_at, id FROM errand_jobs WHERE workflow IS NOT NULL";
            sums.insert(STEPS.name, checksum(conn, &STEPS, steps)?);
            Ok(sums)
        })
        .await
    }
}

/// The workflow steps PostgreSQL indexes for a page of jobs.
pub(crate) fn steps_of(jobs: &Rows) -> Rows {
    let at = |name: &str| JOBS.columns.iter().position(|c| c.name == name);
    let (Some(workflow), Some(created), Some(id)) = (at("workflow"), at("created_at"), at("id"))
    else {
        return Vec::new();
    };
    jobs.iter()
        .filter(|r| !r[workflow].is_null())
        .map(|r| vec![r[workflow].clone(), r[created].clone(), r[id].clone()])
        .collect()
}

fn select(t: &Table) -> String {
    let exprs: Vec<&str> = t.columns.iter().map(|c| c.source_expr()).collect();
    format!("SELECT {} FROM {}", exprs.join(", "), t.name)
}

fn read_page(conn: &Connection, t: &Table, after: Option<&[Value]>, limit: usize) -> Result<Rows> {
    let keys: Vec<&str> = t.key_columns().iter().map(|c| c.source_expr()).collect();
    let keys = keys.join(", ");
    let mut args: Vec<rusqlite::types::Value> = Vec::new();
    let filter = match after {
        Some(values) => {
            for v in values {
                args.push(to_sqlite(v)?);
            }
            let marks = vec!["?"; values.len()].join(", ");
            format!(" WHERE ({keys}) > ({marks})")
        }
        None => String::new(),
    };
    args.push(rusqlite::types::Value::Integer(
        i64::try_from(limit).unwrap_or(i64::MAX),
    ));
    let sql = format!("{}{filter} ORDER BY {keys} LIMIT ?", select(t));
    let mut stmt = conn.prepare_cached(&sql).map_err(sqlite_error)?;
    let mut rows = stmt.query(params_from_iter(args)).map_err(sqlite_error)?;
    let mut page = Vec::new();
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        page.push(values_of(t, row)?);
    }
    Ok(page)
}

fn values_of(t: &Table, row: &rusqlite::Row<'_>) -> Result<Vec<Value>> {
    t.columns
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let raw = row.get_ref(i).map_err(sqlite_error)?;
            digest::from_sqlite(c.kind, raw, &format!("{}.{}", t.name, c.name))
        })
        .collect()
}

fn checksum(conn: &Connection, t: &Table, sql: &str) -> Result<Checksum> {
    let mut stmt = conn.prepare(sql).map_err(sqlite_error)?;
    let mut rows = stmt.query([]).map_err(sqlite_error)?;
    let mut sum = Checksum::default();
    while let Some(row) = rows.next().map_err(sqlite_error)? {
        let values = values_of(t, row)?;
        let canonical = t
            .columns
            .iter()
            .zip(&values)
            .map(|(c, v)| digest::canonical(c.kind, v, c.name))
            .collect::<Result<Vec<_>>>()?;
        sum.add(&canonical);
    }
    Ok(sum)
}

fn count(conn: &Connection, sql: &str) -> Result<u64> {
    let n: i64 = conn
        .query_row(sql, [], |r| r.get(0))
        .map_err(sqlite_error)?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// A key value (text or integer) as SQLite compares it.
fn to_sqlite(v: &Value) -> Result<rusqlite::types::Value> {
    use rusqlite::types::Value as S;
    match v {
        Value::String(s) => Ok(S::Text(s.clone())),
        Value::Number(n) => n
            .as_i64()
            .map(S::Integer)
            .ok_or_else(|| Error::invalid(format!("a resume key holds {n}, not an integer"))),
        other => Err(Error::invalid(format!(
            "a resume key holds {other}, not text or an integer"
        ))),
    }
}

/// Checks that the database's Errand tables and their columns are exactly
/// the ones this program copies, so no column is left behind unnoticed.
fn check_tables(conn: &Connection) -> Result<()> {
    let mut stmt = conn
        .prepare(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'errand\\_%' ESCAPE '\\'
               AND name <> 'errand_schema_history' ORDER BY name",
        )
        .map_err(sqlite_error)?;
    let found: Vec<String> = stmt
        .query_map([], |r| r.get(0))
        .and_then(|rows| rows.collect())
        .map_err(sqlite_error)?;
    let mut known: Vec<&str> = TABLES.iter().map(|t| t.name).collect();
    known.sort_unstable();
    if found != known {
        return Err(Error::storage(format!(
            "the SQLite database has the tables {found:?}; this program transfers {known:?}"
        )));
    }
    for t in TABLES {
        let mut stmt = conn
            .prepare("SELECT name FROM pragma_table_info(?1) ORDER BY cid")
            .map_err(sqlite_error)?;
        let mut columns: Vec<String> = stmt
            .query_map([t.name], |r| r.get(0))
            .and_then(|rows| rows.collect())
            .map_err(sqlite_error)?;
        columns.sort_unstable();
        let mut copied: Vec<&str> = t
            .columns
            .iter()
            .filter(|c| c.source.is_none())
            .map(|c| c.name)
            .collect();
        copied.sort_unstable();
        if columns != copied {
            return Err(Error::storage(format!(
                "{} has the columns {columns:?}; this program transfers {copied:?}",
                t.name
            )));
        }
    }
    Ok(())
}

fn sqlite_error(e: rusqlite::Error) -> Error {
    Error::storage_caused_by(format!("reading the SQLite database: {e}"), e)
}
