//! tidal-scheduler: scales Kubernetes workloads on a calendar.
//!
//! A `TidalScheduler` object holds cron rules with replica counts; the latest rule to fire
//! sets the replicas in effect (the "tide level").
//!
//! ```text
//!   TidalScheduler manifest ──► api::validate ──► schedule::Tide ──► level at now,
//!   (spec: targetRef, rules)     (schema rules,     (rules parsed      next trigger,
//!                                 cron grammar,      into Cron +        conflicts,
//!                                 zones)             replicas)          superseded count
//!                                                         │
//!                        cli: `next`, `plan` ◄────────────┤
//!                                                         │
//!   watch (cache) ──► controller::reconcile ──► plan at now ──► fenced writes: status
//!                      (one timer per object)                   (resourceVersion), /scale
//!                                                               or HPA floor (term's field
//!                                                               manager + precondition),
//!                                                               Events
//! ```
//!
//! Modules:
//! - [`schedule`]: cron grammar (robfig/cron v3), bundled time zones, DST policy, fire
//!   times, the tide level. Pure: no clock reads, no Kubernetes types.
//! - [`api`]: the `scheduling.tidal.io/v1alpha1` types, the CRD, and spec validation.
//! - [`controller`]: `tidal-scheduler run` — keeps status (and in Scale mode the target)
//!   at the tide level now, requeueing for the next fire instant.
//! - [`election`]: Lease leader election (client-go semantics) and the write gate that
//!   lets only the leader act (terms, fencing tokens, the clock bound).
//! - [`clock`]: the one place that reads the wall clock, and its offset from the API
//!   server's.
//! - [`runtime`]: the process around the controller for `run` and `demo`; [`task`]: its
//!   background tasks, whose end is fatal; [`sync`]: the lock fallback they share.
//! - [`telemetry`]: log output, the `/metrics` encoder, the health server.
//! - [`cli`]: the subcommands of the `tidal-scheduler` binary.
//!
//! Each module has its own error type ([`schedule::CronError`], [`api::SpecProblem`],
//! [`controller::Error`], [`runtime::RuntimeError`], [`cli::CliError`]); messages name
//! the field or the action and the problem.
#![forbid(unsafe_code)]

/// The version of this build (Cargo.toml): User-Agent, `service.version`, image tag.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

pub mod api;
pub mod cli;
pub mod clock;
pub mod controller;
pub mod election;
pub mod outage;
pub mod rate_limit;
pub mod runtime;
pub mod schedule;
pub mod sync;
pub mod task;
pub mod telemetry;
