//! Another client of the API server during the bursts (`TIDAL_BENCH_NEIGHBOUR=with` or
//! `without`): the controller runs as its service account (bound to `cluster-admin`, so
//! that it is not the admin, whom API Priority and Fairness exempts), with
//! deploy/flowcontrol.yaml installed or not, while a neighbour — another service account —
//! reads a ConfigMap every 20 ms. Its latencies are grouped by what was running when each
//! read was sent: a burst of the controller, one of the baseline (the admin: exempt from
//! APF either way), or neither.

use std::path::PathBuf;
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use tidal_harness::cluster::TestEnv;
use tidal_harness::fleet::kubeconfig_for;
use tidal_harness::flowcontrol::{self, CONTROLLER_USER};
use tidal_harness::measure::{grouped, summary};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The ConfigMap the neighbour reads.
const READ: &str = "neighbour";

/// Pause between the neighbour's reads.
const PACE: Duration = Duration::from_millis(20);

/// Makes the controller's identity a service account with every right, installs or
/// removes the FlowSchemas, and returns the controller's kubeconfig (impersonating it).
pub async fn controller_kubeconfig(env: &TestEnv, flow_schemas: bool) -> anyhow::Result<PathBuf> {
    bind_cluster_admin(env, "tidal-bench-controller", CONTROLLER_USER).await?;
    let outcome = if flow_schemas {
        flowcontrol::install(env).await
    } else {
        flowcontrol::uninstall(env).await
    };
    outcome.map_err(anyhow::Error::msg)?;
    if flow_schemas {
        let controller = env.control_plane().client_as(CONTROLLER_USER).await;
        let path = format!("/api/v1/namespaces/{}/configmaps", env.namespace);
        flowcontrol::wait_classified(env, &controller, &path, "tidal-scheduler").await;
    }
    kubeconfig_for(env, "controller", None, Some(CONTROLLER_USER)).map_err(anyhow::Error::msg)
}

async fn bind_cluster_admin(env: &TestEnv, name: &str, user: &str) -> anyhow::Result<()> {
    let bindings: Api<k8s_openapi::api::rbac::v1::ClusterRoleBinding> =
        Api::all(env.client.clone());
    let binding = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": { "name": name },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    });
    bindings
        .patch(
            name,
            &PatchParams::apply("tidal-bench").force(),
            &Patch::Apply(binding),
        )
        .await?;
    Ok(())
}

/// The neighbour reading its ConfigMap until stopped.
pub struct Neighbour {
    stop: watch::Sender<bool>,
    reads: JoinHandle<Vec<(Timestamp, f64)>>,
}

impl Neighbour {
    /// Starts reading, as a service account of `env`'s namespace.
    pub async fn start(env: &TestEnv) -> anyhow::Result<Neighbour> {
        let user = format!("system:serviceaccount:{}:neighbour", env.namespace);
        bind_cluster_admin(env, &format!("tidal-bench-{}", env.namespace), &user).await?;
        let map = json!({ "apiVersion": "v1", "kind": "ConfigMap", "metadata": { "name": READ } });
        env.api::<ConfigMap>()
            .create(&PostParams::default(), &serde_json::from_value(map)?)
            .await?;
        let api: Api<ConfigMap> =
            Api::namespaced(env.control_plane().client_as(&user).await, &env.namespace);
        let (stop, mut stopped) = watch::channel(false);
        let reads = tokio::spawn(async move {
            let mut reads = Vec::new();
            while !*stopped.borrow() {
                let sent = Timestamp::now();
                let started = std::time::Instant::now();
                if api.get(READ).await.is_ok() {
                    reads.push((sent, started.elapsed().as_secs_f64() * 1000.0));
                }
                let _ = tokio::time::timeout(PACE, stopped.changed()).await;
            }
            reads
        });
        Ok(Neighbour { stop, reads })
    }

    /// Stops; returns when each read was sent and its latency (ms).
    pub async fn finish(self) -> anyhow::Result<Vec<(Timestamp, f64)>> {
        let _ = self.stop.send(true);
        Ok(self.reads.await?)
    }
}

/// A burst: from its instant to its slowest trigger.
pub type Burst = (Timestamp, Timestamp);

/// The bursts starting at `instants` that lasted up to the slowest of `latencies` (ms).
pub fn bursts(instants: &[Timestamp], latencies: &[f64]) -> Vec<Burst> {
    let longest = SignedDuration::from_secs_f64(summary(latencies).2 / 1000.0);
    instants.iter().map(|&at| (at, at + longest)).collect()
}

/// Prints the neighbour's latencies during the controller's bursts, the baseline's and
/// neither, as a Markdown row per group.
pub fn report(
    flow_schemas: bool,
    reads: &[(Timestamp, f64)],
    controller: &[Burst],
    baseline: &[Burst],
) {
    let within = |bursts: &[Burst], at: Timestamp| bursts.iter().any(|(a, b)| at >= *a && at <= *b);
    let group = |wanted: &dyn Fn(Timestamp) -> bool| -> Vec<f64> {
        reads
            .iter()
            .filter(|(at, _)| wanted(*at))
            .map(|(_, ms)| *ms)
            .collect()
    };
    let groups = [
        ("controller bursts", group(&|at| within(controller, at))),
        (
            "baseline bursts (admin, exempt)",
            group(&|at| within(baseline, at)),
        ),
        (
            "quiet",
            group(&|at| !within(controller, at) && !within(baseline, at)),
        ),
    ];
    println!(
        "\nneighbour GET latency (ms), FlowSchema {}\n\n| during | reads | p50 / p99 / max |\n|---|---:|---|",
        if flow_schemas {
            "installed"
        } else {
            "not installed"
        }
    );
    for (during, samples) in groups {
        if samples.is_empty() {
            println!("| {during} | 0 | – |");
            continue;
        }
        let (p50, p99, max) = summary(&samples);
        println!(
            "| {during} | {} | {p50:.1} / {p99:.1} / {max:.1} |",
            grouped(samples.len() as f64)
        );
    }
}
