//! The controller side: a controller process with objects of its own, its latencies read
//! from its JSON log (`trigger applied`, `lateness_ms`), its CPU from `/proc`, and when
//! its Events were published.

use std::collections::HashSet;
use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, PostParams};
use serde_json::Value;
use tidal_harness::api_requests::Requests;
use tidal_harness::cluster::TestEnv;
use tidal_harness::fixtures::deployment;
use tidal_harness::jaeger::jaeger;
use tidal_harness::measure::cpu_seconds;
use tidal_harness::process::Process;
use tidal_harness::replicas::http_get;
use tidal_harness::tide::sleep_past;
use tidal_scheduler::api::TidalScheduler;

use crate::CONCURRENCY;
use crate::neighbour;
use crate::options::Options;
use crate::workload::{bench_env, create_round_objects, wait_all_reconciled};

/// The controller, with objects of its own; its `lateness_ms` of on-time triggers is read
/// from its JSON log.
pub struct Controller {
    env: TestEnv,
    process: Process,
    objects: usize,
    instants: Vec<Timestamp>,
    cpu_before: f64,
    requests_before: Requests,
    /// When its rounds' requests began to be counted.
    counted_from: Timestamp,
    /// Events it had dropped before its rounds.
    dropped_before: usize,
}

impl Controller {
    /// Starts the controller (exporting traces to Jaeger if `traced`) and creates its
    /// objects; returns once all are reconciled.
    pub async fn start(
        options: &Options,
        objects: usize,
        instants: Vec<Timestamp>,
        traced: bool,
    ) -> anyhow::Result<Controller> {
        let env = bench_env(options).await;
        if !options.scale() {
            env.api()
                .create(&PostParams::default(), &deployment("web"))
                .await?;
        }
        // Only a traced run asks for Jaeger: an untraced control plane has none.
        let endpoint = traced.then(|| jaeger().otlp_http_endpoint());
        let vars: Vec<(&str, &str)> = endpoint
            .iter()
            .map(|endpoint| ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()))
            .collect();
        let kubeconfig = match options.neighbour {
            Some(flow_schemas) => neighbour::controller_kubeconfig(&env, flow_schemas).await?,
            None => env.control_plane().kubeconfig().to_owned(),
        };
        let process = run_controller(&env, &vars, &kubeconfig);
        create_round_objects(options, &env, objects, &instants).await?;
        wait_all_reconciled(&env.api::<TidalScheduler>(), objects, |_| true).await?;
        // Each object's creation caught up with its base rule: those Events are not the
        // rounds' (until 2026-12-05 part of them fell into the rounds' counts).
        published_events(&env, &process, "CaughtUp", objects, 0).await?;
        let dropped_before = dropped_events(&process);
        let cpu_before = cpu_seconds(process.pid()).map_err(anyhow::Error::msg)?;
        let requests_before = Requests::of(&process);
        let counted_from = Timestamp::now();
        Ok(Controller {
            env,
            process,
            objects,
            instants,
            cpu_before,
            requests_before,
            counted_from,
            dropped_before,
        })
    }

    /// Waits for the last round and for its Events; returns each trigger's latency and
    /// when each Event was published.
    pub async fn finish(self) -> anyhow::Result<(Vec<f64>, Vec<Timestamp>)> {
        let (first, last) = (self.instants[0], self.instants[self.instants.len() - 1]);
        let objects = self.objects;
        wait_logged_triggers(&self.process, last, objects).await?;
        let cpu = cpu_seconds(self.process.pid()).map_err(anyhow::Error::msg)? - self.cpu_before;
        let last_rule = format!("round-{}", self.instants.len() - 1);
        wait_all_reconciled(&self.env.api::<TidalScheduler>(), objects, |s| {
            s.last_triggered_rule.as_deref() == Some(last_rule.as_str())
        })
        .await?;
        let samples = applied_latencies(&self.process, first, last);
        anyhow::ensure!(
            samples.len() == objects * self.instants.len(),
            "expected {} on-time triggers in the log, found {}",
            objects * self.instants.len(),
            samples.len()
        );
        eprintln!(
            "controller CPU during its {objects}-object rounds: {cpu:.2} s ({:.2} ms per trigger)",
            cpu * 1000.0 / samples.len() as f64
        );
        let events = published_events(
            &self.env,
            &self.process,
            "Triggered",
            samples.len(),
            self.dropped_before,
        )
        .await?;
        // Counted once its Events are out: they are requests of these triggers too.
        eprintln!(
            "controller API requests per trigger during its {objects}-object rounds (its metrics): {}",
            Requests::of(&self.process).per_trigger_since(&self.requests_before, samples.len())
        );
        if let Some(dir) = self.env.control_plane().dir() {
            // A namespaced controller: every request it sends names its namespace.
            let namespace = self.env.namespace.as_str();
            let sent = Requests::audited(dir, self.counted_from, Timestamp::now(), |request| {
                request.replica().is_some() && request.namespace == namespace
            });
            eprintln!(
                "controller API requests per trigger during its {objects}-object rounds (audit log): {}",
                sent.per_trigger_since(&Requests::default(), samples.len())
            );
            // What each request cost the controller, its Events included, against the
            // bare client's CPU per patch: the gap that is not the Events themselves.
            let cpu =
                cpu_seconds(self.process.pid()).map_err(anyhow::Error::msg)? - self.cpu_before;
            eprintln!(
                "controller CPU with its Events out: {cpu:.2} s ({:.2} ms per trigger, {:.2} ms per request)",
                cpu * 1000.0 / samples.len() as f64,
                cpu * 1000.0 / sent.total().max(1.0)
            );
        }
        Ok((samples, events))
    }
}

/// When each Event of `env`'s namespace was published (`eventTime`), once `expected`
/// Events of `reason` are there — or dropped: the controller publishes them after its
/// bursts, one at a time, and drops what overflows its queue (4,096; a 10,000-object
/// burst does), counted in `events_dropped_total` (`dropped_before` of them earlier).
async fn published_events(
    env: &TestEnv,
    controller: &Process,
    reason: &str,
    expected: usize,
    dropped_before: usize,
) -> anyhow::Result<Vec<Timestamp>> {
    let api = env.api::<Event>();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let events = api.list(&ListParams::default()).await?.items;
        let published = events
            .iter()
            .filter(|event| event.reason.as_deref() == Some(reason))
            .count();
        let dropped = dropped_events(controller).saturating_sub(dropped_before);
        if published + dropped >= expected {
            if dropped > 0 {
                eprintln!("controller Events dropped (queue full): {dropped}");
            }
            return Ok(events
                .iter()
                .filter_map(|event| event.event_time.as_ref().map(|time| time.0))
                .collect());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "only {published} of {expected} {reason} Events published after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Events the controller dropped so far, whatever the reason.
fn dropped_events(controller: &Process) -> usize {
    let metrics = http_get(controller, "/metrics").1;
    let dropped: f64 = metrics
        .lines()
        .filter(|line| line.starts_with("tidal_scheduler_events_dropped_total"))
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    dropped as usize
}

/// The controller on `env`'s namespace, with the bench's concurrency and `vars`, reaching
/// the API server through `kubeconfig`.
pub fn run_controller(env: &TestEnv, vars: &[(&str, &str)], kubeconfig: &Path) -> Process {
    let concurrency = CONCURRENCY.to_string();
    env.run_binary_with_env(
        "controller",
        &[
            "run",
            "--namespace",
            &env.namespace,
            "--concurrency",
            &concurrency,
            "--log-format",
            "json",
            "--lease-namespace",
            &env.namespace,
            "--metrics-address",
            "127.0.0.1:0",
        ],
        kubeconfig,
        vars,
    )
}

/// Waits until the controller has logged `objects` applied triggers scheduled at `last`.
/// It reads the log, not the API: listing during the rounds would load the API server
/// the baseline does not.
async fn wait_logged_triggers(
    controller: &Process,
    last: Timestamp,
    objects: usize,
) -> anyhow::Result<()> {
    sleep_past(last).await;
    let schedule_time = format!("\"schedule_time\":\"{last}\"");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let applied = controller
            .log()
            .lines()
            .filter(|line| line.contains("trigger applied") && line.contains(&schedule_time))
            .count();
        if applied >= objects {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "only {applied} of {objects} triggers at {last} logged after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// `lateness_ms` of the log's on-time `trigger applied` lines scheduled in `[first, last]`.
fn applied_latencies(controller: &Process, first: Timestamp, last: Timestamp) -> Vec<f64> {
    let mut seen = HashSet::new();
    controller
        .log()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["message"] == "trigger applied" && line["catch_up"] == false)
        .filter(|line| {
            line["schedule_time"]
                .as_str()
                .and_then(|t| t.parse::<Timestamp>().ok())
                .is_some_and(|t| t >= first && t <= last)
        })
        .filter(|line| seen.insert((line["tidal"].to_string(), line["schedule_time"].to_string())))
        .filter_map(|line| line["lateness_ms"].as_f64())
        .collect()
}
