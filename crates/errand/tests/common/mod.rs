#![allow(dead_code, clippy::unwrap_used)]
//! Shared set-up for the library's integration tests.

use std::path::PathBuf;
use std::sync::Arc;

use errand::{ManualClock, SqliteOptions, SqliteStore, Timestamp};

pub const T0: Timestamp = Timestamp::from_millis(1_795_996_800_000);

#[derive(Debug)]
pub struct Fixture {
    pub _dir: tempfile::TempDir,
    pub path: PathBuf,
    pub store: SqliteStore,
    pub clock: ManualClock,
}

pub fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("errand.db");
    let clock = ManualClock::new(T0);
    let store = SqliteStore::open(
        &path,
        SqliteOptions {
            create: true,
            migrate: true,
            clock: Arc::new(clock.clone()),
            ..SqliteOptions::default()
        },
    )
    .unwrap();
    Fixture {
        _dir: dir,
        path,
        store,
        clock,
    }
}
