//! The one place that reads the wall clock, behind a trait so tests can pin time, and
//! how far that clock is from the API server's (docs/design.md §6: timers trust the wall clock,
//! so a replica whose clock is off must not lead).

mod metrics;
mod offset;
mod probe;
mod wall;

pub use metrics::ClockMetrics;
pub use offset::{ClockBound, ClockOffset, ClockSkew};
pub use probe::OffsetProbe;
pub use wall::{Clock, SystemClock};

/// The default largest offset between a replica's clock and the API server's for it to
/// lead (`--max-clock-offset`).
pub const DEFAULT_MAX_CLOCK_OFFSET: std::time::Duration = std::time::Duration::from_secs(2);
