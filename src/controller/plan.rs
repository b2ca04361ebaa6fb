//! What one reconcile decides, as pure functions of spec, status and the instant `now`:
//! the trigger in effect, whether it is new (not yet applied: newer than the watermark
//! `status.lastTriggerTime`), the next trigger, and the status to write.
//!
//! Keeping this free of I/O makes the idempotency rules testable without a cluster: a
//! trigger is recorded at most once per `(rule, scheduleTime)`, whatever the restarts.

use jiff::{SignedDuration, Timestamp, Unit};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};

use kube::ResourceExt;

use crate::api::{
    Calendars, ConditionReason, HistoryEntry, READY, RuleStatus, SpecProblem, TidalScheduler,
    TidalSchedulerStatus, TriggerResult, ValidSpec, validate,
};
use crate::schedule::{Moment, Tide, Trigger};

/// What the tide says at `now`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The trigger in effect (`None` before any rule fired within a year).
    pub level: Option<Trigger>,
    /// A trigger newer than the watermark: apply it and record it in history.
    pub new_trigger: Option<NewTrigger>,
    /// The next trigger, collisions detected ahead of time.
    pub next: Option<Trigger>,
    /// Per-rule timers.
    pub rules: Vec<RuleStatus>,
    /// `spec.suspend`: nothing is applied.
    pub suspended: bool,
}

/// A trigger to apply now and record once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewTrigger {
    /// The trigger.
    pub trigger: Trigger,
    /// Applied after its instant because nobody was acting then (or the object did not
    /// exist yet), rather than by the timer armed for it.
    pub catch_up: bool,
    /// Distinct earlier instants since the previous watermark that it replaces.
    pub superseded: i64,
}

/// Facts about the object a plan needs besides its rules.
#[derive(Debug, Clone, Copy)]
pub struct Facts<'a> {
    /// The current status (default when none was outcome yet).
    pub status: &'a TidalSchedulerStatus,
    /// `metadata.creationTimestamp`: instants before it were never missed.
    pub created: Timestamp,
    /// `spec.suspend`.
    pub suspended: bool,
    /// The instant this process armed a timer for while acting on this object, if any: a
    /// trigger at exactly that instant is on time, any other new trigger is a catch-up.
    pub armed: Option<Timestamp>,
}

/// Computes the plan at `now`.
pub fn plan(tide: &Tide, facts: Facts<'_>, now: Timestamp) -> Plan {
    let Moment {
        level,
        next,
        rules: fires,
    } = tide.moment(now);
    let watermark = facts.status.last_trigger_time.as_ref().map(|t| t.0);
    let new_trigger = level
        .as_ref()
        .filter(|_| !facts.suspended)
        .filter(|level| watermark.is_none_or(|mark| level.schedule_time > mark))
        .map(|level| {
            let since = watermark.unwrap_or(facts.created);
            let superseded = tide.superseded_between(since, level.schedule_time);
            NewTrigger {
                trigger: level.clone(),
                catch_up: facts.armed != Some(level.schedule_time),
                superseded: i64::try_from(superseded).unwrap_or(i64::MAX),
            }
        });
    let rules = tide
        .rules()
        .iter()
        .zip(fires)
        .map(|(rule, fires)| RuleStatus {
            name: rule.name.clone(),
            last_schedule_time: fires.last.map(Time),
            next_schedule_time: fires.next.map(Time),
        })
        .collect();
    Plan {
        level,
        new_trigger,
        next,
        rules,
        suspended: facts.suspended,
    }
}

/// Why the level could not be applied (or the target is unusable).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApplyProblem {
    /// `TargetNotFound`, `TargetNotScalable` or `ApplyFailed`.
    pub reason: ConditionReason,
    /// What went wrong, for the condition, history and event.
    pub message: String,
}

/// What the reconcile found and did besides the plan: everything else that shapes the
/// new status.
#[derive(Debug, Clone, Copy)]
pub struct Outcome<'a> {
    /// `metadata.generation`.
    pub generation: Option<i64>,
    /// History entries kept: [`crate::api::TidalSchedulerSpec::history_entries`].
    pub history_limit: usize,
    /// Non-fatal findings (e.g. missing labels), appended to the Ready message.
    pub warnings: &'a [String],
    /// What applying found, if the target is unusable.
    pub problem: Option<&'a ApplyProblem>,
    /// The wall-clock instant of the write (history `executionTime`).
    pub now: Timestamp,
    /// The trace id of the new trigger's trace, if exported.
    pub trace_id: Option<&'a str>,
}

/// The status after applying `plan`.
pub fn status_after(
    old: &TidalSchedulerStatus,
    plan: &Plan,
    outcome: Outcome<'_>,
) -> TidalSchedulerStatus {
    let mut status = old.clone();
    status.observed_generation = outcome.generation;
    if !plan.suspended {
        status.desired_replicas = plan.level.as_ref().map(|level| level.replicas);
        status.active_rule = plan.level.as_ref().map(|level| level.rule.clone());
    }
    status.next_trigger_time = plan.next.as_ref().map(|next| Time(next.schedule_time));
    status.next_trigger_rule = plan.next.as_ref().map(|next| next.rule.clone());
    status.rules = plan.rules.clone();
    if let Some(new) = &plan.new_trigger {
        status.last_trigger_time = Some(Time(new.trigger.schedule_time));
        status.last_triggered_rule = Some(new.trigger.rule.clone());
        let recorded = old.history.iter().any(|entry| {
            entry.rule == new.trigger.rule && entry.schedule_time.0 == new.trigger.schedule_time
        });
        if !recorded {
            status.history.insert(0, history_entry(new, outcome));
        }
    }
    status.history.truncate(outcome.history_limit);
    let (ready, reason, message) = ready_condition(plan, outcome);
    set_ready(
        &mut status,
        ready,
        reason,
        message,
        outcome.generation,
        outcome.now,
    );
    status
}

/// The status of an object whose spec cannot be acted on: the level stays as it was, no
/// trigger is planned, Ready is False with every problem named.
pub fn status_invalid(
    old: &TidalSchedulerStatus,
    problems: &[SpecProblem],
    generation: Option<i64>,
    now: Timestamp,
) -> TidalSchedulerStatus {
    let mut status = old.clone();
    status.observed_generation = generation;
    status.next_trigger_time = None;
    status.next_trigger_rule = None;
    let message = problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ");
    set_ready(
        &mut status,
        false,
        ConditionReason::InvalidSpec,
        message,
        generation,
        now,
    );
    status
}

fn history_entry(new: &NewTrigger, outcome: Outcome<'_>) -> HistoryEntry {
    let trigger = &new.trigger;
    let (result, message) = match outcome.problem {
        Some(problem) => (TriggerResult::Failed, problem.message.clone()),
        None => (
            TriggerResult::Succeeded,
            collision_note(trigger).unwrap_or_default(),
        ),
    };
    HistoryEntry {
        rule: trigger.rule.clone(),
        schedule_time: Time(trigger.schedule_time),
        execution_time: MicroTime(micros(outcome.now)),
        replicas: trigger.replicas,
        result,
        catch_up: new.catch_up,
        superseded: new.superseded,
        message,
        trace_id: outcome.trace_id.map(str::to_owned),
    }
}

/// The Ready condition: status, reason and a message that names the rules involved.
fn ready_condition(plan: &Plan, outcome: Outcome<'_>) -> (bool, ConditionReason, String) {
    let (ready, reason, mut message) = if plan.suspended {
        (
            false,
            ConditionReason::Suspended,
            "spec.suspend is true: no trigger is applied".to_owned(),
        )
    } else if let Some(problem) = outcome.problem {
        (false, problem.reason, problem.message.clone())
    } else if let Some(level) = &plan.level {
        (
            true,
            ConditionReason::TriggerActive,
            format!(
                "rule {} set {} replicas at {}",
                level.rule, level.replicas, level.schedule_time
            ),
        )
    } else {
        (
            true,
            ConditionReason::WaitingForFirstTrigger,
            "no rule has fired within the last year".to_owned(),
        )
    };
    if !plan.suspended
        && let Some(note) = plan.level.as_ref().and_then(collision_note)
    {
        message.push_str(&format!("; in effect: {note}"));
    }
    if let Some(note) = plan.next.as_ref().and_then(collision_note) {
        message.push_str(&format!("; next trigger: {note}"));
    }
    for warning in outcome.warnings {
        message.push_str(&format!("; warning: {warning}"));
    }
    (ready, reason, message)
}

/// "rules a, b collide at T; a wins with N replicas", or `None` without a collision.
pub fn collision_note(trigger: &Trigger) -> Option<String> {
    trigger.is_conflict().then(|| {
        format!(
            "rules {} collide at {}; {} wins with {} replicas",
            trigger.colliding.join(", "),
            trigger.schedule_time,
            trigger.rule,
            trigger.replicas
        )
    })
}

/// Sets the Ready condition, keeping `lastTransitionTime` unless its status flips.
fn set_ready(
    status: &mut TidalSchedulerStatus,
    ready: bool,
    reason: ConditionReason,
    message: String,
    generation: Option<i64>,
    now: Timestamp,
) {
    let value = if ready { "True" } else { "False" };
    let last_transition_time = match status.ready() {
        Some(previous) if previous.status == value => previous.last_transition_time.clone(),
        _ => Time(seconds(now)),
    };
    let condition = Condition {
        type_: READY.to_owned(),
        status: value.to_owned(),
        reason: reason.as_str().to_owned(),
        message: bounded(message),
        observed_generation: generation,
        last_transition_time,
    };
    status.conditions.retain(|c| c.type_ != READY);
    status.conditions.insert(0, condition);
}

/// The longest condition message `metav1.Condition` allows, in bytes.
pub const MAX_CONDITION_MESSAGE: usize = 32 * 1024;

/// `message` cut to [`MAX_CONDITION_MESSAGE`] bytes (at a character boundary), saying how
/// much was left out: a spec with every problem it can have still gets a status.
fn bounded(mut message: String) -> String {
    if message.len() <= MAX_CONDITION_MESSAGE {
        return message;
    }
    let total = message.len();
    let mut end = MAX_CONDITION_MESSAGE - 64;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    message.truncate(end);
    message.push_str(&format!(" … ({} more bytes not shown)", total - end));
    message
}

/// `time` truncated to whole microseconds (what a MicroTime keeps through the API).
fn micros(time: Timestamp) -> Timestamp {
    time.round(
        jiff::TimestampRound::new()
            .smallest(Unit::Microsecond)
            .mode(jiff::RoundMode::Trunc),
    )
    .unwrap_or(time)
}

/// `time` truncated to whole seconds (what a Time keeps through the API).
pub(crate) fn seconds(time: Timestamp) -> Timestamp {
    Timestamp::from_second(time.as_second()).unwrap_or(time)
}

/// How long until `instant`, rounded up to the millisecond, never negative.
pub fn until(instant: Timestamp, now: Timestamp) -> std::time::Duration {
    let wait = instant.duration_since(now);
    if wait <= SignedDuration::ZERO {
        return std::time::Duration::ZERO;
    }
    let nanos = u64::try_from(wait.as_nanos()).unwrap_or(u64::MAX);
    std::time::Duration::from_millis(nanos.div_ceil(1_000_000))
}

/// What a reconcile at `now` plans for `object`, whose status is `status`, whose timer
/// was armed at `armed` and whose calendars are in `calendars`: its validated spec and the
/// plan, or the spec's problems. The reconcile and the trigger-latency bench both start
/// here, so they cannot drift.
pub fn plan_object(
    object: &TidalScheduler,
    calendars: &dyn Calendars,
    status: &TidalSchedulerStatus,
    armed: Option<Timestamp>,
    now: Timestamp,
) -> Result<(ValidSpec, Plan), Vec<SpecProblem>> {
    let valid = validate(object, calendars, now)?;
    let facts = Facts {
        status,
        created: object.creation_timestamp().map_or(now, |t| t.0),
        suspended: object.spec.suspend,
        armed,
    };
    let plan = plan(&valid.tide, facts, now);
    Ok((valid, plan))
}

#[cfg(test)]
mod tests;
