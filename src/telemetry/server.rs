//! The HTTP endpoints for the kubelet and Prometheus: `/healthz` (the process serves),
//! `/readyz` (every watch cache has listed once and no shutdown is under way; standbys
//! are ready too — they are warm spares), `/metrics`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;

use super::metrics::Metrics;

/// Whether the process is ready to serve; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the process ready or not.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Relaxed);
    }

    /// Whether the process is ready.
    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

#[derive(Clone)]
struct Shared {
    readiness: Readiness,
    metrics: Metrics,
}

/// Serves the endpoints on `listener` (bound by the caller, so that a taken port fails
/// start-up with a clear error) until the process ends.
pub async fn serve(listener: TcpListener, readiness: Readiness, metrics: Metrics) {
    let app = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(ready))
        .route("/metrics", get(export))
        .with_state(Shared { readiness, metrics });
    if let Err(error) = axum::serve(listener, app).await {
        tracing::error!(%error, "the health and metrics server stopped");
    }
}

async fn ready(State(shared): State<Shared>) -> impl IntoResponse {
    if shared.readiness.is_ready() {
        (StatusCode::OK, "ok")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

/// OpenMetrics (with exemplars) to a scraper that accepts it, as Prometheus does; the
/// classic text format otherwise (`curl`, `promtool check metrics`), as client_golang.
async fn export(State(shared): State<Shared>, headers: axum::http::HeaderMap) -> impl IntoResponse {
    let open_metrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .any(|accept| accept.contains("application/openmetrics-text"));
    if open_metrics {
        (
            [(
                header::CONTENT_TYPE,
                "application/openmetrics-text; version=1.0.0; charset=utf-8",
            )],
            shared.metrics.encode(),
        )
    } else {
        (
            [(
                header::CONTENT_TYPE,
                "text/plain; version=0.0.4; charset=utf-8",
            )],
            shared.metrics.encode_classic(),
        )
    }
}
