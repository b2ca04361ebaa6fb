use super::*;
use crate::schedule::{Cron, Rule};

fn at(text: &str) -> Timestamp {
    text.parse().unwrap()
}

fn rule(name: &str, cron: &str, replicas: i32) -> Rule {
    Rule {
        name: name.to_owned(),
        cron: Cron::parse(cron, None).unwrap(),
        replicas,
        suspended: false,
        days: Default::default(),
    }
}

/// `even` sets 3 at every 10 s, `odd` sets 6 at 5 past every 10 s.
fn tide() -> Tide {
    Tide::new(vec![
        rule("even", "TZ=UTC */10 * * * * *", 3),
        rule("odd", "TZ=UTC 5/10 * * * * *", 6),
    ])
}

fn facts<'a>(status: &'a TidalSchedulerStatus, armed: Option<&str>) -> Facts<'a> {
    Facts {
        status,
        created: at("2026-01-01T00:00:00Z"),
        suspended: false,
        armed: armed.map(at),
    }
}

fn written(now: &str) -> Outcome<'static> {
    Outcome {
        generation: Some(1),
        history_limit: 10,
        warnings: &[],
        problem: None,
        now: at(now),
        trace_id: None,
    }
}

/// Plans and writes at `now`, like one reconcile that succeeds.
fn step(
    tide: &Tide,
    status: &TidalSchedulerStatus,
    armed: Option<&str>,
    now: &str,
) -> (Plan, TidalSchedulerStatus) {
    let plan = plan(tide, facts(status, armed), at(now));
    let status = status_after(status, &plan, written(now));
    (plan, status)
}

/// The first reconcile of a new object at :06 (level: `odd`, fired at :05).
fn created_at_06() -> (Plan, TidalSchedulerStatus) {
    step(
        &tide(),
        &TidalSchedulerStatus::default(),
        None,
        "2026-01-01T00:00:06Z",
    )
}

fn ready(status: &TidalSchedulerStatus) -> &Condition {
    status.ready().unwrap()
}

#[test]
fn a_new_object_gets_the_level_in_effect_as_a_catch_up() {
    let created = at("2026-01-01T00:00:07Z");
    let empty = TidalSchedulerStatus::default();
    let plan = plan(
        &tide(),
        Facts {
            created,
            ..facts(&empty, None)
        },
        at("2026-01-01T00:00:08Z"),
    );
    let new = plan.new_trigger.as_ref().unwrap();
    assert_eq!(new.trigger.rule, "odd");
    assert_eq!(new.trigger.schedule_time, at("2026-01-01T00:00:05Z"));
    assert!(new.catch_up);
    assert_eq!(new.superseded, 0);
    let status = status_after(&empty, &plan, written("2026-01-01T00:00:08Z"));
    assert_eq!(status.desired_replicas, Some(6));
    assert_eq!(status.active_rule.as_deref(), Some("odd"));
    assert_eq!(
        status.last_trigger_time,
        Some(Time(at("2026-01-01T00:00:05Z")))
    );
    assert_eq!(
        status.next_trigger_time,
        Some(Time(at("2026-01-01T00:00:10Z")))
    );
    assert_eq!(status.next_trigger_rule.as_deref(), Some("even"));
    assert_eq!(status.history.len(), 1);
    assert!(status.history[0].catch_up);
    assert_eq!(ready(&status).reason, "TriggerActive");
    assert_eq!(ready(&status).status, "True");
}

#[test]
fn an_idle_reconcile_changes_nothing() {
    let (_, first) = created_at_06();
    let (plan, second) = step(
        &tide(),
        &first,
        Some("2026-01-01T00:00:10Z"),
        "2026-01-01T00:00:09Z",
    );
    assert!(plan.new_trigger.is_none());
    assert_eq!(second, first);
}

#[test]
fn the_armed_trigger_is_on_time_and_recorded_once() {
    let (_, first) = created_at_06();
    let (plan, second) = step(
        &tide(),
        &first,
        Some("2026-01-01T00:00:10Z"),
        "2026-01-01T00:00:10.004Z",
    );
    let new = plan.new_trigger.unwrap();
    assert!(!new.catch_up);
    assert_eq!((new.trigger.rule.as_str(), new.superseded), ("even", 0));
    assert_eq!(second.history.len(), 2);
    assert_eq!(
        second.history[0].execution_time.0,
        at("2026-01-01T00:00:10.004Z")
    );
    // The same instant again (a retry, a second replica's stale view): nothing new.
    let (again, third) = step(&tide(), &second, None, "2026-01-01T00:00:10.300Z");
    assert!(again.new_trigger.is_none());
    assert_eq!(third, second);
}

#[test]
fn missed_instants_are_superseded_by_the_latest_once() {
    let (_, first) = created_at_06();
    // Down from :06 to :31: :10, :15, :20, :25 missed; :30 is the level.
    let (plan, after) = step(&tide(), &first, None, "2026-01-01T00:00:31Z");
    let new = plan.new_trigger.unwrap();
    assert_eq!(new.trigger.schedule_time, at("2026-01-01T00:00:30Z"));
    assert!(new.catch_up);
    assert_eq!(new.superseded, 4);
    assert_eq!(after.history.len(), 2);
    assert_eq!(after.history[0].superseded, 4);
    let (replay, _) = step(&tide(), &after, None, "2026-01-01T00:00:32Z");
    assert!(replay.new_trigger.is_none());
}

#[test]
fn a_trigger_already_in_history_is_never_added_again() {
    let (_, mut first) = created_at_06();
    // A watermark lost by hand (an edited status) must not duplicate the entry.
    first.last_trigger_time = None;
    let (plan, second) = step(&tide(), &first, None, "2026-01-01T00:00:07Z");
    assert!(plan.new_trigger.is_some());
    assert_eq!(second.history.len(), 1);
}

#[test]
fn editing_the_replicas_in_effect_changes_the_level_without_history() {
    let (_, first) = created_at_06();
    let edited = Tide::new(vec![
        rule("even", "TZ=UTC */10 * * * * *", 3),
        rule("odd", "TZ=UTC 5/10 * * * * *", 9),
    ]);
    let (plan, second) = step(&edited, &first, None, "2026-01-01T00:00:07Z");
    assert!(plan.new_trigger.is_none());
    assert_eq!(second.desired_replicas, Some(9));
    assert_eq!(second.history, first.history);
}

#[test]
fn suspension_keeps_the_level_and_applies_nothing() {
    let (_, first) = created_at_06();
    let suspended = Facts {
        suspended: true,
        ..facts(&first, Some("2026-01-01T00:00:10Z"))
    };
    let plan = plan(&tide(), suspended, at("2026-01-01T00:00:12Z"));
    assert!(plan.new_trigger.is_none());
    let status = status_after(&first, &plan, written("2026-01-01T00:00:12Z"));
    assert_eq!(status.desired_replicas, Some(6));
    assert_eq!(status.last_trigger_time, first.last_trigger_time);
    assert_eq!(
        status.next_trigger_time,
        Some(Time(at("2026-01-01T00:00:15Z")))
    );
    assert_eq!(
        (
            ready(&status).status.as_str(),
            ready(&status).reason.as_str()
        ),
        ("False", "Suspended")
    );
}

#[test]
fn a_suspended_rule_has_no_next_schedule_time() {
    let mut rules = vec![
        rule("even", "TZ=UTC */10 * * * * *", 3),
        rule("odd", "TZ=UTC 5/10 * * * * *", 6),
    ];
    rules[1].suspended = true;
    let (plan, status) = step(
        &Tide::new(rules),
        &TidalSchedulerStatus::default(),
        None,
        "2026-01-01T00:00:06Z",
    );
    assert_eq!(plan.level.unwrap().rule, "even");
    assert_eq!(status.rules[1].name, "odd");
    assert_eq!(status.rules[1].next_schedule_time, None);
    assert_eq!(
        status.rules[0].next_schedule_time,
        Some(Time(at("2026-01-01T00:00:10Z")))
    );
}

#[test]
fn collisions_are_named_in_history_and_ahead_of_time() {
    let tide = Tide::new(vec![
        rule("small", "TZ=UTC */10 * * * * *", 2),
        rule("large", "TZ=UTC */20 * * * * *", 8),
    ]);
    let (_, status) = step(
        &tide,
        &TidalSchedulerStatus::default(),
        None,
        "2026-01-01T00:00:11Z",
    );
    assert_eq!(
        status.next_trigger_time,
        Some(Time(at("2026-01-01T00:00:20Z")))
    );
    assert_eq!(status.next_trigger_rule.as_deref(), Some("large"));
    assert!(
        ready(&status)
            .message
            .contains("next trigger: rules large, small collide")
    );
    let (_, status) = step(
        &tide,
        &status,
        Some("2026-01-01T00:00:20Z"),
        "2026-01-01T00:00:20Z",
    );
    assert_eq!(status.desired_replicas, Some(8));
    assert_eq!(
        status.history[0].message,
        "rules large, small collide at 2026-01-01T00:00:20Z; large wins with 8 replicas"
    );
}

#[test]
fn a_failed_trigger_is_recorded_once_and_the_level_still_pursued() {
    let problem = ApplyProblem {
        reason: ConditionReason::TargetNotFound,
        message: "spec.targetRef: Deployment web not found in namespace ns".to_owned(),
    };
    let failing = Outcome {
        problem: Some(&problem),
        ..written("2026-01-01T00:00:06Z")
    };
    let empty = TidalSchedulerStatus::default();
    let first_plan = plan(&tide(), facts(&empty, None), at("2026-01-01T00:00:06Z"));
    let first = status_after(&empty, &first_plan, failing);
    assert_eq!(first.history[0].result, TriggerResult::Failed);
    assert_eq!(ready(&first).reason, "TargetNotFound");
    assert_eq!(first.desired_replicas, Some(6));
    let retry_plan = plan(&tide(), facts(&first, None), at("2026-01-01T00:00:08Z"));
    assert!(retry_plan.new_trigger.is_none());
    let retried = status_after(
        &first,
        &retry_plan,
        Outcome {
            now: at("2026-01-01T00:00:08Z"),
            ..failing
        },
    );
    assert_eq!(retried.history.len(), 1);
    let recovered = status_after(&retried, &retry_plan, written("2026-01-01T00:00:09Z"));
    assert_eq!(recovered.history.len(), 1);
    assert_eq!(ready(&recovered).reason, "TriggerActive");
}

#[test]
fn history_keeps_the_newest_entries_up_to_the_limit() {
    let mut status = TidalSchedulerStatus::default();
    for second in (6..60).step_by(5) {
        let now = format!("2026-01-01T00:00:{second:02}Z");
        status = status_after(
            &status,
            &plan(&tide(), facts(&status, None), at(&now)),
            Outcome {
                history_limit: 3,
                ..written(&now)
            },
        );
    }
    let times: Vec<String> = status
        .history
        .iter()
        .map(|h| h.schedule_time.0.to_string())
        .collect();
    assert_eq!(
        times,
        [
            "2026-01-01T00:00:55Z",
            "2026-01-01T00:00:50Z",
            "2026-01-01T00:00:45Z"
        ]
    );
}

#[test]
fn invalid_specs_keep_the_level_and_name_every_problem() {
    let (_, first) = created_at_06();
    let problems = [
        SpecProblem::HistoryLimit { value: 0 },
        SpecProblem::RuleCount { count: 0 },
    ];
    let status = status_invalid(&first, &problems, Some(2), at("2026-01-01T00:00:07Z"));
    assert_eq!(status.desired_replicas, Some(6));
    assert_eq!(status.next_trigger_time, None);
    let ready = ready(&status);
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "InvalidSpec")
    );
    assert!(
        ready.message.contains("spec.historyLimit")
            && ready.message.contains("spec.triggers.times.rules")
    );
    assert_eq!(ready.last_transition_time.0, at("2026-01-01T00:00:07Z"));
}

#[test]
fn the_wait_rounds_up_to_the_millisecond_and_is_never_negative() {
    let now = at("2026-01-01T00:00:00Z");
    assert_eq!(
        until(at("2026-01-01T00:00:00.0000001Z"), now),
        std::time::Duration::from_millis(1)
    );
    assert_eq!(
        until(at("2026-01-01T00:00:01Z"), now),
        std::time::Duration::from_secs(1)
    );
    assert_eq!(
        until(at("2025-12-31T23:59:59Z"), now),
        std::time::Duration::ZERO
    );
}

#[test]
fn a_ready_message_is_cut_to_what_a_condition_may_hold() {
    let problems: Vec<SpecProblem> = (0..2000)
        .map(|index| SpecProblem::MissingCalendar {
            index,
            rule: format!("rule-{index}-{}", "é".repeat(20)),
            field: "skipDays[9]".into(),
            calendar: format!("TidalCalendar team/{}", "holidays".repeat(8)),
        })
        .collect();
    let status = status_invalid(
        &TidalSchedulerStatus::default(),
        &problems,
        Some(1),
        at("2026-12-01T00:00:00Z"),
    );
    let message = &status.ready().unwrap().message;
    assert!(message.len() <= MAX_CONDITION_MESSAGE, "{}", message.len());
    assert!(
        message.starts_with("spec.triggers.times.rules[0]"),
        "{message:.200}"
    );
    assert!(
        message.ends_with("more bytes not shown)"),
        "{}",
        &message[message.len() - 80..]
    );
    // A short message is kept whole.
    let one = status_invalid(
        &TidalSchedulerStatus::default(),
        &problems[..1],
        Some(1),
        at("2026-12-01T00:00:00Z"),
    );
    assert!(!one.ready().unwrap().message.contains("not shown"));
}
