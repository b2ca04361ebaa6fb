//! The resourceVersions of the targets, so that a write through `/scale` can carry the
//! version as its precondition without reading the target first (issue 29: one request
//! fewer per Scale-mode trigger), and a check that a target exists needs no read when it
//! is held here. They come from a metadata-only watch of each target kind over the watched
//! scopes — started when a target of that kind is first checked or written — and from the
//! responses of our own writes.
//!
//! Fencing stays exactly as strong as with a read just before the write (docs/design.md
//! §6): a version held here was observed — delivered by the watch or returned by a write —
//! before the write gate is checked, just as a version read is; a write carrying it lands
//! only if the target has not changed since, so not after a newer term's claim. A version
//! that is no longer current costs a 409, after which the write reads the target and
//! tries again. Versions are offered only while the kind's watch is healthy: a watch that
//! fails (no `list`/`watch` right on a custom kind, say) leaves its writes reading first.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject};
use kube::core::PartialObjectMeta;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::task::AbortHandle;

use super::consistency::compare_resource_versions;
use crate::sync::lock;

/// A target kind: its API group and plural (versions of a kind share resourceVersions).
type Kind = (String, String);

/// A target within its kind: namespace and name.
type Name = (String, String);

/// Where the versions come from.
enum Watching {
    /// Nowhere: every write reads its target first.
    Off,
    /// Watches through `client`, per namespace of `namespaces` or over all when empty.
    On {
        client: Client,
        namespaces: Vec<String>,
    },
}

/// The targets' versions, per kind.
pub struct TargetVersions {
    watching: Watching,
    kinds: Mutex<HashMap<Kind, Arc<Mutex<KindVersions>>>>,
    watches: Mutex<Vec<AbortHandle>>,
}

impl TargetVersions {
    /// No versions held: every write reads its target first.
    pub fn off() -> TargetVersions {
        TargetVersions::with(Watching::Off)
    }

    /// Versions from watches through `client` over `namespaces` (empty: all namespaces).
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
            watches: Mutex::new(Vec::new()),
        }
    }

    /// The version of `name` in `namespace` last observed, if its kind's watch is healthy;
    /// starts watching the kind on its first call.
    pub fn version(&self, resource: &ApiResource, namespace: &str, name: &str) -> Option<String> {
        let kind = self.kind(resource)?;
        lock(&kind).version(&(namespace.to_owned(), name.to_owned()))
    }

    /// Notes the version our own write of `name` in `namespace` returned.
    pub fn wrote(&self, resource: &ApiResource, namespace: &str, name: &str, version: &str) {
        if let Some(kind) = self.kind(resource) {
            lock(&kind).wrote((namespace.to_owned(), name.to_owned()), version);
        }
    }

    /// Versions already held (a watch that delivered them, in tests).
    #[cfg(test)]
    pub fn holding(resource: &ApiResource, objects: &[(&str, &str, &str)]) -> TargetVersions {
        let versions = TargetVersions::off();
        let mut kind = KindVersions::default();
        kind.apply(Event::Init);
        for (namespace, name, version) in objects {
            let name = ((*namespace).to_owned(), (*name).to_owned());
            kind.apply(Event::InitApply((name, (*version).to_owned())));
        }
        kind.apply(Event::InitDone);
        let key = (resource.group.clone(), resource.plural.clone());
        lock(&versions.kinds).insert(key, Arc::new(Mutex::new(kind)));
        versions
    }

    fn kind(&self, resource: &ApiResource) -> Option<Arc<Mutex<KindVersions>>> {
        let kind = (resource.group.clone(), resource.plural.clone());
        let mut kinds = lock(&self.kinds);
        if let Some(versions) = kinds.get(&kind) {
            return Some(versions.clone());
        }
        let Watching::On { client, namespaces } = &self.watching else {
            return None;
        };
        let versions = Arc::new(Mutex::new(KindVersions::default()));
        kinds.insert(kind, versions.clone());
        let apis: Vec<Api<PartialObjectMeta<DynamicObject>>> = if namespaces.is_empty() {
            vec![Api::all_with(client.clone(), resource)]
        } else {
            let api = |ns: &String| Api::namespaced_with(client.clone(), ns, resource);
            namespaces.iter().map(api).collect()
        };
        let mut watches = lock(&self.watches);
        for api in apis {
            let watch = tokio::spawn(follow(api, resource.plural.clone(), versions.clone()));
            watches.push(watch.abort_handle());
        }
        Some(versions)
    }
}

impl Drop for TargetVersions {
    fn drop(&mut self) {
        for watch in lock(&self.watches).drain(..) {
            watch.abort();
        }
    }
}

/// Feeds `versions` from a metadata-only watch of `api` (retried with backoff), forever.
async fn follow(
    api: Api<PartialObjectMeta<DynamicObject>>,
    plural: String,
    versions: Arc<Mutex<KindVersions>>,
) {
    watcher(api, watcher::Config::default())
        .default_backoff()
        .for_each(|event| {
            let mut versions = lock(&versions);
            match event {
                Ok(event) => versions.apply(identified(event)),
                Err(error) => {
                    if versions.failed() {
                        tracing::warn!(resource = %plural, %error,
                            "watching targets failed; they are read before each check and write until it recovers");
                    }
                }
            }
            std::future::ready(())
        })
        .await;
}

/// A watch event reduced to what is kept: each object's name and version.
fn identified(event: Event<PartialObjectMeta<DynamicObject>>) -> Event<(Name, String)> {
    let identify = |object: PartialObjectMeta<DynamicObject>| {
        let namespace = object.namespace().unwrap_or_default();
        let version = object.resource_version().unwrap_or_default();
        ((namespace, object.name_any()), version)
    };
    match event {
        Event::Apply(object) => Event::Apply(identify(object)),
        Event::Delete(object) => Event::Delete(identify(object)),
        Event::Init => Event::Init,
        Event::InitApply(object) => Event::InitApply(identify(object)),
        Event::InitDone => Event::InitDone,
    }
}

/// One kind's versions, as its watch and our writes left them.
#[derive(Debug, Default)]
struct KindVersions {
    /// Whether the watch has listed and not failed since its last delivery.
    healthy: bool,
    /// Whether a failure was logged since the watch was last healthy.
    warned: bool,
    objects: HashMap<Name, String>,
    /// Filled by a (re-)list in progress; replaces `objects` when it is done.
    relisting: Option<HashMap<Name, String>>,
}

impl KindVersions {
    fn version(&self, name: &Name) -> Option<String> {
        self.healthy.then(|| self.objects.get(name).cloned())?
    }

    fn wrote(&mut self, name: Name, version: &str) {
        if self.healthy {
            keep_newest(&mut self.objects, name, version.to_owned());
        }
    }

    fn apply(&mut self, event: Event<(Name, String)>) {
        match event {
            Event::Init => self.relisting = Some(HashMap::new()),
            Event::InitApply((name, version)) => {
                let relisting = self.relisting.get_or_insert_with(HashMap::new);
                relisting.insert(name, version);
            }
            Event::InitDone => {
                let mut listed = self.relisting.take().unwrap_or_default();
                // A write of ours may have returned a newer version meanwhile.
                for (name, version) in self.objects.drain() {
                    if listed.contains_key(&name) {
                        keep_newest(&mut listed, name, version);
                    }
                }
                self.objects = listed;
                self.recovered();
            }
            Event::Apply((name, version)) => {
                keep_newest(&mut self.objects, name, version);
                self.recovered();
            }
            Event::Delete((name, _)) => {
                self.objects.remove(&name);
                self.recovered();
            }
        }
    }

    /// Notes a failed watch; whether to log it (the first failure since it was healthy).
    fn failed(&mut self) -> bool {
        self.healthy = false;
        !std::mem::replace(&mut self.warned, true)
    }

    fn recovered(&mut self) {
        if self.relisting.is_none() {
            self.healthy = true;
            self.warned = false;
        }
    }
}

/// Stores `version` for `name` unless a newer one is held (a watch event can arrive after
/// the response of a later write); a malformed version replaces what is held.
fn keep_newest(objects: &mut HashMap<Name, String>, name: Name, version: String) {
    let older = |held: &String| {
        compare_resource_versions(held, &version).is_some_and(|order| order.is_gt())
    };
    if !objects.get(&name).is_some_and(older) {
        objects.insert(name, version);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(name: &str) -> Name {
        ("default".to_owned(), name.to_owned())
    }

    fn listed(objects: &[(&str, &str)]) -> KindVersions {
        let mut versions = KindVersions::default();
        versions.apply(Event::Init);
        for (object, version) in objects {
            versions.apply(Event::InitApply((name(object), (*version).to_owned())));
        }
        versions.apply(Event::InitDone);
        versions
    }

    #[test]
    fn nothing_is_offered_before_the_first_list_is_done() {
        let mut versions = KindVersions::default();
        versions.apply(Event::Init);
        versions.apply(Event::InitApply((name("web"), "7".to_owned())));
        versions.wrote(name("web"), "8");
        assert_eq!(versions.version(&name("web")), None);
        versions.apply(Event::InitDone);
        assert_eq!(versions.version(&name("web")).as_deref(), Some("7"));
    }

    #[test]
    fn a_late_watch_event_never_replaces_the_version_our_write_returned() {
        let mut versions = listed(&[("web", "7")]);
        versions.wrote(name("web"), "9");
        versions.apply(Event::Apply((name("web"), "8".to_owned())));
        assert_eq!(versions.version(&name("web")).as_deref(), Some("9"));
        versions.apply(Event::Apply((name("web"), "10".to_owned())));
        assert_eq!(versions.version(&name("web")).as_deref(), Some("10"));
    }

    #[test]
    fn a_failed_watch_offers_nothing_until_it_delivers_again() {
        let mut versions = listed(&[("web", "7")]);
        assert!(versions.failed(), "the first failure is logged");
        assert!(!versions.failed(), "the next ones are not");
        assert_eq!(versions.version(&name("web")), None);
        versions.wrote(name("web"), "9");
        versions.apply(Event::Apply((name("api"), "8".to_owned())));
        assert_eq!(versions.version(&name("web")).as_deref(), Some("7"));
        assert!(
            versions.failed(),
            "a failure after recovery is logged again"
        );
    }

    #[test]
    fn a_relist_drops_deleted_objects_and_keeps_newer_writes() {
        let mut versions = listed(&[("web", "7"), ("gone", "3")]);
        versions.apply(Event::Init);
        versions.apply(Event::InitApply((name("web"), "8".to_owned())));
        versions.wrote(name("web"), "12");
        versions.apply(Event::InitDone);
        assert_eq!(versions.version(&name("web")).as_deref(), Some("12"));
        assert_eq!(versions.version(&name("gone")), None);
    }

    #[test]
    fn a_deleted_object_has_no_version() {
        let mut versions = listed(&[("web", "7")]);
        versions.apply(Event::Delete((name("web"), "8".to_owned())));
        assert_eq!(versions.version(&name("web")), None);
    }
}
