//! What the API server shows while a scenario runs, watched with an admin client that no
//! fault touches: every history entry of the objects' status (stamped with the watcher's
//! clock, microseconds, when first seen), each object's latest `desiredReplicas`, and
//! the Lease's holder over time.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tidal_harness::wait::poll;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tidal_scheduler::api::TidalScheduler;
use tokio::task::JoinHandle;

use crate::check::{Fault, Holding, Seen, took_over};

/// What the watches saw so far.
#[derive(Default)]
struct Watched {
    seen: Vec<Seen>,
    index: HashMap<(String, Timestamp), usize>,
    doubled: HashSet<(String, Timestamp)>,
    rewritten: usize,
    desired: HashMap<String, Option<i32>>,
    updates: Vec<Holding>,
}

/// The watches of one scenario; they stop when it is dropped.
pub struct Observer {
    state: Arc<Mutex<Watched>>,
    tasks: Vec<JoinHandle<()>>,
}

/// What the observer hands to the checker.
pub struct Observed {
    /// Entries in the order first seen.
    pub seen: Vec<Seen>,
    /// Entries seen again with other contents, or twice in one status.
    pub rewritten: usize,
    /// Every update of the Lease seen (renewals included), with its holder.
    pub updates: Vec<Holding>,
}

impl Observer {
    /// Watches the TidalSchedulers of `namespace` and the Lease `lease` of
    /// `lease_namespace`.
    pub fn start(
        client: Client,
        namespace: &str,
        (lease_namespace, lease): (&str, &str),
    ) -> Observer {
        let state: Arc<Mutex<Watched>> = Arc::default();
        let objects = {
            let state = state.clone();
            let api: Api<TidalScheduler> = Api::namespaced(client.clone(), namespace);
            tokio::spawn(async move {
                let mut stream = watcher(api, watcher::Config::default())
                    .default_backoff()
                    .applied_objects()
                    .boxed();
                while let Some(event) = stream.next().await {
                    if let Ok(object) = event {
                        record_status(&mut lock(&state), &object);
                    }
                }
            })
        };
        let lease_watch = {
            let state = state.clone();
            let api: Api<Lease> = Api::namespaced(client, lease_namespace);
            let config = watcher::Config::default().fields(&format!("metadata.name={lease}"));
            tokio::spawn(async move {
                let mut stream = watcher(api, config)
                    .default_backoff()
                    .applied_objects()
                    .boxed();
                while let Some(event) = stream.next().await {
                    if let Ok(lease) = event {
                        record_holder(&mut lock(&state), &lease);
                    }
                }
            })
        };
        Observer {
            state,
            tasks: vec![objects, lease_watch],
        }
    }

    /// The Lease's holder as last seen ("" when released or not yet seen).
    pub fn holder(&self) -> String {
        lock(&self.state)
            .updates
            .last()
            .map(|h| h.holder.clone())
            .unwrap_or_default()
    }

    /// Waits up to `limit` for a holder satisfying `wanted`; returns it.
    pub async fn wait_holder(
        &self,
        limit: Duration,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<String, String> {
        poll(Duration::from_millis(10), limit, || async {
            match self.holder() {
                holder if wanted(&holder) => Ok(holder),
                holder => Err(format!("after {limit:?} the Lease is held by {holder:?}")),
            }
        })
        .await
    }

    /// Waits up to `limit` for leadership after `fault`: see
    /// [`crate::check::took_over`]; returns the holder.
    pub async fn wait_takeover(&self, limit: Duration, fault: &Fault) -> Result<String, String> {
        let victim = &fault.target;
        poll(Duration::from_millis(10), limit, || async {
            let state = lock(&self.state);
            if let Some(update) =
                took_over(&state.updates, victim, fault.restarted_in_place, fault.start)
            {
                return Ok(update.holder.clone());
            }
            let seen: Vec<String> = (state.updates.iter())
                .filter(|u| u.at >= fault.start)
                .map(|u| format!("{} {:?}", u.at, u.holder))
                .collect();
            Err(format!(
                "no leader after the fault of {victim} at {} within {limit:?}; Lease updates since: {seen:?}",
                fault.start
            ))
        })
        .await
    }

    /// Each object's `desiredReplicas` as last seen.
    pub fn desired(&self) -> HashMap<String, Option<i32>> {
        lock(&self.state).desired.clone()
    }

    /// Whether `object` has an entry for the instant `at`.
    pub fn has_entry(&self, object: &str, at: Timestamp) -> bool {
        lock(&self.state)
            .index
            .contains_key(&(object.to_owned(), at))
    }

    /// Waits up to `limit` until every object in `objects` has an entry scheduled after
    /// `after`; whether they all had.
    pub async fn wait_applied_after(
        &self,
        objects: &[String],
        after: Timestamp,
        limit: Duration,
    ) -> bool {
        let all = || async {
            match self.all_applied_after(objects, after) {
                true => Ok(()),
                false => Err(String::new()),
            }
        };
        poll(Duration::from_millis(20), limit, all).await.is_ok()
    }

    fn all_applied_after(&self, objects: &[String], after: Timestamp) -> bool {
        let state = lock(&self.state);
        let applied: HashSet<&str> = state
            .seen
            .iter()
            .filter(|s| s.entry.schedule_time.0 > after)
            .map(|s| s.object.as_str())
            .collect();
        objects
            .iter()
            .all(|object| applied.contains(object.as_str()))
    }

    /// How long the first instant after `after` took to reach the objects that applied
    /// it, from its first entry seen to its last: what one burst of the workload's
    /// writes takes this cluster without a fault.
    pub fn burst_after(&self, after: Timestamp) -> Duration {
        burst_after(&lock(&self.state).seen, after)
    }

    /// Stops watching; what was seen.
    pub fn finish(self) -> Observed {
        for task in &self.tasks {
            task.abort();
        }
        let mut state = lock(&self.state);
        Observed {
            seen: std::mem::take(&mut state.seen),
            rewritten: state.rewritten,
            updates: std::mem::take(&mut state.updates),
        }
    }
}

impl Drop for Observer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn lock(state: &Mutex<Watched>) -> MutexGuard<'_, Watched> {
    state
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn record_status(state: &mut Watched, object: &TidalScheduler) {
    let now = Timestamp::now();
    let name = object.name_any();
    let Some(status) = &object.status else {
        return;
    };
    state.desired.insert(name.clone(), status.desired_replicas);
    let mut in_this_status = HashSet::new();
    for entry in &status.history {
        let key = (name.clone(), entry.schedule_time.0);
        if !in_this_status.insert(key.clone()) {
            if state.doubled.insert(key) {
                state.rewritten += 1;
            }
            continue;
        }
        match state.index.get(&key) {
            Some(&first) => {
                if state.seen[first].entry != *entry && state.doubled.insert(key) {
                    state.rewritten += 1;
                }
            }
            None => {
                state.index.insert(key, state.seen.len());
                state.seen.push(Seen {
                    object: name.clone(),
                    entry: entry.clone(),
                    observed: now,
                });
            }
        }
    }
}

/// See [`Observer::burst_after`].
fn burst_after(seen: &[Seen], after: Timestamp) -> Duration {
    let first_instant = seen
        .iter()
        .map(|s| s.entry.schedule_time.0)
        .filter(|&at| at > after)
        .min();
    let observed: Vec<Timestamp> = seen
        .iter()
        .filter(|s| Some(s.entry.schedule_time.0) == first_instant)
        .map(|s| s.observed)
        .collect();
    match (observed.iter().min(), observed.iter().max()) {
        (Some(first), Some(last)) => {
            Duration::try_from(last.duration_since(*first)).unwrap_or_default()
        }
        _ => Duration::ZERO,
    }
}

fn record_holder(state: &mut Watched, lease: &Lease) {
    let holder = lease
        .spec
        .as_ref()
        .and_then(|spec| spec.holder_identity.clone())
        .unwrap_or_default();
    state.updates.push(Holding {
        at: Timestamp::now(),
        holder,
    });
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
    use tidal_scheduler::api::{HistoryEntry, TriggerResult};

    use super::*;

    fn seen(object: &str, instant: i64, observed_ms: i64) -> Seen {
        let at = |ms: i64| Timestamp::from_millisecond(ms).expect("a timestamp");
        Seen {
            object: object.to_owned(),
            entry: HistoryEntry {
                rule: "even".to_owned(),
                schedule_time: Time(at(instant * 1000)),
                execution_time: MicroTime(at(observed_ms)),
                replicas: 2,
                result: TriggerResult::Succeeded,
                catch_up: false,
                superseded: 0,
                message: String::new(),
                trace_id: None,
            },
            observed: at(observed_ms),
        }
    }

    #[test]
    fn a_burst_spans_the_first_instant_after_from_first_to_last_seen() {
        let seen = [
            seen("a", 10, 10_050),
            seen("a", 20, 20_040),
            seen("b", 20, 23_500),
            seen("c", 20, 21_000),
            seen("c", 30, 39_000),
        ];
        let after = Timestamp::from_second(15).expect("a timestamp");
        assert_eq!(burst_after(&seen, after), Duration::from_millis(3_460));
    }

    #[test]
    fn no_instant_after_from_is_no_burst() {
        let after = Timestamp::from_second(15).expect("a timestamp");
        assert_eq!(burst_after(&[seen("a", 10, 10_050)], after), Duration::ZERO);
    }
}
