//! Small helpers of the drills and benchmarks: random pauses, percentiles and a
//! process's memory.

use std::hash::{BuildHasher, RandomState};
use std::time::{Duration, Instant};

/// A random delay below `max` (from the standard library's per-process random keys).
pub fn random_below(max: Duration) -> Duration {
    let random = RandomState::new().hash_one(Instant::now());
    max.mul_f64((random % 10_000) as f64 / 10_000.0)
}

/// p50, p99, max of `samples`.
pub fn summary(samples: &[f64]) -> (f64, f64, f64) {
    let mut sorted = samples.to_vec();
    sorted.sort_by(f64::total_cmp);
    let at =
        |q: f64| sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1];
    (at(0.50), at(0.99), at(1.0))
}

/// Field `field` (e.g. `VmRSS:`, `VmHWM:`) of `/proc/<pid>/status` in MiB (`pid` may be
/// `self`); NaN when the process or the field is gone.
pub fn proc_status_mib(pid: &str, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(f64::NAN, |kb| kb / 1024.0)
}
