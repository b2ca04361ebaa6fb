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

/// User + system CPU time of process `pid` so far, in seconds (`/proc/PID/stat`).
pub fn cpu_seconds(pid: u32) -> Result<f64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map_err(|e| format!("/proc/{pid}/stat: {e}"))?;
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    // After the command: state is field 3, utime 14 and stime 15 (1-based, man 5 proc).
    let ticks = |index: usize| -> Result<f64, String> {
        fields
            .get(index)
            .and_then(|t| t.parse::<f64>().ok())
            .ok_or_else(|| format!("/proc/{pid}/stat: no CPU time in field {}", index + 3))
    };
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// The line that heads a bench's Markdown table: when, and on how many CPUs
/// (`run of 2026-12-04 01:30 UTC, 2 CPUs`).
pub fn run_heading() -> String {
    format!(
        "run of {} UTC, {} CPUs",
        jiff::Timestamp::now().strftime("%Y-%m-%d %H:%M"),
        std::thread::available_parallelism().map_or(0, |n| n.get())
    )
}

/// `value` rounded, with thousands separators (1820.3 → `1,820`), as the docs' tables.
pub fn grouped(value: f64) -> String {
    let digits = format!("{:.0}", value.max(0.0));
    let mut out = String::new();
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn figures_are_rounded_and_grouped_as_in_the_docs() {
        assert_eq!(grouped(1820.3), "1,820");
        assert_eq!(grouped(24.6), "25");
        assert_eq!(grouped(1_000_000.0), "1,000,000");
        assert_eq!(grouped(999.5), "1,000");
    }

    #[test]
    fn cpu_time_of_this_process_grows_and_a_missing_process_is_named() {
        let before = cpu_seconds(std::process::id()).expect("our own stat");
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let after = cpu_seconds(std::process::id()).expect("our own stat");
        assert!(after >= before && before >= 0.0, "{before} then {after}");
        let missing = cpu_seconds(u32::MAX).expect_err("no such process");
        assert!(
            missing.contains(&format!("/proc/{}/stat", u32::MAX)),
            "{missing}"
        );
    }
}
