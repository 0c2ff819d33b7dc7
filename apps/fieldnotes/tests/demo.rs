#![allow(clippy::unwrap_used)]
//! `bash scripts/demo.sh`, run twice in a row from another directory: both
//! runs succeed, each on a fresh database of its own under `$TMPDIR`, and
//! neither writes anything into the source tree. The script uses this
//! build's binaries (`ERRAND_DEMO_BIN_DIR`) instead of building its own.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_path_buf()
}

fn entries(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect()
}

#[test]
fn the_demo_runs_again_and_again_outside_the_source_tree() {
    let Some(errand) = errand_bin() else {
        return;
    };
    let bin_dir = Path::new(BIN).parent().unwrap();
    assert_eq!(
        errand.parent().unwrap(),
        bin_dir,
        "fieldnotes and errand of one build"
    );
    let data = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let repo = repo();
    let before = entries(&repo);
    let mut databases = Vec::new();
    for run in 1..=2 {
        let o = Command::new("bash")
            .arg(repo.join("scripts/demo.sh"))
            .current_dir(elsewhere.path())
            .env("TMPDIR", data.path())
            .env("ERRAND_DEMO_BIN_DIR", bin_dir)
            .output()
            .unwrap();
        let out = stdout(&o);
        assert!(
            o.status.success(),
            "run {run} failed: {:?}\n{out}\n{}",
            o.status,
            stderr(&o)
        );
        let db = out
            .lines()
            .find_map(|l| l.strip_prefix("demo database (fresh for this run): "))
            .unwrap_or_else(|| panic!("run {run} names no database:\n{out}"));
        let db = PathBuf::from(db);
        assert!(db.starts_with(data.path()), "{}", db.display());
        assert!(db.is_file(), "{}", db.display());
        assert!(out.contains("balance_cents=9500"), "run {run}: {out}");
        assert!(out.contains("acknowledged=true"), "run {run}: {out}");
        assert!(out.contains("outcome succeeded"), "run {run}: {out}");
        // The last line is true of what just happened: the worker's report
        // was checked; the receipts queue, whose one job is done, has
        // nothing to compare.
        assert_eq!(
            out.lines().last(),
            Some("ok: 1 threshold check(s) over the workers' claim cycles, none crossed"),
            "run {run}: {out}"
        );
        databases.push(db);
    }
    assert_ne!(databases[0], databases[1], "each run has its own database");
    assert_eq!(entries(&repo), before, "nothing new in the source tree");
    assert!(
        entries(elsewhere.path()).is_empty(),
        "nor in the caller's directory"
    );
}
