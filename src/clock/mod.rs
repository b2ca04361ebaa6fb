//! The one place that reads the wall clock, behind a trait so tests can pin time, and
//! how far that clock is from the API server's (DESIGN §6: timers trust the wall clock,
//! so a replica whose clock is off must not lead).

use jiff::Timestamp;

/// A source of wall-clock instants.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> Timestamp;
}

/// The system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

mod metrics;
mod offset;
mod probe;

pub use metrics::ClockMetrics;
pub use offset::{ClockBound, ClockOffset, ClockSkew};
pub use probe::OffsetProbe;
