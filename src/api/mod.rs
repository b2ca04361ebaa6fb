//! The `TidalScheduler` API (`scheduling.tidal.io/v1alpha1`): spec, status and conditions.
//! Field docs become the CRD's descriptions; admission-time checks live in the schema
//! (OpenAPI + CEL) so `kubectl apply` rejects bad objects with a message naming the field.

mod calendar;
mod spec;
mod status;
mod validate;

pub use calendar::{
    CalendarDay, CalendarKind, CalendarProblem, CalendarRef, Calendars, ClusterTidalCalendar,
    ClusterTidalCalendarSpec, MAX_CALENDAR_DAYS, NoCalendars, TidalCalendar, TidalCalendarSpec,
};
pub use spec::{
    ApplyMode, DEFAULT_HISTORY_LIMIT, Rule, TargetRef, TidalScheduler, TidalSchedulerSpec,
    TimeTriggers, Triggers,
};
pub use status::{
    ConditionReason, HistoryEntry, READY, RuleStatus, TidalSchedulerStatus, TriggerResult,
};
pub use validate::{FRAMEWORK_LABELS, SpecProblem, ValidSpec, validate};

use kube::CustomResourceExt;

/// For `skip_serializing_if`: a false flag is not written (absent reads as false).
fn is_false(value: &bool) -> bool {
    !*value
}

/// For `skip_serializing_if`: a zero count is not written (absent reads as 0).
fn is_zero(value: &i64) -> bool {
    *value == 0
}

/// Renders the CustomResourceDefinitions (TidalScheduler, TidalCalendar,
/// ClusterTidalCalendar) as one YAML stream (what `tidal-scheduler crd` prints).
pub fn crd_yaml() -> String {
    [
        TidalScheduler::crd(),
        TidalCalendar::crd(),
        ClusterTidalCalendar::crd(),
    ]
    .iter()
    // Serializing a CRD (plain data, string keys) into YAML cannot fail.
    .map(|crd| serde_saphyr::to_string(crd).expect("a CRD serializes to YAML"))
    .map(|yaml| format!("---\n{yaml}"))
    .collect()
}
