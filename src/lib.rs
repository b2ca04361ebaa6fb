//! tidal-scheduler: scales Kubernetes workloads on a calendar.
#![forbid(unsafe_code)]

pub mod api;
pub mod cli;
pub mod schedule;
