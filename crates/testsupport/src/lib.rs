//! # errand-testsupport
//!
//! What Errand's own tests share, in one place (a dev-dependency only):
//!
//! * [`postgres_url`]: the PostgreSQL server the tests may use, named by
//!   `ERRAND_TEST_POSTGRES_URL`. Without it a test prints `SKIPPED: …` and
//!   passes — except under CI (`CI` set), where a missing server fails the
//!   test, so the PostgreSQL half can never be skipped silently there.
//! * [`PgSchema`]: a schema of the test's own on that server, dropped
//!   before use and when the test ends, so tests never share tables.
//! * [`KillOnDrop`]: a child process killed and reaped when the test ends,
//!   passed or failed.
//! * [`wait_until`]: polls a condition at a chosen pace with a generous
//!   bound, and fails the test naming what never happened.
#![deny(missing_docs)]

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The environment variable naming the PostgreSQL server for tests.
pub const POSTGRES_URL_VAR: &str = "ERRAND_TEST_POSTGRES_URL";

/// The PostgreSQL server the tests may use, or `None` after printing
/// `SKIPPED: {what} …`. Under CI (`CI` set) a missing server fails the
/// calling test instead.
///
/// # Panics
/// Under CI, when `ERRAND_TEST_POSTGRES_URL` is not set.
pub fn postgres_url(what: &str) -> Option<String> {
    let url = std::env::var(POSTGRES_URL_VAR)
        .ok()
        .filter(|s| !s.is_empty());
    if url.is_none() {
        eprintln!(
            "SKIPPED: {what} (set {POSTGRES_URL_VAR}, like postgres://postgres@127.0.0.1:5432/postgres)"
        );
        assert!(
            std::env::var("CI").is_err(),
            "{POSTGRES_URL_VAR} must be set under CI"
        );
    }
    url
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
