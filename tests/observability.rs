//! What operators see: every trigger's trace in a real Jaeger (with kube-apiserver's
//! spans under the status write), the controller's metrics scraped by a real Prometheus,
//! and export that never hurts the triggers when the collector is down or black-holed.

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tidal_harness as common;

use common::cluster::TestEnv;
use common::fixtures::deployment;
use common::jaeger::{Span, Trace, jaeger, traced_control_plane};
use common::process::Process;
use common::prometheus::{Prometheus, promtool};
use common::replicas::{ALTERNATING, http_get, metrics_address};
use common::tide::{
    TEST_LEASE, create, manifest, start_replica_env, status, wait_event, wait_status,
};
use tidal_scheduler::api::{HistoryEntry, TidalScheduler};

/// Creates the Deployment `web` and the TidalScheduler `web` scaling it (Scale mode)
/// with [`ALTERNATING`] rules: a trigger every 2 s.
async fn create_scaled_web(env: &TestEnv) {
    env.api::<Deployment>()
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create Deployment web");
    let mut manifest = manifest("web", "apps/v1", "Deployment", "web", "Scale", &ALTERNATING);
    manifest["spec"]["historyLimit"] = json!(50);
    create(env, manifest).await;
}

/// Starts replica `name` exporting traces to the shared Jaeger, with `vars` besides.
fn start_traced(env: &TestEnv, name: &str, vars: &[(&str, &str)]) -> Process {
    let endpoint = jaeger().otlp_http_endpoint();
    let mut all = vec![
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    all.extend_from_slice(vars);
    start_replica_env(
        env,
        name,
        &TEST_LEASE,
        env.control_plane().kubeconfig(),
        &all,
    )
}

/// Suspends `web`: no trigger after this, so counts can be compared exactly.
async fn suspend_web(env: &TestEnv) -> Vec<HistoryEntry> {
    env.api::<TidalScheduler>()
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"suspend": true}})),
        )
        .await
        .expect("suspend web");
    let suspended = wait_status(env, "web", "Suspended", |s| {
        common::tide::ready_reason_is(s, "Suspended")
    })
    .await;
    status(&suspended).history.clone()
}

fn micros(at: Timestamp) -> i64 {
    at.as_microsecond()
}

/// Checks the trace of `entry` against it: one root span `trigger` from the scheduled
/// instant to the acknowledgement of the status write, with its attributes, the target
/// and status writes under it, and kube-apiserver's spans under the status write.
fn check_trace(trace: &Trace, entry: &HistoryEntry, namespace: &str, replica: &str) {
    let root = trace.one("trigger");
    assert_eq!(root.parent_id(), None, "the trigger span is the root");
    assert_eq!(
        root.start_micros(),
        micros(entry.schedule_time.0),
        "starts at scheduleTime"
    );
    let expect = [
        ("tidal.rule", json!(entry.rule)),
        ("tidal.replicas", json!(entry.replicas)),
        ("tidal.catch_up", json!(entry.catch_up)),
        ("tidal.superseded", json!(entry.superseded)),
        ("tidal.result", json!("Succeeded")),
        ("tidal.apply", json!("Scale")),
        ("tidal.scheduler.name", json!("web")),
        ("k8s.namespace.name", json!(namespace)),
        ("faas.trigger", json!("timer")),
        ("faas.time", json!(entry.schedule_time.0.to_string())),
    ];
    for (key, value) in expect {
        assert_eq!(root.tag(key), Some(&value), "{key} of {:#}", trace.0);
    }
    let cron = ALTERNATING
        .iter()
        .find(|(name, ..)| *name == entry.rule)
        .map(|(_, cron, _)| *cron);
    assert_eq!(root.tag("faas.cron").and_then(Value::as_str), cron);
    assert_eq!(root.service(), "tidal-scheduler");
    assert_eq!(root.resource("service.instance.id"), Some(&json!(replica)));
    assert_eq!(
        root.resource("service.version"),
        Some(&json!(env!("CARGO_PKG_VERSION")))
    );

    let write_status = trace.one("write status");
    let write_target = trace.one("write target");
    for child in [&write_status, &write_target] {
        assert_eq!(
            child.parent_id().as_deref(),
            Some(root.id()),
            "{} under trigger",
            child.name()
        );
        assert_eq!(child.tag("http.response.status_code"), Some(&json!(200)));
    }
    // executionTime is taken as the status write goes out; the trace ends when it is
    // acknowledged: its duration is executionTime − scheduleTime plus the write.
    let execution = micros(entry.execution_time.0);
    let scheduled = micros(entry.schedule_time.0);
    assert!(
        (write_status.start_micros() - execution).abs() <= 1000,
        "the status write starts at executionTime: {} vs {execution}",
        write_status.start_micros()
    );
    assert!(
        (root.end_micros() - write_status.end_micros()).abs() <= 1000,
        "the trigger ends with its status write"
    );
    let unexplained =
        root.duration_micros() - (execution - scheduled) - write_status.duration_micros();
    assert!(
        unexplained.abs() <= 1000,
        "duration {} µs = executionTime − scheduleTime {} µs + status write {} µs (off by {unexplained})",
        root.duration_micros(),
        execution - scheduled,
        write_status.duration_micros()
    );
    let lateness = root
        .tag("tidal.lateness_ms")
        .and_then(Value::as_f64)
        .expect("lateness");
    assert!((lateness * 1000.0 - root.duration_micros() as f64).abs() <= 1000.0);

    let apiserver: Vec<Span<'_>> = trace
        .children_of(&write_status)
        .into_iter()
        .filter(|span| span.service() == "apiserver")
        .collect();
    assert!(
        !apiserver.is_empty(),
        "kube-apiserver's span under the status write: {:#}",
        trace.0
    );
}

/// Whether the spans of every service have arrived: the trigger, its writes, and
/// kube-apiserver's under the status write (each exports in batches of its own).
fn has_all_spans(trace: &Trace) -> bool {
    let names = ["trigger", "write target", "write status"];
    names.iter().all(|name| !trace.named(name).is_empty())
        && trace.named("write status").iter().any(|write| {
            trace
                .children_of(write)
                .iter()
                .any(|s| s.service() == "apiserver")
        })
}

#[tokio::test(flavor = "multi_thread")]
async fn every_trigger_has_one_trace_from_its_instant_to_the_status_write() {
    let env = TestEnv::on(traced_control_plane()).await;
    create_scaled_web(&env).await;
    let controller = start_traced(&env, "traced", &[]);
    let prometheus = Prometheus::start(
        &env.log_dir().join("prometheus"),
        &[metrics_address_when_serving(&controller).await],
    );
    wait_status(&env, "web", "five triggers", |s| s.history.len() >= 5).await;
    let history = suspend_web(&env).await;

    for entry in &history {
        let id = entry
            .trace_id
            .as_deref()
            .unwrap_or_else(|| panic!("no traceID in {entry:?}"));
        assert_eq!(id.len(), 32);
        let trace = jaeger().wait_trace(id, has_all_spans).await;
        check_trace(&trace, entry, &env.namespace, "traced");
    }
    let ids: std::collections::HashSet<_> = history.iter().map(|e| e.trace_id.clone()).collect();
    assert_eq!(ids.len(), history.len(), "one trace per trigger");

    // The trigger's Event names its trace.
    let latest = &history[0];
    let reason = if latest.catch_up {
        "CaughtUp"
    } else {
        "Triggered"
    };
    let id = latest.trace_id.as_deref().expect("traced");
    wait_event(&env, "web", reason, &format!("trace {id}")).await;

    // Prometheus: one latency observation per on-time trigger, exemplars that lead to
    // their traces.
    let on_time = history.iter().filter(|entry| !entry.catch_up).count();
    assert!(on_time >= 3, "{history:#?}");
    prometheus
        .wait_value("tidal_scheduler_trigger_latency_seconds_count", |count| {
            count == on_time as f64
        })
        .await;
    let exemplars = prometheus
        .exemplars("tidal_scheduler_trigger_latency_seconds_bucket")
        .expect("query exemplars");
    let exemplar = exemplars
        .iter()
        .find_map(|e| e["labels"]["trace_id"].as_str())
        .unwrap_or_else(|| panic!("no exemplar with a trace_id: {exemplars:?}"));
    assert!(
        history
            .iter()
            .any(|e| e.trace_id.as_deref() == Some(exemplar)),
        "exemplar {exemplar} is a recorded trigger's"
    );
    assert!(
        jaeger().trace(exemplar).is_some(),
        "exemplar {exemplar} in Jaeger"
    );

    // The exposition is clean OpenMetrics.
    let (code, body) = http_get(&controller, "/metrics");
    assert_eq!(code, 200);
    let (clean, lint) = promtool(&["check", "metrics"], &body);
    assert!(
        clean && lint.trim().is_empty(),
        "promtool check metrics:\n{lint}\n{body}"
    );
}

/// The metrics address of `process` once it serves (it logs it at start-up).
async fn metrics_address_when_serving(process: &Process) -> String {
    common::tide::wait_logged(process, "serving /healthz, /readyz and /metrics").await;
    metrics_address(process)
}
