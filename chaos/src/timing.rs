//! The replicas' Lease timing, and the bounds a scenario is judged by.

use std::time::Duration;

/// Lease duration, renew deadline and retry period of the replicas (client-go's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTiming {
    /// `--lease-duration`.
    pub duration: Duration,
    /// `--renew-deadline`.
    pub renew: Duration,
    /// `--retry-period`.
    pub retry: Duration,
}

impl LeaseTiming {
    /// Short enough that a scenario of several faults takes a minute or two, long
    /// enough for a loaded 2-core machine: 4 s / 3 s / 1 s.
    pub const CHAOS: LeaseTiming = LeaseTiming {
        duration: Duration::from_secs(4),
        renew: Duration::from_secs(3),
        retry: Duration::from_secs(1),
    };

    /// The controller's flags for this timing.
    pub fn flags(&self) -> Vec<String> {
        let millis = |d: Duration| match d.subsec_millis() {
            0 => format!("{}s", d.as_secs()),
            _ => format!("{}ms", d.as_millis()),
        };
        vec![
            "--lease-duration".to_owned(),
            millis(self.duration),
            "--renew-deadline".to_owned(),
            millis(self.renew),
            "--retry-period".to_owned(),
            millis(self.retry),
        ]
    }

    /// How late a trigger may be after a crash or partition of the leader: until the
    /// Lease expires, plus a retry period for a standby to notice, plus 1 s to apply.
    pub fn takeover(&self) -> Duration {
        self.duration + self.retry + Duration::from_secs(1)
    }
}

/// A Go duration (`90s`, `5m`, `1h30m`) as a [`Duration`]; negative ones are refused.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let nanos =
        tidal_scheduler::schedule::parse_go_duration(text).map_err(|e| format!("{text}: {e}"))?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("{text}: a duration cannot be negative"))
}
