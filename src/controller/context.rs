//! What every reconcile shares: the client, the clock, the event sink, target discovery,
//! the write gate, and a little per-object memory that is safe to lose (it only makes
//! the next reconcile cheaper or tells on-time triggers from catch-ups; everything needed
//! to recover lives in status).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::Timestamp;
use kube::Client;
use tokio::time::Instant;

use super::consistency::{CacheVersion, ConsistencyStore};
use super::event::EventSink;
use super::in_flight::InFlight;
use super::metrics::ControllerMetrics;
use super::plan::ApplyProblem;
use super::target::Targets;
use crate::clock::Clock;
use crate::election::WriteGate;
use crate::sync::lock;

/// Shared by all reconciles.
pub struct Context {
    /// The Kubernetes client.
    pub client: Client,
    /// Wall-clock source.
    pub clock: Arc<dyn Clock>,
    /// Kubernetes Events.
    pub events: EventSink,
    /// Target discovery, checks and writes.
    pub targets: Targets,
    /// Whether this process may write.
    pub gate: WriteGate,
    /// Reconciles in progress.
    pub in_flight: InFlight,
    /// Our writes not yet seen by the watch cache (read your own writes).
    pub consistency: ConsistencyStore,
    /// Metrics of the reconciles.
    pub metrics: ControllerMetrics,
    /// The newest resourceVersion of each watch cache, by scope (a namespace, or `None`
    /// for all namespaces).
    caches: HashMap<Option<String>, CacheVersion>,
    memory: Mutex<HashMap<String, Memory>>,
    /// Per `namespace/name`: the UID and resourceVersion of this process's last status
    /// write, until its watch event (the echo) comes back.
    own_writes: Mutex<HashMap<String, (String, String)>>,
}

/// What this process remembers about one object (by `namespace/name`), within one
/// leadership term: reset when the UID or the term changes, since another leader may have
/// acted in between.
#[derive(Debug, Clone, Default)]
pub struct Memory {
    /// The object's UID.
    pub uid: String,
    /// The leadership term this was learned in.
    pub term: u64,
    /// The next trigger instant armed while acting; a trigger at it is on time.
    pub armed: Option<Timestamp>,
    /// Replicas this process last wrote to the target (Scale mode).
    pub applied: Option<i32>,
    /// The target ([`Target::id`](super::target::Target::id)) this term has claimed: written
    /// once under the term's own field manager, which moved its resourceVersion.
    pub claimed: Option<String>,
    /// Consecutive reconciles that ended with an apply problem.
    pub failures: u32,
    /// The last target check: when, and what it found (warnings or the problem).
    pub checked: Option<(Instant, Result<Vec<String>, ApplyProblem>)>,
    /// Warnings already sent as Events.
    pub warned: Vec<String>,
}

impl Context {
    /// A context; `in_flight` counts its reconciles (Events wait for them).
    pub fn new(
        client: Client,
        clock: Arc<dyn Clock>,
        events: EventSink,
        gate: WriteGate,
        in_flight: InFlight,
        caches: HashMap<Option<String>, CacheVersion>,
        metrics: ControllerMetrics,
    ) -> Context {
        Context {
            targets: Targets::new(client.clone()),
            client,
            clock,
            events,
            gate,
            in_flight,
            consistency: ConsistencyStore::default(),
            metrics,
            caches,
            memory: Mutex::new(HashMap::new()),
            own_writes: Mutex::new(HashMap::new()),
        }
    }

    /// The newest resourceVersion the watch cache holding `namespace` has seen.
    pub fn cache_version(&self, namespace: &str) -> Option<String> {
        self.caches
            .get(&Some(namespace.to_owned()))
            .or_else(|| self.caches.get(&None))
            .and_then(CacheVersion::newest)
    }

    /// What is remembered about `key` in this term, or a fresh memory when its UID or
    /// the term differs.
    pub fn recall(&self, key: &str, uid: &str) -> Memory {
        let term = self.gate.term();
        match self.lock().get(key) {
            Some(memory) if memory.uid == uid && memory.term == term => memory.clone(),
            _ => Memory {
                uid: uid.to_owned(),
                term,
                ..Memory::default()
            },
        }
    }

    /// Stores what a reconcile learned about `key`.
    pub fn remember(&self, key: String, memory: Memory) {
        self.lock().insert(key, memory);
    }

    /// Drops the memory of objects that no longer exist.
    pub fn forget_all_but(&self, existing: &HashSet<String>) {
        self.lock().retain(|key, _| existing.contains(key));
        lock(&self.own_writes).retain(|key, _| existing.contains(key));
    }

    /// Records that this process wrote `resource_version` of `key` (UID `uid`).
    pub fn wrote(&self, key: String, uid: String, resource_version: String) {
        lock(&self.own_writes).insert(key, (uid, resource_version));
    }

    /// Whether a watch event is the echo of this process's last write: the object is then
    /// exactly what the reconcile that wrote it computed, and needs no new reconcile.
    /// Each write is matched once.
    pub fn is_echo(&self, key: &str, uid: &str, resource_version: &str) -> bool {
        let mut own_writes = lock(&self.own_writes);
        let echo = own_writes
            .get(key)
            .is_some_and(|(u, rv)| u == uid && rv == resource_version);
        if echo {
            own_writes.remove(key);
        }
        echo
    }

    /// Objects remembered.
    pub fn remembered(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, Memory>> {
        lock(&self.memory)
    }
}
