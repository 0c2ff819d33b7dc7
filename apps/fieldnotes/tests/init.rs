#![allow(clippy::unwrap_used)]
//! `init` creates and seeds the database and never resets money.

mod common;

use common::*;

#[test]
fn init_seeds_the_wallet_and_documents() {
    let db = Db::empty();
    let out = ok(&["init", db.arg()]);
    assert!(out.contains("wallet 10000 cents"), "{out}");
    assert_eq!(db.balance(), 10_000);
    let docs: Vec<(String, i64, Option<i64>)> = {
        let conn = db.conn();
        let mut stmt = conn
            .prepare("SELECT id, price_cents, published_at FROM documents ORDER BY id")
            .unwrap();
        stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    };
    assert_eq!(
        docs,
        vec![
            ("document-7".to_owned(), 500, None),
            ("document-8".to_owned(), 500, None)
        ]
    );
    assert_eq!(json(&["jobs", db.arg()]), serde_json::json!([]));
    assert_eq!(json(&["receipts", db.arg()]), serde_json::json!([]));
}

#[test]
fn init_again_never_resets_money_or_publications() {
    let db = Db::init();
    let id = pay(&db);
    assert_eq!(db.balance(), 9_500);

    let out = ok(&["init", db.arg()]);
    assert!(out.contains("wallet 9500 cents (existing"), "{out}");
    ok(&["init", db.arg()]);

    assert_eq!(db.balance(), 9_500);
    assert_eq!(db.count("documents"), 2);
    assert_eq!(db.count("payments"), 1);
    let payment: Option<String> = db
        .conn()
        .query_row(
            "SELECT payment_id FROM documents WHERE id = 'document-7'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(payment.as_deref(), Some(id.as_str()));
    let job = only_job(&db);
    assert_eq!(job["id"], id.as_str());
    assert_eq!(job["state"], "ready");
    // The document is still published: paying again is refused.
    assert!(!run(&["pay", db.arg()]).status.success());
    assert_eq!(db.balance(), 9_500);
}
