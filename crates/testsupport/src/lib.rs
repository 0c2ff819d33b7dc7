//! # errand-testsupport
//!
//! What Errand's own tests share, in one place (a dev-dependency only):
//!
//! * [`skip`]: a test that cannot run here (no PostgreSQL server, no
//!   browser, not root) says so: it prints `SKIPPED: …` and adds a line to
//!   the file named by `ERRAND_TEST_SKIP_LOG`, which `scripts/test.sh` sets
//!   and sums up at its end (`cargo test` hides what passing tests print).
//!   Under CI (`CI` set) a skip fails the test instead.
//! * [`postgres_url`]: the PostgreSQL server the tests may use, named by
//!   `ERRAND_TEST_POSTGRES_URL`. Without it the test is skipped ([`skip`]):
//!   it passes, except under CI, so the PostgreSQL half can never be
//!   skipped silently there.
//! * [`PgSchema`]: a schema of the test's own on that server, dropped
//!   before use and when the test ends, so tests never share tables.
//! * [`KillOnDrop`]: a child process killed and reaped when the test ends,
//!   passed or failed.
//! * [`wait_until`]: polls a condition at a chosen pace with a generous
//!   bound, and fails the test naming what never happened.
#![deny(missing_docs)]

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the PostgreSQL server for tests.
pub const POSTGRES_URL_VAR: &str = "ERRAND_TEST_POSTGRES_URL";

/// The environment variable naming the file that [`skip`] adds a line to.
pub const SKIP_LOG_VAR: &str = "ERRAND_TEST_SKIP_LOG";

/// The PostgreSQL server the tests may use, or `None` after [`skip`]ping
/// `what`. Under CI (`CI` set) a missing server fails the calling test
/// instead.
///
/// # Panics
/// Under CI, when `ERRAND_TEST_POSTGRES_URL` is not set.
pub fn postgres_url(what: &str) -> Option<String> {
    let url = std::env::var(POSTGRES_URL_VAR)
        .ok()
        .filter(|s| !s.is_empty());
    if url.is_none() {
        skip(
            what,
            &format!(
                "{POSTGRES_URL_VAR} is not set; set it like postgres://postgres@127.0.0.1:5432/postgres"
            ),
        );
    }
    url
}

/// The calling test skips `what` because `because` (what is missing and
/// how to provide it): prints `SKIPPED: {what} ({because})` on stderr and,
/// when `ERRAND_TEST_SKIP_LOG` names a file, adds the line
/// `TEST<tab>BECAUSE<tab>WHAT` to it, where TEST is the test binary and
/// the test's name. `scripts/test.sh` sets the variable and prints what
/// the file holds at its end, since `cargo test` shows nothing a passing
/// test prints. The caller then returns without checking anything.
///
/// # Panics
/// Under CI (`CI` set): there every test must run.
pub fn skip(what: &str, because: &str) {
    eprintln!("SKIPPED: {what} ({because})");
    if let Some(log) = std::env::var_os(SKIP_LOG_VAR).filter(|v| !v.is_empty()) {
        let line = skip_line(&current_test(), what, because);
        if let Err(e) = append_line(Path::new(&log), &line) {
            eprintln!(
                "could not record the skip in {} ({SKIP_LOG_VAR}): {e}",
                Path::new(&log).display()
            );
        }
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "under CI every test must run, but {what} would be skipped: {because}"
    );
}

/// `binary: test` for the running test: the test binary's name without
/// cargo's hash, and the test's name, which the test harness gives the
/// thread it runs the test on.
fn current_test() -> String {
    let exe = std::env::current_exe().ok();
    let stem = exe
        .as_deref()
        .and_then(Path::file_stem)
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "?".to_owned());
    let binary = match stem.rsplit_once('-') {
        Some((name, hash)) if hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()) => {
            name.to_owned()
        }
        _ => stem,
    };
    let thread = std::thread::current();
    let test = thread.name().filter(|n| *n != "main").unwrap_or("?");
    format!("{binary}: {test}")
}

/// One line of the skip log: the fields joined by tabs, with tabs and line
/// breaks inside them turned into spaces.
fn skip_line(test: &str, what: &str, because: &str) -> String {
    let clean = |s: &str| s.replace(['\t', '\n', '\r'], " ");
    format!("{}\t{}\t{}\n", clean(test), clean(because), clean(what))
}

/// Appends `line` to `path` in one write (tests of one binary run on many
/// threads, and binaries may run at once).
fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(line.as_bytes())
}

/// A schema of the test's own, `errand_<tag>_<pid>`: dropped (if a
/// crashed run left it) when made, and again when dropped. The tables in it
/// are whatever the test migrates or creates; `psql` must be on `PATH`.
#[derive(Debug)]
pub struct PgSchema {
    /// The server.
    pub url: String,
    /// The schema's name.
    pub name: String,
}

impl PgSchema {
    /// A fresh schema name for `tag` on the server at `url` (nothing is
    /// created: migrating creates it).
    pub fn new(url: &str, tag: &str) -> PgSchema {
        let schema = PgSchema {
            url: url.to_owned(),
            name: format!("errand_{tag}_{}", std::process::id()),
        };
        schema.drop_now();
        schema
    }

    /// Runs `sql` with `psql` against the server.
    ///
    /// # Panics
    /// When `psql` cannot run or the statement fails.
    pub fn psql(&self, sql: &str) -> String {
        let out = Command::new("psql")
            .args([self.url.as_str(), "-X", "-q", "-A", "-t", "-c", sql])
            .output()
            .unwrap_or_else(|e| panic!("psql could not run: {e}"));
        assert!(
            out.status.success(),
            "psql failed on `{sql}`: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    /// Drops the schema and everything in it, if it exists.
    pub fn drop_now(&self) {
        let _ = Command::new("psql")
            .args([
                self.url.as_str(),
                "-X",
                "-q",
                "-c",
                &format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        self.drop_now();
    }
}

/// A child process that is killed and reaped when the test ends.
#[derive(Debug)]
pub struct KillOnDrop(Option<Child>);

impl KillOnDrop {
    /// Watches `child`.
    pub fn new(child: Child) -> KillOnDrop {
        KillOnDrop(Some(child))
    }

    /// The child.
    ///
    /// # Panics
    /// After [`KillOnDrop::wait_with_output`] took it.
    pub fn child(&mut self) -> &mut Child {
        self.0
            .as_mut()
            .unwrap_or_else(|| panic!("the child was already waited for"))
    }

    /// Waits for the child to exit on its own and collects its output.
    ///
    /// # Panics
    /// When waiting fails.
    pub fn wait_with_output(mut self) -> Output {
        let child = self
            .0
            .take()
            .unwrap_or_else(|| panic!("the child was already waited for"));
        child
            .wait_with_output()
            .unwrap_or_else(|e| panic!("waiting for the child failed: {e}"))
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Polls `done` every `every` until it holds, for at most `limit` (a look
/// that starts a process or opens a store wants a slower `every`).
///
/// # Panics
/// When `limit` passes first, naming `what`.
pub fn wait_until(what: &str, limit: Duration, every: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < limit,
            "gave up waiting for {what} after {limit:?}"
        );
        std::thread::sleep(every);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skip_is_one_line_naming_the_test_and_why() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("skips");
        append_line(&log, &skip_line("t: one", "the first", "no\tserver")).expect("append");
        append_line(
            &log,
            &skip_line(&current_test(), "the second", "two\nlines"),
        )
        .expect("append");
        let text = std::fs::read_to_string(&log).expect("read the log");
        let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split('\t').collect()).collect();
        assert_eq!(
            lines,
            [
                ["t: one", "no server", "the first"],
                [
                    "errand_testsupport: tests::a_skip_is_one_line_naming_the_test_and_why",
                    "two lines",
                    "the second"
                ]
            ]
        );
    }

    /// What `scripts/test.sh` prints at its end: each reason once, with how
    /// many tests skipped for it and (the first five of) their names.
    #[test]
    fn the_test_script_sums_up_the_skips_by_reason() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let log = dir.path().join("skips");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/skipped.sh");
        let summary = |log: &Path| {
            let out = Command::new("bash")
                .arg(&script)
                .arg(log)
                .output()
                .expect("run bash");
            assert!(out.status.success(), "{out:?}");
            String::from_utf8_lossy(&out.stdout).into_owned()
        };
        assert_eq!(summary(&log), "no test was skipped\n");
        for n in 1..=7 {
            let test = format!("conformance: case_{n}");
            append_line(&log, &skip_line(&test, "the half", "no server")).expect("append");
        }
        // The same test and reason twice counts once.
        append_line(
            &log,
            &skip_line("conformance: case_1", "the other half", "no server"),
        )
        .expect("append");
        append_line(
            &log,
            &skip_line("browser: replay", "the browser test", "no chromium"),
        )
        .expect("append");
        assert_eq!(
            summary(&log),
            "8 test(s) SKIPPED: they passed without checking anything\n\
             \x20 7 because no server:\n\
             \x20     conformance: case_1, conformance: case_2, conformance: case_3, \
             conformance: case_4, conformance: case_5 and 2 more\n\
             \x20 1 because no chromium:\n\
             \x20     browser: replay\n"
        );
    }

    #[test]
    fn a_child_is_killed_when_the_guard_is_dropped() {
        let child = Command::new("sleep")
            .arg("30")
            .spawn()
            .expect("spawn sleep");
        let pid = child.id();
        drop(KillOnDrop::new(child));
        // Reaped: no process with that id is left (not even a zombie).
        let alive = std::path::Path::new(&format!("/proc/{pid}")).exists();
        assert!(!alive, "process {pid} is still there");
    }

    #[test]
    fn waiting_gives_up_naming_what_never_happened() {
        let err = std::panic::catch_unwind(|| {
            wait_until(
                "the impossible",
                Duration::from_millis(50),
                Duration::from_millis(5),
                || false,
            );
        })
        .expect_err("it gives up");
        let text = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(text.contains("the impossible"), "{text}");
        let mut n = 0;
        wait_until(
            "the third look",
            Duration::from_secs(5),
            Duration::ZERO,
            || {
                n += 1;
                n == 3
            },
        );
        assert_eq!(n, 3);
    }
}
