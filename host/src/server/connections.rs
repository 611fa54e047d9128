//! Accepting and serving connections so that no client can hold a listener: every connection has
//! a deadline whenever it has no request in flight (from its accept, through the TLS handshake,
//! the first bytes, each request's headers, and between keep-alive requests, on HTTP/1.1 and
//! HTTP/2 alike), and a listener at its cap makes room by closing the connection that has been
//! idle longest, so a prober or a new client is never queued behind idle sockets.
//!
//! A request's body has its own deadline, in the handler that reads it (`http::validate`).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::Router;
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::Notify;
use tower::ServiceExt;

use super::tls::Tls;
use evac_evaluator::log_limit::LogLimit;

/// How long a connection asked to close with no request in flight may take to finish what it is
/// writing (an HTTP/2 GOAWAY).
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// The HTTP/2 flow-control window of one stream: the protocol's default, so a connection's 32
/// windows hold 2 MiB. (A quarter of it measured worse under load: each window's update waits
/// for an admission thread, busy evaluating, so a 3 MB body's 200 round trips ran past the client
/// timeout; docs/benchmarks.md.)
const STREAM_WINDOW: u32 = 65_535;

/// What one listener (or the shards of one) lets its connections hold.
#[derive(Clone)]
pub struct ConnectionLimits {
    /// At most this many open at once.
    pub max_open: usize,
    /// A connection with no request in flight for this long is closed.
    pub idle_timeout: Duration,
    /// HTTP/2 streams one connection may have open at once (the API server's HTTP/2 client opens
    /// another connection beyond it).
    pub max_streams: u32,
    open: Arc<Open>,
}

impl ConnectionLimits {
    pub fn new(max_open: usize, idle_timeout: Duration) -> Self {
        Self { max_open: max_open.max(1), idle_timeout, max_streams: 32, open: Arc::default() }
    }
}

/// The open connections of a listener, by number.
#[derive(Default)]
struct Open {
    connections: Mutex<HashMap<u64, Arc<Activity>>>,
    next: AtomicU64,
}

impl Open {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Activity>>> {
        self.connections.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a new connection; at `max`, first closes the one idle longest. `None` when every
    /// open connection has a request in flight.
    fn admit(self: &Arc<Self>, max: usize) -> Option<Slot> {
        let mut connections = self.lock();
        if connections.len() >= max {
            let idlest = connections
                .iter()
                .filter(|(_, activity)| activity.in_flight.load(Ordering::Acquire) == 0)
                .min_by_key(|(_, activity)| activity.idle_since())
                .map(|(id, _)| *id)?;
            if let Some(evicted) = connections.remove(&idlest) {
                evicted.close.notify_one();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let activity = Arc::new(Activity::new());
        connections.insert(id, Arc::clone(&activity));
        Some(Slot { id, activity, open: Arc::clone(self) })
    }
}

/// What a connection is doing, for its deadline and for the choice of whom to close at the cap.
struct Activity {
    in_flight: AtomicUsize,
    /// When the last request in flight ended (or the connection was accepted), as an offset from
    /// `started`.
    idle_since_micros: AtomicU64,
    started: Instant,
    close: Notify,
}

impl Activity {
    fn new() -> Self {
        Self {
            in_flight: AtomicUsize::new(0),
            idle_since_micros: AtomicU64::new(0),
            started: Instant::now(),
            close: Notify::new(),
        }
    }

    fn idle_since(&self) -> Instant {
        self.started + Duration::from_micros(self.idle_since_micros.load(Ordering::Acquire))
    }

    fn enter(self: &Arc<Self>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::AcqRel);
        InFlight(Arc::clone(self))
    }

    /// Resolves when the connection must close: asked to, or idle for `timeout`.
    async fn expired(&self, timeout: Duration) {
        loop {
            let wait = if self.in_flight.load(Ordering::Acquire) > 0 {
                timeout
            } else {
                let left = (self.idle_since() + timeout).saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return;
                }
                left
            };
            tokio::select! {
                () = tokio::time::sleep(wait) => {}
                () = self.close.notified() => return,
            }
        }
    }
}

/// A request in flight on a connection; its end starts the connection's idle time.
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let activity = &self.0;
        let micros = u64::try_from(activity.started.elapsed().as_micros()).unwrap_or(u64::MAX);
        activity.idle_since_micros.store(micros, Ordering::Release);
        activity.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A connection's place in its listener, given back when the connection ends.
struct Slot {
    id: u64,
    activity: Arc<Activity>,
    open: Arc<Open>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.lock().remove(&self.id);
    }
}

/// Accepts connections until the task is dropped; each connection is served on its own task
/// (HTTP/1.1 with keep-alive, or HTTP/2 when the client speaks it), within `limits`.
pub async fn serve(listener: TcpListener, router: Router, tls: Option<Arc<Tls>>, limits: ConnectionLimits) {
    let refusals = LogLimit::new(Duration::from_secs(1));
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of descriptors and the like: wait a little instead of spinning.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let Some(slot) = limits.open.admit(limits.max_open) else {
            // Every connection has a request in flight: closed at once, so the descriptor is not held.
            if let Some(held_back) = refusals.allow("refused") {
                let refused = held_back + 1;
                tracing::warn!(%peer, refused, "every connection is busy: closing new ones");
            }
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let acceptor = tls.as_ref().map(|tls| tls.acceptor());
        let (router, limits) = (router.clone(), limits.clone());
        tokio::spawn(async move {
            let activity = Arc::clone(&slot.activity);
            match acceptor {
                Some(acceptor) => {
                    let stream = tokio::select! {
                        accepted = acceptor.accept(stream) => match accepted {
                            Ok(stream) => stream,
                            Err(e) => return tracing::debug!(%peer, "TLS handshake failed: {e}"),
                        },
                        () = activity.expired(limits.idle_timeout) => {
                            return tracing::debug!(%peer, "TLS handshake not finished in time: closed");
                        }
                    };
                    serve_connection(stream, peer, router, &activity, &limits).await;
                }
                None => serve_connection(stream, peer, router, &activity, &limits).await,
            }
            drop(slot);
        });
    }
}

/// Serves one connection until it ends, is idle past its deadline, or is asked to close.
async fn serve_connection<I>(
    io: I,
    peer: SocketAddr,
    router: Router,
    activity: &Arc<Activity>,
    limits: &ConnectionLimits,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let tracked = Arc::clone(activity);
    let service = tower::service_fn(move |request: hyper::Request<Incoming>| {
        let in_flight = tracked.enter();
        let router = router.clone();
        async move {
            let response = router.oneshot(request).await;
            drop(in_flight);
            response
        }
    });
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder.http1().timer(TokioTimer::new()).header_read_timeout(limits.idle_timeout);
    // Each stream may have one window of unread data buffered, and the connection's window holds
    // all of them: a stream whose body waits (for the body budget) then never stalls the others,
    // and one connection buffers at most `max_streams` windows.
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(limits.max_streams)
        .initial_stream_window_size(STREAM_WINDOW)
        .initial_connection_window_size(STREAM_WINDOW.saturating_mul(limits.max_streams));
    let connection = builder.serve_connection(TokioIo::new(io), TowerToHyperService::new(service));
    tokio::pin!(connection);
    let served = tokio::select! {
        served = connection.as_mut() => served,
        () = activity.expired(limits.idle_timeout) => {
            tracing::debug!(%peer, "connection idle past its deadline, or room needed: closed");
            connection.as_mut().graceful_shutdown();
            // A request that began just as the close was asked for (the cap chose this connection
            // as idle a moment before) is finished, within the time a client gets anyway.
            let grace = if activity.in_flight.load(Ordering::Acquire) > 0 { limits.idle_timeout } else { CLOSE_GRACE };
            tokio::time::timeout(grace, connection).await.unwrap_or(Ok(()))
        }
    };
    if let Err(e) = served {
        tracing::debug!(%peer, "connection ended: {e}");
    }
}
