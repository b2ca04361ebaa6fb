//! Leader election on a Lease, with client-go's semantics (DESIGN §6).
//!
//! ```text
//!  standby ──(free, released, or expired lease; every retryPeriod)──► leader
//!     ▲                                                                │ renew every
//!     │                                                                │ retryPeriod
//!     └── no successful renew within renewDeadline, or another holder ─┘
//! ```
//!
//! The [`Elector`] makes single attempts (acquire or renew, and release); [`campaign`]
//! runs them on their timers and publishes each term to the [`WriteGate`]. A leader that
//! loses the Lease goes back to standby rather than exiting: its watch caches stay warm
//! for the next takeover, and a flapping API server does not put it in CrashLoopBackOff.

mod elector;
mod gate;
mod lock;
mod record;

#[cfg(test)]
mod tests;

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::clock::ClockSkew;

pub use elector::{Attempt, Elector};
pub use gate::{NotLeading, Term, WriteGate};
pub use lock::{KubeLease, LeaseLock, LockError};
pub use record::LeaseRecord;

/// How long leadership lasts and how often it is renewed (client-go's three durations).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long standbys trust a holder that stopped renewing (whole seconds).
    pub lease_duration: Duration,
    /// How long the leader keeps acting without a successful renew.
    pub renew_deadline: Duration,
    /// The pause between attempts, for the leader and the standbys.
    pub retry_period: Duration,
}

impl Default for Timing {
    /// client-go's defaults: 15 s, 10 s, 2 s.
    fn default() -> Timing {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// The durations do not make a safe election.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TimingError {
    /// A duration is zero.
    #[error("{0} must be positive")]
    NotPositive(&'static str),
    /// The Lease records the duration in whole seconds.
    #[error("lease duration must be a whole number of seconds, got {0:?}")]
    FractionalLease(Duration),
    /// The leader could still act after standbys consider its lease expired.
    #[error("lease duration ({lease:?}) must be longer than the renew deadline ({renew:?})")]
    LeaseNotLongerThanDeadline {
        /// Lease duration.
        lease: Duration,
        /// Renew deadline.
        renew: Duration,
    },
    /// The leader would not get a jittered retry in before the deadline.
    #[error("renew deadline ({renew:?}) must be longer than 1.2 x the retry period ({retry:?})")]
    DeadlineNotLongerThanRetries {
        /// Renew deadline.
        renew: Duration,
        /// Retry period.
        retry: Duration,
    },
}

/// client-go's jitter factor: the renew deadline must leave room for a jittered retry.
const JITTER: f64 = 1.2;

impl Timing {
    /// Checks `leaseDuration > renewDeadline > 1.2 × retryPeriod`, all positive.
    pub fn validate(&self) -> Result<(), TimingError> {
        let Timing {
            lease_duration: lease,
            renew_deadline: renew,
            retry_period: retry,
        } = *self;
        for (name, value) in [
            ("lease duration", lease),
            ("renew deadline", renew),
            ("retry period", retry),
        ] {
            if value.is_zero() {
                return Err(TimingError::NotPositive(name));
            }
        }
        if lease.subsec_nanos() != 0 {
            return Err(TimingError::FractionalLease(lease));
        }
        if lease <= renew {
            return Err(TimingError::LeaseNotLongerThanDeadline { lease, renew });
        }
        if renew.as_secs_f64() <= JITTER * retry.as_secs_f64() {
            return Err(TimingError::DeadlineNotLongerThanRetries { renew, retry });
        }
        Ok(())
    }
}

/// Asks a running [`campaign`] to release the Lease and end.
pub struct Release(oneshot::Sender<oneshot::Sender<()>>);

impl Release {
    /// Closes the gate, gives the Lease up if held, and waits until that is done.
    pub async fn release(self) {
        let (done, released) = oneshot::channel();
        if self.0.send(done).is_ok() {
            let _ = released.await;
        }
    }
}

/// What a campaign reports as it goes (metrics, logs and Events hook in here).
pub trait Observer: Send + Sync + 'static {
    /// This process became the leader or stopped being it.
    fn leading(&self, leading: bool);

    /// This process's clock went beyond its bound (it does not campaign, and stepped
    /// down if it led), or (`None`) came back within it.
    fn clock_skewed(&self, _skew: Option<ClockSkew>) {}
}

impl Observer for () {
    fn leading(&self, _: bool) {}
}

/// Starts campaigning for the Lease in the background: returns the gate that follows
/// this process's terms, and the handle that ends the campaign.
pub fn spawn<L: LeaseLock + 'static>(
    elector: Elector<L>,
    timing: Timing,
    observer: impl Observer,
) -> (WriteGate, Release) {
    let (terms, gate) = watch::channel(None);
    let (release, released) = oneshot::channel();
    let gate = WriteGate::leased(gate).with_clock_bound(elector.clock_bound().cloned());
    tokio::spawn(campaign(elector, timing, terms, released, observer));
    (gate, Release(release))
}

/// Campaigns until released: standby attempts every retryPeriod (with a little jitter),
/// then renewals every retryPeriod while leading; each term is published on `terms`.
pub async fn campaign<L: LeaseLock>(
    mut elector: Elector<L>,
    timing: Timing,
    terms: watch::Sender<Option<Term>>,
    mut release: oneshot::Receiver<oneshot::Sender<()>>,
    observer: impl Observer,
) {
    let lease = elector.describe();
    let identity = elector.identity().to_owned();
    let mut number = 0;
    let mut last_holder = String::new();
    let mut skewed = false;
    loop {
        // Standby.
        let mut valid_until = loop {
            let started = Instant::now();
            let attempt = tokio::select! {
                attempt = tokio::time::timeout(timing.renew_deadline, elector.try_acquire_or_renew()) => attempt,
                done = &mut release => return finish(done.ok(), &mut elector, &terms).await,
            };
            // After the attempt's read, the clock is measured: report changes.
            let skew = elector.clock_check().err();
            if skew.is_some() != skewed {
                skewed = skew.is_some();
                match &skew {
                    Some(skew) => {
                        tracing::warn!(%lease, reason = %skew, "not campaigning: clock too far from the API server's")
                    }
                    None => tracing::info!(%lease, "clock back within bound: campaigning"),
                }
                observer.clock_skewed(skew);
            }
            match attempt {
                Ok(Attempt::Holding) => break started + timing.renew_deadline,
                Ok(Attempt::ClockSkewed(_)) => {}
                Ok(Attempt::HeldBy(holder)) => {
                    if holder != last_holder {
                        tracing::info!(%lease, %holder, "standing by: the lease is held");
                        last_holder = holder;
                    }
                }
                Ok(Attempt::Failed(error)) => {
                    tracing::warn!(%lease, %error, "attempt to acquire the lease failed");
                }
                Err(_) => tracing::warn!(%lease, "attempt to acquire the lease timed out"),
            }
            tokio::select! {
                () = tokio::time::sleep(jittered(timing.retry_period)) => {}
                done = &mut release => return finish(done.ok(), &mut elector, &terms).await,
            }
        };
        number += 1;
        // Unique per term: the Lease version this acquisition wrote (an etcd revision),
        // or, should a server ever send a non-numeric one, a random number.
        let fence = elector
            .version()
            .unwrap_or_else(|| RandomState::new().hash_one(Instant::now()));
        terms.send_replace(Some(Term {
            number,
            valid_until,
            fence,
        }));
        observer.leading(true);
        last_holder = identity.clone();
        tracing::info!(%lease, %identity, transitions = elector.transitions(), fence, "became the leader");

        // Leading.
        let lost = loop {
            tokio::select! {
                () = tokio::time::sleep(timing.retry_period) => {}
                done = &mut release => {
                    observer.leading(false);
                    return finish(done.ok(), &mut elector, &terms).await;
                }
            }
            let started = Instant::now();
            match tokio::time::timeout_at(valid_until, elector.try_acquire_or_renew()).await {
                Ok(Attempt::Holding) => {
                    valid_until = started + timing.renew_deadline;
                    terms.send_replace(Some(Term {
                        number,
                        valid_until,
                        fence,
                    }));
                }
                Ok(Attempt::HeldBy(holder)) => break format!("the lease is now held by {holder}"),
                Ok(Attempt::ClockSkewed(skew)) => {
                    // Give the Lease up so that a standby with a good clock takes over
                    // at its next attempt, not a lease duration later.
                    terms.send_replace(None);
                    if let Err(error) = elector.release().await {
                        tracing::warn!(%lease, %error, "releasing the lease failed");
                    }
                    observer.clock_skewed(Some(skew));
                    skewed = true;
                    break format!("stepped down and released the lease: {skew}");
                }
                Ok(Attempt::Failed(error)) => {
                    tracing::warn!(%lease, %error, "renewing the lease failed; retrying");
                }
                Err(_) => break "no successful renew within the renew deadline".to_owned(),
            }
            if Instant::now() >= valid_until {
                break "no successful renew within the renew deadline".to_owned();
            }
        };
        terms.send_replace(None);
        observer.leading(false);
        tracing::warn!(%lease, reason = %lost, "lost leadership: stopped writing; standing by");
    }
}

/// Ends a campaign: closes the gate, releases the Lease if held, and reports back.
async fn finish<L: LeaseLock>(
    done: Option<oneshot::Sender<()>>,
    elector: &mut Elector<L>,
    terms: &watch::Sender<Option<Term>>,
) {
    terms.send_replace(None);
    let was_leader = elector.is_leader();
    match elector.release().await {
        Ok(()) if was_leader => tracing::info!(lease = %elector.describe(), "released the lease"),
        Ok(()) => {}
        Err(error) => {
            tracing::warn!(lease = %elector.describe(), %error, "releasing the lease failed")
        }
    }
    if let Some(done) = done {
        let _ = done.send(());
    }
}

/// `period` stretched by up to a tenth, so standbys do not knock in lockstep.
fn jittered(period: Duration) -> Duration {
    let random = RandomState::new().hash_one(Instant::now());
    let fraction = (random % 1000) as f64 / 1000.0;
    period.mul_f64(1.0 + 0.1 * fraction)
}
