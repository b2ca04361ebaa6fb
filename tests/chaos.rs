//! Every chaos scenario of `chaos/` (the runner an SRE uses, `tidal-chaos run`), briefly,
//! on a real kube-apiserver and etcd with the replicas as processes behind Toxiproxy:
//! each must pass the one invariant checker — no instant lost or applied twice, no
//! zombie write, lateness and convergence within the scenario's bounds — and show that
//! its fault really happened (a failover, 429s, a skewed leader stepping down).
//! The suite shares its machine (a build beside it, a busy laptop), so the runner's
//! timing bounds are `Patience::Loaded`: from the takeover each run observed, with
//! headroom; the invariants are exact and the tight figures are in the printed report.
//! The control-plane restarts are in `chaos_control_plane.rs`: they would stop this
//! binary's other scenarios' API server.

use std::time::Duration;

use tidal_chaos::check::Holding;
use tidal_chaos::report::{Report, table};
use tidal_chaos::run::{Limits, Patience, run_local};
use tidal_chaos::scenario::Scenario;

/// Runs `scenario` with `faults` faults; fails on any problem the checker found.
async fn drill(scenario: Scenario, faults: usize) -> Report {
    let limits = Limits {
        faults,
        duration: Duration::from_secs(300),
        patience: Patience::Loaded,
        period: None,
        objects: None,
    };
    let report = run_local(scenario, limits)
        .await
        .unwrap_or_else(|e| panic!("{scenario}: {e}"));
    eprint!("{}", table(std::slice::from_ref(&report)));
    assert!(report.passed(), "{scenario}: {:?}", report.problems);
    assert!(report.faults.len() >= faults, "{scenario}: faults injected");
    report
}

/// Every fault of the leader was followed by another holder of the Lease.
fn assert_failed_over(report: &Report) {
    let of_leader = report.faults.iter().filter(|f| f.leader).count();
    assert!(
        of_leader > 0,
        "{}: no fault hit the leader",
        report.scenario
    );
    assert_eq!(
        report.verdict.failover_ms.len(),
        of_leader,
        "{}: failovers",
        report.scenario
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn leader_sigkill() {
    let report = drill(Scenario::LeaderSigkill, 6).await;
    assert_failed_over(&report);
    assert!(report.verdict.caught_up > 0, "no catch-up after six kills");
}

#[tokio::test(flavor = "multi_thread")]
async fn leader_pod_deleted() {
    let report = drill(Scenario::LeaderPodDeleted, 3).await;
    assert_failed_over(&report);
    // A terminated leader hands the Lease over: released before anyone else holds it,
    // so the successor never waits out a lease duration (however slow the machine).
    for fault in report.faults.iter().filter(|f| f.leader) {
        let after: Vec<&Holding> = report
            .holdings
            .iter()
            .filter(|h| h.at >= fault.start)
            .collect();
        assert!(
            after.first().is_some_and(|h| h.holder.is_empty()),
            "{} did not release the Lease before the next holder: {after:#?}",
            fault.target
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_all() {
    assert_failed_over(&drill(Scenario::KillAll, 2).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn rolling_restart() {
    let report = drill(Scenario::RollingRestart, 1).await;
    assert_eq!(report.faults.len(), 3, "one SIGTERM per replica");
}

#[tokio::test(flavor = "multi_thread")]
async fn zombie() {
    assert_failed_over(&drill(Scenario::Zombie, 2).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn partition_cut() {
    assert_failed_over(&drill(Scenario::PartitionCut, 2).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn partition_black_hole() {
    assert_failed_over(&drill(Scenario::PartitionBlackHole, 3).await);
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_api_server() {
    let report = drill(Scenario::SlowApiServer, 1).await;
    // The fault held: a request through a replica's proxy took at least the toxic's least
    // delay (1,250 ms less 750 ms of jitter).
    let round_trip = report.faults[0]
        .round_trip_ms
        .expect("the slow fault measures a round trip");
    assert!(round_trip >= 500.0, "a round trip of {round_trip:.0} ms");
}

#[tokio::test(flavor = "multi_thread")]
async fn clock_skew() {
    // Round 0 skews the leader, round 1 a standby.
    let report = drill(Scenario::ClockSkew, 2).await;
    assert!(report.faults[0].leader && !report.faults[1].leader);
    assert_failed_over(&report);
}

#[tokio::test(flavor = "multi_thread")]
async fn throttled() {
    let report = drill(Scenario::Throttled, 1).await;
    assert!(report.verdict.throttled > 0, "no request was throttled");
}

#[tokio::test(flavor = "multi_thread")]
async fn failover_burst() {
    let report = drill(Scenario::FailoverBurst, 1).await;
    assert_failed_over(&report);
    assert!(
        report.verdict.caught_up >= 1000,
        "{:?}",
        report.verdict.caught_up
    );
    // The report measures the catch-up from the takeover: every object was due in the gap.
    let [catch_up] = report.catch_ups.as_slice() else {
        panic!("one catch-up per leader fault: {:#?}", report.catch_ups);
    };
    assert!(catch_up.instants >= 1000, "{catch_up:?}");
    assert!(catch_up.takeover > catch_up.fault, "{catch_up:?}");
    // And, from the audit log, the new leader's status writes meanwhile: each instant due
    // was applied by one of them.
    let written = catch_up
        .status_writes
        .expect("the local control plane audits");
    assert!(
        written.sent - written.conflicts >= catch_up.instants,
        "{catch_up:?}"
    );
}
