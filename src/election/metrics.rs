//! The election's metrics: who leads, how often that changed, and whether the clock
//! keeps this replica from leading.

use std::sync::atomic::AtomicI64;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::observer::Observer;
use crate::clock::ClockSkew;

/// The election's metrics; cheap to clone; report to them as the campaign's [`Observer`].
#[derive(Debug, Clone, Default)]
pub struct ElectionMetrics {
    leader: Gauge<i64, AtomicI64>,
    leadership_transitions: Counter,
    clock_skewed: Gauge<i64, AtomicI64>,
}

impl ElectionMetrics {
    /// Registers the election's metrics on `registry`.
    pub fn register(registry: &mut Registry) -> ElectionMetrics {
        let metrics = ElectionMetrics::default();
        registry.register(
            "leader",
            "Whether this replica holds the Lease and acts (1) or stands by (0)",
            metrics.leader.clone(),
        );
        registry.register(
            "leadership_transitions",
            "Times this replica became the leader or stopped being it",
            metrics.leadership_transitions.clone(),
        );
        registry.register(
            "clock_skewed",
            "Whether this replica's clock is beyond --max-clock-offset, so it does not lead (1)",
            metrics.clock_skewed.clone(),
        );
        metrics
    }
}

impl Observer for ElectionMetrics {
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
    use crate::telemetry::metrics::{Metrics, registry};

    #[test]
    fn leadership_is_exported() {
        let mut registry = registry();
        let metrics = ElectionMetrics::register(&mut registry);
        metrics.leading(true);
        metrics.leading(false);
        metrics.leading(true);
        let text = Metrics::new(registry).encode();
        assert!(text.contains("tidal_scheduler_leader 1\n"), "{text}");
        assert!(
            text.contains("tidal_scheduler_leadership_transitions_total 3\n"),
            "{text}"
        );
        assert!(text.contains("tidal_scheduler_clock_skewed 0\n"), "{text}");
    }
}
