//! The bench's options, read once from the environment:
//!
//! - `TIDAL_BENCH_OBJECTS=N` runs only the latency case of N objects (0: none);
//! - `TIDAL_BENCH_ROUNDS=N` runs N rounds of each side, once;
//! - `TIDAL_BENCH_SKIP_RSS=1` skips the memory part, `TIDAL_BENCH_RSS_OBJECTS=N` gives
//!   it N objects (default 10,000);
//! - `TIDAL_BENCH_BASELINE_WATCH=1` keeps a watch open on the baseline's objects, as the
//!   controller has on its own;
//! - `TIDAL_BENCH_APPLY=Scale` runs the objects in `Scale` mode, each with a Deployment of
//!   its own: the controller then writes each target fenced (a server-side apply, then
//!   merge patches, conditional on the version its watch of the Deployments holds) before
//!   the status, and the baseline sends a
//!   plain `/scale` merge patch before each status patch — the unfenced write the
//!   controller made before fencing — or, with `TIDAL_BENCH_BASELINE_FENCED=1`, the same
//!   fenced read-then-apply as the controller;
//! - `TIDAL_BENCH_NEIGHBOUR=with|without` runs the controller as its service account,
//!   with deploy/flowcontrol.yaml installed or not, and measures another client's reads
//!   during the bursts (see [`crate::neighbour`]);
//! - `TIDAL_BENCH_TRACING=1` measures the cost of tracing instead: on a control plane
//!   whose kube-apiserver and etcd trace to a real Jaeger, a controller exporting every
//!   trigger's trace there takes turns with one that exports nothing (in place of the
//!   baseline).

use tidal_harness::bench_options::{parsed, parsed_or, switch};

/// How the bench's objects are applied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Apply {
    /// `status.desiredReplicas` only.
    Status,
    /// The target's `/scale` too.
    Scale,
}

/// Everything the bench takes from its environment.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Only the latency case of this many objects.
    pub only_objects: Option<usize>,
    /// Rounds of each side, instead of each case's own rounds and repetitions.
    pub rounds: Option<usize>,
    /// Objects of the memory part; `None`: skipped.
    pub memory_objects: Option<usize>,
    /// The apply mode of every object.
    pub apply: Apply,
    /// In `Scale` mode, whether the baseline fences its target writes as the controller.
    pub baseline_fenced: bool,
    /// Whether the baseline keeps a watch open on its objects.
    pub baseline_watch: bool,
    /// Tracing on against tracing off, instead of the controller against the baseline.
    pub tracing: bool,
    /// Another client's reads during the bursts, with the FlowSchemas installed (`true`)
    /// or not; `None`: no neighbour, the controller as the admin.
    pub neighbour: Option<bool>,
}

impl Options {
    /// The options of this process's environment.
    pub fn from_env() -> anyhow::Result<Options> {
        let apply = match std::env::var("TIDAL_BENCH_APPLY").as_deref() {
            Err(_) | Ok("" | "Status") => Apply::Status,
            Ok("Scale") => Apply::Scale,
            Ok(other) => anyhow::bail!("TIDAL_BENCH_APPLY={other}: Status or Scale"),
        };
        let neighbour = match std::env::var("TIDAL_BENCH_NEIGHBOUR").as_deref() {
            Err(_) | Ok("") => None,
            Ok("with") => Some(true),
            Ok("without") => Some(false),
            Ok(other) => anyhow::bail!("TIDAL_BENCH_NEIGHBOUR={other}: with or without"),
        };
        let memory_objects = if switch("TIDAL_BENCH_SKIP_RSS") {
            None
        } else {
            Some(parsed_or("TIDAL_BENCH_RSS_OBJECTS", 10_000).map_err(anyhow::Error::msg)?)
        };
        Ok(Options {
            only_objects: parsed("TIDAL_BENCH_OBJECTS").map_err(anyhow::Error::msg)?,
            rounds: parsed("TIDAL_BENCH_ROUNDS").map_err(anyhow::Error::msg)?,
            memory_objects,
            apply,
            baseline_fenced: switch("TIDAL_BENCH_BASELINE_FENCED"),
            baseline_watch: switch("TIDAL_BENCH_BASELINE_WATCH"),
            tracing: switch("TIDAL_BENCH_TRACING"),
            neighbour,
        })
    }

    /// Whether the objects run in `Scale` mode.
    pub fn scale(&self) -> bool {
        self.apply == Apply::Scale
    }
}
