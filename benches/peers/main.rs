//! The peers, measured beside tidal-scheduler: scheduled instant → effect, as one watcher
//! sees it (an admin client's watch, microsecond timestamps of this process), on the
//! real node (`up.sh --node`), in one run, for N objects firing at the same instant:
//!
//! - the CronJob controller of kube-controller-manager (effect: the Job created; its
//!   Jobs are suspended, so no pods);
//! - KEDA's cron scaler (KEDA's own kustomize installation, built from the Go module
//!   proxy: operator, metrics API server; effect: the Deployment's replicas changed, by
//!   the HPA KEDA creates);
//! - tidal-scheduler in `Scale` mode (the `kubectl apply -k deploy/` installation;
//!   effect: the Deployment's replicas changed).
//!
//! The peers take turns (one at a time, each in a namespace of its own, deleted before
//! the next). CronJobs and KEDA's cron expressions are minute-granular, so every instant
//! is second 0 of a minute; the Deployments are paused (no pods; see `peer.rs`).
//! kube-controller-manager runs with Kubernetes' default HPA sync period, 15 s.
//!
//! Run (root; one node per machine, so not beside the node tests):
//! `cargo bench --bench peers`. `TIDAL_BENCH_OBJECTS=1,100` picks the sizes (default
//! 1,100,1000); `TIDAL_BENCH_PEERS=tidal,keda` the peers (default all: cronjob, keda,
//! tidal); `TIDAL_BENCH_HPA_SYNC=2s` kube-controller-manager's HPA sync period.

mod effects;
mod peer;

use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

use tidal_harness::bench_options::list;
use tidal_harness::keda;
use tidal_harness::measure::{grouped, run_heading, summary};
use tidal_harness::node::Node;

use peer::Peer;

/// How long after the instant effects are waited for.
const PATIENCE: SignedDuration = SignedDuration::from_secs(180);

/// One peer's figures for one size.
struct Measured {
    peer: Peer,
    objects: usize,
    /// Instant → effect seen, ms, of each effect seen in time.
    lateness_ms: Vec<f64>,
    /// Effects seen before the instant.
    early: usize,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let sizes: Vec<usize> = list("TIDAL_BENCH_OBJECTS", "1,100,1000")
        .iter()
        .map(|n| n.parse())
        .collect::<Result<_, _>>()?;
    let peers: Vec<Peer> = list("TIDAL_BENCH_PEERS", "cronjob,keda,tidal")
        .iter()
        .map(|name| {
            Peer::ALL
                .into_iter()
                .find(|peer| peer.short() == name)
                .ok_or_else(|| anyhow::anyhow!("TIDAL_BENCH_PEERS: no peer {name:?}"))
        })
        .collect::<Result<_, _>>()?;
    let hpa_sync = std::env::var("TIDAL_BENCH_HPA_SYNC").unwrap_or_else(|_| "15s".to_owned());

    let dir = tidal_harness::target_tmpdir().join(format!("node-peers-{}", std::process::id()));
    let node = Node::start_with(&dir, &[("TIDAL_HPA_SYNC_PERIOD", &hpa_sync)])
        .map_err(|e| anyhow::anyhow!("starting the node: {e}"))?;
    println!("node: {}", node.dir().display());
    if peers.contains(&Peer::TidalScheduler) {
        node.install_kustomized()
            .map_err(|e| anyhow::anyhow!("installing tidal-scheduler: {e}"))?;
        println!(
            "tidal-scheduler {}: kubectl apply -k deploy/",
            tidal_scheduler::VERSION
        );
    }
    if peers.contains(&Peer::Keda) {
        let version = keda::install(&node).map_err(|e| anyhow::anyhow!("installing KEDA: {e}"))?;
        println!("KEDA {version}: its config/minimal kustomization");
    }
    let kube_version = node.kubectl(&["version", "-o", "json"]).unwrap_or_default();
    let kube_version: serde_json::Value = serde_json::from_str(&kube_version).unwrap_or_default();
    println!(
        "Kubernetes {}, HPA sync period {hpa_sync}",
        kube_version["serverVersion"]["gitVersion"]
            .as_str()
            .unwrap_or("?")
    );

    let client = node.control_plane().client().await;
    println!(
        "\nscheduled instant -> effect seen by the watcher (ms); objects firing at the same instant"
    );
    // A Markdown table, as docs/performance.md keeps it.
    println!(
        "{}\n\n| peer | objects | effects | min | p50 | p99 | max |\n|---|---:|---:|---:|---:|---:|---:|",
        run_heading()
    );
    let mut failures = Vec::new();
    for &objects in &sizes {
        for &peer in &peers {
            let measured = measure(&client, peer, objects).await?;
            print_row(&measured);
            if measured.lateness_ms.len() != objects || measured.early > 0 {
                failures.push(format!(
                    "{}: {} of {objects} effects in time, {} early",
                    peer.short(),
                    measured.lateness_ms.len(),
                    measured.early
                ));
            }
        }
    }
    anyhow::ensure!(failures.is_empty(), "missing effects: {failures:?}");
    Ok(())
}

/// One peer, `objects` objects, one instant: the watcher's figures.
async fn measure(client: &Client, peer: Peer, objects: usize) -> anyhow::Result<Measured> {
    let namespace = format!(
        "peers-{}-{objects}-{}",
        peer.short(),
        Timestamp::now().as_second()
    );
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": namespace } }))?,
        )
        .await?;
    let effects = peer.effects(client.clone(), &namespace);
    let instant = minute_after(Timestamp::now() + peer.lead(objects));
    eprintln!("{}: {objects} objects firing at {instant}", peer.short());
    peer.create(client, &namespace, objects, instant).await?;
    peer.ready(
        client,
        &namespace,
        objects,
        instant,
        instant - SignedDuration::from_secs(5),
    )
    .await?;
    let seen = effects.wait(objects, instant + PATIENCE).await;
    drop(effects);
    let (early, lateness_ms) = seen.values().fold((0, Vec::new()), |(early, mut late), t| {
        if *t < instant {
            (early + 1, late)
        } else {
            late.push(t.duration_since(instant).as_secs_f64() * 1000.0);
            (early, late)
        }
    });
    delete_namespace(client, &namespace).await;
    Ok(Measured {
        peer,
        objects,
        lateness_ms,
        early,
    })
}

/// Deletes `namespace` and waits (at most 5 minutes) until it is gone, so that its
/// garbage collection does not weigh on the next measurement.
async fn delete_namespace(client: &Client, namespace: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces.delete(namespace, &DeleteParams::default()).await;
    let deadline = Timestamp::now() + SignedDuration::from_mins(5);
    while Timestamp::now() < deadline {
        match namespaces.get_opt(namespace).await {
            Ok(None) => return,
            Ok(Some(_)) | Err(_) => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
    eprintln!("namespace {namespace} still terminating after 5 minutes; going on");
}

/// The first whole minute after `at`.
fn minute_after(at: Timestamp) -> Timestamp {
    let minute = at.as_second().div_euclid(60) + 1;
    Timestamp::from_second(minute * 60).expect("in range")
}

fn print_row(measured: &Measured) {
    let samples = &measured.lateness_ms;
    let (min, (p50, p99, max)) = if samples.is_empty() {
        (f64::NAN, (f64::NAN, f64::NAN, f64::NAN))
    } else {
        (
            samples.iter().copied().fold(f64::INFINITY, f64::min),
            summary(samples),
        )
    };
    // tidal-scheduler's row in bold; under 10 ms one decimal, else whole milliseconds.
    let bold = if measured.peer == Peer::TidalScheduler {
        "**"
    } else {
        ""
    };
    let ms = |value: f64| match value {
        v if v.is_nan() => "-".to_owned(),
        v if v < 10.0 => format!("{bold}{v:.1}{bold}"),
        v => format!("{bold}{}{bold}", grouped(v)),
    };
    let early = match measured.early {
        0 => String::new(),
        n => format!(" ({n} before the instant)"),
    };
    println!(
        "| {bold}{}{bold}{} | {} | {} | {} | {} | {} | {} |",
        measured.peer.label(),
        early,
        grouped(measured.objects as f64),
        grouped(samples.len() as f64),
        ms(min),
        ms(p50),
        ms(p99),
        ms(max)
    );
}
