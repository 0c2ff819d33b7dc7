#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The runnable examples in `examples/`, and the README's `errand` block,
//! run the way the README tells a user to run them (with this build's
//! `errand`), judged by their exit status, what they print and what they
//! leave behind. The two-host one
//! needs `ERRAND_TEST_POSTGRES_URL` and says SKIPPED without it; the
//! Python ones need python3 and say so when it is missing.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use errand_testsupport::KillOnDrop;

mod common;

use common::Backend;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `bash examples/<script>` with this build's errand as its argument, run
/// from the repository's root, with no errand settings from the
/// environment.
fn run_script(script: &str, env: &[(&str, &str)]) -> Output {
    // Bounded: `timeout` stops a hung script with SIGTERM, which its trap
    // turns into the same clean-up as a normal end.
    let out = Command::new("timeout")
        .args(["300", "bash"])
        .arg(repo().join("examples").join(script))
        .arg(env!("CARGO_BIN_EXE_errand"))
        .current_dir(repo())
        .envs(env.iter().copied())
        .env_remove("ERRAND_DB")
        .env_remove("ERRAND_SCHEMA")
        .env_remove("ERRAND_TOKEN")
        .env_remove("ERRAND")
        .output()
        .expect("run bash");
    assert!(
        out.status.success(),
        "{script} failed ({}):\n{}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn require_python() {
    let python = Command::new("python3").arg("--version").output();
    assert!(
        python.is_ok_and(|o| o.status.success()),
        "python3 must be installed for the Python worker example (apt-get install python3)"
    );
}

/// The number after `prefix` on the line that starts with it.
fn number_after(text: &str, prefix: &str) -> u32 {
    text.lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no line `{prefix} N` in:\n{text}"))
}

/// The README's `errand` block, read from the README and run line by line
/// in a scratch directory with this build's `errand` first on the `PATH`:
/// every command succeeds, the dead job is listed, the replayed one is sent
/// and its dependent released.
#[test]
fn the_readme_errand_block_runs_as_written() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("read README.md");
    let block = readme
        .split_once("## The `errand` command")
        .and_then(|(_, section)| section.split_once("```sh\n"))
        .and_then(|(_, rest)| rest.split_once("```"))
        .map(|(block, _)| block)
        .expect("the README's `errand` section and its sh block");
    let dir = tempfile::tempdir().expect("a scratch directory");
    let bin = Path::new(env!("CARGO_BIN_EXE_errand"))
        .parent()
        .expect("the binary's directory");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut printed = Vec::new();
    for line in block.lines().filter(|l| !l.trim().is_empty()) {
        let out = Command::new("bash")
            .args(["-c", line])
            .current_dir(dir.path())
            .env("PATH", &path)
            .env_remove("ERRAND_DB")
            .env_remove("ERRAND_SCHEMA")
            .output()
            .expect("run bash");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "`{line}` failed ({}):\n{stdout}{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        printed.push((line, stdout));
    }
    let (_, dead) = printed
        .iter()
        .find(|(line, _)| line.contains("jobs --state dead"))
        .expect("the block lists the dead jobs");
    assert!(dead.contains("order-17"), "{dead}");
    let sent = std::fs::read_to_string(dir.path().join("sent-order-17.json"))
        .expect("the replayed email was sent");
    assert_eq!(sent, r#"{"to":"a@example.com"}"#);
    let jobs = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["--db", "jobs.db", "jobs", "--json"])
        .current_dir(dir.path())
        .output()
        .expect("run errand");
    let jobs: serde_json::Value = serde_json::from_slice(&jobs.stdout).expect("JSON");
    let mut states: Vec<(&str, &str)> = jobs
        .as_array()
        .expect("a list")
        .iter()
        .map(|j| (j["id"].as_str().unwrap(), j["state"].as_str().unwrap()))
        .collect();
    states.sort_unstable();
    assert_eq!(states, [("invoice-17", "ready"), ("order-17", "done")]);
}

#[test]
fn two_hosts_share_the_jobs_and_each_runs_once() {
    let Some(url) = common::postgres_url() else {
        return;
    };
    let out = run_script(
        "two-hosts/run.sh",
        &[("DATABASE_URL", url.as_str()), ("JOBS", "30")],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("two-hosts: 30 jobs done, each ran exactly once"),
        "{stdout}"
    );
    let a = number_after(&stdout, "two-hosts:   host-a ran");
    let b = number_after(&stdout, "two-hosts:   host-b ran");
    assert_eq!(a + b, 30, "{stdout}");
    assert!(a > 0 && b > 0, "{stdout}");
    // It dropped the schema it made.
    let schema = stdout
        .lines()
        .find_map(|l| l.strip_prefix("two-hosts: schema "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("the script did not name its schema:\n{stdout}"));
    let left = Command::new("psql")
        .args([
            url.as_str(),
            "-X",
            "-A",
            "-t",
            "-c",
            &format!("SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'"),
        ])
        .output()
        .expect("run psql");
    assert_eq!(String::from_utf8_lossy(&left.stdout).trim(), "0");
}

#[test]
fn the_python_worker_example_settles_every_job_as_it_should() {
    require_python();
    let out = run_script("python-worker/run.sh", &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    for line in [
        "python-worker:   quick-1  done  after 1 attempt(s)",
        "python-worker:   slow     done  after 1 attempt(s)",
        "python-worker:   flaky    done  after 2 attempt(s)",
        "python-worker:   bad      dead  after 1 attempt(s)",
        "worker: job flaky attempt 1: failed: flaky on attempt 1 (retry_scheduled)",
        "worker: job slow attempt 1: heartbeat",
        "worker: idle: nothing due, exiting",
        "python-worker: ok (4 done at once, 1 done after a retry, 1 dead)",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "no line {line:?} in:\n{stdout}"
        );
    }
}

/// `--max-jobs` stops the worker after that many settlements, leaving the
/// rest for later; `--exit-when-idle` stops it once nothing is due.
#[test]
fn the_python_worker_stops_after_max_jobs_or_when_idle() {
    require_python();
    let b = Backend::sqlite();
    for id in ["a", "b", "c"] {
        b.ok(&["enqueue", "--kind", "email", "--id", id]);
    }
    let mut serve = KillOnDrop::new(
        b.command(&["serve", "--bind", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start errand serve"),
    );
    let mut stdout = BufReader::new(serve.child().stdout.take().expect("stdout"));
    let mut line = String::new();
    stdout.read_line(&mut line).expect("read stdout");
    let api = line
        .trim()
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("errand serve did not say where it listens: {line:?}"))
        .to_owned();
    let worker = |args: &[&str]| {
        let out = Command::new("python3")
            .arg(repo().join("examples/python-worker/worker.py"))
            .args(["--api", &api, "--wait", "1s"])
            .args(args)
            .env_remove("ERRAND_TOKEN")
            .output()
            .expect("run worker.py");
        assert!(
            out.status.success(),
            "worker.py {args:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let states = || -> Vec<String> {
        let jobs = b.ok(&["jobs", "--json"]);
        jobs.as_array()
            .unwrap()
            .iter()
            .map(|j| j["state"].as_str().unwrap().to_owned())
            .collect()
    };

    let first = worker(&["--max-jobs", "2"]);
    assert!(first.contains("worker: settled 2 attempt(s)"), "{first}");
    assert_eq!(states(), ["done", "done", "ready"]);

    let second = worker(&["--exit-when-idle"]);
    assert!(
        second.contains("worker: idle: nothing due, exiting"),
        "{second}"
    );
    assert!(second.contains("worker: settled 1 attempt(s)"), "{second}");
    assert_eq!(states(), ["done", "done", "done"]);
    // The job's output is what the handler returned.
    let shown = b.ok(&["show", "c", "--json"]);
    assert_eq!(
        shown["output"],
        serde_json::json!({"handled_by": "python", "attempt": 1}),
        "{shown}"
    );
}

/// The README's table names each example and the command that runs it.
#[test]
fn the_readme_lists_every_example_with_its_command() {
    let readme = std::fs::read_to_string(repo().join("README.md")).expect("README.md");
    let section = readme
        .split("\n## Examples\n")
        .nth(1)
        .expect("README.md has an `## Examples` section");
    let section = section.split("\n## ").next().unwrap_or(section);
    for (dir, command) in [
        ("examples/axum-sqlx", "cargo run -p axum-sqlx-example"),
        ("examples/two-hosts", "bash examples/two-hosts/run.sh"),
        (
            "examples/python-worker",
            "bash examples/python-worker/run.sh",
        ),
        (
            "examples/exec",
            "cargo test -p errand-cli --test exec_outcome",
        ),
    ] {
        assert!(
            repo().join(dir).is_dir(),
            "{dir} is in the table but not on disk"
        );
        let row = section
            .lines()
            .find(|l| l.starts_with('|') && l.contains(dir))
            .unwrap_or_else(|| panic!("no row for {dir} in README.md's Examples table"));
        assert!(
            row.contains(command),
            "the row of {dir} lacks `{command}`: {row}"
        );
    }
    // And nothing in examples/ is missing from it.
    for entry in std::fs::read_dir(repo().join("examples")).expect("examples/") {
        let name = entry.expect("entry").file_name();
        let dir = format!("examples/{}", name.to_string_lossy());
        assert!(
            section.contains(&dir),
            "{dir} is not in README.md's Examples table"
        );
    }
}
