//! How far this replica's wall clock is from the API server's, estimated from the `Date`
//! header of API responses, so that a replica with a bad clock — whose timers would fire
//! early or late — neither campaigns nor keeps leading (docs/design.md §6).
//!
//! A response's `Date` (whole seconds) was stamped at some moment between sending the
//! request and receiving the response. So each response bounds the server's time
//! relative to this process's *monotonic* clock to an interval one second plus the round
//! trip wide; intersecting the intervals of recent responses narrows it (their
//! fractions of a second differ). The offset at any moment is then the server time
//! extrapolated on the monotonic clock minus the wall clock — which also catches a jump
//! of the wall clock the instant it happens, before the next response.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};

use super::wall::Clock;

/// Responses taken into account at most.
const WINDOW: usize = 32;

/// Responses older than this are dropped: both clocks drift.
const MAX_AGE: Duration = Duration::from_secs(600);

/// What one response says: the server's time when the monotonic reading was zero lies
/// in `[low, high]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bounds {
    low: Timestamp,
    high: Timestamp,
    /// When it was received, on the monotonic clock.
    received: Duration,
}

/// The intersection of what recent responses say; pure, fed monotonic readings.
#[derive(Debug, Default)]
struct Estimator {
    /// Newest first.
    window: VecDeque<Bounds>,
    /// The server's time at monotonic zero, as the middle of the window's intersection.
    server_at_zero: Option<Timestamp>,
}

impl Estimator {
    /// Adds a response sent at monotonic `sent`, received at `received`, stamped `date`.
    /// Older responses that contradict it (the server's clock or ours was stepped) go.
    fn add(&mut self, sent: Duration, received: Duration, date: Timestamp) {
        let (Ok(sent), Ok(received_signed)) = (
            SignedDuration::try_from(sent),
            SignedDuration::try_from(received),
        ) else {
            return;
        };
        let (Ok(low), Ok(high)) = (
            date.checked_sub(received_signed),
            date.checked_add(SignedDuration::from_secs(1) - sent),
        ) else {
            return;
        };
        self.window.push_front(Bounds {
            low,
            high,
            received,
        });
        self.window.truncate(WINDOW);
        let (mut low, mut high) = (low, high);
        let mut keep = 0;
        for bounds in &self.window {
            if received.saturating_sub(bounds.received) > MAX_AGE
                || bounds.low.max(low) > bounds.high.min(high)
            {
                break;
            }
            (low, high) = (bounds.low.max(low), bounds.high.min(high));
            keep += 1;
        }
        self.window.truncate(keep);
        self.server_at_zero = low.checked_add(high.duration_since(low) / 2).ok();
    }

    /// The server's time at monotonic zero, as the middle of the intersection.
    fn server_at_zero(&self) -> Option<Timestamp> {
        self.server_at_zero
    }
}

/// The estimated offset of this process's clock; cheap to clone, shared by the
/// client's [`OffsetProbe`](super::OffsetProbe) (which feeds it) and its readers.
#[derive(Clone)]
pub struct ClockOffset {
    estimator: Arc<Mutex<Estimator>>,
    base: Instant,
    clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for ClockOffset {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClockOffset")
            .field("offset", &self.offset())
            .finish()
    }
}

impl ClockOffset {
    /// An estimate of `clock`'s offset, with no response seen yet.
    pub fn new(clock: Arc<dyn Clock>) -> ClockOffset {
        ClockOffset {
            estimator: Arc::default(),
            base: Instant::now(),
            clock,
        }
    }

    /// Takes a response into account: request sent at `sent`, response (headers)
    /// received at `received`, with `Date` `date`.
    pub fn record(&self, sent: Instant, received: Instant, date: Timestamp) {
        let since = |at: Instant| at.saturating_duration_since(self.base);
        self.lock().add(since(sent), since(received), date);
    }

    /// The API server's clock minus this process's wall clock, right now; `None` before
    /// any response with a `Date` was seen.
    pub fn offset(&self) -> Option<SignedDuration> {
        let server_at_zero = self.lock().server_at_zero()?;
        let elapsed = SignedDuration::try_from(self.base.elapsed()).ok()?;
        let server_now = server_at_zero.checked_add(elapsed).ok()?;
        Some(server_now.duration_since(self.clock.now()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Estimator> {
        crate::sync::lock(&self.estimator)
    }
}

/// This replica's clock is too far from the API server's to act on timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "this replica's clock is {} the API server's by {:.1} s, more than the bound of {:?}",
    if offset.is_negative() { "ahead of" } else { "behind" },
    offset.abs().as_secs_f64(),
    max
)]
pub struct ClockSkew {
    /// The API server's clock minus ours.
    pub offset: SignedDuration,
    /// The bound it exceeds.
    pub max: Duration,
}

/// The largest offset a replica may have and still lead.
#[derive(Debug, Clone)]
pub struct ClockBound {
    offset: ClockOffset,
    max: Option<Duration>,
}

impl ClockBound {
    /// Allows at most `max` (none: any offset) between `offset`'s clock and the server's.
    pub fn new(offset: ClockOffset, max: Option<Duration>) -> ClockBound {
        ClockBound { offset, max }
    }

    /// Fails if the current offset exceeds the bound. An offset not measured yet passes:
    /// the first API response measures it, and every Lease attempt reads first.
    pub fn check(&self) -> Result<(), ClockSkew> {
        let (Some(max), Some(offset)) = (self.max, self.offset.offset()) else {
            return Ok(());
        };
        match SignedDuration::try_from(max) {
            Ok(bound) if offset.abs() > bound => Err(ClockSkew { offset, max }),
            _ => Ok(()),
        }
    }

    /// The estimate this bound is checked against.
    pub fn offset(&self) -> &ClockOffset {
        &self.offset
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn ms(millis: u64) -> Duration {
        Duration::from_millis(millis)
    }

    /// The estimated server time at monotonic `reading`.
    fn server_at(estimator: &Estimator, reading: Duration) -> Timestamp {
        estimator.server_at_zero().unwrap() + SignedDuration::try_from(reading).unwrap()
    }

    #[test]
    fn one_response_pins_the_server_time_to_within_half_a_second_and_half_the_round_trip() {
        let mut estimator = Estimator::default();
        // Server time at monotonic 10 s is 12:00:00.7 (Date truncates it to 12:00:00).
        estimator.add(ms(9_990), ms(10_010), at("2026-12-01T12:00:00Z"));
        let estimate = server_at(&estimator, ms(10_000));
        let error = estimate.duration_since(at("2026-12-01T12:00:00.7Z")).abs();
        assert!(error <= SignedDuration::from_millis(510), "{error:?}");
    }

    #[test]
    fn responses_at_different_fractions_of_a_second_narrow_the_estimate() {
        let mut estimator = Estimator::default();
        // True server time at monotonic m: 12:00:00.7 + (m - 10 s); 20 ms round trips.
        let truth =
            |m: u64| at("2026-12-01T12:00:00.7Z") + SignedDuration::from_millis(m as i64 - 10_000);
        for m in (10_000..20_000).step_by(330) {
            let stamped = truth(m);
            let date = Timestamp::from_second(stamped.as_second()).unwrap();
            estimator.add(ms(m - 10), ms(m + 10), date);
        }
        let error = server_at(&estimator, ms(20_000))
            .duration_since(truth(20_000))
            .abs();
        assert!(error <= SignedDuration::from_millis(30), "{error:?}");
    }

    #[test]
    fn a_stepped_server_clock_replaces_the_contradicted_responses() {
        let mut estimator = Estimator::default();
        estimator.add(ms(9_990), ms(10_010), at("2026-12-01T12:00:00Z"));
        estimator.add(ms(10_990), ms(11_010), at("2026-12-01T12:00:01Z"));
        // The server's clock jumps by a minute.
        estimator.add(ms(11_990), ms(12_010), at("2026-12-01T12:01:02Z"));
        let estimate = server_at(&estimator, ms(12_000));
        let error = estimate.duration_since(at("2026-12-01T12:01:02.5Z")).abs();
        assert!(error <= SignedDuration::from_millis(510), "{error:?}");
        assert_eq!(estimator.window.len(), 1);
    }

    #[test]
    fn old_responses_age_out() {
        let mut estimator = Estimator::default();
        estimator.add(ms(0), ms(10), at("2026-12-01T12:00:00Z"));
        estimator.add(ms(700_000), ms(700_010), at("2026-12-01T12:11:40Z"));
        assert_eq!(estimator.window.len(), 1);
    }

    /// A wall clock set to a fixed instant.
    struct Fixed(Mutex<Timestamp>);

    impl Clock for Fixed {
        fn now(&self) -> Timestamp {
            *self.0.lock().unwrap()
        }
    }

    #[test]
    fn the_offset_is_the_server_time_minus_the_wall_clock_and_follows_a_wall_clock_jump() {
        let wall = Arc::new(Fixed(Mutex::new(at("2026-12-01T12:00:45.5Z"))));
        let offset = ClockOffset::new(wall.clone());
        let now = Instant::now();
        offset.record(now, now, at("2026-12-01T12:00:00Z"));
        let measured = offset.offset().unwrap();
        assert!(
            (measured + SignedDuration::from_secs(45)).abs() <= SignedDuration::from_millis(600),
            "{measured:?}"
        );
        let bound = ClockBound::new(offset.clone(), Some(Duration::from_secs(2)));
        let skew = bound.check().unwrap_err();
        assert_eq!(skew.max, Duration::from_secs(2));
        assert!(
            skew.to_string()
                .contains("ahead of the API server's by 45."),
            "{skew}"
        );

        // The wall clock is corrected (NTP steps it back): no new response needed.
        *wall.0.lock().unwrap() = at("2026-12-01T12:00:00.5Z");
        assert_eq!(bound.check(), Ok(()));
        assert_eq!(ClockBound::new(offset, None).check(), Ok(()));
    }

    #[test]
    fn an_unmeasured_offset_passes() {
        let offset = ClockOffset::new(Arc::new(super::super::wall::SystemClock));
        assert_eq!(offset.offset(), None);
        assert_eq!(
            ClockBound::new(offset, Some(Duration::from_secs(2))).check(),
            Ok(())
        );
    }
}
