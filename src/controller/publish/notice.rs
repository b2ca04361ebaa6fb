//! Which Events a reconcile sends, decided from the plan and the statuses before and
//! after — pure, so each case is tested here; the reconcile only queues them.

use crate::api::{ConditionReason, TidalSchedulerStatus};
use crate::controller::plan::{self, ApplyProblem, Plan};
use crate::controller::publish::reason::Reason;

/// An Event to send: its reason and note.
pub type Notice = (Reason, String);

/// The Events of a reconcile that moved the status from `old` to `new` with `plan`;
/// `problem` is what applying found, if anything.
pub fn after(
    plan: &Plan,
    old: &TidalSchedulerStatus,
    new: &TidalSchedulerStatus,
    problem: Option<&ApplyProblem>,
) -> Vec<Notice> {
    let mut notices = Vec::new();
    // The trigger's trace, named in its Event so that an operator can look it up.
    let mut traced = String::new();
    if let Some(trigger) = &plan.new_trigger {
        let t = &trigger.trigger;
        if let Some(id) = new
            .history
            .iter()
            .find(|entry| entry.rule == t.rule && entry.schedule_time.0 == t.schedule_time)
            .and_then(|entry| entry.trace_id.as_deref())
        {
            traced = format!(", trace {id}");
        }
        if problem.is_none() {
            let reason = if trigger.catch_up {
                Reason::CaughtUp
            } else {
                Reason::Triggered
            };
            let note = format!(
                "rule {} set {} replicas (scheduled {}, superseded {}{traced})",
                t.rule, t.replicas, t.schedule_time, trigger.superseded
            );
            notices.push((reason, note));
        }
        if let Some(note) = plan::collision_note(t) {
            notices.push((Reason::RuleConflict, note));
        }
    } else if (&old.desired_replicas, &old.active_rule) != (&new.desired_replicas, &new.active_rule)
        && let (Some(replicas), Some(rule)) = (new.desired_replicas, &new.active_rule)
    {
        let note = format!("rule {rule} now sets {replicas} replicas");
        notices.push((Reason::LevelChanged, note));
    }
    if old.next_trigger_time != new.next_trigger_time
        && let Some(note) = plan.next.as_ref().and_then(plan::collision_note)
    {
        notices.push((Reason::RuleConflict, format!("next trigger: {note}")));
    }
    match problem {
        Some(problem) if ready_message(old) != ready_message(new) => {
            let reason = match problem.reason {
                ConditionReason::TargetNotFound => Reason::TargetNotFound,
                ConditionReason::TargetNotScalable => Reason::TargetNotScalable,
                _ => Reason::ApplyFailed,
            };
            let note = match traced.strip_prefix(", ") {
                Some(trace) => format!("{} ({trace})", problem.message),
                None => problem.message.clone(),
            };
            notices.push((reason, note));
        }
        None if old.ready().is_some_and(|c| is_failure(&c.reason)) => {
            notices.push((Reason::Recovered, ready_message(new).to_owned()));
        }
        _ => {}
    }
    notices
}

/// The `InvalidSpec` Event of a reconcile that found the spec invalid: only when the
/// problems (the Ready message) changed.
pub fn invalid(old: &TidalSchedulerStatus, new: &TidalSchedulerStatus) -> Option<Notice> {
    (ready_message(new) != ready_message(old))
        .then(|| (Reason::InvalidSpec, ready_message(new).to_owned()))
}

/// `SpecWarning` Events for the `warnings` not in `warned` (sent before).
pub fn warnings(warnings: &[String], warned: &[String]) -> Vec<Notice> {
    warnings
        .iter()
        .filter(|warning| !warned.contains(warning))
        .map(|warning| (Reason::SpecWarning, warning.clone()))
        .collect()
}

fn is_failure(reason: &str) -> bool {
    [
        ConditionReason::TargetNotFound,
        ConditionReason::TargetNotScalable,
        ConditionReason::ApplyFailed,
    ]
    .iter()
    .any(|r| r.as_str() == reason)
}

fn ready_message(status: &TidalSchedulerStatus) -> &str {
    status.ready().map_or("", |c| c.message.as_str())
}

#[cfg(test)]
mod tests {
    use jiff::Timestamp;

    use super::*;
    use crate::api::SpecProblem;
    use crate::controller::plan::{Facts, Outcome, plan, status_after};
    use crate::schedule::{Cron, Rule, Tide};

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn tide(rules: &[(&str, &str, i32)]) -> Tide {
        Tide::new(
            rules
                .iter()
                .map(|(name, cron, replicas)| Rule {
                    name: (*name).to_owned(),
                    cron: Cron::parse(cron, None).unwrap(),
                    replicas: *replicas,
                    suspended: false,
                    days: Default::default(),
                })
                .collect(),
        )
    }

    /// `even` sets 3 at every 10 s, `odd` sets 6 at 5 past.
    const ALTERNATING: [(&str, &str, i32); 2] = [
        ("even", "TZ=UTC */10 * * * * *", 3),
        ("odd", "TZ=UTC 5/10 * * * * *", 6),
    ];

    /// One reconcile at `now` from `old`, with the timer armed at `armed`, and what
    /// applying found; returns the plan and the new status.
    fn step(
        tide: &Tide,
        old: &TidalSchedulerStatus,
        armed: Option<&str>,
        now: &str,
        problem: Option<&ApplyProblem>,
    ) -> (Plan, TidalSchedulerStatus) {
        let facts = Facts {
            status: old,
            created: at("2026-01-01T00:00:00Z"),
            suspended: false,
            armed: armed.map(at),
        };
        let plan = plan(tide, facts, at(now));
        let outcome = Outcome {
            generation: Some(1),
            history_limit: 10,
            warnings: &[],
            problem,
            now: at(now),
            trace_id: None,
        };
        let new = status_after(old, &plan, outcome);
        (plan, new)
    }

    fn reasons(notices: &[Notice]) -> Vec<&'static str> {
        notices.iter().map(|(reason, _)| reason.as_str()).collect()
    }

    fn missing_target() -> ApplyProblem {
        ApplyProblem {
            reason: ConditionReason::TargetNotFound,
            message: "spec.targetRef: Deployment web not found in namespace ns".to_owned(),
        }
    }

    #[test]
    fn a_new_object_sends_caught_up_naming_the_rule_and_replicas() {
        let tide = tide(&ALTERNATING);
        let old = TidalSchedulerStatus::default();
        let (plan, new) = step(&tide, &old, None, "2026-01-01T00:00:06Z", None);
        let notices = after(&plan, &old, &new, None);
        assert_eq!(reasons(&notices), ["CaughtUp"]);
        assert_eq!(
            notices[0].1,
            "rule odd set 6 replicas (scheduled 2026-01-01T00:00:05Z, superseded 0)"
        );
    }

    #[test]
    fn a_traced_trigger_names_its_trace_in_its_event() {
        let tide = tide(&ALTERNATING);
        let old = TidalSchedulerStatus::default();
        let facts = Facts {
            status: &old,
            created: at("2026-01-01T00:00:00Z"),
            suspended: false,
            armed: None,
        };
        let now = "2026-01-01T00:00:06Z";
        let plan = plan(&tide, facts, at(now));
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        let outcome = |problem| Outcome {
            generation: Some(1),
            history_limit: 10,
            warnings: &[],
            problem,
            now: at(now),
            trace_id: Some(trace),
        };
        let new = status_after(&old, &plan, outcome(None));
        assert_eq!(new.history[0].trace_id.as_deref(), Some(trace));
        let notices = after(&plan, &old, &new, None);
        assert_eq!(
            notices[0].1,
            format!(
                "rule odd set 6 replicas (scheduled 2026-01-01T00:00:05Z, superseded 0, trace {trace})"
            )
        );
        let problem = missing_target();
        let failed = status_after(&old, &plan, outcome(Some(&problem)));
        let notices = after(&plan, &old, &failed, Some(&problem));
        assert_eq!(reasons(&notices), ["TargetNotFound"]);
        assert!(
            notices[0].1.ends_with(&format!("(trace {trace})")),
            "{}",
            notices[0].1
        );
    }

    #[test]
    fn an_armed_instant_sends_triggered() {
        let tide = tide(&ALTERNATING);
        let (_, first) = step(
            &tide,
            &TidalSchedulerStatus::default(),
            None,
            "2026-01-01T00:00:06Z",
            None,
        );
        let armed = Some("2026-01-01T00:00:10Z");
        let (plan, new) = step(&tide, &first, armed, "2026-01-01T00:00:10.004Z", None);
        assert_eq!(reasons(&after(&plan, &first, &new, None)), ["Triggered"]);
    }

    #[test]
    fn a_failed_trigger_sends_the_problem_once_and_no_trigger_event() {
        let tide = tide(&ALTERNATING);
        let old = TidalSchedulerStatus::default();
        let problem = missing_target();
        let (plan, failed) = step(&tide, &old, None, "2026-01-01T00:00:06Z", Some(&problem));
        let notices = after(&plan, &old, &failed, Some(&problem));
        assert_eq!(reasons(&notices), ["TargetNotFound"]);
        assert_eq!(notices[0].1, problem.message);

        // The same problem again (a retry): the Ready message is unchanged, no Event.
        let (plan, again) = step(&tide, &failed, None, "2026-01-01T00:00:07Z", Some(&problem));
        assert_eq!(after(&plan, &failed, &again, Some(&problem)), []);

        // Applied at last: Recovered.
        let (plan, recovered) = step(&tide, &again, None, "2026-01-01T00:00:08Z", None);
        assert_eq!(
            reasons(&after(&plan, &again, &recovered, None)),
            ["Recovered"]
        );
    }

    #[test]
    fn a_collision_sends_rule_conflict_when_applied_and_when_it_becomes_next() {
        let tide = tide(&[
            ("small", "TZ=UTC */10 * * * * *", 3),
            ("large", "TZ=UTC */10 * * * * *", 9),
        ]);
        let old = TidalSchedulerStatus::default();
        let (plan, new) = step(&tide, &old, None, "2026-01-01T00:00:06Z", None);
        let notices = after(&plan, &old, &new, None);
        assert_eq!(
            reasons(&notices),
            ["CaughtUp", "RuleConflict", "RuleConflict"]
        );
        assert!(
            notices[1].1.contains("large wins with 9 replicas"),
            "{notices:?}"
        );
        assert!(
            notices[2].1.starts_with("next trigger: rules"),
            "{notices:?}"
        );

        // Nothing changed: nothing to say.
        let (plan, same) = step(&tide, &new, None, "2026-01-01T00:00:07Z", None);
        assert_eq!(after(&plan, &new, &same, None), []);
    }

    #[test]
    fn an_edit_of_the_replicas_in_effect_sends_level_changed() {
        let (_, first) = step(
            &tide(&ALTERNATING),
            &TidalSchedulerStatus::default(),
            None,
            "2026-01-01T00:00:06Z",
            None,
        );
        let edited = tide(&[
            ("even", "TZ=UTC */10 * * * * *", 3),
            ("odd", "TZ=UTC 5/10 * * * * *", 8),
        ]);
        let (plan, new) = step(&edited, &first, None, "2026-01-01T00:00:07Z", None);
        let notices = after(&plan, &first, &new, None);
        assert_eq!(reasons(&notices), ["LevelChanged"]);
        assert_eq!(notices[0].1, "rule odd now sets 8 replicas");
    }

    #[test]
    fn invalid_spec_is_sent_when_the_problems_change() {
        let now = at("2026-01-01T00:00:00Z");
        let empty = |field| SpecProblem::EmptyTargetField { field };
        let fresh = TidalSchedulerStatus::default();
        let bad = plan::status_invalid(&fresh, &[empty("name")], Some(1), now);
        let worse = plan::status_invalid(&bad, &[empty("name"), empty("kind")], Some(2), now);
        assert_eq!(
            invalid(&fresh, &bad),
            Some((
                Reason::InvalidSpec,
                "spec.targetRef.name: must not be empty".to_owned()
            ))
        );
        assert_eq!(invalid(&bad, &bad), None);
        let (reason, note) = invalid(&bad, &worse).expect("the problems changed");
        assert_eq!(reason, Reason::InvalidSpec);
        assert!(note.contains("spec.targetRef.kind"), "{note}");
    }

    #[test]
    fn each_warning_is_sent_once() {
        let warned = vec!["missing label".to_owned()];
        let now = vec![
            "missing label".to_owned(),
            "an HPA also scales it".to_owned(),
        ];
        assert_eq!(
            warnings(&now, &warned),
            [(Reason::SpecWarning, "an HPA also scales it".to_owned())]
        );
        assert_eq!(warnings(&warned, &warned), []);
    }
}
