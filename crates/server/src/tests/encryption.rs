//! A server whose store holds encryption keys: clients send and read clear
//! JSON while the store holds ciphertext; a server without the key shows
//! what it stored and fails leased jobs it cannot read.

use std::sync::Arc;

use axum::http::StatusCode;
use errand::encryption::Keyring;
use errand::{ErrorClass, JobId, JobState, SqliteOptions, SqliteStore, Store};
use serde_json::json;

use super::Api;
use crate::{ServerConfig, router};

/// A server over the test queue's file, whose store seals with `keys`.
fn keyed_api(keys: &Keyring) -> (Api, Arc<dyn Store>) {
    let plain = Api::new();
    let keyed = SqliteStore::open(
        plain.q.sqlite().path(),
        SqliteOptions {
            clock: Arc::new(plain.q.clock().clone()),
            keys: Some(Arc::new(keys.clone())),
            ..SqliteOptions::default()
        },
    )
    .expect("the keyed store");
    let keyless = plain.q.store();
    let api = Api {
        app: router(Arc::new(keyed), ServerConfig::default()),
        q: plain.q,
    };
    (api, keyless)
}

#[tokio::test]
async fn clients_read_clear_json_while_the_store_holds_ciphertext() {
    let keys = Keyring::parse(&format!("k1:{}", Keyring::generate_key())).expect("keys");
    let (api, keyless) = keyed_api(&keys);
    let sent = json!({"card": "4242"});
    let r = api
        .post(
            "/v1/jobs",
            &json!({"kind": "charge", "id": "c1", "payload": sent}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    assert_eq!(r.body["job"]["payload"], sent);
    let stored = keyless
        .get(&JobId::new("c1").expect("id"))
        .await
        .expect("c1");
    assert_eq!(stored.payload.encrypted_with().as_deref(), Some("k1"));
    assert!(!stored.payload.as_str().contains("4242"));
    let r = api.get("/v1/jobs/c1").await;
    assert_eq!(r.body["payload"], sent, "{}", r.body);
    let r = api.post("/v1/leases", &json!({"limit": 1})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["jobs"][0]["job"]["payload"], sent, "{}", r.body);

    // Without the key: the stored form, which names its key.
    let keyless_api = Api {
        app: router(keyless.clone(), ServerConfig::default()),
        q: errand::testkit::TestQueue::new().expect("q"),
    };
    let r = keyless_api.get("/v1/jobs/c1").await;
    assert_eq!(
        r.body["payload"]["errand_encrypted"]["key"], "k1",
        "{}",
        r.body
    );
}

#[tokio::test]
async fn a_server_without_the_key_fails_the_jobs_it_leases() {
    let keys = Keyring::parse(&format!("k1:{}", Keyring::generate_key())).expect("keys");
    let (api, keyless) = keyed_api(&keys);
    let r = api
        .post(
            "/v1/jobs",
            &json!({"kind": "charge", "id": "c2", "payload": {"n": 1}}),
        )
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let keyless_api = Api {
        app: router(keyless.clone(), ServerConfig::default()),
        q: errand::testkit::TestQueue::new().expect("q"),
    };
    let r = keyless_api.post("/v1/leases", &json!({"limit": 1})).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["jobs"], json!([]), "{}", r.body);
    let job = keyless
        .get(&JobId::new("c2").expect("id"))
        .await
        .expect("c2");
    assert_eq!(job.state, JobState::Dead);
    assert_eq!(job.last_error_class, Some(ErrorClass::Permanent));
    let error = job.last_error.unwrap_or_default();
    assert!(error.contains("key `k1`"), "{error}");
}
