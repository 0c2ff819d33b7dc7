//! # errand-server
//!
//! The JSON HTTP API behind `errand serve`: enqueue a job, read one with its
//! history, list jobs page by page, replay and cancel — over any
//! [`errand::Store`]. [`router`] builds the [`axum::Router`]; [`Server`]
//! binds it and serves it until a shutdown signal; [`serve`] does both.
//! The routes, status codes and error bodies are described in
//! `docs/http-api.md`.
//!
//! ## Design decisions
//!
//! **Safe by default.** The server binds to 127.0.0.1 unless told otherwise,
//! and [`ServerConfig::check`] refuses any other address unless an access
//! token is configured: an API that can enqueue and replay jobs is never
//! reachable from the network without a secret. With a token, every route
//! except `GET /healthz` requires `Authorization: Bearer <token>`, compared
//! in time that does not depend on where the presented token differs.
//!
//! **Browsers are fenced out.** This API is for programs and operators'
//! tools, not for web pages. A request carrying an `Origin` header (or a
//! `Sec-Fetch-Site`/`Sec-Fetch-Mode` header, which browsers add to every
//! request) is refused with 403 before authentication, routing or the body
//! is looked at, so no page can make a visitor's browser enqueue or replay
//! jobs (CSRF) or read them. Without a token (loopback only) the `Host`
//! header must also name a loopback address or `localhost`, which defeats
//! DNS rebinding. The dashboard (`/dashboard/`, module `dashboard`) is a
//! separate surface with its own session and CSRF protections.
//!
//! **Nothing is written by a refused request.** The guards run before the
//! handler; bodies are read under the size limit (413 past it) and parsed
//! with `deny_unknown_fields`; the job is built by [`errand::JobSpec`], the
//! same validation `errand enqueue` uses, and only a fully valid job reaches
//! [`errand::JobStore::insert`].
//!
//! **Workers in any language.** `POST /v1/leases` claims due jobs for a
//! remote worker and hands it each job's lease (id, token, attempt,
//! `lease_until`); the worker settles with `…/complete`, `…/fail`,
//! `…/snooze`, `…/release` or `…/cancel` and renews with `…/heartbeat`.
//! Each is one [`errand::Store`] call fenced by the lease token, exactly as
//! for an in-process worker: a stale token or an expired lease is a 409
//! `lease_lost` and nothing changes. A failure the worker reports without a
//! retry time is scheduled by [`errand::failure_for`] on the configured
//! [`ServerConfig::retry`] policy, the code every other worker uses.
//!
//! **Slow clients do not hold connections.** The server is served by
//! [`http::serve`], which runs hyper's HTTP/1 connection directly (what
//! `axum::serve` wraps) so that it can set a header-read timeout: a client
//! must deliver a request's head within [`ServerConfig::read_timeout`] (the
//! connection is closed otherwise, idle keep-alive connections included)
//! and then its body within the same time again (408 `request_timeout`
//! otherwise). At most [`ServerConfig::max_connections`] connections are
//! open at once. Other programs that serve HTTP (Field Notes) use the same
//! [`http::serve`] and the same loopback check ([`http::check_loopback`]).
//!
//! **Stored schedules.** `/v1/schedules` lists, adds (or replaces), pauses,
//! resumes and removes the periodic schedules kept in the database, which
//! every running service enqueues exactly once per tick; each change goes
//! through [`errand::Admin`] and leaves an audit entry, as `errand schedule`
//! does.
//!
//! **The routes are one table** (`routes::endpoints`), which builds the
//! router and which the tests hold against the OpenAPI description served
//! at `GET /v1/openapi.json`, in both directions.
//!
//! **Idempotent enqueue.** `POST /v1/jobs` with an `id` that already exists
//! creates nothing and answers 200 with the stored job (201 when it was
//! created), so a client that lost its connection retries with the same id
//! and gets exactly one job.
//!
//! **Errors are problem documents** (RFC 9457, `application/problem+json`)
//! whose `code` is a stable machine-readable string: the library's
//! [`errand::Error::code`] for library errors, mapped one-to-one onto status
//! codes, or one of the server's own (`malformed_json`, `unauthorized`,
//! `browser_origin_refused`, `body_too_large`, …). Every kind of bad input —
//! malformed JSON, a wrong type, an unknown field, an invalid name or id —
//! is a 400; the `code` says which. Storage failures are logged in full but
//! answered with a generic detail.
//!
//! **Graceful shutdown.** [`Server::run`] stops accepting connections when
//! its shutdown future completes, ends waiting lease requests (they answer
//! with no jobs), lets in-flight requests finish, and cuts off stragglers
//! after [`ServerConfig::drain`].
#![deny(missing_docs)]

mod admin;
mod bulk;
mod dashboard;
mod guard;
pub mod http;
mod leases;
mod listing;
mod problem;
mod queues;
mod request;
mod routes;
mod schedules;
mod signals;
#[cfg(test)]
mod tests;
mod workflows;

use std::fmt;
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use errand::{RetryPolicy, Store};
use tokio::sync::watch;

pub use http::DEFAULT_MAX_CONNECTIONS;

/// Where the server listens unless told otherwise.
pub const DEFAULT_BIND: SocketAddr = SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 7878));
/// The default request body limit (and payload limit): 1 MiB.
pub const DEFAULT_MAX_BODY: usize = 1024 * 1024;
/// How long in-flight requests may take to finish after shutdown is asked.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(30);
/// How long a client may take to send a request's head, and then its body.
pub const DEFAULT_READ_TIMEOUT: Duration = Duration::from_secs(10);
const MAX_TOKEN_BYTES: usize = 1024;

/// A secret that clients present as `Authorization: Bearer <token>`.
/// Its `Debug` output never shows the secret.
#[derive(Clone)]
pub struct AccessToken(Arc<str>);

impl AccessToken {
    /// Validates a token: 1 to 1024 visible ASCII characters (no spaces),
    /// so that it fits in an `Authorization` header as it is.
    pub fn new(token: impl Into<String>) -> Result<Self, ServeError> {
        let token = token.into();
        if token.is_empty() || token.len() > MAX_TOKEN_BYTES {
            return Err(ServeError::InvalidConfig(format!(
                "the access token must be 1 to {MAX_TOKEN_BYTES} characters long (got {}); generate one with `openssl rand -hex 32`",
                token.len()
            )));
        }
        if !token.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(ServeError::InvalidConfig(
                "the access token may hold only visible ASCII characters (no spaces or control characters); generate one with `openssl rand -hex 32`".into(),
            ));
        }
        Ok(AccessToken(token.into()))
    }

    /// The token's length in bytes (the length is not secret enough to hide
    /// from the operator who chose it; a short token deserves a warning).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always `false`: an empty token is refused by [`AccessToken::new`].
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Compares `presented` with the token in time that depends only on the
    /// token's length, never on where the two differ.
    pub(crate) fn matches(&self, presented: &[u8]) -> bool {
        let expected = self.0.as_bytes();
        let mut diff = u64::from(expected.len() != presented.len());
        for (i, e) in expected.iter().enumerate() {
            let p = presented.get(i).copied().unwrap_or(0);
            diff |= u64::from(e ^ p);
        }
        std::hint::black_box(diff) == 0
    }
}

impl fmt::Debug for AccessToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("AccessToken(<redacted>)")
    }
}

/// How the server listens and what it accepts.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The address to listen on (default 127.0.0.1:7878; port 0 picks a
    /// free port, see [`Server::local_addr`]).
    pub bind: SocketAddr,
    /// The access token; required unless `bind` is a loopback address.
    pub token: Option<AccessToken>,
    /// The largest request body accepted, in bytes (default 1 MiB).
    pub max_body: usize,
    /// The largest job payload accepted, in bytes of JSON text (default
    /// 1 MiB).
    pub max_payload: usize,
    /// How long in-flight requests may take to finish after shutdown is
    /// asked (default 30 s).
    pub drain: Duration,
    /// How long a client may take to send a request's head (past it the
    /// connection is closed; an idle keep-alive connection too), and then,
    /// again, its body (past it: 408). Default 10 s.
    pub read_timeout: Duration,
    /// How many connections may be open at once; more clients wait in the
    /// listen backlog (default 512).
    pub max_connections: usize,
    /// When a remote worker's failure runs again if the worker names no
    /// time (default: equal jitter, 1 s base, 1 h cap — as `errand work`).
    pub retry: RetryPolicy,
    /// How often what remote workers settle over the lease API is added to
    /// the dashboard charts' per-minute counts (default 5 s). A running
    /// [`Server`] writes them on this timer and at shutdown (and samples
    /// the queues' depth once a minute); a bare [`router`] writes them when
    /// a settlement finds the interval passed.
    pub chart_counts_every: Duration,
    /// How many `GET /v1/jobs/{id}?wait=` requests may wait for their job
    /// at once; one more is answered 503 with `Retry-After` (default 256).
    /// Each holds a connection while it waits, so it must be below
    /// `max_connections`: the rest stay free for other requests. 0: no
    /// request may wait (every `?wait=` is answered 503).
    pub max_job_waits: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            bind: DEFAULT_BIND,
            token: None,
            max_body: DEFAULT_MAX_BODY,
            max_payload: errand::core::MAX_PAYLOAD_BYTES,
            drain: DEFAULT_DRAIN,
            read_timeout: DEFAULT_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            retry: RetryPolicy::default(),
            chart_counts_every: Duration::from_secs(5),
            max_job_waits: DEFAULT_MAX_JOB_WAITS,
        }
    }
}

/// The default of [`ServerConfig::max_job_waits`]: half the default
/// connections.
pub const DEFAULT_MAX_JOB_WAITS: usize = 256;

impl ServerConfig {
    /// Refuses unsafe or unusable settings: a non-loopback address without
    /// an access token, a zero body or payload limit, a zero read timeout,
    /// a zero connection limit.
    pub fn check(&self) -> Result<(), ServeError> {
        if !is_loopback(self.bind) && self.token.is_none() {
            return Err(ServeError::TokenRequired { addr: self.bind });
        }
        if self.max_body == 0 || self.max_payload == 0 {
            return Err(ServeError::InvalidConfig(
                "the body and payload limits must be at least 1 byte".into(),
            ));
        }
        if self.max_job_waits > 0 && self.max_job_waits >= self.max_connections {
            return Err(ServeError::InvalidConfig(format!(
                "the requests that may wait for a job at once ({}) must be fewer than the \
                 connections ({}), so that waiting requests leave room for the others; \
                 lower --max-job-waits or raise --max-connections",
                self.max_job_waits, self.max_connections
            )));
        }
        self.limits().check()
    }

    /// What the server allows each connection ([`http::serve`]).
    pub fn limits(&self) -> http::Limits {
        http::Limits {
            read_timeout: self.read_timeout,
            max_connections: self.max_connections,
            drain: self.drain,
        }
    }
}

/// Whether `addr` is reachable only from this host (127.0.0.0/8, ::1, or
/// an IPv4-mapped loopback address).
pub fn is_loopback(addr: SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

/// Why the server did not start or stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A non-loopback address without an access token.
    #[error(
        "refusing to listen on {addr} without an access token: anyone who can reach it could enqueue, read, replay and cancel jobs. Set one with --token or ERRAND_TOKEN (generate it with `openssl rand -hex 32`), or bind a loopback address such as 127.0.0.1:7878"
    )]
    TokenRequired {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// A setting was not acceptable; the message says what to change.
    #[error("{0}")]
    InvalidConfig(String),
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server failed while running.
    #[error("the server failed: {0}")]
    Io(#[from] std::io::Error),
}

impl ServeError {
    /// Whether the error is a refused setting (the operator's input), as
    /// opposed to a runtime failure.
    pub fn is_config(&self) -> bool {
        matches!(
            self,
            ServeError::TokenRequired { .. } | ServeError::InvalidConfig(_)
        )
    }
}

/// The API's router over `store`, with the dashboard under `/dashboard/`.
/// It answers every request itself (no listener needed), which is what
/// tests use. Lease requests that wait for work wait their whole time here
/// (a [`Server`] ends them at shutdown).
pub fn router(store: Arc<dyn Store>, config: ServerConfig) -> Router {
    let (_never, stopping) = watch::channel(false);
    full_router(store, config, stopping, Arc::default())
}

/// The JSON API and the dashboard, which has its own guard (sessions and
/// CSRF tokens) instead of the API's browser fence.
fn full_router(
    store: Arc<dyn Store>,
    config: ServerConfig,
    stopping: watch::Receiver<bool>,
    minutes: Arc<errand::MinuteCounter>,
) -> Router {
    let dashboard = dashboard::router(Arc::clone(&store), &config);
    routes::router(store, config, stopping, minutes).merge(dashboard)
}

/// A bound server, not yet serving.
#[derive(Debug)]
pub struct Server {
    listener: tokio::net::TcpListener,
    addr: SocketAddr,
    limits: http::Limits,
    router: Router,
    stop: watch::Sender<bool>,
    store: Arc<dyn Store>,
    minutes: Arc<errand::MinuteCounter>,
    chart_counts_every: Duration,
}

impl Server {
    /// Checks the configuration ([`ServerConfig::check`]) and binds its
    /// address.
    pub async fn bind(store: Arc<dyn Store>, config: ServerConfig) -> Result<Server, ServeError> {
        config.check()?;
        let listener = tokio::net::TcpListener::bind(config.bind)
            .await
            .map_err(|source| ServeError::Bind {
                addr: config.bind,
                source,
            })?;
        let addr = listener.local_addr()?;
        let (stop, stopping) = watch::channel(false);
        let minutes = Arc::new(errand::MinuteCounter::new());
        let chart_counts_every = config.chart_counts_every;
        Ok(Server {
            listener,
            addr,
            limits: config.limits(),
            router: full_router(Arc::clone(&store), config, stopping, Arc::clone(&minutes)),
            stop,
            store,
            minutes,
            chart_counts_every,
        })
    }

    /// The address actually bound (the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves until `shutdown` completes, then stops accepting connections,
    /// ends waiting lease requests and waits for in-flight requests to
    /// finish — at most the configured drain time, after which the
    /// remaining connections are cut off.
    pub async fn run(
        self,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Result<(), ServeError> {
        let Server {
            listener,
            limits,
            router,
            stop,
            store,
            minutes,
            chart_counts_every,
            ..
        } = self;
        let shutdown = async move {
            shutdown.await;
            // Waiting lease requests answer with no jobs at once.
            let _ = stop.send(true);
        };
        let upkeep = tokio::spawn(upkeep(
            Arc::clone(&store),
            Arc::clone(&minutes),
            chart_counts_every,
        ));
        let served = http::serve(listener, router, limits, shutdown).await;
        upkeep.abort();
        if let Err(e) = minutes.flush(store.as_ref()).await {
            tracing::warn!(error = %e, "writing the charts' last per-minute counts failed");
        }
        served
    }
}

/// While a [`Server`] runs: writes what the lease API counted every
/// `every` (at least every 100 ms), once a minute samples the queues'
/// depth for the charts and prunes their old minutes (skipped when a worker
/// or another server sampled the minute already), and once a second ends
/// the waits for signals that timed out ([`errand::WaitTimer`]), so a
/// deployment whose only workers are remote ones has whole charts, and
/// waits that end, too.
async fn upkeep(store: Arc<dyn Store>, minutes: Arc<errand::MinuteCounter>, every: Duration) {
    // Nothing is counted yet at start: the first write is one interval in.
    let every = every.max(Duration::from_millis(100));
    let mut flush = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    let mut sample = tokio::time::interval(Duration::from_secs(60));
    let mut sampled = std::collections::BTreeSet::new();
    let waits = errand::WaitTimer::new(store.clone());
    let mut look = tokio::time::interval(waits.every);
    look.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = look.tick() => if let Err(e) = waits.run_once().await {
                tracing::warn!(error = %e, "ending the waits that timed out failed");
            },
            _ = flush.tick() => {
                if let Err(e) = minutes.flush(store.as_ref()).await {
                    tracing::warn!(error = %e, "writing the charts' per-minute counts failed");
                }
            }
            _ = sample.tick() => match errand::sample_queues(store.as_ref(), store.as_ref(), &sampled, errand::Timestamp::now()).await {
                Ok(seen) => sampled = seen,
                Err(e) => tracing::warn!(error = %e, "sampling the queues' depth for the charts failed"),
            },
        }
    }
}

/// Binds `config.bind` and serves the API over `store` until `shutdown`
/// completes (see [`Server::run`]).
pub async fn serve(
    store: Arc<dyn Store>,
    config: ServerConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let server = Server::bind(store, config).await?;
    tracing::info!(addr = %server.local_addr(), "listening");
    server.run(shutdown).await
}

/// The examples of this crate's README, compiled and run as doctests so
/// that the README stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
