//! The conformance suite against PostgreSQL, each case in its own schema.
//!
//! Set `ERRAND_TEST_POSTGRES_URL` (for example
//! `postgres://postgres@127.0.0.1:5432/postgres`) to run it; without it every
//! case is skipped (`errand_testsupport::skip`: it prints SKIPPED, and
//! `scripts/test.sh` lists it at its end), and fails when `CI` is set, so
//! CI can never pass these silently.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use errand_core::{ManualClock, Store};
use errand_postgres::{PgOptions, PgStore};

fn url() -> Option<String> {
    errand_testsupport::postgres_url("the PostgreSQL conformance cases")
}

/// A schema name unique to this test: `errand_t_<unix secs>_<pid>_<n>`.
fn schema_name() -> String {
    static N: AtomicU32 = AtomicU32::new(0);
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    format!(
        "errand_t_{secs}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// Drops test schemas left behind by runs more than an hour old.
async fn drop_stale_schemas(url: &str) {
    let Ok((client, conn)) = tokio_postgres::connect(url, tokio_postgres::NoTls).await else {
        return;
    };
    let driver = tokio::spawn(conn);
    let cutoff = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs().saturating_sub(3600))
        .unwrap_or(0);
    if let Ok(rows) = client
        .query(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE 'errand\\_t\\_%'",
            &[],
        )
        .await
    {
        for row in rows {
            let name: String = row.get(0);
            let secs: u64 = name
                .split('_')
                .nth(2)
                .and_then(|s| s.parse().ok())
                .unwrap_or(u64::MAX);
            if secs < cutoff {
                let _ = client
                    .batch_execute(&format!("DROP SCHEMA IF EXISTS \"{name}\" CASCADE"))
                    .await;
            }
        }
    }
    driver.abort();
}

async fn make(clock: ManualClock) -> Option<Arc<dyn Store>> {
    let url = url()?;
    drop_stale_schemas(&url).await;
    let options = PgOptions {
        schema: schema_name(),
        migrate: true,
        pool_size: 4,
        clock: Some(Arc::new(clock)),
        ..PgOptions::default()
    };
    Some(Arc::new(
        PgStore::connect(&url, options)
            .await
            .expect("connect to PostgreSQL"),
    ))
}

errand_storetest::conformance_tests!(make);

errand_storetest::model_test!(make, 24);
