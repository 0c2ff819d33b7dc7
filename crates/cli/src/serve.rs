//! `errand serve`: the HTTP API and dashboard, until a signal.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use errand::{RetryPolicy, Store};

use crate::args::ServeArgs;
use crate::exit::Failure;
use crate::output::{errln, outln};

pub(crate) fn serve_config(a: &ServeArgs) -> Result<errand_server::ServerConfig, Failure> {
    let max_body = usize::try_from(a.max_body).unwrap_or(usize::MAX);
    let config = errand_server::ServerConfig {
        bind: a.bind,
        token: a.token.clone(),
        max_body,
        max_payload: max_body,
        drain: a.drain,
        read_timeout: a.read_timeout,
        max_connections: usize::try_from(a.max_connections).unwrap_or(usize::MAX),
        max_job_waits: match a.max_job_waits {
            Some(n) => usize::try_from(n).unwrap_or(usize::MAX),
            None => errand_server::DEFAULT_MAX_JOB_WAITS
                .min(usize::try_from(a.max_connections.saturating_sub(1)).unwrap_or(usize::MAX)),
        },
        retry: RetryPolicy::EqualJitter {
            base: a.retry_base,
            max: a.retry_max,
        },
        ..errand_server::ServerConfig::default()
    };
    config.check().map_err(|e| Failure::Usage(e.to_string()))?;
    if let Some(token) = &config.token
        && token.len() < 16
    {
        errln!(
            "errand: warning: the access token is only {} characters long; use a long random one (openssl rand -hex 32)",
            token.len()
        );
    }
    Ok(config)
}

pub(crate) async fn serve(
    store: Arc<dyn Store>,
    config: errand_server::ServerConfig,
) -> Result<ExitCode, Failure> {
    use tokio::signal::unix::{SignalKind, signal};
    // Installed before the address is announced: a signal sent as soon as
    // the line is read is a graceful stop, not a kill.
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let token = config.token.is_some();
    let server = errand_server::Server::bind(store, config)
        .await
        .map_err(|e| {
            if e.is_config() {
                Failure::Usage(e.to_string())
            } else {
                Failure::Other(e.into())
            }
        })?;
    for line in serve_banner(server.local_addr(), token) {
        outln!("{line}");
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let run = server.run(async {
        let _ = stopped.await;
    });
    tokio::pin!(run);
    let name = tokio::select! {
        result = &mut run => {
            result.context("the server failed")?;
            return Ok(ExitCode::SUCCESS);
        }
        _ = term.recv() => "SIGTERM",
        _ = int.recv() => "SIGINT",
    };
    let _ = stop.send(());
    errln!("errand: {name} received; finishing in-flight requests (signal again to exit at once)");
    tokio::select! {
        result = &mut run => {
            result.context("the server failed")?;
            Ok(ExitCode::SUCCESS)
        }
        _ = term.recv() => second_signal(),
        _ = int.recv() => second_signal(),
    }
}

/// What `errand serve` prints once it listens: the address bound (first,
/// alone on its line, for scripts), then where a browser finds the
/// dashboard and a client the API, and what they need. An address that
/// means every interface is shown as this machine's loopback one, which a
/// browser here can open.
pub(crate) fn serve_banner(addr: SocketAddr, token: bool) -> [String; 3] {
    use std::net::{Ipv4Addr, Ipv6Addr};
    let mut browse = addr;
    if addr.ip().is_unspecified() {
        browse.set_ip(match addr {
            SocketAddr::V4(_) => Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => Ipv6Addr::LOCALHOST.into(),
        });
    }
    let (dashboard, api) = if token {
        (
            " (sign in with the access token given with --token or ERRAND_TOKEN)",
            "; send the access token as `Authorization: Bearer TOKEN`",
        )
    } else {
        ("", "")
    };
    [
        format!("listening on http://{addr}"),
        format!("dashboard: http://{browse}/dashboard/{dashboard}"),
        format!("API: http://{browse}/v1/ (described at /v1/openapi.json{api})"),
    ]
}

pub(crate) fn second_signal() -> Result<ExitCode, Failure> {
    errln!("errand: second signal, exiting now; requests still in flight are cut off");
    Ok(ExitCode::from(130))
}
