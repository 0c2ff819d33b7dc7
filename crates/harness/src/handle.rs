//! `errand-harness handle --dir D`: the job handler every worker runs with
//! `errand work --exec`. It records the execution, performs an idempotent
//! effect keyed by the job id, and — for the poison kind — SIGKILLs the
//! worker that runs it.
//!
//! Log lines (one `write` each, O_APPEND, well under PIPE_BUF):
//! - `exec.log`: `start ID ATTEMPT WORKER_PID PID MS` and
//!   `end ID ATTEMPT WORKER_PID PID MS ok|fail`
//! - `effects.log`: `applied ID ATTEMPT MS` or `repeat ID ATTEMPT MS`
//! - `deaths.log`: `poison WORKER_PID MS` just before the poison kill
//!
//! A job whose payload says `"children": N` (signals plan) writes N
//! children to `$ERRAND_CHILDREN` before its effect; with
//! `"kill_adding": true` its first attempt then SIGKILLs its worker
//! (`adder WORKER_PID MS` in `deaths.log`) instead of finishing.
//!
//! A job whose payload says `"await": true` (signals plan) suspends
//! itself on its first run (`{"await": {"signal": "go"}}` to
//! `$ERRAND_OUTCOME`, its `end` line saying `suspend`); resumed, it logs
//! the signal it was given (`resumed ID ATTEMPT SIGNAL` in `exec.log`)
//! and works as any job.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use serde::Deserialize;

/// What a job's payload asks the handler to do.
#[derive(Debug, Default, Deserialize)]
pub struct Work {
    /// How long the handler works before its effect.
    #[serde(default)]
    pub ms: u64,
    /// The first `fail_first` attempts fail with EXIT_TEMPFAIL.
    #[serde(default)]
    pub fail_first: u32,
    /// A sink (`--fan-in`): how many dependencies' outputs it must read.
    #[serde(default)]
    pub expect: Option<usize>,
    /// Suspend until the signal `go` before working (signals plan).
    #[serde(default, rename = "await")]
    pub await_signal: bool,
    /// Add this many children (`ID.c0`, `ID.c1`, …) to the workflow with
    /// the completion (signals plan).
    #[serde(default)]
    pub children: u32,
    /// With `children`: on the first attempt, SIGKILL the worker right
    /// after writing them, before the completion.
    #[serde(default)]
    pub kill_adding: bool,
}

pub fn now_ms() -> i64 {
    errand::Timestamp::now().as_millis()
}

pub fn append(path: &Path, line: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .with_context(|| format!("open {}", path.display()))?;
    f.write_all(format!("{line}\n").as_bytes())
        .with_context(|| format!("append to {}", path.display()))?;
    Ok(())
}

fn parent_of(pid: i32) -> Option<(i32, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // pid (comm) state ppid ...; comm may contain spaces: split after the last ')'.
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_owned();
    let ppid = stat.get(close + 2..)?.split(' ').nth(1)?.parse().ok()?;
    Some((ppid, comm))
}

/// The `errand` process that claimed this job: `ERRAND_WORKER_PID`, or —
/// from an `errand` that does not set it — the `errand` ancestor (the
/// parent, or the parent's parent when `sh -c` did not exec), which is
/// gone when the worker was killed before the handler looked.
fn worker_pid() -> i32 {
    if let Some(pid) = std::env::var("ERRAND_WORKER_PID")
        .ok()
        .and_then(|p| p.parse().ok())
    {
        return pid;
    }
    let mut pid = std::process::id() as i32;
    for _ in 0..4 {
        let Some((ppid, _)) = parent_of(pid) else {
            return 0;
        };
        // The kernel keeps 15 bytes of a name: `errand-crashable` is
        // `errand-crashabl`.
        if let Some((_, comm)) = parent_of(ppid)
            && (comm == "errand" || comm == "errand-crashabl")
        {
            return ppid;
        }
        pid = ppid;
    }
    0
}

fn env(name: &str) -> Result<String> {
    std::env::var(name)
        .with_context(|| format!("{name} is not set: run under `errand work --exec`"))
}

/// Runs one job; the returned code is the process's exit status.
pub fn handle(dir: &Path) -> Result<i32> {
    let id = env("ERRAND_JOB_ID")?;
    let attempt: u32 = env("ERRAND_ATTEMPT")?.parse().context("ERRAND_ATTEMPT")?;
    let kind = env("ERRAND_KIND")?;
    let mut input = String::new();
    std::io::stdin()
        .read_to_string(&mut input)
        .context("read the payload")?;
    let work: Work = serde_json::from_str(&input).unwrap_or_default();
    let worker = worker_pid();
    let me = std::process::id();
    append(
        &dir.join("exec.log"),
        &format!("start {id} {attempt} {worker} {me} {}", now_ms()),
    )?;
    if kind == "poison" {
        if worker == 0 {
            bail!("the poison handler found no errand worker above it");
        }
        append(
            &dir.join("deaths.log"),
            &format!("poison {worker} {}", now_ms()),
        )?;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(worker),
            nix::sys::signal::Signal::SIGKILL,
        )
        .context("kill the worker")?;
        return Ok(1);
    }
    if work.await_signal && !resumed(dir, &id, attempt, worker, me)? {
        return Ok(0);
    }
    std::thread::sleep(std::time::Duration::from_millis(work.ms));
    if attempt <= work.fail_first {
        append(
            &dir.join("exec.log"),
            &format!("end {id} {attempt} {worker} {me} {} fail", now_ms()),
        )?;
        return Ok(errand_exec::EXIT_TEMPFAIL);
    }
    if work.children > 0 && killed_adding(dir, &id, attempt, worker, &work)? {
        return Ok(1);
    }
    if let Some(expect) = work.expect {
        // The sink reads its dependencies' outputs: each leaf recorded
        // {"job": its id}. Missing ones mean it ran too early or outputs
        // were lost: a permanent failure the check reports (the job dead).
        let seen = inputs_seen()?;
        append(
            &dir.join("exec.log"),
            &format!("inputs {id} {attempt} {seen} of {expect}"),
        )?;
        if seen != expect {
            eprintln!("the sink read {seen} of its {expect} dependencies' outputs");
            return Ok(errand_exec::EXIT_PERMANENT);
        }
    }
    // The idempotent effect: one file per job id, created at most once.
    let applied = match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join("effects").join(&id))
    {
        Ok(mut f) => {
            f.write_all(format!("{attempt} {me}\n").as_bytes())
                .context("write the effect")?;
            true
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => false,
        Err(e) => return Err(e).context("create the effect"),
    };
    let word = if applied { "applied" } else { "repeat" };
    append(
        &dir.join("effects.log"),
        &format!("{word} {id} {attempt} {}", now_ms()),
    )?;
    append(
        &dir.join("exec.log"),
        &format!("end {id} {attempt} {worker} {me} {} ok", now_ms()),
    )?;
    // The job's result, for the jobs that depend on it.
    if let Ok(path) = std::env::var("ERRAND_OUTPUT") {
        std::fs::write(&path, serde_json::json!({ "job": id }).to_string())
            .with_context(|| format!("write the output to {path}"))?;
    }
    Ok(0)
}

/// Writes the job's children (`ID.cN`, each a short `work` job) to
/// `$ERRAND_CHILDREN`; with `kill_adding`, on the first attempt, then
/// SIGKILLs the worker (`adder WORKER_PID MS` in `deaths.log`) and answers
/// `true`: the children must never exist from that attempt.
fn killed_adding(dir: &Path, id: &str, attempt: u32, worker: i32, work: &Work) -> Result<bool> {
    let path = env("ERRAND_CHILDREN")?;
    let lines: String = (0..work.children)
        .map(|n| {
            let child = serde_json::json!({
                "kind": "work",
                "id": format!("{id}.c{n}"),
                "payload": {"ms": 10 + 5 * u64::from(n)},
            });
            format!("{child}\n")
        })
        .collect();
    std::fs::write(&path, lines).with_context(|| format!("write the children to {path}"))?;
    if !(work.kill_adding && attempt == 1) {
        return Ok(false);
    }
    if worker == 0 {
        bail!("the adding handler found no errand worker above it");
    }
    append(
        &dir.join("deaths.log"),
        &format!("adder {worker} {}", now_ms()),
    )?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(worker),
        nix::sys::signal::Signal::SIGKILL,
    )
    .context("kill the worker")?;
    Ok(true)
}

/// A job that waits for the signal `go` (signals plan): resumed, it logs
/// the signal it was given and answers `true`; on its first run it
/// suspends itself (`{"await": …}` to `$ERRAND_OUTCOME`, its `end` line
/// saying `suspend`) and answers `false`.
fn resumed(dir: &Path, id: &str, attempt: u32, worker: i32, me: u32) -> Result<bool> {
    match std::env::var("ERRAND_SIGNAL") {
        Err(_) => {
            let outcome = env("ERRAND_OUTCOME")?;
            std::fs::write(&outcome, r#"{"await": {"signal": "go"}}"#)
                .with_context(|| format!("write the outcome to {outcome}"))?;
            append(
                &dir.join("exec.log"),
                &format!("end {id} {attempt} {worker} {me} {} suspend", now_ms()),
            )?;
            Ok(false)
        }
        Ok(path) => {
            let signal = std::fs::read_to_string(&path)
                .with_context(|| format!("read the signal at {path}"))?;
            append(
                &dir.join("exec.log"),
                &format!("resumed {id} {attempt} {}", signal.trim()),
            )?;
            Ok(true)
        }
    }
}

/// How many of the dependencies' outputs in `$ERRAND_INPUTS` name their
/// own job (each leaf records `{"job": its id}`).
fn inputs_seen() -> Result<usize> {
    let path = env("ERRAND_INPUTS")?;
    let text = std::fs::read_to_string(&path).with_context(|| format!("read {path}"))?;
    let inputs: std::collections::BTreeMap<String, serde_json::Value> =
        serde_json::from_str(&text).with_context(|| format!("parse {path}"))?;
    Ok(inputs
        .iter()
        .filter(|(id, output)| output.get("job").and_then(|j| j.as_str()) == Some(id.as_str()))
        .count())
}
