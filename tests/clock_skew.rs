//! Clock skew on a real kube-apiserver and etcd: a replica whose wall clock is 45 s
//! ahead (libfaketime, monotonic clock untouched) measures its offset from the API
//! server's `Date`, does not campaign, and never writes a trigger while a healthy replica
//! leads; a leader whose clock jumps ahead steps down at once and hands over.
//!
//! Needs Debian's libfaketime: the harness installs it on first use
//! (`tidal_harness::packages`).

use tidal_harness as common;

use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use tidal_scheduler::api::TidalScheduler;

use common::audit::replica_writes;
use common::cluster::TestEnv;
use common::fleet::{Clocks, Fleet, Options};
use common::process::Process;
use common::replicas::*;
use common::tide::*;
use common::wait::*;

/// One replica (`PREFIX-0`) under libfaketime, its wall clock `initial` from the real one
/// (`+45s`; re-read every second, moved by [`Fleet::skew`]).
async fn faked(env: &TestEnv, prefix: &str, initial: &'static str) -> Fleet {
    let options = Options::new(prefix, &FAST_LEASE).clocks(Clocks::Faked { initial });
    Fleet::start(env, options, 1)
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The value of an unlabelled metric on the replica's `/metrics`.
fn metric(process: &Process, name: &str) -> f64 {
    let (_, text) = http_get(process, "/metrics");
    text.lines()
        .find_map(|line| line.strip_prefix(&format!("{name} ")))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
}

/// Polls a metric (the offset gauge is refreshed every second) until `wanted` holds.
async fn wait_metric(process: &Process, name: &str, wanted: impl Fn(f64) -> bool) -> f64 {
    let what = format!("wanted {name} of {}", process.name());
    eventually(&what, || async {
        match metric(process, name) {
            value if wanted(value) => Ok(value),
            value => Err(format!("{name} is {value}")),
        }
    })
    .await
}

/// Checks that no trigger in the status was applied before its instant.
async fn assert_never_early(env: &TestEnv) {
    let object = env.api::<TidalScheduler>().get("web").await.expect("get");
    for entry in &status(&object).history {
        assert!(
            entry.execution_time.0 >= entry.schedule_time.0,
            "applied early: {entry:#?}"
        );
    }
}

/// The ClockSkew Events about the Lease.
async fn clock_skew_events(env: &TestEnv) -> Vec<Event> {
    env.api::<Event>()
        .list(&ListParams::default())
        .await
        .expect("list Events")
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("ClockSkew"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("Lease"))
        .collect()
}

#[tokio::test]
async fn a_replica_with_a_skewed_clock_never_acts_while_a_healthy_one_does() {
    let env = TestEnv::new().await;
    create_web(&env, &ALTERNATING, 20).await;
    let fleet = faked(&env, "skewed", "+45s").await;
    let (name, skewed) = (&fleet.members[0].name, &fleet.members[0].process);
    wait_logged(
        skewed,
        "not campaigning: clock too far from the API server's",
    )
    .await;
    wait_metric(skewed, "tidal_scheduler_clock_offset_seconds", |offset| {
        (-46.0..=-44.0).contains(&offset)
    })
    .await;
    assert_eq!(metric(skewed, "tidal_scheduler_clock_skewed"), 1.0);
    assert_eq!(lease_state(&env).await.0, "", "nobody leads yet");

    let healthy = start_replica(&env, "healthy", &FAST_LEASE);
    wait_holder(&env, "the healthy leader", |h| h == "healthy").await;
    let started = Timestamp::now();
    wait_status(&env, "web", "three triggers", |s| {
        s.history
            .iter()
            .filter(|h| h.schedule_time.0 > started)
            .count()
            >= 3
    })
    .await;
    let offset = metric(&healthy, "tidal_scheduler_clock_offset_seconds");
    assert!(offset.abs() < 1.5, "healthy offset {offset}");
    assert_eq!(metric(&healthy, "tidal_scheduler_clock_skewed"), 0.0);

    assert!(
        !skewed.log().contains("became the leader"),
        "{}",
        skewed.log()
    );
    assert!(applied(&skewed.log()).is_empty(), "{}", skewed.log());
    for write in replica_writes(&env).iter().filter(|w| w.replica == *name) {
        assert_eq!(
            write.resource, "events",
            "the skewed replica wrote {write:?}"
        );
    }
    assert_never_early(&env).await;
    let events = clock_skew_events(&env).await;
    assert!(
        events.iter().any(|e| {
            let note = e.note.as_deref().unwrap_or_default();
            let by = note
                .split_once("ahead of the API server's by ")
                .and_then(|(_, rest)| rest.split_once(" s")?.0.parse::<f64>().ok());
            e.reporting_instance.as_deref() == Some(name.as_str())
                && by.is_some_and(|by| (44.0..=46.0).contains(&by))
        }),
        "{events:#?}"
    );
}

#[tokio::test]
async fn a_leader_whose_clock_jumps_ahead_steps_down_and_a_healthy_standby_takes_over() {
    let env = TestEnv::new().await;
    create_web(&env, &ALTERNATING, 20).await;
    let fleet = faked(&env, "drifting", "+0s").await;
    let (name, drifting) = (&fleet.members[0].name, &fleet.members[0].process);
    wait_holder(&env, "the first leader", |h| h == name).await;
    let healthy = start_replica(&env, "healthy", &FAST_LEASE);
    wait_logged(&healthy, "standing by").await;
    let started = Timestamp::now();
    wait_status(&env, "web", "a trigger by the first leader", |s| {
        s.history.iter().any(|h| h.schedule_time.0 > started)
    })
    .await;

    fleet.skew(name, "+45s").expect("move the clock");
    let jumped = Timestamp::now();
    wait_holder(&env, "the healthy successor", |h| h == "healthy").await;
    wait_logged(drifting, "stepped down and released the lease").await;
    wait_status(&env, "web", "triggers by the successor", |s| {
        s.history
            .iter()
            .filter(|h| h.schedule_time.0 > jumped)
            .count()
            >= 2
    })
    .await;

    assert_never_early(&env).await;
    // Once its clock jumped, the old leader wrote no status (it released the Lease and
    // reported the skew).
    let late: Vec<_> = replica_writes(&env)
        .into_iter()
        .filter(|w| w.replica == *name && w.at > jumped)
        .filter(|w| w.resource != "events" && w.resource != "leases")
        .collect();
    assert!(late.is_empty(), "written after the jump: {late:#?}");
    let events = clock_skew_events(&env).await;
    assert!(
        events
            .iter()
            .any(|e| e.reporting_instance.as_deref() == Some(name.as_str())),
        "{events:#?}"
    );
}
