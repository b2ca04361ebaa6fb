//! Chaos scenarios for tidal-scheduler: named faults an SRE points at a cluster, one
//! invariant checker for all of them that judges only what the API server saw, and
//! reports (table, JSON, SVG timeline).
//!
//! - [`scenario`]: the scenarios, their workloads and bounds; [`scenarios`]: the faults.
//! - [`local`]: local mode (replicas as processes behind Toxiproxy, the harness's
//!   control plane); [`run`]: a scenario from steady state to convergence.
//! - [`observe`]: the watches; [`check`]: the invariants; [`report`], [`timeline`].

#![forbid(unsafe_code)]

pub mod check;
pub mod local;
pub mod observe;
pub mod report;
pub mod run;
pub mod scenario;
pub mod scenarios;
pub mod timeline;
pub mod timing;
