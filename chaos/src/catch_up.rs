//! How each leader fault was caught up: when the next holder took the Lease, how long
//! after that the instants due in the gap were seen applied — the distribution an SRE
//! compares with "takeover + N s" — and, with an audit log, the status writes the new
//! leader sent meanwhile (one per object due is the least a catch-up can cost).

use jiff::{SignedDuration, Timestamp};
use serde::Serialize;
use tidal_harness::audit::Write;

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
    /// The new holder's status writes from the fault (it cannot write before it holds the
    /// Lease; the takeover is when the Lease was seen taken, a little after) to the last
    /// instant seen applied, as audited (`None` without an audit log).
    pub status_writes: Option<StatusWrites>,
}

/// Status writes of one replica over a time span.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct StatusWrites {
    /// Every status write sent.
    pub sent: usize,
    /// Those refused with 409 Conflict (written against a version already replaced).
    pub conflicts: usize,
}

impl StatusWrites {
    /// The status writes of TidalSchedulers by `replica` in `writes` from `from` to `to`.
    fn of(writes: &[Write], replica: &str, from: Timestamp, to: Timestamp) -> StatusWrites {
        writes
            .iter()
            .filter(|w| w.replica == replica && w.at >= from && w.at <= to)
            .filter(|w| w.resource == "tidalschedulers" && w.subresource == "status")
            .fold(StatusWrites::default(), |counted, w| StatusWrites {
                sent: counted.sent + 1,
                conflicts: counted.conflicts + usize::from(w.code == 409),
            })
    }
}

/// One [`CatchUp`] per fault of a leader after which a leader acted again (the takeover
/// the failover verdict measures, [`took_over`]), given the Lease's updates, each
/// applied instant with its lateness in ms, and the replicas' audited writes, if any.
pub fn catch_ups(
    faults: &[Fault],
    lease_updates: &[Holding],
    triggers: &[(Timestamp, f64)],
    writes: Option<&[Write]>,
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
            let after_takeover_ms = Percentiles::of(&after);
            let last = takeover.at + SignedDuration::from_secs_f64(after_takeover_ms.max / 1000.0);
            Some(CatchUp {
                fault: fault.start,
                takeover: takeover.at,
                holder: takeover.holder.clone(),
                instants: after.len(),
                after_takeover_ms,
                status_writes: writes
                    .map(|writes| StatusWrites::of(writes, &takeover.holder, fault.start, last)),
            })
        })
        .collect()
}

/// One line per catch-up, e.g. `fault 20:44:00.700, takeover 3.1 s later by replica-3;
/// 10000 instants due meanwhile seen applied takeover + 15.0 / 32.5 / 32.7 s (p50 / p99 /
/// max), 1.04× the fault-free burst`: the last catch-up against `burst_ms`, what the same
/// writes took in the same run with a leader in place (the API server's pace on this
/// machine at the time, which varies from run to run; 0: not measured, no ratio).
pub fn describe(catch_ups: &[CatchUp], burst_ms: f64) -> String {
    let seconds = |ms: f64| format!("{:.1}", ms / 1000.0);
    catch_ups
        .iter()
        .map(|c| {
            let took = c.takeover.duration_since(c.fault).as_secs_f64();
            let pace = if burst_ms > 0.0 {
                format!(
                    ", {:.2}× the fault-free burst",
                    c.after_takeover_ms.max / burst_ms
                )
            } else {
                String::new()
            };
            let written = c.status_writes.map_or(String::new(), |w| {
                format!(
                    "; {} status writes by {} meanwhile ({} refused with 409)",
                    w.sent, c.holder, w.conflicts
                )
            });
            format!(
                "  fault {}, takeover {took:.1} s later by {}; {} instants due meanwhile \
                 seen applied takeover + {} / {} / {} s (p50 / p99 / max){pace}{written}\n",
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
        let caught_up = catch_ups(&faults, &holdings, &triggers, None);
        assert_eq!(caught_up.len(), 1, "{caught_up:?}");
        let one = &caught_up[0];
        assert_eq!((one.takeover, one.holder.as_str()), (at(104), "replica-b"));
        assert_eq!(one.instants, 2);
        assert_eq!(one.after_takeover_ms.max, 30_000.0);
        let line = describe(&caught_up, 25_000.0);
        assert!(line.contains("takeover 4.0 s later by replica-b"), "{line}");
        assert!(line.contains("2 instants due meanwhile"), "{line}");
        assert!(
            line.ends_with("/ 30.0 s (p50 / p99 / max), 1.20× the fault-free burst\n"),
            "{line}"
        );
        let unmeasured = describe(&caught_up, 0.0);
        assert!(unmeasured.ends_with("(p50 / p99 / max)\n"), "{unmeasured}");
    }

    fn status_write(seconds: i64, replica: &str, code: u16) -> Write {
        Write {
            at: at(seconds),
            replica: replica.to_owned(),
            verb: "patch".to_owned(),
            resource: "tidalschedulers".to_owned(),
            subresource: "status".to_owned(),
            name: "web".to_owned(),
            code,
        }
    }

    #[test]
    fn the_new_holders_status_writes_until_the_last_catch_up_are_counted() {
        let holdings = [holding(0, "replica-a"), holding(104, "replica-b")];
        let triggers = [(at(101), 9_000.0), (at(101), 33_000.0)];
        let mut lease = status_write(105, "replica-b", 200);
        lease.resource = "leases".to_owned();
        lease.subresource = String::new();
        let writes = [
            status_write(99, "replica-a", 200), // the old leader's, before the fault
            status_write(103, "replica-b", 200), // before its takeover was seen
            status_write(110, "replica-b", 200),
            status_write(111, "replica-b", 409),
            status_write(133, "replica-b", 200),
            lease,
            status_write(140, "replica-b", 200), // after the last catch-up (134)
        ];
        let faults = [kill(100, "replica-a", true)];
        let [one] = catch_ups(&faults, &holdings, &triggers, Some(&writes))
            .try_into()
            .expect("one catch-up");
        let counted = one.status_writes.expect("audited");
        assert_eq!((counted.sent, counted.conflicts), (4, 1));
        assert!(
            describe(&[one], 30_000.0)
                .contains("; 4 status writes by replica-b meanwhile (1 refused with 409)")
        );
    }

    #[test]
    fn a_fault_nobody_took_over_from_has_no_catch_up() {
        let holdings = [holding(0, "replica-a"), holding(101, "replica-a")];
        let caught_up = catch_ups(&[kill(100, "replica-a", true)], &holdings, &[], None);
        assert_eq!(caught_up, []);
    }
}
