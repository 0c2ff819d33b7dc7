//! Where a run's jobs live: a SQLite file (on a small file system of its
//! own for the disk-full plan), a PostgreSQL schema or a private cluster;
//! the final integrity check and the clean-up.

use std::path::Path;

use anyhow::{Context, Result};

use super::{Fault, RunOptions};
use crate::cluster::{Cluster, Pair};

async fn drop_schema(url: &str, schema: &str) -> Result<()> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .context("connect to drop the schema")?;
    let task = tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS \"{}\" CASCADE",
            schema.replace('"', "\"\"")
        ))
        .await
        .context("drop the schema")?;
    drop(client);
    let _ = task.await;
    Ok(())
}

/// Where the run's jobs live: a SQLite file (on a small file system of its
/// own for the disk-full plan), a PostgreSQL schema, or a private cluster.
pub(super) struct Backend {
    pub(super) disk: Option<crate::disk::SmallDisk>,
    pub(super) cluster: Option<Cluster>,
    /// The failover plan's primary and standby.
    pub(super) pair: Option<Pair>,
    pg_url: Option<String>,
    /// The `--db` string.
    pub(super) db: String,
    pub(super) schema: Option<String>,
    /// How the report names it.
    pub(super) name: String,
}

impl Backend {
    pub(super) fn open(opts: &RunOptions, seed: u64, dir: &Path) -> Result<Backend> {
        let disk = if opts.plan.contains(&Fault::DiskFull) {
            Some(crate::disk::SmallDisk::mount(&dir.join("fs"), 64)?)
        } else {
            None
        };
        let cluster = if opts.pg_cluster {
            Some(Cluster::start()?)
        } else {
            None
        };
        let pair = match opts.pg_pair {
            Some(mode) => Some(Pair::start(mode)?),
            None => None,
        };
        let pg_url = cluster
            .as_ref()
            .map(Cluster::url)
            .or(pair.as_ref().map(Pair::url))
            .or(opts.pg.clone());
        let (db, schema, name) = match &pg_url {
            Some(url) => {
                let schema = opts.schema.clone().unwrap_or_else(|| {
                    format!("harness_{}_{}", seed % 1_000_000, std::process::id())
                });
                let name = match (&cluster, opts.pg_pair) {
                    (Some(_), _) => "postgres (private cluster)".to_owned(),
                    (None, Some(mode)) => format!("postgres (primary and {mode} standby)"),
                    (None, None) => "postgres".to_owned(),
                };
                (url.clone(), Some(schema), name)
            }
            None => {
                let path = match &disk {
                    Some(d) => d.path().join("jobs.db"),
                    None => opts.db.clone().unwrap_or_else(|| dir.join("jobs.db")),
                };
                (path.display().to_string(), None, "sqlite".to_owned())
            }
        };
        Ok(Backend {
            disk,
            cluster,
            pair,
            pg_url,
            db,
            schema,
            name,
        })
    }

    /// The `--db` (and `--schema`) arguments of every `errand` process.
    pub(super) fn db_args(&self) -> Vec<String> {
        let mut args = vec!["--db".to_owned(), self.db.clone()];
        if let Some(s) = &self.schema {
            args.extend(["--schema".to_owned(), s.clone()]);
        }
        args
    }

    /// SQLite's `PRAGMA integrity_check` of the final file (`None` on
    /// PostgreSQL).
    pub(super) fn integrity(&self) -> Result<Option<String>> {
        if self.pg_url.is_some() {
            return Ok(None);
        }
        let conn = rusqlite::Connection::open(&self.db).context("open the SQLite file")?;
        let rows: Vec<String> = conn
            .prepare("PRAGMA integrity_check")
            .and_then(|mut s| {
                s.query_map([], |r| r.get::<_, String>(0))?
                    .collect::<rusqlite::Result<Vec<String>>>()
            })
            .context("PRAGMA integrity_check")?;
        Ok(Some(rows.join("; ")))
    }

    /// Drops the run's schema on a shared server (unless kept), and stops a
    /// private cluster.
    pub(super) async fn clean_up(&self, opts: &RunOptions) -> Result<()> {
        if let (Some(url), Some(s)) = (&self.pg_url, &self.schema)
            && !opts.keep
            && self.cluster.is_none()
            && self.pair.is_none()
        {
            drop_schema(url, s).await?;
        }
        Ok(())
    }
}
