//! `TidalSchedulerStatus`: the tide level in effect, per-rule timers and the trigger
//! history. Written only by the leader, through the status subresource. Everything a new
//! leader needs to rebuild its timers is here.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, MicroTime, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The condition type that summarises the object's state.
pub const READY: &str = "Ready";

/// Observed state of a `TidalScheduler`.
#[derive(Deserialize, Serialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TidalSchedulerStatus {
    /// The `metadata.generation` this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// Replicas now in effect (the tide level), set by `activeRule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_replicas: Option<i32>,

    /// The rule that set `desiredReplicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_rule: Option<String>,

    /// Scheduled instant (not the wall time of the write) of the trigger now in effect; the
    /// idempotency watermark: no trigger at or before it is applied again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_trigger_time: Option<Time>,

    /// The rule of `lastTriggerTime`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_triggered_rule: Option<String>,

    /// Next scheduled instant of any non-suspended rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_trigger_time: Option<Time>,

    /// The rule that wins at `nextTriggerTime` (collisions are reported in conditions and
    /// events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_trigger_rule: Option<String>,

    /// One entry per rule.
    // Atomic rather than a list-map keyed by name: only the leader writes it (one entry per
    // rule of `spec`, whose names are unique), so ownership per entry serves no one, and it
    // cost every status write ~100 bytes of managedFields per rule and the map's checks
    // (~10 % of the API server's CPU per write at 5 rules). The API server collapses the
    // per-entry managedFields stored before at the next write.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), extend("x-kubernetes-list-type" = "atomic"))]
    pub rules: Vec<RuleStatus>,

    /// Applied triggers, newest first, at most `spec.historyLimit`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 100), extend("x-kubernetes-list-type" = "atomic"))]
    pub history: Vec<HistoryEntry>,

    /// In memory only, never read or written: how many older entries the API server
    /// holds past `history`, which the controller's cache keeps short (its status writes
    /// are JSON patches that leave those entries in place). 0 when `history` is whole.
    #[serde(skip)]
    #[schemars(skip)]
    pub history_omitted: usize,

    /// `Ready`, with reasons TriggerActive, WaitingForFirstTrigger, Suspended, InvalidSpec,
    /// TargetNotFound, TargetNotScalable, ApplyFailed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
}

impl TidalSchedulerStatus {
    /// The `Ready` condition, if set.
    pub fn ready(&self) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == READY)
    }
}

/// Timers of one rule.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuleStatus {
    /// The rule's name.
    pub name: String,
    /// The rule's latest scheduled instant at or before the last reconcile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_schedule_time: Option<Time>,
    /// The rule's next scheduled instant; absent while the rule is suspended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_schedule_time: Option<Time>,
}

/// One applied (or failed) trigger.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryEntry {
    /// The rule that fired.
    pub rule: String,
    /// The scheduled instant.
    pub schedule_time: Time,
    /// When it was applied, microsecond precision.
    pub execution_time: MicroTime,
    /// Replicas it set.
    pub replicas: i32,
    /// Outcome.
    pub result: TriggerResult,
    /// True when applied after its instant because no leader was acting then, or because
    /// the object did not exist yet; absent when false.
    #[serde(default, skip_serializing_if = "super::is_false")]
    pub catch_up: bool,
    /// Earlier fire instants (of any rule) since the previous watermark that this trigger
    /// replaced without applying them; exact up to 10,000; absent when 0.
    #[serde(default, skip_serializing_if = "super::is_zero")]
    #[schemars(range(min = 0))]
    pub superseded: i64,
    /// Details, e.g. the error of a failed attempt or the colliding rules.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// The W3C trace id (32 hex digits) of this trigger's trace, when traces are exported:
    /// look it up in the tracing backend.
    #[serde(default, rename = "traceID", skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9a-f]{32}$"))]
    pub trace_id: Option<String>,
}

#[cfg(test)]
impl HistoryEntry {
    /// A trigger of `rule` scheduled at `at`, applied then: what unit tests record.
    pub(crate) fn applied(rule: &str, at: jiff::Timestamp) -> HistoryEntry {
        HistoryEntry {
            rule: rule.to_owned(),
            schedule_time: Time(at),
            execution_time: MicroTime(at),
            replicas: 3,
            result: TriggerResult::Succeeded,
            catch_up: false,
            superseded: 0,
            message: String::new(),
            trace_id: None,
        }
    }
}

/// Outcome of a trigger.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TriggerResult {
    /// The level was applied.
    Succeeded,
    /// Applying failed; the level keeps being pursued.
    Failed,
}

/// Reasons of the `Ready` condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConditionReason {
    /// A rule's level is in effect.
    TriggerActive,
    /// No rule has fired yet (within a year back).
    WaitingForFirstTrigger,
    /// `spec.suspend` is true.
    Suspended,
    /// The spec has an error the schema could not catch.
    InvalidSpec,
    /// The target does not exist.
    TargetNotFound,
    /// The target has no `/scale` subresource.
    TargetNotScalable,
    /// Writing the level failed.
    ApplyFailed,
}

impl ConditionReason {
    /// The reason as written in the condition.
    pub fn as_str(self) -> &'static str {
        match self {
            ConditionReason::TriggerActive => "TriggerActive",
            ConditionReason::WaitingForFirstTrigger => "WaitingForFirstTrigger",
            ConditionReason::Suspended => "Suspended",
            ConditionReason::InvalidSpec => "InvalidSpec",
            ConditionReason::TargetNotFound => "TargetNotFound",
            ConditionReason::TargetNotScalable => "TargetNotScalable",
            ConditionReason::ApplyFailed => "ApplyFailed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn at(text: &str) -> jiff::Timestamp {
        text.parse().expect("a timestamp")
    }

    #[test]
    fn a_history_entry_carries_catch_up_and_superseded_only_when_set() {
        // Each write of a status carries every entry the API server decodes, validates and
        // stores: defaults left out make every status write of a full history cheaper.
        let on_time = HistoryEntry::applied("odd", at("2026-12-06T23:22:00Z"));
        let written = serde_json::to_value(&on_time).expect("serializes");
        assert_eq!(written.get("catchUp"), None, "{written}");
        assert_eq!(written.get("superseded"), None, "{written}");

        let caught_up = HistoryEntry {
            catch_up: true,
            superseded: 4,
            ..on_time
        };
        let written = serde_json::to_value(&caught_up).expect("serializes");
        assert_eq!(written["catchUp"], json!(true), "{written}");
        assert_eq!(written["superseded"], json!(4), "{written}");
    }

    #[test]
    fn an_entry_stored_with_the_defaults_written_out_reads_as_one_without() {
        // What releases before 0.3 wrote (and the CRD defaulted).
        let stored = json!({
            "rule": "odd", "scheduleTime": "2026-12-06T23:22:00Z",
            "executionTime": "2026-12-06T23:22:00.000000Z", "replicas": 3,
            "result": "Succeeded", "catchUp": false, "superseded": 0,
        });
        let read: HistoryEntry = serde_json::from_value(stored).expect("deserializes");
        assert_eq!(
            read,
            HistoryEntry::applied("odd", at("2026-12-06T23:22:00Z"))
        );
    }
}
