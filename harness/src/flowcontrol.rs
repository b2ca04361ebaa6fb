//! API Priority and Fairness as the API server applies it: deploy/flowcontrol.yaml
//! installed or removed, and the priority level a request was put in (the API server
//! names it in every response, `X-Kubernetes-PF-PriorityLevel-UID`, 403s included).

use std::path::Path;

use k8s_openapi::api::flowcontrol::v1::PriorityLevelConfiguration;
use kube::api::{Api, DeleteParams, DynamicObject};
use kube::{Client, ResourceExt};

use crate::cluster::{REPO, TestEnv, api_for, apply, read_manifests};
use crate::wait::eventually;

/// The controller's service account as deploy/rbac.yaml names it, as a user name.
pub const CONTROLLER_USER: &str = "system:serviceaccount:tidal-system:tidal-scheduler";

/// The objects of deploy/flowcontrol.yaml.
pub fn flowcontrol_manifests() -> Vec<DynamicObject> {
    read_manifests(&Path::new(REPO).join("deploy/flowcontrol.yaml"))
}

/// Installs deploy/flowcontrol.yaml (idempotent).
pub async fn install(env: &TestEnv) -> Result<(), String> {
    for object in flowcontrol_manifests() {
        apply(&env.client, &object, None).await?;
    }
    Ok(())
}

/// Removes deploy/flowcontrol.yaml's objects, if installed.
pub async fn uninstall(env: &TestEnv) -> Result<(), String> {
    for object in flowcontrol_manifests() {
        let api = api_for(&env.client, &object, None).await?;
        match api
            .delete(&object.name_any(), &DeleteParams::default())
            .await
        {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => return Err(format!("delete {}: {error}", object.name_any())),
        }
    }
    Ok(())
}

/// The priority level the API server put a `GET path` by `client` in (its UID).
pub async fn level_of(client: &Client, path: &str) -> Result<String, String> {
    let request = http::Request::get(path)
        .body(Vec::new())
        .map_err(|e| e.to_string())?;
    let response = client
        .send(request.map(Into::into))
        .await
        .map_err(|e| format!("GET {path}: {e}"))?;
    let header = response.headers().get("X-Kubernetes-PF-PriorityLevel-UID");
    header
        .and_then(|value| value.to_str().ok())
        .map(str::to_owned)
        .ok_or_else(|| format!("GET {path}: no priority level in {:?}", response.headers()))
}

/// The UID of priority level `name`.
pub async fn level_uid(env: &TestEnv, name: &str) -> Result<String, String> {
    let levels: Api<PriorityLevelConfiguration> = Api::all(env.client.clone());
    let level = levels.get(name).await.map_err(|e| format!("{name}: {e}"))?;
    level.uid().ok_or_else(|| format!("{name} has no UID"))
}

/// Waits until `GET path` by `client` is put in the level named `name` (the API server
/// loads FlowSchemas asynchronously).
pub async fn wait_classified(env: &TestEnv, client: &Client, path: &str, name: &str) {
    let wanted = level_uid(env, name).await.expect("the priority level");
    eventually(&format!("GET {path} in priority level {name}"), || async {
        let level = level_of(client, path).await?;
        (level == wanted).then_some(()).ok_or(level)
    })
    .await;
}
