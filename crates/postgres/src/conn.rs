//! The connection abstraction ([`Conn`]: anything that runs a statement)
//! and the transactions the store opens on its pooled connections.

use std::future::Future;

use deadpool_postgres::GenericClient;
use errand_core::{Error, Result};
use tokio_postgres::Row;
use tokio_postgres::types::ToSql;

use crate::error::map_err;
use crate::rows::col;

/// One statement parameter.
pub type Param<'a> = &'a (dyn ToSql + Sync);

/// Anything that runs a statement: a pooled connection or transaction (with
/// its statement cache), or an application's own `tokio-postgres` client or
/// transaction — which is how jobs are enqueued inside the caller's
/// transaction.
pub trait Conn: Sync {
    /// Runs `sql` and returns its rows.
    fn rows(
        &self,
        sql: &str,
        params: &[Param<'_>],
    ) -> impl Future<Output = std::result::Result<Vec<Row>, tokio_postgres::Error>> + Send;
}

/// Pooled connections and their transactions use the pool's statement cache.
macro_rules! cached_conn {
    ($($t:ty),*) => {$(
        impl Conn for $t {
            async fn rows(
                &self,
                sql: &str,
                params: &[Param<'_>],
            ) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
                let stmt = self.prepare_cached(sql).await?;
                GenericClient::query(self, &stmt, params).await
            }
        }
    )*};
}

/// An application's own client or transaction prepares per call.
macro_rules! plain_conn {
    ($($t:ty),*) => {$(
        impl Conn for $t {
            async fn rows(
                &self,
                sql: &str,
                params: &[Param<'_>],
            ) -> std::result::Result<Vec<Row>, tokio_postgres::Error> {
                self.query(sql, params).await
            }
        }
    )*};
}

cached_conn!(
    deadpool_postgres::Client,
    deadpool_postgres::Transaction<'_>
);
plain_conn!(tokio_postgres::Client, tokio_postgres::Transaction<'_>);

pub(crate) async fn query_opt<C: Conn>(
    client: &C,
    sql: &str,
    params: &[Param<'_>],
) -> Result<Option<Row>> {
    Ok(client
        .rows(sql, params)
        .await
        .map_err(map_err)?
        .into_iter()
        .next())
}

pub(crate) async fn query<C: Conn>(
    client: &C,
    sql: &str,
    params: &[Param<'_>],
) -> Result<Vec<Row>> {
    client.rows(sql, params).await.map_err(map_err)
}

/// Opens a READ COMMITTED transaction on `client`, whatever the server's
/// default: a unique job's look-up, a seal's listing of its batch, a purge
/// or a replay runs a statement after a lock and must see what others
/// committed before it got the lock.
pub(crate) async fn read_committed(
    client: &mut deadpool_postgres::Object,
) -> Result<deadpool_postgres::Transaction<'_>> {
    client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::ReadCommitted)
        .start()
        .await
        .map_err(map_err)
}

/// Whether `client` is inside a transaction (a savepoint can be set).
pub(crate) async fn in_transaction<C: Conn>(client: &C) -> Result<bool> {
    match client.rows("SAVEPOINT errand_check", &[]).await {
        Ok(_) => {
            client
                .rows("RELEASE SAVEPOINT errand_check", &[])
                .await
                .map_err(map_err)?;
            Ok(true)
        }
        Err(e) if e.code() == Some(&tokio_postgres::error::SqlState::NO_ACTIVE_SQL_TRANSACTION) => {
            Ok(false)
        }
        Err(e) => Err(map_err(e)),
    }
}

/// Refuses to go on outside a transaction: `what` needs a lock held until
/// the caller commits.
pub(crate) async fn require_transaction<C: Conn>(client: &C, what: &str) -> Result<()> {
    if let Err(e) = client.rows("SAVEPOINT errand_check", &[]).await {
        return Err(
            if e.code() == Some(&tokio_postgres::error::SqlState::NO_ACTIVE_SQL_TRANSACTION) {
                Error::invalid(format!(
                    "{what} must be enqueued inside a transaction: open one on the connection \
                     and commit it after the call"
                ))
            } else {
                map_err(e)
            },
        );
    }
    client
        .rows("RELEASE SAVEPOINT errand_check", &[])
        .await
        .map_err(map_err)?;
    // Its look-up after the lock must see what the previous holder
    // committed: a snapshot taken earlier (repeatable read, serializable)
    // would not.
    let rows = client
        .rows("SELECT current_setting('transaction_isolation')", &[])
        .await
        .map_err(map_err)?;
    let level: String = match rows.first() {
        Some(r) => col(r, 0)?,
        None => "unknown".to_owned(),
    };
    if level != "read committed" {
        return Err(Error::invalid(format!(
            "{what} must be enqueued in a READ COMMITTED transaction (this one is {level}): \
             its check of the jobs already stored must see what other transactions committed \
             while it waited for its lock"
        )));
    }
    Ok(())
}

/// A read-only transaction on one snapshot: every statement in it sees the
/// same committed state (a job and its history, the statistics' counts).
pub(crate) async fn read_snapshot(
    client: &mut deadpool_postgres::Client,
) -> Result<deadpool_postgres::Transaction<'_>> {
    client
        .build_transaction()
        .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
        .read_only(true)
        .start()
        .await
        .map_err(map_err)
}

/// A transaction opened with a plain `BEGIN` on a pooled connection, so
/// its statements can be sent without waiting for each other. Ended with
/// an error it is rolled back before the connection is released; dropped
/// unfinished (the caller's future dropped mid-way) it queues a `ROLLBACK`,
/// as tokio-postgres's own transactions do, so a connection never returns
/// to the pool inside it.
pub(crate) struct Pipelined<'a> {
    client: &'a tokio_postgres::Client,
    open: bool,
}

impl<'a> Pipelined<'a> {
    pub(crate) fn new(client: &'a tokio_postgres::Client) -> Self {
        Pipelined { client, open: true }
    }

    /// Passes `result` on; after an error, rolls back first (after a failed
    /// `COMMIT` there is nothing left to roll back, which is harmless).
    pub(crate) async fn end<T>(mut self, result: Result<T>) -> Result<T> {
        if result.is_err() {
            let _ = self.client.batch_execute("ROLLBACK").await;
        }
        self.open = false;
        result
    }
}

impl Drop for Pipelined<'_> {
    fn drop(&mut self) {
        if self.open {
            // Sent on the first poll; the answer is not waited for.
            let _ = futures_util::FutureExt::now_or_never(self.client.batch_execute("ROLLBACK"));
        }
    }
}
