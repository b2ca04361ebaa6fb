//! The gate in front of every write: open while this process may act.
//!
//! With leader election, the elector publishes each leadership term with the monotonic
//! instant it is valid until (the start of the last successful renew + renewDeadline).
//! [`WriteGate::check`] compares that instant with the clock itself, so a process that
//! was frozen (SIGSTOP, a long GC-like stall) finds the gate closed the moment it
//! resumes, whichever of its tasks runs first.

use std::future::Future;

use futures::Stream;

use crate::clock::ClockBound;
use tokio::sync::watch;
use tokio::time::Instant;

/// One leadership term of this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Term {
    /// Counts the terms of this process: 1, 2, ...
    pub number: u64,
    /// Writes are allowed until this instant unless the Lease is renewed.
    pub valid_until: Instant,
    /// The fencing token: the resourceVersion of the Lease write that began the term.
    /// It differs between any two terms of any replicas, so a target write made under it
    /// (a field manager named after it) is always a change the API server records.
    pub fence: u64,
}

/// Writing is not allowed now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not the leader: writes are gated off")]
pub struct NotLeading;

/// The gate; cheap to clone.
#[derive(Debug, Clone)]
pub struct WriteGate {
    /// The current term, or `None` for a gate that never closes.
    terms: Option<watch::Receiver<Option<Term>>>,
    /// Shut while this process's clock is too far from the API server's: a leader whose
    /// wall clock jumps writes nothing from that instant, before it steps down.
    clock: Option<ClockBound>,
}

impl WriteGate {
    /// A gate that never closes: a single replica without leader election.
    pub fn always_open() -> WriteGate {
        WriteGate {
            terms: None,
            clock: None,
        }
    }

    /// A gate open during the terms published on `terms`.
    pub fn leased(terms: watch::Receiver<Option<Term>>) -> WriteGate {
        WriteGate {
            terms: Some(terms),
            clock: None,
        }
    }

    /// The same gate, also shut while `bound` does not hold.
    pub fn with_clock_bound(mut self, bound: Option<ClockBound>) -> WriteGate {
        self.clock = bound;
        self
    }

    /// Whether writing is allowed right now.
    pub fn is_open(&self) -> bool {
        self.in_term()
            && self
                .clock
                .as_ref()
                .is_none_or(|bound| bound.check().is_ok())
    }

    /// Whether a term is current, whatever the clock says: shut only by the clock bound,
    /// the gate may open again within the term (or the replica steps down, and the next
    /// term starts afresh).
    pub fn in_term(&self) -> bool {
        match &self.terms {
            None => true,
            Some(terms) => is_current(*terms.borrow(), Instant::now()),
        }
    }

    /// The number of the current (or last) term; 0 before the first, and always for a gate
    /// that never closes.
    pub fn term(&self) -> u64 {
        self.terms
            .as_ref()
            .and_then(|terms| terms.borrow().map(|t| t.number))
            .unwrap_or(0)
    }

    /// The fencing token of the current term ([`Term::fence`]); `None` for a gate that
    /// never closes, or between terms.
    pub fn fence(&self) -> Option<u64> {
        let terms = self.terms.as_ref()?;
        terms
            .borrow()
            .filter(|t| is_current(Some(*t), Instant::now()))
            .map(|t| t.fence)
    }

    /// Fails unless writing is allowed right now; call immediately before each write.
    pub fn check(&self) -> Result<(), NotLeading> {
        if self.is_open() {
            Ok(())
        } else {
            Err(NotLeading)
        }
    }

    /// Runs `write` if the gate is open, and cancels it (drops the request) if the gate
    /// closes before it completes.
    pub async fn guard<F: Future>(&self, write: F) -> Result<F::Output, NotLeading> {
        self.check()?;
        tokio::select! {
            output = write => Ok(output),
            () = self.closed() => Err(NotLeading),
        }
    }

    /// Resolves once the gate is closed (never, for a gate that never closes).
    pub async fn closed(&self) {
        let Some(terms) = &self.terms else {
            return std::future::pending().await;
        };
        let mut terms = terms.clone();
        loop {
            let term = *terms.borrow_and_update();
            let Some(term) = term.filter(|t| is_current(Some(*t), Instant::now())) else {
                return;
            };
            tokio::select! {
                () = tokio::time::sleep_until(term.valid_until) => {}
                changed = terms.changed() => {
                    if changed.is_err() {
                        // The elector is gone: nobody renews any more.
                        tokio::time::sleep_until(term.valid_until).await;
                    }
                }
            }
        }
    }

    /// Yields each time a new term begins (never, for a gate that never closes): the
    /// moment to rebuild every timer from status.
    pub fn openings(&self) -> impl Stream<Item = ()> + Send + 'static {
        let terms = self.terms.clone();
        futures::stream::unfold((terms, 0u64), |(terms, last)| async move {
            let mut terms = terms?;
            loop {
                let term = *terms.borrow_and_update();
                if let Some(term) = term.filter(|t| t.number > last) {
                    return Some(((), (Some(terms), term.number)));
                }
                terms.changed().await.ok()?;
            }
        })
    }
}

fn is_current(term: Option<Term>, now: Instant) -> bool {
    term.is_some_and(|t| now < t.valid_until)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt;

    use super::*;

    fn term(number: u64, secs: u64) -> Option<Term> {
        Some(Term {
            number,
            valid_until: Instant::now() + Duration::from_secs(secs),
            fence: 100 + number,
        })
    }

    #[tokio::test(start_paused = true)]
    async fn the_gate_closes_when_the_term_runs_out_even_if_nobody_says_so() {
        let (_elector, terms) = watch::channel(term(1, 10));
        let gate = WriteGate::leased(terms);
        assert!(gate.check().is_ok());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(gate.check(), Err(NotLeading));
    }

    #[tokio::test(start_paused = true)]
    async fn a_write_in_flight_is_cancelled_when_the_gate_closes() {
        let (elector, terms) = watch::channel(term(1, 10));
        let gate = WriteGate::leased(terms);
        let slow_write = tokio::time::sleep(Duration::from_secs(60));
        let started = Instant::now();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(3)).await;
            elector.send_replace(None);
        });
        assert_eq!(gate.guard(slow_write).await, Err(NotLeading));
        assert_eq!(started.elapsed(), Duration::from_secs(3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_renewed_term_keeps_the_write_going() {
        let (elector, terms) = watch::channel(term(1, 10));
        let gate = WriteGate::leased(terms);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(5)).await;
            elector.send_replace(term(1, 10));
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        let write = async {
            tokio::time::sleep(Duration::from_secs(12)).await;
            "written"
        };
        assert_eq!(gate.guard(write).await, Ok("written"));
    }

    #[tokio::test(start_paused = true)]
    async fn openings_yield_once_per_term_not_per_renewal() {
        let (elector, terms) = watch::channel(None);
        let gate = WriteGate::leased(terms);
        let mut openings = gate.openings().boxed();
        elector.send_replace(term(1, 10));
        openings.next().await.unwrap();
        elector.send_replace(term(1, 20));
        elector.send_replace(None);
        elector.send_replace(term(2, 10));
        openings.next().await.unwrap();
        let more = tokio::time::timeout(Duration::from_secs(1), openings.next()).await;
        assert!(more.is_err(), "no third opening");
    }

    #[tokio::test(start_paused = true)]
    async fn a_clock_beyond_its_bound_shuts_the_gate_within_the_term() {
        use std::sync::Arc;

        use crate::clock::{ClockOffset, SystemClock};

        let (_elector, terms) = watch::channel(term(1, 10));
        let offset = ClockOffset::new(Arc::new(SystemClock));
        let bound = ClockBound::new(offset.clone(), Some(Duration::from_secs(2)));
        let gate = WriteGate::leased(terms).with_clock_bound(Some(bound));
        let record = |seconds: i64| {
            let now = std::time::Instant::now();
            let date = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(seconds);
            offset.record(now, now, date);
        };
        record(0);
        assert!(gate.is_open());
        record(-30);
        assert!(!gate.is_open() && gate.in_term());
        assert_eq!(gate.check(), Err(NotLeading));
        record(0);
        assert!(gate.is_open());
    }

    #[test]
    fn an_always_open_gate_never_closes() {
        assert!(WriteGate::always_open().check().is_ok());
        assert_eq!(WriteGate::always_open().fence(), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_fence_is_the_current_terms_and_none_once_it_ends() {
        let (elector, terms) = watch::channel(term(1, 10));
        let gate = WriteGate::leased(terms);
        assert_eq!(gate.fence(), Some(101));
        elector.send_replace(term(2, 10));
        assert_eq!(gate.fence(), Some(102));
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(gate.fence(), None);
    }
}
