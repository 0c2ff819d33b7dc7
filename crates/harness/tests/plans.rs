#![allow(clippy::unwrap_used, clippy::expect_used)]
//! CI-sized runs of every fault plan, on SQLite always and on PostgreSQL
//! when `ERRAND_TEST_POSTGRES_URL` is set (under `CI` it must be). The
//! restart plan starts a private cluster (root and the server binaries).
//!
//! The workers run this package's `errand-crashable` binary (the `errand`
//! command with the crash points), which cargo builds for these tests.
//!
//! The assertions are the checker's: every safety figure 0, and the
//! counters that show the faults hit (stale-token rejections for pauses,
//! recovery samples for kills, a quarantined poison job). Never timings.

use std::process::Command;
use std::sync::Mutex;

use serde_json::Value;

/// One run at a time: each spawns several workers on a small machine.
static SERIAL: Mutex<()> = Mutex::new(());

fn pg_url() -> Option<String> {
    errand_testsupport::postgres_url("the PostgreSQL half")
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

/// Runs the harness and returns its figures, failing with its whole
/// output when it reports a violation.
fn harness(args: &[&str]) -> Value {
    harness_of(300, args)
}

/// Runs the harness with `leaves` jobs; its whole JSON result and its
/// report, failing with its whole output unless it passed with no
/// violation.
fn run_harness(leaves: u64, args: &[&str]) -> (Value, String) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(env!("CARGO_BIN_EXE_errand-harness"))
        .args([
            "run",
            "--json",
            "--jobs",
            &leaves.to_string(),
            "--fault-secs",
            "8",
        ])
        .args(args)
        .output()
        .expect("run errand-harness");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    eprintln!("{stderr}");
    assert!(
        out.status.success(),
        "errand-harness {args:?} failed ({}):\n{stderr}",
        out.status
    );
    let result: Value = serde_json::from_slice(&out.stdout).expect("the JSON result");
    assert_eq!(result["violations"], Value::Array(vec![]), "{result}");
    (result, stderr)
}

/// [`harness`] with `leaves` jobs: `--fan-in` adds its root and sink.
fn harness_of(leaves: u64, args: &[&str]) -> Value {
    let (result, _) = run_harness(leaves, args);
    let f = result["figures"].clone();
    for name in [
        "lost",
        "duplicate_jobs",
        "duplicate_effects",
        "unexpected",
        "stuck",
        "attempts_over_max",
        "overlapping_valid_leases",
        "acks_not_recorded",
        "poison_not_quarantined",
    ] {
        assert_eq!(f[name], 0, "{name}: {f}");
    }
    let jobs = if args.contains(&"--fan-in") {
        leaves + 2
    } else {
        leaves
    };
    // Every job done but the poison one: those enqueued (the signals plan
    // adds joins, and children its steps add, to the leaves).
    let poison = u64::from(args.iter().any(|a| a.split(',').any(|p| p == "poison")));
    let enqueued = f["enqueued_ok"].as_u64().unwrap() - poison;
    assert_eq!(f["completed"], enqueued, "every job done: {f}");
    if args.iter().any(|a| a.contains("signals")) {
        assert!(enqueued > jobs, "joins and children: {f}");
    } else {
        assert_eq!(enqueued, jobs, "{f}");
    }
    f
}

/// A fan-out/fan-in of 1 → 1,000 → 1 under SIGKILLs: every
/// leaf records an output, and the sink — which fails for good unless it
/// reads all 1,000, so it cannot have run before they were done — runs to
/// completion with its effect applied once (the checker's figures).
fn fan_in(backend: &[&str]) {
    // (Kills alone: with pauses too, a pause may find its worker killed
    // and be skipped, and the checker then rightly says the pauses proved
    // nothing — the pause plan has its own runs.)
    let mut args = vec!["--fan-in", "--plan", "kill", "--kills", "4"];
    args.extend_from_slice(backend);
    let f = harness_of(1000, &args);
    assert_eq!(f["dead"], 0, "the sink read every output: {f}");
    assert!(f["redeliveries"].as_u64().unwrap() > 0, "{f}");
}

#[test]
fn sqlite_a_fan_in_of_a_thousand_runs_its_sink_once_after_all_with_every_output() {
    fan_in(&[]);
}

#[test]
fn postgres_a_fan_in_of_a_thousand_runs_its_sink_once_after_all_with_every_output() {
    if let Some(url) = pg_url() {
        fan_in(&["--pg", &url]);
    }
}

fn kill(backend: &[&str]) {
    let mut args = vec!["--plan", "kill", "--kills", "4"];
    args.extend_from_slice(backend);
    let f = harness(&args);
    assert!(f["redeliveries"].as_u64().unwrap() > 0, "{f}");
    assert!(f["recovery_samples"].as_u64().unwrap() > 0, "{f}");
}

fn pause(backend: &[&str]) {
    let mut args = vec!["--plan", "pause", "--pauses", "2"];
    args.extend_from_slice(backend);
    let f = harness(&args);
    assert!(f["stale_token_rejections"].as_u64().unwrap() > 0, "{f}");
}

fn poison(backend: &[&str]) {
    let mut args = vec!["--plan", "poison"];
    args.extend_from_slice(backend);
    let f = harness(&args);
    assert_eq!(f["dead"], 1, "the poison job, quarantined: {f}");
    assert!(f["worker_outages"].as_u64().unwrap() >= 3, "{f}");
}

/// Eight workers armed in turn with each crash point: the four single-job
/// points fire (the two batch points are asserted by `batch_crash.rs`), and
/// the one between the effect and the settlement shows as a repeated
/// (absorbed) effect, never a duplicate.
fn crash(backend: &[&str]) {
    let mut args = vec!["--plan", "crash", "--crashes", "8"];
    args.extend_from_slice(backend);
    let f = harness(&args);
    for point in [
        "claim-committed",
        "heartbeat",
        "before-settle",
        "settle-committed",
    ] {
        assert!(
            f["crash_point_kills"][point].as_u64().unwrap_or(0) > 0,
            "{point} never fired: {f}"
        );
    }
    assert!(f["effect_repeats"].as_u64().unwrap() > 0, "{f}");
}

#[test]
fn sqlite_sigkills_at_each_crash_point_lose_nothing() {
    crash(&[]);
}

#[test]
fn postgres_sigkills_at_each_crash_point_lose_nothing() {
    if let Some(url) = pg_url() {
        crash(&["--pg", &url]);
    }
}

/// The SQLite file's file system (a 64 MiB tmpfs) filled twice for about a
/// second: inserts, claims and settlements get "storage full" errors, none
/// is acknowledged falsely (`acks_not_recorded`, `lost`), and every job is
/// done once space returns.
#[test]
fn sqlite_a_full_disk_gives_definite_errors_and_progress_once_space_returns() {
    if !is_root() {
        errand_testsupport::skip("the disk-full plan", "it mounts a tmpfs, which needs root");
        return;
    }
    let f = harness(&["--plan", "disk-full", "--fulls", "2"]);
    assert!(f["storage_full_errors"].as_u64().unwrap() > 0, "{f}");
    assert_eq!(f["integrity_check"], "ok", "{f}");
}

/// The workers' clock stepped forward 3–6 leases, back 1–2, forward
/// again, while handlers run and one job in five is scheduled ahead: no
/// live lease is reclaimed, no renewal or settlement refused, and every
/// scheduled job runs.
#[test]
fn sqlite_clock_steps_reclaim_no_live_lease_and_lose_no_schedule() {
    let f = harness(&["--plan", "clock", "--jumps", "3", "--lease-ms", "3000"]);
    assert!(f["forward_steps_over_leases"].as_u64().unwrap() > 0, "{f}");
    assert_eq!(f["live_lease_reclaims"], 0, "{f}");
    assert_eq!(f["stale_token_rejections"], 0, "{f}");
}

/// Jobs enqueued through `errand serve`, which is SIGKILLed four times
/// mid-enqueue: clients retry with the same id, so every acknowledged job
/// exists exactly once and is done.
fn http(backend: &[&str]) {
    let mut args = vec!["--plan", "http", "--server-kills", "4"];
    args.extend_from_slice(backend);
    let f = harness(&args);
    assert!(f["http_requests_failed"].as_u64().unwrap() > 0, "{f}");
    assert_eq!(f["enqueued_ambiguous"], 0, "{f}");
}

#[test]
fn sqlite_an_http_server_killed_mid_enqueue_loses_and_duplicates_nothing() {
    http(&[]);
}

#[test]
fn postgres_an_http_server_killed_mid_enqueue_loses_and_duplicates_nothing() {
    if let Some(url) = pg_url() {
        http(&["--pg", &url]);
    }
}

#[test]
fn sqlite_random_sigkills_lose_nothing() {
    kill(&[]);
}

#[test]
fn sqlite_a_zombie_worker_paused_past_its_lease_has_its_settlements_refused() {
    pause(&[]);
}

#[test]
fn sqlite_a_job_that_kills_its_worker_every_time_is_quarantined() {
    poison(&[]);
}

#[test]
fn postgres_random_sigkills_lose_nothing() {
    if let Some(url) = pg_url() {
        kill(&["--pg", &url]);
    }
}

#[test]
fn postgres_a_zombie_worker_paused_past_its_lease_has_its_settlements_refused() {
    if let Some(url) = pg_url() {
        pause(&["--pg", &url]);
    }
}

#[test]
fn postgres_a_job_that_kills_its_worker_every_time_is_quarantined() {
    if let Some(url) = pg_url() {
        poison(&["--pg", &url]);
    }
}

#[test]
fn postgres_crash_restart_mid_run_with_kills_loses_nothing() {
    if !can_start_servers("the restart plan") {
        return;
    }
    harness(&["--plan", "restart,kill", "--kills", "2", "--pg-cluster"]);
    // The same through a fan-out/fan-in: the sink still reads every
    // leaf's output after the server's crash and restart.
    let f = harness(&[
        "--plan",
        "restart,kill",
        "--kills",
        "2",
        "--pg-cluster",
        "--fan-in",
    ]);
    assert_eq!(f["dead"], 0, "the sink read every output: {f}");
}

/// Jobs that suspend themselves until a signal, signal senders SIGKILLed
/// mid-send and workers SIGKILLed — some by a step right after it wrote
/// the children it adds: every job ends done with its effect once, each
/// suspended one took exactly one signal (none lost, none delivered twice;
/// the checker's figures), senders were killed, the children of a step
/// exist exactly when it is done, and no join started before the last of
/// its step's children finished.
fn signals(backend: &[&str]) {
    let mut args = vec!["--plan", "signals,kill", "--kills", "3"];
    args.extend_from_slice(backend);
    let f = harness(&args);
    assert!(f["signal_senders_killed"].as_u64().unwrap() > 0, "{f}");
    assert!(f["signals_delivered"].as_u64().unwrap() > 0, "{f}");
    assert_eq!(f["signals_delivered_twice"], 0, "{f}");
    assert_eq!(f["awaiting_done_without_signal"], 0, "{f}");
    assert!(f["children_added"].as_u64().unwrap() > 0, "{f}");
    assert!(f["child_adders_killed"].as_u64().unwrap() > 0, "{f}");
    assert_eq!(f["joins_released_early"], 0, "{f}");
}

#[test]
fn sqlite_suspended_jobs_take_one_signal_each_while_senders_and_workers_are_killed() {
    signals(&[]);
}

#[test]
fn postgres_suspended_jobs_take_one_signal_each_while_senders_and_workers_are_killed() {
    if let Some(url) = pg_url() {
        signals(&["--pg", &url]);
    }
}

/// Whether private PostgreSQL servers — a cluster, a primary and standby —
/// can be started (root and the server binaries); says SKIPPED otherwise
/// (a failure under CI).
fn can_start_servers(what: &str) -> bool {
    let can = is_root()
        && std::fs::read_dir("/usr/lib/postgresql")
            .map(|d| {
                d.filter_map(Result::ok)
                    .any(|e| e.path().join("bin/initdb").exists())
            })
            .unwrap_or(false);
    if !can {
        errand_testsupport::skip(
            what,
            "private PostgreSQL servers need root and the server binaries (/usr/lib/postgresql/*/bin)",
        );
    }
    can
}

/// The failover plan's arguments: two failovers, each after the standby
/// stopped receiving for half a second, with workers killed too.
fn failover_args(mode: &'static str) -> [&'static str; 10] {
    [
        "--plan",
        "failover,kill",
        "--kills",
        "2",
        "--pg-pair",
        mode,
        "--failovers",
        "2",
        "--lag-ms",
        "500",
    ]
}

/// Synchronous replication: the primary killed twice mid-run (its standby
/// promoted, the old primary rebuilt as the new standby), workers on a
/// multi-host URL: nothing acknowledged is lost, nothing stuck, every
/// effect once — the checker's every safety figure 0.
#[test]
fn postgres_failovers_with_synchronous_replication_lose_nothing() {
    if can_start_servers("the synchronous failover plan") {
        harness_of(1500, &failover_args("sync"));
    }
}

/// Asynchronous replication, the same faults: the commits of the half
/// second the standby did not receive die with the primary, and the
/// checker counts them — acknowledged enqueues missing (`lost`) and
/// acknowledgments missing (`acks_not_recorded`, their jobs run again) —
/// while everything else holds: nothing stuck, no effect twice, no job
/// twice, no overlapping leases.
#[test]
fn postgres_failovers_with_asynchronous_replication_lose_only_what_was_not_replicated() {
    if !can_start_servers("the asynchronous failover plan") {
        return;
    }
    let (result, stderr) = run_harness(1500, &failover_args("async"));
    let f = &result["figures"];
    for name in [
        "duplicate_jobs",
        "duplicate_effects",
        "unexpected",
        "stuck",
        "attempts_over_max",
        "overlapping_valid_leases",
    ] {
        assert_eq!(f[name], 0, "{name}: {f}");
    }
    let counted = f["lost"].as_u64().unwrap() + f["acks_not_recorded"].as_u64().unwrap();
    assert!(counted > 0, "no commit was lost with the primary: {f}");
    assert!(
        stderr.contains("lost with the primary: counted"),
        "{stderr}"
    );
}
