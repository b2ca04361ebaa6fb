//! Failover and graceful handover times of three controller replicas on the local control
//! plane (etcd + kube-apiserver from the test harness), with rules firing every 2 s:
//!
//! - failover: SIGKILL the leader at a random moment → the trigger missed meanwhile
//!   applied by the new leader (the catch-up entry's `executionTime`);
//! - handover: SIGTERM the leader → a standby holds the Lease (from then on it acts: the
//!   gate opens and every object is reconciled).
//!
//! Each killed or terminated replica is replaced by a fresh one, as a Deployment would.
//!
//! Run: `cargo bench --bench failover`. `TIDAL_BENCH_LEASE=4s,3s,1s` sets the Lease
//! duration, renew deadline and retry period (default client-go's 15s,10s,2s);
//! `TIDAL_BENCH_KILLS=N` the number of kills and of terminations (default 20).

use tidal_harness as common;

use std::time::{Duration, Instant};

use jiff::Timestamp;

use common::bench_options::{list, parsed_or};
use common::cluster::{TestEnv, control_plane};
use common::fleet::{Fleet, Options};
use common::measure::{grouped, random_below, run_heading, summary};
use common::replicas::{ALTERNATING, create_web, lease_state};
use common::tide::wait_status;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let durations = list("TIDAL_BENCH_LEASE", "15s,10s,2s");
    let kills: usize = parsed_or("TIDAL_BENCH_KILLS", 20).map_err(anyhow::Error::msg)?;
    anyhow::ensure!(durations.len() == 3, "TIDAL_BENCH_LEASE: three durations");
    let timing = [
        "--lease-duration",
        durations[0].as_str(),
        "--renew-deadline",
        durations[1].as_str(),
        "--retry-period",
        durations[2].as_str(),
    ];
    println!("control plane: {}", control_plane().kubeconfig().display());

    let env = TestEnv::new().await;
    create_web(&env, &ALTERNATING, 10).await;
    let mut fleet = Fleet::start(&env, Options::new("replica", &timing), 3)
        .await
        .map_err(anyhow::Error::msg)?;
    let mut leader = fleet.leader_other_than(&env, "").await;
    let started = Timestamp::now();
    wait_status(&env, "web", "a first trigger", |s| {
        s.history.iter().any(|h| h.schedule_time.0 > started)
    })
    .await;

    let mut failovers = Vec::new();
    for kill in 0..kills {
        tokio::time::sleep(random_below(Duration::from_secs(2))).await;
        let killed_at = Timestamp::now();
        fleet.get(&leader).signal("KILL");
        fleet.add(&env).await.map_err(anyhow::Error::msg)?;
        let applied = wait_status(&env, "web", "the missed trigger", |s| {
            s.history.iter().any(|h| h.schedule_time.0 > killed_at)
        })
        .await;
        let caught_up = applied
            .status
            .as_ref()
            .and_then(|s| s.history.iter().find(|h| h.schedule_time.0 > killed_at))
            .expect("the missed trigger");
        let failover = caught_up.execution_time.0.duration_since(killed_at);
        eprintln!(
            "kill {kill}: {leader} → missed trigger applied {:.0} ms later (catchUp {})",
            failover.as_secs_f64() * 1000.0,
            caught_up.catch_up
        );
        failovers.push(failover.as_secs_f64() * 1000.0);
        leader = fleet.leader_other_than(&env, &leader).await;
    }

    let mut handovers = Vec::new();
    for term in 0..kills {
        tokio::time::sleep(random_below(Duration::from_secs(2))).await;
        let terminated = Instant::now();
        fleet.get(&leader).signal("TERM");
        let successor = loop {
            let (holder, _) = lease_state(&env).await;
            if !holder.is_empty() && holder != leader {
                break holder;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        };
        let handover = terminated.elapsed();
        eprintln!("term {term}: {leader} → {successor} holds the Lease after {handover:?}");
        handovers.push(handover.as_secs_f64() * 1000.0);
        fleet.add(&env).await.map_err(anyhow::Error::msg)?;
        leader = successor;
    }

    println!(
        "\nthree replicas, Lease {} (duration, renew deadline, retry period)",
        durations.join(",")
    );
    // A Markdown table, as docs/performance.md keeps it (ms).
    println!(
        "{}\n\n| Lease (duration / renew deadline / retry) | | samples | p50 | p99 | max |\n|---|---|---:|---:|---:|---:|",
        run_heading()
    );
    let lease = durations.join(" / ");
    for (first, what, samples) in [
        (
            lease.as_str(),
            "failover (SIGKILL → missed trigger applied)",
            &failovers,
        ),
        (
            "",
            "handover (SIGTERM → successor holds the Lease)",
            &handovers,
        ),
    ] {
        let (p50, p99, max) = summary(samples);
        println!(
            "| {first} | {what} | {} | {} | {} | {} |",
            samples.len(),
            grouped(p50),
            grouped(p99),
            grouped(max)
        );
    }
    Ok(())
}
