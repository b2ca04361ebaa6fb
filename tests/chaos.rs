//! Chaos drill on a real kube-apiserver and etcd: 50 consecutive SIGKILLs of the leader at
//! random moments, each replaced by a fresh replica, while rules fire every 2 s. Every
//! fire instant is applied or superseded exactly once, none twice, only the Lease holder
//! ever writes, and the level converges.

use tidal_harness as common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use kube::runtime::{WatchStreamExt, watcher};
use tidal_scheduler::api::{HistoryEntry, TidalScheduler};

use common::audit::assert_only_the_holder_writes;
use common::cluster::TestEnv;
use common::measure::random_below;
use common::replicas::*;
use common::tide::*;

const KILLS: usize = 50;

/// Short leases so that 50 failovers take minutes, not a quarter of an hour.
const CHAOS_LEASE: [&str; 6] = [
    "--lease-duration",
    "3s",
    "--renew-deadline",
    "2s",
    "--retry-period",
    "500ms",
];

#[tokio::test(flavor = "multi_thread")]
async fn fifty_leader_kills_lose_no_trigger_and_apply_none_twice() {
    let env = TestEnv::new().await;
    let tide = create_web(&env, &ALTERNATING, 100).await;

    // Every history entry ever seen, and whether any status held one twice.
    let seen: Arc<Mutex<BTreeMap<(String, Timestamp), HistoryEntry>>> = Arc::default();
    let recorder = {
        let seen = seen.clone();
        let config = watcher::Config::default().fields("metadata.name=web");
        let mut objects = watcher(env.api::<TidalScheduler>(), config)
            .applied_objects()
            .boxed();
        tokio::spawn(async move {
            while let Some(Ok(object)) = objects.next().await {
                let Some(status) = &object.status else {
                    continue;
                };
                assert_no_duplicate_history(status);
                let mut seen = seen.lock().unwrap();
                for entry in &status.history {
                    let key = (entry.rule.clone(), entry.schedule_time.0);
                    let first = seen.entry(key).or_insert_with(|| entry.clone());
                    assert_eq!(first, entry, "an entry was recorded twice");
                }
            }
        })
    };

    let mut fleet = Fleet::start(&env, "replica", &CHAOS_LEASE, 3);
    let mut leader = fleet.leader_other_than("").await;
    for kill in 0..KILLS {
        let pause = random_below(Duration::from_millis(2500));
        tokio::time::sleep(pause).await;
        eprintln!("kill {kill}: SIGKILL {leader} after {pause:?}");
        fleet.get(&leader).signal("KILL");
        fleet.add();
        leader = fleet.leader_other_than(&leader).await;
    }

    // Converges: an on-time trigger by the last leader, at the level of the rules now.
    let calm = Timestamp::now();
    wait_status(&env, "web", "an on-time trigger at the level now", |s| {
        let level = tide.level_at(Timestamp::now()).map(|l| l.replicas);
        s.desired_replicas == level
            && s.history
                .iter()
                .any(|h| h.schedule_time.0 > calm && !h.catch_up)
    })
    .await;
    assert!(!recorder.is_finished(), "the history recorder failed");
    recorder.abort();

    let entries: Vec<HistoryEntry> = seen.lock().unwrap().values().cloned().collect();
    assert_every_instant_accounted(&tide, &entries);
    // Each failover outlasts the 2 s between instants: most kills leave a catch-up.
    let catch_ups = entries.iter().filter(|h| h.catch_up).count();
    assert!(
        catch_ups >= KILLS / 2,
        "only {catch_ups} catch-ups in {} entries",
        entries.len()
    );

    let mut applied_by: BTreeMap<(String, Timestamp), String> = BTreeMap::new();
    for replica in &fleet.replicas {
        for a in applied(&replica.log()) {
            let key = (a.rule.clone(), a.schedule_time);
            if let Some(other) = applied_by.insert(key, replica.name().to_owned()) {
                panic!("{a:?} applied by {other} and {}", replica.name());
            }
        }
    }
    let checked = assert_only_the_holder_writes(&env, LEASE_NAME);
    assert!(checked.len() >= entries.len());
    let (_, transitions) = lease_state(&env).await;
    assert!(transitions >= KILLS as i32, "{transitions} transitions");
}
