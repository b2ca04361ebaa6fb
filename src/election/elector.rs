//! One attempt to take or keep the Lease, with client-go's semantics
//! (`tryAcquireOrRenew`): a holder is trusted for its lease duration after the local,
//! monotonic instant at which this process last saw the record change — never by
//! comparing the holder's timestamps with the local clock, which may disagree.

use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::lock::{LeaseLock, LockError};
use super::record::LeaseRecord;
use crate::clock::{Clock, ClockBound, ClockSkew};

/// What an attempt found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// This process holds the Lease (acquired or renewed just now).
    Holding,
    /// Another holder's lease is still valid.
    HeldBy(String),
    /// The attempt failed (a lost race, an API error); try again later.
    Failed(LockError),
    /// This process's clock is too far from the API server's to lead: it neither takes
    /// nor keeps the Lease.
    ClockSkewed(ClockSkew),
}

/// Takes, keeps and gives back the Lease for one identity.
pub struct Elector<L> {
    lock: L,
    identity: String,
    lease_duration: Duration,
    clock: Arc<dyn Clock>,
    /// How far this process's clock may be from the API server's for it to lead.
    clock_bound: Option<ClockBound>,
    /// The record last read or written, and when (local monotonic time) it was first seen.
    observed: Option<(LeaseRecord, Instant)>,
}

impl<L: LeaseLock> Elector<L> {
    /// An elector for `identity`, asking for `lease_duration` when it holds the Lease.
    pub fn new(
        lock: L,
        identity: &str,
        lease_duration: Duration,
        clock: Arc<dyn Clock>,
    ) -> Elector<L> {
        Elector {
            lock,
            identity: identity.to_owned(),
            lease_duration,
            clock,
            clock_bound: None,
            observed: None,
        }
    }

    /// Takes or keeps the Lease only while `bound` holds (checked before every write of
    /// the record, after the read that measures the clock).
    pub fn with_clock_bound(mut self, bound: ClockBound) -> Elector<L> {
        self.clock_bound = Some(bound);
        self
    }

    /// The clock bound, if any.
    pub fn clock_bound(&self) -> Option<&ClockBound> {
        self.clock_bound.as_ref()
    }

    /// Checks the clock bound, if any.
    pub fn clock_check(&self) -> Result<(), ClockSkew> {
        self.clock_bound.as_ref().map_or(Ok(()), ClockBound::check)
    }

    /// This elector's identity.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Where the record lives, for logs.
    pub fn describe(&self) -> String {
        self.lock.describe()
    }

    /// Whether the record last seen names this process as holder.
    pub fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|(record, _)| record.holder == self.identity)
    }

    /// The transition count of the record last seen.
    pub fn transitions(&self) -> i32 {
        self.observed.as_ref().map_or(0, |(r, _)| r.transitions)
    }

    /// The resourceVersion of the Lease as last read or written: right after an
    /// acquisition, the version that began the term (its fencing token).
    pub fn version(&self) -> Option<u64> {
        self.lock.version()
    }

    /// Whether the holder of the record last seen is still trusted at `now`.
    fn lease_valid(&self, now: Instant) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|(record, seen)| *seen + record.lease_duration() > now)
    }

    /// Acquires the Lease if it is free or expired, or renews it if held.
    pub async fn try_acquire_or_renew(&mut self) -> Attempt {
        let mut record =
            LeaseRecord::held_by(&self.identity, self.lease_duration, self.clock.now());
        // Fast path: the holder renews the record it wrote last, without reading it first.
        if let Some((observed, _)) = &self.observed
            && self.is_leader()
            && self.lease_valid(Instant::now())
        {
            if let Err(skew) = self.clock_check() {
                return Attempt::ClockSkewed(skew);
            }
            record.acquire_time = observed.acquire_time;
            record.transitions = observed.transitions;
            if self.lock.update(&record).await.is_ok() {
                self.observe(record);
                return Attempt::Holding;
            }
        }
        let current = match self.lock.get().await {
            Ok(Some(current)) => current,
            Ok(None) => {
                if let Err(skew) = self.clock_check() {
                    return Attempt::ClockSkewed(skew);
                }
                return match self.lock.create(&record).await {
                    Ok(()) => {
                        self.observe(record);
                        Attempt::Holding
                    }
                    Err(error) => Attempt::Failed(error),
                };
            }
            Err(error) => return Attempt::Failed(error),
        };
        self.observe(current.clone());
        if !current.holder.is_empty() && !self.is_leader() && self.lease_valid(Instant::now()) {
            return Attempt::HeldBy(current.holder);
        }
        if let Err(skew) = self.clock_check() {
            return Attempt::ClockSkewed(skew);
        }
        if self.is_leader() {
            record.acquire_time = current.acquire_time;
            record.transitions = current.transitions;
        } else {
            record.transitions = current.transitions.saturating_add(1);
        }
        match self.lock.update(&record).await {
            Ok(()) => {
                self.observe(record);
                Attempt::Holding
            }
            Err(error) => Attempt::Failed(error),
        }
    }

    /// Gives the Lease up (no holder, a 1 s duration) so a standby takes over at its next
    /// attempt. Does nothing unless this process holds it.
    pub async fn release(&mut self) -> Result<(), LockError> {
        let Some((observed, _)) = self.observed.as_ref().filter(|_| self.is_leader()) else {
            return Ok(());
        };
        let released = observed.released(self.clock.now());
        match self.lock.update(&released).await {
            Ok(()) => {}
            // A renewal of ours taken for failed (it was only slow: a loaded machine) may
            // have landed since we last read: if the Lease still names us, nobody else
            // holds it, and releasing the version we now read hands it over at once
            // instead of making the successor wait out a lease duration.
            Err(LockError::Conflict) => {
                let Some(current) = self.lock.get().await? else {
                    return Ok(());
                };
                if current.holder != self.identity {
                    self.observe(current);
                    return Ok(());
                }
                let released = current.released(self.clock.now());
                self.lock.update(&released).await?;
                self.observe(released);
                return Ok(());
            }
            Err(error) => return Err(error),
        }
        self.observe(released);
        Ok(())
    }

    /// Remembers `record`; the trust period restarts only when the record changed.
    fn observe(&mut self, record: LeaseRecord) {
        if self
            .observed
            .as_ref()
            .is_none_or(|(seen, _)| *seen != record)
        {
            self.observed = Some((record, Instant::now()));
        }
    }
}
