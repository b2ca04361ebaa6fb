//! The trace of one trigger: a root span `trigger` that starts at the scheduled instant
//! and ends when the status write recording it is acknowledged — its duration is the
//! trigger's latency — with child spans for the target write and the status write. The
//! Kubernetes client sends the current span's `traceparent`, so the API server's spans
//! join (see `telemetry::api`).
//!
//! Every span's instants are given, not observed: the root starts at the scheduled
//! instant, the status write at the history entry's `executionTime`, and both end at the
//! write's acknowledgement — so the root's duration is exactly `executionTime −
//! scheduleTime` plus the status write. A write runs inside its span's
//! [`carrier`](crate::telemetry::carrier) so that its requests carry it.
//!
//! A trigger whose status write fails stays open in the object's memory and the next
//! attempt continues it: one trace per recorded trigger, whatever the retries.

use std::time::SystemTime;

use jiff::Timestamp;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _, Tracer as _};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::trace::SdkTracer;

use crate::api::{ApplyMode, TidalScheduler};
use crate::controller::plan::NewTrigger;
use crate::telemetry::carrier::{carried, carry};

/// Starts trigger traces; without export (`None`), starts nothing and costs nothing.
#[derive(Debug, Clone, Default)]
pub struct TriggerTracer {
    tracer: Option<SdkTracer>,
}

impl TriggerTracer {
    /// Traces with `tracer`, or not at all.
    pub fn new(tracer: Option<SdkTracer>) -> TriggerTracer {
        TriggerTracer { tracer }
    }

    /// A tracer that never traces.
    pub fn off() -> TriggerTracer {
        TriggerTracer::default()
    }

    /// The open trace of `new` on `object`: `open` when it is that trigger's, else a new
    /// one started at its scheduled instant (`open`, another trigger's, is abandoned).
    /// `None` without export.
    pub fn trace(
        &self,
        open: Option<&TriggerTrace>,
        object: &TidalScheduler,
        namespace: &str,
        new: &NewTrigger,
    ) -> Option<TriggerTrace> {
        let trigger = &new.trigger;
        if let Some(open) = open.filter(|open| open.is_of(new)) {
            return Some(open.clone());
        }
        let tracer = self.tracer.as_ref()?;
        let cron = object
            .spec
            .triggers
            .times
            .rules
            .iter()
            .find(|rule| rule.name == trigger.rule)
            .map_or_else(String::new, |rule| rule.cron.clone());
        let apply = match object.spec.apply {
            ApplyMode::Status => "Status",
            ApplyMode::Scale => "Scale",
        };
        let attributes = vec![
            KeyValue::new("tidal.rule", trigger.rule.clone()),
            KeyValue::new("tidal.replicas", i64::from(trigger.replicas)),
            KeyValue::new("tidal.catch_up", new.catch_up),
            KeyValue::new("tidal.superseded", new.superseded),
            KeyValue::new("tidal.apply", apply),
            KeyValue::new(
                "tidal.scheduler.name",
                object.metadata.name.clone().unwrap_or_default(),
            ),
            KeyValue::new("k8s.namespace.name", namespace.to_owned()),
            KeyValue::new("faas.trigger", "timer"),
            KeyValue::new("faas.time", trigger.schedule_time.to_string()),
            KeyValue::new("faas.cron", cron),
        ];
        let span = tracer
            .span_builder("trigger")
            .with_kind(SpanKind::Internal)
            .with_start_time(SystemTime::from(trigger.schedule_time))
            .with_attributes(attributes)
            .start_with_context(tracer, &Context::new());
        let context = Context::new().with_span(span);
        Some(TriggerTrace {
            inner: std::sync::Arc::new(Open {
                context,
                rule: trigger.rule.clone(),
                schedule_time: trigger.schedule_time,
                tracer: tracer.clone(),
            }),
        })
    }
}

/// A trigger's open trace; clones share it. Dropped unfinished (leadership lost, the
/// object deleted, a later trigger due first), it ends as abandoned.
#[derive(Debug, Clone)]
pub struct TriggerTrace {
    inner: std::sync::Arc<Open>,
}

#[derive(Debug)]
struct Open {
    context: Context,
    rule: String,
    schedule_time: Timestamp,
    tracer: SdkTracer,
}

impl Drop for Open {
    fn drop(&mut self) {
        let span = self.context.span();
        if span.is_recording() {
            span.set_status(Status::error(
                "abandoned before its status write was acknowledged",
            ));
            span.end();
        }
    }
}

impl TriggerTrace {
    fn is_of(&self, new: &NewTrigger) -> bool {
        self.inner.rule == new.trigger.rule && self.inner.schedule_time == new.trigger.schedule_time
    }

    /// The trace id (32 hex digits), if the trace is sampled (exported).
    pub fn trace_id(&self) -> Option<String> {
        let span = self.inner.context.span();
        let context = span.span_context();
        context.is_sampled().then(|| context.trace_id().to_string())
    }

    /// A child span `name` started at `start` (a client span: the requests made in its
    /// [`Child::carrier`] carry it).
    pub fn child(&self, name: &'static str, start: Timestamp) -> Child {
        let span = self
            .inner
            .tracer
            .span_builder(name)
            .with_kind(SpanKind::Client)
            .with_start_time(SystemTime::from(start))
            .start_with_context(&self.inner.tracer, &self.inner.context);
        Child {
            context: self.inner.context.with_span(span),
        }
    }

    /// Ends the trace at `acknowledged` (the status write's acknowledgement) with the
    /// trigger's result; `failure` is what applying found, if anything.
    pub fn finish(&self, acknowledged: Timestamp, failure: Option<&str>) {
        let span = self.inner.context.span();
        let lateness = acknowledged.duration_since(self.inner.schedule_time);
        span.set_attribute(KeyValue::new(
            "tidal.result",
            if failure.is_some() {
                "Failed"
            } else {
                "Succeeded"
            },
        ));
        span.set_attribute(KeyValue::new(
            "tidal.lateness_ms",
            lateness.as_secs_f64() * 1000.0,
        ));
        if let Some(message) = failure {
            span.set_status(Status::error(message.to_owned()));
        }
        span.end_with_timestamp(SystemTime::from(acknowledged));
    }
}

/// A child span of a trigger's trace: the target write or the status write.
#[derive(Debug)]
pub struct Child {
    context: Context,
}

impl Child {
    /// The `tracing` span to run the write in, so that its requests carry this span.
    pub fn carrier(&self) -> tracing::Span {
        carry(self.context.clone())
    }

    /// Ends the span at `at` (the client layer has set the HTTP status code of its last
    /// response) with, on failure, its error.
    pub fn end(self, at: Timestamp, failure: Option<String>) {
        let span = self.context.span();
        if let Some(message) = failure {
            span.set_status(Status::error(message));
        }
        span.end_with_timestamp(SystemTime::from(at));
    }
}

/// A `retry` event on the span the current write carries (a target write's): what
/// failed and when the next attempt goes out.
pub fn retry_event(error: &dyn std::fmt::Display, after: std::time::Duration) {
    tracing::debug!(%error, retry_in_ms = after.as_millis() as u64, "retrying a write");
    if let Some(context) = carried() {
        context.span().add_event(
            "retry",
            vec![
                KeyValue::new("error", error.to_string()),
                KeyValue::new("retry_in_ms", after.as_millis() as i64),
            ],
        );
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use opentelemetry::trace::TracerProvider as _;
    use opentelemetry_sdk::error::OTelSdkResult;
    use opentelemetry_sdk::trace::{
        SdkTracerProvider, SimpleSpanProcessor, SpanData, SpanExporter,
    };
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;

    use super::*;
    use crate::schedule::Trigger;
    use crate::telemetry::carrier::Carrier;
    use crate::telemetry::traces::SPANS;

    /// Keeps every exported span.
    #[derive(Debug, Clone, Default)]
    struct Capture(Arc<Mutex<Vec<SpanData>>>);

    impl SpanExporter for Capture {
        async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
            crate::sync::lock(&self.0).extend(batch);
            Ok(())
        }
    }

    impl Capture {
        fn named(&self, name: &str) -> Vec<SpanData> {
            crate::sync::lock(&self.0)
                .iter()
                .filter(|span| span.name == name)
                .cloned()
                .collect()
        }
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn object() -> TidalScheduler {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "scheduling.tidal.io/v1alpha1",
            "kind": "TidalScheduler",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {
                "targetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "apply": "Scale",
                "triggers": {"times": {"rules": [
                    {"name": "r", "cron": "CRON_TZ=UTC 0 0 8 * * *", "replicas": 3}
                ]}}
            }
        }))
        .unwrap()
    }

    fn trigger(at_text: &str) -> NewTrigger {
        NewTrigger {
            trigger: Trigger {
                rule: "r".to_owned(),
                replicas: 3,
                schedule_time: at(at_text),
                colliding: Vec::new(),
            },
            catch_up: false,
            superseded: 0,
        }
    }

    fn attribute(span: &SpanData, key: &str) -> Option<opentelemetry::Value> {
        span.attributes
            .iter()
            .find(|kv| kv.key.as_str() == key)
            .map(|kv| kv.value.clone())
    }

    fn setup() -> (SdkTracerProvider, TriggerTracer, Capture) {
        let capture = Capture::default();
        let provider = SdkTracerProvider::builder()
            .with_span_processor(SimpleSpanProcessor::new(capture.clone()))
            .build();
        let tracer = TriggerTracer::new(Some(provider.tracer("test")));
        (provider, tracer, capture)
    }

    #[test]
    fn a_trigger_spans_its_instant_to_the_acknowledgement_with_its_writes_under_it() {
        let (_provider, tracer, capture) = setup();
        let subscriber = tracing_subscriber::registry().with(Carrier.with_filter(
            tracing_subscriber::filter::Targets::new().with_target(SPANS, tracing::Level::INFO),
        ));
        let _default = tracing::subscriber::set_default(subscriber);
        let new = trigger("2026-01-01T08:00:00Z");
        let trace = tracer.trace(None, &object(), "shop", &new).unwrap();
        let id = trace.trace_id().expect("sampled");
        let again = tracer.trace(Some(&trace), &object(), "shop", &new).unwrap();
        assert_eq!(
            again.trace_id(),
            Some(id.clone()),
            "a retry continues the trace"
        );

        let write = trace.child("write target", at("2026-01-01T08:00:00.001Z"));
        write.carrier().in_scope(|| {
            retry_event(&"409 Conflict", Duration::from_millis(50));
        });
        write.end(at("2026-01-01T08:00:00.004Z"), Some("gave up".to_owned()));
        trace.finish(at("2026-01-01T08:00:00.009Z"), None);
        drop((trace, again));

        let root = capture.named("trigger").remove(0);
        assert_eq!(root.span_context.trace_id().to_string(), id);
        assert_eq!(
            root.start_time,
            SystemTime::from(at("2026-01-01T08:00:00Z"))
        );
        assert_eq!(
            root.end_time,
            SystemTime::from(at("2026-01-01T08:00:00.009Z"))
        );
        assert_eq!(attribute(&root, "tidal.result"), Some("Succeeded".into()));
        assert_eq!(attribute(&root, "tidal.lateness_ms"), Some(9.0.into()));
        assert_eq!(
            attribute(&root, "faas.cron"),
            Some("CRON_TZ=UTC 0 0 8 * * *".into())
        );
        assert_eq!(attribute(&root, "tidal.apply"), Some("Scale".into()));
        assert_eq!(attribute(&root, "k8s.namespace.name"), Some("shop".into()));
        assert_eq!(root.status, Status::Unset);
        assert_eq!(capture.named("trigger").len(), 1, "one trace, not two");

        let write = capture.named("write target").remove(0);
        assert_eq!(write.parent_span_id, root.span_context.span_id());
        assert_eq!(write.span_kind, SpanKind::Client);
        assert_eq!(write.status, Status::error("gave up"));
        let retries: Vec<_> = write.events.iter().filter(|e| e.name == "retry").collect();
        assert_eq!(retries.len(), 1, "{:?}", write.events);
    }

    #[test]
    fn a_trace_dropped_unfinished_ends_as_abandoned() {
        let (_provider, tracer, capture) = setup();
        let trace = tracer
            .trace(None, &object(), "shop", &trigger("2026-01-01T08:00:00Z"))
            .unwrap();
        drop(trace);
        let root = capture.named("trigger").remove(0);
        assert!(
            matches!(&root.status, Status::Error { description } if description.contains("abandoned")),
            "{:?}",
            root.status
        );
    }

    #[test]
    fn without_export_nothing_is_traced() {
        let off = TriggerTracer::off();
        assert!(
            off.trace(None, &object(), "shop", &trigger("2026-01-01T08:00:00Z"))
                .is_none()
        );
    }
}
