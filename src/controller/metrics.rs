//! The controller's metrics: reconciles skipped on a stale cache, and each watch cache's
//! newest resourceVersion.

use std::sync::atomic::AtomicI64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// The controller's metrics; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ControllerMetrics {
    stale_sync_skips: Counter,
    store_resource_version: Family<Vec<(String, String)>, Gauge<i64, AtomicI64>>,
}

impl ControllerMetrics {
    /// Registers the controller's metrics on `registry`.
    pub fn register(registry: &mut Registry) -> ControllerMetrics {
        let metrics = ControllerMetrics::default();
        registry.register(
            "stale_sync_skips",
            "Reconciles skipped because the watch cache had not yet seen this replica's own write",
            metrics.stale_sync_skips.clone(),
        );
        registry.register(
            "store_resource_version",
            "Newest resourceVersion each watch cache has seen (label watch: a namespace, or all)",
            metrics.store_resource_version.clone(),
        );
        metrics
    }

    /// Counts a reconcile skipped on a stale cache.
    pub fn stale_sync_skip(&self) {
        self.stale_sync_skips.inc();
    }

    /// The gauge of the newest resourceVersion the cache of `watch` has seen; look it up
    /// once, then set it per watch event.
    pub fn store_resource_version(&self, watch: &str) -> Gauge<i64, AtomicI64> {
        self.store_resource_version
            .get_or_create(&vec![("watch".to_owned(), watch.to_owned())])
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::metrics::{Metrics, registry};

    #[test]
    fn stale_skips_and_cache_versions_are_exported() {
        let mut registry = registry();
        let metrics = ControllerMetrics::register(&mut registry);
        metrics.stale_sync_skip();
        metrics.store_resource_version("all").set(41);
        metrics.store_resource_version("all").set(42);
        let text = Metrics::new(registry).encode();
        assert!(
            text.contains("tidal_scheduler_stale_sync_skips_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("tidal_scheduler_store_resource_version{watch=\"all\"} 42\n"),
            "{text}"
        );
    }
}
