//! The conformance suite against the SQLite store, each case on a fresh file.

use std::sync::Arc;

use errand_core::{ManualClock, Store};
use errand_sqlite::{SqliteOptions, SqliteStore};

async fn make(clock: ManualClock) -> Option<Arc<dyn Store>> {
    // The directory is leaked on purpose so the file outlives the store.
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let options = SqliteOptions {
        create: true,
        migrate: true,
        clock: Arc::new(clock),
        ..SqliteOptions::default()
    };
    Some(Arc::new(
        SqliteStore::open(dir.join("errand.db"), options).expect("open store"),
    ))
}

errand_storetest::conformance_tests!(make);

errand_storetest::model_test!(make, 128);
