#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What `errand` leaves alone and how it behaves at its edges: files that
//! are not its databases, a reader that closes stdout early, log output
//! that is not a terminal, and PostgreSQL schemas that are not its own.
//! PostgreSQL cases need `ERRAND_TEST_POSTGRES_URL` and say SKIPPED without it.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use errand::sqlite::rusqlite::Connection;

fn errand(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_errand"));
    c.arg("--db")
        .arg(db)
        .env_remove("ERRAND_DB")
        .env_remove("ERRAND_SCHEMA")
        .env_remove("ERRAND_LOG")
        .env("RUST_BACKTRACE", "1");
    c
}

fn run(db: &Path, args: &[&str]) -> Output {
    errand(db).args(args).output().expect("run errand")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn listing(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// A file `errand` may not use, what it must say about it, and its exit code.
struct Foreign {
    path: PathBuf,
    code: i32,
    says: &'static str,
    /// `PRAGMA journal_mode` of a database (none for a text file).
    journal: Option<&'static str>,
}

/// Reads the journal mode on an ordinary connection, which removes the
/// side files it opened when it closes.
fn journal_mode(path: &Path) -> String {
    Connection::open(path)
        .unwrap()
        .query_row("PRAGMA journal_mode", [], |r| r.get(0))
        .unwrap()
}

/// Each in a directory of its own, so the directory's listing shows any
/// side file (`-wal`, `-shm`, `-journal`) a command left.
fn foreign_files(root: &Path) -> Vec<Foreign> {
    let at = |name: &str| {
        let dir = root.join(name);
        std::fs::create_dir(&dir).unwrap();
        dir.join(name)
    };
    let empty = at("empty.db");
    std::fs::write(&empty, b"").unwrap();
    // Another program's database, in rollback-journal mode.
    let other = at("other-app.db");
    Connection::open(&other)
        .unwrap()
        .execute_batch(
            "CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT);
             INSERT INTO notes (body) VALUES ('keep me');",
        )
        .unwrap();
    let text = at("notes.txt");
    std::fs::write(&text, "field notes, not a database\n".repeat(300)).unwrap();
    // An Errand database made by a newer program (WAL mode, as migrate
    // leaves it).
    let newer = at("newer.db");
    let out = run(&newer, &["migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    Connection::open(&newer)
        .unwrap()
        .execute(
            "INSERT INTO errand_schema_history (version, name, applied_on, checksum)
             VALUES (999, 'future', '2030-01-01', '0')",
            [],
        )
        .unwrap();
    vec![
        Foreign {
            path: empty,
            code: 5,
            says: "errand migrate",
            journal: Some("delete"),
        },
        Foreign {
            path: other,
            code: 5,
            says: "errand migrate",
            journal: Some("delete"),
        },
        Foreign {
            path: text,
            code: 2,
            says: "not a SQLite database",
            journal: None,
        },
        Foreign {
            path: newer,
            code: 5,
            says: "newer",
            journal: Some("wal"),
        },
    ]
}

#[test]
fn read_only_commands_refuse_a_foreign_file_and_leave_it_byte_for_byte() {
    let root = tempfile::tempdir().unwrap();
    let commands: [&[&str]; 6] = [
        &["jobs"],
        &["stats"],
        &["show", "some-job"],
        &["replay", "some-job", "--by", "tester"],
        &["work", "--once", "--exec", "true"],
        &["enqueue", "--kind", "k"],
    ];
    for f in foreign_files(root.path()) {
        let dir = f.path.parent().unwrap();
        if let Some(mode) = f.journal {
            assert_eq!(journal_mode(&f.path), mode, "{}", f.path.display());
        }
        let bytes = std::fs::read(&f.path).unwrap();
        let files = listing(dir);
        for args in commands {
            let out = run(&f.path, args);
            assert_eq!(
                out.status.code(),
                Some(f.code),
                "{args:?} on {}: {}",
                f.path.display(),
                stderr(&out)
            );
            assert!(
                stderr(&out).contains(f.says),
                "{args:?} on {}: {}",
                f.path.display(),
                stderr(&out)
            );
            assert!(
                std::fs::read(&f.path).unwrap() == bytes,
                "{args:?} changed {} ({} bytes before, {} after)",
                f.path.display(),
                bytes.len(),
                std::fs::metadata(&f.path).unwrap().len()
            );
            assert_eq!(
                listing(dir),
                files,
                "{args:?} left files next to {}",
                f.path.display()
            );
        }
        if let Some(mode) = f.journal {
            assert_eq!(journal_mode(&f.path), mode, "{}", f.path.display());
        }
    }
}

// ---- PostgreSQL --------------------------------------------------------------

fn pg_url() -> Option<String> {
    errand_testsupport::postgres_url("the PostgreSQL cases")
}

fn psql(url: &str, sql: &str) -> String {
    let out = Command::new("psql")
        .args([url, "-X", "-q", "-A", "-t", "-c", sql])
        .output()
        .expect("run psql");
    assert!(out.status.success(), "psql failed: {sql}: {}", stderr(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn pg(url: &str, schema: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["--db", url, "--schema", schema])
        .args(args)
        .env_remove("ERRAND_DB")
        .env_remove("ERRAND_SCHEMA")
        .output()
        .expect("run errand")
}

/// Drops the database it names when the test ends.
struct Database {
    admin: String,
    name: String,
    url: String,
}

impl Database {
    fn new(admin: &str, tag: &str) -> Database {
        let name = format!("errand_cli_{tag}_{}", std::process::id());
        psql(admin, &format!("DROP DATABASE IF EXISTS {name}"));
        psql(admin, &format!("CREATE DATABASE {name}"));
        let base = admin.rsplit_once('/').map_or(admin, |(base, _)| base);
        Database {
            admin: admin.to_owned(),
            url: format!("{base}/{name}"),
            name,
        }
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = Command::new("psql")
            .args([
                self.admin.as_str(),
                "-X",
                "-q",
                "-c",
                &format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.name),
            ])
            .output();
    }
}

#[test]
fn postgres_read_only_commands_create_no_schema() {
    let Some(url) = pg_url() else { return };
    let schema = format!("errand_cli_absent_{}", std::process::id());
    psql(&url, &format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    for args in [
        &["jobs"][..],
        &["stats"][..],
        &["show", "some-job"][..],
        &["replay", "some-job", "--by", "tester"][..],
        &["work", "--once", "--exec", "true"][..],
        &["enqueue", "--kind", "k"][..],
    ] {
        let out = pg(&url, &schema, args);
        assert_eq!(out.status.code(), Some(5), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains("errand migrate"), "{}", stderr(&out));
        let found = psql(
            &url,
            &format!("SELECT count(*) FROM pg_namespace WHERE nspname = '{schema}'"),
        );
        assert_eq!(found, "0", "{args:?} created the schema");
    }
}

#[test]
fn postgres_system_schemas_are_refused_and_public_needs_its_flag() {
    let Some(url) = pg_url() else { return };
    for schema in [
        "information_schema",
        "pg_catalog",
        "pg_toast",
        "pg_temp_1",
        "pg_errand",
    ] {
        for args in [&["migrate"][..], &["jobs"][..]] {
            let out = pg(&url, schema, args);
            assert_eq!(
                out.status.code(),
                Some(2),
                "{schema} {args:?}: {}",
                stderr(&out)
            );
            assert!(
                stderr(&out).contains("belongs to PostgreSQL itself"),
                "{}",
                stderr(&out)
            );
        }
    }
    assert_eq!(
        psql(
            &url,
            "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'errand%' \
             AND (schemaname = 'information_schema' OR schemaname LIKE 'pg\\_%')"
        ),
        "0"
    );

    // `public` of a database of its own: refused without the flag, used
    // with it.
    let db = Database::new(&url, "public");
    for args in [&["migrate"][..], &["jobs"][..]] {
        let out = pg(&db.url, "public", args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--allow-public-schema"),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(
        psql(
            &db.url,
            "SELECT count(*) FROM pg_tables WHERE schemaname = 'public'"
        ),
        "0",
        "a refused migrate created nothing"
    );
    let out = pg(&db.url, "public", &["--allow-public-schema", "migrate"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = pg(
        &db.url,
        "public",
        &[
            "--allow-public-schema",
            "enqueue",
            "--kind",
            "k",
            "--id",
            "p",
        ],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        psql(&db.url, "SELECT id FROM public.errand_jobs"),
        "p",
        "the job is in public"
    );
}

// ---- Output: a closed stdout, logs on a pipe -------------------------------

/// A database with `n` ready jobs.
fn db_with_jobs(dir: &Path, n: usize) -> PathBuf {
    let path = dir.join("jobs.db");
    let store = errand::SqliteStore::open(
        &path,
        errand::SqliteOptions {
            create: true,
            migrate: true,
            ..Default::default()
        },
    )
    .unwrap();
    let jobs: Vec<errand::NewJob> = (0..n)
        .map(|i| {
            errand::NewJob::new("mail", errand::Payload::default())
                .unwrap()
                .with_id(errand::JobId::new(format!("job-{i:05}")).unwrap())
        })
        .collect();
    store
        .write_blocking(move |c, now| errand::sqlite::enqueue_many_in(c, &jobs, now))
        .unwrap();
    path
}

#[test]
fn a_reader_that_closes_after_one_line_ends_the_output_quietly() {
    let dir = tempfile::tempdir().unwrap();
    // Far more output than a pipe buffers, so writes after the reader has
    // gone are certain.
    let db = db_with_jobs(dir.path(), 3000);
    for args in [&["jobs", "--limit", "3000"][..], &["jobs", "--json"][..]] {
        let mut child = errand(&db)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut reader = BufReader::new(child.stdout.take().unwrap());
        let mut first = Vec::new();
        // `head -1`: one line (or, for the one-line JSON, its first 4 KiB).
        reader
            .by_ref()
            .take(4096)
            .read_until(b'\n', &mut first)
            .unwrap();
        assert!(!first.is_empty(), "{args:?} printed nothing");
        drop(reader);
        let out = child.wait_with_output().unwrap();
        assert!(
            !stderr(&out).contains("panicked"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out), "", "{args:?}: nothing to say about it");
    }
}

#[test]
fn a_stdout_closed_from_the_start_keeps_each_commands_own_exit_code() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_jobs(dir.path(), 3);
    let commands: [(&[&str], i32); 7] = [
        (&["jobs"], 0),
        (&["jobs", "--json"], 0),
        (&["show", "job-00001"], 0),
        (&["stats"], 0),
        // A crossed threshold still says so by its exit code.
        (&["stats", "--check", "--max-ready", "0"], 6),
        (&["enqueue", "--kind", "k", "--id", "late"], 0),
        (&["--help"], 0),
    ];
    for (args, code) in commands {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = errand(&db)
            .args(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        assert!(
            !stderr(&out).contains("panicked"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert_eq!(out.status.code(), Some(code), "{args:?}: {}", stderr(&out));
    }
    // The enqueue happened although nobody read what it printed.
    let out = run(&db, &["show", "late"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn log_lines_written_to_a_pipe_carry_no_colour_codes() {
    let dir = tempfile::tempdir().unwrap();
    let db = db_with_jobs(dir.path(), 1);
    let done = dir.path().join("done");
    let mut child = errand(&db)
        .args([
            "work",
            "--exec",
            &format!("touch {}", done.display()),
            "--poll",
            "100ms",
        ])
        .env("ERRAND_LOG", "info")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while !done.exists() {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the worker never ran the job"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // SIGTERM: the worker logs that it is draining, then exits.
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut log = Vec::new();
    child.stderr.take().unwrap().read_to_end(&mut log).unwrap();
    assert!(child.wait().unwrap().success());
    let text = String::from_utf8_lossy(&log);
    assert!(
        text.contains("stop requested"),
        "a log line to look at: {text}"
    );
    assert!(
        !log.windows(2).any(|w| w == b"\x1b["),
        "ANSI escape codes in a piped log: {text:?}"
    );
}

/// `errand jobs` reads a listing in pages bounded by bytes (4 MiB) and
/// prints each before it reads the next, so memory holds one page whatever
/// `--limit` says; the output is the same: one JSON array, or one table,
/// with exactly `--limit` jobs across the page boundaries.
#[test]
fn a_listing_of_large_payloads_is_read_and_printed_page_by_page() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.db");
    let store = errand::SqliteStore::open(
        &path,
        errand::SqliteOptions {
            create: true,
            migrate: true,
            ..Default::default()
        },
    )
    .unwrap();
    let big = format!(r#"{{"blob":"{}"}}"#, "x".repeat(900 * 1024));
    let jobs: Vec<errand::NewJob> = (0..12)
        .map(|i| {
            errand::NewJob::new(
                "mail",
                errand::Payload::from_json_text(big.clone()).unwrap(),
            )
            .unwrap()
            .with_id(errand::JobId::new(format!("big-{i:02}")).unwrap())
        })
        .collect();
    store
        .write_blocking(move |c, now| errand::sqlite::enqueue_many_in(c, &jobs, now))
        .unwrap();
    drop(store);
    let ids = |out: &Output| -> Vec<String> {
        assert!(out.status.success(), "{}", stderr(out));
        let list: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        list.as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all: Vec<String> = (0..12).map(|i| format!("big-{i:02}")).collect();
    assert_eq!(
        ids(&run(&path, &["jobs", "--limit", "10000", "--json"])),
        all
    );
    assert_eq!(
        ids(&run(&path, &["jobs", "--limit", "7", "--json"])),
        all[..7]
    );
    assert_eq!(
        ids(&run(
            &path,
            &["jobs", "--limit", "3", "--after", "big-04", "--json"]
        )),
        all[5..8]
    );
    let table = run(&path, &["jobs", "--limit", "10000"]);
    let text = String::from_utf8(table.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 13, "a header and twelve rows: {text}");
    assert!(lines[0].starts_with("ID "));
    let empty = run(&path, &["jobs", "--state", "dead", "--json"]);
    assert_eq!(String::from_utf8(empty.stdout).unwrap(), "[]\n");
}
