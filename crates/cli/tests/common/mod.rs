//! What the process tests of the `errand` command share: a backend to run
//! it against — a SQLite file in a temporary directory, or, when
//! `ERRAND_TEST_POSTGRES_URL` is set, a PostgreSQL schema of the test's own
//! (dropped when the backend is). Each test file adds the methods it needs
//! in an `impl Backend` of its own.
#![allow(dead_code)] // each test file uses a part

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;

/// Where the jobs live, and a directory for the test's own files.
pub struct Backend {
    /// `--db …`, and on PostgreSQL `--schema …`.
    pub args: Vec<String>,
    /// A temporary directory for the test's files (on SQLite it also holds
    /// the database, `jobs.db`).
    pub dir: PathBuf,
    /// On PostgreSQL: the server's URL and the test's schema.
    pub pg: Option<(String, String)>,
    _dir: tempfile::TempDir,
}

/// The PostgreSQL server the tests may use, or `None` (saying SKIPPED)
/// when none is configured; under CI one must be.
pub fn postgres_url() -> Option<String> {
    errand_testsupport::postgres_url("the PostgreSQL half")
}

impl Backend {
    /// A new, migrated SQLite database.
    pub fn sqlite() -> Backend {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_path_buf();
        let b = Backend {
            args: vec!["--db".into(), path.join("jobs.db").display().to_string()],
            dir: path,
            _dir: dir,
            pg: None,
        };
        b.ok(&["migrate"]);
        b
    }

    /// A new, migrated schema `errand_<tag>_<pid>` on the configured
    /// PostgreSQL server, or `None` when there is none.
    pub fn postgres(tag: &str) -> Option<Backend> {
        let url = postgres_url()?;
        let schema = format!("errand_{tag}_{}", std::process::id());
        let dir = tempfile::tempdir().unwrap();
        let b = Backend {
            args: vec![
                "--db".into(),
                url.clone(),
                "--schema".into(),
                schema.clone(),
            ],
            dir: dir.path().to_path_buf(),
            _dir: dir,
            pg: Some((url, schema)),
        };
        b.drop_schema();
        b.ok(&["migrate"]);
        Some(b)
    }

    /// The database: a SQLite path or a PostgreSQL URL.
    pub fn db(&self) -> &str {
        &self.args[1]
    }

    /// `errand` on this backend with `args`, logging errors only, with no
    /// database, schema, token or span export from the environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_errand"));
        c.args(&self.args)
            .args(args)
            .env("ERRAND_LOG", "error")
            .env_remove("ERRAND_DB")
            .env_remove("ERRAND_SCHEMA")
            .env_remove("ERRAND_TOKEN")
            .env_remove("ERRAND_ENCRYPTION_KEYS")
            // No span export from the developer's environment (it would
            // change stored trace contexts and slow every exit).
            .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
            .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT");
        c
    }

    /// Runs `errand` with `args` to the end.
    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run errand")
    }

    /// Runs `errand` with `args`, which must succeed; its stdout as JSON
    /// (`null` when it is not).
    pub fn ok(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    /// Runs `f` on the store through the library.
    pub fn with_store<T>(&self, f: impl AsyncFnOnce(&dyn errand::Store) -> T) -> T {
        let options = errand::ConnectOptions {
            schema: self.pg.as_ref().map(|(_, s)| s.clone()),
            ..Default::default()
        };
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
            .block_on(async {
                let store = errand::connect(self.db(), &options).await.unwrap();
                f(store.as_ref()).await
            })
    }

    fn drop_schema(&self) {
        if let Some((url, schema)) = &self.pg {
            let _ = Command::new("psql")
                .args([
                    url.as_str(),
                    "-q",
                    "-c",
                    &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"),
                ])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        self.drop_schema();
    }
}

/// Runs `test` on SQLite, then on PostgreSQL when it is configured.
pub fn both(tag: &str, test: impl Fn(&Backend)) {
    test(&Backend::sqlite());
    if let Some(pg) = Backend::postgres(tag) {
        test(&pg);
    }
}
