//! `TidalSchedulerSpec`: what to scale, how, and the cron rules.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::calendar::CalendarRef;
use super::status::TidalSchedulerStatus;

/// Entries kept in `status.history` when `historyLimit` is not set.
pub const DEFAULT_HISTORY_LIMIT: i32 = 10;

fn default_history_limit() -> i32 {
    DEFAULT_HISTORY_LIMIT
}

/// Desired state: the workload to scale, how the level is applied, and the cron rules.
#[derive(CustomResource, Deserialize, Serialize, Clone, Debug, PartialEq, JsonSchema)]
#[kube(
    group = "scheduling.tidal.io",
    version = "v1alpha1",
    kind = "TidalScheduler",
    doc = "Scales a workload on a calendar: cron rules with replica counts; the latest rule to \
           fire sets the replicas in effect (the tide level).",
    plural = "tidalschedulers",
    singular = "tidalscheduler",
    shortname = "tidal",
    shortname = "tides",
    namespaced,
    status = "TidalSchedulerStatus",
    printcolumn = r#"{"name":"Target","type":"string","jsonPath":".spec.targetRef.name"}"#,
    printcolumn = r#"{"name":"Desired","type":"integer","jsonPath":".status.desiredReplicas"}"#,
    printcolumn = r#"{"name":"Active Rule","type":"string","jsonPath":".status.activeRule"}"#,
    // `string`, not `date`: kubectl prints `<invalid>` for a date in the future.
    printcolumn = r#"{"name":"Next Trigger","type":"string","description":"The next scheduled instant (RFC 3339, UTC)","jsonPath":".status.nextTriggerTime"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct TidalSchedulerSpec {
    /// The workload whose replicas follow the tide. Must be in this object's namespace.
    pub target_ref: TargetRef,

    /// How the level is applied: `Status` (default) only records it in
    /// `status.desiredReplicas` for the decision framework; `Scale` also writes the target's
    /// `/scale` subresource (or an HPA's `minReplicas`).
    #[serde(default)]
    pub apply: ApplyMode,

    /// Stops triggering while true; the next trigger keeps being computed.
    #[serde(default, skip_serializing_if = "super::is_false")]
    pub suspend: bool,

    /// How many entries `status.history` keeps (1–100).
    #[serde(default = "default_history_limit")]
    #[schemars(range(min = 1, max = 100))]
    pub history_limit: i32,

    /// What makes the level change.
    pub triggers: Triggers,
}

impl TidalSchedulerSpec {
    /// The history entries to keep: `historyLimit`, and at least one (admission holds
    /// it to 1–100; the newest entry is what the controller reads back).
    pub fn history_entries(&self) -> usize {
        usize::try_from(self.history_limit.max(1)).unwrap_or(1)
    }
}

/// A reference to the workload to scale.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TargetRef {
    /// API version of the target, e.g. `apps/v1`: an optional group (a DNS-1123
    /// subdomain) and `/`, then a version (a DNS-1035 label).
    #[schemars(length(min = 1, max = 253))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-z]([-a-z0-9]*[a-z0-9])?$')",
        "message": "must be GROUP/VERSION or VERSION (e.g. apps/v1, v1): a DNS-1123 subdomain, '/', and a DNS-1035 label"
    }]))]
    pub api_version: String,
    /// Kind of the target, e.g. `Deployment`.
    #[schemars(length(min = 1, max = 63))]
    pub kind: String,
    /// Name of the target: a DNS-1123 subdomain, as every Kubernetes object's name.
    #[schemars(length(min = 1, max = 253))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",
        "message": "must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.', starting and ending with a letter or digit), as the name of a Kubernetes object"
    }]))]
    pub name: String,
    /// Namespace of the target; if set, it must equal this object's namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(min = 1, max = 63))]
    #[schemars(extend("x-kubernetes-validations" = [{
        "rule": "self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",
        "message": "must be a DNS-1123 label (lowercase letters, digits and '-', starting and ending with a letter or digit), as the name of a namespace"
    }]))]
    pub namespace: Option<String>,
}

/// How the tide level is applied.
#[derive(Deserialize, Serialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum ApplyMode {
    /// Record the level in status only; the decision framework (oFEP-0030) scales.
    #[default]
    Status,
    /// Also write the target's `/scale` subresource (an HPA target gets `minReplicas`).
    Scale,
}

/// Trigger sources.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct Triggers {
    /// Time-based triggers.
    pub times: TimeTriggers,
}

/// Cron rules.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct TimeTriggers {
    /// The rules, 1–100, names unique. The latest to fire sets the level; rules firing at
    /// the same instant collide and the largest replicas wins.
    #[schemars(length(min = 1, max = 100))]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub rules: Vec<Rule>,
}

/// One cron rule.
#[derive(Deserialize, Serialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {
        "rule": "!(has(self.timeZone) && (self.cron.startsWith('CRON_TZ=') || self.cron.startsWith('TZ=')))",
        "message": "time zone given twice: use either a CRON_TZ=/TZ= prefix in cron or timeZone, not both",
        "fieldPath": ".timeZone",
        "reason": "FieldValueInvalid"
    },
    {
        "rule": "has(self.timeZone) || self.cron.startsWith('CRON_TZ=') || self.cron.startsWith('TZ=')",
        "message": "no time zone: prefix cron with CRON_TZ=<IANA zone> or set timeZone",
        "fieldPath": ".cron",
        "reason": "FieldValueRequired"
    },
    {
        "rule": "!self.cron.matches('(^|[ ])@every ([-].*|[+]?0|[+]?((0+([.]0*)?|[.]0+)(ns|us|µs|μs|ms|s|m|h))+)$')",
        "message": "@every needs a positive duration (robfig/cron would fire a zero or negative one every second)",
        "fieldPath": ".cron",
        "reason": "FieldValueInvalid"
    }
]))]
pub struct Rule {
    /// Name, unique within the object (a DNS-1123 label). Renaming makes a new rule.
    #[schemars(
        length(min = 1, max = 63),
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
    )]
    pub name: String,

    /// Six-field cron expression with seconds (robfig/cron v3 grammar), optionally prefixed
    /// by `CRON_TZ=<IANA zone> `, e.g. `CRON_TZ=Asia/Shanghai 0 0 8 * * *`.
    #[schemars(length(min = 1, max = 256))]
    pub cron: String,

    /// Replicas in effect from this rule's fire time until another rule fires.
    #[schemars(range(min = 0))]
    pub replicas: i32,

    /// Free text for humans.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(max = 1024))]
    pub description: Option<String>,

    /// IANA time zone of the rule, instead of a `CRON_TZ=` prefix (not both).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String", length(min = 1, max = 64))]
    pub time_zone: Option<String>,

    /// Stops this rule from firing while true.
    #[serde(default, skip_serializing_if = "super::is_false")]
    pub suspend: bool,

    /// Calendars on whose days (each read in its calendar's time zone) this rule does not
    /// fire. A skipped instant is no instant: it sets no level and is never caught up.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub skip_days: Vec<CalendarRef>,

    /// Calendars on whose days alone this rule fires (any of them); `skipDays` still wins.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub only_days: Vec<CalendarRef>,
}
