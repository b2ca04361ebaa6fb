//! Fencing on a real kube-apiserver and etcd: a leader cut off from the API server while
//! its write is on the way — the request held, as a network partition holds TCP
//! segments, and delivered after its successor acted — changes nothing, and the target
//! agrees with the status after the heal. Three replicas in `Scale` mode, each reaching
//! the API server through its own [`HoldingProxy`]; who wrote what, and with which
//! outcome, comes from the API server's audit log.

use tidal_harness as common;

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::PostParams;
use tidal_scheduler::api::TidalScheduler;

use common::audit::{Write, replica_writes};
use common::cluster::TestEnv;
use common::fixtures::deployment;
use common::fleet::{Fleet, Options, Route};
use common::replicas::*;
use common::tide::*;

/// The rules: 3 replicas at every `:x0`, 7 at every `:x5`.
const TEN_SECOND_TIDE: [(&str, &str, i32); 2] = [
    ("low", "CRON_TZ=UTC */10 * * * * *", 3),
    ("high", "CRON_TZ=UTC 5-59/10 * * * * *", 7),
];

/// 7 replicas at every `:x5`, back to 3 two seconds later: a successor that takes over
/// a lease duration after a partition at `:x5` finds the level where the target already
/// is, so its first write changes no replicas.
const SHORT_HIGH_TIDE: [(&str, &str, i32); 2] = [
    ("high", "CRON_TZ=UTC 5/10 * * * * *", 7),
    ("low", "CRON_TZ=UTC 7/10 * * * * *", 3),
];

/// Three replicas, each behind its own proxy, and who leads.
struct Fenced {
    fleet: Fleet,
    leader: String,
}

/// Creates Deployment `web` and TidalScheduler `web` (Scale mode, `rules`), starts the
/// replicas behind their proxies, and waits until the leader has scaled the Deployment.
async fn fleet_behind_proxies(env: &TestEnv, rules: &[(&str, &str, i32)]) -> Fenced {
    env.api::<Deployment>()
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create Deployment");
    create(
        env,
        manifest("web", "apps/v1", "Deployment", "web", "Scale", rules),
    )
    .await;
    let options = Options::new("replica", &FAST_LEASE).route(Route::Holding);
    let fleet = Fleet::start(env, options, 3)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let leader = wait_holder(env, "leader", |h| !h.is_empty()).await;
    wait_status(env, "web", "the first level applied", |s| {
        s.desired_replicas.is_some()
    })
    .await;
    Fenced { fleet, leader }
}

/// The first `:x5` instant at least `margin` from now.
fn next_x5(margin: Duration) -> Timestamp {
    let mut at = second_after(margin);
    while at.as_second() % 10 != 5 {
        at += SignedDuration::from_secs(1);
    }
    at
}

/// Sleeps until the wall clock reads `at`.
async fn wall_sleep_until(at: Timestamp) {
    let wait = at.duration_since(Timestamp::now());
    if wait > SignedDuration::ZERO {
        tokio::time::sleep(wait.unsigned_abs()).await;
    }
}

/// Replicas of the Deployment and the level in status, read together.
async fn target_and_status(env: &TestEnv) -> (Option<i32>, Option<i32>) {
    let scale = env
        .api::<Deployment>()
        .get_scale("web")
        .await
        .expect("get scale");
    let tide = env
        .api::<TidalScheduler>()
        .get("web")
        .await
        .expect("get TidalScheduler");
    (
        scale.spec.and_then(|s| s.replicas),
        tide.status.and_then(|s| s.desired_replicas),
    )
}

/// [`target_and_status`], read before the instant `next` (after it, a new trigger could
/// hide what a late write did).
async fn target_and_status_before(env: &TestEnv, next: Timestamp) -> (Option<i32>, Option<i32>) {
    let read = target_and_status(env).await;
    assert!(
        Timestamp::now() < next,
        "checked too late to tell: the next instant {next} has come"
    );
    read
}

/// Checks the audit log: once any other replica wrote after `since` (its first write is
/// taking the Lease), the API server accepted no write of `old` — Lease, status, target.
/// Returns the old leader's writes after that point.
fn assert_no_old_write_accepted(env: &TestEnv, old: &str, since: Timestamp) -> Vec<Write> {
    let writes = replica_writes(env);
    let successor_first = writes
        .iter()
        .find(|w| w.replica != old && w.at > since && w.code < 300)
        .unwrap_or_else(|| panic!("no write of a successor after {since}: {writes:#?}"))
        .clone();
    let late: Vec<Write> = writes
        .iter()
        .filter(|w| w.replica == old && w.at > successor_first.at)
        .cloned()
        .collect();
    for write in &late {
        assert!(
            write.code >= 300,
            "{write:?} of the old leader was accepted after its successor's first write \
             {successor_first:?}"
        );
    }
    late
}

/// The scenario: the leader's proxy holds everything from 0.3 s before a rising
/// instant (3 → 7) until 7.5 s later, when the level is back at 3; optionally the leader
/// is also paused (SIGSTOP) 0.2 s after the instant and resumed after the heal.
async fn partition_across_a_rising_instant(freeze: bool) {
    let env = TestEnv::new().await;
    let mut fleet = fleet_behind_proxies(&env, &TEN_SECOND_TIDE).await;
    let rise = next_x5(Duration::from_secs(3));
    let held_at = rise - SignedDuration::from_millis(300);
    let old = fleet.leader.clone();
    let proxy = fleet.fleet.holding(&old).expect("a holding proxy");

    wall_sleep_until(held_at).await;
    proxy.hold();
    if freeze {
        wall_sleep_until(rise + SignedDuration::from_millis(200)).await;
        fleet.fleet.get(&old).signal("STOP");
    }
    let successor = fleet_leader_other_than(&env, &old).await;
    wall_sleep_until(held_at + SignedDuration::from_millis(7500)).await;
    proxy.heal();
    proxy.wait_delivered(Duration::from_secs(20)).await;
    if freeze {
        fleet.fleet.get(&old).signal("CONT");
    }
    wait_logged(fleet.fleet.get(&old), "lost leadership").await;

    let (target, level) =
        target_and_status_before(&env, rise + SignedDuration::from_secs(10)).await;
    assert_eq!(level, Some(3), "the level after {rise} + 5 s");
    assert_eq!(
        target, level,
        "the Deployment and the status disagree after the heal"
    );
    assert_no_old_write_accepted(&env, &old, held_at);
    assert_ne!(successor, old);
}

#[tokio::test]
async fn a_partitioned_leaders_delayed_writes_change_nothing() {
    partition_across_a_rising_instant(false).await;
}

#[tokio::test]
async fn a_partitioned_and_paused_leaders_delayed_writes_change_nothing() {
    partition_across_a_rising_instant(true).await;
}

/// The sharpest case: the partition begins just before the leader's write (`PATCH
/// …/scale`) — so that write reaches the API server, late, with the version the leader had
/// observed (delivered by its watch of the target, or read) — and the successor finds the level back where the target is,
/// so its own first write changes no replicas. The write must still be rejected (409).
#[tokio::test]
async fn a_scale_write_held_between_its_read_and_its_send_is_rejected_when_it_arrives() {
    let env = TestEnv::new().await;
    let mut fleet = fleet_behind_proxies(&env, &SHORT_HIGH_TIDE).await;
    let rise = next_x5(Duration::from_secs(3));
    let old = fleet.leader.clone();
    let proxy = fleet.fleet.holding(&old).expect("a holding proxy");

    wall_sleep_until(rise - SignedDuration::from_secs(1)).await;
    let armed = Timestamp::now();
    proxy.hold_from("PATCH", "/scale");
    let successor = fleet_leader_other_than(&env, &old).await;
    assert!(proxy.holding(), "the leader sent no /scale write at {rise}");
    // The successor has applied the level in effect (3, since rise + 2 s).
    wait_status(&env, "web", "the successor's catch-up", |s| {
        s.history
            .first()
            .is_some_and(|h| h.schedule_time.0 == rise + SignedDuration::from_secs(2))
    })
    .await;
    wall_sleep_until(rise + SignedDuration::from_millis(7500)).await;
    proxy.heal();
    proxy.wait_delivered(Duration::from_secs(20)).await;
    wait_logged(fleet.fleet.get(&old), "lost leadership").await;

    let (target, level) =
        target_and_status_before(&env, rise + SignedDuration::from_secs(10)).await;
    assert_eq!((target, level), (Some(3), Some(3)), "after the heal");
    let late = assert_no_old_write_accepted(&env, &old, armed);
    assert!(
        late.iter()
            .any(|w| w.resource == "deployments" && w.subresource == "scale" && w.code == 409),
        "the held /scale write reached the API server and was refused: {late:#?}"
    );
    assert_ne!(successor, old);
}

/// Waits for a Lease holder other than `old`.
async fn fleet_leader_other_than(env: &TestEnv, old: &str) -> String {
    wait_holder(env, "successor", |h| !h.is_empty() && h != old).await
}
