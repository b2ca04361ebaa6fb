//! Counts reconciles in progress. Events are published while none runs, and shutdown
//! waits for them to finish.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The number of reconciles in progress, shared.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<AtomicUsize>);

/// One reconcile in progress, until dropped.
#[derive(Debug)]
pub struct Entered(Arc<AtomicUsize>);

impl InFlight {
    /// Counts a reconcile until the returned guard is dropped.
    pub fn enter(&self) -> Entered {
        self.0.fetch_add(1, Ordering::Relaxed);
        Entered(self.0.clone())
    }

    /// Reconciles in progress now.
    pub fn count(&self) -> usize {
        self.0.load(Ordering::Relaxed)
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_reconcile_until_its_guard_drops() {
        let in_flight = InFlight::default();
        let first = in_flight.enter();
        let second = in_flight.clone().enter();
        assert_eq!(in_flight.count(), 2);
        drop(first);
        assert_eq!(in_flight.count(), 1);
        drop(second);
        assert_eq!(in_flight.count(), 0);
    }
}
