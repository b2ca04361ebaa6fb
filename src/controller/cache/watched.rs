//! What a watch of one kind holds of its objects: per namespace and name, the
//! resourceVersion last observed and what is kept of the object. Offered only while the
//! watch is healthy — listed and not failed since its last delivery — so that a reader
//! falls back to the API server instead of trusting a cache that may be behind.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use kube::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event, watcher};
use serde::de::DeserializeOwned;

use super::Slim;
use super::consistency::compare_resource_versions;
use crate::sync::lock;

/// An object within its kind: namespace and name.
pub type Name = (String, String);

/// What is held of one object: its resourceVersion and what is kept of it.
pub type Held<T> = (String, T);

/// One kind's objects, as its watch (and, for versions, our writes) left them.
#[derive(Debug)]
pub struct Watched<T> {
    /// Whether the watch has listed and not failed since its last delivery.
    healthy: bool,
    /// Whether a failure was logged since the watch was last healthy.
    warned: bool,
    objects: BTreeMap<Name, Held<T>>,
    /// Filled by a (re-)list in progress; replaces `objects` when it is done.
    relisting: Option<BTreeMap<Name, Held<T>>>,
}

impl<T> Default for Watched<T> {
    fn default() -> Self {
        Watched {
            healthy: false,
            warned: false,
            objects: BTreeMap::new(),
            relisting: None,
        }
    }
}

impl<T: Clone> Watched<T> {
    /// What a watch that listed `objects` holds.
    #[cfg(test)]
    pub fn listed(objects: impl IntoIterator<Item = (Name, Held<T>)>) -> Watched<T> {
        let mut watched = Watched::default();
        watched.apply(Event::Init);
        for object in objects {
            watched.apply(Event::InitApply(object));
        }
        watched.apply(Event::InitDone);
        watched
    }

    /// What is held of `name`; `None` when the watch is not healthy or holds no such object.
    pub fn get(&self, name: &Name) -> Option<&Held<T>> {
        self.healthy.then(|| self.objects.get(name))?
    }

    /// The objects held in `namespace` by name, while the watch is healthy.
    pub fn in_namespace<'a>(
        &'a self,
        namespace: &'a str,
    ) -> Option<impl Iterator<Item = (&'a str, &'a Held<T>)>> {
        let first = (namespace.to_owned(), String::new());
        let held = self.objects.range(first..);
        let held = held.take_while(move |((held_namespace, _), _)| held_namespace == namespace);
        self.healthy
            .then(|| held.map(|((_, name), held)| (name.as_str(), held)))
    }

    /// Notes what a write of ours returned (kept unless the watch already holds newer).
    pub fn wrote(&mut self, name: Name, held: Held<T>) {
        if self.healthy {
            keep_newest(&mut self.objects, name, held);
        }
    }

    /// Applies one watch event.
    pub fn apply(&mut self, event: Event<(Name, Held<T>)>) {
        match event {
            Event::Init => self.relisting = Some(BTreeMap::new()),
            Event::InitApply((name, held)) => {
                let relisting = self.relisting.get_or_insert_with(BTreeMap::new);
                relisting.insert(name, held);
            }
            Event::InitDone => {
                let mut listed = self.relisting.take().unwrap_or_default();
                // A write of ours may have returned a newer version meanwhile.
                for (name, held) in std::mem::take(&mut self.objects) {
                    if listed.contains_key(&name) {
                        keep_newest(&mut listed, name, held);
                    }
                }
                self.objects = listed;
                self.recovered();
            }
            Event::Apply((name, held)) => {
                keep_newest(&mut self.objects, name, held);
                self.recovered();
            }
            Event::Delete((name, _)) => {
                self.objects.remove(&name);
                self.recovered();
            }
        }
    }

    /// Notes a failed watch; whether to log it (the first failure since it was healthy).
    pub fn failed(&mut self) -> bool {
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

/// Stores `held` for `name` unless a newer version is held (a watch event can arrive after
/// the response of a later write); a malformed version replaces what is held.
fn keep_newest<T>(objects: &mut BTreeMap<Name, Held<T>>, name: Name, held: Held<T>) {
    let newer = |(version, _): &Held<T>| {
        compare_resource_versions(version, &held.0).is_some_and(|order| order.is_gt())
    };
    if !objects.get(&name).is_some_and(newer) {
        objects.insert(name, held);
    }
}

/// Feeds `watched` from a watch of `api` (retried with backoff, objects read [`Slim`]),
/// forever, keeping of each object what `keep` returns. `what` names the kind in the log
/// line of a failure.
pub async fn follow<K, T>(
    api: Api<Slim<K>>,
    config: watcher::Config,
    what: String,
    watched: Arc<Mutex<Watched<T>>>,
    keep: fn(K) -> (Name, Held<T>),
) where
    K: kube::Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    T: Clone,
{
    watcher(api, config)
        .default_backoff()
        .for_each(|event| {
            let mut watched = lock(&watched);
            match event {
                Ok(event) => watched.apply(kept(event, |Slim(object)| keep(object))),
                Err(error) => {
                    if watched.failed() {
                        tracing::warn!(resource = %what, %error,
                            "watching failed; the API server is read instead until it recovers");
                    }
                }
            }
            std::future::ready(())
        })
        .await;
}

/// The event with `keep` applied to its object.
fn kept<K, U>(event: Event<K>, keep: impl Fn(K) -> U) -> Event<U> {
    match event {
        Event::Apply(object) => Event::Apply(keep(object)),
        Event::Delete(object) => Event::Delete(keep(object)),
        Event::Init => Event::Init,
        Event::InitApply(object) => Event::InitApply(keep(object)),
        Event::InitDone => Event::InitDone,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(name: &str) -> Name {
        ("default".to_owned(), name.to_owned())
    }

    fn held(version: &str) -> Held<()> {
        (version.to_owned(), ())
    }

    fn version(watched: &Watched<()>, object: &str) -> Option<String> {
        watched
            .get(&name(object))
            .map(|(version, ())| version.clone())
    }

    fn listed(objects: &[(&str, &str)]) -> Watched<()> {
        Watched::listed(
            objects
                .iter()
                .map(|(object, version)| (name(object), held(version))),
        )
    }

    #[test]
    fn nothing_is_offered_before_the_first_list_is_done() {
        let mut watched = Watched::default();
        watched.apply(Event::Init);
        watched.apply(Event::InitApply((name("web"), held("7"))));
        watched.wrote(name("web"), held("8"));
        assert_eq!(version(&watched, "web"), None);
        assert!(watched.in_namespace("default").is_none());
        watched.apply(Event::InitDone);
        assert_eq!(version(&watched, "web").as_deref(), Some("7"));
        assert_eq!(
            watched.in_namespace("default").map(Iterator::count),
            Some(1)
        );
    }

    #[test]
    fn a_late_watch_event_never_replaces_the_version_our_write_returned() {
        let mut watched = listed(&[("web", "7")]);
        watched.wrote(name("web"), held("9"));
        watched.apply(Event::Apply((name("web"), held("8"))));
        assert_eq!(version(&watched, "web").as_deref(), Some("9"));
        watched.apply(Event::Apply((name("web"), held("10"))));
        assert_eq!(version(&watched, "web").as_deref(), Some("10"));
    }

    #[test]
    fn a_failed_watch_offers_nothing_until_it_delivers_again() {
        let mut watched = listed(&[("web", "7")]);
        assert!(watched.failed(), "the first failure is logged");
        assert!(!watched.failed(), "the next ones are not");
        assert_eq!(version(&watched, "web"), None);
        assert!(watched.in_namespace("default").is_none());
        watched.wrote(name("web"), held("9"));
        watched.apply(Event::Apply((name("api"), held("8"))));
        assert_eq!(version(&watched, "web").as_deref(), Some("7"));
        assert!(watched.failed(), "a failure after recovery is logged again");
    }

    #[test]
    fn a_relist_drops_deleted_objects_and_keeps_newer_writes() {
        let mut watched = listed(&[("web", "7"), ("gone", "3")]);
        watched.apply(Event::Init);
        watched.apply(Event::InitApply((name("web"), held("8"))));
        watched.wrote(name("web"), held("12"));
        watched.apply(Event::InitDone);
        assert_eq!(version(&watched, "web").as_deref(), Some("12"));
        assert_eq!(version(&watched, "gone"), None);
    }

    #[test]
    fn a_relist_replaces_what_is_kept_of_an_object_that_changed() {
        let mut watched: Watched<&str> = Watched::default();
        watched.apply(Event::Init);
        watched.apply(Event::InitApply((name("hpa"), ("7".to_owned(), "web"))));
        watched.apply(Event::InitDone);
        watched.apply(Event::Init);
        watched.apply(Event::InitApply((name("hpa"), ("9".to_owned(), "api"))));
        watched.apply(Event::InitDone);
        assert_eq!(
            watched.get(&name("hpa")).map(|(_, kept)| *kept),
            Some("api")
        );
    }

    #[test]
    fn a_namespace_holds_its_own_objects_only() {
        let object =
            |namespace: &str, name: &str| ((namespace.to_owned(), name.to_owned()), held("1"));
        let watched = Watched::listed([
            object("a", "x"),
            object("shop", "web"),
            object("shop", "db"),
            object("shop-2", "web"),
            object("z", "web"),
        ]);
        let names: Vec<&str> = (watched.in_namespace("shop").expect("healthy"))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(names, ["db", "web"]);
        assert_eq!(watched.in_namespace("none").map(Iterator::count), Some(0));
    }

    #[test]
    fn a_deleted_object_is_not_held() {
        let mut watched = listed(&[("web", "7")]);
        watched.apply(Event::Delete((name("web"), held("8"))));
        assert_eq!(version(&watched, "web"), None);
    }
}
