//! What every reconcile shares: the client, the clock, the event sink, target discovery,
//! the write gate, and a little per-object memory that is safe to lose (it only makes
//! the next reconcile cheaper or tells on-time triggers from catch-ups; everything needed
//! to recover lives in status).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::{SignedDuration, Timestamp};
use kube::Client;
use tokio::time::Instant;

use super::calendars::CalendarsByScope;
use super::consistency::Consistency;
use super::event::EventSink;
use super::in_flight::InFlight;
use super::key::{ObjectKey, ObjectName};
use super::metrics::ControllerMetrics;
use super::plan::ApplyProblem;
use super::read_back::future_tolerance;
use super::target::Targets;
use super::trace::{TriggerTrace, TriggerTracer};
use crate::clock::{Clock, DEFAULT_MAX_CLOCK_OFFSET};
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
    /// Our writes and what the watch caches have seen (read your own writes).
    pub consistency: Consistency,
    /// Metrics of the reconciles.
    pub metrics: ControllerMetrics,
    /// Starts the trace of each trigger (or nothing, without export).
    pub tracer: TriggerTracer,
    /// The calendar caches of each watched scope.
    pub calendars: CalendarsByScope,
    /// How far in the future a time read back from status may be.
    pub status_tolerance: SignedDuration,
    memory: Mutex<HashMap<ObjectName, Memory>>,
}

/// What this process remembers about one object (by namespace and name), within one
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
    /// The trace of a trigger not yet recorded in status (its status write failed).
    pub trace: Option<TriggerTrace>,
}

impl Context {
    /// A context; `in_flight` counts its reconciles (Events wait for them).
    pub fn new(
        client: Client,
        clock: Arc<dyn Clock>,
        events: EventSink,
        gate: WriteGate,
        in_flight: InFlight,
        consistency: Consistency,
        metrics: ControllerMetrics,
    ) -> Context {
        Context {
            targets: Targets::new(client.clone()),
            client,
            clock,
            events,
            gate,
            in_flight,
            consistency,
            metrics,
            tracer: TriggerTracer::off(),
            calendars: CalendarsByScope::default(),
            status_tolerance: future_tolerance(Some(DEFAULT_MAX_CLOCK_OFFSET)),
            memory: Mutex::new(HashMap::new()),
        }
    }

    /// The context, tracing each trigger with `tracer`.
    pub fn with_tracer(mut self, tracer: TriggerTracer) -> Context {
        self.tracer = tracer;
        self
    }

    /// The context, reading calendars from `calendars`.
    pub fn with_calendars(mut self, calendars: CalendarsByScope) -> Context {
        self.calendars = calendars;
        self
    }

    /// The context, trusting times read back from status up to `tolerance` ahead.
    pub fn with_status_tolerance(mut self, tolerance: SignedDuration) -> Context {
        self.status_tolerance = tolerance;
        self
    }

    /// What is remembered about `key` in this term, or a fresh memory when its UID or
    /// the term differs.
    pub fn recall(&self, key: &ObjectKey) -> Memory {
        let term = self.gate.term();
        match self.lock().get(&key.name) {
            Some(memory) if memory.uid == key.uid && memory.term == term => memory.clone(),
            _ => Memory {
                uid: key.uid.clone(),
                term,
                ..Memory::default()
            },
        }
    }

    /// Stores what a reconcile learned about `key`.
    pub fn remember(&self, key: &ObjectKey, memory: Memory) {
        self.lock().insert(key.name.clone(), memory);
    }

    /// Drops what is remembered of objects that no longer exist.
    pub fn forget_all_but(&self, existing: &HashSet<ObjectName>) {
        self.lock().retain(|name, _| existing.contains(name));
        self.consistency.forget_all_but(existing);
    }

    /// Objects remembered.
    pub fn remembered(&self) -> usize {
        self.lock().len()
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ObjectName, Memory>> {
        lock(&self.memory)
    }
}
