#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What `errand work --exec` promises around its command, with real worker
//! processes: the `$ERRAND_INPUTS` file of a fan-in (its content, and the
//! cap on its size), the per-attempt files a killed worker leaves (the next
//! worker removes them), a command that cannot be run (the attempt is given
//! back and the worker stops), what `errand work --help` says, and stored
//! text with control characters as the text printers show it.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::Duration;

use errand::{ClaimRequest, JobId, NewJob, Payload};
use serde_json::Value;

mod common;

use common::{Backend, both};

impl Backend {
    fn show(&self, id: &str) -> Value {
        self.ok(&["show", id, "--json"])
    }

    /// A directory of the test's own for the worker's `TMPDIR`.
    fn tmp(&self) -> PathBuf {
        let tmp = self.dir.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        tmp
    }

    /// `errand work --once --json --exec CMD EXTRA…` with `TMPDIR` set to
    /// `tmp`, run in the test's directory, to the end.
    fn work_once(&self, tmp: &Path, exec: &str, extra: &[&str]) -> Output {
        let mut args = vec!["work", "--once", "--json", "--exec", exec];
        args.extend_from_slice(extra);
        self.command(&args)
            .env("TMPDIR", tmp)
            .current_dir(&self.dir)
            .output()
            .unwrap()
    }

    /// Done jobs `ids`, each with `output` recorded, and a job `fan` that
    /// depends on all of them (named in the order given), through the
    /// library.
    fn fan_in(&self, ids: &[String], output: impl Fn(&str) -> Option<String>) {
        self.with_store(async |store| {
            let jobs: Vec<NewJob> = ids
                .iter()
                .map(|id| {
                    NewJob::new("step", Payload::from_json_text("{}").unwrap())
                        .unwrap()
                        .with_id(JobId::new(id.clone()).unwrap())
                })
                .collect();
            store.insert_many(jobs).await.unwrap();
            let req = ClaimRequest {
                queues: Vec::new(),
                limit: u32::try_from(ids.len()).unwrap(),
                lease: Duration::from_secs(600),
                rate: None,
                reclaim: true,
            };
            let claimed = store.claim(&req).await.unwrap();
            assert_eq!(claimed.len(), ids.len());
            for c in claimed {
                match output(c.job.id.as_str()) {
                    Some(text) => {
                        let out = Payload::output(&text).unwrap();
                        store.complete_with_output(&c.lease, &out).await.unwrap();
                    }
                    None => {
                        store.complete(&c.lease).await.unwrap();
                    }
                }
            }
            let mut fan = NewJob::new("fan", Payload::from_json_text("{}").unwrap())
                .unwrap()
                .with_id(JobId::new("fan").unwrap());
            for id in ids {
                fan = fan.depends_on(JobId::new(id.clone()).unwrap());
            }
            store.insert(fan).await.unwrap();
        });
    }
}

fn report(out: &Output) -> Value {
    assert!(
        out.status.success(),
        "the worker failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every file and directory under `dir`, as paths relative to it.
fn entries(dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let path = e.unwrap().path();
            found.push(path.strip_prefix(dir).unwrap().display().to_string());
            if path.is_dir() {
                todo.push(path);
            }
        }
    }
    found.sort();
    found
}

/// The inputs file holds one JSON object keyed by dependency id (in id
/// order, whatever order they were named in), each value that dependency's
/// output as it was recorded, `null` for one that recorded none.
#[test]
fn the_inputs_file_holds_each_dependencys_output_by_id() {
    let b = Backend::sqlite();
    let ids: Vec<String> = ["c-2", "a", "c-10", "b"].map(str::to_owned).to_vec();
    b.fan_in(&ids, |id| match id {
        "a" => Some(r#"{"rows":120,"note":"ünï"}"#.to_owned()),
        "b" => None,
        other => Some(format!("[\"{other}\"]")),
    });
    let tmp = b.tmp();
    let copy = b.dir.join("inputs.json");
    let out = b.work_once(
        &tmp,
        &format!("cat \"$ERRAND_INPUTS\" > {}", copy.display()),
        &[],
    );
    assert_eq!(report(&out)["outcome"], "acknowledged");
    assert_eq!(
        std::fs::read_to_string(&copy).unwrap(),
        r#"{"a":{"rows":120,"note":"ünï"},"b":null,"c-10":["c-10"],"c-2":["c-2"]}"#
    );
}

/// A fan-in whose dependencies' outputs come to more than the default cap
/// (32 MiB): 600 outputs of 60 KB. The attempt fails for good, saying what
/// was too big and what to do, and no inputs file is left.
#[test]
fn a_fan_in_whose_inputs_pass_the_default_cap_fails_for_good_saying_why() {
    let b = Backend::sqlite();
    let ids: Vec<String> = (0..600).map(|i| format!("step-{i:03}")).collect();
    let big = format!("\"{}\"", "x".repeat(60_000));
    b.fan_in(&ids, |_| Some(big.clone()));
    let tmp = b.tmp();
    let out = b.work_once(&tmp, "wc -c < \"$ERRAND_INPUTS\" >&2", &[]);
    assert_eq!(report(&out)["outcome"], "dead");
    let fan = b.show("fan");
    assert_eq!(fan["state"], "dead");
    assert_eq!(fan["last_error_class"], "permanent");
    let error = fan["last_error"].as_str().unwrap();
    assert!(
        error.contains("33554432 bytes") && error.contains("--max-inputs"),
        "{error}"
    );
    assert_eq!(entries(&tmp), Vec::<String>::new(), "no file is left");
}

/// `--max-inputs BYTES` sets the cap: the same small fan-in fails for good
/// under a cap one byte short of it and passes under one that holds it
/// exactly; a cap below 2 bytes (`{}`) is refused. On SQLite and, when it
/// is configured, PostgreSQL (whose paged read is its own statement).
#[test]
fn max_inputs_sets_the_cap() {
    both("maxinputs", |b| {
        let ids: Vec<String> = (0..10).map(|i| format!("s{i}")).collect();
        b.fan_in(&ids, |_| Some(format!("\"{}\"", "y".repeat(100))));
        let tmp = b.tmp();
        // Ten entries of `"sN":"y…"` (107 bytes each), 9 commas, 2 braces:
        // 1,081 bytes.
        let out = b.work_once(&tmp, "true", &["--max-inputs", "1080"]);
        assert_eq!(report(&out)["outcome"], "dead");
        let error = b.show("fan")["last_error"].as_str().unwrap().to_owned();
        assert!(
            error.contains("1080 bytes") && error.contains("--max-inputs"),
            "{error}"
        );
        b.ok(&["replay", "fan", "--by", "test", "--json"]);
        let copy = b.dir.join("inputs.json");
        let cmd = format!("cat \"$ERRAND_INPUTS\" > {}", copy.display());
        let out = b.work_once(&tmp, &cmd, &["--max-inputs", "1081"]);
        assert_eq!(report(&out)["outcome"], "acknowledged");
        assert_eq!(std::fs::metadata(&copy).unwrap().len(), 1081);
        let out = b.run(&["work", "--once", "--max-inputs", "1", "--exec", "true"]);
        assert_eq!(out.status.code(), Some(2), "a cap below 2 bytes is refused");
    });
}

/// A worker killed with SIGKILL while its command runs cannot remove the
/// attempt's files (the inputs hold the dependencies' outputs); the next
/// worker to start removes them, and leaves those of a live worker alone.
#[test]
fn files_a_killed_worker_left_are_removed_by_the_next_worker() {
    let b = Backend::sqlite();
    b.fan_in(&["dep".to_owned()], |_| Some(r#"{"secret":1}"#.to_owned()));
    let tmp = b.tmp();
    let (started, pid) = (b.dir.join("started"), b.dir.join("pid"));
    let cmd = format!(
        "echo $$ > {pid}; touch {started}; exec sleep 1000",
        pid = pid.display(),
        started = started.display()
    );
    let worker = b
        .command(&["work", "--once", "--exec", &cmd])
        .env("TMPDIR", &tmp)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut worker = errand_testsupport::KillOnDrop::new(worker);
    errand_testsupport::wait_until(
        "the command to start",
        Duration::from_secs(30),
        Duration::from_millis(20),
        || started.exists(),
    );
    worker.child().kill().unwrap();
    worker.child().wait().unwrap();
    // The orphaned command, by its pid.
    let orphan = std::fs::read_to_string(&pid).unwrap();
    let _ = std::process::Command::new("kill")
        .args(["-KILL", orphan.trim()])
        .status();
    let left = entries(&tmp);
    assert!(
        left.iter().any(|e| e.ends_with("inputs.json")),
        "the killed worker left its files: {left:?}"
    );
    // The next worker: nothing is due (the fan-in's lease has not expired).
    let out = b.work_once(&tmp, "true", &[]);
    assert_eq!(report(&out)["outcome"], "idle");
    assert_eq!(entries(&tmp), Vec::<String>::new(), "all removed");
}

/// A command the shell cannot find (exit 127) or cannot execute (126) is
/// the worker's misconfiguration, not the job's failure: the attempt is
/// given back unspent (the job is due again 30 s later), the worker says
/// so on stderr naming the command and the status, and exits 2 — with
/// `--once` and in service mode alike.
#[test]
fn a_missing_or_unexecutable_command_gives_the_attempt_back_and_stops_the_worker() {
    let b = Backend::sqlite();
    std::fs::write(b.dir.join("not-executable.sh"), "#!/bin/sh\nexit 0\n").unwrap();
    let tmp = b.tmp();
    let cases = [
        ("mail-1", "./send-email.sh", 127),
        ("mail-2", "./not-executable.sh", 126),
    ];
    for (id, cmd, status) in cases {
        b.ok(&["enqueue", "--kind", "email", "--id", id, "--json"]);
        let out = b.work_once(&tmp, cmd, &[]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{cmd}: {stderr}");
        let report: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["outcome"], "snoozed", "{cmd}");
        assert!(
            stderr.contains(&format!("`{cmd}`")) && stderr.contains(&format!("status {status}")),
            "{cmd}: {stderr}"
        );
        let job = b.show(id);
        assert_eq!(
            (job["state"].as_str(), job["attempts"].as_i64()),
            (Some("ready"), Some(0)),
            "{cmd}: no attempt is spent"
        );
        assert!(
            job["available_at"].as_str() > job["updated_at"].as_str(),
            "{cmd}: due later, not at once: {job}"
        );
    }
    // In service mode the worker stops on its own.
    b.ok(&["enqueue", "--kind", "email", "--id", "mail-3", "--json"]);
    let out = b
        .command(&["work", "--poll", "50ms", "--exec", "./send-email.sh"])
        .env("TMPDIR", &tmp)
        .current_dir(&b.dir)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("`./send-email.sh`"), "{stderr}");
    let job = b.show("mail-3");
    assert_eq!(
        (job["state"].as_str(), job["attempts"].as_i64()),
        (Some("ready"), Some(0))
    );

    // A 127 from deeper inside — a script whose own program is missing — is
    // that job's failure like any other status: an attempt spent, the
    // shell's message recorded, the worker carrying on.
    std::fs::write(
        b.dir.join("inner.sh"),
        "#!/bin/sh
no-such-tool-for-errand \"$@\"\n",
    )
    .unwrap();
    let mut perms = std::fs::metadata(b.dir.join("inner.sh"))
        .unwrap()
        .permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(b.dir.join("inner.sh"), perms).unwrap();
    b.ok(&["enqueue", "--kind", "email", "--id", "mail-4", "--json"]);
    // mail-1..3 are due later: mail-4 is the one taken.
    let out = b.work_once(&tmp, "./inner.sh", &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (report["job_id"].as_str(), report["outcome"].as_str()),
        (Some("mail-4"), Some("retry_scheduled")),
        "{report}"
    );
    let job = b.show("mail-4");
    assert_eq!(job["attempts"].as_i64(), Some(1));
    assert!(
        job["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("no-such-tool-for-errand: not found")),
        "{job}"
    );
}

/// `errand work --help` states the contract a command is written against.
#[test]
fn work_help_states_the_exit_codes_stdin_and_the_environment() {
    let b = Backend::sqlite();
    let out = b.run(&["work", "--help"]);
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "stdin",
        "success",
        "65",
        "75",
        "126",
        "127",
        "signal",
        "ERRAND_JOB_ID",
        "ERRAND_ATTEMPT",
        "ERRAND_KIND",
        "ERRAND_QUEUE",
        "ERRAND_INPUTS",
        "ERRAND_OUTCOME",
        "ERRAND_OUTPUT",
        "--max-inputs",
    ] {
        assert!(help.contains(needle), "the help lacks {needle:?}:\n{help}");
    }
    let delay = format!(
        "due again {} s later",
        errand_exec::CANNOT_RUN_DELAY.as_secs()
    );
    assert!(help.contains(&delay), "the help lacks {delay:?}:\n{help}");
}

/// Stored text is printed with its control characters escaped: a
/// command's stderr with a colour code in a job's last error, a raw C1
/// control character in a payload. The JSON output keeps the text as it is
/// (escaped by JSON itself).
#[test]
fn text_printers_escape_control_characters_in_stored_text() {
    let b = Backend::sqlite();
    let tmp = b.tmp();
    b.ok(&[
        "enqueue",
        "--kind",
        "paint",
        "--id",
        "paint-1",
        "--payload",
        "{\"a\":\"\u{9b}2J\"}",
        "--json",
    ]);
    let out = b.work_once(&tmp, "printf 'a\\033[31mred\\nline 2\\n' >&2; exit 1", &[]);
    assert_eq!(report(&out)["outcome"], "retry_scheduled");
    assert_eq!(
        b.show("paint-1")["last_error"],
        "a\u{1b}[31mred\nline 2",
        "stored as it came"
    );
    for args in [vec!["show", "paint-1"], vec!["jobs"]] {
        let out = b.run(&args);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{args:?} printed a control character: {text:?}"
        );
        assert!(
            text.contains("a\\u{1b}[31mred\\nline 2"),
            "{args:?}: {text}"
        );
        if args[0] == "show" {
            assert!(text.contains("{\"a\":\"\\u{9b}2J\"}"), "{text}");
        }
    }
    // A reason may hold line breaks; printed, it stays on its line.
    b.ok(&[
        "cancel",
        "paint-1",
        "--by",
        "ops",
        "--reason",
        "not wanted\nstate:        done",
        "--json",
    ]);
    b.ok(&["pause", "default", "--by", "ops", "--reason", "a\tb\nc"]);
    for (args, shown) in [
        (
            vec!["show", "paint-1"],
            "ops: not wanted\\nstate:        done",
        ),
        (vec!["audit"], "not wanted\\nstate:        done"),
        (vec!["queues"], "a\\tb\\nc"),
    ] {
        let out = b.run(&args);
        assert!(out.status.success());
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(shown), "{args:?}: {text}");
        assert!(
            !text.lines().any(|l| l.starts_with("state:        done")),
            "{args:?}: {text}"
        );
    }
}

/// A command that writes jobs to `$ERRAND_CHILDREN` and succeeds adds them
/// to its step's workflow with the step's completion: the join that
/// waited for the step waits for each of them too, and runs only after the
/// last. A line that cannot be used fails the step for good, naming the
/// line, and adds nothing. On SQLite and, when configured, PostgreSQL.
#[test]
fn a_command_adds_children_its_steps_dependents_wait_for() {
    both("children", |b| {
        let tmp = b.tmp();
        for args in [
            &[
                "enqueue",
                "--kind",
                "list",
                "--id",
                "list",
                "--workflow",
                "rep",
            ][..],
            &[
                "enqueue",
                "--kind",
                "join",
                "--id",
                "join",
                "--depends-on",
                "list",
            ],
            &[
                "enqueue",
                "--kind",
                "list",
                "--id",
                "bad-list",
                "--priority",
                "5",
                "--run-at",
                "2099-01-01T00:00:00Z",
            ],
        ] {
            let mut args = args.to_vec();
            args.push("--json");
            b.ok(&args);
        }
        let script = r#"printf '%s\n' '{"kind": "page", "id": "page-1", "payload": {"page": 1}}' '{"kind": "page", "id": "page-2", "depends_on": ["page-1"]}' > "$ERRAND_CHILDREN"; echo '{"pages": 2}' > "$ERRAND_OUTPUT""#;
        let out = b.work_once(&tmp, script, &[]);
        assert_eq!(report(&out)["outcome"], "acknowledged");
        assert_eq!(b.show("list")["state"], "done");
        let page1 = b.show("page-1");
        assert_eq!(
            (page1["state"].as_str(), page1["workflow"].as_str()),
            (Some("ready"), Some("rep"))
        );
        assert_eq!(page1["payload"], serde_json::json!({"page": 1}));
        assert_eq!(page1["added_by"], "list");
        assert_eq!(b.show("page-2")["state"], "blocked");
        let join = b.show("join");
        assert_eq!(
            (join["state"].as_str(), join["waiting_on"].as_i64()),
            (Some("blocked"), Some(2))
        );
        let deps: Vec<&str> = join["dependencies"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["id"].as_str().unwrap())
            .collect();
        assert_eq!(deps, ["list", "page-1", "page-2"]);
        for page in ["page-1", "page-2"] {
            assert_eq!(b.show("join")["state"], "blocked");
            let out = b.work_once(&tmp, "true", &[]);
            assert_eq!(report(&out)["job_id"], page);
        }
        assert_eq!(b.show("join")["state"], "ready");
        // A bad line: the step fails for good and adds nothing (bad-list's
        // priority puts it before the join).
        b.ok(&["reschedule", "bad-list", "--now", "--by", "test", "--json"]);
        let out = b.work_once(
            &tmp,
            r#"printf '%s\n' '{"kind": "page", "id": "page-9"}' '{"kind": "page", "colour": 1}' > "$ERRAND_CHILDREN""#,
            &[],
        );
        assert_eq!(report(&out)["outcome"], "dead");
        let bad = b.show("bad-list");
        let error = bad["last_error"].as_str().unwrap();
        assert!(
            error.contains("line 2") && error.contains("colour"),
            "{error}"
        );
        assert!(
            b.run(&["show", "page-9", "--json"]).status.code() == Some(3),
            "page-9 was not added"
        );
        assert_eq!(entries(&tmp), Vec::<String>::new(), "no file is left");
    });
}
