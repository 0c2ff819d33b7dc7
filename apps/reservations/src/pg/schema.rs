//! Opening and initialising the PostgreSQL database: the schema checks
//! (Errand's and the application's versions), the migrations, the seed
//! units and the refusal of a version-1 database whose holds would overlap.

use errand::{PgOptions, PgStore};

use super::{APP_SCHEMA, Pg, units_in};
use crate::error::{Error, Result};
use crate::model::{
    APP_HISTORY_TABLE, APP_SCHEMA_VERSION, InitReport, LegacyOverlap, SEED_UNITS,
    legacy_overlap_refusal,
};

mod embedded {
    refinery::embed_migrations!("migrations/postgres");
}

fn history_table() -> String {
    format!("{APP_SCHEMA}.{APP_HISTORY_TABLE}")
}

/// Rewords the library's connection errors for this program's users. The
/// URL is never echoed (it may hold a password).
fn open_error(e: errand::Error) -> Error {
    match e {
        errand::Error::NotErrand(_) => not_initialised("no Errand tables"),
        errand::Error::SchemaOutdated(detail) => not_initialised(&detail),
        errand::Error::SchemaTooNew(detail) => Error::SchemaTooNew(format!(
            "the PostgreSQL database was written by a newer program ({detail}); upgrade reservations before using it"
        )),
        errand::Error::Invalid(m) => Error::Database(m),
        errand::Error::Storage { message, .. } => Error::Database(message),
        other => Error::from(other),
    }
}

fn not_initialised(what: &str) -> Error {
    Error::Database(format!(
        "the PostgreSQL database is not a reservations database ({what}); run `reservations init` with the same URL first"
    ))
}

async fn app_schema_version(client: &tokio_postgres::Client) -> Result<Option<i64>> {
    let exists: Option<String> = client
        .query_one("SELECT to_regclass($1)::text", &[&history_table()])
        .await?
        .try_get(0)?;
    if exists.is_none() {
        return Ok(None);
    }
    let v: Option<i32> = client
        .query_one(
            &format!("SELECT max(version) FROM {}", history_table()),
            &[],
        )
        .await?
        .try_get(0)?;
    Ok(v.map(i64::from))
}

fn too_new(v: i64) -> Error {
    Error::SchemaTooNew(format!(
        "the PostgreSQL database was written by a newer program (reservations schema version {v}, this program knows up to {APP_SCHEMA_VERSION}); upgrade reservations before using it"
    ))
}

/// Applies Errand's and the application's migrations and seeds the units.
pub(crate) async fn init(url: &str) -> Result<InitReport> {
    let store = PgStore::connect(
        url,
        PgOptions {
            migrate: true,
            pool_size: 2,
            ..PgOptions::default()
        },
    )
    .await
    .map_err(open_error)?;
    let mut client = store.pool().get().await?;
    match app_schema_version(&client).await? {
        Some(v) if v > APP_SCHEMA_VERSION => return Err(too_new(v)),
        Some(1) => {
            let found = legacy_overlaps(&client).await?;
            if !found.is_empty() {
                return Err(legacy_overlap_refusal(&found));
            }
        }
        _ => {}
    }
    client
        .batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {APP_SCHEMA}"))
        .await?;
    let pg: &mut tokio_postgres::Client = &mut client;
    embedded::migrations::runner()
        .set_migration_table_name(history_table())
        .run_async(pg)
        .await
        .map_err(|e| migration_error(&e.to_string()))?;
    let tx = client.transaction().await?;
    let mut created_units = Vec::new();
    for (id, name) in SEED_UNITS {
        let n = tx
            .execute(
                "INSERT INTO reservations.units (id, name) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING",
                &[&id, &name],
            )
            .await?;
        if n == 1 {
            created_units.push(id.to_owned());
        }
    }
    let units = units_in(&tx).await?;
    tx.commit().await?;
    Ok(InitReport {
        backend: "postgres",
        created_units,
        units,
    })
}

/// Names the fix when the server lacks the extension the overlap
/// constraint needs.
fn migration_error(text: &str) -> Error {
    if text.contains("btree_gist") {
        Error::Migration(format!(
            "{text}; the constraint that keeps two stays of one unit apart needs the PostgreSQL extension btree_gist: install the server's contrib modules (the postgresql-contrib package), or have a superuser run `CREATE EXTENSION btree_gist` in this database, then run `reservations init` again"
        ))
    } else {
        Error::Migration(text.to_owned())
    }
}

/// On a database of schema version 1 (no stays): the held or paid
/// reservations that would share a night once each gets the night of the
/// day it was made.
async fn legacy_overlaps(client: &tokio_postgres::Client) -> Result<Vec<LegacyOverlap>> {
    client
        .query(
            "SELECT unit_id, ((created_at AT TIME ZONE 'UTC')::date)::text AS night,
                    array_agg(id ORDER BY id)
             FROM reservations.reservations WHERE status IN ('held', 'paid')
             GROUP BY unit_id, night HAVING count(*) > 1
             ORDER BY unit_id, night LIMIT 100",
            &[],
        )
        .await?
        .iter()
        .map(|r| {
            Ok(LegacyOverlap {
                unit: r.try_get(0)?,
                night: r.try_get(1)?,
                ids: r.try_get(2)?,
            })
        })
        .collect()
}

impl Pg {
    /// Connects and checks both schemas.
    pub(crate) async fn open(url: &str) -> Result<Self> {
        let store = PgStore::connect(url, PgOptions::default())
            .await
            .map_err(open_error)?;
        let client = store.pool().get().await?;
        match app_schema_version(&client).await? {
            None => return Err(not_initialised("no reservations tables")),
            Some(v) if v > APP_SCHEMA_VERSION => return Err(too_new(v)),
            Some(v) if v < APP_SCHEMA_VERSION => {
                return Err(not_initialised(&format!(
                    "reservations schema version {v}, this program needs {APP_SCHEMA_VERSION}"
                )));
            }
            Some(_) => {}
        }
        drop(client);
        Ok(Pg { store })
    }
}
