#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What `errand work --exec` does with the processes and the output of its
//! command, with real worker processes and real signals: a flood of output
//! does not grow the worker, the job's outcome is decided when the command
//! exits (whatever it left running is stopped), and a cancelled job's
//! command is stopped — SIGTERM to its process group, SIGKILL after the
//! grace. On SQLite and — when `ERRAND_TEST_POSTGRES_URL` is set — on
//! PostgreSQL where the store takes part.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;

use common::{Backend, both};

impl Backend {
    fn enqueue(&self, id: &str) {
        self.ok(&["enqueue", "--kind", "exec", "--id", id, "--json"]);
    }

    fn job(&self, id: &str) -> Value {
        self.ok(&["show", id, "--json"])
    }

    /// A worker with `args` after `work --json`; its stdout (the reports)
    /// is piped, its stderr (where the command's stdout goes) discarded.
    fn worker(&self, args: &[&str]) -> Worker {
        let child = self
            .command(&["work", "--poll", "50ms", "--json"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn worker");
        Worker(Some(child))
    }

    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// A worker process, killed if the test fails before it exits.
struct Worker(Option<Child>);

impl Worker {
    fn signal(&self, sig: &str) {
        let pid = self.0.as_ref().unwrap().id().to_string();
        assert!(
            Command::new("kill")
                .args([sig, &pid])
                .status()
                .unwrap()
                .success()
        );
    }

    /// Waits (at most `bound`) for the worker to exit and returns its
    /// output; a worker still running then fails the test.
    fn exited_within(mut self, bound: Duration, what: &str) -> Output {
        let start = Instant::now();
        let child = self.0.as_mut().unwrap();
        while child.try_wait().unwrap().is_none() {
            assert!(
                start.elapsed() < bound,
                "the worker was still running {bound:?} later: {what}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        self.0.take().unwrap().wait_with_output().unwrap()
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn reports(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn wait_until(what: &str, bound: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < bound, "gave up waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether process `pid` still runs (a zombie nobody reaped yet does not).
fn alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().next());
            !matches!(state, Some("Z" | "X"))
        }
    }
}

fn pid_in(path: &Path) -> u32 {
    std::fs::read_to_string(path)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// Whether any live process has `pattern` in its command line (a zombie's
/// command line is empty).
fn running(pattern: &str) -> bool {
    let out = Command::new("pgrep")
        .args(["-f", pattern])
        .output()
        .unwrap();
    !out.stdout.is_empty()
}

#[test]
fn a_command_flooding_stderr_and_stdout_leaves_the_worker_memory_flat() {
    let b = Backend::sqlite();
    b.enqueue("flood");
    let hwm = b.file("hwm");
    // 300 MB to stderr (whose tail is kept), 300 MB to stdout (passed on to
    // the worker's stderr), then the worker's peak resident size as the
    // kernel recorded it, read while the job still runs.
    let cmd = format!(
        "head -c 300000000 /dev/zero | tr '\\0' e >&2; head -c 300000000 /dev/zero; \
         echo 'the last words' >&2; grep VmHWM /proc/$ERRAND_WORKER_PID/status > {}; exit 3",
        hwm.display()
    );
    let out = b
        .worker(&["--once", "--exec", &cmd])
        .exited_within(Duration::from_secs(300), "the flood");
    assert!(out.status.success());
    assert_eq!(reports(&out)[0]["outcome"], "retry_scheduled");
    let line = std::fs::read_to_string(&hwm).unwrap();
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {line:?}"));
    assert!(
        kb < 100 * 1024,
        "the worker's peak resident size was {kb} kB after 600 MB of output"
    );
    let error = b.job("flood")["last_error"].as_str().unwrap().to_owned();
    assert!(error.ends_with("the last words"), "{error:?}");
    assert!(error.starts_with('…'), "marked as cut: {:?}", &error[..20]);
    assert!(error.len() <= 2000 + '…'.len_utf8(), "{}", error.len());
}

#[test]
fn a_finished_command_decides_the_outcome_and_what_it_left_running_is_stopped() {
    let b = Backend::sqlite();
    b.enqueue("bg");
    let (plain, stubborn) = (b.file("plain.pid"), b.file("stubborn.pid"));
    // Two children outlive the shell and keep its stderr open: one that
    // SIGTERM stops and one that ignores SIGTERM.
    let cmd = format!(
        "sleep 1000 & echo $! > {}; (trap '' TERM; exec sleep 1000) & echo $! > {}; exit 0",
        plain.display(),
        stubborn.display()
    );
    let out = b
        .worker(&["--once", "--stop-grace", "1s", "--exec", &cmd])
        .exited_within(Duration::from_secs(60), "a job whose command exited 0");
    assert!(out.status.success());
    assert_eq!(reports(&out)[0]["outcome"], "acknowledged");
    let j = b.job("bg");
    assert_eq!(
        (j["state"].as_str(), j["attempts"].as_i64()),
        (Some("done"), Some(1))
    );
    for pid in [pid_in(&plain), pid_in(&stubborn)] {
        assert!(!alive(pid), "process {pid} outlived its job");
    }
}

#[test]
fn a_service_worker_settles_a_job_whose_command_left_a_child_once() {
    both("bg", |b| {
        b.enqueue("bg");
        let w = b.worker(&["--drain", "1s", "--exec", "sleep 1000.517 & exit 0"]);
        wait_until("the job to be done", Duration::from_secs(30), || {
            b.job("bg")["state"] == "done"
        });
        w.signal("-TERM");
        let out = w.exited_within(Duration::from_secs(30), "a drain with nothing running");
        assert!(out.status.success());
        let outcomes: Vec<Value> = reports(&out).iter().map(|r| r["outcome"].clone()).collect();
        assert_eq!(outcomes, vec!["acknowledged"], "one run, settled once");
        let j = b.job("bg");
        assert_eq!(
            (j["state"].as_str(), j["attempts"].as_i64()),
            (Some("done"), Some(1))
        );
        assert!(
            !running("sleep 1000.517"),
            "the background child was stopped"
        );
    });
}

/// `errand cancel` of a running job: the next heartbeat is refused, the
/// worker sends SIGTERM to the command's process group; the command's trap
/// records it and exits, its background `sleep` goes too, and the effect it
/// would have written later never appears.
#[test]
fn cancelling_a_running_job_stops_its_command_with_sigterm() {
    both("cancel", |b| {
        b.enqueue("cancel-me");
        let (started, got, effect) = (b.file("started"), b.file("got"), b.file("effect"));
        let cmd = format!(
            "trap 'echo TERM >> {got}; exit 143' TERM; echo up > {started}; \
             sleep 4.0711 & wait $!; touch {effect}",
            got = got.display(),
            started = started.display(),
            effect = effect.display()
        );
        let w = b.worker(&[
            "--once",
            "--lease",
            "1500ms",
            "--stop-grace",
            "3s",
            "--exec",
            &cmd,
        ]);
        wait_until("the command to start", Duration::from_secs(30), || {
            started.exists()
        });
        let start = Instant::now();
        b.ok(&["cancel", "cancel-me", "--by", "ops", "--json"]);
        let out = w.exited_within(Duration::from_secs(30), "a cancelled job");
        assert!(out.status.success());
        assert_eq!(
            reports(&out)[0]["outcome"],
            "lease_lost",
            "its settlement is refused"
        );
        assert_eq!(std::fs::read_to_string(&got).unwrap_or_default(), "TERM\n");
        assert!(!running("sleep 4.0711"), "the command's child was stopped");
        // Past the time the command would have written its effect.
        std::thread::sleep(Duration::from_secs(5).saturating_sub(start.elapsed()));
        assert!(!effect.exists(), "the cancelled command wrote its effect");
        assert_eq!(b.job("cancel-me")["state"], "cancelled");
    });
}

/// A command that traps SIGTERM and carries on is killed once the grace
/// has passed.
#[test]
fn a_cancelled_command_that_ignores_sigterm_is_killed_after_the_grace() {
    let b = Backend::sqlite();
    b.enqueue("stubborn");
    let (started, got, effect) = (b.file("started"), b.file("got"), b.file("effect"));
    let cmd = format!(
        "trap 'echo TERM >> {got}' TERM; echo up > {started}; \
         i=0; while [ $i -lt 40 ]; do sleep 0.1; i=$((i+1)); done; touch {effect}",
        got = got.display(),
        started = started.display(),
        effect = effect.display()
    );
    let w = b.worker(&[
        "--once",
        "--lease",
        "1500ms",
        "--stop-grace",
        "1s",
        "--exec",
        &cmd,
    ]);
    wait_until("the command to start", Duration::from_secs(30), || {
        started.exists()
    });
    let start = Instant::now();
    b.ok(&["cancel", "stubborn", "--by", "ops", "--json"]);
    let out = w.exited_within(Duration::from_secs(30), "a cancelled job");
    assert!(out.status.success());
    assert_eq!(reports(&out)[0]["outcome"], "lease_lost");
    assert_eq!(
        std::fs::read_to_string(&got).unwrap_or_default(),
        "TERM\n",
        "it was asked first"
    );
    std::thread::sleep(Duration::from_secs(6).saturating_sub(start.elapsed()));
    assert!(!effect.exists(), "the command ran on after the grace");
    assert_eq!(b.job("stubborn")["state"], "cancelled");
}
