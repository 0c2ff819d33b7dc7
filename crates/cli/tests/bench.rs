#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `errand bench` through the real binary: every workload, small, on
//! SQLite (a new file each) and, with `ERRAND_TEST_POSTGRES_URL`, on
//! PostgreSQL (a fresh schema each, dropped afterwards). The JSON must
//! carry its fields with sane values and the database must hold what the
//! workload says it did. No assertion is about a timing.

use std::path::PathBuf;
use std::process::{Command, Output};

use errand_testsupport::PgSchema;
use serde_json::Value;

/// Where a benchmark runs: its `--db` (and `--schema`) flags.
trait Db {
    fn flags(&self) -> Vec<String>;
}

struct Sqlite {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

impl Sqlite {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bench.db");
        Sqlite { _dir: dir, path }
    }
}

impl Db for Sqlite {
    fn flags(&self) -> Vec<String> {
        vec!["--db".into(), self.path.display().to_string()]
    }
}

impl Db for PgSchema {
    fn flags(&self) -> Vec<String> {
        vec![
            "--db".into(),
            self.url.clone(),
            "--schema".into(),
            self.name.clone(),
        ]
    }
}

fn errand(db: &dyn Db, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(db.flags())
        .args(args)
        .env_remove("ERRAND_DB")
        .env_remove("ERRAND_SCHEMA")
        .output()
        .expect("run errand")
}

fn json(db: &dyn Db, args: &[&str]) -> Value {
    let out = errand(db, args);
    assert!(
        out.status.success(),
        "{args:?}: exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: not one JSON object ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// Jobs in `state`, read with `errand jobs` (pages of 10,000).
fn count(db: &dyn Db, state: &str) -> u64 {
    let mut n = 0;
    let mut after: Option<String> = None;
    loop {
        let mut args = vec!["jobs", "--state", state, "--limit", "10000", "--json"];
        if let Some(a) = &after {
            args.extend(["--after", a.as_str()]);
        }
        let page = json(db, &args);
        let page = page.as_array().expect("an array of jobs");
        n += page.len() as u64;
        if page.len() < 10_000 {
            return n;
        }
        after = page
            .last()
            .and_then(|j| j["id"].as_str())
            .map(str::to_owned);
    }
}

fn number(v: &Value, field: &str) -> f64 {
    v[field]
        .as_f64()
        .unwrap_or_else(|| panic!("{field} is not a number in {v}"))
}

/// The fields every report carries, with sane values. A continuous run
/// counts the jobs finished inside its timed window, which a slow machine
/// may leave empty (its start-up can take the whole second the test
/// gives it); what it enqueued is checked drained instead.
fn check_common(v: &Value, workload: &str, backend: &str) {
    assert_eq!(v["workload"], workload, "{v}");
    assert_eq!(v["backend"], backend, "{v}");
    assert!(v["params"].is_object(), "{v}");
    if workload == "continuous" {
        assert!(number(v, "enqueued") > 0.0, "{v}");
    } else {
        assert!(number(v, "jobs") > 0.0, "{v}");
        assert!(number(v, "jobs_per_sec") > 0.0, "{v}");
        assert!(number(v, "commits_per_job") > 0.0, "{v}");
    }
    assert!(number(v, "elapsed_ms") > 0.0, "{v}");
    assert!(number(v, "commits") > 0.0, "{v}");
    if cfg!(target_os = "linux") {
        assert!(number(v, "peak_rss_mb") > 0.0, "{v}");
    }
    assert!(v["states"].is_object(), "{v}");
}

/// The `states` the report read agree with `errand jobs`.
fn check_states(db: &dyn Db, v: &Value) {
    for state in ["ready", "running", "done", "dead", "cancelled"] {
        let reported = v["states"][state].as_u64().unwrap_or(0);
        assert_eq!(count(db, state), reported, "{state}: {v}");
    }
}

fn check_latency(v: &Value) {
    let (p50, p95, p99) = (
        number(v, "p50_ms"),
        number(v, "p95_ms"),
        number(v, "p99_ms"),
    );
    assert!(p50 > 0.0 && p50 <= p95 && p95 <= p99, "{v}");
    for part in ["start", "finish", "enqueue"] {
        assert!(v["latency"][part]["p99_ms"].as_f64().is_some(), "{v}");
    }
}

/// Runs every workload small on `make()`'s databases.
fn every_workload(backend: &str, make: &dyn Fn(&str) -> Box<dyn Db>) {
    // enqueue: all three batch sizes.
    let db = make("enqueue");
    let v = json(&*db, &["bench", "enqueue", "--jobs", "200", "--json"]);
    check_common(&v, "enqueue", backend);
    let runs = v["runs"].as_array().expect("runs");
    let batches: Vec<u64> = runs.iter().filter_map(|r| r["batch"].as_u64()).collect();
    assert_eq!(batches, [1, 100, 5000], "{v}");
    for r in runs {
        assert_eq!(r["jobs"], 200, "{v}");
        assert!(number(r, "jobs_per_sec") > 0.0 && number(r, "commits_per_job") > 0.0);
    }
    assert_eq!(count(&*db, "ready"), 600);
    check_states(&*db, &v);

    // enqueue: one batch size, two producers.
    let db = make("enqueue_one");
    let v = json(
        &*db,
        &[
            "bench",
            "enqueue",
            "--jobs",
            "250",
            "--batch",
            "100",
            "--concurrency",
            "2",
            "--json",
        ],
    );
    check_common(&v, "enqueue", backend);
    assert_eq!(v["runs"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(count(&*db, "ready"), 250);

    // burn-down: every job done.
    let db = make("burn_down");
    let v = json(&*db, &["bench", "burn-down", "--jobs", "200", "--json"]);
    check_common(&v, "burn-down", backend);
    assert_eq!(v["jobs"], 200, "{v}");
    assert!(number(&v, "preinsert_jobs_per_sec") > 0.0, "{v}");
    assert!(number(&v, "max_in_flight") >= 1.0, "{v}");
    assert_eq!(count(&*db, "done"), 200);
    check_states(&*db, &v);

    // continuous: what was enqueued was all drained in the end.
    let db = make("continuous");
    let v = json(
        &*db,
        &[
            "bench",
            "continuous",
            "--duration",
            "1s",
            "--batch",
            "50",
            "--json",
        ],
    );
    check_common(&v, "continuous", backend);
    let done = count(&*db, "done");
    assert!(done >= v["jobs"].as_u64().unwrap(), "{v}");
    assert!(done >= v["enqueued"].as_u64().unwrap(), "{v}");
    check_states(&*db, &v);
    assert_eq!(count(&*db, "ready") + count(&*db, "running"), 0);

    // latency, one at a time: samples plus three warm-up jobs, all done.
    let db = make("latency");
    let v = json(&*db, &["bench", "latency", "--jobs", "20", "--json"]);
    check_common(&v, "latency", backend);
    check_latency(&v);
    assert_eq!(v["latency"]["start"]["count"], 20, "{v}");
    assert_eq!(count(&*db, "done"), 23);
    check_states(&*db, &v);

    // signals: each sample released by its signal, all done, none waiting.
    let db = make("signals");
    let v = json(&*db, &["bench", "signals", "--jobs", "20", "--json"]);
    check_common(&v, "signals", backend);
    check_latency(&v);
    assert_eq!(v["latency"]["start"]["count"], 20, "{v}");
    assert_eq!(count(&*db, "done"), 23);
    assert_eq!(count(&*db, "waiting"), 0);
    check_states(&*db, &v);

    // latency at a steady rate.
    let db = make("latency_rate");
    let v = json(
        &*db,
        &[
            "bench", "latency", "--jobs", "30", "--rate", "100", "--json",
        ],
    );
    check_common(&v, "latency", backend);
    check_latency(&v);
    assert_eq!(v["params"]["rate"], 100.0, "{v}");
    assert_eq!(count(&*db, "done"), 33);

    // retry-heavy: half failed once, all done.
    let db = make("retry_heavy");
    let v = json(&*db, &["bench", "retry-heavy", "--jobs", "200", "--json"]);
    check_common(&v, "retry-heavy", backend);
    assert_eq!(v["attempts"], 300, "{v}");
    assert_eq!(count(&*db, "done"), 200);
    assert_eq!(count(&*db, "dead"), 0);
    check_states(&*db, &v);

    // claim-cost with 2,000 rows of each kind.
    let db = make("claim_cost");
    let mut args = vec![
        "bench",
        "claim-cost",
        "--rows",
        "2000",
        "--jobs",
        "50",
        "--json",
    ];
    if backend == "postgres" {
        args.extend(["--duration", "2s"]);
    }
    let v = json(&*db, &args);
    check_common(&v, "claim-cost", backend);
    check_latency_fields_of_claims(&v, backend);
    assert_eq!(count(&*db, "ready"), 2000, "the future rows stay");
    assert_eq!(count(&*db, "running"), 0);
    assert!(count(&*db, "done") >= 2000 + 50 + 50);
    check_states(&*db, &v);

    // waiters: every waiter heard its job end, every job done.
    let db = make("waiters");
    let v = json(
        &*db,
        &[
            "bench",
            "waiters",
            "--jobs",
            "50",
            "--duration",
            "100ms",
            "--json",
        ],
    );
    check_common(&v, "waiters", backend);
    assert_eq!(v["jobs"], 50, "{v}");
    assert_eq!(v["params"]["duration_ms"], 100, "{v}");
    assert!(number(&v, "p99_ms") >= number(&v, "p50_ms"), "{v}");
    assert_eq!(count(&*db, "done"), 50);
    check_states(&*db, &v);
}

fn check_latency_fields_of_claims(v: &Value, backend: &str) {
    let claim = &v["claim"];
    for part in ["empty", "loaded"] {
        assert_eq!(claim[part]["count"], 5, "{v}");
        assert!(number(&claim[part], "p50_ms") > 0.0, "{v}");
    }
    assert_eq!(claim["rows_done"], 2000, "{v}");
    assert_eq!(claim["rows_future"], 2000, "{v}");
    assert!(number(claim, "p50_ratio") > 0.0, "{v}");
    assert!(claim["load"].as_str().is_some_and(|s| s.contains("SQL")));
    assert!(number(v, "p50_ms") > 0.0, "{v}");
    if backend == "postgres" {
        assert!(number(&claim["snapshot"]["claims"], "count") >= 1.0, "{v}");
    } else {
        assert!(claim["snapshot"].is_null(), "{v}");
    }
}

#[test]
fn every_workload_runs_on_sqlite() {
    every_workload("sqlite", &|_| Box::new(Sqlite::new()));
}

#[test]
fn a_database_that_holds_jobs_or_a_flag_that_does_not_apply_is_refused() {
    let db = Sqlite::new();
    json(
        &db,
        &["bench", "enqueue", "--jobs", "5", "--batch", "5", "--json"],
    );
    let out = errand(&db, &["bench", "burn-down", "--jobs", "5"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("already holds jobs"), "{stderr}");
    assert!(stderr.contains("new file"), "{stderr}");

    let fresh = Sqlite::new();
    let out = errand(&fresh, &["bench", "burn-down", "--rate", "10"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--rate applies to latency"), "{stderr}");
    assert!(
        !fresh.path.exists(),
        "refused before the database was created"
    );
}

#[test]
fn the_human_summary_names_the_rate_and_the_commits() {
    let db = Sqlite::new();
    let out = errand(&db, &["bench", "burn-down", "--jobs", "100"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("burn-down on sqlite"), "{text}");
    assert!(text.contains("jobs/s"), "{text}");
    assert!(text.contains("commits:"), "{text}");
    assert!(text.contains("peak RSS"), "{text}");
}

#[test]
fn every_workload_runs_on_postgres() {
    let Some(url) = errand_testsupport::postgres_url("errand bench on PostgreSQL") else {
        return;
    };
    every_workload("postgres", &|tag| {
        Box::new(PgSchema::new(&url, &format!("bench_{tag}")))
    });
    // The default schema is never benchmarked into.
    let out = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["--db", &url, "bench", "burn-down", "--jobs", "5"])
        .env_remove("ERRAND_SCHEMA")
        .output()
        .expect("run errand");
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("scratch schema"), "{stderr}");
}
