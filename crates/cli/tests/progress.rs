#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Progress on long commands as a user meets it: on a terminal (a real
//! pseudo-terminal, made by util-linux's `script`) `bench`, `prune`,
//! `replay`, `purge` and `migrate` draw a bar or a spinner on stderr; piped
//! or with `--json` they print exactly their answer and nothing else.

use std::process::Command;

mod common;

use common::Backend;

/// Runs `errand` with `args` on a pseudo-terminal; what the terminal
/// received (stdout and stderr together), or `None` without `script`.
fn on_terminal(b: &Backend, args: &[&str]) -> Option<String> {
    on_terminal_with(b, &[], args)
}

/// As [`on_terminal`], with `env` (`NAME=VALUE`) set for the command.
fn on_terminal_with(b: &Backend, env: &[&str], args: &[&str]) -> Option<String> {
    if Command::new("script").arg("--version").output().is_err() {
        errand_testsupport::skip(
            "the terminal half",
            "no `script` to make a terminal with (apt-get install bsdutils)",
        );
        return None;
    }
    let mut line = vec!["env".to_owned()];
    line.extend(env.iter().map(|e| (*e).to_owned()));
    line.push(env!("CARGO_BIN_EXE_errand").to_owned());
    line.extend(b.args.iter().cloned());
    line.extend(args.iter().map(|a| (*a).to_owned()));
    let quoted: Vec<String> = line.iter().map(|a| format!("'{a}'")).collect();
    // A terminal of a known size: without one (no terminal on the test's
    // stdin) the width is a guess and a long bar could wrap.
    let command = format!("stty cols 120 rows 40 2>/dev/null; {}", quoted.join(" "));
    let out = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("TERM", "xterm")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("ERRAND_LOG")
        .env_remove("ERRAND_NO_PROGRESS")
        .output()
        .unwrap();
    assert!(out.status.success(), "{args:?}: {out:?}");
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Runs `errand` with `args` piped: its stdout, after checking stderr is
/// empty.
fn piped(b: &Backend, args: &[&str]) -> String {
    let out = b.run(args);
    assert!(out.status.success(), "{args:?}: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{args:?}");
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn long_commands_draw_progress_on_a_terminal_only() {
    let b = Backend::sqlite();
    let Some(bench) = on_terminal(&b, &["bench", "burn-down", "--jobs", "2000"]) else {
        return;
    };
    assert!(bench.contains("bench burn-down ["), "{bench}");
    assert!(bench.contains("/2,000"), "{bench}");
    // The bar is cleared (erase-line) before the report is printed.
    assert!(bench.contains("\u{1b}[2Kburn-down"), "{bench}");

    let prune = on_terminal(&b, &["prune", "--older-than", "1ms"]).unwrap();
    assert!(prune.contains("pruning finished jobs: deleted"), "{prune}");
    // The answer starts on a cleared line: no spinner text left before it.
    assert!(
        prune.contains("\u{1b}[2Kdeleted 2000 finished jobs older than 1ms"),
        "{prune}"
    );

    // Piped, and with --json on a terminal: the answer only.
    b.ok(&[
        "enqueue",
        "--kind",
        "k",
        "--id",
        "d1",
        "--max-attempts",
        "1",
    ]);
    b.ok(&[
        "enqueue",
        "--kind",
        "k",
        "--id",
        "d2",
        "--max-attempts",
        "1",
    ]);
    for _ in 0..2 {
        b.ok(&["work", "--once", "--exec", "exit 65"]);
    }
    assert_eq!(
        piped(&b, &["replay", "d1", "--by", "ops"]),
        "replayed d1 (replays=1) by ops\n"
    );
    let json = on_terminal(
        &b,
        &["purge", "d2", "--by", "ops", "--reason", "test", "--json"],
    )
    .unwrap();
    assert!(!json.contains("purging"), "{json}");
    assert!(json.trim_start().starts_with('{'), "{json}");

    // On a terminal: replay's spinner names how many.
    b.ok(&["cancel", "d1"]);
    let replay = on_terminal(&b, &["replay", "d1", "--by", "ops"]).unwrap();
    assert!(replay.contains("replaying 1 jobs"), "{replay}");
    assert!(
        replay.contains("\u{1b}[2Kreplayed d1 (replays=2)"),
        "{replay}"
    );
    // With ERRAND_LOG set (log lines would tear a bar), nothing is drawn.
    b.ok(&["cancel", "d1"]);
    let replay =
        on_terminal_with(&b, &["ERRAND_LOG=warn"], &["replay", "d1", "--by", "ops"]).unwrap();
    assert!(!replay.contains("replaying"), "{replay}");
    assert!(replay.starts_with("replayed d1 (replays=3)"), "{replay}");

    let fresh = Backend::sqlite();
    let migrate = on_terminal(&fresh, &["migrate"]).unwrap();
    assert!(migrate.contains("migrating the schema"), "{migrate}");
    assert!(migrate.contains("schema is at version"), "{migrate}");
    assert_eq!(
        piped(&fresh, &["migrate"]),
        format!("schema is at version {}\n", errand::sqlite::SCHEMA_VERSION)
    );
}
