#![allow(clippy::unwrap_used, clippy::expect_used)]
//! How long `errand enqueue --id` de-duplicates: while the job is stored,
//! as `enqueue --help` says.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

fn errand(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_errand"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("ERRAND_DB")
        .env("ERRAND_LOG", "error")
        .output()
        .expect("run errand")
}

fn json(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

fn enqueue(db: &Path, payload: &str) -> Value {
    json(&errand(
        db,
        &[
            "enqueue",
            "--kind",
            "email",
            "--id",
            "order-17",
            "--payload",
            payload,
            "--json",
        ],
    ))
}

#[test]
fn enqueue_help_says_how_long_an_id_deduplicates() {
    let out = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["enqueue", "--help"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for says in [
        "for as long as the job is stored",
        "dead until purged",
        "done and cancelled ones until pruned",
        "7 days",
        "After that the id creates a new job",
    ] {
        assert!(
            help.contains(says),
            "enqueue --help does not say {says:?}: {help}"
        );
    }
}

#[test]
fn an_id_deduplicates_until_its_finished_job_is_pruned() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("jobs.db");
    json(&errand(&db, &["migrate", "--json"]));
    let first = enqueue(&db, r#"{"n":1}"#);
    assert_eq!(first["created"], true);
    let ran = json(&errand(
        &db,
        &["work", "--once", "--exec", "true", "--json"],
    ));
    assert_eq!(ran["outcome"], "acknowledged", "{ran}");
    // Done and within retention: the id returns the stored job.
    let again = enqueue(&db, r#"{"n":2}"#);
    assert_eq!(
        (&again["created"], &again["state"], &again["payload"]["n"]),
        (&Value::Bool(false), &Value::from("done"), &Value::from(1))
    );
    let kept = json(&errand(&db, &["prune", "--older-than", "1d", "--json"]));
    assert_eq!(kept["deleted"], 0);
    assert_eq!(enqueue(&db, r#"{"n":3}"#)["created"], false);
    // Past retention (here 1 ms, once that has passed): pruned, and the id
    // creates a new job.
    std::thread::sleep(Duration::from_millis(20));
    let pruned = json(&errand(&db, &["prune", "--older-than", "1ms", "--json"]));
    assert_eq!(pruned["deleted"], 1);
    let new = enqueue(&db, r#"{"n":4}"#);
    assert_eq!(
        (
            &new["created"],
            &new["state"],
            &new["attempts"],
            &new["payload"]["n"]
        ),
        (
            &Value::Bool(true),
            &Value::from("ready"),
            &Value::from(0),
            &Value::from(4)
        )
    );
}
