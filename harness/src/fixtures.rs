//! Objects the integration tests create: a valid TidalScheduler (as JSON, to be
//! broken at will), minimal workloads, HPAs and Leases, and a custom kind with a scale
//! subresource.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::wait::conditions;
use serde_json::{Value, json};

use super::cluster::apply;
use super::wait::wait_for;

/// A valid TidalScheduler (as JSON, so tests can break it in any way).
pub fn valid_tidal_scheduler(name: &str) -> Value {
    json!({
        "apiVersion": "scheduling.tidal.io/v1alpha1",
        "kind": "TidalScheduler",
        "metadata": { "name": name },
        "spec": {
            "targetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" },
            "triggers": { "times": { "rules": [
                { "name": "morning", "cron": "CRON_TZ=Europe/Paris 0 0 8 * * *", "replicas": 10 },
                { "name": "night", "cron": "0 0 22 * * *", "timeZone": "Europe/Paris", "replicas": 2 },
            ]}},
        },
    })
}

/// A Kubernetes object from JSON.
pub fn object(value: Value) -> DynamicObject {
    serde_json::from_value(value).expect("a Kubernetes object")
}

/// A Deployment of one replica (no pods appear: there is no controller-manager).
pub fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "app", "image": "registry.example/app:1" }] },
            },
        },
    }))
    .expect("a Deployment")
}

/// A Deployment of `replicas` pods running `image`, which must be on the node (never
/// pulled), with a 1 s grace period and small requests: pods that really run on a node.
pub fn deployment_of_pods(name: &str, image: &str, replicas: i32) -> Deployment {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "replicas": replicas,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [{
                        "name": "app",
                        "image": image,
                        "imagePullPolicy": "Never",
                        "resources": { "requests": { "cpu": "10m", "memory": "8Mi" } },
                    }],
                },
            },
        },
    }))
    .expect("a Deployment")
}

/// A StatefulSet of one replica.
pub fn stateful_set(name: &str) -> StatefulSet {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "replicas": 1,
            "serviceName": name,
            "selector": { "matchLabels": { "app": name } },
            "template": {
                "metadata": { "labels": { "app": name } },
                "spec": { "containers": [{ "name": "app", "image": "registry.example/app:1" }] },
            },
        },
    }))
    .expect("a StatefulSet")
}

/// An `autoscaling/v2` HPA on the Deployment `target`, 1 to 20 replicas.
pub fn hpa(name: &str, target: &str) -> HorizontalPodAutoscaler {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "scaleTargetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": target },
            "minReplicas": 1,
            "maxReplicas": 20,
        },
    }))
    .expect("an HPA")
}

/// A Lease held by `holder` for 15 s.
pub fn lease(name: &str, holder: &str) -> Lease {
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "holderIdentity": holder, "leaseDurationSeconds": 15 },
    }))
    .expect("a Lease")
}

/// The custom kind `Widget` (`example.com/v1`) of [`install_widget_crd`].
pub fn widget_resource() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk("example.com", "v1", "Widget"))
}

/// A Widget of `replicas`.
pub fn widget(name: &str, replicas: i32) -> DynamicObject {
    object(json!({
        "apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": { "name": name }, "spec": { "replicas": replicas },
    }))
}

/// Installs a namespaced CRD `widgets.example.com` (kind `Widget`) with a scale
/// subresource (idempotent), and waits until it is Established. No controller acts on
/// a Widget: a write to its `/scale` is all there is.
pub async fn install_widget_crd(client: &Client) {
    let crd = object(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": { "name": "widgets.example.com" },
        "spec": {
            "group": "example.com",
            "names": { "kind": "Widget", "plural": "widgets", "singular": "widget" },
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": { "openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": { "type": "object", "properties": { "replicas": { "type": "integer" } } },
                        "status": { "type": "object", "properties": { "replicas": { "type": "integer" } } },
                    },
                }},
                "subresources": {
                    "status": {},
                    "scale": { "specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas" },
                },
            }],
        },
    }));
    apply(client, &crd, None)
        .await
        .expect("apply the Widget CRD");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    wait_for(
        &crds,
        "widgets.example.com",
        "Established",
        conditions::is_crd_established(),
    )
    .await;
}
