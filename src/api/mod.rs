//! The `TidalScheduler` API (`scheduling.tidal.io/v1alpha1`): spec, status and conditions.
//! Field docs become the CRD's descriptions; admission-time checks live in the schema
//! (OpenAPI + CEL) so `kubectl apply` rejects bad objects with a message naming the field.

mod spec;
mod status;
mod validate;

pub use spec::{
    ApplyMode, DEFAULT_HISTORY_LIMIT, Rule, TargetRef, TidalScheduler, TidalSchedulerSpec,
    TimeTriggers, Triggers,
};
pub use status::{
    ConditionReason, HistoryEntry, READY, RuleStatus, TidalSchedulerStatus, TriggerResult,
};
pub use validate::{SpecProblem, ValidSpec, validate};

use kube::CustomResourceExt;

/// Renders the CustomResourceDefinition as YAML (what `tidal-scheduler crd` prints).
pub fn crd_yaml() -> String {
    let crd = TidalScheduler::crd();
    // Serializing a CRD (plain data, string keys) into YAML cannot fail.
    serde_saphyr::to_string(&crd).expect("a CRD serializes to YAML")
}
