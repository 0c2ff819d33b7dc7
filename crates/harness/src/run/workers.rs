//! The worker processes: finding the `errand` command they run, spawning
//! them with their logs in the run directory, signalling them, killing them
//! all on drop, and telling from the handlers' log whether one is busy.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

pub(super) struct Slot {
    pub(super) child: Option<Child>,
    pub(super) killed: bool,
    pub(super) respawn_at: Option<Instant>,
    pub(super) paused_until: Option<Instant>,
}

/// Every worker process of the run; kills them all on drop (a panic, an
/// early error), so a failed run leaves nothing behind.
pub(super) struct Workers {
    pub(super) errand: PathBuf,
    pub(super) db_args: Vec<String>,
    pub(super) exec: String,
    pub(super) dir: PathBuf,
    pub(super) concurrency: u32,
    pub(super) lease_ms: u64,
    /// The clock plan's offset file (`ERRAND_CLOCK_OFFSET_FILE`).
    pub(super) clock_file: Option<PathBuf>,
    pub(super) slots: Vec<Slot>,
}

impl Workers {
    pub(super) fn spawn(&self, failpoints: Option<&str>) -> Result<Child> {
        // The file names need the pid: spawn into a temporary name, rename.
        let tmp_out = self
            .dir
            .join(format!("spawn-{}.out", rand::random::<u64>()));
        let tmp_err = tmp_out.with_extension("err");
        let out = std::fs::File::create(&tmp_out).context("create a worker's stdout file")?;
        let err = std::fs::File::create(&tmp_err).context("create a worker's stderr file")?;
        // A worker's `--exec` exchange files (outputs, inputs) go under the
        // run directory, which goes with the run: a worker killed mid-attempt
        // cannot remove its own.
        let scratch = self.dir.join("tmp");
        std::fs::create_dir_all(&scratch).context("create the workers' temporary directory")?;
        let child = Command::new(&self.errand)
            .args(&self.db_args)
            .args(["work", "--json", "--poll", "100ms", "--drain", "5s"])
            .args(["--retry-base", "100ms", "--retry-max", "500ms"])
            .args(["--concurrency", &self.concurrency.to_string()])
            .args(["--lease", &format!("{}ms", self.lease_ms)])
            .args(["--exec", &self.exec])
            .env("ERRAND_LOG", "warn")
            .env("TMPDIR", &scratch)
            .env("ERRAND_FAILPOINTS", failpoints.unwrap_or_default())
            .env(
                "ERRAND_CLOCK_OFFSET_FILE",
                self.clock_file.as_deref().unwrap_or(Path::new("")),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .with_context(|| format!("spawn {}", self.errand.display()))?;
        let pid = child.id();
        std::fs::rename(&tmp_out, self.dir.join(format!("worker-{pid}.out")))
            .context("rename a worker's stdout file")?;
        std::fs::rename(&tmp_err, self.dir.join(format!("worker-{pid}.err")))
            .context("rename a worker's stderr file")?;
        Ok(child)
    }

    pub(super) fn signal(&self, slot: usize, sig: Signal) -> Option<i32> {
        let child = self.slots.get(slot)?.child.as_ref()?;
        let pid = i32::try_from(child.id()).ok()?;
        kill(Pid::from_raw(pid), sig).ok()?;
        Some(pid)
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        for slot in &mut self.slots {
            if let Some(mut child) = slot.child.take() {
                if let Ok(pid) = i32::try_from(child.id()) {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
                }
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// The `errand` command the workers run: `errand-crashable` (the command
/// with the crash points and the steppable clock), next to this binary.
pub(super) fn locate_errand(given: Option<&PathBuf>) -> Result<PathBuf> {
    if let Some(p) = given {
        return Ok(p.clone());
    }
    let me = std::env::current_exe().context("locate this executable")?;
    // target/debug/errand-harness, or target/debug/deps/plans-… under tests.
    for dir in me.ancestors().skip(1).take(3) {
        let candidate = dir.join("errand-crashable");
        if candidate.is_file() {
            return Ok(candidate);
        }
    }
    bail!(
        "no `errand-crashable` binary next to {}: build it with `cargo build -p errand-harness` (`cargo test --workspace` builds it) or pass --errand PATH",
        me.display()
    )
}

pub(super) fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// Whether worker `pid` has a handler running (a `start` without its `end`
/// in the log's last 512 KiB: handlers are short, and big runs must not
/// re-read a log of millions of lines before every fault).
pub(super) fn in_flight(dir: &Path, pid: u32) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    const TAIL: u64 = 512 * 1024;
    let mut text = String::new();
    if let Ok(mut f) = std::fs::File::open(dir.join("exec.log")) {
        let len = f.metadata().map(|m| m.len()).unwrap_or(0);
        let _ = f.seek(SeekFrom::Start(len.saturating_sub(TAIL)));
        let mut bytes = Vec::new();
        let _ = f.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let pid = pid.to_string();
    let mut open: i64 = 0;
    // The first line of a tail may be cut: lines are matched by shape.
    for l in text.lines() {
        let mut w = l.split(' ');
        let word = w.next();
        if w.nth(2) != Some(pid.as_str()) {
            continue;
        }
        match word {
            Some("start") => open += 1,
            Some("end") => open -= 1,
            _ => {}
        }
    }
    open > 0
}
