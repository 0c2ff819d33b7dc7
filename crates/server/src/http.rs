//! Serving an [`axum::Router`] over HTTP/1 the way `errand serve` does, for
//! any program that answers on a socket (Field Notes' `fieldnotes serve`
//! uses it too), and the loopback check every loopback-only server applies.
//!
//! [`serve`] runs hyper's HTTP/1 connection directly (what `axum::serve`
//! wraps) so that no client can hold the server's connections or file
//! descriptors for long:
//!
//! * **Request heads and idle connections.** A client must deliver each
//!   request's head within [`Limits::read_timeout`]; past it the connection
//!   is closed. The same clock runs while a kept-alive connection waits for
//!   its next request, so an idle connection is closed after that time too.
//! * **Request bodies.** Each body must arrive within
//!   [`Limits::read_timeout`] from the moment the handler starts reading
//!   it; past it the read fails with a [`BodyTimeout`] (find it in the
//!   error with [`BodyTimeout::find`] and answer 408). Body size limits
//!   belong to the router (each application has its own).
//! * **Connections.** At most [`Limits::max_connections`] are open at
//!   once; further clients wait in the listen backlog until one closes,
//!   instead of taking the process's last file descriptors. Should
//!   `accept` fail all the same (out of file descriptors), the server logs
//!   it, pauses a second and goes on; it recovers as soon as connections
//!   close, which the timeouts above guarantee.
//! * **Shutdown.** When the shutdown future completes the server stops
//!   accepting, lets in-flight requests finish and cuts off what remains
//!   after [`Limits::drain`].

use std::error::Error as StdError;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::Request;
use hyper::body::{Frame, Incoming, SizeHint};
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::Sleep;
use tower::ServiceExt as _;

pub use crate::guard::{HostRefused, check_loopback};
use crate::{DEFAULT_DRAIN, DEFAULT_READ_TIMEOUT, ServeError};

/// How many connections a server holds open at once unless told
/// otherwise: well under the usual limit of 1024 file descriptors, so the
/// database and the logs always have some.
pub const DEFAULT_MAX_CONNECTIONS: usize = 512;

/// What [`serve`] allows each client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// How long a client may take to send a request's head (and how long a
    /// kept-alive connection may stay idle), and then, again, its body.
    /// Default 10 s.
    pub read_timeout: Duration,
    /// How many connections may be open at once (default 512).
    pub max_connections: usize,
    /// How long in-flight requests may take to finish after shutdown is
    /// asked (default 30 s).
    pub drain: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            read_timeout: DEFAULT_READ_TIMEOUT,
            max_connections: DEFAULT_MAX_CONNECTIONS,
            drain: DEFAULT_DRAIN,
        }
    }
}

impl Limits {
    /// Refuses limits that would make a server useless: a zero read
    /// timeout or no connections at all.
    pub fn check(&self) -> Result<(), ServeError> {
        if self.read_timeout.is_zero() {
            return Err(ServeError::InvalidConfig(
                "the read timeout must be longer than zero (the default is 10s)".into(),
            ));
        }
        if self.max_connections == 0 {
            return Err(ServeError::InvalidConfig(format!(
                "the connection limit must be at least 1 (the default is {DEFAULT_MAX_CONNECTIONS})"
            )));
        }
        Ok(())
    }
}

/// Serves `router` on `listener` under `limits` until `shutdown`
/// completes, then stops accepting connections, lets in-flight requests
/// finish — at most [`Limits::drain`] — and returns.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    limits.check()?;
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.read_timeout);
    let graceful = GracefulShutdown::new();
    let mut connections = tokio::task::JoinSet::new();
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut said_full = false;
    tokio::pin!(shutdown);
    loop {
        if slots.available_permits() == 0 && !said_full {
            tracing::warn!(
                max_connections = limits.max_connections,
                "at the connection limit: new clients wait until a connection closes"
            );
        }
        said_full = slots.available_permits() == 0;
        let slot = tokio::select! {
            () = &mut shutdown => break,
            slot = Arc::clone(&slots).acquire_owned() => match slot {
                Ok(slot) => slot,
                // The semaphore is never closed.
                Err(_closed) => break,
            },
        };
        let stream = tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _peer)) => stream,
                Err(e) => {
                    accept_failed(e).await;
                    continue;
                }
            },
        };
        while connections.try_join_next().is_some() {}
        let router = router.clone();
        let read_timeout = limits.read_timeout;
        let service = hyper::service::service_fn(move |request: Request<Incoming>| {
            let request = request.map(|body| Body::new(TimedBody::new(body, read_timeout)));
            router.clone().oneshot(request)
        });
        let connection = graceful.watch(http.serve_connection(TokioIo::new(stream), service));
        connections.spawn(async move {
            let _slot = slot;
            if let Err(e) = connection.await {
                // A client that went away, or the header-read timeout.
                tracing::debug!(error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    tokio::select! {
        () = graceful.shutdown() => {}
        () = tokio::time::sleep(limits.drain) => {
            tracing::warn!(drain = ?limits.drain, "requests still in flight after the drain time; cutting them off");
            connections.shutdown().await;
        }
    }
    Ok(())
}

/// An error from `accept`: a connection that failed before it was accepted
/// is not the server's problem; anything else (out of file descriptors)
/// is logged and retried after a pause, as hyper and axum do.
async fn accept_failed(e: std::io::Error) {
    use std::io::ErrorKind;
    if matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accepting a connection failed; retrying in 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// The error a request body's read ends with when the client did not send
/// the whole body within the read timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the request body did not arrive within {} ms", .limit.as_millis())]
pub struct BodyTimeout {
    limit: Duration,
}

impl BodyTimeout {
    /// The time the body had.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// The body timeout behind `error` (a body read error, or an
    /// extractor's rejection that wraps one), if that is what ended the
    /// read.
    pub fn find<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a BodyTimeout> {
        let mut next = Some(error);
        while let Some(e) = next {
            if let Some(timeout) = e.downcast_ref::<BodyTimeout>() {
                return Some(timeout);
            }
            next = e.source();
        }
        None
    }
}

/// A request body that must be read whole within `limit` of the first
/// time its reader waits for it.
struct TimedBody<B> {
    inner: B,
    limit: Duration,
    deadline: Option<Pin<Box<Sleep>>>,
}

impl<B> TimedBody<B> {
    fn new(inner: B, limit: Duration) -> Self {
        TimedBody {
            inner,
            limit,
            deadline: None,
        }
    }
}

impl<B> hyper::body::Body for TimedBody<B>
where
    B: hyper::body::Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        // What has arrived is always taken, even past the deadline.
        if let Poll::Ready(frame) = Pin::new(&mut this.inner).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        let limit = this.limit;
        let deadline = this
            .deadline
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match deadline.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Some(Err(Box::new(BodyTimeout { limit })))),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use axum::extract::FromRequest;
    use futures_util::StreamExt as _;
    use futures_util::stream;

    use super::*;

    /// A body that sends `first` and then nothing, ever.
    fn stalled(first: &'static [u8]) -> Body {
        let frames = stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(first))])
            .chain(stream::pending());
        Body::from_stream(frames)
    }

    #[tokio::test]
    async fn a_body_that_stops_arriving_fails_with_a_findable_timeout() {
        let limit = Duration::from_millis(300);
        let body = Body::new(TimedBody::new(stalled(b"{\"document"), limit));
        let error = axum::body::to_bytes(body, 1024)
            .await
            .expect_err("the body never ends");
        let found = BodyTimeout::find(&error).expect("the timeout is in the chain");
        assert_eq!(found.limit(), limit);
        assert_eq!(
            found.to_string(),
            "the request body did not arrive within 300 ms"
        );

        // Through an extractor's rejection, as a handler sees it.
        let body = Body::new(TimedBody::new(stalled(b"x"), limit));
        let rejection = Bytes::from_request(Request::new(body), &())
            .await
            .expect_err("the body never ends");
        assert!(BodyTimeout::find(&rejection).is_some(), "{rejection}");

        // Other errors are not timeouts.
        let other = std::io::Error::other("reset");
        assert!(BodyTimeout::find(&other).is_none());
    }

    #[test]
    fn useless_limits_are_refused() {
        let zero_timeout = Limits {
            read_timeout: Duration::ZERO,
            ..Limits::default()
        };
        assert!(zero_timeout.check().unwrap_err().is_config());
        let no_connections = Limits {
            max_connections: 0,
            ..Limits::default()
        };
        let err = no_connections.check().unwrap_err();
        assert!(err.to_string().contains("connection limit"), "{err}");
        assert!(Limits::default().check().is_ok());
    }

    #[tokio::test]
    async fn a_body_is_timed_from_when_its_reader_starts() {
        let limit = Duration::from_millis(50);
        let body = Body::new(TimedBody::new(Body::from("{}"), limit));
        tokio::time::sleep(limit * 4).await;
        let bytes = axum::body::to_bytes(body, 1024).await.expect("read");
        assert_eq!(&bytes[..], b"{}");
    }
}
