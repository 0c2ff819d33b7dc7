//! The files one attempt of an [`crate::ExecHandler`] exchanges with its
//! command — `$ERRAND_OUTPUT`, `$ERRAND_OUTCOME`, `$ERRAND_CHILDREN` and,
//! for a job with dependencies, `$ERRAND_INPUTS` — and the directory that
//! holds them.
//!
//! Directory: each handler keeps its attempts' files in a directory of its
//! own in the temporary directory (`$TMPDIR`, else `/tmp`),
//! `errand-exec-PID-RANDOM`, open to the worker's user only. The handler
//! holds an advisory lock (`flock`) on it for as long as it lives; an
//! attempt's files are removed when the attempt ends, and the directory
//! when the handler is dropped. A worker killed outright (SIGKILL) removes
//! nothing, but its lock goes with it: the next handler to make its
//! directory removes every `errand-exec-*` directory of the same user whose
//! lock it can take, so what killed workers leave does not pile up, and a
//! live worker's directory is never touched. A directory is made under a
//! name of its own, locked, and only then renamed to `errand-exec-*`, so a
//! sweep never takes one that is being made.
//!
//! Inputs: the dependencies' outputs are written as they are read, a page
//! of [`INPUTS_PAGE`] at a time, so the worker never holds more than one
//! page; a file that would pass the handler's cap is not finished and the
//! attempt fails for good, saying why.

use std::fs::File;
use std::os::unix::fs::{DirBuilderExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use errand_core::{JobId, MAX_OUTPUT_BYTES, Outcome, Payload};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use errand::JobContext;

/// The default cap on an attempt's `$ERRAND_INPUTS` file: 32 MiB.
pub const DEFAULT_MAX_INPUTS: u64 = 32 * 1024 * 1024;
/// Dependency outputs read from the store at a time (each at most
/// [`MAX_OUTPUT_BYTES`], so a page holds at most 2 MiB of them).
const INPUTS_PAGE: u32 = 32;
/// The names of the handlers' directories.
const PREFIX: &str = "errand-exec-";
/// The name a directory has while it is being made.
const MAKING: &str = ".errand-exec-making-";

/// A handler's directory: locked while it lives, removed when dropped.
#[derive(Debug)]
pub(crate) struct Scratch {
    dir: PathBuf,
    /// Holds the lock (opened close-on-exec: no command inherits it).
    _lock: File,
}

impl Scratch {
    /// Makes a new directory in `parent` and removes those that handlers
    /// now gone left there.
    fn make(parent: &Path) -> std::io::Result<Scratch> {
        let id = format!("{}-{:016x}", std::process::id(), rand::random::<u64>());
        let making = parent.join(format!("{MAKING}{id}"));
        std::fs::DirBuilder::new().mode(0o700).create(&making)?;
        let locked = File::open(&making).and_then(|lock| {
            // Nobody else knows the new name: this does not wait.
            lock.lock()?;
            let dir = parent.join(format!("{PREFIX}{id}"));
            std::fs::rename(&making, &dir)?;
            Ok(Scratch { dir, _lock: lock })
        });
        let scratch = match locked {
            Ok(s) => s,
            Err(e) => {
                let _ = std::fs::remove_dir(&making);
                return Err(e);
            }
        };
        let uid = std::fs::metadata(&scratch.dir)?.uid();
        sweep(parent, uid);
        Ok(scratch)
    }

    /// A path in the directory.
    fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Removes each `errand-exec-*` directory in `parent` that belongs to user
/// `uid` and whose lock nobody holds (its handler is gone); returns how
/// many. A directory it cannot open or lock is left alone.
pub(crate) fn sweep(parent: &Path, uid: u32) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        if !entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(PREFIX))
        {
            continue;
        }
        let path = entry.path();
        // A directory of this user's own, not a link to one.
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() && meta.uid() == uid => {}
            _ => continue,
        }
        let Ok(dir) = File::open(&path) else {
            continue;
        };
        // Held: its handler lives. Taken: it is gone, and this sweep holds
        // the lock while it removes what is left.
        if dir.try_lock().is_ok() && std::fs::remove_dir_all(&path).is_ok() {
            tracing::info!(dir = %path.display(), "removed the files a worker that is gone left behind");
            removed += 1;
        }
    }
    removed
}

/// A handler's directory, made at its first use (shared by its clones).
#[derive(Debug, Default)]
pub(crate) struct Files(Mutex<Option<Arc<Scratch>>>);

impl Files {
    /// The directory, made now unless it exists (made again when something
    /// removed it, as a cleaner of old files in `/tmp` may).
    pub(crate) fn scratch(&self) -> std::io::Result<Arc<Scratch>> {
        let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(s) = slot.as_ref().filter(|s| s.dir.is_dir()) {
            return Ok(Arc::clone(s));
        }
        let made = Arc::new(Scratch::make(&std::env::temp_dir())?);
        *slot = Some(Arc::clone(&made));
        Ok(made)
    }

    /// The directory's path, made now (see [`Files::scratch`]).
    pub(crate) fn dir(&self) -> std::io::Result<PathBuf> {
        Ok(self.scratch()?.dir.clone())
    }
}

/// The files one attempt exchanges with its command, removed when the
/// attempt is over.
pub(crate) struct Exchange {
    pub(crate) output: PathBuf,
    pub(crate) outcome: PathBuf,
    /// Where the command may write the jobs it adds (`$ERRAND_CHILDREN`).
    pub(crate) children: PathBuf,
    pub(crate) inputs: Option<PathBuf>,
    /// The signal that ended the job's latest wait, for a job one did.
    pub(crate) signal: Option<PathBuf>,
    /// Keeps the directory while the attempt uses it.
    _scratch: Arc<Scratch>,
}

impl Exchange {
    /// Names the output and outcome files and, for a job with
    /// dependencies, writes the inputs file (at most `max_inputs` bytes).
    pub(crate) async fn prepare(
        ctx: &JobContext,
        files: &Files,
        max_inputs: u64,
    ) -> Result<Self, Outcome> {
        let scratch = files.scratch().map_err(|e| {
            Outcome::retry(format!(
                "cannot make a directory for the command's files in {}: {e}; set TMPDIR to a \
                 writable directory",
                std::env::temp_dir().display()
            ))
        })?;
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
        let mut exchange = Exchange {
            output: scratch.file(&format!("{token}-output.json")),
            outcome: scratch.file(&format!("{token}-outcome.json")),
            children: scratch.file(&format!("{token}-children.jsonl")),
            inputs: None,
            signal: None,
            _scratch: Arc::clone(&scratch),
        };
        if ctx.job.on_dependency_failure.is_some() {
            let path = scratch.file(&format!("{token}-inputs.json"));
            // Readable by this user only: the outputs are the jobs' data.
            let file = tokio::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .await
                .map_err(|e| cannot_write(&path, &e))?;
            // Ours now: removed with the exchange whatever happens next.
            exchange.inputs = Some(path.clone());
            write_inputs(ctx, file, &path, max_inputs).await?;
        }
        if let Some(signal) = ctx.signal().await.map_err(|e| {
            Outcome::retry(format!("cannot read the signal that resumed the job: {e}"))
        })? {
            let path = scratch.file(&format!("{token}-signal.json"));
            exchange.signal = Some(path.clone());
            write_signal(&signal, &path).await?;
        }
        Ok(exchange)
    }
}

impl Drop for Exchange {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.output);
        let _ = std::fs::remove_file(&self.outcome);
        let _ = std::fs::remove_file(&self.children);
        if let Some(inputs) = &self.inputs {
            let _ = std::fs::remove_file(inputs);
        }
        if let Some(signal) = &self.signal {
            let _ = std::fs::remove_file(signal);
        }
    }
}

/// Writes the signal as one JSON object — `name`, `payload` (`null` for
/// none) and `sent_at` — readable by this user only.
async fn write_signal(signal: &errand_core::ReceivedSignal, path: &Path) -> Result<(), Outcome> {
    let failed = |e: &dyn std::fmt::Display| {
        Outcome::retry(format!(
            "cannot write the signal to {}: {e}",
            path.display()
        ))
    };
    let text = serde_json::json!({
        "name": signal.name.as_str(),
        "payload": signal.payload,
        "sent_at": signal.sent_at.to_rfc3339(),
    })
    .to_string();
    let mut file = tokio::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .await
        .map_err(|e| failed(&e))?;
    file.write_all(text.as_bytes())
        .await
        .map_err(|e| failed(&e))?;
    file.flush().await.map_err(|e| failed(&e))
}

fn cannot_write(path: &Path, e: &std::io::Error) -> Outcome {
    Outcome::retry(format!(
        "cannot write the dependencies' outputs to {}: {e}",
        path.display()
    ))
}

/// Writes one JSON object to `file`, keyed by dependency id (in byte
/// order), each value that dependency's output (`null` for none), read and
/// written a page at a time; fails for good when it would pass `max` bytes.
async fn write_inputs(
    ctx: &JobContext,
    file: tokio::fs::File,
    path: &Path,
    max: u64,
) -> Result<(), Outcome> {
    let mut out = tokio::io::BufWriter::new(file);
    // The braces around the entries.
    let mut size: u64 = 2;
    let mut count: usize = 0;
    let mut after: Option<JobId> = None;
    out.write_all(b"{")
        .await
        .map_err(|e| cannot_write(path, &e))?;
    loop {
        let page = ctx
            .dependency_outputs_after(after.as_ref(), INPUTS_PAGE)
            .await
            .map_err(|e| {
                Outcome::retry(format!(
                    "cannot read the outputs of the job's dependencies: {e}"
                ))
            })?;
        for (id, output) in &page {
            let entry = entry(count > 0, id, output.as_ref())?;
            size += entry.len() as u64;
            if size > max {
                return Err(too_big(max, count));
            }
            out.write_all(&entry)
                .await
                .map_err(|e| cannot_write(path, &e))?;
            count += 1;
        }
        match page.last() {
            Some((last, _)) if page.len() == INPUTS_PAGE as usize => after = Some(last.clone()),
            _ => break,
        }
    }
    out.write_all(b"}")
        .await
        .map_err(|e| cannot_write(path, &e))?;
    out.flush().await.map_err(|e| cannot_write(path, &e))
}

/// `"ID":OUTPUT`, after a comma unless it is the first.
fn entry(comma: bool, id: &JobId, output: Option<&Payload>) -> Result<Vec<u8>, Outcome> {
    let mut entry = Vec::with_capacity(output.map_or(4, |o| o.as_str().len()) + 80);
    if comma {
        entry.push(b',');
    }
    let encoded = serde_json::to_writer(&mut entry, id.as_str())
        .and_then(|()| {
            entry.push(b':');
            serde_json::to_writer(&mut entry, &output)
        })
        .map_err(|e| Outcome::retry(format!("cannot encode the output of dependency {id}: {e}")));
    encoded.map(|()| entry)
}

/// The permanent failure of inputs past the cap: the dependencies are
/// done, so their outputs will not shrink however often it is tried.
fn too_big(max: u64, fitted: usize) -> Outcome {
    Outcome::permanent(format!(
        "the outputs of this job's dependencies pass the worker's cap on $ERRAND_INPUTS of {max} \
         bytes (only {fitted} of them fit); they will not shrink, so this is not retried: raise \
         the cap (`errand work --max-inputs BYTES`, `ExecHandler::max_inputs`) and replay the \
         job, or have the steps record smaller outputs (where the data is rather than the data)"
    ))
}

/// Reads the output a command left at `path` after it succeeded: nothing
/// (no file, or only whitespace), its output, or a failure saying why it
/// cannot be kept.
pub(crate) async fn read_output(path: &Path) -> Outcome {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(parent: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(parent)
            .map(|d| {
                d.flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    fn ok<T>(r: std::io::Result<T>) -> T {
        r.unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_sweep_removes_the_directories_of_handlers_gone_and_no_other() {
        let tmp = ok(tempfile::tempdir());
        let parent = tmp.path();
        let live = ok(Scratch::make(parent));
        ok(std::fs::write(live.file("t-output.json"), "{}"));
        let uid = ok(std::fs::metadata(&live.dir)).uid();
        // What a handler killed outright leaves: its directory and files,
        // with nobody holding its lock.
        let dead = parent.join("errand-exec-1-00000000deadbeef");
        ok(std::fs::create_dir(&dead));
        ok(std::fs::write(dead.join("t-inputs.json"), "{}"));
        // Not a handler's directory: a file of that name, and another name.
        ok(std::fs::write(parent.join("errand-exec-note"), "x"));
        ok(std::fs::create_dir(parent.join("other")));
        // A second handler's sweep (at its start) takes the dead one only.
        let second = ok(Scratch::make(parent));
        assert!(!dead.exists(), "{:?}", names(parent));
        assert!(live.file("t-output.json").exists(), "a live one stays");
        assert!(parent.join("errand-exec-note").exists());
        assert!(parent.join("other").exists());
        assert_eq!(sweep(parent, uid), 0, "nothing more to take");
        // A handler dropped removes its own directory.
        drop(live);
        drop(second);
        assert_eq!(names(parent), ["errand-exec-note", "other"]);
    }
}
