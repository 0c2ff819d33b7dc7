//! A handler that runs an external command per job (`errand work --exec`).
//!
//! The command runs under `sh -c`. It gets the job's payload on stdin and
//! `ERRAND_JOB_ID`, `ERRAND_ATTEMPT`, `ERRAND_KIND`, `ERRAND_QUEUE`,
//! `TRACEPARENT` (when the job carries a W3C trace context) and
//! `ERRAND_WORKER_PID` (the process that claimed the job) in its
//! environment; its stdout goes to the worker's stderr (so the worker's own
//! stdout stays machine-readable). Exit 0 is success, exit 65 a permanent
//! failure, any other exit or a signal a retryable failure; the tail of its
//! stderr becomes the recorded error.

use std::process::Stdio;

use async_trait::async_trait;
use errand_core::Outcome;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use crate::worker::{Handler, JobContext};

/// Exit status meaning "permanent failure" (`EX_DATAERR`).
pub const EXIT_PERMANENT: i32 = 65;
/// Exit status conventionally meaning "try again later" (`EX_TEMPFAIL`).
pub const EXIT_TEMPFAIL: i32 = 75;
const STDERR_TAIL_BYTES: usize = 2000;

/// Runs a shell command for each job.
#[derive(Clone, Debug)]
pub struct ExecHandler {
    command: String,
}

impl ExecHandler {
    /// A handler running `command` with `sh -c`.
    pub fn new(command: impl Into<String>) -> Self {
        ExecHandler {
            command: command.into(),
        }
    }
}

fn tail(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim();
    if text.len() <= STDERR_TAIL_BYTES {
        return text.to_owned();
    }
    let mut start = text.len() - STDERR_TAIL_BYTES;
    while !text.is_char_boundary(start) {
        start += 1;
    }
    format!("…{}", &text[start..])
}

#[async_trait]
impl Handler for ExecHandler {
    async fn handle(&self, ctx: JobContext) -> Outcome {
        let mut command = Command::new("sh");
        // The trace context travels as the W3C environment carrier does;
        // one inherited from this worker's own environment is not the job's.
        command.env_remove("TRACEPARENT");
        if let Some(tp) = ctx.traceparent() {
            command.env("TRACEPARENT", tp.as_str());
        }
        let mut child = match command
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
            .kill_on_drop(true)
            .spawn()
        {
            Ok(c) => c,
            Err(e) => return Outcome::retry(format!("cannot start `sh -c {}`: {e}", self.command)),
        };
        // If this attempt is abandoned (a drain past its deadline), stop the
        // command and everything it started, not only the shell.
        let mut group = GroupGuard(child.id().and_then(|id| i32::try_from(id).ok()));
        let payload = ctx.job.payload.as_str().as_bytes().to_vec();
        let stdin = child.stdin.take();
        let feed = async move {
            if let Some(mut stdin) = stdin {
                // A command that does not read its stdin closes the pipe
                // early; that is not a failure of the job.
                let _ = stdin.write_all(&payload).await;
                let _ = stdin.shutdown().await;
            }
        };
        let mut stderr = child.stderr.take();
        let collect = async move {
            let mut buf = Vec::new();
            if let Some(s) = stderr.as_mut() {
                let _ = s.read_to_end(&mut buf).await;
            }
            buf
        };
        let (_, err_bytes, status) = tokio::join!(feed, collect, child.wait());
        group.0 = None;
        let status = match status {
            Ok(s) => s,
            Err(e) => return Outcome::retry(format!("waiting for the command failed: {e}")),
        };
        let err_tail = tail(&err_bytes);
        let describe = |what: String| {
            if err_tail.is_empty() {
                what
            } else {
                err_tail.clone()
            }
        };
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
}

/// Kills a process group when dropped while armed.
struct GroupGuard(Option<i32>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            use nix::sys::signal::{Signal, killpg};
            use nix::unistd::Pid;
            let _ = killpg(Pid::from_raw(pgid), Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_end_of_long_output() {
        let long = "x".repeat(5000) + "the end";
        let t = tail(long.as_bytes());
        assert!(t.ends_with("the end"));
        assert!(t.len() <= STDERR_TAIL_BYTES + 3);
        assert_eq!(tail(b"  short\n"), "short");
    }
}
