//! The controller's metrics: triggers (latency of the on-time ones, with their trace id
//! as exemplar; counts by result and kind; superseded instants; conflicts), reconciles,
//! reconciles skipped on a stale cache, and each watch cache's newest resourceVersion.
//! What the objects' statuses say (by Ready reason, desired replicas, next trigger) is
//! read from the watch caches at each scrape: see [`ObjectStates`].

use std::sync::atomic::AtomicI64;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::SignedDuration;
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::exemplar::HistogramWithExemplars;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::api::TidalScheduler;
use crate::controller::plan::NewTrigger;
use crate::sync::lock;

/// The exemplar of a latency observation.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct TraceLabel {
    /// The trigger's trace id.
    pub trace_id: String,
}

/// Labels of `triggers_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct TriggerLabels {
    /// `Succeeded` or `Failed`.
    result: &'static str,
    /// `on_time` or `catch_up`.
    kind: &'static str,
}

/// Labels of `reconcile_total`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ResultLabel {
    result: &'static str,
}

/// How a reconcile ended (the label `result` of `reconcile_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReconcileResult {
    /// It ran to the end.
    Success,
    /// It failed and is retried with backoff.
    Error,
    /// Skipped: the watch cache had not yet seen this replica's own write.
    StaleSkip,
    /// Skipped: this replica may not write.
    NotLeading,
}

impl ReconcileResult {
    fn as_str(self) -> &'static str {
        match self {
            ReconcileResult::Success => "success",
            ReconcileResult::Error => "error",
            ReconcileResult::StaleSkip => "stale_skip",
            ReconcileResult::NotLeading => "not_leading",
        }
    }
}

/// Buckets of `trigger_latency_seconds`: 1 ms to 60 s.
const LATENCY_BUCKETS: [f64; 17] = [
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0,
    60.0,
];

/// `events_dropped_total{reason}`: Events not published (`queue_full`,
/// `publish_failed`, `not_leading`); cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct DroppedEvents(Family<Vec<(&'static str, &'static str)>, Counter>);

impl DroppedEvents {
    /// Counts one Event dropped for `reason`.
    pub fn count(&self, reason: &'static str) {
        self.0.get_or_create(&vec![("reason", reason)]).inc();
    }
}

/// The controller's metrics; cheap to clone.
#[derive(Debug, Clone)]
pub struct ControllerMetrics {
    events_dropped: DroppedEvents,
    stale_sync_skips: Counter,
    store_resource_version: Family<Vec<(String, String)>, Gauge<i64, AtomicI64>>,
    trigger_latency: HistogramWithExemplars<TraceLabel>,
    triggers: Family<TriggerLabels, Counter>,
    superseded: Counter,
    conflicts: Counter,
    reconciles: Family<ResultLabel, Counter>,
    reconcile_duration: Histogram,
    objects: ObjectStates,
}

impl Default for ControllerMetrics {
    fn default() -> ControllerMetrics {
        ControllerMetrics {
            events_dropped: DroppedEvents::default(),
            stale_sync_skips: Counter::default(),
            store_resource_version: Family::default(),
            trigger_latency: HistogramWithExemplars::new(LATENCY_BUCKETS.into_iter()),
            triggers: Family::default(),
            superseded: Counter::default(),
            conflicts: Counter::default(),
            reconciles: Family::default(),
            reconcile_duration: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(0.0005, 2.0, 16),
            ),
            objects: ObjectStates::default(),
        }
    }
}

impl ControllerMetrics {
    /// Registers the controller's metrics on `registry`; with `per_object`, also the
    /// series per object (`desired_replicas`, `next_trigger_timestamp_seconds`).
    pub fn register(registry: &mut Registry, per_object: bool) -> ControllerMetrics {
        let metrics = ControllerMetrics {
            objects: ObjectStates {
                per_object,
                ..ObjectStates::default()
            },
            ..ControllerMetrics::default()
        };
        registry.register(
            "stale_sync_skips",
            "Reconciles skipped because the watch cache had not yet seen this replica's own write",
            metrics.stale_sync_skips.clone(),
        );
        registry.register(
            "store_resource_version",
            "Newest resourceVersion each watch cache has seen (label watch: a namespace, or all)",
            metrics.store_resource_version.clone(),
        );
        registry.register(
            "trigger_latency_seconds",
            "From an on-time trigger's scheduled instant to the acknowledgement of the status write recording it",
            metrics.trigger_latency.clone(),
        );
        registry.register(
            "triggers",
            "Triggers recorded in status, by result (Succeeded, Failed) and kind (on_time, catch_up)",
            metrics.triggers.clone(),
        );
        registry.register(
            "superseded_instants",
            "Earlier fire instants that a recorded trigger replaced without applying them",
            metrics.superseded.clone(),
        );
        registry.register(
            "rule_conflicts",
            "Recorded triggers at which several rules fired at once",
            metrics.conflicts.clone(),
        );
        registry.register(
            "reconcile",
            "Reconciles by result (success, error, stale_skip, not_leading)",
            metrics.reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Time one reconcile took, writes included",
            metrics.reconcile_duration.clone(),
        );
        registry.register(
            "events_dropped",
            "Kubernetes Events not published, by reason (queue_full, publish_failed, not_leading)",
            metrics.events_dropped.0.clone(),
        );
        registry.register_collector(Box::new(metrics.objects.clone()));
        metrics
    }

    /// Where Events not published are counted.
    pub fn events_dropped(&self) -> DroppedEvents {
        self.events_dropped.clone()
    }

    /// Counts a reconcile skipped on a stale cache.
    pub fn stale_sync_skip(&self) {
        self.stale_sync_skips.inc();
    }

    /// The gauge of the newest resourceVersion the cache of `watch` has seen; look it up
    /// once, then set it per watch event.
    pub fn store_resource_version(&self, watch: &str) -> Gauge<i64, AtomicI64> {
        self.store_resource_version
            .get_or_create(&vec![("watch".to_owned(), watch.to_owned())])
            .clone()
    }

    /// Counts a trigger recorded in status `latency` after its instant; an on-time one's
    /// latency is observed with its trace id, if traced.
    pub fn trigger(
        &self,
        new: &NewTrigger,
        succeeded: bool,
        latency: SignedDuration,
        trace_id: Option<&str>,
    ) {
        let labels = TriggerLabels {
            result: if succeeded { "Succeeded" } else { "Failed" },
            kind: if new.catch_up { "catch_up" } else { "on_time" },
        };
        self.triggers.get_or_create(&labels).inc();
        self.superseded
            .inc_by(u64::try_from(new.superseded).unwrap_or(0));
        if new.trigger.is_conflict() {
            self.conflicts.inc();
        }
        if !new.catch_up {
            let exemplar = trace_id.map(|id| TraceLabel {
                trace_id: id.to_owned(),
            });
            self.trigger_latency
                .observe(latency.as_secs_f64().max(0.0), exemplar, None);
        }
    }

    /// Counts a reconcile that ended as `result` after `took`.
    pub fn reconciled(&self, result: ReconcileResult, took: Duration) {
        self.reconciles
            .get_or_create(&ResultLabel {
                result: result.as_str(),
            })
            .inc();
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    /// Reads the objects' states from `stores` (the controller's watch caches) from now on.
    pub fn read_objects_from(&self, stores: Vec<Store<TidalScheduler>>) {
        *lock(&self.objects.stores) = stores;
    }
}

/// What the cached objects' statuses say, computed at each scrape (as kube-state-metrics
/// does): `objects{reason}` (count by Ready reason, `Unknown` before the first status),
/// and per object `desired_replicas` and `next_trigger_timestamp_seconds`. Every replica
/// exports them — standbys watch the same statuses — and a deleted object's series go
/// with it.
#[derive(Debug, Clone, Default)]
pub struct ObjectStates {
    stores: Arc<Mutex<Vec<Store<TidalScheduler>>>>,
    per_object: bool,
}

/// Labels of a per-object series.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ObjectLabels {
    namespace: String,
    name: String,
}

/// Labels of `objects`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
struct ReasonLabel {
    reason: String,
}

impl Collector for ObjectStates {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let objects: Vec<_> = lock(&self.stores)
            .iter()
            .flat_map(|store| store.state())
            .collect();
        let by_reason: Family<ReasonLabel, Gauge> = Family::default();
        let desired: Family<ObjectLabels, Gauge> = Family::default();
        let next: Family<ObjectLabels, Gauge<f64, std::sync::atomic::AtomicU64>> =
            Family::default();
        for object in &objects {
            let status = object.status.as_ref();
            let reason = status
                .and_then(|status| status.ready())
                .map_or("Unknown", |ready| ready.reason.as_str());
            by_reason
                .get_or_create(&ReasonLabel {
                    reason: reason.to_owned(),
                })
                .inc();
            if !self.per_object {
                continue;
            }
            let labels = ObjectLabels {
                namespace: object.namespace().unwrap_or_default(),
                name: object.name_any(),
            };
            if let Some(replicas) = status.and_then(|status| status.desired_replicas) {
                desired.get_or_create(&labels).set(i64::from(replicas));
            }
            if let Some(at) = status.and_then(|status| status.next_trigger_time.as_ref()) {
                next.get_or_create(&labels)
                    .set(at.0.as_millisecond() as f64 / 1000.0);
            }
        }
        let metric = encoder.encode_descriptor(
            "objects",
            "TidalSchedulers in the watch caches by the reason of their Ready condition",
            None,
            by_reason.metric_type(),
        )?;
        by_reason.encode(metric)?;
        if self.per_object {
            let metric = encoder.encode_descriptor(
                "desired_replicas",
                "status.desiredReplicas of each TidalScheduler",
                None,
                desired.metric_type(),
            )?;
            desired.encode(metric)?;
            let metric = encoder.encode_descriptor(
                "next_trigger_timestamp_seconds",
                "status.nextTriggerTime of each TidalScheduler, as Unix seconds",
                None,
                next.metric_type(),
            )?;
            next.encode(metric)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::Trigger;
    use crate::telemetry::metrics::{Metrics, registry};

    #[test]
    fn stale_skips_and_cache_versions_are_exported() {
        let mut registry = registry();
        let metrics = ControllerMetrics::register(&mut registry, true);
        metrics.stale_sync_skip();
        metrics.store_resource_version("all").set(41);
        metrics.store_resource_version("all").set(42);
        let text = Metrics::new(registry).encode();
        assert!(
            text.contains("tidal_scheduler_stale_sync_skips_total 1\n"),
            "{text}"
        );
        assert!(
            text.contains("tidal_scheduler_store_resource_version{watch=\"all\"} 42\n"),
            "{text}"
        );
    }

    fn new_trigger(catch_up: bool, superseded: i64, colliding: &[&str]) -> NewTrigger {
        NewTrigger {
            trigger: Trigger {
                rule: "r".to_owned(),
                replicas: 3,
                schedule_time: "2026-01-01T00:00:00Z".parse().unwrap(),
                colliding: colliding.iter().map(|s| (*s).to_owned()).collect(),
            },
            catch_up,
            superseded,
        }
    }

    #[test]
    fn on_time_triggers_are_timed_with_their_trace_and_every_trigger_is_counted() {
        let mut registry = registry();
        let metrics = ControllerMetrics::register(&mut registry, true);
        let trace = "4bf92f3577b34da6a3ce929d0e0e4736";
        metrics.trigger(
            &new_trigger(false, 0, &[]),
            true,
            SignedDuration::from_millis(3),
            Some(trace),
        );
        metrics.trigger(
            &new_trigger(true, 5, &["r", "s"]),
            false,
            SignedDuration::from_secs(30),
            None,
        );
        let text = Metrics::new(registry).encode();
        for line in [
            "tidal_scheduler_trigger_latency_seconds_count 1\n",
            "tidal_scheduler_trigger_latency_seconds_bucket{le=\"0.005\"} 1 # {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"} 0.003\n",
            "tidal_scheduler_triggers_total{result=\"Succeeded\",kind=\"on_time\"} 1\n",
            "tidal_scheduler_triggers_total{result=\"Failed\",kind=\"catch_up\"} 1\n",
            "tidal_scheduler_superseded_instants_total 5\n",
            "tidal_scheduler_rule_conflicts_total 1\n",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
    }

    #[test]
    fn reconciles_are_counted_by_result() {
        let mut registry = registry();
        let metrics = ControllerMetrics::register(&mut registry, true);
        metrics.reconciled(ReconcileResult::Success, Duration::from_millis(2));
        metrics.reconciled(ReconcileResult::StaleSkip, Duration::ZERO);
        let text = Metrics::new(registry).encode();
        assert!(
            text.contains("tidal_scheduler_reconcile_total{result=\"success\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("tidal_scheduler_reconcile_total{result=\"stale_skip\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("tidal_scheduler_reconcile_duration_seconds_count 2\n"),
            "{text}"
        );
    }

    #[test]
    fn object_states_are_read_from_the_caches_at_each_scrape() {
        use kube::runtime::reflector;
        use kube::runtime::watcher::Event;
        let mut registry = registry();
        let metrics = ControllerMetrics::register(&mut registry, true);
        let (reader, mut writer) = reflector::store::<TidalScheduler>();
        metrics.read_objects_from(vec![reader]);
        let object: TidalScheduler = serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.tidal.io/v1alpha1",
            "kind": "TidalScheduler",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "triggers": {"times": {"rules": [{"name": "r", "cron": "0 0 8 * * *", "replicas": 3}]}}
            },
            "status": {
                "desiredReplicas": 3,
                "nextTriggerTime": "2026-01-02T08:00:00Z",
                "conditions": [{"type": "Ready", "status": "True", "reason": "TriggerActive",
                    "message": "", "lastTransitionTime": "2026-01-01T08:00:00Z"}]
            }
        }))
        .unwrap();
        writer.apply_watcher_event(&Event::Apply(object));
        let text = Metrics::new(registry).encode();
        for line in [
            "tidal_scheduler_objects{reason=\"TriggerActive\"} 1\n",
            "tidal_scheduler_desired_replicas{namespace=\"shop\",name=\"web\"} 3\n",
            "tidal_scheduler_next_trigger_timestamp_seconds{namespace=\"shop\",name=\"web\"} 1767340800.0\n",
        ] {
            assert!(text.contains(line), "no {line:?} in\n{text}");
        }
    }
}
