#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `errand enqueue --await`, `errand signal` and an `--exec` command that
//! suspends itself (`{"await": …}`) and reads `$ERRAND_SIGNAL`, in real
//! processes, on both backends.

mod common;

use common::{Backend, both};

fn stderr(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The command a worker runs: on its first attempt it waits for the
/// signal `approved`; resumed, it records the signal it was given.
const APPROVER: &str = r#"if [ -n "$ERRAND_SIGNAL" ]; then cat "$ERRAND_SIGNAL" > "$ERRAND_OUTPUT"; else printf '{"await": {"signal": "approved", "timeout": "1h"}}' > "$ERRAND_OUTCOME"; fi"#;

fn work_once(b: &Backend) -> serde_json::Value {
    b.ok(&["work", "--once", "--exec", APPROVER, "--json"])
}

#[test]
fn a_job_waits_for_its_signal_and_a_command_reads_it() {
    both("signals", |b| {
        let made = b.ok(&[
            "enqueue",
            "--kind",
            "hold",
            "--id",
            "h1",
            "--await",
            "paid",
            "--await-timeout",
            "15m",
            "--on-await-timeout",
            "run",
            "--json",
        ]);
        assert_eq!(made["state"], "waiting", "{made}");
        assert_eq!(made["awaiting"]["signal"], "paid");
        assert_eq!(made["awaiting"]["on_timeout"], "run");
        let listed = b.ok(&["jobs", "--state", "waiting", "--json"]);
        assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");

        // A signal of another name: exit 4, saying what the job waits for.
        let wrong = b.run(&["signal", "h1", "shipped"]);
        assert_eq!(wrong.status.code(), Some(4), "{}", stderr(&wrong));
        assert!(
            stderr(&wrong).contains("waits for the signal paid"),
            "{}",
            stderr(&wrong)
        );
        let missing = b.run(&["signal", "nope", "paid"]);
        assert_eq!(missing.status.code(), Some(3), "{}", stderr(&missing));
        let kept = b.ok(&["signal", "h1", "shipped", "--buffer", "--json"]);
        assert_eq!(kept["delivered"], false, "{kept}");

        let sent = b.ok(&[
            "signal",
            "h1",
            "paid",
            "--payload",
            r#"{"payment":"p-9"}"#,
            "--by",
            "ana",
            "--reason",
            "paid at the desk",
            "--json",
        ]);
        assert_eq!(sent["delivered"], true, "{sent}");
        assert_eq!(sent["job"]["state"], "ready");
        let shown = b.ok(&["show", "h1", "--json"]);
        let signals = shown["signals"].as_array().unwrap();
        assert_eq!(signals.len(), 2, "{shown}");
        assert_eq!(signals[1]["payload_bytes"], 17);
        let audit: Vec<&str> = shown["audit"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["action"].as_str().unwrap())
            .collect();
        assert_eq!(audit, ["signal", "signal"], "{shown}");
        assert_eq!(shown["audit"][1]["operator"], "ana");

        // The worker's command gets the signal in $ERRAND_SIGNAL.
        let report = work_once(b);
        assert_eq!(report["outcome"], "acknowledged", "{report}");
        let done = b.ok(&["show", "h1", "--json"]);
        assert_eq!(done["output"]["name"], "paid", "{done}");
        assert_eq!(done["output"]["payload"]["payment"], "p-9", "{done}");
    });
}

#[test]
fn a_command_suspends_itself_until_its_signal() {
    both("suspend", |b| {
        b.ok(&["enqueue", "--kind", "review", "--id", "r1", "--json"]);
        let first = work_once(b);
        assert_eq!(first["outcome"], "awaiting", "{first}");
        let waiting = b.ok(&["show", "r1", "--json"]);
        assert_eq!(waiting["state"], "waiting", "{waiting}");
        assert_eq!(
            waiting["attempts"], 0,
            "the suspended attempt is given back"
        );
        // Nothing to run while it waits.
        let idle = work_once(b);
        assert_eq!(idle["outcome"], "idle", "{idle}");
        b.ok(&["signal", "r1", "approved", "--payload", "true", "--json"]);
        let second = work_once(b);
        assert_eq!(second["outcome"], "acknowledged", "{second}");
        let done = b.ok(&["show", "r1", "--json"]);
        assert_eq!(done["state"], "done");
        assert_eq!(done["output"]["payload"], true, "{done}");
        assert_eq!(done["history"][0]["outcome"], "awaiting", "{done}");
    });
}
