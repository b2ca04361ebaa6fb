//! What the watches of the targets tell: the targets' resourceVersions, so that a write
//! through `/scale` can carry the version as its precondition without reading the target
//! first (issue 29: one request fewer per Scale-mode trigger) and a check that a target
//! exists needs no read when it is held here; and of the HPAs the workload each scales and
//! its `maxReplicas`, so that checking a Scale-mode target for an HPA fighting over it
//! needs no LIST, and setting an HPA's floor no read. The
//! versions come from a metadata-only watch of each target kind, the HPAs from a watch of
//! HPAs, per watched scope — each started when first asked — and the versions also from
//! the responses of our own writes.
//!
//! Fencing stays exactly as strong as with a read just before the write (docs/design.md
//! §6): a version held here was observed — delivered by the watch or returned by a write —
//! before the write gate is checked, just as a version read is; a write carrying it lands
//! only if the target has not changed since, so not after a newer term's claim. A version
//! that is no longer current costs a 409, after which the write reads the target and
//! tries again. Nothing is offered while a watch is not healthy: a watch that fails (no
//! `list`/`watch` right on a custom kind, say) leaves its checks and writes reading first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::autoscaling::v2::HorizontalPodAutoscaler;
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::task::AbortHandle;

use super::Slim;
use super::watched::{Held, Name, Watched, follow};
use crate::sync::lock;

/// A target kind: its API group and plural (versions of a kind share resourceVersions).
type Kind = (String, String);

/// What one watch covers: a namespace, or all of them (`None`).
type Scope = Option<String>;

/// What one watch holds, shared with the task that feeds it.
type Shared<T> = Arc<Mutex<Watched<T>>>;

/// The workload an HPA's `scaleTargetRef` names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Scaled {
    group: String,
    kind: String,
    name: String,
}

impl Scaled {
    /// The workload `hpa` scales.
    pub fn by(hpa: &DynamicObject) -> Scaled {
        let target = &hpa.data["spec"]["scaleTargetRef"];
        let text = |field: &str| target[field].as_str().unwrap_or_default();
        Scaled {
            group: group_of(text("apiVersion")).to_owned(),
            kind: text("kind").to_owned(),
            name: text("name").to_owned(),
        }
    }

    /// Whether it is `kind` `name` of API `group` (any version of the group).
    pub fn is(&self, group: &str, kind: &str, name: &str) -> bool {
        self.group == group && self.kind == kind && self.name == name
    }
}

/// What the HPA watch keeps of an HPA.
#[derive(Debug, Clone, Default, PartialEq)]
struct Hpa {
    scales: Scaled,
    max_replicas: Option<i32>,
}

/// The `spec.maxReplicas` of `hpa`, if it has one.
pub fn max_replicas(hpa: &DynamicObject) -> Option<i32> {
    let max = hpa.data["spec"]["maxReplicas"].as_i64()?;
    i32::try_from(max).ok()
}

/// Where the watches go.
enum Watching {
    /// Nowhere: every check and write reads the API server.
    Off,
    /// Through `client`, one watch per namespace of `namespaces` or one over all when empty.
    On {
        client: Client,
        namespaces: Vec<String>,
    },
    /// Nowhere, but over all namespaces what a test put in (as a watch would have).
    #[cfg(test)]
    Given,
}

/// The targets' versions per kind and scope, and the HPAs per scope.
pub struct TargetVersions {
    watching: Watching,
    kinds: Mutex<HashMap<(Kind, Scope), Shared<()>>>,
    hpas: Mutex<HashMap<Scope, Shared<Hpa>>>,
    watches: Mutex<Vec<AbortHandle>>,
}

impl TargetVersions {
    /// Nothing held: every check and write reads the API server.
    pub fn off() -> TargetVersions {
        TargetVersions::with(Watching::Off)
    }

    /// From watches through `client` over `namespaces` (empty: all namespaces).
    pub fn watching(client: Client, namespaces: &[String]) -> TargetVersions {
        TargetVersions::with(Watching::On {
            client,
            namespaces: namespaces.to_vec(),
        })
    }

    fn with(watching: Watching) -> TargetVersions {
        TargetVersions {
            watching,
            kinds: Mutex::new(HashMap::new()),
            hpas: Mutex::new(HashMap::new()),
            watches: Mutex::new(Vec::new()),
        }
    }

    /// The version of `name` in `namespace` last observed, if its kind's watch is healthy;
    /// starts watching the kind on its first call.
    pub fn version(&self, resource: &ApiResource, namespace: &str, name: &str) -> Option<String> {
        let kind = self.kind(resource, namespace)?;
        let held = lock(&kind).get(&named(namespace, name)).cloned();
        held.map(|(version, ())| version)
    }

    /// Starts watching `resource` over the scope of `namespace` (if not yet), so that its
    /// targets' versions are held before a check or write asks: a standby warms what it
    /// will need once it leads.
    pub fn watch_kind(&self, resource: &ApiResource, namespace: &str) {
        self.kind(resource, namespace);
    }

    /// Starts watching the HPAs over the scope of `namespace` (if not yet).
    pub fn watch_hpas(&self, namespace: &str) {
        self.hpas(namespace);
    }

    /// Notes the version our own write of `name` in `namespace` returned.
    pub fn wrote(&self, resource: &ApiResource, namespace: &str, name: &str, version: &str) {
        if let Some(kind) = self.kind(resource, namespace) {
            lock(&kind).wrote(named(namespace, name), (version.to_owned(), ()));
        }
    }

    /// The names of the HPAs in `namespace` whose `scaleTargetRef` is `kind` `name` of API
    /// `group`, if the HPA watch of the namespace is healthy; starts it on its first call.
    pub fn scaling_hpas(
        &self,
        namespace: &str,
        group: &str,
        kind: &str,
        name: &str,
    ) -> Option<Vec<String>> {
        let hpas = self.hpas(namespace)?;
        let hpas = lock(&hpas);
        let held = hpas.in_namespace(namespace)?;
        let scaling = held.filter(|(_, (_, hpa))| hpa.scales.is(group, kind, name));
        Some(scaling.map(|(hpa, _)| hpa.to_owned()).collect())
    }

    /// The version and `maxReplicas` of the HPA `name` in `namespace` last observed, if
    /// the HPA watch of the namespace is healthy and holds it; starts it on its first call.
    pub fn hpa_max_replicas(&self, namespace: &str, name: &str) -> Option<Held<Option<i32>>> {
        let hpas = self.hpas(namespace)?;
        let (version, hpa) = lock(&hpas).get(&named(namespace, name)).cloned()?;
        Some((version, hpa.max_replicas))
    }

    /// Notes the HPA our own write returned.
    pub fn wrote_hpa(&self, hpa: DynamicObject) {
        if let Some(hpas) = self.hpas(&hpa.namespace().unwrap_or_default()) {
            let (name, held) = kept_of_hpa(hpa);
            lock(&hpas).wrote(name, held);
        }
    }

    /// Versions already held (a watch that delivered them, in tests).
    #[cfg(test)]
    pub fn holding(resource: &ApiResource, objects: &[(&str, &str, &str)]) -> TargetVersions {
        let versions = TargetVersions::with(Watching::Given);
        let listed = objects.iter().map(|(namespace, name, version)| {
            (named(namespace, name), ((*version).to_owned(), ()))
        });
        let key = (resource.group.clone(), resource.plural.clone());
        let watched = Arc::new(Mutex::new(Watched::listed(listed)));
        lock(&versions.kinds).insert((key, None), watched);
        versions
    }

    /// HPAs already held (a watch that delivered them, in tests).
    #[cfg(test)]
    fn holding_hpas(hpas: Vec<DynamicObject>) -> TargetVersions {
        let versions = TargetVersions::with(Watching::Given);
        let watched = Watched::listed(hpas.into_iter().map(kept_of_hpa));
        lock(&versions.hpas).insert(None, Arc::new(Mutex::new(watched)));
        versions
    }

    /// The scope whose watch covers `namespace`; `None` if no watch does.
    fn scope(&self, namespace: &str) -> Option<Scope> {
        match &self.watching {
            Watching::Off => None,
            #[cfg(test)]
            Watching::Given => Some(None),
            Watching::On { namespaces, .. } if namespaces.is_empty() => Some(None),
            Watching::On { namespaces, .. } => (namespaces.iter())
                .any(|watched| watched == namespace)
                .then(|| Some(namespace.to_owned())),
        }
    }

    fn kind(&self, resource: &ApiResource, namespace: &str) -> Option<Shared<()>> {
        let kind = (resource.group.clone(), resource.plural.clone());
        let scope = self.scope(namespace)?;
        let mut kinds = lock(&self.kinds);
        let watched = kinds.entry((kind, scope.clone())).or_insert_with(|| {
            let watched = Arc::default();
            self.start(resource, &scope, &watched, identified);
            watched
        });
        Some(watched.clone())
    }

    fn hpas(&self, namespace: &str) -> Option<Shared<Hpa>> {
        let scope = self.scope(namespace)?;
        let mut hpas = lock(&self.hpas);
        let watched = hpas.entry(scope.clone()).or_insert_with(|| {
            let watched = Arc::default();
            let resource = ApiResource::erase::<HorizontalPodAutoscaler>(&());
            self.start::<DynamicObject, _>(&resource, &scope, &watched, kept_of_hpa);
            watched
        });
        Some(watched.clone())
    }

    /// Starts the watch of `resource` over `scope` feeding `watched`.
    fn start<K, T>(
        &self,
        resource: &ApiResource,
        scope: &Scope,
        watched: &Shared<T>,
        keep: fn(K) -> (Name, Held<T>),
    ) where
        K: kube::Resource<DynamicType = ApiResource, Scope = kube::core::DynamicResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug
            + Send
            + 'static,
        T: Clone + Send + 'static,
    {
        let Watching::On { client, .. } = &self.watching else {
            return;
        };
        let api: Api<Slim<K>> = match scope {
            None => Api::all_with(client.clone(), resource),
            Some(namespace) => Api::namespaced_with(client.clone(), namespace, resource),
        };
        let config = watcher::Config::default();
        let watch = tokio::spawn(follow(
            api,
            config,
            resource.plural.clone(),
            watched.clone(),
            keep,
        ));
        lock(&self.watches).push(watch.abort_handle());
    }
}

impl Drop for TargetVersions {
    fn drop(&mut self) {
        for watch in lock(&self.watches).drain(..) {
            watch.abort();
        }
    }
}

/// What the version watch keeps of an object: its name and version.
fn identified(object: PartialObjectMeta<DynamicObject>) -> (Name, Held<()>) {
    let namespace = object.namespace().unwrap_or_default();
    let version = object.resource_version().unwrap_or_default();
    ((namespace, object.name_any()), (version, ()))
}

/// What the HPA watch keeps of an HPA: the workload its `scaleTargetRef` names and its
/// `maxReplicas`.
fn kept_of_hpa(hpa: DynamicObject) -> (Name, Held<Hpa>) {
    let kept = Hpa {
        scales: Scaled::by(&hpa),
        max_replicas: max_replicas(&hpa),
    };
    let namespace = hpa.namespace().unwrap_or_default();
    let version = hpa.resource_version().unwrap_or_default();
    ((namespace, hpa.name_any()), (version, kept))
}

fn named(namespace: &str, name: &str) -> Name {
    (namespace.to_owned(), name.to_owned())
}

/// The API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → the core group).
fn group_of(api_version: &str) -> &str {
    api_version.split_once('/').map_or("", |(group, _)| group)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hpa(name: &str, api_version: &str, kind: &str, target: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": { "name": name, "namespace": "shop", "resourceVersion": "4" },
            "spec": {
                "scaleTargetRef": { "apiVersion": api_version, "kind": kind, "name": target },
                "maxReplicas": 5,
            },
        }))
        .expect("an object")
    }

    #[test]
    fn the_hpas_scaling_a_workload_are_found_by_group_kind_and_name() {
        let versions = TargetVersions::holding_hpas(vec![
            hpa("web-hpa", "apps/v1", "Deployment", "web"),
            hpa("web-too", "apps/v1beta1", "Deployment", "web"),
            hpa("db-hpa", "apps/v1", "StatefulSet", "web"),
            hpa("widget", "example.com/v1", "Deployment", "web"),
        ]);
        let mut found = versions
            .scaling_hpas("shop", "apps", "Deployment", "web")
            .expect("a healthy watch");
        found.sort();
        assert_eq!(found, ["web-hpa", "web-too"]);
        assert_eq!(
            versions.scaling_hpas("other", "apps", "Deployment", "web"),
            Some(Vec::new())
        );
    }

    #[test]
    fn an_hpa_floor_is_written_against_the_version_and_maxreplicas_held() {
        let versions =
            TargetVersions::holding_hpas(vec![hpa("web-hpa", "apps/v1", "Deployment", "web")]);
        assert_eq!(
            versions.hpa_max_replicas("shop", "web-hpa"),
            Some(("4".to_owned(), Some(5)))
        );
        assert_eq!(versions.hpa_max_replicas("shop", "other"), None);

        // Our write's response is held until the watch delivers something newer.
        let mut written = hpa("web-hpa", "apps/v1", "Deployment", "web");
        written.metadata.resource_version = Some("9".to_owned());
        written.data["spec"]["maxReplicas"] = 12.into();
        versions.wrote_hpa(written);
        assert_eq!(
            versions.hpa_max_replicas("shop", "web-hpa"),
            Some(("9".to_owned(), Some(12)))
        );
        versions.wrote_hpa(hpa("web-hpa", "apps/v1", "Deployment", "web"));
        assert_eq!(
            versions.hpa_max_replicas("shop", "web-hpa"),
            Some(("9".to_owned(), Some(12)))
        );
    }

    #[test]
    fn without_a_watch_the_hpas_are_unknown() {
        let versions = TargetVersions::off();
        assert_eq!(
            versions.scaling_hpas("shop", "apps", "Deployment", "web"),
            None
        );
        assert_eq!(versions.hpa_max_replicas("shop", "web-hpa"), None);
    }

    #[test]
    fn the_group_of_an_api_version() {
        assert_eq!(group_of("apps/v1"), "apps");
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("example.com/v1alpha1"), "example.com");
    }
}
