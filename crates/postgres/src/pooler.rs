//! Refusing a pooler that hands each transaction its own server connection
//! (PgBouncer's `pool_mode = transaction` or `statement`): Errand keeps
//! prepared statements and `LISTEN` on its connections, which such a
//! pooler breaks — with errors like "prepared statement "s1" already
//! exists" and wake-ups that never come. A pooler in session mode, or none,
//! passes.

use errand_core::{Error, Result};

/// A session's backend process id, read without a prepared statement (the
/// simple protocol), which any pooler passes through.
async fn backend_pid(client: &tokio_postgres::Client, sql: &str) -> Result<String> {
    let messages = client
        .simple_query(sql)
        .await
        .map_err(crate::error::map_err)?;
    messages
        .iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .ok_or_else(|| Error::storage("the pooling probe read no backend id"))
}

/// Checks that `second`'s session keeps its server connection across
/// transactions while `first` holds another one open and then lets it go:
/// a transaction pooler hands `second` the connection `first` let go
/// (PgBouncer reuses the last one freed), a direct connection or a session
/// pooler never changes it.
///
/// # Errors
/// The server connection changed: the message names the setting to change.
pub(crate) async fn refuse_transaction_pooling(
    first: &tokio_postgres::Client,
    second: &tokio_postgres::Client,
    target: &str,
) -> Result<()> {
    // A pooler in statement mode refuses the transaction itself.
    if let Err(e) = backend_pid(first, "BEGIN; SELECT pg_backend_pid()").await {
        return Err(Error::invalid(format!(
            "{target} refused a transaction block ({e}): a pooler in statement mode? {}",
            remedy()
        )));
    }
    // `first`'s transaction ends whatever `second` read.
    let before = backend_pid(second, "SELECT pg_backend_pid()").await;
    first
        .simple_query("COMMIT")
        .await
        .map_err(crate::error::map_err)?;
    let before = before?;
    let after = backend_pid(second, "SELECT pg_backend_pid()").await?;
    if before != after {
        return Err(Error::invalid(format!(
            "the connection to {target} goes through a pooler that gives each transaction its \
             own server connection (PgBouncer's pool_mode = transaction or statement): {}",
            remedy()
        )));
    }
    Ok(())
}

/// Why such a pooler is refused, and what to change.
fn remedy() -> &'static str {
    "Errand keeps prepared statements and LISTEN on its connections, which that breaks. Set \
     pool_mode = session for this database in the pooler, or connect to PostgreSQL directly"
}
