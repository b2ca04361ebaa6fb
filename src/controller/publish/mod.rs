//! What the controller tells the world: Kubernetes Events (which ones a reconcile sends,
//! their reasons, series and background publisher), each trigger's trace, and metrics.

pub(crate) mod event;
pub mod metrics;
pub(crate) mod notice;
pub(crate) mod reason;
pub(crate) mod recorder;
pub(crate) mod trace;
