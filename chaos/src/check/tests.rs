use super::*;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use tidal_scheduler::schedule::{Cron, Rule};

/// Every 2 s, one rule.
fn every_two_seconds() -> Tide {
    let cron = Cron::parse("*/2 * * * * *", Some("UTC")).expect("valid");
    Tide::new(vec![Rule {
        name: "tick".to_owned(),
        cron,
        replicas: 2,
        suspended: false,
        days: Default::default(),
    }])
}

fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + seconds).expect("valid")
}

/// The entry of the instant at `seconds`, first seen `late_ms` after it.
fn seen(seconds: i64, catch_up: bool, superseded: i64, late_ms: i64) -> Seen {
    let instant = at(seconds);
    let observed = instant + SignedDuration::from_millis(late_ms);
    Seen {
        object: "web".to_owned(),
        entry: HistoryEntry {
            rule: "tick".to_owned(),
            schedule_time: Time(instant),
            execution_time: MicroTime(observed - SignedDuration::from_millis(1)),
            replicas: 2,
            result: TriggerResult::Succeeded,
            catch_up,
            superseded,
            message: String::new(),
            trace_id: None,
        },
        observed,
    }
}

fn observations(seen: Vec<Seen>, until: i64) -> Observations {
    Observations {
        tides: BTreeMap::from([("web".to_owned(), every_two_seconds())]),
        seen,
        from: at(0),
        until: at(until),
        ..Observations::default()
    }
}

fn write(replica: &str, resource: &str, name: &str, code: u16) -> Write {
    Write {
        at: at(0),
        replica: replica.to_owned(),
        verb: "patch".to_owned(),
        resource: resource.to_owned(),
        subresource: String::new(),
        name: name.to_owned(),
        code,
    }
}

#[test]
fn every_instant_applied_on_time_is_clean() {
    let entries = (0..=5).map(|i| seen(2 * i, false, 0, 10)).collect();
    let verdict = check(&observations(entries, 10));
    assert_eq!(verdict.instants, 5);
    assert_eq!(verdict.on_time, 5);
    assert_eq!((verdict.lost, verdict.duplicated, verdict.early), (0, 0, 0));
    assert_eq!(verdict.lateness_ms, vec![10.0; 5]);
}

#[test]
fn a_catch_up_accounts_for_the_instants_it_supersedes() {
    // 2 and 4 missed during a failover; 6 applied late, superseding both.
    let entries = vec![
        seen(0, false, 0, 5),
        seen(6, true, 2, 3000),
        seen(8, false, 0, 5),
    ];
    let verdict = check(&observations(entries, 8));
    assert_eq!(verdict.instants, 4);
    assert_eq!(
        (verdict.on_time, verdict.caught_up, verdict.superseded),
        (1, 1, 2)
    );
    assert_eq!((verdict.lost, verdict.duplicated), (0, 0));
}

#[test]
fn an_instant_neither_applied_nor_superseded_is_lost() {
    // 4 is skipped, and 6 does not count it; 10 never happens.
    let entries = vec![
        seen(0, false, 0, 5),
        seen(2, false, 0, 5),
        seen(6, false, 0, 5),
    ];
    let verdict = check(&observations(entries, 10));
    assert_eq!(verdict.lost, 1 + 2);
    assert_eq!(verdict.lost_in, [("web".to_owned(), 3)]);
    assert_eq!(verdict.instants, 5);
}

#[test]
fn an_instant_applied_and_also_superseded_is_duplicated() {
    let entries = vec![
        seen(0, false, 0, 5),
        seen(2, false, 0, 5),
        seen(4, true, 1, 5),
    ];
    let verdict = check(&observations(entries, 4));
    assert_eq!(verdict.duplicated, 1);
}

#[test]
fn the_same_instant_recorded_twice_is_duplicated() {
    let entries = vec![
        seen(0, false, 0, 5),
        seen(2, false, 0, 5),
        seen(2, true, 0, 900),
    ];
    let verdict = check(&observations(entries, 2));
    assert_eq!(verdict.duplicated, 1);
}

#[test]
fn an_early_trigger_is_counted() {
    let mut early = seen(2, false, 0, 5);
    early.entry.execution_time = MicroTime(at(1));
    let verdict = check(&observations(vec![seen(0, false, 0, 5), early], 2));
    assert_eq!(verdict.early, 1);
}

#[test]
fn late_writes_of_an_ended_term_are_fenced_late_or_zombie() {
    let writes = vec![
        write("a", "leases", "tidal-scheduler", 200),
        write("a", "tidalschedulers", "web", 200),
        write("a", "tidalschedulers", "db", 200),
        write("b", "leases", "tidal-scheduler", 200),
        write("b", "tidalschedulers", "web", 200),
        // a's held writes land after b took over:
        write("a", "tidalschedulers", "web", 409),
        write("a", "tidalschedulers", "db", 200),
        write("a", "tidalschedulers", "web", 200),
        write("a", "events", "web.1", 201),
        write("b", "tidalschedulers", "web", 429),
    ];
    let observed = Observations {
        writes,
        audited: true,
        ..Observations::default()
    };
    let verdict = check(&observed);
    assert_eq!(verdict.fenced_writes, 1);
    assert_eq!(verdict.late_writes, 1, "db: b had not written it");
    assert_eq!(verdict.zombie_writes, 1, "web: undoes b's write");
    assert_eq!(verdict.throttled, 1);
}

#[test]
fn failover_is_measured_from_the_fault_to_another_holder() {
    let fault = |leader, restarted_in_place| Fault {
        kind: "sigkill".to_owned(),
        target: "a".to_owned(),
        leader,
        restarted_in_place,
        start: at(10),
        end: at(10),
        round_trip_ms: None,
    };
    let holding = |seconds: i64, holder: &str| Holding {
        at: at(seconds),
        holder: holder.to_owned(),
    };
    let observed = Observations {
        faults: vec![fault(true, false), fault(false, false)],
        lease_updates: vec![
            holding(0, "a"),
            holding(10, "a"),
            holding(12, ""),
            holding(14, "b"),
        ],
        ..Observations::default()
    };
    assert_eq!(check(&observed).failover_ms, vec![4000.0]);
    // The same identity renewing a second or more later: a restarted container.
    let updates = vec![holding(10, "a"), holding(13, "a"), holding(15, "b")];
    let restarted = Observations {
        faults: vec![fault(true, true)],
        lease_updates: updates.clone(),
        ..Observations::default()
    };
    assert_eq!(check(&restarted).failover_ms, vec![3000.0]);
    let replaced = Observations {
        faults: vec![fault(true, false)],
        lease_updates: updates,
        ..Observations::default()
    };
    assert_eq!(check(&replaced).failover_ms, vec![5000.0]);
}

#[test]
fn a_skewed_replica_taking_the_lease_is_counted() {
    let skew = Fault {
        kind: "clock +3m".to_owned(),
        target: "a".to_owned(),
        leader: false,
        restarted_in_place: false,
        start: at(10),
        end: at(30),
        round_trip_ms: None,
    };
    let holding = |seconds: i64, holder: &str| Holding {
        at: at(seconds),
        holder: holder.to_owned(),
    };
    let observed = Observations {
        faults: vec![skew],
        lease_updates: vec![
            holding(0, "a"),
            holding(11, "b"),
            holding(20, "a"),
            holding(31, "a"),
        ],
        ..Observations::default()
    };
    assert_eq!(check(&observed).skewed_leads, 1);
}
