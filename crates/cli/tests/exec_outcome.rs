#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The richer `--exec` protocol as a command meets it: the outcome file
//! (`$ERRAND_OUTCOME`), `--timeout`, and the attempt, deadline and trace
//! context in the environment — run through the shell and Python examples
//! that docs/cli.md shows (which must show them as they are).

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

mod common;

use common::Backend;

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn example(name: &str) -> PathBuf {
    repo().join("examples/exec").join(name)
}

impl Backend {
    fn enqueue_payload(&self, id: &str, payload: &str, extra: &[&str]) {
        let mut args = vec![
            "enqueue",
            "--kind",
            "call",
            "--id",
            id,
            "--payload",
            payload,
        ];
        args.extend_from_slice(extra);
        args.push("--json");
        self.ok(&args);
    }

    fn work_once(&self, exec: &str, extra: &[&str]) -> Value {
        let mut args = vec!["work", "--once", "--json", "--exec", exec];
        args.extend_from_slice(extra);
        self.ok(&args)
    }

    fn show(&self, id: &str) -> Value {
        self.ok(&["show", id, "--json"])
    }
}

const TRACE: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// Each example says each outcome through the file; the job ends as it
/// said.
fn run_example(exec: &str) {
    let b = Backend::sqlite();
    b.enqueue_payload("ok", r#"{"status":"fine"}"#, &["--traceparent", TRACE]);
    b.enqueue_payload("withdrawn", r#"{"status":"withdrawn"}"#, &[]);
    b.enqueue_payload("busy", r#"{"status":"busy"}"#, &[]);
    b.enqueue_payload("closed", r#"{"status":"closed"}"#, &[]);
    b.enqueue_payload("unknown", r#"{"status":"unknown"}"#, &[]);
    let mut outcomes = std::collections::BTreeMap::new();
    let before = errand::core::Timestamp::now();
    for _ in 0..5 {
        let r = b.work_once(exec, &[]);
        outcomes.insert(
            r["job_id"].as_str().unwrap().to_owned(),
            r["outcome"].as_str().unwrap().to_owned(),
        );
    }
    let want: std::collections::BTreeMap<String, String> = [
        ("ok", "acknowledged"),
        ("withdrawn", "cancelled"),
        ("busy", "retry_scheduled"),
        ("closed", "snoozed"),
        ("unknown", "dead"),
    ]
    .iter()
    .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
    .collect();
    assert_eq!(outcomes, want, "{exec}");
    let after = errand::core::Timestamp::now();

    let ok = b.show("ok");
    assert_eq!(ok["output"]["sent"], true, "{ok}");
    assert_eq!(ok["output"]["attempt"], 1);
    if exec.contains("python") {
        assert_eq!(
            ok["output"]["trace"], TRACE,
            "TRACEPARENT reaches the command"
        );
    }
    let w = b.show("withdrawn");
    assert_eq!(w["state"], "cancelled");
    assert_eq!(w["last_error"], "the order was withdrawn");
    let busy = b.show("busy");
    assert_eq!(
        (busy["state"].as_str(), busy["attempts"].as_u64()),
        (Some("ready"), Some(1))
    );
    assert_eq!(busy["last_error"], "provider busy (429)");
    let due =
        errand::core::Timestamp::parse_rfc3339(busy["available_at"].as_str().unwrap()).unwrap();
    let two_minutes = Duration::from_secs(120);
    assert!(
        due >= before.plus(two_minutes) && due <= after.plus(two_minutes),
        "due 2 minutes after its attempt: {due:?} not within {before:?}..{after:?} + 2m"
    );
    let closed = b.show("closed");
    assert_eq!(
        (closed["state"].as_str(), closed["attempts"].as_u64()),
        (Some("ready"), Some(0)),
        "a snooze spends no attempt"
    );
    let unknown = b.show("unknown");
    assert_eq!(
        (
            unknown["state"].as_str(),
            unknown["last_error_class"].as_str(),
            unknown["last_error"].as_str()
        ),
        (Some("dead"), Some("permanent"), Some("no such account"))
    );
}

#[test]
fn the_shell_example_says_each_outcome_through_the_file() {
    run_example(&format!("sh {}", example("provider.sh").display()));
}

#[test]
fn the_python_example_says_each_outcome_and_reads_the_deadline() {
    let python = std::process::Command::new("python3")
        .arg("--version")
        .output();
    assert!(
        python.is_ok_and(|o| o.status.success()),
        "python3 must be installed for the Python example (apt-get install python3)"
    );
    let exec = format!("python3 {}", example("provider.py").display());
    run_example(&exec);
    // A job past its deadline: the example reads $ERRAND_DEADLINE and
    // cancels it.
    let b = Backend::sqlite();
    b.enqueue_payload(
        "late",
        r#"{"status":"fine"}"#,
        &["--deadline", "2020-01-01T00:00:00Z"],
    );
    assert_eq!(b.work_once(&exec, &[])["outcome"], "cancelled");
    assert_eq!(
        b.show("late")["last_error"],
        "too late: the deadline 2020-01-01T00:00:00.000Z has passed"
    );
}

/// docs/cli.md shows both examples as they are in examples/exec.
#[test]
fn the_docs_show_the_examples_as_they_are() {
    let docs = std::fs::read_to_string(repo().join("docs/cli.md")).unwrap();
    for name in ["provider.sh", "provider.py"] {
        let code = std::fs::read_to_string(example(name)).unwrap();
        assert!(
            docs.contains(code.trim_end()),
            "docs/cli.md does not show examples/exec/{name} as it is"
        );
    }
}

/// An outcome file that cannot be used is a retryable failure saying why;
/// one holding an outcome decides whatever the exit status; none leaves it
/// to the exit status.
#[test]
fn the_outcome_file_decides_and_a_bad_one_says_why() {
    let b = Backend::sqlite();
    b.enqueue_payload("bad", "{}", &[]);
    let r = b.work_once(r#"echo 'snooze please' > "$ERRAND_OUTCOME""#, &[]);
    assert_eq!(r["outcome"], "retry_scheduled");
    let bad = b.show("bad");
    let error = bad["last_error"].as_str().unwrap();
    assert!(
        error.starts_with("the command's outcome file cannot be used: it is not a JSON object"),
        "{error}"
    );
    assert!(error.contains("$ERRAND_OUTCOME"), "{error}");

    b.enqueue_payload("over-exit", "{}", &[]);
    let r = b.work_once(
        r#"[ "$ERRAND_JOB_ID" = over-exit ] || exit 1; echo '{"snooze": "1m"}' > "$ERRAND_OUTCOME"; exit 3"#,
        &[],
    );
    assert_eq!(
        (r["job_id"].as_str(), r["outcome"].as_str()),
        (Some("over-exit"), Some("snoozed")),
        "the file wins over the exit status"
    );

    b.enqueue_payload("plain", "{}", &[]);
    let r = b.work_once(r#"[ "$ERRAND_JOB_ID" = plain ] || exit 1; exit 65"#, &[]);
    assert_eq!(r["outcome"], "dead", "no file: the exit status decides");
}

/// `--timeout` stops an attempt still running (its whole process group)
/// and fails it with class `timeout`.
#[test]
fn a_timeout_stops_the_command_and_fails_with_class_timeout() {
    let b = Backend::sqlite();
    b.enqueue_payload("slow", "{}", &[]);
    let pid_file = b.dir.join("child.pid");
    let exec = format!(
        "sh -c 'echo $$ > {}; exec sleep 300' & sleep 300",
        pid_file.display()
    );
    let r = b.work_once(&exec, &["--timeout", "1s", "--stop-grace", "1s"]);
    assert_eq!(r["outcome"], "retry_scheduled");
    let slow = b.show("slow");
    assert_eq!(slow["last_error_class"], "timeout");
    let error = slow["last_error"].as_str().unwrap();
    assert!(error.contains("ran past its timeout of 1s"), "{error}");
    // The worker settles only once the group is gone: the background
    // process is stopped already (gone, or a zombie not yet reaped).
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim()));
    let zombie = |s: &String| {
        s.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    };
    assert!(
        stat.as_ref().map_or(true, zombie),
        "the background process of the group was stopped too: {stat:?}"
    );
}
