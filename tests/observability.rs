//! What operators see: every trigger's trace in a real Jaeger (with kube-apiserver's
//! spans under the status write), the controller's metrics scraped by a real Prometheus,
//! and export that never hurts the triggers when the collector is down or black-holed.

use std::time::Duration;

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
use common::replicas::{ALTERNATING, http_get, metrics_address, wait_holder};
use common::tide::{
    TEST_LEASE, create, manifest, start_replica_env, status, wait_event, wait_status,
};
use common::wait::eventually_within;
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

#[tokio::test(flavor = "multi_thread")]
async fn after_sigkill_the_catch_up_trace_comes_from_the_new_leader() {
    let env = TestEnv::on(traced_control_plane()).await;
    create_scaled_web(&env).await;
    let mut first = start_traced(&env, "first", &[]);
    wait_holder(&env, "first leader", |holder| holder == "first").await;
    let second = start_traced(&env, "second", &[]);
    wait_status(&env, "web", "two triggers", |s| s.history.len() >= 2).await;
    first.signal("KILL");
    first.wait(Duration::from_secs(10));
    let caught_up = wait_status(&env, "web", "a catch-up by the successor", |s| {
        s.history.first().is_some_and(|e| e.catch_up) && s.history.len() > 2
    })
    .await;
    let entry = status(&caught_up).history[0].clone();
    assert!(
        entry.superseded >= 1,
        "the failover outlasts an instant: {entry:?}"
    );
    let id = entry.trace_id.as_deref().expect("traced");
    let trace = jaeger().wait_trace(id, has_all_spans).await;
    let root = trace.one("trigger");
    assert_eq!(root.resource("service.instance.id"), Some(&json!("second")));
    assert_eq!(root.tag("tidal.catch_up"), Some(&json!(true)));
    assert_eq!(root.tag("tidal.superseded"), Some(&json!(entry.superseded)));
    check_trace(&trace, &entry, &env.namespace, "second");
    drop(second);
}

/// Creates `count` TidalSchedulers firing every second (Status mode, one Deployment).
async fn create_every_second(env: &TestEnv, count: usize) {
    env.api::<Deployment>()
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create Deployment web");
    for i in 0..count {
        let rules = [("tick", "CRON_TZ=UTC * * * * * *", 1)];
        let mut manifest = manifest(
            &format!("t{i}"),
            "apps/v1",
            "Deployment",
            "web",
            "Status",
            &rules,
        );
        manifest["spec"]["historyLimit"] = json!(100);
        create(env, manifest).await;
    }
}

/// Resident memory of `process`, in bytes.
fn rss(process: &Process) -> u64 {
    let status =
        std::fs::read_to_string(format!("/proc/{}/status", process.pid())).expect("status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    kib * 1024
}

/// The value of the metric sample `name` (labels included) in `process`'s /metrics.
fn sample(process: &Process, name: &str) -> f64 {
    let (_, body) = http_get(process, "/metrics");
    body.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

/// Runs 20 objects firing every second for 15 s against a collector at `endpoint` that
/// never takes a span; checks that every trigger stays on time, the span queue stays
/// within its bound, memory stays flat, and the loss is counted as `reason`.
async fn triggers_stay_on_time_with_a_collector_at(endpoint: &str, reason: &str) {
    const OBJECTS: usize = 20;
    const QUEUE: usize = 50;
    let env = TestEnv::on(traced_control_plane()).await;
    create_every_second(&env, OBJECTS).await;
    let queue = QUEUE.to_string();
    let controller = start_replica_env(
        &env,
        "lonely",
        &TEST_LEASE,
        env.control_plane().kubeconfig(),
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint),
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2000"),
            ("OTEL_BSP_MAX_QUEUE_SIZE", &queue),
            ("OTEL_BSP_SCHEDULE_DELAY", "100"),
        ],
    );
    metrics_address_when_serving(&controller).await;
    let triggers = |process: &Process| {
        sample(
            process,
            "tidal_scheduler_triggers_total{result=\"Succeeded\",kind=\"on_time\"}",
        )
    };
    let mut early = None;
    let mut most_queued = 0.0f64;
    eventually_within(Duration::from_secs(90), "300 triggers", || {
        most_queued = most_queued.max(sample(&controller, "tidal_scheduler_spans_queued"));
        let applied = triggers(&controller);
        if early.is_none() && applied >= 100.0 {
            early = Some(rss(&controller));
        }
        let done = if applied >= 300.0 {
            Ok(())
        } else {
            Err(format!("{applied} so far"))
        };
        async move { done }
    })
    .await;
    let late = rss(&controller);
    let early = early.expect("an RSS sample after 100 triggers");
    assert!(most_queued <= QUEUE as f64, "{most_queued} spans queued");
    let dropped = sample(
        &controller,
        &format!("tidal_scheduler_spans_dropped_total{{reason=\"{reason}\"}}"),
    );
    assert!(dropped > 0.0, "no span dropped for {reason}");
    assert!(
        late < early + 32 * 1024 * 1024,
        "RSS grew from {early} to {late} bytes between trigger 100 and 300"
    );
    for i in 0..OBJECTS {
        let object = env
            .api::<TidalScheduler>()
            .get(&format!("t{i}"))
            .await
            .expect("get");
        for entry in status(&object).history.iter().filter(|e| !e.catch_up) {
            let late_by = entry.execution_time.0.duration_since(entry.schedule_time.0);
            assert!(
                late_by < jiff::SignedDuration::from_secs(1) && entry.superseded == 0,
                "t{i}: a late trigger with the collector down: {entry:?}"
            );
        }
        // History is newest first; the oldest entry is the catch-up at start-up.
        let history = &status(&object).history;
        let missed = history.iter().rev().skip(1).filter(|e| e.catch_up).count();
        assert_eq!(
            missed, 0,
            "t{i}: a trigger was caught up, not fired on time: {history:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_unreachable_collector_never_delays_a_trigger() {
    let closed = format!("http://127.0.0.1:{}", common::http::free_port());
    triggers_stay_on_time_with_a_collector_at(&closed, "export_failed").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_black_holed_collector_never_delays_a_trigger() {
    // Accepts every connection and never answers.
    let hole = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let endpoint = format!("http://{}", hole.local_addr().expect("address"));
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in hole.incoming().flatten() {
            held.push(stream);
        }
    });
    triggers_stay_on_time_with_a_collector_at(&endpoint, "queue_full").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_right_after_a_trigger_still_exports_its_span() {
    let env = TestEnv::on(traced_control_plane()).await;
    create_scaled_web(&env).await;
    // Nothing is exported before the flush at exit.
    let mut controller = start_traced(&env, "leaving", &[("OTEL_BSP_SCHEDULE_DELAY", "600000")]);
    let first = wait_status(&env, "web", "a trigger", |s| !s.history.is_empty()).await;
    controller.signal("TERM");
    let id = status(&first).history[0].trace_id.clone().expect("traced");
    assert!(controller.wait(Duration::from_secs(30)).success());
    let trace = jaeger()
        .wait_trace(&id, |t| !t.named("trigger").is_empty())
        .await;
    assert_eq!(
        trace.one("trigger").resource("service.instance.id"),
        Some(&json!("leaving"))
    );
}

/// The names of `process`'s threads.
fn threads(process: &Process) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{}/task", process.pid()))
        .expect("tasks")
        .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
        .map(|name| name.trim().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn without_an_endpoint_nothing_is_exported_and_no_exporter_runs() {
    let env = TestEnv::on(traced_control_plane()).await;
    create_scaled_web(&env).await;
    let quiet = start_replica_env(
        &env,
        "quiet",
        &TEST_LEASE,
        env.control_plane().kubeconfig(),
        &[],
    );
    let traced = wait_status(&env, "web", "two triggers", |s| s.history.len() >= 2).await;
    assert!(
        status(&traced).history.iter().all(|e| e.trace_id.is_none()),
        "no trace id without export: {:?}",
        status(&traced).history
    );
    let names = threads(&quiet);
    assert!(!names.iter().any(|n| n == "span-export"), "{names:?}");
    let exporting = start_traced(&env, "exporting", &[]);
    metrics_address_when_serving(&exporting).await;
    assert!(threads(&exporting).iter().any(|n| n == "span-export"));
}

/// The queries of `deploy/monitoring/grafana-dashboard.json`: `(panel title, PromQL)`,
/// with Grafana's `$__rate_interval` as 30 s.
fn dashboard_queries() -> Vec<(String, String)> {
    let path = std::path::Path::new(common::cluster::REPO)
        .join("deploy/monitoring/grafana-dashboard.json");
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("JSON");
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().expect("title").to_owned();
        for target in panel["targets"].as_array().expect("targets") {
            let expr = target["expr"].as_str().expect("expr");
            queries.push((title.clone(), expr.replace("$__rate_interval", "30s")));
        }
    }
    queries
}

/// Panels that show data after any run with triggers.
const CORE_PANELS: [&str; 8] = [
    "Trigger lateness p50 / p99",
    "Trigger lateness heatmap",
    "Triggers by result and kind",
    "Leader per replica",
    "Reconciles by result",
    "Desired replicas per object",
    "Upcoming triggers",
    "Objects by Ready reason",
];

#[tokio::test(flavor = "multi_thread")]
async fn every_dashboard_query_runs_and_the_core_panels_show_data() {
    let env = TestEnv::on(traced_control_plane()).await;
    create_scaled_web(&env).await;
    let controller = start_traced(&env, "charted", &[]);
    let prometheus = Prometheus::start(
        &env.log_dir().join("prometheus"),
        &[metrics_address_when_serving(&controller).await],
    );
    prometheus
        .wait_value("tidal_scheduler_trigger_latency_seconds_count", |n| {
            n >= 3.0
        })
        .await;
    let queries = dashboard_queries();
    eventually_within(Duration::from_secs(60), "data in every core panel", || {
        let mut empty = Vec::new();
        for (title, query) in &queries {
            let samples = prometheus
                .vector(query)
                .unwrap_or_else(|e| panic!("panel {title:?}: {query} fails: {e}"));
            let has_data = samples
                .iter()
                .any(|s| s["value"][1].as_str().is_some_and(|v| v != "NaN"));
            if CORE_PANELS.contains(&title.as_str()) && !has_data {
                empty.push(format!("{title}: {query}"));
            }
        }
        let done = if empty.is_empty() {
            Ok(())
        } else {
            Err(format!("without data: {empty:#?}"))
        };
        async move { done }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_trigger_has_a_trace_with_its_error() {
    let env = TestEnv::on(traced_control_plane()).await;
    // Scale mode, and no Deployment `web`: the trigger fails with TargetNotFound.
    create(
        &env,
        manifest("web", "apps/v1", "Deployment", "web", "Scale", &ALTERNATING),
    )
    .await;
    let _controller = start_traced(&env, "failing", &[]);
    let failed = wait_status(&env, "web", "a failed trigger", |s| {
        s.history
            .first()
            .is_some_and(|e| e.result == tidal_scheduler::api::TriggerResult::Failed)
    })
    .await;
    let entry = status(&failed).history[0].clone();
    let id = entry.trace_id.as_deref().expect("traced");
    let trace = jaeger()
        .wait_trace(id, |t| !t.named("trigger").is_empty())
        .await;
    let root = trace.one("trigger");
    assert_eq!(root.tag("tidal.result"), Some(&json!("Failed")));
    assert_eq!(
        root.tag("otel.status_code"),
        Some(&json!("ERROR")),
        "{:#}",
        trace.0
    );
    let description = root.tag("otel.status_description").and_then(Value::as_str);
    assert!(
        description.is_some_and(|d| d.contains("not found")),
        "the error names the problem: {description:?}"
    );
}

/// Traces reach a collector that takes OTLP only over TLS and asks for a client
/// certificate: its CA from `OTEL_EXPORTER_OTLP_CERTIFICATE`, the client's identity from
/// `_CLIENT_CERTIFICATE` and `_CLIENT_KEY`. Without the identity the collector refuses
/// every batch, and the controller says so once — not silently, not once per batch.
#[tokio::test(flavor = "multi_thread")]
async fn traces_reach_a_collector_over_mutual_tls_and_a_refusal_is_said_once() {
    let env = TestEnv::new().await;
    let dir = common::target_tmpdir().join(format!("tls-jaeger-{}", env.namespace));
    let collector = common::tls_jaeger::TlsJaeger::start(&dir);
    let endpoint = collector.jaeger().otlp_http_endpoint();
    assert!(endpoint.starts_with("https://"), "{endpoint}");
    let ca = collector.ca().display().to_string();
    let (cert, key) = collector.client_identity();
    let (cert, key) = (cert.display().to_string(), key.display().to_string());
    create_scaled_web(&env).await;
    let tls = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "100"),
    ];
    let mut identified: Vec<(&str, &str)> = tls.to_vec();
    identified.extend([
        ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert.as_str()),
        ("OTEL_EXPORTER_OTLP_CLIENT_KEY", key.as_str()),
    ]);
    let kubeconfig = env.control_plane().kubeconfig();
    let mut controller =
        start_replica_env(&env, "with-identity", &TEST_LEASE, kubeconfig, &identified);
    let traced = wait_status(&env, "web", "a traced trigger", |s| {
        s.history.iter().any(|h| h.trace_id.is_some())
    })
    .await;
    let id = status(&traced)
        .history
        .iter()
        .find_map(|h| h.trace_id.clone())
        .expect("a trace id");
    let trace = collector
        .jaeger()
        .wait_trace(&id, |t| !t.named("trigger").is_empty())
        .await;
    assert_eq!(
        trace.one("trigger").resource("service.instance.id"),
        Some(&json!("with-identity"))
    );
    assert!(
        !controller.log().contains("exporting spans failed"),
        "{}",
        controller.log()
    );
    controller.signal("TERM");
    assert!(controller.wait(Duration::from_secs(30)).success());

    // The same collector without a client certificate: every batch refused.
    let anonymous = start_replica_env(&env, "anonymous", &TEST_LEASE, kubeconfig, &tls);
    let before = status(&traced).history.len();
    wait_status(&env, "web", "three more triggers", |s| {
        s.history.len() >= before + 3
    })
    .await;
    let refused = |log: &str| log.matches("exporting spans failed").count();
    eventually_within(Duration::from_secs(60), "the refusal said", || async {
        match refused(&anonymous.log()) {
            0 => Err(anonymous.log()),
            _ => Ok(()),
        }
    })
    .await;
    wait_status(&env, "web", "three triggers after the refusal", |s| {
        s.history.len() >= before + 6
    })
    .await;
    let log = anonymous.log();
    assert_eq!(refused(&log), 1, "said once, whatever the batches:\n{log}");
    assert!(
        sample(
            &anonymous,
            "tidal_scheduler_spans_dropped_total{reason=\"export_failed\"}"
        ) >= 3.0,
        "the lost spans are counted"
    );
}
