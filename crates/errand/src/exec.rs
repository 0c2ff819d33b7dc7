//! A handler that runs an external command per job (`errand work --exec`).
//!
//! The command runs under `sh -c`, as the leader of a process group of its
//! own. It gets the job's payload on stdin and `ERRAND_JOB_ID`,
//! `ERRAND_ATTEMPT`, `ERRAND_KIND`, `ERRAND_QUEUE`, `ERRAND_DEADLINE` (the
//! job's deadline in RFC 3339, when it has one), `TRACEPARENT` (when the
//! job carries a W3C trace context), `ERRAND_WORKER_PID` (the process that
//! claimed the job), and `ERRAND_OUTPUT` and `ERRAND_OUTCOME` (below) in
//! its environment.
//!
//! Results: the command may write its result, one JSON value, to the file
//! named by `ERRAND_OUTPUT`; on success (exit 0) it is recorded as the
//! job's output, where its dependents read it (at most 64 KiB; a larger or
//! malformed one fails the attempt permanently, saying why; no file or an
//! empty one records none). A job with dependencies also gets
//! `ERRAND_INPUTS`: a file holding one JSON object, keyed by dependency id,
//! of each dependency's output (`null` for one that recorded none). Both
//! files live in the temporary directory and are removed after the attempt.
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
//! `ERRAND_OUTCOME`, which then decides (cancel, snooze, retry at a time, a
//! failure of a class; see `exec_outcome.rs`). With
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

use std::future::Future;
use std::pin::pin;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use errand_core::{MAX_OUTPUT_BYTES, Outcome, Payload};
use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdin, Command};
use tokio::time::Instant;

use crate::worker::{Handler, JobContext};

/// Exit status meaning "permanent failure" (`EX_DATAERR`).
pub const EXIT_PERMANENT: i32 = 65;
/// Exit status conventionally meaning "try again later" (`EX_TEMPFAIL`).
pub const EXIT_TEMPFAIL: i32 = 75;
/// At most this much of the command's stderr (its end) is recorded.
const STDERR_TAIL_BYTES: usize = 2000;
/// How much of the end of stderr is kept while it streams: more than the
/// recorded tail, so trailing blank lines trimmed off still leave a full one.
const STDERR_KEEP_BYTES: usize = 8 * 1024;
/// Bytes read from stderr at a time.
const READ_CHUNK: usize = 16 * 1024;
/// How long output left in the stderr pipe is still read once the
/// command's process group is gone.
const OUTPUT_DRAIN: Duration = Duration::from_millis(250);
/// How often a process group being stopped is looked at: first soon (most
/// processes end at SIGTERM at once), then less and less often (a look
/// reads `/proc`).
const GROUP_POLL_FIRST: Duration = Duration::from_millis(10);
const GROUP_POLL_MAX: Duration = Duration::from_millis(250);

/// Runs a shell command for each job.
#[derive(Clone, Debug)]
pub struct ExecHandler {
    command: String,
    stop_grace: Duration,
    timeout: Option<Duration>,
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
        }
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

/// The end of a stream: the last [`STDERR_KEEP_BYTES`] bytes, and whether
/// anything before them was dropped.
#[derive(Debug, Default)]
struct Tail {
    bytes: Vec<u8>,
    cut: bool,
}

impl Tail {
    fn push(&mut self, data: &[u8]) {
        if data.len() >= STDERR_KEEP_BYTES {
            self.cut |= !self.bytes.is_empty() || data.len() > STDERR_KEEP_BYTES;
            self.bytes.clear();
            self.bytes
                .extend_from_slice(&data[data.len() - STDERR_KEEP_BYTES..]);
            return;
        }
        self.bytes.extend_from_slice(data);
        if self.bytes.len() > STDERR_KEEP_BYTES {
            let excess = self.bytes.len() - STDERR_KEEP_BYTES;
            self.bytes.drain(..excess);
            self.cut = true;
        }
    }

    /// The recorded text: trimmed, at most [`STDERR_TAIL_BYTES`] bytes of
    /// the end, marked with a leading `…` when its start was cut.
    fn text(&self) -> String {
        let text = String::from_utf8_lossy(&self.bytes);
        let mut text = text.trim();
        let mut cut = self.cut;
        if cut {
            // The kept bytes may begin inside a character.
            text = text.trim_start_matches(char::REPLACEMENT_CHARACTER);
        }
        if text.len() > STDERR_TAIL_BYTES {
            let mut start = text.len() - STDERR_TAIL_BYTES;
            while !text.is_char_boundary(start) {
                start += 1;
            }
            text = &text[start..];
            cut = true;
        }
        if cut && !text.is_empty() {
            format!("…{text}")
        } else {
            text.to_owned()
        }
    }
}

/// Reads the next chunk of `stream` into `buf`; never completes once the
/// stream is gone (`None`).
async fn read_some<R: AsyncRead + Unpin>(
    stream: &mut Option<R>,
    buf: &mut [u8],
) -> std::io::Result<usize> {
    match stream {
        Some(s) => s.read(buf).await,
        None => std::future::pending().await,
    }
}

/// Writes the payload to the command's stdin and closes it.
async fn feed(stdin: Option<ChildStdin>, payload: Vec<u8>) {
    if let Some(mut stdin) = stdin {
        // A command that does not read its stdin closes the pipe early;
        // that is not a failure of the job.
        let _ = stdin.write_all(&payload).await;
        let _ = stdin.shutdown().await;
    }
}

/// The command's stderr, read into its tail.
struct Stderr {
    stream: Option<ChildStderr>,
    tail: Tail,
    buf: Vec<u8>,
}

impl Stderr {
    /// Reads one chunk (never completes once at the end).
    async fn pump(&mut self) {
        match read_some(&mut self.stream, &mut self.buf).await {
            Ok(0) | Err(_) => self.stream = None,
            Ok(n) => self.tail.push(&self.buf[..n]),
        }
    }

    /// Reads on while `until` runs; returns its output.
    async fn alongside<T>(&mut self, until: impl Future<Output = T>) -> T {
        let mut until = pin!(until);
        loop {
            tokio::select! {
                out = &mut until => return out,
                () = self.pump() => {}
            }
        }
    }
}

/// The command's process group. Dropped while armed (the attempt was
/// abandoned), it is killed.
struct Group {
    pgid: Option<Pid>,
    /// SIGTERM was sent; SIGKILL is due at this time (`None`: never, for a
    /// grace too long to represent).
    kill_at: Option<Option<Instant>>,
    killed: bool,
}

impl Group {
    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            // ESRCH: the group is gone already, which is what is wanted.
            let _ = killpg(pgid, signal);
        }
    }

    /// SIGTERM now, SIGKILL after `grace` (unless a stop is under way).
    fn terminate(&mut self, grace: Duration) {
        if self.kill_at.is_none() {
            self.signal(Signal::SIGTERM);
            self.kill_at = Some(Instant::now().checked_add(grace));
        }
    }

    fn kill(&mut self) {
        if !self.killed {
            self.signal(Signal::SIGKILL);
            self.killed = true;
        }
    }

    /// When SIGKILL is due, if it is still to be sent.
    fn kill_due(&self) -> Option<Instant> {
        match self.kill_at {
            Some(Some(at)) if !self.killed => Some(at),
            _ => None,
        }
    }

    /// Completes when SIGKILL is due (never when it is not).
    async fn grace_over(&self) {
        match self.kill_due() {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
    }

    /// Whether a process of the group is still running (a zombie nobody
    /// has reaped yet is not).
    fn alive(&self) -> bool {
        let Some(pgid) = self.pgid else {
            return false;
        };
        match killpg(pgid, None) {
            Err(Errno::ESRCH) => false,
            // Members exist; on Linux, look whether any is more than a
            // zombie (an init that does not reap would otherwise make every
            // group look alive until its grace is over).
            _ => live_member(pgid.as_raw()).unwrap_or(true),
        }
    }

    /// Whether [`Group::stop_rest`] has anything to do.
    fn has_rest(&self) -> bool {
        !self.killed && self.alive()
    }

    /// Stops what is left of the group: SIGTERM (unless sent already),
    /// SIGKILL when anything of it is still there after the grace; returns
    /// once it is gone or killed. Reads stderr meanwhile, so no process is
    /// held up writing to a full pipe.
    async fn stop_rest(&mut self, grace: Duration, stderr: &mut Stderr) {
        self.terminate(grace);
        let mut poll = GROUP_POLL_FIRST;
        loop {
            let now = Instant::now();
            if self.kill_due().is_some_and(|at| now >= at) {
                self.kill();
            }
            if self.killed || !self.alive() {
                return;
            }
            // Never sleep past the SIGKILL.
            let wake = match self.kill_due() {
                Some(at) => at.min(now + poll),
                None => now + poll,
            };
            stderr.alongside(tokio::time::sleep_until(wake)).await;
            poll = (poll * 2).min(GROUP_POLL_MAX);
        }
    }

    fn disarm(&mut self) {
        self.pgid = None;
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal(Signal::SIGKILL);
    }
}

/// Whether a process of group `pgid` that is not a zombie exists, from
/// `/proc`; `None` where `/proc` cannot be read.
fn live_member(pgid: i32) -> Option<bool> {
    let entries = std::fs::read_dir("/proc").ok()?;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .filter(|n| n.bytes().all(|b| b.is_ascii_digit()))
        else {
            continue;
        };
        // A process that ended meanwhile has no stat any more.
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // "pid (comm) state ppid pgrp …"; comm may hold spaces and parens.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|p| p.parse::<i32>().ok());
        if pgrp == Some(pgid) && !matches!(state, Some("Z" | "X")) {
            return Some(true);
        }
    }
    Some(false)
}

/// The files one attempt exchanges with its command, removed when the
/// attempt is over.
struct Exchange {
    output: PathBuf,
    outcome: PathBuf,
    inputs: Option<PathBuf>,
}

impl Exchange {
    /// Names the output file and, for a job with dependencies, writes the
    /// inputs file.
    async fn prepare(ctx: &JobContext) -> Result<Self, Outcome> {
        let dir = std::env::temp_dir();
        // The lease token is random and new per attempt: a name no other
        // attempt uses (kept to letters and digits, whatever it holds).
        let token: String = ctx
            .lease
            .token
            .as_str()
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .take(64)
            .collect();
        let stem = format!("errand-{}-{token}", std::process::id());
        let mut exchange = Exchange {
            output: dir.join(format!("{stem}-output.json")),
            outcome: dir.join(format!("{stem}-outcome.json")),
            inputs: None,
        };
        if ctx.job.on_dependency_failure.is_some() {
            let outputs = ctx.dependency_outputs().await.map_err(|e| {
                Outcome::retry(format!(
                    "cannot read the outputs of the job's dependencies: {e}"
                ))
            })?;
            let by_id: BTreeMap<String, Option<Payload>> = outputs
                .into_iter()
                .map(|(id, output)| (id.to_string(), output))
                .collect();
            let text = serde_json::to_vec(&by_id).map_err(|e| {
                Outcome::retry(format!("cannot encode the dependencies' outputs: {e}"))
            })?;
            let path = dir.join(format!("{stem}-inputs.json"));
            // Readable by this user only: the outputs are the jobs' data.
            let written = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .await;
            let cannot = |e: std::io::Error| {
                Outcome::retry(format!(
                    "cannot write the dependencies' outputs to {}: {e}",
                    path.display()
                ))
            };
            let mut file = written.map_err(cannot)?;
            // Ours now: removed with the exchange whatever happens next.
            exchange.inputs = Some(path.clone());
            file.write_all(&text).await.map_err(cannot)?;
            file.flush().await.map_err(cannot)?;
        }
        Ok(exchange)
    }

    /// What a successful command recorded: nothing (no file, or only
    /// whitespace), its output, or a failure saying why it cannot be kept.
    async fn result(&self) -> Outcome {
        read_output(&self.output).await
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.output);
        let _ = std::fs::remove_file(&self.outcome);
        if let Some(inputs) = &self.inputs {
            let _ = std::fs::remove_file(inputs);
        }
    }
}

/// Reads the output a command left at `path` after it succeeded.
async fn read_output(path: &Path) -> Outcome {
    let refused = |why: String| {
        Outcome::permanent(format!(
            "the command succeeded but its output was refused: {why}; write one JSON value \
             of at most {MAX_OUTPUT_BYTES} bytes to $ERRAND_OUTPUT"
        ))
    };
    let cannot = |e: std::io::Error| {
        Outcome::retry(format!(
            "cannot read the command's output file {}: {e}",
            path.display()
        ))
    };
    // Room for surrounding whitespace, which is not kept; past it the file
    // is refused without being read further.
    let most = 2 * MAX_OUTPUT_BYTES as u64;
    match tokio::fs::metadata(path).await {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Outcome::Success,
        Err(e) => return cannot(e),
        // A pipe or a device is not an output (and could be endless).
        Ok(meta) if !meta.is_file() => {
            return refused("it is not a regular file".to_owned());
        }
        Ok(meta) if meta.len() > most => {
            return refused(format!("the file holds {} bytes", meta.len()));
        }
        Ok(_) => {}
    }
    let mut bytes = Vec::new();
    let read = async {
        let file = tokio::fs::File::open(path).await?;
        file.take(most + 1).read_to_end(&mut bytes).await
    };
    if let Err(e) = read.await {
        return cannot(e);
    }
    if bytes.len() as u64 > most {
        return refused(format!("the file holds more than {most} bytes"));
    }
    let Ok(text) = String::from_utf8(bytes) else {
        return refused("the file is not UTF-8 text".to_owned());
    };
    let text = text.trim();
    if text.is_empty() {
        return Outcome::Success;
    }
    match Payload::output(text) {
        Ok(output) => Outcome::Output { output },
        Err(errand_core::Error::Invalid(why)) => refused(why),
        Err(e) => refused(e.to_string()),
    }
}

#[async_trait]
impl Handler for ExecHandler {
    async fn handle(&self, ctx: JobContext) -> Outcome {
        let exchange = match Exchange::prepare(&ctx).await {
            Ok(x) => x,
            Err(outcome) => return outcome,
        };
        let mut command = Command::new("sh");
        command.env("ERRAND_OUTPUT", &exchange.output);
        command.env("ERRAND_OUTCOME", &exchange.outcome);
        command.env_remove("ERRAND_DEADLINE");
        if let Some(deadline) = ctx.job.deadline {
            command.env("ERRAND_DEADLINE", deadline.to_rfc3339());
        }
        command.env_remove("ERRAND_INPUTS");
        if let Some(inputs) = &exchange.inputs {
            command.env("ERRAND_INPUTS", inputs);
        }
        // The trace context travels as the W3C environment carrier does;
        // one inherited from this worker's own environment is not the job's.
        command.env_remove("TRACEPARENT");
        // With spans exported, the command's own spans belong under this
        // attempt's span; otherwise under the context the job carries.
        let attempt = crate::spans::current_traceparent();
        if let Some(tp) = attempt.as_ref().or(ctx.traceparent()) {
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
        // The shell leads a group of its own: its pid is the group's id.
        let mut group = Group {
            pgid: child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .map(Pid::from_raw),
            kill_at: None,
            killed: false,
        };
        let mut stderr = Stderr {
            stream: child.stderr.take(),
            tail: Tail::default(),
            buf: vec![0; READ_CHUNK],
        };
        let payload = ctx.job.payload.as_str().as_bytes().to_vec();
        let stdin = child.stdin.take();
        let mut lease_lost = false;
        let mut timed_out = false;
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
        let _ = tokio::time::timeout(OUTPUT_DRAIN, async {
            while stderr.stream.is_some() {
                stderr.pump().await;
            }
        })
        .await;
        if timed_out && !lease_lost {
            return Outcome::timed_out(format!(
                "the command ran past its timeout of {}; its process group was stopped \
                 (SIGTERM, then SIGKILL after {})",
                humantime::format_duration(timeout.unwrap_or_default()),
                humantime::format_duration(self.stop_grace)
            ));
        }
        if !lease_lost
            && let Some(said) =
                crate::exec_outcome::read(&exchange.outcome, errand_core::Timestamp::now()).await
        {
            return said;
        }
        match outcome(status, lease_lost, &stderr.tail.text()) {
            Outcome::Success => exchange.result().await,
            other => other,
        }
    }
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
    use super::*;

    fn tail_of(chunks: &[&[u8]]) -> String {
        let mut t = Tail::default();
        for c in chunks {
            t.push(c);
        }
        assert!(t.bytes.len() <= STDERR_KEEP_BYTES);
        t.text()
    }

    #[test]
    fn the_tail_keeps_the_end_of_long_output() {
        let long = "x".repeat(5000) + "the end";
        let t = tail_of(&[long.as_bytes()]);
        assert!(t.starts_with('…') && t.ends_with("the end"));
        assert_eq!(t.len(), STDERR_TAIL_BYTES + '…'.len_utf8());
        assert_eq!(tail_of(&[b"  short\n"]), "short");
        assert_eq!(tail_of(&[b"in ", b"two\n"]), "in two");
        assert_eq!(tail_of(&[]), "");
    }

    #[test]
    fn a_streamed_tail_stays_bounded_and_marks_its_cut() {
        // Many small chunks, one huge chunk, then blank lines: the kept
        // bytes never pass the bound and the end survives the trimming.
        let mut chunks: Vec<Vec<u8>> = (0..10_000)
            .map(|i| format!("line {i}\n").into_bytes())
            .collect();
        chunks.push(vec![b'y'; 3 * STDERR_KEEP_BYTES]);
        chunks.push(b"last words".to_vec());
        chunks.push(vec![b'\n'; 3000]);
        let refs: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        let t = tail_of(&refs);
        assert!(t.starts_with('…') && t.ends_with("ylast words"), "{t}");
        assert_eq!(t.len(), STDERR_TAIL_BYTES + '…'.len_utf8());
        // Exactly the kept size is not cut by the streaming; one byte more
        // is, whether it comes first or in the same chunk.
        let pushed = |chunks: &[&[u8]]| {
            let mut t = Tail::default();
            for c in chunks {
                t.push(c);
            }
            (t.bytes.len(), t.cut)
        };
        let z = [b'z'; STDERR_KEEP_BYTES];
        assert_eq!(pushed(&[&z]), (STDERR_KEEP_BYTES, false));
        assert_eq!(pushed(&[b"a", &z]), (STDERR_KEEP_BYTES, true));
        assert_eq!(
            pushed(&[&[b'z'; STDERR_KEEP_BYTES + 1]]),
            (STDERR_KEEP_BYTES, true)
        );
    }

    #[test]
    fn a_tail_cut_inside_a_character_does_not_start_with_garbage() {
        // "é" is two bytes, each at an even offset. 17,001 bytes in all
        // keep the last 8,192 from offset 8,809: inside an "é". Trailing
        // blanks leave less than the recorded tail, so the cut shows.
        let text = "é".repeat(5000);
        let blanks = " ".repeat(7001);
        let t = tail_of(&[text.as_bytes(), blanks.as_bytes()]);
        assert!(!t.contains(char::REPLACEMENT_CHARACTER), "{t}");
        assert_eq!(t, format!("…{}", "é".repeat(595)));
    }
}
