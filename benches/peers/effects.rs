//! The one watcher all peers are measured by: an admin client's watch on the effect's
//! objects, each effect stamped with this process's clock (microseconds) when first
//! seen — not with a second-precision field written by the peer itself.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::batch::v1::Job;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::task::JoinHandle;

/// When each object's effect was first seen, by object name.
type Seen = Arc<Mutex<HashMap<String, Timestamp>>>;

/// A running watch of one namespace's effects; it stops when dropped.
pub struct Effects {
    seen: Seen,
    task: JoinHandle<()>,
}

impl Effects {
    /// Jobs created in `namespace`, keyed by the CronJob that owns them.
    pub fn jobs_created(client: Client, namespace: &str) -> Effects {
        let api: Api<Job> = Api::namespaced(client, namespace);
        Effects::watch(api, |job: &Job| {
            job.owner_references()
                .iter()
                .find(|owner| owner.kind == "CronJob")
                .map(|owner| owner.name.clone())
        })
    }

    /// Deployments of `namespace` whose `spec.replicas` became `replicas`.
    pub fn replicas_set(client: Client, namespace: &str, replicas: i32) -> Effects {
        let api: Api<Deployment> = Api::namespaced(client, namespace);
        Effects::watch(api, move |deployment: &Deployment| {
            let spec = deployment.spec.as_ref()?;
            (spec.replicas == Some(replicas)).then(|| deployment.name_any())
        })
    }

    fn watch<K>(api: Api<K>, effect_of: impl Fn(&K) -> Option<String> + Send + 'static) -> Effects
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send,
        K: 'static,
    {
        let seen: Seen = Arc::default();
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut stream = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
                    .boxed();
                while let Some(event) = stream.next().await {
                    let now = Timestamp::now();
                    if let Ok(object) = event
                        && let Some(name) = effect_of(&object)
                    {
                        seen.lock()
                            .expect("not poisoned")
                            .entry(name)
                            .or_insert(now);
                    }
                }
            })
        };
        Effects { seen, task }
    }

    /// How many effects were seen so far.
    pub fn count(&self) -> usize {
        self.seen.lock().expect("not poisoned").len()
    }

    /// Waits until `expected` effects were seen or `deadline` passed; returns what was
    /// seen, by object.
    pub async fn wait(&self, expected: usize, deadline: Timestamp) -> HashMap<String, Timestamp> {
        while self.count() < expected && Timestamp::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        self.seen.lock().expect("not poisoned").clone()
    }
}

impl Drop for Effects {
    fn drop(&mut self) {
        self.task.abort();
    }
}
