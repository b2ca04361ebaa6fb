//! Prometheus metrics (OpenMetrics text at `/metrics`), all prefixed `tidal_scheduler_`.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, AtomicU64};

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::clock::ClockSkew;
use crate::election::Observer;

/// The metrics of one process; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    leader: Gauge<i64, AtomicI64>,
    leadership_transitions: Counter,
    stale_sync_skips: Counter,
    store_resource_version: Family<Vec<(String, String)>, Gauge<i64, AtomicI64>>,
    clock_offset: Gauge<f64, AtomicU64>,
    clock_skewed: Gauge<i64, AtomicI64>,
}

impl Default for Metrics {
    fn default() -> Metrics {
        let mut registry = Registry::with_prefix("tidal_scheduler");
        let leader = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "leader",
            "Whether this replica holds the Lease and acts (1) or stands by (0)",
            leader.clone(),
        );
        let leadership_transitions = Counter::default();
        registry.register(
            "leadership_transitions",
            "Times this replica became the leader or stopped being it",
            leadership_transitions.clone(),
        );
        let stale_sync_skips = Counter::default();
        registry.register(
            "stale_sync_skips",
            "Reconciles skipped because the watch cache had not yet seen this replica's own write",
            stale_sync_skips.clone(),
        );
        let store_resource_version = Family::default();
        registry.register(
            "store_resource_version",
            "Newest resourceVersion each watch cache has seen (label watch: a namespace, or all)",
            store_resource_version.clone(),
        );
        let clock_offset = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "clock_offset_seconds",
            "The API server's clock minus this replica's, estimated from the Date of API responses",
            clock_offset.clone(),
        );
        let clock_skewed = Gauge::<i64, AtomicI64>::default();
        registry.register(
            "clock_skewed",
            "Whether this replica's clock is beyond --max-clock-offset, so it does not lead (1)",
            clock_skewed.clone(),
        );
        Metrics {
            registry: Arc::new(registry),
            clock_offset,
            clock_skewed,
            leader,
            leadership_transitions,
            stale_sync_skips,
            store_resource_version,
        }
    }
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

impl Metrics {
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

    /// Sets the measured clock offset (the API server's minus ours).
    pub fn clock_offset(&self, seconds: f64) {
        self.clock_offset.set(seconds);
    }

    /// Every metric in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing to a String cannot fail.
        let _ = encode(&mut text, &self.registry);
        text
    }
}

impl Observer for Metrics {
    fn leading(&self, leading: bool) {
        self.leader.set(i64::from(leading));
        self.leadership_transitions.inc();
    }

    fn clock_skewed(&self, skew: Option<ClockSkew>) {
        self.clock_skewed.set(i64::from(skew.is_some()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leadership_is_exported() {
        let metrics = Metrics::default();
        metrics.leading(true);
        metrics.leading(false);
        metrics.leading(true);
        let text = metrics.encode();
        assert!(text.contains("tidal_scheduler_leader 1\n"), "{text}");
        assert!(
            text.contains("tidal_scheduler_leadership_transitions_total 3\n"),
            "{text}"
        );
    }

    #[test]
    fn stale_skips_and_cache_versions_are_exported() {
        let metrics = Metrics::default();
        metrics.stale_sync_skip();
        metrics.store_resource_version("all").set(41);
        metrics.store_resource_version("all").set(42);
        let text = metrics.encode();
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
