#![allow(clippy::unwrap_used)]
//! `errand transfer`: an embedded database moved to PostgreSQL by the
//! command, killed half-way and run again, then checked on both sides.

mod common;

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

use common::{Backend, postgres_url};

/// The `errand transfer` command from `source` into `schema` at `url`.
fn transfer(source: &Backend, url: &str, schema: &str, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_errand"));
    c.args([
        "transfer",
        "--from",
        source.db(),
        "--to",
        url,
        "--schema",
        schema,
    ])
    .args(extra)
    .env("ERRAND_LOG", "error")
    .env_remove("ERRAND_DB")
    .env_remove("ERRAND_SCHEMA");
    c
}

fn json(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-qAtc", sql])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The jobs the transfer has written so far (0 before the table exists).
fn moved(url: &str, schema: &str) -> u64 {
    psql(
        url,
        &format!(
            "SELECT CASE WHEN to_regclass('{schema}.errand_transfer') IS NULL THEN 0 \
             ELSE (SELECT copied FROM {schema}.errand_transfer WHERE table_name = 'errand_jobs') END"
        ),
    )
    .parse()
    .unwrap_or(0)
}

#[test]
fn a_transfer_killed_half_way_goes_on_and_checks_both_sides() {
    let Some(url) = postgres_url() else { return };
    let schema = format!("errand_moved_{}", std::process::id());
    let drop = format!("DROP SCHEMA IF EXISTS {schema} CASCADE");
    psql(&url, &drop);
    let source = Backend::sqlite();
    let total = 3000u64;
    source.with_store(async |store| {
        let jobs: Vec<errand::NewJob> = (0..total)
            .map(|n| {
                errand::NewJob::new(
                    "k",
                    errand::Payload::from_json_text(format!(r#"{{"n": {n}, "b": [1, 2.5]}}"#))
                        .unwrap(),
                )
                .unwrap()
                .with_tag(&format!("t{}", n % 3))
                .unwrap()
            })
            .collect();
        store.insert_many(jobs).await.unwrap();
    });

    // A dry run writes nothing and counts what it would move.
    let dry = json(
        &transfer(&source, &url, &schema, &["--dry-run", "--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(dry["dry_run"], true);
    let rows = |r: &Value, t: &str| {
        r["tables"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["table"] == t)
            .map(|x| x["source_rows"].as_u64().unwrap())
    };
    assert_eq!(rows(&dry, "errand_jobs"), Some(total));
    assert_eq!(rows(&dry, "errand_job_tags"), Some(total));
    assert_eq!(
        psql(&url, &format!("SELECT to_regnamespace('{schema}') IS NULL")),
        "t"
    );

    // Killed (SIGKILL) once some pages are written, long before all are.
    let mut child = transfer(&source, &url, &schema, &["--batch", "5", "--json"])
        .spawn()
        .unwrap();
    errand_testsupport::wait_until(
        "the transfer to write some jobs",
        Duration::from_secs(60),
        Duration::from_millis(5),
        || moved(&url, &schema) >= 100,
    );
    child.kill().unwrap();
    let _ = child.wait();
    let before = moved(&url, &schema);
    assert!(before < total, "the kill came after the end: {before}");
    // What is there is exactly what the progress says: pages and progress
    // commit together.
    let written: u64 = psql(&url, &format!("SELECT count(*) FROM {schema}.errand_jobs"))
        .parse()
        .unwrap();
    assert_eq!(written, before);

    // Another source may not write into it meanwhile.
    let other = Backend::sqlite();
    let refused = transfer(&other, &url, &schema, &[]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2));
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("unfinished transfer"), "{said}");

    // Run again, it goes on from the last page and checks both sides.
    let done = json(
        &transfer(&source, &url, &schema, &["--json"])
            .output()
            .unwrap(),
    );
    assert_eq!(done["resumed"], true);
    assert_eq!(done["verified"], true, "{done:#}");
    // The jobs not yet written, and every tag.
    assert_eq!(done["copied"].as_u64(), Some(2 * total - before));
    for t in done["tables"].as_array().unwrap() {
        assert_eq!(t["matches"], true, "{t}");
        assert_eq!(t["source_checksum"], t["target_checksum"], "{t}");
    }
    assert_eq!(
        done["states"],
        serde_json::json!([{"state": "ready", "source": total, "target": total}])
    );
    assert_eq!(
        psql(
            &url,
            &format!("SELECT to_regclass('{schema}.errand_transfer') IS NULL")
        ),
        "t",
        "the progress table goes once the check passes"
    );

    // The moved jobs are served from PostgreSQL: a worker runs one.
    let pg = ["--db", url.as_str(), "--schema", schema.as_str()];
    let out = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(pg)
        .args(["jobs", "--state", "ready", "--limit", "1", "--json"])
        .output()
        .unwrap();
    let listed = json(&out);
    assert_eq!(listed[0]["payload"]["b"], serde_json::json!([1, 2.5]));

    // A finished transfer is not run twice into the same schema.
    let again = transfer(&source, &url, &schema, &[]).output().unwrap();
    assert_eq!(again.status.code(), Some(2));
    let said = String::from_utf8_lossy(&again.stderr);
    assert!(said.contains("already holds Errand's data"), "{said}");
    psql(&url, &drop);
}

#[test]
fn a_live_lease_or_bad_input_is_refused_before_anything_is_written() {
    let Some(url) = postgres_url() else { return };
    let schema = format!("errand_refused_{}", std::process::id());
    psql(&url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    let source = Backend::sqlite();
    source.ok(&["enqueue", "--kind", "k", "--id", "held"]);
    let held = source.with_store(async |store| {
        let req = errand::ClaimRequest {
            queues: Vec::new(),
            limit: 1,
            lease: Duration::from_secs(600),
            rate: None,
            reclaim: false,
        };
        store.claim(&req).await.unwrap().len()
    });
    assert_eq!(held, 1);
    let out = transfer(&source, &url, &schema, &[]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.contains("job held holds a lease"), "{said}");
    for (args, expected) in [
        (vec!["--batch", "0"], "a batch of 0 rows"),
        (vec!["--batch", "10001"], "a batch of 10001 rows"),
    ] {
        let out = transfer(&source, &url, &schema, &args).output().unwrap();
        assert_eq!(out.status.code(), Some(2));
        let said = String::from_utf8_lossy(&out.stderr);
        assert!(said.contains(expected), "{said}");
    }
    let out = transfer(&source, "mysql://h/db", &schema, &[])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a PostgreSQL URL"));
    assert_eq!(
        psql(&url, &format!("SELECT to_regnamespace('{schema}') IS NULL")),
        "t",
        "nothing was created"
    );
}
