//! The HTTP side: the admission router (`POST /validate/{policy}`), the probe router
//! (`/readiness`, `/metrics`), and the accept loop that serves them over TLS or plain TCP.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;

use super::tls::Tls;
use super::Server;
use evac_evaluator::admission::{self, BadRequest};
use evac_evaluator::log_limit::LogLimit;

/// The admission routes.
pub fn admission_router(server: Arc<Server>) -> Router {
    Router::new()
        .route("/validate/{policy}", post(validate))
        .fallback(|| async {
            (StatusCode::NOT_FOUND, "not found: admission requests go to POST /validate/<policy id>\n")
        })
        .with_state(server)
}

/// The probe routes, on their own port so that probes and scrapes never queue behind admission.
pub fn probe_router(server: Arc<Server>) -> Router {
    Router::new()
        .route("/readiness", get(readiness))
        .route("/liveness", get(liveness))
        .route("/metrics", get(metrics))
        .with_state(server)
}

async fn validate(State(server): State<Arc<Server>>, Path(policy): Path<String>, body: Body) -> Response {
    let Some(served) = server.registry().current().get(&policy).cloned() else {
        server.metrics().refuse("unknown_policy");
        return text(StatusCode::NOT_FOUND, format!("unknown policy {policy:?}"));
    };
    let limit = server.options.max_body_bytes;
    let body: Bytes = match axum::body::to_bytes(body, limit).await {
        Ok(body) => body,
        Err(e) => {
            server.metrics().refuse("bad_request");
            let why = if is_length_limit(&e) {
                format!("the request body is larger than the limit of {limit} bytes")
            } else {
                format!("cannot read the request body: {e}")
            };
            return text(StatusCode::BAD_REQUEST, why);
        }
    };
    let review = match admission::parse_review(&body) {
        Ok(review) => review,
        Err(BadRequest(why)) => {
            server.metrics().refuse("bad_request");
            return text(StatusCode::BAD_REQUEST, why);
        }
    };
    let (answer, shadow) = admission::answer(&server.pipeline, &served, review).await;
    if let Some(shadow) = shadow {
        // After the answer: the candidate never delays or changes it.
        tokio::spawn(shadow.run());
    }
    let bytes = serde_json::to_vec(&answer).unwrap_or_default();
    ([(header::CONTENT_TYPE, "application/json")], bytes).into_response()
}

fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}

fn text(status: StatusCode, message: String) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], message + "\n").into_response()
}

async fn readiness(State(server): State<Arc<Server>>) -> Response {
    match server.not_ready() {
        None => text(StatusCode::OK, "ready".into()),
        Some(why) => text(StatusCode::SERVICE_UNAVAILABLE, why),
    }
}

/// The process answers: all a restart could fix. Readiness (synced, fresh caches, policies
/// loaded) is the cluster's state, which a restart would only lose.
async fn liveness() -> Response {
    text(StatusCode::OK, "alive".into())
}

async fn metrics(State(server): State<Arc<Server>>) -> Response {
    server.record_instance_stats();
    let content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    ([(header::CONTENT_TYPE, content_type)], server.metrics().encode()).into_response()
}

/// What one listener lets a connection hold: how many may be open at once (the excess is closed
/// as soon as it is accepted), and how long a client may take to finish the TLS handshake and to
/// send a request's headers. Without them, connections that never handshake or never finish
/// their headers would pile up until the process ran out of descriptors.
#[derive(Debug, Clone)]
pub struct ConnectionLimits {
    /// Open connections at once, shared by every listener given the same limits.
    pub open: Arc<tokio::sync::Semaphore>,
    pub handshake_timeout: Duration,
    pub header_timeout: Duration,
}

impl ConnectionLimits {
    pub fn new(max_open: usize, handshake_timeout: Duration, header_timeout: Duration) -> Self {
        Self { open: Arc::new(tokio::sync::Semaphore::new(max_open)), handshake_timeout, header_timeout }
    }
}

/// Accepts connections until the task is dropped; each connection is served on its own task
/// (HTTP/1.1 with keep-alive, or HTTP/2 when TLS negotiates it), within `limits`.
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
        let Ok(permit) = Arc::clone(&limits.open).try_acquire_owned() else {
            // At the cap: closed at once, so the descriptor is not held.
            if let Some(held_back) = refusals.allow("refused") {
                let refused = held_back + 1;
                tracing::warn!(%peer, refused, "too many open connections: closing new ones");
            }
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let service = TowerToHyperService::new(router.clone());
        let acceptor = tls.as_ref().map(|tls| tls.acceptor());
        let (handshake_timeout, header_timeout) = (limits.handshake_timeout, limits.header_timeout);
        tokio::spawn(async move {
            let _permit = permit;
            let mut builder = auto::Builder::new(TokioExecutor::new());
            builder.http1().timer(TokioTimer::new()).header_read_timeout(header_timeout);
            let served = match acceptor {
                Some(acceptor) => {
                    match tokio::time::timeout(handshake_timeout, acceptor.accept(stream)).await {
                        Ok(Ok(stream)) => builder.serve_connection(TokioIo::new(stream), service).await,
                        Ok(Err(e)) => {
                            tracing::debug!(%peer, "TLS handshake failed: {e}");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(%peer, "TLS handshake not finished in {handshake_timeout:?}: closed");
                            return;
                        }
                    }
                }
                None => builder.serve_connection(TokioIo::new(stream), service).await,
            };
            if let Err(e) = served {
                tracing::debug!(%peer, "connection ended: {e}");
            }
        });
    }
}

/// Binds a listener, with the address in the error.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    use anyhow::Context;
    TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))
}

/// Binds `count` listeners to one address with `SO_REUSEPORT`, so the kernel spreads connections
/// over them. Must be called from the thread whose runtime will serve each listener: the first is
/// bound here, the others are returned as std listeners to register in their own runtimes.
pub fn bind_shards(addr: SocketAddr, count: usize) -> anyhow::Result<Vec<std::net::TcpListener>> {
    use anyhow::Context;
    let mut listeners = Vec::with_capacity(count);
    let mut addr = addr;
    for _ in 0..count.max(1) {
        let socket =
            if addr.is_ipv4() { tokio::net::TcpSocket::new_v4() } else { tokio::net::TcpSocket::new_v6() }
                .context("cannot create a socket")?;
        socket.set_reuseaddr(true).context("SO_REUSEADDR")?;
        socket.set_reuseport(true).context("SO_REUSEPORT")?;
        socket.bind(addr).with_context(|| format!("cannot listen on {addr}"))?;
        let listener = socket.listen(1024).with_context(|| format!("cannot listen on {addr}"))?;
        // With port 0, every shard takes the port the first one got.
        addr = listener.local_addr().context("listener address")?;
        listeners.push(listener.into_std().context("listener")?);
    }
    Ok(listeners)
}
