//! The process's Prometheus metrics (OpenMetrics text at `/metrics`), all prefixed
//! `tidal_scheduler_`. Each component registers its own metrics on the [`registry`]
//! (`election::ElectionMetrics`, `controller::ControllerMetrics`, `clock::ClockMetrics`);
//! this module only encodes what they registered.

use std::sync::Arc;

use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

/// A fresh registry with the process's prefix, for the components to register on.
pub fn registry() -> Registry {
    Registry::with_prefix("tidal_scheduler")
}

/// Every registered metric, for `/metrics`; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
    /// Exports what the components registered on `registry`.
    pub fn new(registry: Registry) -> Metrics {
        Metrics {
            registry: Arc::new(registry),
        }
    }

    /// Every metric in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}
