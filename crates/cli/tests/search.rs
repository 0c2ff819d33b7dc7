#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `errand jobs --meta KEY=VALUE --where payload.PATH=VALUE [--scan N]` as
//! an operator uses it, on SQLite and, when `ERRAND_TEST_POSTGRES_URL` is
//! set, on PostgreSQL. (Which jobs a search returns is conformance's
//! `search` cases.)

use serde_json::Value;

mod common;

use common::both;

fn ids(listing: &Value) -> Vec<String> {
    listing
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_operator_searches_by_metadata_and_payload_fields() {
    both("search_cli", |b| {
        for n in 0..12 {
            let payload = format!(r#"{{"customer":{},"name":"c {n}"}}"#, n % 3);
            let tenant = if n % 2 == 0 {
                "tenant=acme"
            } else {
                "tenant=globex"
            };
            let id = format!("j{n:02}");
            b.ok(&[
                "enqueue",
                "--kind",
                "order",
                "--id",
                &id,
                "--payload",
                &payload,
                "--meta",
                tenant,
                "--json",
            ]);
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        let found = b.ok(&["jobs", "--where", "payload.customer=1", "--json"]);
        assert_eq!(ids(&found), ["j01", "j04", "j07", "j10"]);
        let found = b.ok(&[
            "jobs",
            "--meta",
            "tenant=acme",
            "--where",
            "payload.customer=1",
            "--json",
        ]);
        assert_eq!(ids(&found), ["j04", "j10"]);
        let found = b.ok(&["jobs", "--where", r#"payload.name="c 7""#, "--json"]);
        assert_eq!(ids(&found), ["j07"]);
        // Pages of --limit follow each other; a search across them.
        let found = b.ok(&["jobs", "--meta", "tenant=globex", "--limit", "2", "--json"]);
        assert_eq!(ids(&found), ["j01", "j03"]);

        // A scan bound that stops the search says where (the fourth job
        // read), and --after goes on from there.
        let out = b.run(&[
            "jobs",
            "--where",
            r#"payload.name="c 11""#,
            "--scan",
            "4",
            "--json",
        ]);
        assert!(out.status.success());
        let page: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(ids(&page).is_empty(), "{page}");
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            err.contains("the search stopped after reading 4 jobs, at j03"),
            "{err}"
        );
        assert!(err.contains("--after j03"), "{err}");
        let rest = b.ok(&[
            "jobs",
            "--where",
            r#"payload.name="c 11""#,
            "--after",
            "j03",
            "--json",
        ]);
        assert_eq!(ids(&rest), ["j11"]);

        // Bad input: exit 2 with what is wrong.
        for (args, says) in [
            (vec!["jobs", "--where", "customer=1"], "payload.PATH=VALUE"),
            (
                vec!["jobs", "--where", "payload.a b=1"],
                "payload.PATH=VALUE",
            ),
            (vec!["jobs", "--meta", "tenant"], "KEY=VALUE"),
            (vec!["jobs", "--scan", "10"], "--scan bounds a search"),
            (
                vec!["jobs", "--where", "payload.a=1", "--scan", "0"],
                "from 1 to",
            ),
        ] {
            let out = b.run(&args);
            assert_eq!(out.status.code(), Some(2), "{args:?}");
            let err = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(err.contains(says), "{args:?}: {err}");
        }
    });
}
