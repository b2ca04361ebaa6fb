//! Leader election on a Lease, with client-go's semantics (docs/design.md §6).
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
mod metrics;
mod observer;
mod record;

#[cfg(test)]
mod tests;

use std::hash::{BuildHasher, RandomState};
use std::time::Duration;

use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::clock::ClockSkew;
use crate::task::{self, Task};

pub use elector::{Attempt, Elector};
pub use gate::{NotLeading, Term, WriteGate};
pub use lock::{KubeLease, LeaseLock, LockError};
pub use metrics::ElectionMetrics;
pub use observer::Observer;
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

/// Starts campaigning for the Lease in the background: returns the gate that follows
/// this process's terms, the handle that ends the campaign, and its task (which ends
/// only once released).
pub fn spawn<L: LeaseLock + 'static>(
    elector: Elector<L>,
    timing: Timing,
    observer: impl Observer,
) -> (WriteGate, Release, Task) {
    let (terms, gate) = watch::channel(None);
    let (release, released) = oneshot::channel();
    let gate = WriteGate::leased(gate).with_clock_bound(elector.clock_bound().cloned());
    let campaign = task::spawn(
        "elector",
        campaign(elector, timing, terms, released, observer),
    );
    (gate, Release(release), campaign)
}

/// Campaigns until released: standby attempts every retryPeriod (with a little jitter),
/// then renewals every retryPeriod while leading; each term is published on `terms`.
pub async fn campaign<L: LeaseLock>(
    elector: Elector<L>,
    timing: Timing,
    terms: watch::Sender<Option<Term>>,
    release: oneshot::Receiver<oneshot::Sender<()>>,
    observer: impl Observer,
) {
    let mut campaign = Campaign {
        lease: elector.describe(),
        elector,
        timing,
        terms,
        release,
        observer,
        number: 0,
        last_holder: String::new(),
        skewed: false,
    };
    loop {
        let Some(valid_until) = campaign.stand_by().await else {
            return;
        };
        if !campaign.lead(valid_until).await {
            return;
        }
    }
}

/// A running campaign's state.
struct Campaign<L, O> {
    elector: Elector<L>,
    timing: Timing,
    terms: watch::Sender<Option<Term>>,
    release: oneshot::Receiver<oneshot::Sender<()>>,
    observer: O,
    /// Where the Lease lives, for logs.
    lease: String,
    /// The number of the last term.
    number: u64,
    /// The holder last reported while standing by.
    last_holder: String,
    /// Whether the clock was last found beyond its bound.
    skewed: bool,
}

impl<L: LeaseLock, O: Observer> Campaign<L, O> {
    /// Attempts to take the Lease every retry period until it holds it; returns the
    /// instant the first term is valid until, or `None` once released.
    async fn stand_by(&mut self) -> Option<Instant> {
        let lease = self.lease.clone();
        loop {
            let started = Instant::now();
            let attempt = tokio::select! {
                attempt = tokio::time::timeout(self.timing.renew_deadline, self.elector.try_acquire_or_renew()) => attempt,
                done = &mut self.release => {
                    finish(done.ok(), &mut self.elector, &self.terms).await;
                    return None;
                }
            };
            self.report_clock();
            match attempt {
                Ok(Attempt::Holding) => return Some(started + self.timing.renew_deadline),
                Ok(Attempt::ClockSkewed(_)) => {}
                Ok(Attempt::HeldBy(holder)) => {
                    if holder != self.last_holder {
                        tracing::info!(%lease, %holder, "standing by: the lease is held");
                        self.last_holder = holder;
                    }
                }
                Ok(Attempt::Failed(error)) => {
                    tracing::warn!(%lease, %error, "attempt to acquire the lease failed");
                }
                Err(_) => tracing::warn!(%lease, "attempt to acquire the lease timed out"),
            }
            tokio::select! {
                () = tokio::time::sleep(jittered(self.timing.retry_period)) => {}
                done = &mut self.release => {
                    finish(done.ok(), &mut self.elector, &self.terms).await;
                    return None;
                }
            }
        }
    }

    /// After an attempt's read has measured the clock, reports a change of its state.
    fn report_clock(&mut self) {
        let skew = self.elector.clock_check().err();
        if skew.is_some() != self.skewed {
            self.skewed = skew.is_some();
            match &skew {
                Some(skew) => {
                    tracing::warn!(lease = %self.lease, reason = %skew, "not campaigning: clock too far from the API server's")
                }
                None => tracing::info!(lease = %self.lease, "clock back within bound: campaigning"),
            }
            self.observer.clock_skewed(skew);
        }
    }

    /// Publishes a new term valid until `valid_until` and renews it every retry period
    /// until leadership is lost (then returns `true`, back to standby) or the campaign
    /// is released (`false`).
    async fn lead(&mut self, mut valid_until: Instant) -> bool {
        self.number += 1;
        let number = self.number;
        // Unique per term: the Lease version this acquisition wrote (an etcd revision),
        // or, should a server ever send a non-numeric one, a random number.
        let fence = self
            .elector
            .version()
            .unwrap_or_else(|| RandomState::new().hash_one(Instant::now()));
        let term = |valid_until| {
            Some(Term {
                number,
                valid_until,
                fence,
            })
        };
        self.terms.send_replace(term(valid_until));
        self.observer.leading(true);
        let (lease, identity) = (self.lease.clone(), self.elector.identity().to_owned());
        self.last_holder = identity.clone();
        tracing::info!(%lease, %identity, transitions = self.elector.transitions(), fence, "became the leader");
        let lost = loop {
            tokio::select! {
                () = tokio::time::sleep(self.timing.retry_period) => {}
                done = &mut self.release => {
                    self.observer.leading(false);
                    finish(done.ok(), &mut self.elector, &self.terms).await;
                    return false;
                }
            }
            let started = Instant::now();
            match tokio::time::timeout_at(valid_until, self.elector.try_acquire_or_renew()).await {
                Ok(Attempt::Holding) => {
                    valid_until = started + self.timing.renew_deadline;
                    self.terms.send_replace(term(valid_until));
                }
                Ok(Attempt::HeldBy(holder)) => break format!("the lease is now held by {holder}"),
                Ok(Attempt::ClockSkewed(skew)) => break self.step_down(skew).await,
                Ok(Attempt::Failed(error)) => {
                    tracing::warn!(%lease, %error, "renewing the lease failed; retrying");
                }
                Err(_) => break "no successful renew within the renew deadline".to_owned(),
            }
            if Instant::now() >= valid_until {
                break "no successful renew within the renew deadline".to_owned();
            }
        };
        self.terms.send_replace(None);
        self.observer.leading(false);
        tracing::warn!(%lease, reason = %lost, "lost leadership: stopped writing; standing by");
        true
    }

    /// Ends a term because the clock went beyond its bound: gives the Lease up so that a
    /// standby with a good clock takes over at its next attempt, not a lease duration
    /// later. Returns why leadership ended.
    async fn step_down(&mut self, skew: ClockSkew) -> String {
        self.terms.send_replace(None);
        if let Err(error) = self.elector.release().await {
            tracing::warn!(lease = %self.lease, %error, "releasing the lease failed");
        }
        self.observer.clock_skewed(Some(skew));
        self.skewed = true;
        format!("stepped down and released the lease: {skew}")
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
