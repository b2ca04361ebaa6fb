//! What this process remembers about one object within a leadership term, and how each
//! stage of a reconcile changes it: pure transitions, so the reconcile never sets a field
//! of it by hand. Safe to lose — it only makes the next reconcile cheaper or tells on-time
//! triggers from catch-ups; everything needed to recover lives in status.

use jiff::Timestamp;
use tokio::time::Instant;

use crate::controller::plan::{ApplyProblem, Plan};
use crate::controller::publish::trace::TriggerTrace;

/// What this process remembers about one object (by namespace and name), within one
/// leadership term: reset when the UID or the term changes, since another leader may have
/// acted in between.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    /// The object's UID.
    pub uid: String,
    /// The leadership term this was learned in.
    pub term: u64,
    /// The next trigger instant armed while acting; a trigger at it is on time.
    pub armed: Option<Timestamp>,
    /// Replicas this process last wrote to the target (Scale mode).
    pub applied: Option<i32>,
    /// The target ([`Target::id`](super::target::Target::id)) this term has
    /// claimed: written once under the term's own field manager, which moved its
    /// resourceVersion.
    pub claimed: Option<String>,
    /// Consecutive reconciles that ended with a problem.
    pub failures: u32,
    /// The last target check: when, and what it found (warnings or the problem).
    pub checked: Option<(Instant, Result<Vec<String>, ApplyProblem>)>,
    /// Warnings already sent as Events.
    pub warned: Vec<String>,
    /// The trace of a trigger not yet recorded in status (its status write failed).
    pub trace: Option<TriggerTrace>,
}

impl Memory {
    /// Nothing known yet about the object `uid` in term `term`.
    pub fn fresh(uid: &str, term: u64) -> Memory {
        Memory {
            uid: uid.to_owned(),
            term,
            ..Memory::default()
        }
    }

    /// A new trigger's trace began: kept before any write, so that the retry of a
    /// failed status write continues it.
    pub fn traced(self, trace: Option<TriggerTrace>) -> Memory {
        match trace {
            Some(trace) => Memory {
                trace: Some(trace),
                ..self
            },
            None => self,
        }
    }

    /// The target could not be resolved: it is checked again once it is.
    pub fn unresolved(self) -> Memory {
        Memory {
            checked: None,
            ..self
        }
    }

    /// The target was checked at `at` and `found` this.
    pub fn checked(self, at: Instant, found: Result<Vec<String>, ApplyProblem>) -> Memory {
        Memory {
            checked: Some((at, found)),
            ..self
        }
    }

    /// `replicas` were written to the target `target_id`, which this term now claims.
    pub fn level_written(self, replicas: i32, target_id: String) -> Memory {
        Memory {
            applied: Some(replicas),
            claimed: Some(target_id),
            ..self
        }
    }

    /// Writing the level failed: it is written, and the target checked, again next time.
    pub fn level_failed(self) -> Memory {
        Memory {
            applied: None,
            checked: None,
            ..self
        }
    }

    /// The new trigger is recorded in status: its trace, if any, is handed back to be
    /// finished.
    pub fn recorded(mut self) -> (Memory, Option<TriggerTrace>) {
        let trace = self.trace.take();
        (self, trace)
    }

    /// A reconcile of a valid spec ended: `plan`'s next instant is armed, `warnings` are
    /// the ones sent, and a `problem` counts as one more failure.
    pub fn reconciled(self, plan: &Plan, warnings: Vec<String>, problem: bool) -> Memory {
        Memory {
            armed: plan.next.as_ref().map(|next| next.schedule_time),
            warned: warnings,
            failures: if problem {
                self.failures.saturating_add(1)
            } else {
                0
            },
            ..self
        }
    }

    /// The spec is invalid: nothing is armed until it changes.
    pub fn invalid(self) -> Memory {
        Memory {
            armed: None,
            failures: 0,
            ..self
        }
    }

    /// The reconcile failed with an error: one more failure (it is retried with backoff).
    pub fn failed(self) -> Memory {
        Memory {
            failures: self.failures.saturating_add(1),
            ..self
        }
    }
}
