#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `errand::schema_status` says what a database holds on both backends, and
//! `connect` refuses each status but the current one with its own error
//! variant (callers match on variants, never on message text). The
//! PostgreSQL half needs `ERRAND_TEST_POSTGRES_URL` (a schema of its own)
//! and says SKIPPED without it; under CI it must be set.

use errand::{ConnectOptions, Error, SchemaStatus};

const SQLITE_VERSION: i64 = errand::sqlite::SCHEMA_VERSION;
const PG_VERSION: i64 = errand::postgres::SCHEMA_VERSION;

/// The status, and the variant of `connect`'s refusal (`None`: it opens).
async fn judged(db: &str, options: &ConnectOptions) -> (SchemaStatus, Option<&'static str>) {
    let status = errand::schema_status(db, options).await.unwrap();
    let refusal = errand::connect(db, options).await.err().map(|e| e.code());
    (status, refusal)
}

#[tokio::test]
async fn sqlite_files_are_judged_and_refused_by_variant() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).to_string_lossy().into_owned();
    let options = ConnectOptions::default();

    let missing = path("missing.db");
    assert_eq!(
        judged(&missing, &options).await,
        (SchemaStatus::Missing, Some("not_a_database"))
    );
    assert!(
        !std::path::Path::new(&missing).exists(),
        "looking created it"
    );

    let text = path("notes.txt");
    std::fs::write(&text, "not a database\n".repeat(100)).unwrap();
    assert_eq!(
        judged(&text, &options).await,
        (SchemaStatus::NotADatabase, Some("not_a_database"))
    );

    let empty = path("empty.db");
    std::fs::write(&empty, b"").unwrap();
    assert_eq!(
        judged(&empty, &options).await,
        (SchemaStatus::NotErrand, Some("not_errand"))
    );

    let db = path("jobs.db");
    let migrate = ConnectOptions {
        create_and_migrate: true,
        ..ConnectOptions::default()
    };
    drop(errand::connect(&db, &migrate).await.unwrap());
    assert_eq!(
        judged(&db, &options).await,
        (SchemaStatus::Current(SQLITE_VERSION), None)
    );

    let history = |sql: &str, version: i64| {
        errand::sqlite::rusqlite::Connection::open(&db)
            .unwrap()
            .execute(sql, [version])
            .unwrap();
    };
    // A development build's history, which began with another migration.
    history(
        "UPDATE errand_schema_history SET name = 'jobs' WHERE version = ?1",
        1,
    );
    assert_eq!(
        judged(&db, &options).await,
        (
            SchemaStatus::Unreleased {
                found: SQLITE_VERSION
            },
            Some("schema_unreleased")
        )
    );
    let e = errand::connect(&db, &migrate).await.err().unwrap();
    assert!(matches!(e, Error::SchemaUnreleased(_)), "{e}");
    history(
        "UPDATE errand_schema_history SET name = 'baseline' WHERE version = ?1",
        1,
    );
    history(
        "INSERT INTO errand_schema_history (version, name, applied_on, checksum) \
         VALUES (?1, 'future', '2030-01-01', '0')",
        SQLITE_VERSION + 1,
    );
    let newer = SchemaStatus::Newer {
        found: SQLITE_VERSION + 1,
        known: SQLITE_VERSION,
    };
    assert_eq!(judged(&db, &options).await, (newer, Some("schema_too_new")));
    // Migrating cannot help a newer schema: refused the same way.
    let e = errand::connect(&db, &migrate).await.err().unwrap();
    assert!(matches!(e, Error::SchemaTooNew(_)), "{e}");
}

#[tokio::test]
async fn postgres_schemas_are_judged_and_refused_by_variant() {
    let Some(url) = errand_testsupport::postgres_url("the PostgreSQL half") else {
        return;
    };
    let schema = format!("errand_status_{}", std::process::id());
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let sql = |s: String| {
        let client = &client;
        async move { client.batch_execute(&s).await.unwrap() }
    };
    sql(format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
    let options = ConnectOptions {
        schema: Some(schema.clone()),
        ..ConnectOptions::default()
    };

    // A schema that does not exist: the database is there, Errand's part
    // of it is not (`errand migrate` creates both).
    assert_eq!(
        judged(&url, &options).await,
        (SchemaStatus::NotErrand, Some("not_errand"))
    );
    sql(format!("CREATE SCHEMA {schema}")).await;
    assert_eq!(
        judged(&url, &options).await,
        (SchemaStatus::NotErrand, Some("not_errand"))
    );

    let migrate = ConnectOptions {
        create_and_migrate: true,
        ..options.clone()
    };
    drop(errand::connect(&url, &migrate).await.unwrap());
    assert_eq!(
        judged(&url, &options).await,
        (SchemaStatus::Current(PG_VERSION), None)
    );
    sql(format!(
        "UPDATE {schema}.errand_schema_history SET name = 'jobs' WHERE version = 1"
    ))
    .await;
    assert_eq!(
        judged(&url, &options).await,
        (
            SchemaStatus::Unreleased { found: PG_VERSION },
            Some("schema_unreleased")
        )
    );
    let e = errand::connect(&url, &migrate).await.err().unwrap();
    assert!(matches!(e, Error::SchemaUnreleased(_)), "{e}");
    sql(format!(
        "UPDATE {schema}.errand_schema_history SET name = 'baseline' WHERE version = 1"
    ))
    .await;
    sql(format!(
        "INSERT INTO {schema}.errand_schema_history (version, name, applied_on, checksum) \
         VALUES ({}, 'future', '2030-01-01', '0')",
        PG_VERSION + 1
    ))
    .await;
    assert_eq!(
        judged(&url, &options).await,
        (
            SchemaStatus::Newer {
                found: PG_VERSION + 1,
                known: PG_VERSION
            },
            Some("schema_too_new")
        )
    );
    let e = errand::connect(&url, &migrate).await.err().unwrap();
    assert!(matches!(e, Error::SchemaTooNew(_)), "{e}");
    sql(format!("DROP SCHEMA {schema} CASCADE")).await;
}
