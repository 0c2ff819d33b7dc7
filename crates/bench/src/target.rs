//! The database a benchmark runs on: opening it fresh, measuring phases
//! (the store handle a phase uses and the commits it made), bulk loading
//! claim-cost rows and counting jobs by state afterwards.

use std::collections::BTreeMap;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use errand::sqlite::rusqlite;
use errand::{
    DbTarget, JobFilter, PgOptions, PgStore, SqliteOptions, SqliteStore, Store, Synchronous,
};
use tokio_postgres::NoTls;

use crate::profile::{
    CpuTimes, IoCounters, Mark, PgActivity, Profile, StatementStat, local_postmaster, server_ticks,
};
use crate::{BenchError, Result};

/// The schema `errand` uses by default: never benchmarked into.
const PRODUCTION_SCHEMA: &str = "errand";
/// How long to wait for a closed phase's PostgreSQL sessions to end.
const SESSION_END_WAIT: Duration = Duration::from_secs(5);
/// Rows per statement when bulk loading claim-cost rows.
const LOAD_CHUNK: u64 = 200_000;

/// An open benchmark database.
pub(crate) enum Target {
    Sqlite {
        store: SqliteStore,
        synchronous: Synchronous,
    },
    Postgres {
        url: String,
        schema: String,
        /// Sessions connected to the database before the benchmark opened
        /// any (the statistics reader included).
        baseline_backends: i64,
        /// The server's postmaster, when the server runs on this machine.
        postmaster: Option<u32>,
        /// What the phases' stores encrypt with.
        keys: Option<Arc<errand::encryption::Keyring>>,
    },
}

/// One measured phase: the store handle it uses and where the commit
/// counter stood when it began.
pub(crate) struct Phase {
    pub(crate) store: Arc<dyn Store>,
    commits_before: u64,
    mark: Mark,
}

/// What a finished phase measured besides its own timings.
pub(crate) struct Finished {
    /// Database commits during the phase.
    pub(crate) commits: u64,
    /// A caveat about the count, if any.
    pub(crate) note: Option<String>,
    marks: (Mark, Mark),
}

impl Finished {
    /// The phase's resources per job.
    pub(crate) fn profile(&self, jobs: u64) -> Profile {
        Profile::between(&self.marks.0, &self.marks.1, jobs)
    }
}

fn pg(e: tokio_postgres::Error) -> BenchError {
    let detail = e
        .as_db_error()
        .map(|d| format!("{}: {}", d.code().code(), d.message()))
        .unwrap_or_else(|| e.to_string());
    BenchError::Postgres(detail)
}

fn sqlite_err(e: rusqlite::Error) -> errand::Error {
    errand::Error::storage(e.to_string())
}

/// A direct PostgreSQL session (statistics, bulk load, the snapshot holder).
pub(crate) struct PgSession {
    pub(crate) client: tokio_postgres::Client,
    driver: tokio::task::JoinHandle<()>,
}

impl PgSession {
    pub(crate) async fn connect(url: &str) -> Result<PgSession> {
        let (client, conn) = tokio_postgres::connect(url, NoTls).await.map_err(|e| {
            BenchError::Postgres(format!(
                "cannot connect ({e}); is the server running and the URL right?"
            ))
        })?;
        let driver = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(PgSession { client, driver })
    }

    /// Ends the session and waits until the connection is closed.
    pub(crate) async fn close(self) {
        drop(self.client);
        let _ = self.driver.await;
    }
}

/// `xact_commit` and `numbackends` of the current database.
async fn pg_counters(url: &str) -> Result<(u64, i64)> {
    let session = PgSession::connect(url).await?;
    let row = session
        .client
        .query_one(
            "SELECT xact_commit, numbackends::bigint FROM pg_stat_database \
             WHERE datname = current_database()",
            &[],
        )
        .await
        .map_err(pg);
    session.close().await;
    let row = row?;
    let commits: i64 = row.try_get(0).map_err(pg)?;
    let backends: i64 = row.try_get(1).map_err(pg)?;
    Ok((u64::try_from(commits).unwrap_or(0), backends))
}

/// The postmaster of the server `url` names, when it runs on this machine
/// (see [`local_postmaster`]).
async fn pg_postmaster(url: &str) -> Result<Option<u32>> {
    let session = PgSession::connect(url).await?;
    let row = session
        .client
        .query_one(
            "SELECT pg_backend_pid(), extract(epoch FROM pg_postmaster_start_time())::float8",
            &[],
        )
        .await
        .map_err(pg)
        .and_then(|row| {
            let pid: i32 = row.try_get(0).map_err(pg)?;
            let started: f64 = row.try_get(1).map_err(pg)?;
            Ok((pid, started))
        });
    // Looked for while the backend is there to be found.
    let found = row.map(|(pid, started)| {
        u32::try_from(pid)
            .ok()
            .and_then(|pid| local_postmaster(pid, started))
    });
    session.close().await;
    found
}

/// `pg_stat_statements` entry by entry for the current database; `None`
/// when it is not loaded or has no `toplevel` column (before PostgreSQL 14).
async fn pg_statements(c: &tokio_postgres::Client) -> Option<Vec<StatementStat>> {
    let rows = c
        .query(
            "SELECT queryid, toplevel, calls, total_exec_time, rows, coalesce(query, '') \
             FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
               AND queryid IS NOT NULL",
            &[],
        )
        .await
        .ok()?;
    rows.iter()
        .map(|r| {
            Some(StatementStat {
                queryid: r.try_get(0).ok()?,
                toplevel: r.try_get(1).ok()?,
                calls: u64::try_from(r.try_get::<_, i64>(2).ok()?).ok()?,
                total_ms: r.try_get(3).ok()?,
                rows: u64::try_from(r.try_get::<_, i64>(4).ok()?).ok()?,
                query: r.try_get(5).ok()?,
            })
        })
        .collect()
}

/// The cluster's WAL position, this database's statement count (with
/// `pg_stat_statements`), the row writes in `schema` and the server's CPU
/// (when `postmaster` is known).
async fn pg_activity(url: &str, schema: &str, postmaster: Option<u32>) -> Result<PgActivity> {
    let session = PgSession::connect(url).await?;
    let read = async {
        let c = &session.client;
        let row = c
            .query_one(
                "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, \
                        coalesce(sum(n_tup_ins), 0)::bigint, coalesce(sum(n_tup_upd), 0)::bigint, \
                        coalesce(sum(n_tup_hot_upd), 0)::bigint, coalesce(sum(n_tup_del), 0)::bigint \
                 FROM pg_stat_user_tables WHERE schemaname = $1",
                &[&schema],
            )
            .await
            .map_err(pg)?;
        let n = |i: usize| -> Result<u64> {
            let v: i64 = row.try_get(i).map_err(pg)?;
            Ok(u64::try_from(v).unwrap_or(0))
        };
        // Absent, or installed but not loaded: no statement count.
        let statements = match c
            .query_one(
                "SELECT sum(calls)::bigint FROM pg_stat_statements \
                 WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())",
                &[],
            )
            .await
        {
            Ok(r) => r
                .try_get::<_, Option<i64>>(0)
                .ok()
                .flatten()
                .and_then(|v| u64::try_from(v).ok()),
            Err(_) => None,
        };
        let by_statement = match statements {
            Some(_) => pg_statements(c).await,
            None => None,
        };
        Ok(PgActivity {
            wal_lsn: n(0)?,
            statements,
            by_statement,
            // Read while this session's backend is alive, as at the other
            // end of the phase: its own CPU then barely counts.
            server_ticks: postmaster.and_then(server_ticks),
            inserted: n(1)?,
            updated: n(2)?,
            hot_updated: n(3)?,
            deleted: n(4)?,
        })
    };
    let result = read.await;
    session.close().await;
    result
}

/// The schema name checked and quoted by the PostgreSQL store's own rule.
fn quote_schema(schema: &str) -> Result<String> {
    errand::postgres::quote_schema(schema).map_err(|e| match e {
        errand::Error::Invalid(m) => BenchError::Invalid(m),
        other => BenchError::Invalid(other.to_string()),
    })
}

impl Target {
    /// Opens (creating and migrating) the database `db` names and checks
    /// that it holds no jobs yet.
    pub(crate) async fn open(
        db: &str,
        schema: &str,
        synchronous: Synchronous,
        keys: Option<Arc<errand::encryption::Keyring>>,
    ) -> Result<Target> {
        let target = match DbTarget::parse(db)? {
            DbTarget::Sqlite(path) => {
                if path.exists() && !path.is_file() {
                    return Err(BenchError::Invalid(format!(
                        "{} is not a file; pass the path of a new database file for the benchmark",
                        path.display()
                    )));
                }
                let options = SqliteOptions {
                    create: true,
                    migrate: true,
                    synchronous,
                    keys,
                    ..SqliteOptions::default()
                };
                let store = SqliteStore::open(&path, options)?;
                Target::Sqlite { store, synchronous }
            }
            DbTarget::Postgres(url) => {
                if let Err(e) = url.parse::<tokio_postgres::Config>() {
                    return Err(BenchError::Invalid(format!(
                        "the PostgreSQL URL is malformed ({e}); write it like postgres://user@host:5432/dbname"
                    )));
                }
                quote_schema(schema)?;
                if schema == PRODUCTION_SCHEMA {
                    return Err(BenchError::Invalid(format!(
                        "errand bench writes its jobs into the schema it measures; it will not use `{PRODUCTION_SCHEMA}`, \
                         the schema workers use by default: pass a scratch schema such as --schema errand_bench \
                         (it is created and migrated; drop it afterwards)"
                    )));
                }
                let (_, baseline_backends) = pg_counters(&url).await?;
                let postmaster = pg_postmaster(&url).await?;
                let options = PgOptions {
                    schema: schema.to_owned(),
                    migrate: true,
                    ..PgOptions::default()
                };
                // Creates and migrates the schema; the handle is dropped at once.
                drop(PgStore::connect(&url, options).await?);
                Target::Postgres {
                    url,
                    schema: schema.to_owned(),
                    baseline_backends,
                    postmaster,
                    keys,
                }
            }
        };
        target.refuse_existing_jobs().await?;
        Ok(target)
    }

    /// Caveats that hold for the whole run.
    pub(crate) fn notes(&self) -> Vec<String> {
        match self {
            Target::Postgres {
                baseline_backends, ..
            } if *baseline_backends > 1 => vec![format!(
                "{} other sessions were connected to this database when the benchmark began: \
                 their commits count in commits_per_job too; run against a database of its own for a clean count",
                baseline_backends - 1
            )],
            _ => Vec::new(),
        }
    }

    /// `sqlite` or `postgres`.
    pub(crate) fn backend(&self) -> &'static str {
        match self {
            Target::Sqlite { .. } => "sqlite",
            Target::Postgres { .. } => "postgres",
        }
    }

    /// SQLite's `synchronous` level, as `full` or `normal`.
    pub(crate) fn synchronous(&self) -> Option<&'static str> {
        match self {
            Target::Sqlite { synchronous, .. } => Some(match synchronous {
                Synchronous::Full => "full",
                Synchronous::Normal => "normal",
            }),
            Target::Postgres { .. } => None,
        }
    }

    pub(crate) fn schema(&self) -> Option<&str> {
        match self {
            Target::Sqlite { .. } => None,
            Target::Postgres { schema, .. } => Some(schema),
        }
    }

    pub(crate) fn pg_url(&self) -> Option<&str> {
        match self {
            Target::Sqlite { .. } => None,
            Target::Postgres { url, .. } => Some(url),
        }
    }

    async fn refuse_existing_jobs(&self) -> Result<()> {
        let phase = self.phase().await?;
        let any = phase
            .store
            .list(&JobFilter {
                limit: Some(1),
                ..JobFilter::default()
            })
            .await?;
        drop(phase);
        if any.is_empty() {
            return Ok(());
        }
        let what = match self {
            Target::Sqlite { store, .. } => format!(
                "the database {} already holds jobs; errand bench measures from an empty job table and leaves its jobs behind: \
                 pass the path of a new file with --db",
                store.path().display()
            ),
            Target::Postgres { schema, .. } => format!(
                "schema {schema} already holds jobs; errand bench measures from an empty job table and leaves its jobs behind: \
                 pass a new scratch schema with --schema (it is created) or drop this one"
            ),
        };
        Err(BenchError::Invalid(what))
    }

    /// Begins a phase: a store handle of its own and the commit counter.
    ///
    /// SQLite: the store's writer-thread counter ([`SqliteStore::commits`]).
    /// PostgreSQL: `xact_commit` of the database once every session of the
    /// previous phase has ended (an ending session flushes its statistics),
    /// then a fresh `PgStore`.
    pub(crate) async fn phase(&self) -> Result<Phase> {
        match self {
            Target::Sqlite { store, .. } => Ok(Phase {
                commits_before: store.commits(),
                store: Arc::new(store.clone()),
                mark: Mark {
                    cpu: CpuTimes::now(),
                    pg: None,
                    io: IoCounters::now(),
                },
            }),
            Target::Postgres {
                url,
                schema,
                postmaster,
                keys,
                ..
            } => {
                let (commits_before, _) = self.settled_counters().await?;
                let pg = Some(pg_activity(url, schema, *postmaster).await?);
                let options = PgOptions {
                    schema: schema.clone(),
                    migrate: false,
                    keys: keys.clone(),
                    ..PgOptions::default()
                };
                let store: Arc<dyn Store> = Arc::new(PgStore::connect(url, options).await?);
                Ok(Phase {
                    store,
                    commits_before,
                    // Last, so that opening the store is not counted.
                    mark: Mark {
                        cpu: CpuTimes::now(),
                        pg,
                        io: None,
                    },
                })
            }
        }
    }

    /// Ends a phase and returns the database commits made during it, with
    /// a note when the count may be off, and its resources. Every other
    /// handle on the phase's store must be dropped first.
    pub(crate) async fn finish(&self, phase: Phase) -> Result<Finished> {
        let Phase {
            store,
            commits_before,
            mark,
        } = phase;
        // The CPU stops counting here, before the wait for sessions to end.
        let cpu = CpuTimes::now();
        match self {
            Target::Sqlite { store: sqlite, .. } => {
                drop(store);
                let io = IoCounters::now();
                Ok(Finished {
                    commits: sqlite.commits().saturating_sub(commits_before),
                    note: None,
                    marks: (mark, Mark { cpu, pg: None, io }),
                })
            }
            Target::Postgres {
                url,
                schema,
                postmaster,
                ..
            } => {
                // The PostgreSQL sessions of the phase flush their
                // statistics when they end, which they do once the store
                // (its pool and its LISTEN connection) is gone.
                let weak: Weak<dyn Store> = Arc::downgrade(&store);
                drop(store);
                let start = Instant::now();
                let mut note = None;
                while weak.upgrade().is_some() {
                    if start.elapsed() > SESSION_END_WAIT {
                        note = Some(
                            "the phase's store was still in use when its commits were read; its last commits may be missing"
                                .to_owned(),
                        );
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let (after, settled) = self.counters_after_sessions_end().await?;
                if !settled && note.is_none() {
                    note = Some(
                        "other sessions were connected to the database: their commits count too, and the phase's \
                         last commits may be missing"
                            .to_owned(),
                    );
                }
                let pg = Some(pg_activity(url, schema, *postmaster).await?);
                Ok(Finished {
                    commits: after.saturating_sub(commits_before),
                    note,
                    marks: (mark, Mark { cpu, pg, io: None }),
                })
            }
        }
    }

    /// PostgreSQL: waits until no more sessions are connected than before
    /// the benchmark began (so every session it closed has flushed its
    /// statistics), then reads `xact_commit`. Returns whether that point
    /// was reached within the wait.
    async fn counters_after_sessions_end(&self) -> Result<(u64, bool)> {
        let Target::Postgres {
            url,
            baseline_backends,
            ..
        } = self
        else {
            return Ok((0, true));
        };
        let start = Instant::now();
        loop {
            let (commits, backends) = pg_counters(url).await?;
            if backends <= *baseline_backends {
                return Ok((commits, true));
            }
            if start.elapsed() > SESSION_END_WAIT {
                return Ok((commits, false));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn settled_counters(&self) -> Result<(u64, bool)> {
        self.counters_after_sessions_end().await
    }

    /// How many jobs are in each state (read after the measured phases).
    pub(crate) async fn state_counts(&self) -> Result<BTreeMap<String, u64>> {
        match self {
            Target::Sqlite { store, .. } => Ok(store
                .read(|c| {
                    let mut stmt = c
                        .prepare("SELECT state, count(*) FROM errand_jobs GROUP BY state")
                        .map_err(sqlite_err)?;
                    let rows = stmt
                        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
                        .map_err(sqlite_err)?;
                    rows.map(|r| {
                        r.map(|(s, n)| (s, u64::try_from(n).unwrap_or(0)))
                            .map_err(sqlite_err)
                    })
                    .collect::<errand::Result<BTreeMap<_, _>>>()
                })
                .await?),
            Target::Postgres { url, schema, .. } => {
                let quoted = quote_schema(schema)?;
                let session = PgSession::connect(url).await?;
                let rows = session
                    .client
                    .query(
                        &format!("SELECT state, count(*) FROM {quoted}.errand_jobs GROUP BY state"),
                        &[],
                    )
                    .await
                    .map_err(pg);
                session.close().await;
                let mut out = BTreeMap::new();
                for row in rows? {
                    let state: String = row.try_get(0).map_err(pg)?;
                    let n: i64 = row.try_get(1).map_err(pg)?;
                    out.insert(state, u64::try_from(n).unwrap_or(0));
                }
                Ok(out)
            }
        }
    }

    /// Claim cost: writes `rows` finished jobs (each with its closed
    /// attempt row, as a completed job leaves them) and `rows` jobs
    /// scheduled a day or more ahead, with SQL that mirrors what the store
    /// writes, in statements of up to 200,000 rows. PostgreSQL then runs
    /// `VACUUM (ANALYZE)` on both tables, as autovacuum would have by the
    /// time a real table held that many rows; SQLite is left as the store
    /// leaves it (Errand never runs `ANALYZE` there).
    pub(crate) async fn bulk_load(&self, rows: u64) -> Result<()> {
        let mut from = 0;
        while from < rows {
            let to = (from + LOAD_CHUNK).min(rows);
            match self {
                Target::Sqlite { store, .. } => {
                    store
                        .write(move |c, now| sqlite_load(c, now.as_millis(), from, to))
                        .await?
                }
                Target::Postgres { url, schema, .. } => {
                    pg_load(url, &quote_schema(schema)?, from, to).await?
                }
            }
            from = to;
        }
        if let Target::Postgres { url, schema, .. } = self {
            let quoted = quote_schema(schema)?;
            let session = PgSession::connect(url).await?;
            let mut result = Ok(());
            for table in ["errand_jobs", "errand_attempts"] {
                result = session
                    .client
                    .batch_execute(&format!("VACUUM (ANALYZE) {quoted}.{table}"))
                    .await
                    .map_err(pg);
                if result.is_err() {
                    break;
                }
            }
            session.close().await;
            result?;
        }
        Ok(())
    }
}

fn sqlite_load(c: &rusqlite::Connection, now: i64, from: u64, to: u64) -> errand::Result<()> {
    let (from, to) = (
        i64::try_from(from).unwrap_or(i64::MAX),
        i64::try_from(to).unwrap_or(i64::MAX),
    );
    let series =
        "WITH RECURSIVE n(i) AS (SELECT :from UNION ALL SELECT i + 1 FROM n WHERE i + 1 < :to)";
    // Finished two days ago, one a millisecond, each after a 5 ms attempt
    // that the job row holds (the store writes no history row for an
    // attempt that succeeds).
    let done_at = now - 2 * 86_400_000;
    c.execute(
        &format!(
            "{series}
             INSERT INTO errand_jobs
                 (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
                  max_lease_expiries, available_at, created_at, updated_at, finished_at,
                  attempt_started_at)
             SELECT printf('bench-done-%09d', i), 'default', 'bench', 'done', '{{}}', 0, 1, 25, 0,
                    5, :t + i, :t + i, :t + i + 5, :t + i + 5, :t + i
             FROM n"
        ),
        rusqlite::named_params! {":from": from, ":to": to, ":t": done_at},
    )
    .map_err(sqlite_err)?;
    // Due from tomorrow on, one a millisecond.
    c.execute(
        &format!(
            "{series}
             INSERT INTO errand_jobs
                 (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
                  max_lease_expiries, available_at, created_at, updated_at)
             SELECT printf('bench-future-%09d', i), 'default', 'bench', 'ready', '{{}}', 0, 0, 25, 0,
                    5, :due + i, :now, :now
             FROM n"
        ),
        rusqlite::named_params! {":from": from, ":to": to, ":due": now + 86_400_000, ":now": now},
    )
    .map_err(sqlite_err)?;
    Ok(())
}

async fn pg_load(url: &str, quoted: &str, from: u64, to: u64) -> Result<()> {
    let (from, to) = (
        i64::try_from(from).unwrap_or(i64::MAX),
        i64::try_from(to).unwrap_or(i64::MAX),
    );
    let session = PgSession::connect(url).await?;
    let sql = format!(
        "BEGIN;
         INSERT INTO {quoted}.errand_jobs
             (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
              max_lease_expiries, available_at, created_at, updated_at, finished_at,
              attempt_started_at)
         SELECT 'bench-done-' || lpad(i::text, 9, '0'), 'default', 'bench', 'done', '{{}}'::jsonb,
                0, 1, 25, 0, 5, t, t, t + interval '5 ms', t + interval '5 ms', t
         FROM generate_series({from}::bigint, {to}::bigint - 1) i,
              LATERAL (SELECT now() - interval '2 days' + i * interval '1 ms' AS t) x;
         INSERT INTO {quoted}.errand_jobs
             (id, queue, kind, state, payload, priority, attempts, max_attempts, replays,
              max_lease_expiries, available_at, created_at, updated_at)
         SELECT 'bench-future-' || lpad(i::text, 9, '0'), 'default', 'bench', 'ready', '{{}}'::jsonb,
                0, 0, 25, 0, 5, now() + interval '1 day' + i * interval '1 ms', now(), now()
         FROM generate_series({from}::bigint, {to}::bigint - 1) i;
         COMMIT;"
    );
    let result = session.client.batch_execute(&sql).await.map_err(pg);
    session.close().await;
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_checked() {
        assert!(quote_schema("bench_1").is_ok());
        assert!(quote_schema("").is_err());
        assert!(quote_schema("1bench").is_err());
        assert!(quote_schema("a;drop").is_err());
        assert!(quote_schema(&"a".repeat(64)).is_err());
    }
}
