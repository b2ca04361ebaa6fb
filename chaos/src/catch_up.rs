//! How each leader fault was caught up: when the next holder took the Lease, and how long
//! after that the instants due in the gap were seen applied — the distribution an SRE
//! compares with "takeover + N s".

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;

use crate::check::{Fault, Holding, took_over};
use crate::report::Percentiles;

/// The catch-up of one leader fault.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CatchUp {
    /// When the fault began.
    pub fault: Timestamp,
    /// When the next holder was seen taking the Lease.
    pub takeover: Timestamp,
    /// Its identity.
    pub holder: String,
    /// Instants due from the fault's start to the takeover.
    pub instants: usize,
    /// When they were seen applied, ms after the takeover (negative: before it, by the
    /// faulted leader still acting within its renew deadline).
    pub after_takeover_ms: Percentiles,
}

/// One [`CatchUp`] per fault of a leader after which a leader acted again (the takeover
/// the failover verdict measures, [`took_over`]), given the Lease's updates and each
/// applied instant with its lateness in ms.
pub fn catch_ups(
    faults: &[Fault],
    lease_updates: &[Holding],
    triggers: &[(Timestamp, f64)],
) -> Vec<CatchUp> {
    faults
        .iter()
        .filter(|fault| fault.leader)
        .filter_map(|fault| {
            let takeover = took_over(
                lease_updates,
                &fault.target,
                fault.restarted_in_place,
                fault.start,
            )?;
            let after: Vec<f64> = triggers
                .iter()
                .filter(|(instant, _)| *instant > fault.start && *instant <= takeover.at)
                .map(|(instant, late_ms)| {
                    let seen = *instant + SignedDuration::from_secs_f64(late_ms / 1000.0);
                    seen.duration_since(takeover.at).as_secs_f64() * 1000.0
                })
                .collect();
            Some(CatchUp {
                fault: fault.start,
                takeover: takeover.at,
                holder: takeover.holder.clone(),
                instants: after.len(),
                after_takeover_ms: Percentiles::of(&after),
            })
        })
        .collect()
}

/// One line per catch-up, e.g. `fault 20:44:00.700, takeover 3.1 s later by replica-3;
/// 10000 instants due meanwhile seen applied takeover + 15.0 / 32.5 / 32.7 s`.
pub fn describe(catch_ups: &[CatchUp]) -> String {
    let seconds = |ms: f64| format!("{:.1}", ms / 1000.0);
    catch_ups
        .iter()
        .map(|c| {
            let took = c.takeover.duration_since(c.fault).as_secs_f64();
            format!(
                "  fault {}, takeover {took:.1} s later by {}; {} instants due meanwhile \
                 seen applied takeover + {} / {} / {} s (p50 / p99 / max)\n",
                c.fault.strftime("%H:%M:%S%.3f"),
                c.holder,
                c.instants,
                seconds(c.after_takeover_ms.p50),
                seconds(c.after_takeover_ms.p99),
                seconds(c.after_takeover_ms.max),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn holding(seconds: i64, holder: &str) -> Holding {
        Holding {
            at: at(seconds),
            holder: holder.to_owned(),
        }
    }

    fn kill(seconds: i64, target: &str, leader: bool) -> Fault {
        Fault {
            kind: "sigkill".to_owned(),
            target: target.to_owned(),
            leader,
            restarted_in_place: false,
            start: at(seconds),
            end: at(seconds),
            round_trip_ms: None,
        }
    }

    #[test]
    fn the_instants_due_in_the_gap_are_measured_from_the_next_holders_takeover() {
        // replica-a faulted at 100, the Lease empty at 103 and replica-b's at 104; two
        // instants at 101 (seen at 110 and 134) and one at 120, after the gap.
        let holdings = [
            holding(0, "replica-a"),
            holding(103, ""),
            holding(104, "replica-b"),
        ];
        let triggers = [(at(101), 9_000.0), (at(101), 33_000.0), (at(120), 500.0)];
        let faults = [kill(100, "replica-a", true), kill(200, "replica-c", false)];
        let caught_up = catch_ups(&faults, &holdings, &triggers);
        assert_eq!(caught_up.len(), 1, "{caught_up:?}");
        let one = &caught_up[0];
        assert_eq!((one.takeover, one.holder.as_str()), (at(104), "replica-b"));
        assert_eq!(one.instants, 2);
        assert_eq!(one.after_takeover_ms.max, 30_000.0);
        let line = describe(&caught_up);
        assert!(line.contains("takeover 4.0 s later by replica-b"), "{line}");
        assert!(line.contains("2 instants due meanwhile"), "{line}");
        assert!(line.ends_with("/ 30.0 s (p50 / p99 / max)\n"), "{line}");
    }

    #[test]
    fn a_fault_nobody_took_over_from_has_no_catch_up() {
        let holdings = [holding(0, "replica-a"), holding(101, "replica-a")];
        let caught_up = catch_ups(&[kill(100, "replica-a", true)], &holdings, &[]);
        assert_eq!(caught_up, []);
    }
}
