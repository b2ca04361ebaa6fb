//! Counts reconciles in progress and remembers when the last one ended. Events are
//! published once reconciles have been quiet for a moment, and shutdown waits for them to
//! finish: both are woken when the last reconcile in progress ends, never by polling (a
//! reconcile that begins meanwhile is seen when the quiet period would have been over).

use std::pin::pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

use crate::sync::lock;

/// Reconciles in progress, shared.
#[derive(Debug, Clone)]
pub struct InFlight(Arc<Shared>);

#[derive(Debug)]
struct Shared {
    running: AtomicUsize,
    last_end: Mutex<Instant>,
    /// Told when the last reconcile in progress ends (in a burst, once, not per reconcile).
    changed: Notify,
}

/// One reconcile in progress, until dropped.
#[derive(Debug)]
pub struct Entered(Arc<Shared>);

impl Default for InFlight {
    fn default() -> InFlight {
        InFlight(Arc::new(Shared {
            running: AtomicUsize::new(0),
            last_end: Mutex::new(Instant::now()),
            changed: Notify::new(),
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

    /// Returns once no reconcile runs.
    pub async fn drained(&self) {
        loop {
            // Registered before the count is read, so an end in between is not missed.
            let mut changed = pin!(self.0.changed.notified());
            changed.as_mut().enable();
            if self.count() == 0 {
                return;
            }
            changed.await;
        }
    }

    /// Returns once no reconcile has run for `quiet`, or at `deadline`.
    pub async fn quiet(&self, quiet: Duration, deadline: Instant) {
        loop {
            let mut changed = pin!(self.0.changed.notified());
            changed.as_mut().enable();
            let quiet_for = self.quiet_for();
            if quiet_for >= quiet || Instant::now() >= deadline {
                return;
            }
            // Idle: until the quiet period is over (a reconcile begun meanwhile is seen
            // then); busy: until the last one ends.
            let wake = if self.count() > 0 {
                deadline
            } else {
                deadline.min(Instant::now() + (quiet - quiet_for))
            };
            tokio::select! {
                () = changed => {}
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        // The time is set before the count drops, so a quiet period never starts early.
        *lock(&self.0.last_end) = Instant::now();
        if self.0.running.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.0.changed.notify_waiters();
        }
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

    #[tokio::test(start_paused = true)]
    async fn drained_returns_when_the_last_reconcile_ends() {
        let in_flight = InFlight::default();
        in_flight.drained().await;
        let running = in_flight.enter();
        let waiting = tokio::spawn({
            let in_flight = in_flight.clone();
            async move { in_flight.drained().await }
        });
        tokio::time::sleep(Duration::from_secs(3600)).await;
        assert!(!waiting.is_finished(), "drained while a reconcile runs");
        drop(running);
        waiting.await.unwrap();
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_waits_out_the_period_after_the_last_reconcile() {
        let in_flight = InFlight::default();
        let period = Duration::from_millis(250);
        let far = Instant::now() + Duration::from_secs(30);
        let running = in_flight.enter();
        let started = Instant::now();
        let waiting = tokio::spawn({
            let in_flight = in_flight.clone();
            async move { in_flight.quiet(period, far).await }
        });
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert!(!waiting.is_finished(), "quiet while a reconcile runs");
        drop(running);
        // Another reconcile within the period starts the period again.
        tokio::time::sleep(Duration::from_millis(100)).await;
        drop(in_flight.enter());
        waiting.await.unwrap();
        let took = started.elapsed();
        let expected = Duration::from_millis(5100) + period;
        assert!(
            took >= expected && took < expected + Duration::from_millis(5),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_reconcile_begun_in_the_period_holds_quiet_until_it_ends() {
        let in_flight = InFlight::default();
        let period = Duration::from_millis(250);
        let started = Instant::now();
        let waiting = tokio::spawn({
            let in_flight = in_flight.clone();
            async move {
                in_flight
                    .quiet(period, started + Duration::from_secs(30))
                    .await
            }
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
        let running = in_flight.enter();
        tokio::time::sleep(Duration::from_secs(2)).await;
        assert!(!waiting.is_finished(), "quiet while a reconcile runs");
        drop(running);
        waiting.await.unwrap();
        let took = started.elapsed();
        let expected = Duration::from_millis(2100) + period;
        assert!(
            took >= expected && took < expected + Duration::from_millis(5),
            "{took:?}"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn quiet_gives_up_at_the_deadline() {
        let in_flight = InFlight::default();
        let _running = in_flight.enter();
        let started = Instant::now();
        let deadline = started + Duration::from_secs(30);
        in_flight.quiet(Duration::from_millis(250), deadline).await;
        let took = started.elapsed();
        assert!(
            took >= Duration::from_secs(30) && took < Duration::from_millis(30_005),
            "{took:?}"
        );
    }
}
