//! Read your own writes (docs/design.md §7), in the spirit of Kubernetes' ConsistencyStore
//! (`pkg/controller/util/consistency`), in one place: the watches report every
//! resourceVersion they vouch for ([`Consistency::progress`], [`Consistency::observe`]);
//! the reconcile records each status write ([`Consistency::wrote`]) and, before acting,
//! asks whether its cache has caught up with its owner's last write
//! ([`Consistency::check`]) — a cache that has not would show an outdated object, so
//! that reconcile is skipped and retried shortly. The object the reconcile was handed is
//! judged by its own resourceVersion: the cache may have moved past our write after that
//! snapshot was taken. A write whose outcome is unknown (cancelled when leadership ended,
//! or unanswered) is recorded as such ([`Consistency::unsure`]): the next reconcile reads
//! the object from the API server instead of trusting any cache. The watch echo of our
//! own last write triggers no reconcile ([`Consistency::is_echo`]).

mod store;

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::sync::atomic::AtomicI64;

use kube::ResourceExt;
use kube::runtime::watcher;
use prometheus_client::metrics::gauge::Gauge;

pub use store::{CacheVersion, ConsistencyStore, Freshness, compare_resource_versions};

use crate::api::TidalScheduler;
use crate::controller::key::{ObjectKey, ObjectName, Written};
use crate::controller::publish::metrics::ControllerMetrics;
use crate::sync::lock;

/// The group-resource of status writes.
pub const TIDAL_SCHEDULERS: &str = "tidalschedulers.scheduling.tidal.io";

/// The resourceVersion our last write of an object produced.
#[derive(Debug)]
struct Echo {
    uid: String,
    resource_version: String,
}

/// One watch cache's newest version and its gauge.
#[derive(Debug, Clone)]
struct Cache {
    version: CacheVersion,
    gauge: Gauge<i64, AtomicI64>,
}

impl Cache {
    fn saw(&self, resource_version: &str) {
        self.version.saw(resource_version);
        self.gauge
            .set(i64::try_from(self.version.value()).unwrap_or(i64::MAX));
    }
}

/// What this process wrote and what its watch caches have seen.
#[derive(Debug)]
pub struct Consistency {
    store: ConsistencyStore,
    /// By watch scope: a namespace, or `None` for all.
    caches: HashMap<Option<String>, Cache>,
    echoes: Mutex<HashMap<ObjectName, Echo>>,
    /// Objects (with their UID) a write of ours may have changed unrecorded.
    unsure: Mutex<HashMap<ObjectName, String>>,
}

impl Consistency {
    /// For watches over `scopes`, each exporting its newest version on `metrics`.
    pub fn new(scopes: &[Option<String>], metrics: &ControllerMetrics) -> Consistency {
        let caches = scopes
            .iter()
            .map(|scope| {
                let gauge = metrics.store_resource_version(scope.as_deref().unwrap_or("all"));
                let cache = Cache {
                    version: CacheVersion::default(),
                    gauge,
                };
                (scope.clone(), cache)
            })
            .collect();
        Consistency {
            store: ConsistencyStore::default(),
            caches,
            echoes: Mutex::default(),
            unsure: Mutex::default(),
        }
    }

    /// The callback through which the watch of `scope` reports the versions it vouches
    /// for without an object (each list's, each bookmark's).
    pub fn progress(
        &self,
        scope: &Option<String>,
    ) -> impl Fn(&str) + Clone + Send + Sync + 'static {
        let cache = self.caches.get(scope).cloned();
        move |version| {
            if let Some(cache) = &cache {
                cache.saw(version);
            }
        }
    }

    /// Notes a watch event of `scope` once it is in the cache: its version, and a deletion
    /// (which ends the owner's record).
    pub fn observe(&self, scope: &Option<String>, event: &watcher::Event<TidalScheduler>) {
        let object = match event {
            watcher::Event::Apply(object) | watcher::Event::InitApply(object) => object,
            watcher::Event::Delete(object) => {
                self.store.forget(&ObjectKey::of(object));
                object
            }
            watcher::Event::Init | watcher::Event::InitDone => return,
        };
        if let (Some(version), Some(cache)) =
            (&object.metadata.resource_version, self.caches.get(scope))
        {
            cache.saw(version);
        }
    }

    /// Whether `snapshot`, the resourceVersion of the copy of `key` a reconcile is about to
    /// act on, includes our last write of it (without one: whether the cache holding it has
    /// seen that write).
    pub fn check(&self, key: &ObjectKey, snapshot: Option<&str>) -> Freshness {
        if lock(&self.unsure).get(&key.name) == Some(&key.uid) {
            return Freshness::Unsure;
        }
        let cache = self
            .caches
            .get(&Some(key.name.namespace.clone()))
            .or_else(|| self.caches.get(&None));
        let snapshot = snapshot.filter(|v| compare_resource_versions(v, v).is_some());
        self.store.check(key, |resource| {
            (resource == TIDAL_SCHEDULERS)
                .then(|| match snapshot {
                    Some(version) => Some(version.to_owned()),
                    None => cache.and_then(|cache| cache.version.newest()),
                })
                .flatten()
        })
    }

    /// Records that a write of ours to `key` may have been applied unrecorded: until
    /// [`Consistency::settled`], [`Consistency::check`] answers [`Freshness::Unsure`].
    pub fn unsure(&self, key: &ObjectKey) {
        lock(&self.unsure).insert(key.name.clone(), key.uid.clone());
    }

    /// `key` was read from the API server after an unsure write.
    pub fn settled(&self, key: &ObjectKey) {
        lock(&self.unsure).remove(&key.name);
    }

    /// Records our status write, as the API server answered it.
    pub fn wrote(&self, written: &Written) {
        let Written {
            key,
            resource_version,
        } = written;
        if key.uid.is_empty() || resource_version.is_empty() {
            return;
        }
        self.store.wrote(key, TIDAL_SCHEDULERS, resource_version);
        let echo = Echo {
            uid: key.uid.clone(),
            resource_version: resource_version.clone(),
        };
        lock(&self.echoes).insert(key.name.clone(), echo);
    }

    /// Whether a watch event is the echo of our last write of the object: it is then
    /// exactly what the reconcile that wrote it computed, and needs no new reconcile.
    /// Each write is matched once.
    pub fn is_echo(&self, object: &TidalScheduler) -> bool {
        let (Some(uid), Some(version)) = (object.uid(), object.resource_version()) else {
            return false;
        };
        let name = ObjectName::of(object);
        let mut echoes = lock(&self.echoes);
        let echo = echoes
            .get(&name)
            .is_some_and(|e| e.uid == uid && e.resource_version == version);
        if echo {
            echoes.remove(&name);
        }
        echo
    }

    /// Forgets `key`'s writes (it was not found).
    pub fn forget(&self, key: &ObjectKey) {
        self.store.forget(key);
        self.settled(key);
    }

    /// Drops the echoes and unsure writes of objects that no longer exist.
    pub fn forget_all_but(&self, existing: &HashSet<ObjectName>) {
        lock(&self.echoes).retain(|name, _| existing.contains(name));
        lock(&self.unsure).retain(|name, _| existing.contains(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::telemetry::metrics::registry;

    fn object(name: &str, uid: &str, version: &str) -> TidalScheduler {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.tidal.io/v1alpha1",
            "kind": "TidalScheduler",
            "metadata": { "name": name, "namespace": "ns", "uid": uid, "resourceVersion": version },
            "spec": {
                "targetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" },
                "triggers": { "times": { "rules": [
                    { "name": "r", "cron": "CRON_TZ=UTC 0 0 8 * * *", "replicas": 1 },
                ]}},
            },
        }))
        .unwrap()
    }

    fn consistency() -> Consistency {
        Consistency::new(
            &[Some("ns".to_owned())],
            &ControllerMetrics::register(&mut registry(), true),
        )
    }

    #[test]
    fn a_reconcile_behind_our_own_write_is_stale_until_the_watch_delivers_it() {
        let consistency = consistency();
        let scope = Some("ns".to_owned());
        consistency.observe(&scope, &watcher::Event::Apply(object("a", "u1", "10")));
        let written = object("a", "u1", "12");
        consistency.wrote(&Written::of(&written));
        let key = ObjectKey::of(&written);
        assert!(matches!(
            consistency.check(&key, None),
            Freshness::Stale { .. }
        ));
        // A bookmark (or another object's event) past our write vouches for it.
        consistency.progress(&scope)("13");
        assert_eq!(consistency.check(&key, None), Freshness::Fresh);
    }

    #[test]
    fn a_snapshot_older_than_our_write_is_stale_even_once_the_cache_has_moved_on() {
        // The reconcile was handed its copy (version 10) just before the watch delivered
        // our write (12): the cache has seen it, the copy has not.
        let consistency = consistency();
        let scope = Some("ns".to_owned());
        consistency.observe(&scope, &watcher::Event::Apply(object("a", "u1", "10")));
        let written = object("a", "u1", "12");
        consistency.wrote(&Written::of(&written));
        consistency.observe(&scope, &watcher::Event::Apply(written.clone()));
        let key = ObjectKey::of(&written);
        assert!(matches!(
            consistency.check(&key, Some("10")),
            Freshness::Stale { written, seen, .. } if written == "12" && seen == "10"
        ));
        assert_eq!(consistency.check(&key, Some("12")), Freshness::Fresh);
    }

    #[test]
    fn an_unsure_write_asks_for_a_read_until_settled() {
        let consistency = consistency();
        let key = ObjectKey::of(&object("a", "u1", "10"));
        consistency.unsure(&key);
        assert_eq!(consistency.check(&key, Some("10")), Freshness::Unsure);
        assert_eq!(
            consistency.check(&ObjectKey::of(&object("a", "u2", "10")), Some("10")),
            Freshness::Fresh,
            "another object of the same name"
        );
        consistency.settled(&key);
        assert_eq!(consistency.check(&key, Some("10")), Freshness::Fresh);
        consistency.unsure(&key);
        consistency.forget_all_but(&HashSet::new());
        assert_eq!(consistency.check(&key, Some("10")), Freshness::Fresh);
    }

    #[test]
    fn the_echo_of_our_write_is_recognised_once() {
        let consistency = consistency();
        let written = object("a", "u1", "12");
        consistency.wrote(&Written::of(&written));
        assert!(
            !consistency.is_echo(&object("a", "u1", "11")),
            "an older version"
        );
        assert!(
            !consistency.is_echo(&object("a", "other", "12")),
            "another UID"
        );
        assert!(consistency.is_echo(&written));
        assert!(!consistency.is_echo(&written), "matched once");
    }

    #[test]
    fn a_deletion_ends_the_record() {
        let consistency = consistency();
        let scope = Some("ns".to_owned());
        let written = object("a", "u1", "12");
        consistency.wrote(&Written::of(&written));
        consistency.observe(&scope, &watcher::Event::Delete(object("a", "u1", "11")));
        assert_eq!(
            consistency.check(&ObjectKey::of(&written), None),
            Freshness::Fresh
        );
    }
}
