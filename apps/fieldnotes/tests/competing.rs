#![allow(clippy::unwrap_used)]
//! Two worker processes started together on one file: the claim is atomic,
//! so exactly one of them runs the job.

mod common;

use std::process::{Command, Stdio};

use common::*;
use serde_json::Value;

#[test]
fn two_competing_workers_deliver_one_receipt_in_one_attempt() {
    for trial in 0..6 {
        let db = Db::init();
        let id = pay(&db);
        let spawn = || {
            Command::new(BIN)
                .args(["work", db.arg(), "--json"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        };
        let (a, b) = (spawn(), spawn());
        let mut outcomes: Vec<String> = [a, b]
            .into_iter()
            .map(|child| {
                let o = child.wait_with_output().unwrap();
                let v: Value = report(&o);
                if v["outcome"] == "acknowledged" {
                    assert_eq!(v["job_id"], id.as_str());
                    assert_eq!(v["attempt"], 1);
                }
                v["outcome"].as_str().unwrap().to_owned()
            })
            .collect();
        outcomes.sort();
        assert_eq!(outcomes, ["acknowledged", "idle"], "trial {trial}");

        let job = only_job(&db);
        assert_eq!(job["state"], "done", "trial {trial}");
        assert_eq!(job["attempts"], 1, "trial {trial}");
        assert_eq!(receipts(&db).len(), 1, "trial {trial}");
    }
}
