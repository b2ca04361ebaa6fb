//! What an SRE reads after a run: per scenario the faults, instants and their fate,
//! zombie writes, lateness and failover percentiles and whether every bound held — as a
//! table and as JSON.

use std::time::Duration;

use serde::Serialize;

use crate::catch_up::CatchUp;
use crate::check::{Fault, Holding, Verdict};
use crate::scenario::{Mode, Scenario};

/// One scenario's outcome.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The scenario's name, or `soak` for mixed scenarios.
    pub name: String,
    /// Which scenario (the first, in a soak).
    pub scenario: Scenario,
    /// Where it ran.
    pub mode: Mode,
    /// The faults injected.
    pub faults: Vec<Fault>,
    /// The checker's counts.
    #[serde(flatten)]
    pub verdict: Verdict,
    /// Lateness p50 / p99 / max, ms.
    pub lateness: Percentiles,
    /// Failover (fault → a new holder) p50 / p99 / max, ms.
    pub failover: Percentiles,
    /// Per leader fault: the takeover and when the instants due in the gap were applied.
    pub catch_ups: Vec<CatchUp>,
    /// Last fault healed → every object and target at the rules' level, ms.
    pub convergence_ms: Option<f64>,
    /// One burst of the workload's writes before the first fault, first to last seen,
    /// ms: part of both bounds.
    pub burst_ms: f64,
    /// The lateness bound, ms.
    pub lateness_bound_ms: f64,
    /// The convergence bound, ms.
    pub convergence_bound_ms: f64,
    /// Every bound or invariant that did not hold; empty when the scenario passed.
    pub problems: Vec<String>,
    /// The Lease's holders over time (for the timeline).
    pub holdings: Vec<Holding>,
    /// Each applied instant and its lateness: (instant, ms) (for the timeline).
    pub triggers: Vec<(jiff::Timestamp, f64)>,
}

/// p50 / p99 / max of some samples (none: all zero).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Percentiles {
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Maximum.
    pub max: f64,
}

impl Percentiles {
    /// Of `samples`.
    pub fn of(samples: &[f64]) -> Percentiles {
        if samples.is_empty() {
            return Percentiles::default();
        }
        let (p50, p99, max) = tidal_harness::measure::summary(samples);
        Percentiles { p50, p99, max }
    }
}

impl Report {
    /// Whether every invariant and bound held.
    pub fn passed(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The objects with lost instants, the first ten named.
fn lost_in(objects: &[(String, usize)]) -> String {
    const NAMED: usize = 10;
    let mut named: Vec<String> = objects
        .iter()
        .take(NAMED)
        .map(|(object, lost)| format!("{object} ({lost})"))
        .collect();
    if objects.len() > NAMED {
        named.push(format!("{} more objects", objects.len() - NAMED));
    }
    named.join(", ")
}

/// The invariants and bounds `verdict` breaks (failed triggers count only where the
/// fault does not make the API server refuse or time out writes).
pub fn problems(
    verdict: &Verdict,
    convergence: Option<Duration>,
    lateness_bound: Duration,
    convergence_bound: Duration,
    failures_expected: bool,
) -> Vec<String> {
    let mut problems = Vec::new();
    if verdict.failed > 0 && !failures_expected {
        problems.push(format!("{} triggers failed", verdict.failed));
    }
    if verdict.lost > 0 {
        problems.push(format!(
            "{} instants lost, in {}",
            verdict.lost,
            lost_in(&verdict.lost_in)
        ));
    }
    let counts = [
        (verdict.duplicated, "instants applied twice"),
        (verdict.early, "triggers applied early"),
        (verdict.zombie_writes, "zombie writes"),
        (verdict.skewed_leads, "leaderships of a skewed replica"),
    ];
    for (count, what) in counts {
        if count > 0 {
            problems.push(format!("{count} {what}"));
        }
    }
    let late = verdict
        .lateness_ms
        .iter()
        .filter(|&&ms| ms > lateness_bound.as_secs_f64() * 1000.0)
        .count();
    if late > 0 {
        problems.push(format!("{late} triggers later than {lateness_bound:?}"));
    }
    match convergence {
        None => problems.push(format!("not converged within {convergence_bound:?}")),
        Some(took) if took > convergence_bound => problems.push(format!(
            "converged after {took:?}, bound {convergence_bound:?}"
        )),
        Some(_) => {}
    }
    problems
}

/// The reports as a table, one row per scenario.
pub fn table(reports: &[Report]) -> String {
    let mut out = String::new();
    out.push_str(&format!(
        "{:<21} {:>6} {:>8} {:>7} {:>5} {:>10} {:>6} {:>4} {:>4} {:>6} {:>6} {:>5} {:>20} {:>14} {:>7} {}\n",
        "scenario",
        "faults",
        "instants",
        "applied",
        "late",
        "superseded",
        "failed",
        "lost",
        "dup",
        "zombie",
        "fenced",
        "429s",
        "lateness p50/p99/max",
        "failover p50/p99",
        "converge",
        "result"
    ));
    for r in reports {
        let v = &r.verdict;
        let seconds = |ms: f64| format!("{:.1}", ms / 1000.0);
        out.push_str(&format!(
            "{:<21} {:>6} {:>8} {:>7} {:>5} {:>10} {:>6} {:>4} {:>4} {:>6} {:>6} {:>5} {:>20} {:>14} {:>7} {}\n",
            r.name,
            r.faults.len(),
            v.instants,
            v.on_time + v.caught_up,
            v.caught_up,
            v.superseded,
            v.failed,
            v.lost,
            v.duplicated,
            v.zombie_writes,
            v.fenced_writes,
            v.throttled,
            format!(
                "{}/{}/{} s",
                seconds(r.lateness.p50),
                seconds(r.lateness.p99),
                seconds(r.lateness.max)
            ),
            format!("{}/{} s", seconds(r.failover.p50), seconds(r.failover.p99)),
            r.convergence_ms
                .map_or("-".to_owned(), |ms| format!("{} s", seconds(ms))),
            if r.passed() {
                "ok".to_owned()
            } else {
                format!("FAILED: {}", r.problems.join("; "))
            }
        ));
    }
    out
}
