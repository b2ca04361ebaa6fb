//! Counts reconciles in progress and remembers when the last one ended. Events are
//! published once reconciles have been quiet for a moment, and shutdown waits for them to
//! finish.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::sync::lock;
use std::time::Duration;

use tokio::time::Instant;

/// Reconciles in progress, shared.
#[derive(Debug, Clone)]
pub struct InFlight(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    running: AtomicUsize,
    last_end: Mutex<Instant>,
}

/// One reconcile in progress, until dropped.
#[derive(Debug)]
pub struct Entered(Arc<Shared>);

impl Default for InFlight {
    fn default() -> InFlight {
        InFlight(Arc::new(Shared {
            running: AtomicUsize::new(0),
            last_end: Mutex::new(Instant::now()),
        }))
    }
}

impl InFlight {
    /// Counts a reconcile until the returned guard is dropped.
    pub fn enter(&self) -> Entered {
        self.0.running.fetch_add(1, Ordering::Relaxed);
        Entered(self.0.clone())
    }

    /// Reconciles in progress now.
    pub fn count(&self) -> usize {
        self.0.running.load(Ordering::Relaxed)
    }

    /// How long no reconcile has run: zero while one runs.
    pub fn quiet_for(&self) -> Duration {
        if self.count() > 0 {
            return Duration::ZERO;
        }
        let last_end = *lock(&self.0.last_end);
        last_end.elapsed()
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        // The time is set before the count drops, so a quiet period never starts early.
        *lock(&self.0.last_end) = Instant::now();
        self.0.running.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn counts_each_reconcile_and_measures_the_quiet_after_the_last() {
        let in_flight = InFlight::default();
        let first = in_flight.enter();
        let second = in_flight.clone().enter();
        assert_eq!(in_flight.count(), 2);
        tokio::time::advance(Duration::from_millis(500)).await;
        assert_eq!(in_flight.quiet_for(), Duration::ZERO);
        drop(first);
        assert_eq!(in_flight.count(), 1);
        assert_eq!(in_flight.quiet_for(), Duration::ZERO);
        drop(second);
        assert_eq!(in_flight.count(), 0);
        tokio::time::advance(Duration::from_millis(300)).await;
        assert_eq!(in_flight.quiet_for(), Duration::from_millis(300));
    }
}
