//! The reconcile's decisions about the target, pure: when to look at it again, and what
//! to write to it once it was looked at.

use std::time::Duration;

use tokio::time::Instant;

use super::MAX_SLEEP;
use super::memory::Memory;
use super::strategy::Strategy;
use crate::controller::plan::{ApplyProblem, Plan};

/// How often an existing target is checked again (existence, HPA conflicts).
pub const TARGET_RECHECK: Duration = MAX_SLEEP;

/// Whether the target is checked in this reconcile: after a change of the spec, when it
/// was never checked in this term or last found wrong, and every [`TARGET_RECHECK`].
pub fn check_due(memory: &Memory, spec_changed: bool, now: Instant) -> bool {
    spec_changed
        || match &memory.checked {
            None | Some((_, Err(_))) => true,
            Some((at, Ok(_))) => now.duration_since(*at) >= TARGET_RECHECK,
        }
}

/// What the target stage does once the target is resolved and checked.
#[derive(Debug, Clone, PartialEq)]
pub enum TargetStep {
    /// The last check found a problem: report it, write nothing.
    Blocked(ApplyProblem),
    /// Nothing to write — the level is recorded in status only, there is no level yet, or
    /// this term already wrote it and no new trigger came — with the check's warnings.
    Keep(Vec<String>),
    /// Write `replicas`; `claim` when it is this term's first write to the target.
    Write {
        /// The level.
        replicas: i32,
        /// Under the term's own field manager (docs/design.md §6).
        claim: bool,
        /// The check's warnings.
        warnings: Vec<String>,
    },
}

/// What to do with the target `target_id` under `strategy`, given `plan` and what this
/// term remembers.
pub fn target_step(
    plan: &Plan,
    strategy: Strategy,
    memory: &Memory,
    target_id: &str,
) -> TargetStep {
    let warnings = match &memory.checked {
        Some((_, Ok(warnings))) => warnings.clone(),
        Some((_, Err(problem))) => return TargetStep::Blocked(problem.clone()),
        None => Vec::new(),
    };
    let Some(level) = plan.level.as_ref().filter(|_| strategy.writes()) else {
        return TargetStep::Keep(warnings);
    };
    if plan.new_trigger.is_none() && memory.applied == Some(level.replicas) {
        return TargetStep::Keep(warnings);
    }
    TargetStep::Write {
        replicas: level.replicas,
        claim: memory.claimed.as_deref() != Some(target_id),
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;
    use crate::api::ConditionReason;
    use crate::controller::plan::NewTrigger;
    use crate::schedule::Trigger;

    const TARGET: &str = "apps/Deployment/web";

    fn trigger(replicas: i32) -> Trigger {
        Trigger {
            rule: "r".to_owned(),
            replicas,
            schedule_time: Timestamp::UNIX_EPOCH,
            colliding: Vec::new(),
        }
    }

    fn plan(replicas: i32, new: bool) -> Plan {
        Plan {
            level: Some(trigger(replicas)),
            new_trigger: new.then(|| NewTrigger {
                trigger: trigger(replicas),
                catch_up: false,
                superseded: 0,
            }),
            next: None,
            rules: Vec::new(),
            suspended: false,
        }
    }

    fn checked(found: Result<Vec<String>, ApplyProblem>) -> Memory {
        Memory::default().checked(Instant::now(), found)
    }

    #[test]
    fn a_terms_first_write_claims_the_target_and_later_ones_do_not() {
        let memory = checked(Ok(Vec::new()));
        let first = target_step(&plan(3, true), Strategy::Scale, &memory, TARGET);
        assert_eq!(
            first,
            TargetStep::Write {
                replicas: 3,
                claim: true,
                warnings: Vec::new()
            }
        );
        let memory = memory.level_written(3, TARGET.to_owned());
        let next = target_step(&plan(5, true), Strategy::Scale, &memory, TARGET);
        assert_eq!(
            next,
            TargetStep::Write {
                replicas: 5,
                claim: false,
                warnings: Vec::new()
            }
        );
        let other = target_step(
            &plan(5, true),
            Strategy::Scale,
            &memory,
            "apps/Deployment/api",
        );
        assert!(matches!(other, TargetStep::Write { claim: true, .. }));
    }

    #[test]
    fn a_level_written_this_term_is_not_written_again_without_a_new_trigger() {
        let memory = checked(Ok(vec!["w".to_owned()])).level_written(3, TARGET.to_owned());
        let step = target_step(&plan(3, false), Strategy::Scale, &memory, TARGET);
        assert_eq!(step, TargetStep::Keep(vec!["w".to_owned()]));
        let again = target_step(&plan(3, true), Strategy::Scale, &memory, TARGET);
        assert!(matches!(again, TargetStep::Write { replicas: 3, .. }));
    }

    #[test]
    fn status_mode_never_writes_the_target() {
        let step = target_step(
            &plan(3, true),
            Strategy::Status,
            &checked(Ok(Vec::new())),
            TARGET,
        );
        assert_eq!(step, TargetStep::Keep(Vec::new()));
    }

    #[test]
    fn a_problem_found_by_the_check_blocks_the_write() {
        let problem = ApplyProblem {
            reason: ConditionReason::TargetNotFound,
            message: "gone".to_owned(),
        };
        let memory = checked(Err(problem.clone()));
        let step = target_step(&plan(3, true), Strategy::Scale, &memory, TARGET);
        assert_eq!(step, TargetStep::Blocked(problem));
    }

    #[test]
    fn the_target_is_checked_when_unknown_wrong_stale_or_respecified() {
        let now = Instant::now();
        assert!(check_due(&Memory::default(), false, now));
        let good = Memory::default().checked(now, Ok(Vec::new()));
        assert!(!check_due(&good, false, now));
        assert!(check_due(&good, true, now));
        assert!(check_due(&good, false, now + TARGET_RECHECK));
        let problem = ApplyProblem {
            reason: ConditionReason::ApplyFailed,
            message: "x".to_owned(),
        };
        assert!(check_due(
            &Memory::default().checked(now, Err(problem)),
            false,
            now
        ));
        assert!(check_due(&good.level_failed(), false, now));
    }
}
