//! tidal-scheduler: scales Kubernetes workloads on a calendar.
#![forbid(unsafe_code)]

pub mod schedule;
