//! High availability on a real kube-apiserver and etcd: three controller replicas share a
//! Lease (4 s / 3 s / 1 s); only the holder writes, a killed leader's missed trigger is
//! caught up once by its successor, a terminated leader releases the Lease to a standby,
//! and a frozen leader writes nothing after it thaws. The suite shares its machine, so
//! what is asserted is who acted and in which order; the times are printed (the tight
//! figures are the failover bench's, `benches/failover.rs`).

use tidal_harness as common;

use std::time::{Duration, Instant};

use jiff::{SignedDuration, Timestamp};

use common::audit::assert_only_the_holder_writes;
use common::cluster::TestEnv;
use common::process::Process;
use common::replicas::*;
use common::tide::*;
use common::wait::*;

const NAMES: [&str; 3] = ["replica-a", "replica-b", "replica-c"];

/// Three replicas on the alternating rules, once the leader has applied a trigger;
/// returns them and the leader.
async fn three_replicas_leading(env: &TestEnv) -> (Vec<Process>, String) {
    create_web(env, &ALTERNATING, 10).await;
    let replicas = start_replicas(env, &NAMES);
    let leader = wait_holder(env, "leader", |h| !h.is_empty()).await;
    wait_triggers_after(env, Timestamp::now(), 1, "a trigger").await;
    (replicas, leader)
}

/// Waits until `count` triggers after `after` are in the status history.
async fn wait_triggers_after(env: &TestEnv, after: Timestamp, count: usize, what: &str) {
    wait_status(env, "web", what, |s| {
        s.history
            .iter()
            .filter(|h| h.schedule_time.0 > after)
            .count()
            >= count
    })
    .await;
}

/// Checks the audit log (only the Lease holder wrote, and it wrote statuses) and the
/// status (no trigger recorded twice).
async fn assert_single_writer(env: &TestEnv) {
    let object = env
        .api::<tidal_scheduler::api::TidalScheduler>()
        .get("web")
        .await
        .expect("get");
    assert_no_duplicate_history(status(&object));
    let checked = assert_only_the_holder_writes(env, LEASE_NAME);
    assert!(
        checked
            .iter()
            .any(|w| w.resource == "tidalschedulers" && w.subresource == "status"),
        "no status write attributed to a replica: {checked:#?}"
    );
}

/// Every trigger in the replicas' logs, by whom, once `enough` holds of them (a replica
/// logs a trigger just after its status write is acknowledged, so the status can be seen
/// first); checks none was applied twice.
async fn logged_by_anyone(
    replicas: &[Process],
    what: &str,
    enough: impl Fn(&[(String, Applied)]) -> bool,
) -> Vec<(String, Applied)> {
    eventually(&format!("{what} logged"), || async {
        let applied = applied_by_anyone(replicas);
        if enough(&applied) {
            Ok(applied)
        } else {
            Err(format!("{applied:#?}"))
        }
    })
    .await
}

/// Every trigger in the replicas' logs, by whom, and checks none was applied twice.
fn applied_by_anyone(replicas: &[Process]) -> Vec<(String, Applied)> {
    let all: Vec<(String, Applied)> = replicas
        .iter()
        .flat_map(|p| {
            applied(&p.log())
                .into_iter()
                .map(|a| (p.name().to_owned(), a))
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    for (who, a) in &all {
        assert!(
            seen.insert((a.rule.clone(), a.schedule_time)),
            "{} at {} applied twice (again by {who}): {all:#?}",
            a.rule,
            a.schedule_time
        );
    }
    all
}

#[tokio::test]
async fn of_three_replicas_only_the_lease_holder_writes() {
    let env = TestEnv::new().await;
    let (replicas, leader) = three_replicas_leading(&env).await;
    let started = Timestamp::now();
    wait_triggers_after(&env, started, 4, "four triggers").await;

    let applied = logged_by_anyone(&replicas, "four triggers", |a| a.len() >= 4).await;
    for (who, a) in &applied {
        assert_eq!(who, &leader, "{a:?} applied by a standby");
    }
    let (holder, transitions) = lease_state(&env).await;
    assert_eq!((holder.as_str(), transitions), (leader.as_str(), 0));
    for event in events_about(&env, "web").await {
        assert_eq!(
            event.reporting_instance.as_deref(),
            Some(leader.as_str()),
            "{event:?}"
        );
    }
    assert_single_writer(&env).await;
    for replica in &replicas {
        assert_eq!(
            http_get(replica, "/readyz").0,
            200,
            "standbys are ready too"
        );
        let (code, metrics) = http_get(replica, "/metrics");
        assert_eq!(code, 200);
        let leading = if replica.name() == leader { 1 } else { 0 };
        let line = format!("tidal_scheduler_leader {leading}\n");
        assert!(metrics.contains(&line), "{}: {metrics}", replica.name());
    }
}

#[tokio::test]
async fn a_leader_killed_just_before_an_instant_is_caught_up_once_by_its_successor() {
    let env = TestEnv::new().await;
    let base_cron = daily_far_from_now();
    let base = ("base", base_cron.as_str(), 1);
    create_web(&env, &[base], 10).await;
    let mut replicas = start_replicas(&env, &NAMES);
    let leader = wait_holder(&env, "leader", |h| !h.is_empty()).await;
    // The instant is chosen once the replicas are up, however long that took here, and
    // again if the edit's reconcile came too close to it.
    let instant = loop {
        let instant = second_after(Duration::from_secs(4));
        let edge = once_at(instant);
        set_rules(&env, "web", &[base, ("edge", &edge, 7)]).await;
        if Timestamp::now() < instant - SignedDuration::from_millis(700) {
            break instant;
        }
    };

    sleep_past(instant - SignedDuration::from_millis(350)).await;
    replica(&mut replicas, &leader).signal("KILL");
    let caught_up = wait_status(&env, "web", "the missed trigger", |s| {
        entry(s, "edge", instant).is_some()
    })
    .await;

    let applied_entry = entry(status(&caught_up), "edge", instant).unwrap();
    assert!(applied_entry.catch_up, "{applied_entry:?}");
    let lateness = applied_entry.execution_time.0.duration_since(instant);
    eprintln!(
        "caught up {lateness:#} after the instant (idle: within leaseDuration + retryPeriod + 1 s = {:?})",
        LEASE + RETRY + Duration::from_secs(1)
    );
    assert_no_duplicate_history(status(&caught_up));
    let applied = logged_by_anyone(&replicas, "the missed trigger", |applied| {
        applied
            .iter()
            .any(|(_, a)| a.rule == "edge" && a.schedule_time == instant)
    })
    .await;
    let by: Vec<&String> = applied
        .iter()
        .filter(|(_, a)| a.rule == "edge" && a.schedule_time == instant)
        .map(|(who, _)| who)
        .collect();
    assert_eq!(by.len(), 1, "{applied:#?}");
    assert_ne!(by[0], &leader, "applied by the killed leader");
    let (holder, transitions) = lease_state(&env).await;
    assert_eq!(&holder, by[0]);
    assert_eq!(transitions, 1);
    assert_single_writer(&env).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_terminated_leader_releases_the_lease_to_a_standby() {
    let env = TestEnv::new().await;
    let (mut replicas, leader) = three_replicas_leading(&env).await;

    let holders = HolderLog::start(&env);
    holders.wait_for(&leader).await;
    let terminated = Instant::now();
    replica(&mut replicas, &leader).signal("TERM");
    let successor = wait_holder(&env, "successor", |h| !h.is_empty() && h != leader).await;
    eprintln!(
        "handed over in {:?} (idle: within retryPeriod + 1 s = {:?})",
        terminated.elapsed(),
        RETRY + Duration::from_secs(1)
    );
    // Released before anyone else held it: the successor did not wait out a lease
    // duration, whatever the machine's load made of the times.
    assert!(
        holders.released_by(&leader),
        "{leader} did not release the Lease before the next holder: {:?}",
        holders.changes()
    );
    let took_over = Timestamp::now();
    let old = replica(&mut replicas, &leader);
    let exit = tokio::task::block_in_place(|| old.wait(Duration::from_secs(25)));
    assert!(exit.success(), "exit {exit:?}:\n{}", old.log());
    assert!(old.log().contains("released the lease"), "{}", old.log());

    // The successor acts: the next instants are applied by it, on time.
    wait_triggers_after(&env, took_over, 2, "two triggers after the handover").await;
    let after_handover = |a: &Applied| a.schedule_time > took_over;
    let applied = logged_by_anyone(&replicas, "two triggers after the handover", |applied| {
        applied.iter().filter(|(_, a)| after_handover(a)).count() >= 2
    })
    .await;
    let after: Vec<&(String, Applied)> =
        applied.iter().filter(|(_, a)| after_handover(a)).collect();
    for (who, a) in after {
        assert_eq!(who, &successor, "{a:?}");
        assert!(!a.catch_up, "{a:?}");
    }
    assert_single_writer(&env).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_frozen_leader_writes_nothing_after_it_thaws() {
    let env = TestEnv::new().await;
    let (mut replicas, leader) = three_replicas_leading(&env).await;

    replica(&mut replicas, &leader).signal("STOP");
    let frozen_at = Timestamp::now();
    let successor = wait_holder(&env, "successor", |h| !h.is_empty() && h != leader).await;
    wait_triggers_after(&env, frozen_at, 2, "triggers applied by the successor").await;

    replica(&mut replicas, &leader).signal("CONT");
    let thawed = Timestamp::now();
    wait_logged(replica(&mut replicas, &leader), "lost leadership").await;
    wait_triggers_after(&env, thawed, 2, "two triggers after the thaw").await;

    // Not a count of the frozen leader's log lines: a status write it sent just before
    // the freeze is acknowledged meanwhile and logged only after the thaw. What it must
    // not do is apply an instant that came after the freeze (it slept through them), nor
    // write once its successor has (the audit log, below).
    let applied = applied_by_anyone(&replicas);
    for (who, a) in applied.iter().filter(|(_, a)| a.schedule_time > frozen_at) {
        assert_eq!(who, &successor, "{a:?}");
    }
    let (holder, _) = lease_state(&env).await;
    assert_eq!(holder, successor);
    assert_single_writer(&env).await;
}

/// The requests of replica `name` in the audit log so far.
fn requests_of(env: &TestEnv, name: &str) -> Vec<common::audit::Request> {
    let dir = env
        .control_plane()
        .dir()
        .expect("the harness's own control plane");
    let log = common::audit::read_log(dir);
    let requests = common::audit::requests_in(&log).into_iter();
    requests.filter(|r| r.replica() == Some(name)).collect()
}

/// A standby starts the watch of its objects' target kind (and looks the kind up once,
/// however many reconciles ask at once) before it leads, so that its takeover — which
/// checks every target — reads none of them: at 10,000 objects a cold takeover sent
/// hundreds of GETs and a LIST of every Deployment while it caught up.
#[tokio::test]
async fn a_standby_watches_the_targets_before_it_leads_and_its_takeover_reads_none() {
    let env = TestEnv::new().await;
    let names: Vec<String> = (0..12).map(|i| format!("warm-{i:02}")).collect();
    for name in &names {
        env.api::<k8s_openapi::api::apps::v1::Deployment>()
            .create(&Default::default(), &common::fixtures::deployment(name))
            .await
            .expect("create Deployment");
        let object = manifest(name, "apps/v1", "Deployment", name, "Status", &ALTERNATING);
        create(&env, object).await;
    }
    let identities = ["warming-a", "warming-b"];
    let mut replicas = start_replicas(&env, &identities);
    let leader = wait_holder(&env, "leader", |h| !h.is_empty()).await;
    let standby = identities.into_iter().find(|i| *i != leader).unwrap();
    // The watch request follows its initial list, once the watcher holds it.
    eventually("the standby's watch of the Deployments", || async {
        let requests = requests_of(&env, standby);
        let watching = requests
            .iter()
            .any(|r| r.verb == "watch" && r.resource == "deployments");
        if watching {
            Ok(())
        } else {
            Err(format!("{requests:#?}"))
        }
    })
    .await;

    replica(&mut replicas, &leader).signal("KILL");
    wait_holder(&env, "the standby leading", |h| h == standby).await;
    eventually(
        "a status write of every object by the new leader",
        || async {
            let requests = requests_of(&env, standby);
            let written: std::collections::HashSet<&str> = requests
                .iter()
                .filter(|r| r.resource_path() == "tidalschedulers/status" && r.code == 200)
                .map(|r| r.name.as_str())
                .collect();
            let missing: Vec<&String> = names
                .iter()
                .filter(|n| !written.contains(n.as_str()))
                .collect();
            if missing.is_empty() {
                Ok(())
            } else {
                Err(format!("not yet written: {missing:?}"))
            }
        },
    )
    .await;

    let requests = requests_of(&env, standby);
    let reads: Vec<_> = requests
        .iter()
        .filter(|r| r.resource == "deployments" && !r.name.is_empty())
        .collect();
    assert!(reads.is_empty(), "targets read one by one: {reads:#?}");
    // One lookup answered (a failed one, under a very busy API server, may precede it).
    let discovery: Vec<_> = requests
        .iter()
        .filter(|r| r.uri == "/apis/apps/v1" && r.code == 200)
        .collect();
    assert_eq!(discovery.len(), 1, "apps/v1 looked up once: {discovery:#?}");
}
