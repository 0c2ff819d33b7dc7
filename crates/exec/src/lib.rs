//! A handler that runs an external command per job (`errand work --exec`).
//!
//! The command runs under `sh -c`, as the leader of a process group of its
//! own. It gets the job's payload on stdin and `ERRAND_JOB_ID`,
//! `ERRAND_ATTEMPT`, `ERRAND_KIND`, `ERRAND_QUEUE`, `ERRAND_DEADLINE` (the
//! job's deadline in RFC 3339, when it has one), `TRACEPARENT` (when the
//! job carries a W3C trace context), `ERRAND_WORKER_PID` (the process that
//! claimed the job), and `ERRAND_OUTPUT`, `ERRAND_OUTCOME` and
//! `ERRAND_CHILDREN` (below) in its environment.
//!
//! Results: the command may write its result, one JSON value, to the file
//! named by `ERRAND_OUTPUT`; on success (exit 0) it is recorded as the
//! job's output, where its dependents read it (at most 64 KiB; a larger or
//! malformed one fails the attempt permanently, saying why; no file or an
//! empty one records none). A job with dependencies also gets
//! `ERRAND_INPUTS`: a file holding one JSON object, keyed by dependency id
//! (in byte order), of each dependency's output (`null` for one that
//! recorded none), written as it is read from the store a page at a time
//! and capped ([`ExecHandler::max_inputs`], default 32 MiB: a fan-in past
//! it fails for good, saying so). A job that a signal released from its
//! wait (it was enqueued to wait for one, or an earlier attempt wrote
//! `{"await": …}` to its outcome file) gets `ERRAND_SIGNAL`: a file
//! holding one JSON object, `{"name": …, "payload": …, "sent_at": …}`
//! (`payload` is `null` when the signal carried none); a job whose wait
//! timed out under the `run` policy gets none. `ERRAND_CHILDREN` names a
//! file the command may write jobs to, one JSON object a line (each as
//! `POST /v1/jobs` takes one): on success they are added to the job's
//! workflow in the transaction that completes it, and the job's
//! dependents wait for them too; a line that cannot be used fails the
//! attempt for good, saying which, and nothing is stored; any other outcome
//! ignores the file. The files live in a directory of the
//! handler's own in the temporary directory, removed after the attempt;
//! what a killed worker left is removed by the next one (see
//! `files.rs`).
//!
//! Output: its stdout is the worker's stderr itself (the worker's own
//! stdout stays machine-readable; nothing passes through the worker's
//! memory). Its stderr is read as it comes and only the last few KB are
//! kept, so the worker's memory stays flat whatever the command prints; the
//! tail (up to 2,000 bytes) becomes the recorded error of a failure.
//!
//! Outcome: decided when the shell exits — exit 0 is success, exit 65 a
//! permanent failure, any other exit or a signal a retryable failure —
//! unless the command wrote an outcome to the file named by
//! `ERRAND_OUTCOME`, which then decides (cancel, snooze, wait for a signal,
//! retry at a time, a failure of a class; see `outcome.rs`). Exit 126 or 127, the
//! shell's "cannot execute" and "not found", is the worker's configuration
//! rather than the job's failure: the attempt is given back unspent (due
//! again after [`CANNOT_RUN_DELAY`]), the reason is logged and kept
//! ([`ExecHandler::cannot_run_reason`]) for the worker to stop on. With
//! [`ExecHandler::timeout`], an attempt still running after it is stopped
//! like a cancelled one and fails with class `timeout`.
//! Processes the command left running (a `cmd &` in the background) do not
//! keep the job running: once the shell has exited, whatever is left of its
//! process group gets SIGTERM, then SIGKILL when it is still there after
//! the stop grace ([`ExecHandler::stop_grace`], default 5 s). A group that
//! is already empty costs nothing; one that stops on SIGTERM delays the
//! settlement only until it is gone. Output still buffered in the stderr
//! pipe is then read for at most a quarter of a second (a process that left
//! the group on purpose, with `setsid`, can hold the pipe open; it is
//! neither waited for nor stopped).
//!
//! Cancel and lost lease: when this attempt's lease is lost (an operator
//! cancelled the running job, or the lease expired and another worker may
//! own the job — the next renewal is refused), the command's process group
//! gets SIGTERM at once, and SIGKILL when anything of it is still there
//! after the stop grace. The attempt's settlement is then refused by the
//! lease fence, as any late settlement is. An attempt abandoned outright (a
//! drain past its deadline, a per-kind deadline) kills the group with
//! SIGKILL at once.

use std::path::PathBuf;
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use async_trait::async_trait;
use errand_core::{Error, Outcome};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

mod children;
mod files;
mod outcome;
mod process;

use crate::files::{Exchange, Files, read_output};
use crate::process::{Group, Stderr, feed};
use errand::{Handler, JobContext};

pub use crate::files::DEFAULT_MAX_INPUTS;

/// Exit status meaning "permanent failure" (`EX_DATAERR`).
pub const EXIT_PERMANENT: i32 = 65;
/// Exit status conventionally meaning "try again later" (`EX_TEMPFAIL`).
pub const EXIT_TEMPFAIL: i32 = 75;
/// The shell's exit status for a command it found but cannot execute.
pub const EXIT_CANNOT_EXECUTE: i32 = 126;
/// The shell's exit status for a command it cannot find.
pub const EXIT_NOT_FOUND: i32 = 127;
/// How long a job whose command cannot be run waits before it is due
/// again (its attempt given back): long enough that a worker left running
/// with a broken command does not spin on it.
pub const CANNOT_RUN_DELAY: Duration = Duration::from_secs(30);
/// How long output left in the stderr pipe is still read once the
/// command's process group is gone.
const OUTPUT_DRAIN: Duration = Duration::from_millis(250);

/// Runs a shell command for each job.
#[derive(Clone, Debug)]
pub struct ExecHandler {
    command: String,
    stop_grace: Duration,
    timeout: Option<Duration>,
    max_inputs: u64,
    /// The directory of the attempts' files (shared by clones).
    files: Arc<Files>,
    /// Set once an attempt finds the command cannot be run.
    cannot_run: Arc<CannotRun>,
}

/// What the first attempt that found the command cannot be run said.
#[derive(Debug, Default)]
struct CannotRun {
    said: OnceLock<String>,
    found: CancellationToken,
}

impl CannotRun {
    fn say(&self, why: String) {
        let _ = self.said.set(why);
        self.found.cancel();
    }
}

impl ExecHandler {
    /// How long a command asked to stop by default gets before it is
    /// killed.
    pub const DEFAULT_STOP_GRACE: Duration = Duration::from_secs(5);

    /// A handler running `command` with `sh -c`.
    pub fn new(command: impl Into<String>) -> Self {
        ExecHandler {
            command: command.into(),
            stop_grace: Self::DEFAULT_STOP_GRACE,
            timeout: None,
            max_inputs: DEFAULT_MAX_INPUTS,
            files: Arc::default(),
            cannot_run: Arc::default(),
        }
    }

    /// The cap on a job's `$ERRAND_INPUTS` file (its dependencies' outputs,
    /// in bytes; default [`DEFAULT_MAX_INPUTS`]). A fan-in whose inputs
    /// pass it fails for good, saying so: they will not shrink.
    pub fn max_inputs(mut self, bytes: u64) -> Self {
        self.max_inputs = bytes;
        self
    }

    /// Makes the directory that holds the attempts' files now rather than
    /// at the first attempt — removing those that killed workers left
    /// behind — and returns its path. `errand work` calls it as it starts.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the temporary directory (`$TMPDIR`) cannot
    /// hold it.
    pub fn files_dir(&self) -> errand::Result<PathBuf> {
        self.files.dir().map_err(|e| {
            Error::invalid(format!(
                "cannot make a directory for the commands' files in {}: {e}; set TMPDIR to a \
                 writable directory",
                std::env::temp_dir().display()
            ))
        })
    }

    /// Why the command cannot be run, once an attempt found so (the shell
    /// exited 126 or 127): that attempt, like each such one, was given back
    /// without spending it, due again after [`CANNOT_RUN_DELAY`]. The
    /// worker should stop: the command will not run until its
    /// configuration is fixed. `errand work` stops (exit 2).
    pub fn cannot_run_reason(&self) -> Option<&str> {
        self.cannot_run.said.get().map(String::as_str)
    }

    /// Completes once an attempt finds the command cannot be run
    /// ([`ExecHandler::cannot_run_reason`]).
    pub async fn until_cannot_run(&self) {
        self.cannot_run.found.cancelled().await;
    }

    /// How long the command's process group has, after SIGTERM, before it
    /// gets SIGKILL: when the attempt's lease is lost (a cancel, or another
    /// worker owns the job), and for the processes the command left running
    /// when it exited. Default [`ExecHandler::DEFAULT_STOP_GRACE`]; zero
    /// sends SIGKILL right after SIGTERM.
    pub fn stop_grace(mut self, grace: Duration) -> Self {
        self.stop_grace = grace;
        self
    }

    /// Stops an attempt still running after `timeout` (SIGTERM to its
    /// process group, SIGKILL after the stop grace) and fails it with class
    /// `timeout`; `None` (the default) lets it run as long as its lease is
    /// renewed.
    pub fn timeout(mut self, timeout: Option<Duration>) -> Self {
        self.timeout = timeout;
        self
    }
}

/// How the command's run ended, before its outcome is decided.
struct Ended {
    status: std::io::Result<ExitStatus>,
    lease_lost: bool,
    timed_out: bool,
    /// The tail of its stderr.
    tail: String,
}

impl ExecHandler {
    /// The command for one attempt: `sh -c COMMAND` with the job's
    /// environment, leading a process group of its own.
    fn command(&self, ctx: &JobContext, exchange: &Exchange) -> Command {
        let mut command = Command::new("sh");
        command.env("ERRAND_OUTPUT", &exchange.output);
        command.env("ERRAND_OUTCOME", &exchange.outcome);
        command.env("ERRAND_CHILDREN", &exchange.children);
        command.env_remove("ERRAND_DEADLINE");
        if let Some(deadline) = ctx.job.deadline {
            command.env("ERRAND_DEADLINE", deadline.to_rfc3339());
        }
        command.env_remove("ERRAND_INPUTS");
        if let Some(inputs) = &exchange.inputs {
            command.env("ERRAND_INPUTS", inputs);
        }
        command.env_remove("ERRAND_SIGNAL");
        if let Some(signal) = &exchange.signal {
            command.env("ERRAND_SIGNAL", signal);
        }
        // The trace context travels as the W3C environment carrier does;
        // one inherited from this worker's own environment is not the job's.
        command.env_remove("TRACEPARENT");
        // With spans exported, the command's own spans belong under this
        // attempt's span; otherwise under the context the job carries.
        let attempt = errand::attempt_traceparent();
        if let Some(tp) = attempt.as_ref().or(ctx.traceparent()) {
            command.env("TRACEPARENT", tp.as_str());
        }
        command
            .arg("-c")
            .arg(&self.command)
            .env("ERRAND_JOB_ID", ctx.job.id.as_str())
            .env("ERRAND_ATTEMPT", ctx.attempt().to_string())
            .env("ERRAND_KIND", ctx.job.kind.as_str())
            .env("ERRAND_QUEUE", ctx.job.queue.as_str())
            .env("ERRAND_WORKER_PID", std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::from(std::io::stderr()))
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        command
    }

    /// Feeds the payload to the started command and watches it until the
    /// shell exits (stopping it on a timeout or a lost lease), then stops
    /// what it left in its group and reads the rest of its stderr.
    async fn supervise(&self, ctx: &JobContext, mut child: tokio::process::Child) -> Ended {
        let mut group = Group::new(child.id());
        let mut stderr = Stderr::new(child.stderr.take());
        let payload = ctx.job.payload.as_str().as_bytes().to_vec();
        let stdin = child.stdin.take();
        let (mut lease_lost, mut timed_out) = (false, false);
        let timeout = self.timeout;
        let status = {
            let mut feeding = pin!(feed(stdin, payload));
            let mut fed = false;
            let mut exited = pin!(child.wait());
            let mut expiry = pin!(async {
                match timeout {
                    Some(t) => tokio::time::sleep(t).await,
                    None => std::future::pending().await,
                }
            });
            loop {
                tokio::select! {
                    status = &mut exited => break status,
                    () = &mut feeding, if !fed => fed = true,
                    () = stderr.pump() => {}
                    () = &mut expiry, if !timed_out && !lease_lost => {
                        timed_out = true;
                        tracing::warn!(
                            job = %ctx.job.id,
                            attempt = ctx.attempt(),
                            timeout = ?timeout,
                            grace = ?self.stop_grace,
                            "stopping the command: it ran past its timeout (SIGTERM to its process group, SIGKILL after the grace)"
                        );
                        group.terminate(self.stop_grace);
                    }
                    () = ctx.lease_lost(), if !lease_lost => {
                        lease_lost = true;
                        tracing::warn!(
                            job = %ctx.job.id,
                            attempt = ctx.attempt(),
                            grace = ?self.stop_grace,
                            "stopping the command: this attempt's lease is lost (SIGTERM to its process group, SIGKILL after the grace)"
                        );
                        group.terminate(self.stop_grace);
                    }
                    () = group.grace_over() => group.kill(),
                }
            }
        };
        // The outcome is the shell's; what it left behind does not get to
        // hold the job.
        if group.has_rest() {
            tracing::info!(
                job = %ctx.job.id,
                attempt = ctx.attempt(),
                grace = ?self.stop_grace,
                "the command exited and left processes in its group; stopping them (SIGTERM, SIGKILL after the grace)"
            );
            group.stop_rest(self.stop_grace, &mut stderr).await;
        }
        group.disarm();
        stderr.drain(OUTPUT_DRAIN).await;
        Ended {
            status,
            lease_lost,
            timed_out,
            tail: stderr.text(),
        }
    }

    /// The attempt's outcome: a timeout, what the outcome file says, a
    /// command that cannot be run, or what the exit status says.
    async fn decide(&self, ctx: &JobContext, exchange: &Exchange, ended: Ended) -> Outcome {
        if ended.timed_out && !ended.lease_lost {
            return Outcome::timed_out(format!(
                "the command ran past its timeout of {}; its process group was stopped \
                 (SIGTERM, then SIGKILL after {})",
                humantime::format_duration(self.timeout.unwrap_or_default()),
                humantime::format_duration(self.stop_grace)
            ));
        }
        if ended.lease_lost {
            return outcome(ended.status, true, &ended.tail);
        }
        if let Some(said) =
            crate::outcome::read(&exchange.outcome, errand_core::Timestamp::now()).await
        {
            return said;
        }
        if let Ok(status) = &ended.status
            && let Some(code @ (EXIT_CANNOT_EXECUTE | EXIT_NOT_FOUND)) = status.code()
            && shell_refused_the_command(&self.command, &ended.tail)
        {
            return self.cannot_run(ctx, code, &ended.tail);
        }
        match outcome(ended.status, false, &ended.tail) {
            Outcome::Success => {
                with_children(ctx, exchange, read_output(&exchange.output).await).await
            }
            other => other,
        }
    }

    /// The shell could not run the command (status 126 or 127): logged,
    /// kept for [`ExecHandler::cannot_run_reason`] (the first reason), and
    /// the attempt given back unspent for [`CANNOT_RUN_DELAY`].
    fn cannot_run(&self, ctx: &JobContext, code: i32, tail: &str) -> Outcome {
        let meaning = if code == EXIT_NOT_FOUND {
            "command not found"
        } else {
            "command found but not executable"
        };
        let said = if tail.is_empty() {
            String::new()
        } else {
            format!(": {tail}")
        };
        let why = format!(
            "the command `{}` could not be run: the shell exited with status {code} ({meaning}{said}). \
             That is this worker's configuration, not a failure of job {}: its attempt was given \
             back unspent and it runs again in {}. Check the command: its path (relative to the \
             worker's directory), that it exists and that it is executable",
            self.command,
            ctx.job.id,
            humantime::format_duration(CANNOT_RUN_DELAY)
        );
        tracing::error!(
            job = %ctx.job.id,
            attempt = ctx.attempt(),
            status = code,
            "the command cannot be run ({meaning}); the attempt was given back unspent"
        );
        self.cannot_run.say(why);
        Outcome::Snooze {
            delay: CANNOT_RUN_DELAY,
        }
    }
}

#[async_trait]
impl Handler for ExecHandler {
    async fn handle(&self, ctx: JobContext) -> Outcome {
        let exchange = match Exchange::prepare(&ctx, &self.files, self.max_inputs).await {
            Ok(x) => x,
            Err(outcome) => return outcome,
        };
        let child = match self.command(&ctx, &exchange).spawn() {
            Ok(c) => c,
            Err(e) => return Outcome::retry(format!("cannot start `sh -c {}`: {e}", self.command)),
        };
        let ended = self.supervise(&ctx, child).await;
        self.decide(&ctx, &exchange, ended).await
    }
}

/// A success, with the children the command wrote to `$ERRAND_CHILDREN`
/// added to it; any other outcome as it is (no child is stored with it).
async fn with_children(ctx: &JobContext, exchange: &Exchange, said: Outcome) -> Outcome {
    if !matches!(said, Outcome::Success | Outcome::Output { .. }) {
        return said;
    }
    match children::read(&exchange.children).await {
        Ok(kids) => {
            if !kids.is_empty() {
                ctx.add_children(kids);
            }
            said
        }
        Err(refused) => refused,
    }
}

/// Whether the shell's complaint in `tail` is about the command itself —
/// its first word (after an `exec`), not found or not executable — rather
/// than about something the command ran in turn. Only the first is this
/// worker's configuration: a 126 or 127 from inside a script (a program
/// its job needs, a path built from the payload) is the job's failure like
/// any other status, so one job cannot stop every worker that takes it.
fn shell_refused_the_command(command: &str, tail: &str) -> bool {
    let mut words = command.split_whitespace();
    let first = match words.next() {
        Some("exec") => words.next(),
        other => other,
    };
    let Some(first) = first else {
        return false;
    };
    [
        "not found",
        "Permission denied",
        "cannot execute",
        "Is a directory",
    ]
    .iter()
    .any(|why| tail.contains(&format!("{first}: {why}")))
}

/// The job's outcome from how the shell ended and the tail of its stderr.
fn outcome(status: std::io::Result<ExitStatus>, lease_lost: bool, err_tail: &str) -> Outcome {
    let status = match status {
        Ok(s) => s,
        Err(e) => return Outcome::retry(format!("waiting for the command failed: {e}")),
    };
    let describe = |what: String| {
        if err_tail.is_empty() {
            what
        } else {
            err_tail.to_owned()
        }
    };
    if lease_lost {
        // The fence refuses this settlement; it says what happened.
        return Outcome::retry(
            "this attempt's lease was lost (the job was cancelled, or its lease expired and another worker may own it); the command was told to stop with SIGTERM",
        );
    }
    match status.code() {
        Some(0) => Outcome::Success,
        Some(EXIT_PERMANENT) => Outcome::permanent(describe(format!(
            "command exited with status {EXIT_PERMANENT} (permanent failure)"
        ))),
        Some(code) => Outcome::retry(describe(format!("command exited with status {code}"))),
        None => {
            use std::os::unix::process::ExitStatusExt;
            let sig = status.signal().unwrap_or(0);
            Outcome::retry(describe(format!("command was killed by signal {sig}")))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::shell_refused_the_command;

    #[test]
    fn only_the_shells_complaint_about_the_command_itself_counts() {
        let refused = |cmd: &str, tail: &str| shell_refused_the_command(cmd, tail);
        assert!(refused(
            "./send-email.sh",
            "sh: 1: ./send-email.sh: not found"
        ));
        assert!(refused("./x.sh --fast", "sh: 1: ./x.sh: Permission denied"));
        assert!(refused("exec ./x.sh", "sh: 1: exec: ./x.sh: not found"));
        assert!(!refused("./run.sh", "./run.sh: 3: convert: not found"));
        assert!(!refused(
            r#"exec "./handlers/$ERRAND_KIND""#,
            "sh: 1: exec: ./handlers/mail: not found"
        ));
        assert!(!refused("", "sh: 1: : not found"));
    }
}

/// The examples of this crate's README, compiled and run as doctests so
/// that the README stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
