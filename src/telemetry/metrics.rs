//! Prometheus metrics (OpenMetrics text at `/metrics`), all prefixed `tidal_scheduler_`.

use std::sync::Arc;
use std::sync::atomic::AtomicI64;

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::election::Observer;

/// The metrics of one process; cheap to clone.
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    leader: Gauge<i64, AtomicI64>,
    leadership_transitions: Counter,
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
        Metrics {
            registry: Arc::new(registry),
            leader,
            leadership_transitions,
        }
    }
}

impl Metrics {
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
}
