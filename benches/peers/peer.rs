//! The three implementations of "at this instant, do this", each given N objects that
//! fire at the same instant (second 0 of a minute: CronJobs and KEDA's cron scaler take
//! 5-field, minute-granular expressions), and what counts as its effect.

use std::time::Duration;

use futures::{StreamExt, stream};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::Client;
use kube::api::{Api, DynamicObject, ListParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tidal_harness::fixtures::deployment;
use tidal_harness::tide::manifest;
use tidal_scheduler::api::TidalScheduler;

use super::effects::Effects;

/// The replicas of each target before the instant, and from it on.
pub const BEFORE: i32 = 1;
pub const AFTER: i32 = 3;
/// How long the scaled level lasts (the end of KEDA's window, tidal's rule back down).
const WINDOW: SignedDuration = SignedDuration::from_mins(10);
/// Concurrent creations.
const CREATING: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Peer {
    /// kube-controller-manager's CronJob controller: effect = the Job created.
    CronJobController,
    /// KEDA's cron scaler (operator, metrics API server, the HPA it creates): effect =
    /// the Deployment's replicas changed, by that HPA.
    Keda,
    /// tidal-scheduler in `Scale` mode: effect = the Deployment's replicas changed.
    TidalScheduler,
}

impl Peer {
    pub const ALL: [Peer; 3] = [Peer::CronJobController, Peer::Keda, Peer::TidalScheduler];

    pub fn label(self) -> &'static str {
        match self {
            Peer::CronJobController => "CronJob controller",
            Peer::Keda => "KEDA cron scaler",
            Peer::TidalScheduler => "tidal-scheduler",
        }
    }

    pub fn short(self) -> &'static str {
        match self {
            Peer::CronJobController => "cronjob",
            Peer::Keda => "keda",
            Peer::TidalScheduler => "tidal",
        }
    }

    /// How long before the instant its `count` objects are created: enough for the peer
    /// to take them in on this 2-core node (KEDA's operator creates an HPA per object and
    /// kube-controller-manager's HPA controller must sync each once: about 2.5 per
    /// second here, both clients at client-go's default 20 requests/s).
    pub fn lead(self, count: usize) -> SignedDuration {
        let (fixed, each) = match self {
            Peer::CronJobController => (30, 40),
            Peer::Keda => (60, 500),
            Peer::TidalScheduler => (40, 80),
        };
        SignedDuration::from_secs(fixed) + SignedDuration::from_millis(each * count as i64)
    }

    /// The watch of this peer's effects in `namespace` (start it before creating).
    pub fn effects(self, client: Client, namespace: &str) -> Effects {
        match self {
            Peer::CronJobController => Effects::jobs_created(client, namespace),
            Peer::Keda | Peer::TidalScheduler => Effects::replicas_set(client, namespace, AFTER),
        }
    }

    /// Creates `count` objects (`o0`, `o1`, ...) firing at `instant`, each with its own
    /// target where the peer scales one.
    pub async fn create(
        self,
        client: &Client,
        namespace: &str,
        count: usize,
        instant: Timestamp,
    ) -> anyhow::Result<()> {
        let results: Vec<anyhow::Result<()>> = stream::iter(0..count)
            .map(|i| async move {
                let name = format!("o{i}");
                if self != Peer::CronJobController {
                    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
                    deployments
                        .create(&PostParams::default(), &paused_deployment(&name))
                        .await?;
                }
                let manifest = match self {
                    Peer::CronJobController => cron_job(&name, instant),
                    Peer::Keda => scaled_object(&name, instant),
                    Peer::TidalScheduler => tidal_scheduler(&name, instant),
                };
                create_object(client, namespace, manifest).await
            })
            .buffer_unordered(CREATING)
            .collect()
            .await;
        results.into_iter().collect()
    }

    /// Waits until all `count` objects are set for the instant, as far as the API shows
    /// it: KEDA's HPAs computing from the external metric, tidal-scheduler's status
    /// naming the instant next (CronJobs show nothing before they fire). Fails at
    /// `deadline`.
    pub async fn ready(
        self,
        client: &Client,
        namespace: &str,
        count: usize,
        instant: Timestamp,
        deadline: Timestamp,
    ) -> anyhow::Result<()> {
        loop {
            let ready = match self {
                Peer::CronJobController => count,
                Peer::Keda => scaling_hpas(client, namespace).await?,
                Peer::TidalScheduler => tides_set_for(client, namespace, instant).await?,
            };
            if ready == count {
                return Ok(());
            }
            anyhow::ensure!(
                Timestamp::now() < deadline,
                "{}: {ready} of {count} objects ready for {instant} by {deadline}",
                self.short()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}

/// `M H * * *` (UTC) of `at`'s minute.
fn daily(at: Timestamp) -> String {
    let t = at.to_zoned(TimeZone::UTC);
    format!("{} {} * * *", t.minute(), t.hour())
}

/// A Deployment of [`BEFORE`] replicas, paused: the deployment controller creates no
/// ReplicaSet for it, so no pods (a 2-core node cannot run thousands), while its
/// `/scale` behaves as any Deployment's.
fn paused_deployment(name: &str) -> Deployment {
    let mut deployment = deployment(name);
    let spec = deployment.spec.as_mut().expect("a spec");
    spec.replicas = Some(BEFORE);
    spec.paused = Some(true);
    deployment
}

/// A CronJob whose Jobs are created suspended (no pods).
fn cron_job(name: &str, instant: Timestamp) -> Value {
    json!({
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": { "name": name },
        "spec": {
            "schedule": daily(instant),
            "timeZone": "Etc/UTC",
            "jobTemplate": { "spec": {
                "suspend": true,
                "template": { "spec": {
                    "restartPolicy": "Never",
                    "containers": [{ "name": "job", "image": "registry.example/job:1" }],
                }},
            }},
        },
    })
}

/// A ScaledObject with KEDA's cron trigger: [`AFTER`] replicas from the instant for
/// [`WINDOW`], [`BEFORE`] otherwise. Polling interval: KEDA's default (30 s; it paces
/// activation from zero, which this does not need — the HPA acts on the metric).
fn scaled_object(name: &str, instant: Timestamp) -> Value {
    json!({
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": { "name": name },
        "spec": {
            "scaleTargetRef": { "name": name },
            "minReplicaCount": BEFORE,
            "maxReplicaCount": AFTER,
            "triggers": [{
                "type": "cron",
                "metadata": {
                    "timezone": "Etc/UTC",
                    "start": daily(instant),
                    "end": daily(instant + WINDOW),
                    "desiredReplicas": AFTER.to_string(),
                },
            }],
        },
    })
}

/// A TidalScheduler in `Scale` mode: [`AFTER`] at the instant, back to [`BEFORE`] after
/// [`WINDOW`] (so [`BEFORE`] until the instant).
fn tidal_scheduler(name: &str, instant: Timestamp) -> Value {
    let cron = |at: Timestamp| format!("CRON_TZ=UTC 0 {}", daily(at));
    manifest(
        name,
        "apps/v1",
        "Deployment",
        name,
        "Scale",
        &[
            ("up", &cron(instant), AFTER),
            ("down", &cron(instant + WINDOW), BEFORE),
        ],
    )
}

async fn create_object(client: &Client, namespace: &str, manifest: Value) -> anyhow::Result<()> {
    let object: DynamicObject = serde_json::from_value(manifest)?;
    let types = object.types.clone().expect("apiVersion and kind");
    let gvk = GroupVersionKind::try_from(&types)?;
    let api: Api<DynamicObject> =
        Api::namespaced_with(client.clone(), namespace, &ApiResource::from_gvk(&gvk));
    api.create(&PostParams::default(), &object).await?;
    Ok(())
}

/// HPAs whose `ScalingActive` condition is true (the metric pipeline answers).
async fn scaling_hpas(client: &Client, namespace: &str) -> anyhow::Result<usize> {
    let hpas: Api<HorizontalPodAutoscaler> = Api::namespaced(client.clone(), namespace);
    let list = hpas.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|hpa| {
            let conditions = hpa.status.as_ref().and_then(|s| s.conditions.as_ref());
            conditions.is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "ScalingActive" && c.status == "True")
            })
        })
        .count())
}

/// TidalSchedulers at [`BEFORE`] whose status names `instant` as the next trigger.
async fn tides_set_for(
    client: &Client,
    namespace: &str,
    instant: Timestamp,
) -> anyhow::Result<usize> {
    let objects: Api<TidalScheduler> = Api::namespaced(client.clone(), namespace);
    let list = objects.list(&ListParams::default()).await?;
    Ok(list
        .items
        .iter()
        .filter(|object| {
            object.status.as_ref().is_some_and(|status| {
                status.desired_replicas == Some(BEFORE)
                    && status.next_trigger_time.as_ref().map(|t| t.0) == Some(instant)
            })
        })
        .count())
}
