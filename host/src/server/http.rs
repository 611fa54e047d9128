//! The admission side: the router of `POST /validate/{policy}`; `connections` serves it over TLS
//! or plain TCP, beside the probe router (`probes`).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use tokio::net::TcpListener;

use super::bodies::Reserved;
use super::probes::text;
use super::Server;
use evac_evaluator::admission::{self, BadRequest};

/// The admission routes.
pub fn admission_router(server: Arc<Server>) -> Router {
    Router::new()
        .route("/validate/{policy}", post(validate))
        .fallback(|| async {
            (StatusCode::NOT_FOUND, "not found: admission requests go to POST /validate/<policy id>\n")
        })
        .with_state(server)
}

async fn validate(
    State(server): State<Arc<Server>>,
    Path(policy): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // As Kubewarden's policy-server (axum's `Json` extractor), before anything else.
    if !is_json(&headers) {
        server.metrics().refuse("unsupported_media_type");
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Expected request with `Content-Type: application/json`".into(),
        );
    }
    let Some(served) = server.registry().current().get(&policy).cloned() else {
        server.metrics().refuse("unknown_policy");
        return text(StatusCode::NOT_FOUND, format!("unknown policy {policy:?}"));
    };
    let limit = server.options.max_body_bytes;
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|length| length > limit) {
        server.metrics().refuse("bad_request");
        return text(
            StatusCode::BAD_REQUEST,
            format!("the request body is larger than the limit of {limit} bytes"),
        );
    }
    let (body, reserved) = match read_body(&server, body, declared).await {
        Ok(read) => read,
        Err(refused) => return refused,
    };
    let review = match admission::parse_review(&body) {
        Ok(review) => review,
        Err(BadRequest(why)) => {
            server.metrics().refuse("bad_request");
            return text(StatusCode::BAD_REQUEST, why);
        }
    };
    drop(body);
    let (answer, shadow) = admission::answer(&server.pipeline, &served, review).await;
    match shadow {
        // After the answer: the candidate never delays or changes it. It holds the request, so
        // it keeps the request's share of the body budget until it is done.
        Some(shadow) => drop(tokio::spawn(async move {
            shadow.run().await;
            drop(reserved);
        })),
        None => drop(reserved),
    }
    match serde_json::to_vec(&answer) {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        // Never an empty 200, which the API server would take for an answer: a 500 is a webhook
        // failure, handled by its failurePolicy.
        Err(e) => {
            tracing::error!(policy = %served.id, "cannot encode the AdmissionReview answer: {e}");
            text(StatusCode::INTERNAL_SERVER_ERROR, format!("cannot encode the AdmissionReview answer: {e}"))
        }
    }
}

/// Reads an admission request's body within the client timeout, and its share of the body budget.
///
/// The share (the declared length, or the largest accepted) is reserved once the first bytes
/// have come, so a client that declares a body and sends nothing holds none of the budget; the
/// wait for it is the server's, so the rest of the body has a client timeout of its own.
async fn read_body(
    server: &Server,
    mut body: Body,
    declared: Option<usize>,
) -> Result<(Bytes, Reserved), Response> {
    use http_body_util::BodyExt;
    let (limit, timeout) = (server.options.max_body_bytes, server.options.client_timeout);
    let too_large = || {
        server.metrics().refuse("bad_request");
        text(StatusCode::BAD_REQUEST, format!("the request body is larger than the limit of {limit} bytes"))
    };
    let late = || {
        server.metrics().refuse("timeout");
        text(StatusCode::REQUEST_TIMEOUT, format!("the request body did not arrive within {timeout:?}"))
    };
    let unreadable = |e: &dyn std::fmt::Display| {
        server.metrics().refuse("bad_request");
        text(StatusCode::BAD_REQUEST, format!("cannot read the request body: {e}"))
    };
    let first = match tokio::time::timeout(timeout, body.frame()).await {
        Err(_) => return Err(late()),
        Ok(None) => Bytes::new(),
        Ok(Some(Err(e))) => return Err(unreadable(&e)),
        Ok(Some(Ok(frame))) => frame.into_data().unwrap_or_default(),
    };
    if first.len() > limit {
        return Err(too_large());
    }
    let Ok(Some(reserved)) =
        tokio::time::timeout(timeout, server.bodies.reserve(declared.unwrap_or(limit))).await
    else {
        server.metrics().refuse("busy");
        let why = format!(
            "too many request bodies in memory (at most {} bytes at once): try again",
            server.bodies.capacity()
        );
        return Err(text(StatusCode::SERVICE_UNAVAILABLE, why));
    };
    let rest = match tokio::time::timeout(timeout, axum::body::to_bytes(body, limit - first.len())).await {
        Err(_) => return Err(late()),
        Ok(Err(e)) if is_length_limit(&e) => return Err(too_large()),
        Ok(Err(e)) => return Err(unreadable(&e)),
        Ok(Ok(rest)) => rest,
    };
    if rest.is_empty() {
        return Ok((first, reserved));
    }
    let mut whole = Vec::with_capacity(first.len() + rest.len());
    whole.extend_from_slice(&first);
    whole.extend_from_slice(&rest);
    Ok((Bytes::from(whole), reserved))
}

/// `Content-Type: application/json`, or any `+json` type, with any parameters.
fn is_json(headers: &HeaderMap) -> bool {
    let Some(value) = headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
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

/// Binds a listener, with the address in the error.
pub async fn bind(addr: SocketAddr) -> anyhow::Result<TcpListener> {
    use anyhow::Context;
    TcpListener::bind(addr).await.with_context(|| format!("cannot listen on {addr}"))
}

/// Binds `count` listeners to one address with `SO_REUSEPORT`, so the kernel spreads connections
/// over them. They are returned as std listeners: each is registered (`TcpListener::from_std`) by
/// the thread whose runtime serves it.
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
