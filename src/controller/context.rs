//! What every reconcile shares: the cluster it reads and writes, the clock, the write
//! gate, the consistency records, and each object's [`Memory`] within the term.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use jiff::SignedDuration;

use crate::clock::{Clock, DEFAULT_MAX_CLOCK_OFFSET};
use crate::controller::cache::calendars::CalendarsByScope;
use crate::controller::cache::consistency::Consistency;
use crate::controller::in_flight::InFlight;
use crate::controller::key::{ObjectKey, ObjectName};
use crate::controller::publish::metrics::ControllerMetrics;
use crate::controller::publish::trace::TriggerTracer;
use crate::controller::read_back::future_tolerance;
use crate::controller::reconcile::{Cluster, Memory};
use crate::election::WriteGate;
use crate::sync::lock;

/// Shared by all reconciles; `C` is the cluster they read and write.
pub struct Context<C> {
    /// The objects, their targets and Events.
    pub cluster: C,
    /// Wall-clock source.
    pub clock: Arc<dyn Clock>,
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

impl<C: Cluster> Context<C> {
    /// A context; `in_flight` counts its reconciles (Events wait for them).
    pub fn new(
        cluster: C,
        clock: Arc<dyn Clock>,
        gate: WriteGate,
        in_flight: InFlight,
        consistency: Consistency,
        metrics: ControllerMetrics,
    ) -> Context<C> {
        Context {
            cluster,
            clock,
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
    pub fn with_tracer(mut self, tracer: TriggerTracer) -> Context<C> {
        self.tracer = tracer;
        self
    }

    /// The context, reading calendars from `calendars`.
    pub fn with_calendars(mut self, calendars: CalendarsByScope) -> Context<C> {
        self.calendars = calendars;
        self
    }

    /// The context, trusting times read back from status up to `tolerance` ahead.
    pub fn with_status_tolerance(mut self, tolerance: SignedDuration) -> Context<C> {
        self.status_tolerance = tolerance;
        self
    }

    /// What is remembered about `key` in this term, or a fresh memory when its UID or
    /// the term differs.
    pub fn recall(&self, key: &ObjectKey) -> Memory {
        let term = self.gate.term();
        match self.lock().get(&key.name) {
            Some(memory) if memory.uid == key.uid && memory.term == term => memory.clone(),
            _ => Memory::fresh(&key.uid, term),
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
