#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The `errand` command against PostgreSQL (`--db postgres://…`), each test
//! in its own schema. Needs `ERRAND_TEST_POSTGRES_URL`; says SKIPPED without it.

use std::process::{Command, Output};

use errand_testsupport::PgSchema;
use serde_json::Value;

fn url() -> Option<String> {
    errand_testsupport::postgres_url("the PostgreSQL CLI tests")
}

/// The test's own schema (dropped before and after), and the command run
/// against it.
struct Schema(PgSchema);

impl Schema {
    fn new(tag: &str) -> Self {
        let url = url().expect("checked by the caller");
        Schema(PgSchema::new(&url, &format!("cli_{tag}")))
    }

    fn errand(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_errand"))
            .args(["--db", &self.0.url, "--schema", &self.0.name])
            .args(args)
            .output()
            .expect("run errand")
    }

    fn json(&self, args: &[&str]) -> Value {
        let out = self.errand(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("JSON output")
    }

    fn psql(&self, sql: &str) -> String {
        self.0.psql(sql)
    }
}

#[test]
fn the_commands_work_on_postgres() {
    if url().is_none() {
        return;
    }
    let s = Schema::new("roundtrip");
    let out = s.errand(&["jobs"]);
    assert_eq!(out.status.code(), Some(5), "a missing schema names the fix");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains(&format!(
            "add them with `errand migrate --db {} --schema {}`",
            s.0.url, s.0.name
        )),
        "the whole command: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(s.errand(&["migrate"]).status.success());
    assert!(
        s.errand(&["migrate"]).status.success(),
        "migrate is safe to repeat"
    );

    let j = s.json(&[
        "enqueue",
        "--kind",
        "mail",
        "--id",
        "p1",
        "--payload",
        r#"{"to":"x"}"#,
        "--max-attempts",
        "2",
        "--json",
    ]);
    assert_eq!(
        (j["state"].as_str(), j["created"].as_bool()),
        (Some("ready"), Some(true))
    );
    assert_eq!(
        s.json(&["enqueue", "--kind", "mail", "--id", "p1", "--json"])["created"],
        false
    );

    let r = s.json(&[
        "work",
        "--once",
        "--retry-base",
        "1ms",
        "--retry-max",
        "2ms",
        "--exec",
        "echo no relay >&2; exit 75",
        "--json",
    ]);
    assert_eq!(r["outcome"], "retry_scheduled");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let r = s.json(&[
        "work",
        "--once",
        "--exec",
        "echo still no relay >&2; exit 75",
        "--json",
    ]);
    assert_eq!(
        (r["outcome"].as_str(), r["attempt"].as_i64()),
        (Some("dead"), Some(2))
    );
    let shown = s.json(&["show", "p1", "--json"]);
    assert_eq!(shown["last_error"], "still no relay");
    assert_eq!(shown["history"].as_array().map(Vec::len), Some(2));

    let r = s.json(&[
        "replay",
        "p1",
        "--by",
        "ops",
        "--reason",
        "relay fixed",
        "--json",
    ]);
    assert_eq!(r["jobs"][0]["id"], "p1");
    let r = s.json(&["work", "--once", "--exec", "cat > /dev/null", "--json"]);
    assert_eq!(
        (r["outcome"].as_str(), r["attempt"].as_i64()),
        (Some("acknowledged"), Some(1))
    );
    let out = s.errand(&["replay", "p1"]);
    assert_eq!(out.status.code(), Some(4), "a done job is not replayed");
    let listed = s.json(&["jobs", "--state", "done", "--json"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1));
}

/// The command that would add the tables names the server without the
/// password the user gave (the test server trusts any password).
#[test]
fn the_migrate_hint_leaves_the_password_out() {
    let Some(url) = url() else { return };
    let Some((scheme, rest)) = url.split_once("://") else {
        panic!("{url} is not a URL")
    };
    let Some((user, host)) = rest.split_once('@') else {
        panic!("{url} names no user to give a password to")
    };
    let user = user.split(':').next().unwrap_or_default();
    let schema = format!("errand_cli_hint_{}", std::process::id());
    let out = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["--db", &format!("{scheme}://{user}:s3cret-pw@{host}")])
        .args(["--schema", &schema, "jobs"])
        .output()
        .expect("run errand");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(!stderr.contains("s3cret-pw"), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "`errand migrate --db {scheme}://{user}@{host} --schema {schema}` (with the URL's password, left out here)"
        )),
        "{stderr}"
    );
}

#[test]
fn a_newer_postgres_schema_is_refused() {
    if url().is_none() {
        return;
    }
    let s = Schema::new("newer");
    assert!(s.errand(&["migrate"]).status.success());
    s.psql(&format!(
        "INSERT INTO {}.errand_schema_history (version, name, applied_on, checksum) VALUES (99, 'future', '', '0')",
        s.0.name
    ));
    for args in [&["jobs"][..], &["migrate"][..]] {
        let out = s.errand(args);
        assert_eq!(out.status.code(), Some(5), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("newer"));
    }
}

/// A schema a development build left before release 0.1 is refused by
/// `migrate` (exit 5, a message naming the schema and the fix) and is left
/// as it was.
#[test]
fn migrate_refuses_a_development_build_schema_on_postgres() {
    if url().is_none() {
        return;
    }
    let s = Schema::new("development");
    let name = &s.0.name;
    s.psql(&format!(
        "CREATE SCHEMA {name};
         CREATE TABLE {name}.errand_schema_history (version int4 PRIMARY KEY, name varchar(255),
             applied_on varchar(255), checksum varchar(255));
         INSERT INTO {name}.errand_schema_history VALUES (1, 'jobs', '', '1'),
             (22, 'json_stored_as_given', '', '22');
         CREATE TABLE {name}.errand_jobs (id text PRIMARY KEY);"
    ));
    let out = s.errand(&["migrate"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{stderr}");
    assert!(
        stderr.starts_with(&format!(
            "errand: schema {name} (schema history at development version 22) holds Errand's \
             schema from a development build before release 0.1"
        )),
        "{stderr}"
    );
    assert!(stderr.contains("DROP SCHEMA"), "{stderr}");
    let out = s.errand(&["jobs"]);
    assert_eq!(out.status.code(), Some(5));
    let tables = s.psql(&format!(
        "SELECT string_agg(tablename, ',' ORDER BY tablename) FROM pg_tables WHERE schemaname = '{name}'"
    ));
    assert_eq!(tables.trim(), "errand_jobs,errand_schema_history");
}

#[test]
fn bad_postgres_urls_are_refused_clearly() {
    let run = |db: &str| {
        Command::new(env!("CARGO_BIN_EXE_errand"))
            .args(["--db", db, "jobs"])
            .output()
            .expect("run errand")
    };
    let out = run("postgres://nobody@127.0.0.1:1/none");
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("cannot connect to PostgreSQL at 127.0.0.1:1/none")
    );
    let out = run("postgres://a@b:notaport/x");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("malformed"));
}

#[test]
fn a_job_that_kills_its_worker_every_time_is_quarantined_as_lost_lease_on_postgres() {
    if url().is_none() {
        return;
    }
    let s = Schema::new("poison");
    assert!(s.errand(&["migrate"]).status.success());
    s.json(&[
        "enqueue",
        "--kind",
        "poison",
        "--id",
        "p",
        "--max-attempts",
        "10",
        "--max-lease-expiries",
        "2",
        "--json",
    ]);
    let mut deaths = 0;
    for _ in 0..6 {
        let out = s.errand(&[
            "work",
            "--once",
            "--lease",
            "300ms",
            "--json",
            "--exec",
            "kill -KILL $PPID",
        ]);
        use std::os::unix::process::ExitStatusExt;
        if out.status.signal() == Some(9) {
            deaths += 1;
            std::thread::sleep(std::time::Duration::from_millis(350));
            continue;
        }
        assert!(out.status.success());
        break;
    }
    assert_eq!(deaths, 2);
    let j = s.json(&["show", "p", "--json"]);
    assert_eq!(
        (j["state"].as_str(), j["last_error_class"].as_str()),
        (Some("dead"), Some("lost_lease"))
    );
}

#[test]
fn pause_purge_and_stats_check_work_on_postgres() {
    if url().is_none() {
        return;
    }
    let s = Schema::new("operate");
    assert!(s.errand(&["migrate"]).status.success());
    let out_of = |o: &Output| String::from_utf8_lossy(&o.stdout).into_owned();
    let err_of = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();

    // A dead job, and a ready one in a queue that gets paused.
    s.json(&[
        "enqueue",
        "--kind",
        "k",
        "--id",
        "d1",
        "--queue",
        "bulk",
        "--max-attempts",
        "1",
        "--json",
    ]);
    let r = s.json(&[
        "work",
        "--once",
        "--exec",
        "echo broken >&2; exit 65",
        "--json",
    ]);
    assert_eq!(
        (r["job_id"].as_str(), r["outcome"].as_str()),
        (Some("d1"), Some("dead"))
    );
    s.json(&[
        "enqueue", "--kind", "k", "--id", "m1", "--queue", "mail", "--json",
    ]);

    let out = s.errand(&["pause", "mail", "--by", "ops", "--reason", "smtp down"]);
    assert!(out.status.success(), "{}", err_of(&out));
    assert_eq!(
        s.json(&["work", "--once", "--exec", "true", "--json"])["outcome"],
        "idle"
    );
    assert_eq!(s.json(&["show", "m1", "--json"])["state"], "ready");
    let again = s.json(&["pause", "mail", "--by", "bob", "--json"]);
    assert_eq!(
        (again["changed"].as_bool(), again["paused_by"].as_str()),
        (Some(false), Some("ops"))
    );
    let stats = s.json(&["stats", "--json"]);
    let mail = stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "mail")
        .cloned()
        .unwrap();
    assert_eq!(
        (mail["paused"].as_bool(), mail["ready"].as_u64()),
        (Some(true), Some(1))
    );

    // stats --check: flags and a file.
    let out = s.errand(&["stats", "--check", "--max-dead", "0"]);
    assert_eq!(out.status.code(), Some(6));
    assert_eq!(
        out_of(&out).trim(),
        "CROSSED queue bulk: dead jobs = 1, above max_dead = 0"
    );
    let out = s.errand(&["stats", "--check", "--max-dead", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", out_of(&out));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.toml");
    std::fs::write(&file, "max_dead = 1\n[queues.mail]\nmax_ready = 0\n").unwrap();
    let out = s.errand(&["stats", "--check", "--config", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(6));
    assert_eq!(
        out_of(&out).trim(),
        "CROSSED queue mail: due jobs waiting = 1, above max_ready = 0"
    );
    // The `work --once` that made the dead job reported its run.
    let out = s.errand(&["stats", "--check", "--max-since-worker-cycle", "1m"]);
    assert_eq!(out.status.code(), Some(0), "{}", out_of(&out));
    let workers = s.json(&["stats", "--json"])["workers"].clone();
    assert_eq!(workers.as_array().map(Vec::len), Some(1), "{workers}");
    assert!(
        workers[0]["id"].as_str().unwrap().starts_with("once@"),
        "{workers}"
    );
    assert!(
        workers[0]["metrics"]["cycles"].as_u64() >= Some(1),
        "{workers}"
    );

    let out = s.errand(&["resume", "mail", "--by", "ops"]);
    assert!(out.status.success());
    let r = s.json(&["work", "--once", "--exec", "true", "--json"]);
    assert_eq!(
        (r["job_id"].as_str(), r["outcome"].as_str()),
        (Some("m1"), Some("acknowledged"))
    );

    // Purge: a refusal exits 4 with the hint, a dry run lists, a purge
    // answers with the ids and show reports the purge.
    let out = s.errand(&["purge", "d1", "m1", "--by", "ops", "--reason", "gdpr"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(err_of(&out).contains("only dead jobs can be purged; nothing was purged"));
    let dry = s.json(&[
        "purge",
        "--queue",
        "bulk",
        "--dry-run",
        "--by",
        "ops",
        "--reason",
        "gdpr",
        "--json",
    ]);
    assert_eq!(dry["jobs"].as_array().map(Vec::len), Some(1));
    let r = s.json(&[
        "purge", "--queue", "bulk", "--by", "ops", "--reason", "gdpr", "--json",
    ]);
    assert_eq!(r["purged"], serde_json::json!(["d1"]));
    let out = s.errand(&["show", "d1"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        err_of(&out).contains("job `d1` was purged by ops at "),
        "{}",
        err_of(&out)
    );
    let log = s.json(&["audit", "--json"]);
    assert_eq!(log[0]["operator"], "ops", "{log}");
    let out = s.errand(&["stats", "--check", "--max-dead", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", out_of(&out));
}

/// Twenty `errand enqueue --unique-for` processes started at once on one
/// key create one job; each prints it (created once, existing 19 times).
#[test]
fn twenty_concurrent_unique_enqueuers_create_one_job_on_postgres() {
    if url().is_none() {
        return;
    }
    let s = Schema::new("unique20");
    assert!(s.errand(&["migrate"]).status.success());
    let children: Vec<std::process::Child> = (0..20)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_errand"))
                .args(["--db", &s.0.url, "--schema", &s.0.name])
                .args(["enqueue", "--kind", "sync", "--payload", r#"{"account":9}"#])
                .args(["--unique-for", "1h", "--json"])
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn errand")
        })
        .collect();
    let mut created = 0;
    let mut ids = std::collections::BTreeSet::new();
    for child in children {
        let out = child.wait_with_output().expect("wait");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON output");
        created += usize::from(v["created"] == true);
        ids.insert(v["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(created, 1, "exactly one process created the job");
    assert_eq!(ids.len(), 1, "every process answered with that job");
    let jobs = s.json(&["jobs", "--json"]);
    assert_eq!(jobs.as_array().unwrap().len(), 1);
}
