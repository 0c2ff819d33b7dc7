//! The command of one `errand work --exec` attempt as a process: its
//! stdin fed, its stderr read into a bounded tail, and its process group
//! stopped (SIGTERM, SIGKILL after a grace) or killed when the attempt is
//! abandoned. The handler in `exec.rs` decides what the attempt means.

use std::future::Future;
use std::pin::pin;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::{ChildStderr, ChildStdin};
use tokio::time::Instant;

/// At most this much of the command's stderr (its end) is recorded.
const STDERR_TAIL_BYTES: usize = 2000;
/// How much of the end of stderr is kept while it streams: more than the
/// recorded tail, so trailing blank lines trimmed off still leave a full one.
const STDERR_KEEP_BYTES: usize = 8 * 1024;
/// Bytes read from stderr at a time.
const READ_CHUNK: usize = 16 * 1024;
/// How often a process group being stopped is looked at: first soon (most
/// processes end at SIGTERM at once), then less and less often (a look
/// reads `/proc`).
const GROUP_POLL_FIRST: Duration = Duration::from_millis(10);
const GROUP_POLL_MAX: Duration = Duration::from_millis(250);

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
pub(crate) async fn feed(stdin: Option<ChildStdin>, payload: Vec<u8>) {
    if let Some(mut stdin) = stdin {
        // A command that does not read its stdin closes the pipe early;
        // that is not a failure of the job.
        let _ = stdin.write_all(&payload).await;
        let _ = stdin.shutdown().await;
    }
}

/// The command's stderr, read into its tail.
pub(crate) struct Stderr {
    stream: Option<ChildStderr>,
    tail: Tail,
    buf: Vec<u8>,
}

impl Stderr {
    pub(crate) fn new(stream: Option<ChildStderr>) -> Self {
        Stderr {
            stream,
            tail: Tail::default(),
            buf: vec![0; READ_CHUNK],
        }
    }

    /// The recorded tail of what was read ([`Tail::text`]).
    pub(crate) fn text(&self) -> String {
        self.tail.text()
    }

    /// Reads what is left, for at most `limit` (a process that left the
    /// group on purpose may hold the pipe open).
    pub(crate) async fn drain(&mut self, limit: Duration) {
        let _ = tokio::time::timeout(limit, async {
            while self.stream.is_some() {
                self.pump().await;
            }
        })
        .await;
    }

    /// Reads one chunk (never completes once at the end).
    pub(crate) async fn pump(&mut self) {
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
pub(crate) struct Group {
    pgid: Option<Pid>,
    /// SIGTERM was sent; SIGKILL is due at this time (`None`: never, for a
    /// grace too long to represent).
    kill_at: Option<Option<Instant>>,
    killed: bool,
}

impl Group {
    /// The group the shell with process id `pid` leads (it leads a group of
    /// its own: its pid is the group's id).
    pub(crate) fn new(pid: Option<u32>) -> Self {
        Group {
            pgid: pid.and_then(|id| i32::try_from(id).ok()).map(Pid::from_raw),
            kill_at: None,
            killed: false,
        }
    }

    fn signal(&self, signal: Signal) {
        if let Some(pgid) = self.pgid {
            // ESRCH: the group is gone already, which is what is wanted.
            let _ = killpg(pgid, signal);
        }
    }

    /// SIGTERM now, SIGKILL after `grace` (unless a stop is under way).
    pub(crate) fn terminate(&mut self, grace: Duration) {
        if self.kill_at.is_none() {
            self.signal(Signal::SIGTERM);
            self.kill_at = Some(Instant::now().checked_add(grace));
        }
    }

    pub(crate) fn kill(&mut self) {
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
    pub(crate) async fn grace_over(&self) {
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
    pub(crate) fn has_rest(&self) -> bool {
        !self.killed && self.alive()
    }

    /// Stops what is left of the group: SIGTERM (unless sent already),
    /// SIGKILL when anything of it is still there after the grace; returns
    /// once it is gone or killed. Reads stderr meanwhile, so no process is
    /// held up writing to a full pipe.
    pub(crate) async fn stop_rest(&mut self, grace: Duration, stderr: &mut Stderr) {
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

    pub(crate) fn disarm(&mut self) {
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
