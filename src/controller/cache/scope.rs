//! One watched scope — a namespace, or all of them — built in one place: the API of its
//! TidalSchedulers, its calendar caches and the streams that fill them.

use futures::StreamExt;
use futures::stream::BoxStream;
use kube::runtime::WatchStreamExt;
use kube::runtime::reflector;
use kube::runtime::watcher;
use kube::{Api, Client, ResourceExt};

use super::Slim;
use super::calendars::CalendarCaches;
use crate::api::{ClusterTidalCalendar, FRAMEWORK_LABELS, TidalCalendar, TidalScheduler};

/// A calendar cache's changes: every change yields the calendar (a deleted one too).
pub type CalendarChanges<K> = BoxStream<'static, Result<K, watcher::Error>>;

/// One watched scope.
pub struct Scope {
    /// The namespace watched, or `None` for all.
    pub namespace: Option<String>,
    /// Its TidalSchedulers, read [`Slim`].
    pub objects: Api<Slim<TidalScheduler>>,
    /// Its calendar caches, read by reconciles.
    pub calendars: CalendarCaches,
    /// The changes of its TidalCalendars, once each is in the cache.
    pub namespaced_calendars: CalendarChanges<TidalCalendar>,
    /// The changes of ClusterTidalCalendars, once each is in the cache.
    pub cluster_calendars: CalendarChanges<ClusterTidalCalendar>,
}

impl Scope {
    /// The scopes of `namespaces`: one per namespace, or one for all when empty.
    pub fn all(client: &Client, namespaces: &[String]) -> Vec<Scope> {
        if namespaces.is_empty() {
            return vec![Scope::new(client, None)];
        }
        let scope = |namespace: &String| Scope::new(client, Some(namespace.clone()));
        namespaces.iter().map(scope).collect()
    }

    /// The scope of `namespace` (`None`: all namespaces).
    pub fn new(client: &Client, namespace: Option<String>) -> Scope {
        let (objects, namespaced) = match &namespace {
            None => (Api::all(client.clone()), Api::all(client.clone())),
            Some(namespace) => (
                Api::namespaced(client.clone(), namespace),
                Api::namespaced(client.clone(), namespace),
            ),
        };
        let (namespaced_reader, namespaced_writer) = reflector::store();
        let (cluster_reader, cluster_writer) = reflector::store();
        Scope {
            namespace,
            objects,
            calendars: CalendarCaches {
                namespaced: namespaced_reader,
                cluster: cluster_reader,
            },
            namespaced_calendars: calendar_changes(namespaced, namespaced_writer),
            cluster_calendars: calendar_changes(Api::all(client.clone()), cluster_writer),
        }
    }
}

/// The objects of `api`, cached in `writer`; every change yields the object (a deleted one
/// too, already gone from the cache).
fn calendar_changes<K>(api: Api<K>, writer: reflector::store::Writer<K>) -> CalendarChanges<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    watcher(api, watcher::Config::default())
        .default_backoff()
        .modify(slim)
        .reflect(writer)
        .touched_objects()
        // Failures are logged here and never reach the Controller: an error in one of its
        // trigger streams holds back its other inputs, timers included, until consumed.
        .filter_map(|change| {
            std::future::ready(match change {
                Ok(calendar) => Some(Ok(calendar)),
                Err(error) => {
                    tracing::warn!(
                        kind = K::kind(&()).as_ref(),
                        %error,
                        "watching calendars failed; retrying with backoff (objects using calendars wait)"
                    );
                    None
                }
            })
        })
        .boxed()
}

/// Drops what the controller never reads from a cached object: managedFields,
/// annotations (kubectl's last-applied configuration and whatever Helm, Argo CD or Flux
/// add) and every label but the decision framework's (the only ones validation reads).
/// Nothing is written back from the cache — status is patched field by field, targets
/// written by their own requests — so a dropped field is never lost, only not held: at 100,000
/// objects each byte per object is 100 kB of the controller's memory.
pub fn slim<K: ResourceExt>(object: &mut K) {
    let meta = object.meta_mut();
    meta.managed_fields = None;
    meta.annotations = None;
    if let Some(labels) = meta.labels.as_mut() {
        labels.retain(|key, _| FRAMEWORK_LABELS.contains(&key.as_str()));
        if labels.is_empty() {
            meta.labels = None;
        }
    }
}

/// History entries a cached TidalScheduler keeps: the newest, which every reader uses —
/// as the watermark's stand-in ([`crate::controller::read_back`]) and to never record an
/// instant twice ([`crate::controller::plan`]). The older ones are for people reading the
/// object; status writes leave them in place ([`crate::controller::status_patch`]).
const CACHED_HISTORY: usize = 1;

/// [`slim`], and of the status history the newest [`CACHED_HISTORY`] entries, with the
/// count of those dropped. Lists are cut to their length: deserializing grows them by
/// doubling (16 places for 10 history entries, 8 for 5 rules).
pub fn slim_scheduler(object: &mut TidalScheduler) {
    slim(object);
    object.spec.triggers.times.rules.shrink_to_fit();
    if let Some(status) = object.status.as_mut() {
        let kept = status.history.len().min(CACHED_HISTORY);
        status.history_omitted += status.history.len() - kept;
        status.history.truncate(kept);
        status.history.shrink_to_fit();
        status.rules.shrink_to_fit();
        status.conditions.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn object(metadata: Value) -> TidalScheduler {
        serde_json::from_value(json!({
            "apiVersion": "scheduling.tidal.io/v1alpha1",
            "kind": "TidalScheduler",
            "metadata": metadata,
            "spec": {
                "targetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" },
                "triggers": { "times": { "rules": [] } }
            }
        }))
        .expect("a TidalScheduler")
    }

    #[test]
    fn slim_keeps_what_reconciles_read_and_drops_the_rest() {
        let mut object = object(json!({
            "name": "web", "namespace": "shop", "uid": "u-1", "resourceVersion": "42",
            "generation": 3, "creationTimestamp": "2026-12-01T00:00:00Z",
            "labels": {
                "elasticscaler.io/name": "web", "elasticscaler.io/namespace": "shop",
                "app.kubernetes.io/managed-by": "Helm"
            },
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{}",
                "meta.helm.sh/release-name": "shop"
            },
            "managedFields": [{ "manager": "kubectl", "operation": "Apply" }]
        }));
        let mut expected = object.clone();
        expected.metadata.annotations = None;
        expected.metadata.managed_fields = None;
        if let Some(labels) = expected.metadata.labels.as_mut() {
            labels.remove("app.kubernetes.io/managed-by");
        }
        slim(&mut object);
        assert_eq!(object.metadata, expected.metadata);
        assert_eq!(object.spec, expected.spec);
        let labels = object.metadata.labels.unwrap_or_default();
        assert_eq!(labels.keys().collect::<Vec<_>>(), FRAMEWORK_LABELS.to_vec());
    }

    #[test]
    fn a_cached_scheduler_holds_its_newest_history_entry_and_counts_the_rest() {
        let entry = |second: u32| {
            json!({
                "rule": "up", "scheduleTime": format!("2026-12-01T00:00:{second:02}Z"),
                "executionTime": format!("2026-12-01T00:00:{second:02}.150000Z"),
                "replicas": 3, "result": "Succeeded"
            })
        };
        let mut object = object(json!({ "name": "web" }));
        object.status = Some(
            serde_json::from_value(json!({ "history": [entry(30), entry(20), entry(10)] }))
                .expect("a status"),
        );
        let whole = object.status.clone().unwrap_or_default();
        slim_scheduler(&mut object);
        let status = object.status.unwrap_or_default();
        assert_eq!(status.history, whole.history[..1]);
        assert_eq!(status.history_omitted, 2);
        assert_eq!(status.history.capacity(), 1);
    }

    #[test]
    fn slim_leaves_no_empty_label_map() {
        let mut object = object(json!({ "name": "web", "labels": { "team": "a" } }));
        slim(&mut object);
        assert_eq!(object.metadata.labels, None);
    }
}
