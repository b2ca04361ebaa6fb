//! The bench's objects: a namespace of their own, their rules (a base level, then one
//! rule per round's instant), their targets, created in parallel, and waiting for them to
//! be reconciled.

use std::time::Duration;

use futures::{StreamExt, stream};
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams, PostParams};
use serde_json::Value;
use tidal_harness::cluster::TestEnv;
use tidal_harness::fixtures::deployment;
use tidal_harness::jaeger::traced_control_plane;
use tidal_harness::tide::{daily_far_from_now, manifest, once_at, second_after};
use tidal_scheduler::api::{TidalScheduler, TidalSchedulerStatus};

use crate::CONCURRENCY;
use crate::options::Options;

/// A namespace of the bench's own: on the control plane traced to Jaeger in tracing mode.
pub async fn bench_env(options: &Options) -> TestEnv {
    if options.tracing {
        TestEnv::on(traced_control_plane()).await
    } else {
        TestEnv::new().await
    }
}

/// The Deployment of object `name` in Scale mode; all share `web` in Status mode.
pub fn target_of(options: &Options, name: &str) -> String {
    if options.scale() {
        format!("{name}-web")
    } else {
        "web".to_owned()
    }
}

/// Rules of the latency objects: a base level, then one rule per instant.
fn round_rules(instants: &[Timestamp]) -> Vec<(String, String, i32)> {
    let mut rules = vec![("base".to_owned(), daily_far_from_now(), 1)];
    for (round, at) in instants.iter().enumerate() {
        rules.push((format!("round-{round}"), once_at(*at), 10 + round as i32));
    }
    rules
}

/// Object `name` with `rules`, in the options' apply mode.
pub fn tide_manifest(options: &Options, name: &str, rules: &[(String, String, i32)]) -> Value {
    let borrowed: Vec<(&str, &str, i32)> = rules
        .iter()
        .map(|(n, c, r)| (n.as_str(), c.as_str(), *r))
        .collect();
    let apply = if options.scale() { "Scale" } else { "Status" };
    manifest(
        name,
        "apps/v1",
        "Deployment",
        &target_of(options, name),
        apply,
        &borrowed,
    )
}

/// Creates `manifests`, [`CONCURRENCY`] at a time.
pub async fn create_all(env: &TestEnv, manifests: Vec<Value>) -> anyhow::Result<()> {
    let api = env.api::<TidalScheduler>();
    let results: Vec<_> = stream::iter(manifests)
        .map(|m| {
            let api = api.clone();
            async move {
                let object: TidalScheduler = serde_json::from_value(m)?;
                api.create(&PostParams::default(), &object).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Creates `objects` objects whose rules fire at `instants` (in Scale mode, each with a
/// Deployment of its own).
pub async fn create_round_objects(
    options: &Options,
    env: &TestEnv,
    objects: usize,
    instants: &[Timestamp],
) -> anyhow::Result<()> {
    let rules = round_rules(instants);
    let names: Vec<String> = (0..objects).map(|i| format!("tide-{i:04}")).collect();
    if options.scale() {
        let deployments = env.api::<Deployment>();
        let created: Vec<kube::Result<_>> = stream::iter(&names)
            .map(|name| {
                let deployments = deployments.clone();
                async move {
                    deployments
                        .create(
                            &PostParams::default(),
                            &deployment(&target_of(options, name)),
                        )
                        .await
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        for result in created {
            result?;
        }
    }
    let manifests = names
        .iter()
        .map(|name| tide_manifest(options, name, &rules))
        .collect();
    create_all(env, manifests).await
}

/// The first round's instant, far enough ahead to create `objects` objects first.
pub fn first_instant(objects: usize) -> Timestamp {
    second_after(Duration::from_secs(8) + Duration::from_millis(25 * objects as u64))
}

/// Waits until `objects` objects have a status satisfying `done`.
pub async fn wait_all_reconciled(
    api: &Api<TidalScheduler>,
    objects: usize,
    done: impl Fn(&TidalSchedulerStatus) -> bool,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let mut ready = 0;
        let mut params = ListParams::default().limit(500);
        loop {
            let page = api.list(&params).await?;
            ready += page
                .items
                .iter()
                .filter(|o| o.status.as_ref().is_some_and(&done))
                .count();
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
        if ready == objects {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "only {ready} of {objects} objects reconciled after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
