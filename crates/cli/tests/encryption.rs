#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Encrypted payloads as an operator meets them: keys from the
//! environment or a file, `errand show` with and without the key, a
//! worker given the key, `errand keys rotate` (also killed half-way and
//! run again), and refused keys. On SQLite and, when
//! `ERRAND_TEST_POSTGRES_URL` is set, on PostgreSQL.

use std::process::{Command, Output};
use std::time::Duration;

use serde_json::Value;

mod common;

use common::{Backend, both};

/// A fresh key as `errand keys generate --id ID` prints it.
fn generated(id: &str) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_errand"))
        .args(["keys", "generate", "--id", id])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    assert!(line.starts_with(&format!("{id}:")), "{line}");
    line
}

impl Backend {
    /// `errand` with `ERRAND_ENCRYPTION_KEYS` set to `keys`.
    fn keyed(&self, keys: &str, args: &[&str]) -> Output {
        self.command(args)
            .env("ERRAND_ENCRYPTION_KEYS", keys)
            .output()
            .unwrap()
    }

    fn keyed_ok(&self, keys: &str, args: &[&str]) -> Value {
        let out = self.keyed(keys, args);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap_or(Value::Null)
    }

    fn shown(&self, keys: Option<&str>, id: &str) -> String {
        let out = match keys {
            Some(k) => self.keyed(k, &["show", id]),
            None => self.run(&["show", id]),
        };
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }
}

#[test]
fn an_operator_encrypts_reads_and_rotates_payloads() {
    both("encryption_cli", |b| {
        let (k1, k2) = (generated("k1"), generated("k2"));
        b.keyed_ok(
            &k1,
            &[
                "enqueue",
                "--kind",
                "charge",
                "--id",
                "c1",
                "--payload",
                r#"{"card":"4242"}"#,
            ],
        );
        // Without the key: the key's name, never the card.
        let without = b.shown(None, "c1");
        assert!(
            without.contains("payload:      encrypted (key k1)"),
            "{without}"
        );
        assert!(!without.contains("4242"));
        let json = b.ok(&["show", "c1", "--json"]);
        assert_eq!(json["payload"]["errand_encrypted"]["key"], "k1", "{json}");
        assert!(b.shown(Some(&k1), "c1").contains(r#"{"card":"4242"}"#));

        // A worker given the key reads the clear payload on stdin; its
        // output is stored encrypted.
        let file = b.dir.join("seen.json");
        let exec = format!(
            "cat > '{}' && echo '{{\"ok\":1}}' > \"$ERRAND_OUTPUT\"",
            file.display()
        );
        let keys_file = b.dir.join("keys");
        std::fs::write(&keys_file, format!("# the current key first\n{k1}\n")).unwrap();
        let keys_flag = keys_file.display().to_string();
        b.ok(&["work", "--once", "--keys-file", &keys_flag, "--exec", &exec]);
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            r#"{"card":"4242"}"#
        );
        let without = b.shown(None, "c1");
        assert!(
            without.contains("output:       encrypted (key k1)"),
            "{without}"
        );
        assert!(
            b.shown(Some(&k1), "c1")
                .contains("output:       {\"ok\":1}")
        );

        // Rotation to k2, given with k1 so old values open.
        let both_keys = format!("{k2},{k1}");
        let done = b.keyed_ok(&both_keys, &["keys", "rotate", "--to", "k2", "--json"]);
        assert_eq!(
            (done["jobs"].as_u64(), done["rewritten"].as_u64()),
            (Some(1), Some(2))
        );
        assert!(
            b.shown(None, "c1")
                .contains("payload:      encrypted (key k2)")
        );
        assert!(b.shown(Some(&k2), "c1").contains(r#"{"card":"4242"}"#));
        let again = b.keyed_ok(&both_keys, &["keys", "rotate", "--to", "k2", "--json"]);
        assert_eq!(
            (again["rewritten"].as_u64(), again["already"].as_u64()),
            (Some(0), Some(2))
        );

        // Only k1 given: the values under k2 cannot be rotated back.
        let out = b.keyed(&k1, &["keys", "rotate", "--to", "k1"]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("2 values are under keys not given"), "{err}");
    });
}

#[test]
fn bad_keys_are_refused_before_anything_is_written() {
    let b = Backend::sqlite();
    let k1 = generated("k1");
    for (keys, says) in [
        ("k1:AAAA", "is 3 bytes, not 32"),
        ("nocolon", "no `:`"),
        (&format!("{k1},{k1}"), "twice"),
    ] {
        let out = b.keyed(
            keys,
            &["enqueue", "--kind", "k", "--id", "x", "--payload", "{}"],
        );
        assert_eq!(out.status.code(), Some(2), "{keys}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{keys}: {err}");
        assert!(!err.contains(&k1[3..]), "a key leaks into: {err}");
    }
    assert_eq!(b.ok(&["jobs", "--json"]), serde_json::json!([]));
    let made = b.ok(&["keys", "generate", "--id", "k5", "--json"]);
    assert_eq!(
        made["entry"],
        format!("k5:{}", made["key"].as_str().unwrap())
    );
    let out = b.run(&["keys", "generate", "--id", "bad id"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("letters, digits"));
    let out = b.keyed(&k1, &["keys", "rotate", "--to", "k9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no key `k9` is given"));
    let out = b.run(&["keys", "rotate", "--to", "k1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no keys are given"));
    let missing = b.dir.join("nothing-here");
    let out = b.run(&["jobs", "--keys-file", &missing.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read the keys file"));
}

/// How many of the SQLite file's payloads are under `key`, and how many
/// are clear.
fn under(b: &Backend, key: &str) -> (u64, u64) {
    b.with_store(async |store| {
        let page = store.stored_values(None, 100_000).await.unwrap();
        let sealed = page
            .values
            .iter()
            .filter(|v| v.value.encrypted_with().as_deref() == Some(key))
            .count() as u64;
        let clear = page
            .values
            .iter()
            .filter(|v| v.value.encrypted_with().is_none())
            .count() as u64;
        (sealed, clear)
    })
}

#[test]
fn a_rotation_killed_half_way_leaves_every_value_readable_and_goes_on() {
    let b = Backend::sqlite();
    let total = 3000u64;
    b.with_store(async |store| {
        let jobs: Vec<errand::NewJob> = (0..total)
            .map(|n| {
                errand::NewJob::new(
                    "k",
                    errand::Payload::from_json_text(format!(r#"{{"n":{n}}}"#)).unwrap(),
                )
                .unwrap()
            })
            .collect();
        store.insert_many(jobs).await.unwrap();
    });
    let k1 = generated("k1");
    let mut child = b
        .command(&["keys", "rotate", "--to", "k1", "--batch", "1"])
        .env("ERRAND_ENCRYPTION_KEYS", &k1)
        .spawn()
        .unwrap();
    // Killed once some values are rewritten, long before all are (each
    // job is its own transaction, synced to disk).
    errand_testsupport::wait_until(
        "the rotation to rewrite some values",
        Duration::from_secs(60),
        Duration::from_millis(5),
        || under(&b, "k1").0 >= 20,
    );
    // SIGKILL on Unix: no chance to finish a step.
    child.kill().unwrap();
    let _ = child.wait();
    let (sealed, clear) = under(&b, "k1");
    assert_eq!(sealed + clear, total);
    assert!(clear > 0, "the kill came after the end: {sealed} sealed");
    // Every job still reads, sealed or not.
    let listed = b.keyed_ok(&k1, &["jobs", "--limit", "10000", "--json"]);
    let payloads: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["payload"]["n"].as_u64().map_or("?", |_| "ok"))
        .collect();
    assert_eq!(payloads.len() as u64, total);
    assert!(payloads.iter().all(|p| *p == "ok"));
    let done = b.keyed_ok(&k1, &["keys", "rotate", "--to", "k1", "--json"]);
    assert_eq!(done["already"].as_u64(), Some(sealed));
    assert_eq!(done["rewritten"].as_u64(), Some(clear));
    assert_eq!(under(&b, "k1"), (total, 0));
}
