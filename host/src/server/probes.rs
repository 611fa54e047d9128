//! The probe port every process serves (`evac serve`, `evac control`, `evac hold`): `/readiness`
//! (503 with the reason while the process should not get traffic or be counted on), `/liveness`
//! (the process answers: all a restart could fix), and `/metrics` in the format the scraper asks
//! for. On its own port, with its own connection allowance, so that probes and scrapes never
//! queue behind the process's other traffic.

use std::sync::Arc;

use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use evac_evaluator::Metrics;

/// Why the process should not get traffic yet, if it should not.
pub type Readiness = Arc<dyn Fn() -> Option<String> + Send + Sync>;

/// Run before each scrape: figures copied into the metrics when asked for, not as they change.
pub type BeforeScrape = Arc<dyn Fn() + Send + Sync>;

/// The probe routes of a process.
pub fn router(ready: Readiness, metrics: Arc<Metrics>, before_scrape: Option<BeforeScrape>) -> Router {
    Router::new()
        .route(
            "/readiness",
            get(move || {
                let ready = Arc::clone(&ready);
                async move {
                    match ready() {
                        None => text(StatusCode::OK, "ready".into()),
                        Some(why) => text(StatusCode::SERVICE_UNAVAILABLE, why),
                    }
                }
            }),
        )
        .route("/liveness", get(|| async { text(StatusCode::OK, "alive".into()) }))
        .route(
            "/metrics",
            get(move |headers: HeaderMap| {
                let (metrics, before_scrape) = (Arc::clone(&metrics), before_scrape.clone());
                async move {
                    if let Some(before_scrape) = before_scrape {
                        before_scrape();
                    }
                    let accept = headers.get(header::ACCEPT).and_then(|a| a.to_str().ok());
                    let (content_type, body) = metrics.encode_for(accept);
                    ([(header::CONTENT_TYPE, content_type)], body).into_response()
                }
            }),
        )
        .fallback(|| async {
            text(
                StatusCode::NOT_FOUND,
                "not found: this port serves /readiness, /liveness and /metrics".into(),
            )
        })
}

/// A plain-text answer, one line.
pub fn text(status: StatusCode, message: String) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], message + "\n").into_response()
}
