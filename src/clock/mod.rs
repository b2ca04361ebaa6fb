//! The one place that reads the wall clock, behind a trait so tests can pin time, and
//! how far that clock is from the API server's (DESIGN §6: timers trust the wall clock,
//! so a replica whose clock is off must not lead).

mod metrics;
mod offset;
mod probe;
mod wall;

pub use metrics::ClockMetrics;
pub use offset::{ClockBound, ClockOffset, ClockSkew};
pub use probe::OffsetProbe;
pub use wall::{Clock, SystemClock};
