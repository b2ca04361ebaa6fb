//! Chaos scenarios for tidal-scheduler: named faults an SRE points at a cluster, one
//! invariant checker for all of them that judges only what the API server saw, and
//! reports (table, JSON, SVG timeline).
//!
//! - [`scenario`]: the scenarios, their workloads and bounds; [`scenarios`]: the faults.
//! - [`cluster`]: the replicas in either mode — [`local`] (processes behind Toxiproxy on
//!   the harness's control plane) or [`in_cluster`] (the installed Deployment);
//!   [`run`]: a scenario from steady state to convergence.
//! - [`observe`]: the watches; [`check`]: the invariants; [`report`], [`timeline`].

#![forbid(unsafe_code)]

pub mod catch_up;
pub mod check;
pub mod cluster;
pub mod in_cluster;
pub mod local;
pub mod observe;
pub mod report;
pub mod run;
pub mod scenario;
pub mod scenarios;
pub mod timeline;
pub mod timing;
