#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The `errand` command as scripts use it: flags, JSON shapes, exit codes.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

struct Db {
    _dir: tempfile::TempDir,
    path: PathBuf,
}

fn db() -> Db {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("jobs.db");
    let d = Db { _dir: dir, path };
    let out = errand(&d.path, &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    d
}

fn errand(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_errand"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("ERRAND_DB")
        .output()
        .expect("run errand")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn json(o: &Output) -> Value {
    assert!(
        o.status.success(),
        "exit {:?}: {}",
        o.status.code(),
        stderr(o)
    );
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

fn job(db: &Path, id: &str) -> Value {
    json(&errand(db, &["show", id, "--json"]))
}

#[test]
fn migrate_is_safe_to_repeat_and_sqlite_urls_work() {
    let d = db();
    assert!(errand(&d.path, &["migrate"]).status.success());
    let url = format!("sqlite://{}", d.path.display());
    let out = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["jobs", "--json"])
        .env("ERRAND_DB", &url)
        .output()
        .unwrap();
    assert_eq!(json(&out), serde_json::json!([]));
}

#[test]
fn enqueue_prints_the_job_and_an_existing_id_creates_nothing() {
    let d = db();
    let first = json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "email",
            "--id",
            "pay-1",
            "--payload",
            r#"{"to":"a@example"}"#,
            "--queue",
            "mail",
            "--max-attempts",
            "3",
            "--priority",
            "-2",
            "--json",
        ],
    ));
    assert_eq!(first["id"], "pay-1");
    assert_eq!(first["state"], "ready");
    assert_eq!(first["created"], true);
    assert_eq!(first["payload"]["to"], "a@example");
    assert_eq!(first["max_attempts"], 3);
    assert_eq!(first["priority"], -2);
    let again = json(&errand(
        &d.path,
        &["enqueue", "--kind", "other", "--id", "pay-1", "--json"],
    ));
    assert_eq!(again["created"], false);
    assert_eq!(again["kind"], "email");
    let list = json(&errand(&d.path, &["jobs", "--json"]));
    assert_eq!(list.as_array().unwrap().len(), 1);
    for field in [
        "id",
        "queue",
        "kind",
        "state",
        "attempts",
        "max_attempts",
        "replays",
        "available_at",
        "last_error",
    ] {
        assert!(list[0].get(field).is_some(), "jobs --json lacks {field}");
    }
}

#[test]
fn delayed_jobs_are_not_run_early() {
    let d = db();
    json(&errand(
        &d.path,
        &[
            "enqueue", "--kind", "k", "--id", "later", "--delay", "1h", "--json",
        ],
    ));
    json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "k",
            "--id",
            "at",
            "--run-at",
            "2999-01-01T00:00:00Z",
            "--json",
        ],
    ));
    let out = errand(&d.path, &["work", "--once", "--exec", "true", "--json"]);
    assert_eq!(json(&out)["outcome"], "idle");
    assert_eq!(
        job(&d.path, "at")["available_at"],
        "2999-01-01T00:00:00.000Z"
    );
}

#[test]
fn work_once_maps_exit_codes_and_records_the_stderr_tail() {
    let d = db();
    json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "send",
            "--id",
            "j1",
            "--payload",
            r#"{"n":1}"#,
            "--json",
        ],
    ));
    let seen = d.path.with_file_name("seen");
    let cmd = format!(
        "cat > {0}; echo \" $ERRAND_JOB_ID $ERRAND_ATTEMPT $ERRAND_KIND $ERRAND_QUEUE $ERRAND_WORKER_PID\" >> {0}; echo 'first line' >&2; echo 'provider timed out' >&2; exit 75",
        seen.display()
    );
    let r = json(&errand(
        &d.path,
        &[
            "work",
            "--once",
            "--retry-base",
            "10s",
            "--retry-max",
            "1m",
            "--exec",
            &cmd,
            "--json",
        ],
    ));
    assert_eq!(r["outcome"], "retry_scheduled");
    assert_eq!(r["job_id"], "j1");
    assert_eq!(r["attempt"], 1);
    let seen = std::fs::read_to_string(&seen).unwrap();
    let (head, worker_pid) = seen.trim_end().rsplit_once(' ').unwrap();
    assert_eq!(head, "{\"n\":1} j1 1 send default");
    assert!(
        worker_pid.parse::<u32>().is_ok_and(|p| p > 1),
        "ERRAND_WORKER_PID: {seen}"
    );
    let j = job(&d.path, "j1");
    assert_eq!(j["state"], "ready");
    assert_eq!(j["last_error"], "first line\nprovider timed out");
    assert_eq!(j["history"][0]["outcome"], "retry");
    // The retry is persisted in the future (equal jitter: at least 5 s).
    let out = errand(&d.path, &["work", "--once", "--exec", "true", "--json"]);
    assert_eq!(json(&out)["outcome"], "idle");

    json(&errand(
        &d.path,
        &["enqueue", "--kind", "send", "--id", "j2", "--json"],
    ));
    let r = json(&errand(
        &d.path,
        &[
            "work",
            "--once",
            "--exec",
            "echo bad payload >&2; exit 65",
            "--json",
        ],
    ));
    assert_eq!(
        (r["job_id"].as_str(), r["outcome"].as_str()),
        (Some("j2"), Some("dead"))
    );
    let j = job(&d.path, "j2");
    assert_eq!(
        (j["state"].as_str(), j["last_error_class"].as_str()),
        (Some("dead"), Some("permanent"))
    );

    json(&errand(
        &d.path,
        &["enqueue", "--kind", "send", "--id", "j3", "--json"],
    ));
    let r = json(&errand(
        &d.path,
        &["work", "--once", "--exec", "cat >/dev/null", "--json"],
    ));
    assert_eq!(
        (r["job_id"].as_str(), r["outcome"].as_str()),
        (Some("j3"), Some("acknowledged"))
    );
    assert_eq!(job(&d.path, "j3")["state"], "done");
    let text = errand(&d.path, &["work", "--once", "--exec", "true"]);
    assert_eq!(String::from_utf8_lossy(&text.stdout).trim(), "idle");
}

/// A refused replay exits 4 with the library's hint, an unknown id exits 3
/// (that a refusal changes nothing is conformance's
/// `replay_of_several_jobs_is_all_or_nothing`).
#[test]
fn replay_refusals_exit_4_with_the_hint_and_an_unknown_id_exits_3() {
    let d = db();
    json(&errand(
        &d.path,
        &["enqueue", "--kind", "k", "--id", "r1", "--json"],
    ));
    let out = errand(&d.path, &["replay", "r1", "--by", "ops"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(
        stderr(&out).contains("only dead or cancelled jobs can be replayed"),
        "{}",
        stderr(&out)
    );
    let out = errand(&d.path, &["replay", "missing"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("no job with id `missing`"));
}

/// `replay --json` answers with the jobs replayed, and `--by` and `--reason`
/// reach the audit entry (what a replay does to the job is conformance's
/// `replay_only_from_dead_or_cancelled_and_is_audited`).
#[test]
fn replay_answers_with_the_jobs_and_records_by_and_reason() {
    let d = db();
    json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "k",
            "--id",
            "d1",
            "--max-attempts",
            "1",
            "--json",
        ],
    ));
    json(&errand(
        &d.path,
        &[
            "work",
            "--once",
            "--exec",
            "echo down >&2; exit 1",
            "--json",
        ],
    ));
    assert_eq!(job(&d.path, "d1")["state"], "dead");
    let r = json(&errand(
        &d.path,
        &[
            "replay",
            "d1",
            "--by",
            "alice",
            "--reason",
            "provider back",
            "--json",
        ],
    ));
    assert_eq!(r["jobs"][0]["id"], "d1");
    let j = job(&d.path, "d1");
    assert_eq!(
        (
            j["audit"][0]["operator"].as_str(),
            j["audit"][0]["reason"].as_str()
        ),
        (Some("alice"), Some("provider back"))
    );
}

#[test]
fn bulk_replay_takes_filters_a_bound_and_a_dry_run() {
    let d = db();
    for i in 0..4 {
        let id = format!("b{i}");
        let kind = if i < 3 { "mail" } else { "sms" };
        json(&errand(
            &d.path,
            &[
                "enqueue",
                "--kind",
                kind,
                "--id",
                &id,
                "--max-attempts",
                "1",
                "--json",
            ],
        ));
        json(&errand(
            &d.path,
            &[
                "work",
                "--once",
                "--exec",
                "echo smtp refused >&2; exit 1",
                "--json",
            ],
        ));
    }
    let dry = json(&errand(
        &d.path,
        &[
            "replay",
            "--kind",
            "mail",
            "--error",
            "smtp",
            "--dry-run",
            "--json",
        ],
    ));
    assert_eq!(dry["jobs"].as_array().unwrap().len(), 3);
    let r = json(&errand(
        &d.path,
        &[
            "replay", "--kind", "mail", "--limit", "2", "--by", "ops", "--json",
        ],
    ));
    assert_eq!(r["jobs"].as_array().unwrap().len(), 2);
    let out = errand(&d.path, &["replay", "b3", "--kind", "sms"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "ids and filters together are refused"
    );
}

/// `cancel --json` answers with the jobs cancelled; a finished job's refusal
/// exits 4 (the rule is conformance's
/// `operator_cancel_refuses_finished_jobs_and_fences_the_worker`).
#[test]
fn cancel_answers_with_the_jobs_and_a_finished_one_exits_4() {
    let d = db();
    json(&errand(
        &d.path,
        &["enqueue", "--kind", "k", "--id", "c1", "--json"],
    ));
    let r = json(&errand(&d.path, &["cancel", "c1", "--by", "ops", "--json"]));
    assert_eq!(r[0]["state"], "cancelled");
    let out = errand(&d.path, &["cancel", "c1"]);
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn reschedule_moves_a_waiting_job_and_shows_the_change_in_its_audit() {
    let d = db();
    json(&errand(
        &d.path,
        &[
            "enqueue", "--kind", "k", "--id", "r1", "--delay", "1h", "--json",
        ],
    ));
    let moved = json(&errand(
        &d.path,
        &[
            "reschedule",
            "r1",
            "--now",
            "--priority",
            "-2",
            "--by",
            "ops",
            "--reason",
            "customer waiting",
            "--json",
        ],
    ));
    assert_eq!(moved[0]["id"], "r1");
    assert_eq!(moved[0]["priority"], -2);
    // --now, --priority, --by and --reason reach the request (the entry's
    // wording is conformance's
    // `a_waiting_job_is_rescheduled_all_or_none_and_audited`).
    let shown = json(&errand(&d.path, &["show", "r1", "--json"]));
    assert_eq!(
        (
            shown["audit"][0]["operator"].as_str(),
            shown["audit"][0]["reason"].as_str()
        ),
        (Some("ops"), Some("run now, priority -2: customer waiting"))
    );
    let ran = json(&errand(
        &d.path,
        &["work", "--once", "--exec", "true", "--json"],
    ));
    assert_eq!(ran["outcome"], "acknowledged", "{ran}");
    // Done: refused (exit 4), and a request that changes nothing is a usage error.
    let out = errand(&d.path, &["reschedule", "r1", "--now"]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("only waiting"), "{}", stderr(&out));
    let out = errand(&d.path, &["reschedule", "r1"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--priority"), "{}", stderr(&out));
}

#[test]
fn bad_input_gets_a_clear_error_a_nonzero_exit_and_writes_nothing() {
    let d = db();
    let cases: &[(&[&str], i32, &str)] = &[
        (
            &["enqueue", "--kind", "k", "--payload", "{nope"],
            2,
            "not valid JSON",
        ),
        (&["enqueue", "--kind", "bad kind!"], 2, "kind name"),
        (
            &["enqueue", "--kind", "k", "--id", "has space"],
            2,
            "job id",
        ),
        (
            &["enqueue", "--kind", "k", "--max-attempts", "0"],
            2,
            "max attempts",
        ),
        (
            &["enqueue", "--kind", "k", "--delay", "soon"],
            2,
            "not a duration",
        ),
        (
            &["enqueue", "--kind", "k", "--run-at", "tomorrow"],
            2,
            "RFC 3339",
        ),
        (&["jobs", "--state", "stuck"], 2, "unknown state"),
        (&["work", "--rate", "5", "--exec", "true"], 2, "--queue"),
        (
            &["work", "--queue", "q", "--rate", "0", "--exec", "true"],
            2,
            "positive rate",
        ),
        (
            &["jobs", "--synchronous", "sometimes"],
            2,
            "synchronous must be",
        ),
        (&["show", "nope"], 3, "no job"),
        (&["cancel", "nope"], 3, "no job"),
    ];
    for (args, code, needle) in cases {
        let out = errand(&d.path, args);
        assert_eq!(out.status.code(), Some(*code), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(
        json(&errand(&d.path, &["jobs", "--json"])),
        serde_json::json!([])
    );
    let big = format!("[\"{}\"]", "x".repeat(1024 * 1024 + 10));
    let out = Command::new(env!("CARGO_BIN_EXE_errand"))
        .arg("--db")
        .arg(&d.path)
        .args(["enqueue", "--kind", "k", "--payload", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(big.as_bytes())?;
            c.wait_with_output()
        })
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("limit"), "{}", stderr(&out));
    assert_eq!(
        json(&errand(&d.path, &["jobs", "--json"])),
        serde_json::json!([])
    );
}

#[test]
fn a_missing_path_or_a_foreign_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.db");
    let out = errand(&missing, &["jobs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("errand migrate"), "{}", stderr(&out));
    assert!(!missing.exists(), "a read command must not create the file");

    let text = dir.path().join("notes.txt");
    std::fs::write(&text, "just some text, not a database\n".repeat(200)).unwrap();
    for args in [&["jobs"][..], &["migrate"][..]] {
        let out = errand(&text, args);
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        assert!(
            stderr(&out).contains("not a SQLite database"),
            "{}",
            stderr(&out)
        );
    }
    assert!(
        std::fs::read_to_string(&text)
            .unwrap()
            .starts_with("just some text")
    );

    let out = errand(dir.path(), &["jobs"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("directory"));

    let empty = dir.path().join("empty.db");
    errand::sqlite::rusqlite::Connection::open(&empty)
        .unwrap()
        .execute_batch("CREATE TABLE t(x)")
        .unwrap();
    let out = errand(&empty, &["jobs"]);
    assert_eq!(out.status.code(), Some(5));
    assert!(
        stderr(&out).contains(&format!(
            "has no Errand tables; add them with `errand migrate --db {}`",
            empty.display()
        )),
        "the whole command: {}",
        stderr(&out)
    );
}

/// A database in a directory that does not exist: `migrate` names the
/// directory and what to do, and creates nothing.
#[test]
fn migrate_into_a_missing_directory_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nodir");
    let out = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["--db", "nodir/x.db", "migrate"])
        .current_dir(dir.path())
        .env_remove("ERRAND_DB")
        .output()
        .expect("run errand");
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        "errand: cannot create the database nodir/x.db: the directory nodir does not exist; \
         create it first (mkdir -p nodir) or name a database in an existing directory\n"
    );
    assert!(!missing.exists());
}

#[test]
fn a_newer_schema_is_refused_by_every_command() {
    let d = db();
    errand::sqlite::rusqlite::Connection::open(&d.path)
        .unwrap()
        .execute(
            "INSERT INTO errand_schema_history (version, name, applied_on, checksum) VALUES (999, 'future', '2030-01-01', '0')",
            [],
        )
        .unwrap();
    for args in [
        &["jobs"][..],
        &["migrate"][..],
        &["enqueue", "--kind", "k"][..],
    ] {
        let out = errand(&d.path, args);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("newer"), "{}", stderr(&out));
    }
}

/// A database a development build left before release 0.1 (its schema
/// history begins with another first migration) is refused by `migrate`
/// with exit 5 and a message that says what it is and what to do, and is
/// left exactly as it was; every other command refuses it the same way.
#[test]
fn migrate_refuses_a_development_build_database_and_leaves_it_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dev.db");
    errand::sqlite::rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TABLE errand_schema_history (version INTEGER PRIMARY KEY, name TEXT,
                 applied_on TEXT, checksum TEXT);
             INSERT INTO errand_schema_history VALUES (1, 'jobs', '2026-09-01', '1'),
                 (17, 'dependency_edges_by_source_and_met', '2026-11-30', '17');
             CREATE TABLE errand_jobs (id TEXT PRIMARY KEY, state TEXT);
             INSERT INTO errand_jobs VALUES ('kept', 'ready');",
        )
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    let out = errand(&path, &["migrate"]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert_eq!(
        stderr(&out),
        format!(
            "errand: {} (schema history at development version 17) holds Errand's schema from a \
             development build before release 0.1, which this program cannot upgrade: keep what \
             you need from it, then recreate it (move the SQLite file aside, or DROP SCHEMA ... \
             CASCADE on PostgreSQL) and run `errand migrate`\n",
            path.display()
        )
    );
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file is unchanged"
    );
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    names.sort();
    assert_eq!(names, ["dev.db"], "no side files were left");
    let out = errand(&path, &["migrate", "--json"]);
    assert_eq!(out.status.code(), Some(5));
    let out = errand(&path, &["jobs"]);
    assert_eq!(out.status.code(), Some(5), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("before release 0.1"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn two_worker_processes_never_run_the_same_job() {
    for trial in 0..5 {
        let d = db();
        json(&errand(
            &d.path,
            &["enqueue", "--kind", "k", "--id", "only", "--json"],
        ));
        let sink = d.path.with_file_name("effects");
        let cmd = format!(
            "echo \"$ERRAND_JOB_ID $ERRAND_ATTEMPT\" >> {}",
            sink.display()
        );
        let spawn = || {
            Command::new(env!("CARGO_BIN_EXE_errand"))
                .arg("--db")
                .arg(&d.path)
                .args(["work", "--once", "--json", "--exec", &cmd])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let outcomes: Vec<String> = [a, b]
            .into_iter()
            .map(|c| {
                json(&c.wait_with_output().unwrap())["outcome"]
                    .as_str()
                    .unwrap()
                    .to_owned()
            })
            .collect();
        let mut sorted = outcomes.clone();
        sorted.sort();
        assert_eq!(sorted, vec!["acknowledged", "idle"], "trial {trial}");
        assert_eq!(std::fs::read_to_string(&sink).unwrap(), "only 1\n");
        assert_eq!(job(&d.path, "only")["attempts"], 1);
    }
}

fn wait_for_state(db: &Path, id: &str, state: &str) {
    for _ in 0..200 {
        if job(db, id)["state"] == state {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    panic!("job {id} never reached {state}");
}

#[test]
fn sigterm_drains_the_service_worker_after_its_running_job() {
    let d = db();
    json(&errand(
        &d.path,
        &["enqueue", "--kind", "k", "--id", "slow", "--json"],
    ));
    json(&errand(
        &d.path,
        &[
            "enqueue", "--kind", "k", "--id", "next", "--delay", "2s", "--json",
        ],
    ));
    let child = Command::new(env!("CARGO_BIN_EXE_errand"))
        .arg("--db")
        .arg(&d.path)
        .args(["work", "--poll", "50ms", "--json", "--exec", "sleep 0.7"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_state(&d.path, "slow", "running");
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        lines.len(),
        1,
        "only the in-flight job is finished: {lines:?}"
    );
    assert_eq!(lines[0]["outcome"], "acknowledged");
    assert_eq!(job(&d.path, "slow")["state"], "done");
    assert_eq!(
        job(&d.path, "next")["state"],
        "ready",
        "nothing is claimed after the signal"
    );
}

#[test]
fn a_sigkilled_worker_leaves_a_lease_that_another_worker_reclaims() {
    let d = db();
    json(&errand(
        &d.path,
        &["enqueue", "--kind", "k", "--id", "crash", "--json"],
    ));
    let sink = d.path.with_file_name("effects");
    let cmd = format!("echo \"$ERRAND_ATTEMPT\" >> {}; sleep 5", sink.display());
    let mut child = Command::new(env!("CARGO_BIN_EXE_errand"))
        .arg("--db")
        .arg(&d.path)
        .args(["work", "--once", "--lease", "1s", "--exec", &cmd])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_state(&d.path, "crash", "running");
    while !sink.exists() {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let kill = Command::new("kill")
        .args(["-KILL", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let status = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(9));
    // Still running under the dead worker's lease; nobody may take it yet.
    assert_eq!(job(&d.path, "crash")["state"], "running");
    assert_eq!(
        json(&errand(
            &d.path,
            &["work", "--once", "--json", "--exec", "true"]
        ))["outcome"],
        "idle"
    );
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let r = json(&errand(
        &d.path,
        &["work", "--once", "--json", "--exec", "true"],
    ));
    assert_eq!(
        (r["outcome"].as_str(), r["attempt"].as_i64()),
        (Some("acknowledged"), Some(2))
    );
    let j = job(&d.path, "crash");
    assert_eq!(j["history"][0]["outcome"], "lease_expired");
    assert_eq!(j["state"], "done");
}

#[test]
fn past_the_drain_deadline_running_jobs_are_released_without_spending_an_attempt() {
    let d = db();
    json(&errand(
        &d.path,
        &["enqueue", "--kind", "k", "--id", "long", "--json"],
    ));
    let child = Command::new(env!("CARGO_BIN_EXE_errand"))
        .arg("--db")
        .arg(&d.path)
        .args([
            "work",
            "--poll",
            "50ms",
            "--drain",
            "300ms",
            "--json",
            "--exec",
            "sleep 31.25; true",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_for_state(&d.path, "long", "running");
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "exit {:?}", out.status);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["outcome"], "released");
    let j = job(&d.path, "long");
    assert_eq!(
        (j["state"].as_str(), j["attempts"].as_i64()),
        (Some("ready"), Some(0))
    );
    assert_eq!(j["history"][0]["outcome"], "released");
    // The command and what it started were stopped, not orphaned.
    let left = Command::new("pgrep")
        .args(["-f", "sleep 31.25"])
        .output()
        .unwrap();
    assert!(
        left.stdout.is_empty(),
        "orphaned: {}",
        String::from_utf8_lossy(&left.stdout)
    );
}

#[test]
fn a_job_that_kills_its_worker_every_time_is_quarantined_as_lost_lease() {
    let d = db();
    json(&errand(
        &d.path,
        &[
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
        ],
    ));
    let mut deaths = 0;
    for _ in 0..6 {
        let out = errand(
            &d.path,
            &[
                "work",
                "--once",
                "--lease",
                "300ms",
                "--json",
                "--exec",
                "kill -KILL $PPID",
            ],
        );
        use std::os::unix::process::ExitStatusExt;
        if out.status.signal() == Some(9) {
            deaths += 1;
            std::thread::sleep(std::time::Duration::from_millis(350));
            continue;
        }
        assert_eq!(json(&out)["outcome"], "idle");
        break;
    }
    assert_eq!(deaths, 2, "two workers died before the job was quarantined");
    let j = job(&d.path, "p");
    assert_eq!(j["state"], "dead");
    assert_eq!(j["last_error_class"], "lost_lease");
    assert_eq!(
        (j["attempts"].as_i64(), j["lease_expiries"].as_i64()),
        (Some(2), Some(2))
    );
}

#[test]
fn prune_deletes_old_finished_jobs_and_keeps_dead_ones() {
    let d = db();
    for id in ["fin", "bad"] {
        json(&errand(
            &d.path,
            &[
                "enqueue",
                "--kind",
                "k",
                "--id",
                id,
                "--max-attempts",
                "1",
                "--json",
            ],
        ));
    }
    json(&errand(
        &d.path,
        &["work", "--once", "--exec", "true", "--json"],
    ));
    json(&errand(
        &d.path,
        &["work", "--once", "--exec", "exit 65", "--json"],
    ));
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(
        json(&errand(&d.path, &["prune", "--older-than", "1h", "--json"]))["deleted"],
        0
    );
    assert_eq!(
        json(&errand(
            &d.path,
            &["prune", "--older-than", "10ms", "--json"]
        ))["deleted"],
        1
    );
    let left = json(&errand(&d.path, &["jobs", "--json"]));
    assert_eq!(left.as_array().map(Vec::len), Some(1));
    assert_eq!(left[0]["state"], "dead");
}

#[test]
fn enqueue_takes_a_concurrency_key_and_refuses_key_flags_without_one() {
    let d = db();
    let ordered = json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "k",
            "--id",
            "o1",
            "--key",
            "acct 7",
            "--ordered",
            "--json",
        ],
    ));
    assert_eq!(
        ordered["key"],
        serde_json::json!({"name": "acct 7", "limit": 1, "ordered": true})
    );
    let capped = json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "k",
            "--id",
            "c1",
            "--key",
            "t",
            "--key-limit",
            "3",
            "--json",
        ],
    ));
    assert_eq!(
        capped["key"],
        serde_json::json!({"name": "t", "limit": 3, "ordered": false})
    );
    assert_eq!(job(&d.path, "c1")["key"]["limit"], 3);
    let plain = json(&errand(
        &d.path,
        &["enqueue", "--kind", "k", "--id", "p1", "--json"],
    ));
    assert!(plain.get("key").is_none(), "{plain}");

    for (args, needle) in [
        (vec!["--key-limit", "3"], "--key"),
        (vec!["--ordered"], "--key"),
        (
            vec!["--key", "t", "--ordered", "--key-limit", "2"],
            "cannot be used with",
        ),
        (vec!["--key", "t", "--key-limit", "0"], "key-limit"),
        (vec!["--key", "", "--key-limit", "1"], "concurrency key"),
    ] {
        let mut all = vec!["enqueue", "--kind", "k", "--id", "bad"];
        all.extend(args.iter().copied());
        let out = errand(&d.path, &all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    let listed = json(&errand(&d.path, &["jobs", "--json"]));
    assert_eq!(
        listed.as_array().map(Vec::len),
        Some(3),
        "nothing refused was written"
    );
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A job of `queue` that died at its first attempt (permanent failure).
fn dead_job(db: &Path, id: &str, queue: &str) {
    json(&errand(
        db,
        &[
            "enqueue",
            "--kind",
            "k",
            "--id",
            id,
            "--queue",
            queue,
            "--max-attempts",
            "1",
            "--json",
        ],
    ));
    let r = json(&errand(
        db,
        &[
            "work",
            "--once",
            "--queue",
            queue,
            "--exec",
            "echo broken >&2; exit 65",
            "--json",
        ],
    ));
    assert_eq!(
        (r["job_id"].as_str(), r["outcome"].as_str()),
        (Some(id), Some("dead"))
    );
}

const TP: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

#[test]
fn stats_show_every_queue_its_counts_its_window_and_whether_it_is_paused() {
    let d = db();
    for id in ["m1", "m2"] {
        json(&errand(
            &d.path,
            &[
                "enqueue", "--kind", "k", "--id", id, "--queue", "mail", "--json",
            ],
        ));
    }
    json(&errand(
        &d.path,
        &[
            "enqueue", "--kind", "k", "--id", "m3", "--queue", "mail", "--delay", "1h", "--json",
        ],
    ));
    dead_job(&d.path, "b1", "bulk");
    let out = errand(&d.path, &["pause", "idle", "--by", "ops"]);
    assert!(out.status.success(), "{}", stderr(&out));

    let s = json(&errand(&d.path, &["stats", "--json"]));
    let names: Vec<&str> = s["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|q| q["queue"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["bulk", "idle", "mail"]);
    let (bulk, idle, mail) = (&s["queues"][0], &s["queues"][1], &s["queues"][2]);
    assert_eq!(
        (mail["ready"].as_u64(), mail["scheduled"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(mail["paused"], false);
    assert!(mail["oldest_due_age_ms"].is_u64(), "{mail}");
    assert_eq!(bulk["dead"], 1);
    assert_eq!(bulk["dead_letters"], serde_json::json!({"permanent": 1}));
    assert_eq!(idle["paused"], true);
    assert_eq!(s["window_secs"], 900);
    assert_eq!(s["truncated"], serde_json::json!([]));
    // dead_job's `work --once` reported its run.
    assert!(s["since_last_worker_cycle_ms"].is_u64(), "{s}");
    assert_eq!(
        json(&errand(&d.path, &["stats", "--window", "1h", "--json"]))["window_secs"],
        3600
    );

    let out = errand(&d.path, &["stats"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(text.contains("over the last 15m"), "{text}");
    assert!(
        text.contains("QUEUE") && text.contains("DEAD LETTERS"),
        "{text}"
    );
    let line = |q: &str| {
        text.lines()
            .find(|l| l.starts_with(q))
            .unwrap_or_else(|| panic!("no {q} line: {text}"))
            .split_whitespace()
            .collect::<Vec<_>>()
    };
    assert_eq!(line("mail")[..4], ["mail", "2", "1", "0"]);
    assert_eq!(line("bulk")[10], "permanent=1", "{text}");
    assert_eq!(line("idle").last(), Some(&"paused"));
    assert_eq!(line("(all)")[1], "2");
    assert!(text.contains("workers: 1 reporting"), "{text}");

    // A count that reaches the cap is a lower bound, and says so.
    let capped = json(&errand(&d.path, &["stats", "--cap", "1", "--json"]));
    assert!(
        capped["truncated"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!("ready")),
        "{capped}"
    );
    let text = stdout(&errand(&d.path, &["stats", "--cap", "1"]));
    assert!(
        text.contains("≥2") && text.contains("lower bounds"),
        "{text}"
    );
    // Only the queue past the cap is marked.
    let bulk = text.lines().find(|l| l.starts_with("bulk")).unwrap();
    assert!(!bulk.contains('≥'), "{text}");
}

#[test]
fn stats_check_fails_exactly_when_a_threshold_is_crossed() {
    let d = db();
    dead_job(&d.path, "b1", "bulk");
    let check = |extra: &[&str]| {
        let mut args = vec!["stats", "--check"];
        args.extend_from_slice(extra);
        errand(&d.path, &args)
    };

    let out = check(&["--max-dead", "0"]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "CROSSED queue bulk: dead jobs = 1, above max_dead = 0"
    );
    let out = check(&["--max-dead", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    // A threshold the capped count could never cross is refused.
    let out = check(&["--max-dead", "10", "--cap", "10"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not below --cap 10"),
        "{}",
        stderr(&out)
    );
    let out = check(&["--max-dead", "10", "--cap", "11"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).starts_with("ok: 1 threshold check(s) over 1 queue(s)"));

    // Every crossed threshold, one line each.
    let out = check(&[
        "--max-dead",
        "0",
        "--max-dead-letters",
        "0",
        "--max-ready",
        "0",
    ]);
    assert_eq!(out.status.code(), Some(6));
    let lines: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    assert_eq!(
        lines,
        [
            "CROSSED queue bulk: dead jobs = 1, above max_dead = 0",
            "CROSSED queue bulk: jobs gone dead in the window = 1, above max_dead_letters = 0",
        ]
    );
    let out = check(&["--max-retries", "0", "--max-expired-leases", "0"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    // A job due long ago has waited longer than an hour.
    json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "k",
            "--queue",
            "late",
            "--run-at",
            "2020-01-01T00:00:00Z",
            "--json",
        ],
    ));
    let out = check(&["--max-oldest-due", "1h"]);
    assert_eq!(out.status.code(), Some(6));
    assert!(
        stdout(&out).starts_with("CROSSED queue late: the oldest due job has waited "),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out)
            .trim_end()
            .ends_with("above max_oldest_due = 1h")
    );

    // dead_job's `work --once` reported a claim cycle moments ago (the
    // case of no worker ever reporting is in
    // work_once_reports_each_run_and_the_counts_add_up).
    let out = check(&["--max-since-worker-cycle", "1h"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    let v: Value = serde_json::from_slice(&check(&["--max-dead", "0", "--json"]).stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert_eq!(v["checked"], 2, "one threshold, two queues");
    assert_eq!(
        (
            v["crossed"][0]["queue"].as_str(),
            v["crossed"][0]["threshold"].as_str(),
            v["crossed"][0]["value"].as_u64(),
            v["crossed"][0]["max"].as_u64()
        ),
        (Some("bulk"), Some("max_dead"), Some(1), Some(0))
    );
    assert_eq!(v["stats"]["queues"][0]["dead"], 1);
    let v: Value = serde_json::from_slice(&check(&["--max-dead", "9", "--json"]).stdout).unwrap();
    assert_eq!(
        (v["ok"].as_bool(), v["crossed"].as_array().map(Vec::len)),
        (Some(true), Some(0))
    );

    // No threshold at all is a usage error, not a silent pass; a threshold
    // without --check is refused.
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("no threshold to check"),
        "{}",
        stderr(&out)
    );
    let out = errand(&d.path, &["stats", "--max-dead", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--check"), "{}", stderr(&out));
}

/// The `ok` line says what was compared. A queue whose jobs all finished
/// has nothing to show (`stats` leaves it out), so after a job ran there,
/// the workers' threshold is the one compared, over no queue.
#[test]
fn stats_check_says_what_it_compared() {
    let d = db();
    let check = |extra: &[&str]| {
        let mut args = vec!["stats", "--check"];
        args.extend_from_slice(extra);
        let out = errand(&d.path, &args);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        stdout(&out)
    };
    let enqueued = errand(&d.path, &["enqueue", "--kind", "k", "--queue", "receipts"]);
    assert!(enqueued.status.success(), "{}", stderr(&enqueued));
    let worked = errand(&d.path, &["work", "--once", "--exec", "cat > /dev/null"]);
    assert!(worked.status.success(), "{}", stderr(&worked));
    assert_eq!(
        check(&["--max-since-worker-cycle", "1h"]),
        "ok: 1 threshold check(s) over the workers' claim cycles, none crossed\n"
    );
    assert_eq!(
        check(&["--max-dead", "0"]),
        "ok: 0 threshold check(s): no queue has waiting, running or dead jobs, recent failures or a pause\n"
    );
    dead_job(&d.path, "b1", "bulk");
    assert_eq!(
        check(&[
            "--max-dead",
            "1",
            "--max-ready",
            "0",
            "--max-since-worker-cycle",
            "1h"
        ]),
        "ok: 3 threshold check(s) over 1 queue(s) and the workers' claim cycles, none crossed\n"
    );
}

#[test]
fn stats_check_reads_thresholds_from_a_toml_file_and_flags_override_it() {
    let d = db();
    dead_job(&d.path, "b1", "bulk");
    dead_job(&d.path, "m1", "mail");
    let file = d.path.with_file_name("thresholds.toml");
    let write = |text: &str| std::fs::write(&file, text).unwrap();
    let check = |extra: &[&str]| {
        let mut args = vec!["stats", "--check", "--config", file.to_str().unwrap()];
        args.extend_from_slice(extra);
        errand(&d.path, &args)
    };

    write("window = \"1h\"\nmax_dead = 5\n\n[queues.mail]\nmax_dead = 0\n");
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(6), "{}", stderr(&out));
    assert_eq!(
        stdout(&out).trim(),
        "CROSSED queue mail: dead jobs = 1, above max_dead = 0",
        "the queue's table replaces the top level for mail only"
    );
    let out = check(&["--max-dead", "1"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "a flag overrides the file: {}",
        stdout(&out)
    );
    let out = check(&["--max-dead-letters", "0"]);
    assert_eq!(out.status.code(), Some(6));
    assert_eq!(stdout(&out).lines().count(), 3, "{}", stdout(&out));
    let v: Value = serde_json::from_slice(&check(&["--json"]).stdout).unwrap();
    assert_eq!(v["stats"]["window_secs"], 3600, "the file's window");

    write("[queues.bulk]\nmax_dead = 1\n");
    assert_eq!(check(&[]).status.code(), Some(0));

    write("[queues.late]\nmax_oldest_due = \"5m\"\n");
    json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "k",
            "--queue",
            "late",
            "--run-at",
            "2020-01-01T00:00:00Z",
            "--json",
        ],
    ));
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(6));
    assert!(
        stdout(&out).contains("queue late: the oldest due job"),
        "{}",
        stdout(&out)
    );

    for (text, needle) in [
        ("max_deadd = 1\n", "max_deadd"),
        ("max_dead = -1\n", "max_dead"),
        ("max_oldest_due = \"soon\"\n", "soon"),
        ("[queues.\"bad name!\"]\nmax_dead = 1\n", "bad name!"),
        ("", "no threshold"),
    ] {
        write(text);
        let out = check(&[]);
        assert_eq!(out.status.code(), Some(2), "{text:?}");
        assert!(stderr(&out).contains(needle), "{text:?}: {}", stderr(&out));
    }
    std::fs::remove_file(&file).unwrap();
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("cannot read the thresholds file"));
}

#[test]
fn a_paused_queue_gives_workers_in_other_processes_nothing_until_resumed() {
    let d = db();
    json(&errand(
        &d.path,
        &[
            "enqueue", "--kind", "k", "--id", "p1", "--queue", "mail", "--json",
        ],
    ));
    let out = errand(
        &d.path,
        &["pause", "mail", "--by", "ops", "--reason", "smtp down"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("paused queue mail by ops: smtp down;"),
        "{}",
        stdout(&out)
    );
    // A worker in another process sees the pause (which claims a pause
    // stops is conformance's `a_paused_queue_gives_nothing_to_claims_until_resumed`).
    assert_eq!(
        json(&errand(
            &d.path,
            &["work", "--once", "--exec", "true", "--json"]
        ))["outcome"],
        "idle"
    );

    let out = errand(&d.path, &["pause", "mail", "--by", "bob"]);
    assert!(out.status.success());
    assert!(
        stdout(&out).starts_with("queue mail was already paused by ops at "),
        "{}",
        stdout(&out)
    );
    let again = json(&errand(
        &d.path,
        &["pause", "mail", "--by", "bob", "--json"],
    ));
    assert_eq!(
        (
            again["paused"].as_bool(),
            again["changed"].as_bool(),
            again["paused_by"].as_str()
        ),
        (Some(true), Some(false), Some("ops"))
    );
    let queues = json(&errand(&d.path, &["queues", "--json"]));
    assert_eq!(queues[0]["queue"], "mail");
    assert_eq!(
        (queues[0]["paused"].as_bool(), queues[0]["reason"].as_str()),
        (Some(true), Some("smtp down"))
    );
    let text = stdout(&errand(&d.path, &["queues"]));
    assert!(
        text.lines()
            .any(|l| l.starts_with("mail") && l.contains("paused") && l.contains("smtp down")),
        "{text}"
    );

    let out = errand(
        &d.path,
        &["resume", "mail", "--by", "ops", "--reason", "relay back"],
    );
    assert!(out.status.success());
    assert!(
        stdout(&out).starts_with("resumed queue mail (paused by ops at "),
        "{}",
        stdout(&out)
    );
    let r = json(&errand(
        &d.path,
        &["work", "--once", "--exec", "true", "--json"],
    ));
    assert_eq!(
        (r["job_id"].as_str(), r["outcome"].as_str()),
        (Some("p1"), Some("acknowledged"))
    );
    let out = errand(&d.path, &["resume", "mail", "--by", "ops"]);
    assert!(out.status.success());
    assert_eq!(
        stdout(&out).trim(),
        "queue mail was not paused; nothing changed"
    );
    assert_eq!(
        json(&errand(&d.path, &["queues", "--json"])),
        serde_json::json!([])
    );

    for (args, needle) in [
        (&["pause", "mail"][..], "--by"),
        (&["pause", "bad name!", "--by", "ops"][..], "queue"),
        (&["resume", "mail", "--by", " "][..], "operator"),
    ] {
        let out = errand(&d.path, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

/// `purge` prints what it did, would do or refused, with its exit codes and
/// flag checks, and `show` reports a purged job from its audit entry (what
/// a purge deletes and records is conformance's
/// `purge_deletes_only_dead_jobs_and_its_audit_outlives_them` and
/// `an_action_over_a_selection_is_judged_and_taken_in_one_call`).
#[test]
fn purge_prints_what_it_did_or_refused_and_show_reports_the_purge() {
    let d = db();
    dead_job(&d.path, "d1", "bulk");
    dead_job(&d.path, "d2", "bulk");
    dead_job(&d.path, "d3", "mail");
    json(&errand(
        &d.path,
        &[
            "enqueue", "--kind", "k", "--id", "r1", "--queue", "bulk", "--json",
        ],
    ));
    // A ready job among the ids: refused, and the message says nothing was purged.
    let out = errand(
        &d.path,
        &["purge", "d1", "r1", "--by", "ops", "--reason", "gdpr"],
    );
    assert_eq!(out.status.code(), Some(4));
    assert!(
        stderr(&out)
            .contains("job `r1` is ready: only dead jobs can be purged; nothing was purged"),
        "{}",
        stderr(&out)
    );
    for (args, needle) in [
        (&["purge", "d1", "--by", "ops"][..], "--reason"),
        (&["purge", "d1", "--reason", "x"][..], "--by"),
        (
            &["purge", "d1", "--by", "ops", "--reason", " "][..],
            "reason",
        ),
        (
            &["purge", "--by", "ops", "--reason", "x"][..],
            "either by id or by filter",
        ),
        (
            &[
                "purge", "d1", "--queue", "bulk", "--by", "ops", "--reason", "x",
            ][..],
            "not both",
        ),
    ] {
        let out = errand(&d.path, args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    let out = errand(&d.path, &["purge", "nope", "--by", "ops", "--reason", "x"]);
    assert_eq!(out.status.code(), Some(3));

    let dry = json(&errand(
        &d.path,
        &[
            "purge",
            "d1",
            "r1",
            "--dry-run",
            "--by",
            "ops",
            "--reason",
            "gdpr",
            "--json",
        ],
    ));
    assert_eq!(
        (
            dry["dry_run"].as_bool(),
            dry["jobs"].as_array().map(Vec::len)
        ),
        (Some(true), Some(2))
    );
    let text = stdout(&errand(
        &d.path,
        &[
            "purge",
            "d1",
            "r1",
            "--dry-run",
            "--by",
            "ops",
            "--reason",
            "gdpr",
        ],
    ));
    assert!(
        text.contains("would purge d1")
            && text.contains("would refuse (only dead jobs can be purged) r1"),
        "{text}"
    );

    let out = errand(
        &d.path,
        &["purge", "d1", "--by", "ops", "--reason", "customer asked"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("purged d1 (queue=bulk kind=k) by ops\n"),
        "{}",
        stdout(&out)
    );
    for args in [&["show", "d1"][..], &["show", "d1", "--json"][..]] {
        let out = errand(&d.path, args);
        assert_eq!(out.status.code(), Some(3), "still not found");
        assert!(stdout(&out).is_empty());
        let msg = stderr(&out);
        assert!(
            msg.starts_with("errand: job `d1` was purged by ops at "),
            "{msg}"
        );
        assert!(
            msg.contains(": customer asked; its audit entries remain"),
            "{msg}"
        );
    }
    let out = errand(&d.path, &["show", "never"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(stderr(&out).contains("no job with id `never`"));

    // By filter, with a bound: a purge asks for dead jobs (r1 is ready).
    let dry = json(&errand(
        &d.path,
        &[
            "purge",
            "--queue",
            "bulk",
            "--dry-run",
            "--by",
            "ops",
            "--reason",
            "cleanup",
            "--json",
        ],
    ));
    let ids: Vec<&str> = dry["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["d2"]);
    let r = json(&errand(
        &d.path,
        &[
            "purge", "--error", "broken", "--limit", "1", "--by", "ops", "--reason", "cleanup",
            "--json",
        ],
    ));
    assert_eq!(r["purged"].as_array().map(Vec::len), Some(1));
    let r = json(&errand(
        &d.path,
        &[
            "purge", "--kind", "k", "--by", "ops", "--reason", "cleanup", "--json",
        ],
    ));
    assert_eq!(r["purged"].as_array().map(Vec::len), Some(1));
    let r = json(&errand(
        &d.path,
        &[
            "purge", "--kind", "k", "--by", "ops", "--reason", "cleanup", "--json",
        ],
    ));
    assert_eq!(r["purged"], serde_json::json!([]), "nothing dead is left");
}

/// `audit` takes `--limit` and `--before` and prints where the next page
/// starts, and `--job` and `--queue` filter (the log's order and what each
/// filter finds are conformance's
/// `the_audit_log_pages_newest_first_and_filters`).
#[test]
fn audit_pages_by_limit_and_before_and_filters_by_job_and_queue() {
    let d = db();
    for id in ["a", "b"] {
        json(&errand(
            &d.path,
            &["enqueue", "--kind", "k", "--id", id, "--json"],
        ));
        json(&errand(
            &d.path,
            &["cancel", id, "--by", "ops", "--reason", id, "--json"],
        ));
    }
    assert!(
        errand(&d.path, &["pause", "q", "--by", "ops"])
            .status
            .success()
    );
    assert!(
        errand(&d.path, &["resume", "q", "--by", "ops"])
            .status
            .success()
    );

    let all = json(&errand(&d.path, &["audit", "--json"]));
    let page1 = json(&errand(&d.path, &["audit", "--limit", "2", "--json"]));
    assert_eq!(page1, serde_json::json!([all[0], all[1]]));
    let before = page1[1]["seq"].as_u64().unwrap().to_string();
    let page2 = json(&errand(
        &d.path,
        &["audit", "--limit", "2", "--before", &before, "--json"],
    ));
    assert_eq!(page2, serde_json::json!([all[2], all[3]]));
    let text = stdout(&errand(&d.path, &["audit", "--limit", "2"]));
    assert!(text.starts_with("SEQ  AT "), "{text}");
    assert!(
        text.contains(&format!("(more may follow: add --before {before})")),
        "{text}"
    );

    let a = json(&errand(&d.path, &["audit", "--job", "a", "--json"]));
    assert_eq!(a.as_array().map(Vec::len), Some(1));
    let q = json(&errand(&d.path, &["audit", "--queue", "q", "--json"]));
    assert_eq!(q.as_array().map(Vec::len), Some(2));
    assert_eq!(
        stdout(&errand(&d.path, &["audit", "--queue", "none"])).trim(),
        "no audit entries"
    );
    let out = errand(&d.path, &["audit", "--limit", "0"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn enqueue_takes_a_deadline_and_a_traceparent_and_show_prints_them() {
    let d = db();
    let j = json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "k",
            "--id",
            "t1",
            "--deadline",
            "2999-01-01T00:00:00Z",
            "--traceparent",
            TP,
            "--json",
        ],
    ));
    assert_eq!(
        (j["deadline"].as_str(), j["traceparent"].as_str()),
        (Some("2999-01-01T00:00:00.000Z"), Some(TP))
    );
    let j = json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "k",
            "--id",
            "t2",
            "--deadline",
            "30m",
            "--json",
        ],
    ));
    let (deadline, created) = (
        j["deadline"].as_str().unwrap(),
        j["created_at"].as_str().unwrap(),
    );
    assert!(
        deadline > created,
        "30m from now: {deadline} after {created}"
    );
    assert!(j.get("traceparent").is_none(), "{j}");

    let text = stdout(&errand(&d.path, &["show", "t1"]));
    assert!(
        text.contains("deadline:     2999-01-01T00:00:00.000Z\n"),
        "{text}"
    );
    assert!(text.contains(&format!("traceparent:  {TP}\n")), "{text}");
    let text = stdout(&errand(&d.path, &["show", "t2"]));
    assert!(!text.contains("traceparent:"), "{text}");
    for _ in 0..2 {
        json(&errand(
            &d.path,
            &["work", "--once", "--exec", "true", "--json"],
        ));
    }
    let text = stdout(&errand(&d.path, &["show", "t1"]));
    assert!(
        text.contains("deadline:     2999-01-01T00:00:00.000Z (finished on time)"),
        "{text}"
    );

    // $TRACEPARENT is the default; the flag wins; an invalid one is ignored
    // with a warning.
    let with_env = |value: &str, extra: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_errand"))
            .arg("--db")
            .arg(&d.path)
            .args(["enqueue", "--kind", "k", "--json"])
            .args(extra)
            .env("TRACEPARENT", value)
            .output()
            .unwrap()
    };
    assert_eq!(json(&with_env(TP, &[]))["traceparent"], TP);
    let other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00";
    assert_eq!(
        json(&with_env(TP, &["--traceparent", other]))["traceparent"],
        other
    );
    let out = with_env("garbage", &[]);
    assert!(json(&out).get("traceparent").is_none());
    assert!(
        stderr(&out).contains("warning: ignoring $TRACEPARENT"),
        "{}",
        stderr(&out)
    );

    for (args, needle) in [
        (&["--deadline", "someday"][..], "neither an RFC 3339 time"),
        (&["--deadline", "0s"][..], "neither an RFC 3339 time"),
        (
            &["--traceparent", "00-abc-def-01"][..],
            "not a W3C trace context",
        ),
        (
            &[
                "--traceparent",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            ][..],
            "not a W3C trace context",
        ),
    ] {
        let mut all = vec!["enqueue", "--kind", "k", "--id", "bad"];
        all.extend_from_slice(args);
        let out = errand(&d.path, &all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(
        errand(&d.path, &["show", "bad"]).status.code(),
        Some(3),
        "nothing refused was written"
    );
}

/// `replay --new-key` prints and answers with each copy (the new job as a
/// brief, without its payload), a refusal exits 4 with the library's
/// message, and `show` of the copy names its original (what a copy takes
/// and records is conformance's
/// `a_copy_takes_a_new_id_leaves_the_original_and_is_audited`).
#[test]
fn replay_new_key_prints_each_copy_and_show_names_its_original() {
    let d = db();
    json(&errand(
        &d.path,
        &[
            "enqueue",
            "--kind",
            "mail",
            "--id",
            "n1",
            "--queue",
            "bulk",
            "--payload",
            r#"{"to":"x"}"#,
            "--max-attempts",
            "1",
            "--json",
        ],
    ));
    json(&errand(
        &d.path,
        &["work", "--once", "--exec", "exit 65", "--json"],
    ));
    json(&errand(
        &d.path,
        &["enqueue", "--kind", "k", "--id", "r1", "--json"],
    ));

    let text = stdout(&errand(
        &d.path,
        &["replay", "n1", "--new-key", "--dry-run"],
    ));
    assert!(text.starts_with("would copy n1 "), "{text}");
    let out = errand(&d.path, &["replay", "n1", "r1", "--new-key"]);
    assert_eq!(out.status.code(), Some(4));
    assert!(stderr(&out).contains("job `r1` is ready: only dead or cancelled jobs can be copied under a new id; nothing was copied"), "{}", stderr(&out));

    let r = json(&errand(
        &d.path,
        &[
            "replay",
            "n1",
            "--new-key",
            "--by",
            "ops",
            "--reason",
            "provider fixed",
            "--json",
        ],
    ));
    assert_eq!(r["copies"][0]["from"], "n1");
    // The answer names the copy without its payload; `show` has it whole.
    let brief = &r["copies"][0]["job"];
    assert!(brief.get("payload").is_none(), "{brief}");
    let copy_id = brief["id"].as_str().expect("the copy's id");
    let copy = job(&d.path, copy_id);
    assert_eq!(brief["payload_bytes"], copy["payload"].to_string().len());
    // `show` words the copy's entry; --by and --reason reached it.
    let text = stdout(&errand(&d.path, &["show", copy_id]));
    assert!(
        text.contains("copy (this job, from job n1) by ops: provider fixed"),
        "{text}"
    );

    let out = errand(
        &d.path,
        &["replay", "--queue", "bulk", "--new-key", "--by", "ops"],
    );
    assert!(out.status.success());
    let text = stdout(&out);
    assert!(text.starts_with("copied job n1 to new job "), "{text}");
    assert!(
        text.trim_end().ends_with("(queue=bulk kind=mail) by ops"),
        "{text}"
    );
}

/// `work --once` from a scheduler reports itself like a service worker:
/// the worker-silence check passes after a run, and the runs of one host
/// and queue share one report whose counters add up.
#[test]
fn work_once_reports_each_run_and_the_counts_add_up() {
    let d = db();
    let check = || {
        errand(
            &d.path,
            &["stats", "--check", "--max-since-worker-cycle", "1h"],
        )
    };
    let out = check();
    assert_eq!(out.status.code(), Some(6), "no worker has reported yet");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no worker has reported a claim cycle"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    let out = errand(
        &d.path,
        &["work", "--once", "--queue", "mail", "--exec", "true"],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "idle");
    let out = check();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    for id in ["m1", "m2"] {
        json(&errand(
            &d.path,
            &[
                "enqueue", "--kind", "k", "--queue", "mail", "--id", id, "--json",
            ],
        ));
        let out = errand(
            &d.path,
            &["work", "--once", "--queue", "mail", "--exec", "true"],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        assert!(
            String::from_utf8_lossy(&out.stdout).contains(&format!("job {id} attempt 1")),
            "{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let s = json(&errand(&d.path, &["stats", "--json"]));
    let workers = s["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1, "{workers:?}");
    let w = &workers[0];
    assert!(
        w["id"].as_str().unwrap().starts_with("once@")
            && w["id"].as_str().unwrap().ends_with("/mail"),
        "{w}"
    );
    assert_eq!(w["queues"], serde_json::json!(["mail"]));
    assert_eq!(
        (
            w["metrics"]["cycles"].as_u64(),
            w["metrics"]["started"].as_u64()
        ),
        (Some(3), Some(2))
    );
    let latency: u64 = w["metrics"]["start_latency"]["counts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_u64().unwrap())
        .sum();
    assert_eq!(latency, 2, "one wait from due to start per job run");

    // Another queue list is another report.
    let out = errand(&d.path, &["work", "--once", "--exec", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let s = json(&errand(&d.path, &["stats", "--json"]));
    assert_eq!(s["workers"].as_array().unwrap().len(), 2);
}

/// `errand workflow show|cancel|replay`, and the labels `enqueue` takes
/// and `jobs` filters by.
#[test]
fn workflows_are_shown_replayed_and_cancelled_and_tags_filter_jobs() {
    let d = db();
    let enq = |args: &[&str]| {
        let mut all = vec!["enqueue", "--kind", "k", "--json"];
        all.extend_from_slice(args);
        json(&errand(&d.path, &all))
    };
    let first = enq(&[
        "--id",
        "s1",
        "--queue",
        "wf",
        "--max-attempts",
        "1",
        "--workflow",
        "order-7",
        "--tag",
        "eu",
        "--tag",
        "customer:42",
        "--meta",
        "owner=Ada Lovelace",
        "--meta",
        "ticket=T=1",
    ]);
    assert_eq!(first["workflow"], "order-7");
    assert_eq!(first["tags"], serde_json::json!(["eu", "customer:42"]));
    assert_eq!(
        first["meta"],
        serde_json::json!({"owner": "Ada Lovelace", "ticket": "T=1"})
    );
    enq(&[
        "--id",
        "s2",
        "--workflow",
        "order-7",
        "--depends-on",
        "s1",
        "--tag",
        "eu",
    ]);
    enq(&["--id", "other", "--tag", "eu"]);

    let show = stdout(&errand(&d.path, &["workflow", "show", "order-7"]));
    assert!(
        show.starts_with("workflow order-7: 2 step(s), unfinished (blocked 1, ready 1)"),
        "{show}"
    );
    assert!(
        show.lines()
            .any(|l| l.starts_with("s2 ") && l.ends_with(" s1")),
        "{show}"
    );
    let view = json(&errand(&d.path, &["workflow", "show", "order-7", "--json"]));
    assert_eq!(view["steps"][1]["depends_on"], serde_json::json!(["s1"]));
    let detail = stdout(&errand(&d.path, &["show", "s1"]));
    for line in [
        "workflow:     order-7",
        "tags:         eu, customer:42",
        "meta:         owner=Ada Lovelace",
    ] {
        assert!(detail.contains(line), "{line} in {detail}");
    }

    let eu = json(&errand(&d.path, &["jobs", "--tag", "eu", "--json"]));
    let ids: Vec<&str> = eu
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["s1", "s2", "other"]);
    let blocked = json(&errand(
        &d.path,
        &[
            "jobs",
            "--workflow",
            "order-7",
            "--state",
            "blocked",
            "--json",
        ],
    ));
    assert_eq!(blocked.as_array().unwrap().len(), 1);
    assert_eq!(blocked[0]["id"], "s2");

    // s1 dies; replaying the workflow replays it, and the audit says why.
    let r = json(&errand(
        &d.path,
        &[
            "work", "--once", "--queue", "wf", "--exec", "exit 65", "--json",
        ],
    ));
    assert_eq!(r["outcome"], "dead");
    let replayed = json(&errand(
        &d.path,
        &[
            "workflow", "replay", "order-7", "--by", "ops", "--reason", "fixed", "--json",
        ],
    ));
    assert_eq!(replayed["jobs"][0]["id"], "s1");
    let cancelled = stdout(&errand(
        &d.path,
        &[
            "workflow",
            "cancel",
            "order-7",
            "--by",
            "ops",
            "--reason",
            "withdrawn",
        ],
    ));
    assert!(
        cancelled.starts_with("cancelled 2 step(s) of workflow order-7"),
        "{cancelled}"
    );
    let audit = stdout(&errand(&d.path, &["audit", "--job", "s2"]));
    assert!(
        audit.contains("cancel workflow order-7: withdrawn"),
        "{audit}"
    );

    // Refusals say what is wrong and change nothing.
    let missing = errand(&d.path, &["workflow", "show", "nope"]);
    assert_eq!(missing.status.code(), Some(3), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains("no workflow with id `nope`"),
        "{}",
        stderr(&missing)
    );
    for bad in [
        vec!["enqueue", "--kind", "k", "--meta", "novalue"],
        vec!["enqueue", "--kind", "k", "--meta", "a=1", "--meta", "a=2"],
        vec!["enqueue", "--kind", "k", "--tag", "has space"],
        vec!["jobs", "--tag", "has space"],
    ] {
        let o = errand(&d.path, &bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
    }
    let all = json(&errand(&d.path, &["jobs", "--json"]));
    assert_eq!(all.as_array().unwrap().len(), 3);
}

/// Twenty `errand enqueue --unique-for` processes started at once on one
/// key create one job on SQLite; `--debounce` pushes its waiting twin.
#[test]
fn twenty_concurrent_unique_enqueuers_create_one_job_and_debounce_pushes() {
    let d = db();
    let children: Vec<std::process::Child> = (0..20)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_errand"))
                .arg("--db")
                .arg(&d.path)
                .args(["enqueue", "--kind", "sync", "--payload", r#"{"account":9}"#])
                .args(["--unique-for", "1h", "--json"])
                .env_remove("ERRAND_DB")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn errand")
        })
        .collect();
    let mut created = 0;
    let mut ids = std::collections::BTreeSet::new();
    for child in children {
        let v = json(&child.wait_with_output().expect("wait"));
        created += usize::from(v["created"] == true);
        ids.insert(v["id"].as_str().unwrap().to_owned());
    }
    assert_eq!(created, 1, "exactly one process created the job");
    assert_eq!(ids.len(), 1, "every process answered with that job");

    let bounce = |v: &str| {
        json(&errand(
            &d.path,
            &[
                "enqueue",
                "--kind",
                "reindex",
                "--payload",
                v,
                "--debounce",
                "1h",
                "--unique-key",
                "user:7",
                "--json",
            ],
        ))
    };
    let first = bounce(r#"{"v":1}"#);
    let second = bounce(r#"{"v":2}"#);
    assert_eq!(
        (first["created"].as_bool(), second["created"].as_bool()),
        (Some(true), Some(false))
    );
    assert_eq!(second["id"], first["id"]);
    assert_eq!(second["payload"], serde_json::json!({"v": 2}));
    let all = json(&errand(&d.path, &["jobs", "--json"]));
    assert_eq!(all.as_array().unwrap().len(), 2);
    for bad in [
        vec!["enqueue", "--kind", "k", "--unique-key", "x"],
        vec![
            "enqueue",
            "--kind",
            "k",
            "--unique-for",
            "1h",
            "--debounce",
            "1s",
        ],
        vec![
            "enqueue",
            "--kind",
            "k",
            "--debounce",
            "1s",
            "--delay",
            "1s",
        ],
        vec!["enqueue", "--kind", "k", "--unique-while", "ready,nowhere"],
    ] {
        let o = errand(&d.path, &bad);
        assert_eq!(o.status.code(), Some(2), "{bad:?}: {}", stderr(&o));
    }
}

/// `enqueue --batch`, `batch seal` with callbacks, `batch show`; a sealed
/// batch refuses more jobs.
#[test]
fn a_batch_is_filled_sealed_and_its_callback_runs_once() {
    let d = db();
    for id in ["m1", "m2"] {
        json(&errand(
            &d.path,
            &[
                "enqueue",
                "--kind",
                "resize",
                "--id",
                id,
                "--batch",
                "import-42",
                "--json",
            ],
        ));
    }
    let open = stdout(&errand(&d.path, &["batch", "show", "import-42"]));
    assert!(
        open.starts_with("batch import-42: 2 job(s) (ready 2), open"),
        "{open}"
    );
    let sealed = json(&errand(
        &d.path,
        &[
            "batch",
            "seal",
            "import-42",
            "--on-success",
            "notify",
            "--on-success-payload",
            r#"{"import":42}"#,
            "--on-finish",
            "cleanup",
            "--json",
        ],
    ));
    assert!(sealed["sealed_at"].is_string(), "{sealed}");
    assert_eq!(sealed["on_success_job"]["state"], "blocked");
    let late = errand(
        &d.path,
        &["enqueue", "--kind", "resize", "--batch", "import-42"],
    );
    assert_eq!(late.status.code(), Some(2), "{}", stderr(&late));
    assert!(stderr(&late).contains("is sealed"), "{}", stderr(&late));
    // Both jobs run; then each callback runs once.
    for _ in 0..2 {
        let r = json(&errand(
            &d.path,
            &["work", "--once", "--exec", "true", "--json"],
        ));
        assert_eq!(r["outcome"], "acknowledged", "{r}");
    }
    let mut kinds = Vec::new();
    for _ in 0..2 {
        let r = json(&errand(
            &d.path,
            &["work", "--once", "--exec", "true", "--json"],
        ));
        assert_eq!(r["outcome"], "acknowledged", "{r}");
        kinds.push(
            job(&d.path, r["job_id"].as_str().unwrap())["kind"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    kinds.sort();
    assert_eq!(kinds, ["cleanup", "notify"]);
    let idle = errand(&d.path, &["work", "--once", "--exec", "true", "--json"]);
    assert!(idle.status.success());
    let shown = stdout(&errand(&d.path, &["batch", "show", "import-42"]));
    assert!(shown.contains("(done 2), sealed at"), "{shown}");
    assert!(
        shown.contains("on_success: ") && shown.contains("state=done"),
        "{shown}"
    );
    let missing = errand(&d.path, &["batch", "show", "nope"]);
    assert_eq!(missing.status.code(), Some(3), "{}", stderr(&missing));
}

/// `errand stats --count` counts every queue whole first: a count past
/// `--cap` then shows exactly, marked counted (`*`), and stays so for the
/// next reads until the next count.
#[test]
fn stats_count_shows_counts_past_the_cap_exactly() {
    let d = db();
    for n in 0..8 {
        json(&errand(
            &d.path,
            &[
                "enqueue",
                "--kind",
                "k",
                "--id",
                &format!("c{n}"),
                "--queue",
                "mail",
                "--json",
            ],
        ));
    }
    let live = json(&errand(&d.path, &["stats", "--cap", "5", "--json"]));
    assert_eq!(live["queues"][0]["truncated"], serde_json::json!(["ready"]));
    let counted = json(&errand(
        &d.path,
        &["stats", "--cap", "5", "--count", "--json"],
    ));
    let mail = &counted["queues"][0];
    assert_eq!(mail["ready"], 8);
    assert_eq!(mail["counted"], serde_json::json!(["ready"]));
    assert_eq!(mail["truncated"], serde_json::json!([]));
    assert!(mail["counted_at"].is_string(), "{mail}");
    let text = stdout(&errand(&d.path, &["stats", "--cap", "5"]));
    assert!(
        text.lines()
            .any(|l| l.starts_with("mail") && l.contains("8*")),
        "{text}"
    );
    assert!(
        text.contains("*: past the cap of 5 rows, counted whole at"),
        "{text}"
    );
}
