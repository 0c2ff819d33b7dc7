//! The PostgreSQL side: whether the schema may be written (new, empty, or
//! holding this source's unfinished transfer), the schema made by Errand's
//! migrations, pages written each in one transaction with the transfer's
//! progress, and the same sums as the source's.

use std::collections::BTreeMap;
use std::path::Path;

use errand_core::{Error, Result, SchemaStatus};
use errand_postgres::{PgOptions, PgStore};
use futures_util::{StreamExt, pin_mut};
use serde_json::Value;
use tokio_postgres::NoTls;
use tokio_postgres::types::ToSql;

use crate::digest::{self, Checksum};
use crate::source::Rows;
use crate::tables::{IDENTITIES, STEPS, TABLES, Table};

/// The table a transfer keeps its progress in, in the target schema, from
/// its start until its check passes.
pub(crate) const PROGRESS: &str = "errand_transfer";

/// What the target schema holds before a transfer writes to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// Nothing of Errand's, or Errand's tables without a row: a transfer
    /// starts.
    Empty,
    /// This source's transfer, stopped before its check passed: it goes on.
    Unfinished,
}

/// One table's progress.
#[derive(Debug, Clone, Default)]
pub(crate) struct Progress {
    pub(crate) after: Option<Vec<Value>>,
    pub(crate) copied: u64,
    pub(crate) done: bool,
}

/// Looks at `schema` without changing anything: may a transfer from
/// `source` write to it?
///
/// # Errors
/// The schema holds other data (Errand's rows, another transfer, tables
/// that are not Errand's), is at another schema version, or cannot be read.
pub(crate) async fn inspect(url: &str, schema: &str, source: &Path) -> Result<Found> {
    let quoted = errand_postgres::quote_schema(schema)?;
    let status = errand_postgres::schema_status(url, schema).await?;
    let client = connect(url).await?;
    match status {
        SchemaStatus::Current(_) => {}
        SchemaStatus::NotErrand => {
            let tables: i64 = client
                .query_one(
                    "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                     WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
                    &[&schema],
                )
                .await
                .map_err(pg_error)?
                .get(0);
            if tables > 0 {
                return Err(Error::invalid(format!(
                    "schema {schema} holds {tables} tables that are not Errand's: transfer into a \
                     new schema (--schema NAME)"
                )));
            }
            return Ok(Found::Empty);
        }
        other => other.require_current(&format!("schema {schema}"))?,
    }
    let progress: Option<String> = client
        .query_one(
            "SELECT to_regclass($1)::text",
            &[&format!("{quoted}.{PROGRESS}")],
        )
        .await
        .map_err(pg_error)?
        .get(0);
    if progress.is_some() {
        let from: Option<String> = client
            .query_one(&format!("SELECT min(source) FROM {quoted}.{PROGRESS}"), &[])
            .await
            .map_err(pg_error)?
            .get(0);
        let from = from.unwrap_or_default();
        if from == source.display().to_string() {
            return Ok(Found::Unfinished);
        }
        return Err(Error::invalid(format!(
            "schema {schema} holds an unfinished transfer from {from}: finish it (errand transfer \
             --from {from}) or drop the schema and start again"
        )));
    }
    let counts = count_rows(&client, &quoted).await?;
    let held: Vec<String> = counts
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(t, n)| format!("{t}: {n}"))
        .collect();
    if !held.is_empty() {
        return Err(Error::invalid(format!(
            "schema {schema} already holds Errand's data ({}): transfer into a new schema \
             (--schema NAME) or an empty one",
            held.join(", ")
        )));
    }
    Ok(Found::Empty)
}

/// The schema a transfer writes: made (or checked) by Errand's migrations.
pub(crate) struct Target {
    store: PgStore,
    quoted: String,
}

impl Target {
    /// Connects, creating the schema and its tables where they are missing,
    /// and the progress table when the transfer starts.
    pub(crate) async fn open(
        url: &str,
        schema: &str,
        allow_public_schema: bool,
        found: &Found,
        source: &Path,
    ) -> Result<Target> {
        let options = PgOptions {
            schema: schema.to_owned(),
            allow_public_schema,
            migrate: true,
            pool_size: 2,
            ..PgOptions::default()
        };
        let store = PgStore::connect(url, options).await?;
        let quoted = errand_postgres::quote_schema(schema)?;
        let target = Target { store, quoted };
        target.check_columns(schema).await?;
        if *found == Found::Empty {
            target.start(source).await?;
        }
        Ok(target)
    }

    async fn client(&self) -> Result<deadpool_postgres::Object> {
        self.store
            .pool()
            .get()
            .await
            .map_err(|e| Error::storage(format!("cannot reach PostgreSQL: {e}")))
    }

    /// Checks that every column of the schema's tables is one this
    /// program writes — but `errand_jobs.awaited`, false for every job
    /// moved (no process waits on them) — so none is left at its default
    /// unnoticed.
    async fn check_columns(&self, schema: &str) -> Result<()> {
        let client = self.client().await?;
        for t in TABLES.iter().chain([&STEPS]) {
            let rows = client
                .query(
                    "SELECT column_name::text FROM information_schema.columns
                     WHERE table_schema = $1 AND table_name = $2 ORDER BY column_name",
                    &[&schema, &t.name],
                )
                .await
                .map_err(pg_error)?;
            let mut found: Vec<String> = rows
                .iter()
                .map(|r| r.get::<_, String>(0))
                .filter(|c| !(t.name == "errand_jobs" && c == "awaited"))
                .collect();
            // Byte order, as below (the database's collation may differ).
            found.sort_unstable();
            let mut written: Vec<&str> = t.columns.iter().map(|c| c.name).collect();
            written.sort_unstable();
            if found != written {
                return Err(Error::storage(format!(
                    "{schema}.{} has the columns {found:?}; this program writes {written:?}",
                    t.name
                )));
            }
        }
        Ok(())
    }

    async fn start(&self, source: &Path) -> Result<()> {
        let q = &self.quoted;
        let mut sql = format!(
            "BEGIN;
             CREATE TABLE {q}.{PROGRESS} (
                 table_name text PRIMARY KEY,
                 source     text NOT NULL,
                 after      jsonb,
                 copied     bigint NOT NULL DEFAULT 0,
                 done       boolean NOT NULL DEFAULT false
             );"
        );
        let source = literal(&source.display().to_string());
        for t in TABLES {
            sql.push_str(&format!(
                "INSERT INTO {q}.{PROGRESS} (table_name, source) VALUES ('{}', {source});",
                t.name
            ));
        }
        sql.push_str("COMMIT;");
        self.client()
            .await?
            .batch_execute(&sql)
            .await
            .map_err(pg_error)
    }

    /// Each table's progress.
    pub(crate) async fn progress(&self) -> Result<BTreeMap<String, Progress>> {
        let sql = format!(
            "SELECT table_name, after::text, copied, done FROM {}.{PROGRESS}",
            self.quoted
        );
        let client = self.client().await?;
        let mut out = BTreeMap::new();
        for row in client.query(&sql, &[]).await.map_err(pg_error)? {
            let after: Option<String> = row.get(1);
            let after = match after {
                Some(text) => Some(serde_json::from_str(&text).map_err(|e| {
                    Error::storage(format!("the transfer's progress does not parse: {e}"))
                })?),
                None => None,
            };
            let copied: i64 = row.get(2);
            let progress = Progress {
                after,
                copied: u64::try_from(copied).unwrap_or(0),
                done: row.get(3),
            };
            out.insert(row.get::<_, String>(0), progress);
        }
        Ok(out)
    }

    /// Writes a page of `table` (and, for jobs, their workflow steps) and
    /// the progress that ends with `last`, in one transaction.
    pub(crate) async fn write_page(
        &self,
        table: &Table,
        rows: &Rows,
        steps: &Rows,
        last: &[Value],
    ) -> Result<()> {
        let client = self.client().await?;
        client.batch_execute("BEGIN").await.map_err(pg_error)?;
        let written = async {
            insert(&client, &self.quoted, table, rows).await?;
            if !steps.is_empty() {
                insert(&client, &self.quoted, &STEPS, steps).await?;
            }
            let after = Value::Array(last.to_vec()).to_string();
            let n = i64::try_from(rows.len()).unwrap_or(i64::MAX);
            let sql = format!(
                "UPDATE {}.{PROGRESS} SET after = $1::text::jsonb, copied = copied + $2
                 WHERE table_name = $3",
                self.quoted
            );
            let args: [&(dyn ToSql + Sync); 3] = [&after, &n, &table.name];
            client.execute(&sql, &args).await.map_err(pg_error)?;
            Ok::<_, Error>(())
        }
        .await;
        let end = if written.is_ok() {
            "COMMIT"
        } else {
            "ROLLBACK"
        };
        let ended = client.batch_execute(end).await.map_err(pg_error);
        written.and(ended)
    }

    /// Records that every row of `table` is copied.
    pub(crate) async fn finish_table(&self, table: &Table) -> Result<()> {
        let sql = format!(
            "UPDATE {}.{PROGRESS} SET done = true WHERE table_name = $1",
            self.quoted
        );
        self.client()
            .await?
            .execute(&sql, &[&table.name])
            .await
            .map_err(pg_error)?;
        Ok(())
    }

    /// Moves each identity sequence past the largest copied value, so rows
    /// written from now on follow the copied ones.
    pub(crate) async fn continue_sequences(&self) -> Result<()> {
        let client = self.client().await?;
        for (table, column) in IDENTITIES {
            let sql = format!(
                "SELECT setval(pg_get_serial_sequence($1, $2), coalesce(max({column}), 0) + 1, false)
                 FROM {}.{table}",
                self.quoted
            );
            let name = format!("{}.{table}", self.quoted);
            client
                .execute(&sql, &[&name, column])
                .await
                .map_err(pg_error)?;
        }
        Ok(())
    }

    /// Jobs per state.
    pub(crate) async fn states(&self) -> Result<BTreeMap<String, u64>> {
        let sql = format!(
            "SELECT state, count(*) FROM {}.errand_jobs GROUP BY state",
            self.quoted
        );
        let rows = self
            .client()
            .await?
            .query(&sql, &[])
            .await
            .map_err(pg_error)?;
        Ok(rows
            .iter()
            .map(|r| {
                let n: i64 = r.get(1);
                (r.get::<_, String>(0), u64::try_from(n).unwrap_or(0))
            })
            .collect())
    }

    /// Every table's checksum, read as the source's is summed.
    pub(crate) async fn checksums(&self) -> Result<BTreeMap<&'static str, Checksum>> {
        let client = self.client().await?;
        let mut sums = BTreeMap::new();
        for t in TABLES.iter().chain([&STEPS]) {
            sums.insert(t.name, checksum(&client, &self.quoted, t).await?);
        }
        Ok(sums)
    }

    /// Drops the progress table: the transfer is over and checked.
    pub(crate) async fn finish(&self) -> Result<()> {
        let sql = format!("DROP TABLE {}.{PROGRESS}", self.quoted);
        self.client()
            .await?
            .batch_execute(&sql)
            .await
            .map_err(pg_error)
    }
}

/// `INSERT … SELECT … FROM json_to_recordset($1)`: one statement a page,
/// the values converted by PostgreSQL from the page's JSON.
async fn insert(
    client: &tokio_postgres::Client,
    quoted: &str,
    t: &Table,
    rows: &Rows,
) -> Result<()> {
    let names: Vec<String> = t
        .columns
        .iter()
        .map(|c| format!("\"{}\"", c.name))
        .collect();
    let fields: Vec<String> = t
        .columns
        .iter()
        .map(|c| format!("\"{}\" {}", c.name, c.kind.record_type()))
        .collect();
    let exprs: Vec<String> = t
        .columns
        .iter()
        .map(|c| c.kind.insert_expr(&format!("\"{}\"", c.name)))
        .collect();
    let sql = format!(
        "INSERT INTO {quoted}.{} ({}) OVERRIDING SYSTEM VALUE
         SELECT {} FROM json_to_recordset($1::text::json) AS r({})",
        t.name,
        names.join(", "),
        exprs.join(", "),
        fields.join(", ")
    );
    let objects: Vec<Value> = rows
        .iter()
        .map(|row| {
            Value::Object(
                t.columns
                    .iter()
                    .zip(row)
                    .map(|(c, v)| (c.name.to_owned(), v.clone()))
                    .collect(),
            )
        })
        .collect();
    let page = Value::Array(objects).to_string();
    client
        .execute(&sql, &[&page])
        .await
        .map_err(|e| Error::storage(format!("writing {} failed: {}", t.name, describe(&e))))?;
    Ok(())
}

async fn checksum(client: &tokio_postgres::Client, quoted: &str, t: &Table) -> Result<Checksum> {
    let exprs: Vec<String> = t
        .columns
        .iter()
        .map(|c| c.kind.read_expr(&format!("\"{}\"", c.name)))
        .collect();
    let sql = format!("SELECT {} FROM {quoted}.{}", exprs.join(", "), t.name);
    let rows = client
        .query_raw(&sql, std::iter::empty::<i32>())
        .await
        .map_err(pg_error)?;
    pin_mut!(rows);
    let mut sum = Checksum::default();
    while let Some(row) = rows.next().await {
        let row = row.map_err(pg_error)?;
        let values = t
            .columns
            .iter()
            .enumerate()
            .map(|(i, c)| digest::from_postgres(c.kind, row.get::<_, Option<&str>>(i), c.name))
            .collect::<Result<Vec<_>>>()?;
        sum.add(&values);
    }
    Ok(sum)
}

async fn count_rows(
    client: &tokio_postgres::Client,
    quoted: &str,
) -> Result<BTreeMap<&'static str, u64>> {
    let mut counts = BTreeMap::new();
    for t in TABLES.iter().chain([&STEPS]) {
        let n: i64 = client
            .query_one(&format!("SELECT count(*) FROM {quoted}.{}", t.name), &[])
            .await
            .map_err(pg_error)?
            .get(0);
        counts.insert(t.name, u64::try_from(n).unwrap_or(0));
    }
    Ok(counts)
}

/// A plain connection for looking before anything is created.
async fn connect(url: &str) -> Result<tokio_postgres::Client> {
    let (client, connection) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| Error::storage(format!("cannot connect to PostgreSQL: {}", describe(&e))))?;
    tokio::spawn(async move {
        if let Err(e) = connection.await {
            tracing::debug!(error = %e, "the transfer's inspecting connection ended");
        }
    });
    Ok(client)
}

/// A text as an SQL string literal.
fn literal(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

/// A PostgreSQL error with the server's detail, when it sent one.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => match db.detail() {
            Some(detail) => format!("{} ({detail})", db.message()),
            None => db.message().to_owned(),
        },
        None => e.to_string(),
    }
}

fn pg_error(e: tokio_postgres::Error) -> Error {
    Error::storage(format!("PostgreSQL: {}", describe(&e)))
}
