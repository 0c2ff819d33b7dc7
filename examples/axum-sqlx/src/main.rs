//! A small shop on PostgreSQL: an axum service whose `POST /orders` writes
//! the order and enqueues its `receipt` job in one sqlx transaction, and an
//! Errand worker, in the same process, that writes the receipt and marks
//! the job done in another one.
//!
//! ```sh
//! cargo run -p axum-sqlx-example -- --bind 127.0.0.1:3000
//! curl -s -X POST localhost:3000/orders -H 'Content-Type: application/json' \
//!      -d '{"id": "o-1", "customer": "ada", "cents": 1250}'
//! curl -s localhost:3000/orders/o-1      # the receipt and the job, once the worker ran
//! ```
//!
//! Settings (flag or environment variable):
//!
//! * `--database-url` / `DATABASE_URL`, default
//!   `postgres://postgres@127.0.0.1:5432/postgres`;
//! * `--schema` / `ERRAND_SCHEMA`: Errand's tables, default `errand`
//!   (created and migrated at start-up);
//! * `--app-schema` / `APP_SCHEMA`: the shop's own tables, default `shop`
//!   (created at start-up);
//! * `--bind`, default `127.0.0.1:3000` (port 0 picks a free one; the
//!   address bound is printed as `listening on http://ADDR`).
//!
//! Both sides of the job share one database, so neither needs an outbox or
//! a deduplication table: the order and its job commit together or not at
//! all, and the receipt and the job's completion commit together or not at
//! all. The receipts table has no unique constraint on purpose — what keeps
//! it to one receipt per order is that a receipt is only ever written in the
//! transaction that settles the job's lease.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use clap::Parser;
use errand::{
    JobArgs, JobContext, JobId, JobOptions, JobStore, NewJob, Outcome, PgOptions, PgStore, Runtime,
};
use errand_postgres::sqlx_adapter;
use serde::{Deserialize, Serialize};
use serde_json::json;
use sqlx::Row;
use sqlx::postgres::{PgPool, PgPoolOptions};
use tokio::sync::watch;

/// How much one customer may have ordered in all (in cents).
const CREDIT_LIMIT_CENTS: i64 = 100_000;

#[derive(Debug, Parser)]
#[command(about = "An axum service that enqueues jobs in its sqlx transactions and runs them")]
struct Args {
    /// The PostgreSQL server and database.
    #[arg(
        long,
        env = "DATABASE_URL",
        default_value = "postgres://postgres@127.0.0.1:5432/postgres"
    )]
    database_url: String,
    /// The schema of Errand's tables (created and migrated at start-up).
    #[arg(long, env = "ERRAND_SCHEMA", default_value = "errand")]
    schema: String,
    /// The schema of the shop's tables (created at start-up).
    #[arg(long, env = "APP_SCHEMA", default_value = "shop")]
    app_schema: String,
    /// Where the HTTP API listens (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:3000")]
    bind: SocketAddr,
    /// Receipts written at once by the worker.
    #[arg(long, default_value_t = 4)]
    concurrency: usize,
}

/// The job: send the receipt of one order. Its kind, queue and budget are
/// written once, here, and used by both the enqueue and the worker.
#[derive(Debug, Serialize, Deserialize)]
struct SendReceipt {
    order: String,
}

impl JobArgs for SendReceipt {
    const KIND: &'static str = "receipt";
    fn options() -> JobOptions {
        JobOptions {
            queue: Some("receipts"),
            max_attempts: Some(5),
            ..JobOptions::default()
        }
    }
}

/// What the HTTP handlers and the job handler share.
#[derive(Debug)]
struct App {
    pool: PgPool,
    store: PgStore,
    /// Errand's schema, as `sqlx_adapter` takes it.
    schema: String,
    /// The shop's schema, double-quoted for SQL.
    app: String,
}

/// The job of an order: one business event, one job id, so a retried
/// request cannot enqueue a second receipt.
fn receipt_job_id(order: &str) -> errand::Result<JobId> {
    JobId::new(format!("receipt-{order}"))
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .init();
    let args = Args::parse();
    let app = Arc::new(open(&args).await?);

    let runtime = Runtime::builder(Arc::new(app.store.clone()))
        .register({
            let app = app.clone();
            move |job: SendReceipt, ctx: JobContext| send_receipt(app.clone(), job, ctx)
        })?
        .queue("receipts", args.concurrency)?
        .build()?;

    let router = Router::new()
        .route("/orders", post(create_order))
        .route("/orders/{id}", get(show_order))
        .with_state(app.clone());
    let listener = tokio::net::TcpListener::bind(args.bind)
        .await
        .with_context(|| format!("binding {}", args.bind))?;
    // Scripts and the test read the port from this line.
    println!("listening on http://{}", listener.local_addr()?);

    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        shutdown_signal().await;
        let _ = stop_tx.send(true);
    });
    let worker = tokio::spawn(runtime.run_until(stopped(stop_rx.clone())));
    axum::serve(listener, router)
        .with_graceful_shutdown(stopped(stop_rx))
        .await
        .context("serving HTTP")?;
    let stats = worker.await.context("the worker task")??;
    tracing::info!(?stats, "stopped");
    Ok(())
}

/// Connects, migrates Errand's schema and creates the shop's tables.
async fn open(args: &Args) -> anyhow::Result<App> {
    let app = quote_identifier(&args.app_schema)?;
    let store = PgStore::connect(
        &args.database_url,
        PgOptions {
            schema: args.schema.clone(),
            migrate: true,
            ..PgOptions::default()
        },
    )
    .await
    .context("opening Errand's store")?;
    let pool = PgPoolOptions::new()
        .max_connections(8)
        .connect(&args.database_url)
        .await
        .context("connecting the sqlx pool")?;
    sqlx::raw_sql(&format!(
        "CREATE SCHEMA IF NOT EXISTS {app};
         CREATE TABLE IF NOT EXISTS {app}.orders (
             id         text PRIMARY KEY,
             customer   text NOT NULL,
             cents      bigint NOT NULL CHECK (cents > 0),
             created_at timestamptz NOT NULL DEFAULT now()
         );
         -- No unique constraint on order_id: see the module documentation.
         CREATE TABLE IF NOT EXISTS {app}.receipts (
             seq        bigserial PRIMARY KEY,
             order_id   text NOT NULL REFERENCES {app}.orders (id),
             job_id     text NOT NULL,
             attempt    integer NOT NULL,
             body       text NOT NULL,
             created_at timestamptz NOT NULL DEFAULT now()
         );"
    ))
    .execute(&pool)
    .await
    .context("creating the shop's tables")?;
    Ok(App {
        pool,
        store,
        schema: args.schema.clone(),
        app,
    })
}

/// `name` double-quoted, after checking it is a plain lower-case
/// identifier (so it never needs escaping).
fn quote_identifier(name: &str) -> anyhow::Result<String> {
    let plain = !name.is_empty()
        && name.len() <= 63
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    anyhow::ensure!(
        plain,
        "the schema name `{name}` must be lower-case letters, digits and _ (not starting with a digit)"
    );
    Ok(format!("\"{name}\""))
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NewOrder {
    id: String,
    customer: String,
    cents: i64,
}

/// An HTTP error: a status and a message, as `{"error": "..."}`.
#[derive(Debug)]
struct HttpError(StatusCode, String);

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

impl From<sqlx::Error> for HttpError {
    fn from(e: sqlx::Error) -> Self {
        tracing::error!(error = %e, "database error");
        HttpError(StatusCode::INTERNAL_SERVER_ERROR, "database error".into())
    }
}

impl From<errand::Error> for HttpError {
    fn from(e: errand::Error) -> Self {
        match e {
            errand::Error::Invalid(m) => HttpError(StatusCode::BAD_REQUEST, m),
            other => {
                tracing::error!(error = %other, "errand error");
                HttpError(StatusCode::INTERNAL_SERVER_ERROR, "job store error".into())
            }
        }
    }
}

/// `POST /orders`: the order row and its receipt job, in one transaction.
async fn create_order(
    State(app): State<Arc<App>>,
    Json(order): Json<NewOrder>,
) -> Result<(StatusCode, Json<serde_json::Value>), HttpError> {
    if order.customer.trim().is_empty() || order.cents <= 0 {
        return Err(HttpError(
            StatusCode::BAD_REQUEST,
            "an order needs a customer and a positive amount".into(),
        ));
    }
    let job_id = receipt_job_id(&order.id)?;
    let a = &app.app;

    let mut tx = app.pool.begin().await?;
    let inserted = sqlx::query(&format!(
        "INSERT INTO {a}.orders (id, customer, cents) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING"
    ))
    .bind(&order.id)
    .bind(&order.customer)
    .bind(order.cents)
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(HttpError(
            StatusCode::CONFLICT,
            format!("order `{}` exists already", order.id),
        ));
    }
    // The job joins the order's transaction: it exists if and only if the
    // order commits.
    let job = NewJob::of(&SendReceipt {
        order: order.id.clone(),
    })?
    .with_id(job_id);
    let enqueued = sqlx_adapter::enqueue_in(&mut tx, &app.schema, job).await?;

    // The credit check runs last, after both writes, to show that a request
    // that fails takes its job down with it: returning here drops `tx`,
    // which rolls back the order and the job alike. (The advisory lock
    // makes two orders of one customer take turns at the check.)
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext($1))")
        .bind(&order.customer)
        .execute(&mut *tx)
        .await?;
    let total: i64 = sqlx::query(&format!(
        "SELECT sum(cents)::bigint FROM {a}.orders WHERE customer = $1"
    ))
    .bind(&order.customer)
    .fetch_one(&mut *tx)
    .await?
    .try_get(0)?;
    if total > CREDIT_LIMIT_CENTS {
        return Err(HttpError(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "customer `{}` would owe {total} cents, over the limit of {CREDIT_LIMIT_CENTS}",
                order.customer
            ),
        ));
    }
    tx.commit().await?;
    Ok((
        StatusCode::CREATED,
        Json(json!({ "order": order.id, "job": enqueued.id.as_str() })),
    ))
}

/// `GET /orders/{id}`: the order, how many receipts it has, and its job.
async fn show_order(
    State(app): State<Arc<App>>,
    Path(id): Path<String>,
) -> Result<Json<serde_json::Value>, HttpError> {
    let a = &app.app;
    let row = sqlx::query(&format!(
        "SELECT o.customer, o.cents,
                (SELECT count(*) FROM {a}.receipts r WHERE r.order_id = o.id)
         FROM {a}.orders o WHERE o.id = $1"
    ))
    .bind(&id)
    .fetch_optional(&app.pool)
    .await?
    .ok_or_else(|| HttpError(StatusCode::NOT_FOUND, format!("no order `{id}`")))?;
    let customer: String = row.try_get(0)?;
    let cents: i64 = row.try_get(1)?;
    let receipts: i64 = row.try_get(2)?;
    let job = match app.store.get(&receipt_job_id(&id)?).await {
        Ok(job) => json!({
            "id": job.id.as_str(),
            "state": job.state.as_str(),
            "attempts": job.attempts,
        }),
        Err(errand::Error::NotFound(_)) => serde_json::Value::Null,
        Err(e) => return Err(e.into()),
    };
    Ok(Json(json!({
        "id": id,
        "customer": customer,
        "cents": cents,
        "receipts": receipts,
        "job": job,
    })))
}

/// The `receipt` handler: writes the receipt and completes the job in one
/// transaction, so the receipt exists exactly when the job is done.
async fn send_receipt(app: Arc<App>, job: SendReceipt, ctx: JobContext) -> Outcome {
    match write_receipt(&app, &job, &ctx).await {
        Ok(()) => Outcome::Completed,
        // Nothing was committed: the job is retried (or, if its lease was
        // lost, left to whoever holds it now).
        Err(e) => Outcome::retry(format!("{e:#}")),
    }
}

async fn write_receipt(app: &App, job: &SendReceipt, ctx: &JobContext) -> anyhow::Result<()> {
    let a = &app.app;
    let mut tx = app.pool.begin().await?;
    let row = sqlx::query(&format!(
        "SELECT customer, cents FROM {a}.orders WHERE id = $1"
    ))
    .bind(&job.order)
    .fetch_one(&mut *tx)
    .await
    .with_context(|| format!("reading order `{}`", job.order))?;
    let customer: String = row.try_get(0)?;
    let cents: i64 = row.try_get(1)?;
    let body = format!(
        "Dear {customer}, thank you for order {}: {}.{:02} paid.",
        job.order,
        cents / 100,
        cents % 100
    );
    sqlx::query(&format!(
        "INSERT INTO {a}.receipts (order_id, job_id, attempt, body) VALUES ($1, $2, $3, $4)"
    ))
    .bind(&job.order)
    .bind(ctx.id().as_str())
    .bind(i32::try_from(ctx.attempt()).unwrap_or(i32::MAX))
    .bind(&body)
    .execute(&mut *tx)
    .await?;
    // Fenced by the lease: if this worker no longer holds the job, this
    // fails and the receipt above is rolled back with the transaction.
    sqlx_adapter::complete_in(&mut tx, &app.schema, &ctx.lease).await?;
    tx.commit().await?;
    tracing::info!(order = %job.order, attempt = ctx.attempt(), "receipt written");
    Ok(())
}

/// Completes once the stop flag is set.
async fn stopped(mut stop: watch::Receiver<bool>) {
    let _ = stop.wait_for(|s| *s).await;
}

/// SIGINT or SIGTERM.
async fn shutdown_signal() {
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}
