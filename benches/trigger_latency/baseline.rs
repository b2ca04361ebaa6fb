//! The baseline: the same status writes (and in `Scale` mode target writes) as the
//! controller's, sent by a bare client at each round's instant with the same concurrency
//! — the physical limit of this machine.

use futures::{StreamExt, stream};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;
use tidal_harness::api_requests::Requests;
use tidal_harness::cluster::TestEnv;
use tidal_harness::measure::cpu_seconds;
use tidal_harness::tide::sleep_past;
use tidal_scheduler::api::{NoCalendars, TidalScheduler, TidalSchedulerStatus};
use tidal_scheduler::controller::plan::{self, Outcome};
use tidal_scheduler::controller::status_patch;

use crate::CONCURRENCY;
use crate::options::Options;
use crate::workload::{create_round_objects, target_of};

/// Plain status patches by a bare client at each round's instant.
pub struct Baseline {
    options: Options,
    env: TestEnv,
    api: Api<TidalScheduler>,
    deployments: Api<Deployment>,
    objects: Vec<TidalScheduler>,
    statuses: Vec<TidalSchedulerStatus>,
    instants: Vec<Timestamp>,
    _watching: Option<tokio::task::JoinHandle<()>>,
}

impl Baseline {
    /// Creates the objects and writes their first status, as the controller does on
    /// creation.
    pub async fn prepare(
        options: Options,
        objects: usize,
        instants: Vec<Timestamp>,
    ) -> anyhow::Result<Baseline> {
        let env = TestEnv::new().await;
        let api = env.api::<TidalScheduler>();
        let watching = options.baseline_watch.then(|| {
            let api = api.clone();
            tokio::spawn(async move {
                let mut events = kube::runtime::watcher(api, Default::default()).boxed();
                while events.next().await.is_some() {}
            })
        });
        create_round_objects(&options, &env, objects, &instants).await?;
        let stored = api.list(&ListParams::default()).await?.items;
        // The status each object would have, written once untimed (the controller's
        // create-time catch-up), then evolved round by round: the same bodies the
        // controller writes.
        let mut statuses: Vec<TidalSchedulerStatus> = Vec::new();
        for object in &stored {
            let status = next_status(
                object,
                &TidalSchedulerStatus::default(),
                Timestamp::now(),
                None,
            );
            patch_status(&api, object, None, &status).await?;
            statuses.push(status);
        }
        let deployments = env.api();
        Ok(Baseline {
            options,
            env,
            api,
            deployments,
            objects: stored,
            statuses,
            instants,
            _watching: watching,
        })
    }

    /// Sends each round's patches at its instant; returns each one's latency.
    pub async fn run(mut self) -> anyhow::Result<Vec<f64>> {
        let mut samples = Vec::new();
        let cpu_before = cpu_seconds(std::process::id()).map_err(anyhow::Error::msg)?;
        let counted_from = Timestamp::now();
        for &at in &self.instants {
            let bodies: Vec<(&TidalScheduler, &TidalSchedulerStatus, TidalSchedulerStatus)> = self
                .objects
                .iter()
                .zip(&self.statuses)
                .map(|(object, old)| (object, old, next_status(object, old, at, Some(at))))
                .collect();
            sleep_past(at - SignedDuration::from_millis(50)).await;
            let (api, deployments, options) = (&self.api, &self.deployments, &self.options);
            let acks: Vec<anyhow::Result<f64>> = stream::iter(&bodies)
                .map(|(object, old, status)| async move {
                    if options.scale() {
                        let replicas = status.desired_replicas.unwrap_or_default();
                        let target = target_of(options, &object.name_any());
                        write_scale(options, deployments, &target, replicas).await?;
                    }
                    patch_status(api, object, Some(old), status).await?;
                    Ok(Timestamp::now().duration_since(at).as_secs_f64() * 1000.0)
                })
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await;
            for ack in acks {
                samples.push(ack?);
            }
            self.statuses = bodies.into_iter().map(|(_, _, status)| status).collect();
        }
        let cpu = cpu_seconds(std::process::id()).map_err(anyhow::Error::msg)? - cpu_before;
        eprintln!(
            "baseline client CPU during its {}-object rounds: {cpu:.2} s ({:.2} ms per patch)",
            self.objects.len(),
            cpu * 1000.0 / samples.len() as f64
        );
        if let Some(dir) = self.env.control_plane().dir() {
            let namespace = self.env.namespace.as_str();
            let sent = Requests::audited(dir, counted_from, Timestamp::now(), |request| {
                request.namespace == namespace
            });
            eprintln!(
                "baseline API requests per object and round (audit log): {}",
                sent.per_trigger_since(&Requests::default(), samples.len())
            );
        }
        Ok(samples)
    }
}

/// The baseline's target write: a plain `/scale` merge patch, or (fenced) a read then a
/// server-side apply conditional on it.
async fn write_scale(
    options: &Options,
    deployments: &Api<Deployment>,
    name: &str,
    replicas: i32,
) -> anyhow::Result<()> {
    if !options.baseline_fenced {
        let patch = Patch::Merge(json!({ "spec": { "replicas": replicas } }));
        deployments
            .patch_scale(name, &PatchParams::default(), &patch)
            .await?;
        return Ok(());
    }
    let read = deployments.get_scale(name).await?;
    let patch = Patch::Apply(json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": { "name": name, "resourceVersion": read.metadata.resource_version },
        "spec": { "replicas": replicas },
    }));
    deployments
        .patch_scale(name, &PatchParams::apply("tidal-bench").force(), &patch)
        .await?;
    Ok(())
}

/// The controller's status patch from `old` (`None`: no status yet) to `status`, without
/// its resourceVersion precondition: the baseline writes blind.
async fn patch_status(
    api: &Api<TidalScheduler>,
    object: &TidalScheduler,
    old: Option<&TidalSchedulerStatus>,
    status: &TidalSchedulerStatus,
) -> anyhow::Result<()> {
    let patch = status_patch(old, status, object.spec.history_entries(), None)?;
    api.patch_status(
        &object.name_any(),
        &PatchParams::default(),
        &Patch::Json::<()>(patch),
    )
    .await?;
    Ok(())
}

/// The status the controller would write for `object` at `at`, after `old`: the same
/// planning the reconcile does (`plan::plan_object`), then the status after it.
fn next_status(
    object: &TidalScheduler,
    old: &TidalSchedulerStatus,
    at: Timestamp,
    armed: Option<Timestamp>,
) -> TidalSchedulerStatus {
    let (_, plan) = plan::plan_object(object, &NoCalendars, old, armed, at).expect("valid object");
    let outcome = Outcome {
        generation: object.metadata.generation,
        history_limit: object.spec.history_entries(),
        warnings: &[],
        problem: None,
        now: at,
        trace_id: None,
    };
    plan::status_after(old, &plan, outcome)
}
