//! The clock's metric: its measured offset from the API server's.

use std::future::Future;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use super::offset::ClockOffset;

/// How often the offset gauge is refreshed: the offset moves with a wall-clock jump
/// before the next response shows it.
const REFRESH: Duration = Duration::from_secs(1);

/// The clock's metric; cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct ClockMetrics {
    offset: Gauge<f64, AtomicU64>,
}

impl ClockMetrics {
    /// Registers the clock's metric on `registry`.
    pub fn register(registry: &mut Registry) -> ClockMetrics {
        let metrics = ClockMetrics::default();
        registry.register(
            "clock_offset_seconds",
            "The API server's clock minus this replica's, estimated from the Date of API responses",
            metrics.offset.clone(),
        );
        metrics
    }

    /// Keeps the gauge at `offset`'s estimate, refreshed every second; runs until
    /// dropped.
    pub fn follow(&self, offset: ClockOffset) -> impl Future<Output = ()> + Send + 'static {
        let gauge = self.offset.clone();
        async move {
            let mut every = tokio::time::interval(REFRESH);
            loop {
                every.tick().await;
                if let Some(offset) = offset.offset() {
                    gauge.set(offset.as_secs_f64());
                }
            }
        }
    }
}
