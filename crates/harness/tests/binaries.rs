#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The crash points live in the harness's own build of the command and
//! nowhere else: `errand-crashable` carries every point's name and arms
//! them from `ERRAND_FAILPOINTS`; the `errand` binary built beside it (in
//! the same workspace build, which compiles this crate too) carries none
//! and refuses the variable instead of ignoring it.

use std::path::{Path, PathBuf};
use std::process::Command;

use errand_harness::crash::FAILPOINTS;

fn crashable() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_errand-crashable"))
}

/// The `errand` binary of the same build: next to `errand-crashable`.
fn errand() -> PathBuf {
    let bin = crashable().with_file_name("errand");
    assert!(
        bin.is_file(),
        "no {}: run the workspace's tests (`cargo test --workspace` builds it) \
         or `cargo build -p errand-cli` first",
        bin.display()
    );
    bin
}

/// The crash point names `file` contains (grep, as the byte search).
fn names_in(file: &Path) -> Vec<&'static str> {
    FAILPOINTS
        .iter()
        .copied()
        .filter(|name| {
            let status = Command::new("grep")
                .args(["-a", "-q", "-F", "-e", name])
                .arg(file)
                .status()
                .expect("run grep");
            assert!(
                status.code() != Some(2),
                "grep failed on {}",
                file.display()
            );
            status.success()
        })
        .collect()
}

#[test]
fn only_the_harness_build_of_the_command_carries_crash_points() {
    assert_eq!(names_in(&crashable()), FAILPOINTS.to_vec());
    // `heartbeat` is also the name of an ordinary operation (the store's
    // lease renewal), so its absence cannot be asked for.
    assert_eq!(names_in(&errand()), vec!["heartbeat"]);
}

#[test]
fn the_command_refuses_the_harness_variables_and_the_harness_build_checks_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("e.db");
    for (var, value) in [
        ("ERRAND_FAILPOINTS", "heartbeat=return"),
        ("ERRAND_CLOCK_OFFSET_FILE", "offset"),
    ] {
        let out = Command::new(errand())
            .arg("--db")
            .arg(&db)
            .arg("migrate")
            .env(var, value)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{var}: {err}");
        assert!(
            err.contains(var) && err.contains("errand-crashable"),
            "{err}"
        );
        assert!(!db.exists(), "a refused command created the database");
    }
    let out = Command::new(crashable())
        .arg("--db")
        .arg(&db)
        .arg("migrate")
        .env("ERRAND_FAILPOINTS", "claim-comitted=return")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("not a crash point"), "{err}");
    let out = Command::new(crashable())
        .arg("--db")
        .arg(&db)
        .arg("migrate")
        .env("ERRAND_FAILPOINTS", "heartbeat=off")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(db.exists());
}
