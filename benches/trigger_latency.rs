//! Trigger latency and memory of the controller on the local control plane (etcd +
//! kube-apiserver from the test harness).
//!
//! - Latency: the scheduled instant → status write acknowledged, as the controller logs it
//!   (`trigger applied`, `lateness_ms`), with 1, 100 and 1,000 TidalSchedulers firing in
//!   the same second; next to a baseline of the same number of plain status patches sent
//!   by a bare client with the same concurrency (the physical limit of this machine). The
//!   two take turns — baseline round, controller round, baseline round, ... — on objects
//!   of their own, so slow drifts of this shared host weigh on both alike.
//! - Memory: the controller's resident set with 10,000 TidalSchedulers of 5 rules each.
//!
//! Run: `cargo bench --bench trigger_latency` (numbers go to stdout; the README keeps
//! them). `TIDAL_BENCH_OBJECTS=N` runs only the latency case of N objects (0: none);
//! `TIDAL_BENCH_ROUNDS=N` runs N rounds of each side, once; `TIDAL_BENCH_SKIP_RSS=1` skips
//! the 10,000-object part, `TIDAL_BENCH_RSS_OBJECTS=N` gives it N objects (CI runs every
//! bench once at its smallest size, see `.ci/run`); `TIDAL_BENCH_BASELINE_WATCH=1`
//! keeps a watch open on the baseline's objects, as the controller has on its own.
//! `TIDAL_BENCH_APPLY=Scale` runs the objects in `Scale` mode, each with a Deployment of
//! its own: the controller then writes each target fenced (read, then a server-side
//! apply conditional on the version read) before the status, and the baseline sends a
//! plain `/scale` merge patch before each status patch — the unfenced write the
//! controller made before fencing — or, with `TIDAL_BENCH_BASELINE_FENCED=1`, the same
//! fenced read-then-apply as the controller. `TIDAL_BENCH_TRACING=1` measures the cost of
//! tracing instead: on a control plane whose kube-apiserver and etcd trace to a real
//! Jaeger, a controller exporting every trigger's trace there takes turns with one that
//! exports nothing (in place of the baseline).

use tidal_harness as common;

use std::collections::HashSet;
use std::time::Duration;

use futures::{StreamExt, stream};
use jiff::{SignedDuration, Timestamp};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use tidal_scheduler::api::{NoCalendars, TidalScheduler, TidalSchedulerStatus};
use tidal_scheduler::controller::plan::{self, Outcome};

use common::cluster::{TestEnv, control_plane};
use common::fixtures::deployment;
use common::jaeger::{jaeger, traced_control_plane};
use common::measure::{proc_status_mib, summary};
use common::process::Process;
use common::tide::{manifest, once_at, second_after, sleep_past};

/// The controller's `--concurrency`, also the baseline's.
const CONCURRENCY: usize = 64;

const DAILY_MIDNIGHT: &str = "CRON_TZ=UTC 0 0 0 * * *";

/// Whether tracing on is measured against tracing off (`TIDAL_BENCH_TRACING=1`).
fn tracing_mode() -> bool {
    std::env::var_os("TIDAL_BENCH_TRACING").is_some()
}

/// A namespace of the bench's own: on the control plane traced to Jaeger in tracing mode.
async fn bench_env() -> TestEnv {
    if tracing_mode() {
        TestEnv::on(traced_control_plane()).await
    } else {
        TestEnv::new().await
    }
}

/// Whether the objects run in `Scale` mode (`TIDAL_BENCH_APPLY=Scale`).
fn scale_mode() -> bool {
    std::env::var("TIDAL_BENCH_APPLY").is_ok_and(|mode| mode == "Scale")
}

/// The Deployment of object `name` in Scale mode; all share `web` in Status mode.
fn target_of(name: &str) -> String {
    if scale_mode() {
        format!("{name}-web")
    } else {
        "web".to_owned()
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let control_plane = if tracing_mode() {
        traced_control_plane()
    } else {
        control_plane()
    };
    println!("control plane: {}", control_plane.kubeconfig().display());
    println!(
        "\ntrigger latency, scheduled instant -> status write acknowledged (ms); concurrency {CONCURRENCY}; apply: {}{}",
        if scale_mode() { "Scale" } else { "Status" },
        if scale_mode() && std::env::var_os("TIDAL_BENCH_BASELINE_FENCED").is_some() {
            " (baseline fenced)"
        } else {
            ""
        }
    );
    let (first, second) = if tracing_mode() {
        ("tracing on p50 / p99 / max", "tracing off p50 / p99 / max")
    } else {
        ("controller p50 / p99 / max", "baseline p50 / p99 / max")
    };
    println!(
        "{:>7} {:>7} | {first:>28} | {second:>28} | {:>9}",
        "objects", "samples", "p99 ratio"
    );
    let only: Option<usize> = std::env::var("TIDAL_BENCH_OBJECTS")
        .ok()
        .and_then(|n| n.parse().ok());
    // (objects, rounds, seconds between slots, repetitions): a p99 needs 100 samples to be
    // more than the maximum, and an object holds at most 100 rules, hence 5 × 20 for 1.
    // `TIDAL_BENCH_ROUNDS=N`: N rounds, once (CI's smoke run: 1).
    let rounds_given: Option<usize> = std::env::var("TIDAL_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok());
    for (objects, rounds, spacing, repetitions) in [(1, 20, 1, 5), (100, 5, 4, 1), (1000, 3, 8, 1)]
    {
        if only.is_some_and(|only| only != objects) {
            continue;
        }
        let (rounds, repetitions) = rounds_given.map_or((rounds, repetitions), |n| (n, 1));
        let (mut controller, mut baseline) = (Vec::new(), Vec::new());
        // Tracing mode: twice as many repetitions, the sides swapping slots each time, so
        // that neither always goes first.
        // Slots half as far apart again, so that each side's Events, published after its
        // burst, are out before the other side's next burst (checked below).
        let (repetitions, spacing) = if tracing_mode() {
            (2 * repetitions, spacing * 3 / 2)
        } else {
            (repetitions, spacing)
        };
        for repetition in 0..repetitions {
            let swap = tracing_mode() && repetition % 2 == 1;
            let (c, b) = take_turns(objects, rounds, spacing, swap).await?;
            controller.extend(c);
            baseline.extend(b);
        }
        let (c, b) = (summary(&controller), summary(&baseline));
        println!(
            "{objects:>7} {:>7} | {:>8.1} / {:>7.1} / {:>7.1} | {:>8.1} / {:>7.1} / {:>7.1} | {:>8.2}x",
            controller.len(),
            c.0,
            c.1,
            c.2,
            b.0,
            b.1,
            b.2,
            c.1 / b.1
        );
    }
    if std::env::var_os("TIDAL_BENCH_SKIP_RSS").is_none() {
        let objects = std::env::var("TIDAL_BENCH_RSS_OBJECTS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(10_000);
        memory(objects).await?;
    }
    Ok(())
}

/// Runs `rounds` rounds of each side, taking turns: slot k is at first + k × `spacing`
/// seconds; the baseline (tracing mode: the untraced controller) fires at even slots, the
/// controller's objects at odd ones — the other way round with `swap`. Returns the
/// controller's and the baseline's latencies.
async fn take_turns(
    objects: usize,
    rounds: usize,
    spacing: i64,
    swap: bool,
) -> anyhow::Result<(Vec<f64>, Vec<f64>)> {
    let first = first_instant(2 * objects);
    let slots = |parity: i64| -> Vec<Timestamp> {
        (0..rounds as i64)
            .map(|round| first + SignedDuration::from_secs(spacing * (2 * round + parity)))
            .collect()
    };
    let (first_side, second_side) = if swap { (0, 1) } else { (1, 0) };
    if tracing_mode() {
        let traced = Controller::start(objects, slots(first_side), true).await?;
        let untraced = Controller::start(objects, slots(second_side), false).await?;
        anyhow::ensure!(Timestamp::now() < first, "objects set up too late");
        let (untraced, untraced_events) = untraced.finish().await?;
        let (traced, traced_events) = traced.finish().await?;
        let crossing = [
            events_in_bursts(&traced_events, &slots(second_side), &untraced),
            events_in_bursts(&untraced_events, &slots(first_side), &traced),
        ];
        eprintln!(
            "Events published during the other side's bursts: traced {}, untraced {}",
            crossing[0], crossing[1]
        );
        anyhow::ensure!(
            crossing == [0, 0],
            "the sides are not isolated: one side's Events landed in the other's bursts"
        );
        return Ok((traced, untraced));
    }
    let controller = Controller::start(objects, slots(1), false).await?;
    let baseline = Baseline::prepare(objects, slots(0)).await?;
    anyhow::ensure!(Timestamp::now() < first, "objects set up too late");
    let baseline = baseline.run().await?;
    let (controller, events) = controller.finish().await?;
    eprintln!(
        "controller Events published during the baseline's bursts: {}",
        events_in_bursts(&events, &slots(0), &baseline)
    );
    Ok((controller, baseline))
}

/// How many of the times `published` fall in a burst of the other side: from one of its
/// `instants` to its slowest latency (`latencies`, ms) later.
fn events_in_bursts(published: &[Timestamp], instants: &[Timestamp], latencies: &[f64]) -> usize {
    let longest = SignedDuration::from_secs_f64(summary(latencies).2 / 1000.0);
    published
        .iter()
        .filter(|&&at| {
            instants
                .iter()
                .any(|&start| at >= start && at <= start + longest)
        })
        .count()
}

/// Rules of the latency objects: a base level, then one rule per instant.
fn round_rules(instants: &[Timestamp]) -> Vec<(String, String, i32)> {
    let mut rules = vec![("base".to_owned(), DAILY_MIDNIGHT.to_owned(), 1)];
    for (round, at) in instants.iter().enumerate() {
        rules.push((format!("round-{round}"), once_at(*at), 10 + round as i32));
    }
    rules
}

fn tide_manifest(name: &str, rules: &[(String, String, i32)]) -> Value {
    let borrowed: Vec<(&str, &str, i32)> = rules
        .iter()
        .map(|(n, c, r)| (n.as_str(), c.as_str(), *r))
        .collect();
    let apply = if scale_mode() { "Scale" } else { "Status" };
    manifest(
        name,
        "apps/v1",
        "Deployment",
        &target_of(name),
        apply,
        &borrowed,
    )
}

async fn create_all(env: &TestEnv, manifests: Vec<Value>) -> anyhow::Result<()> {
    let api = env.api::<TidalScheduler>();
    let results: Vec<_> = stream::iter(manifests)
        .map(|m| {
            let api = api.clone();
            async move {
                let object: TidalScheduler = serde_json::from_value(m)?;
                api.create(&PostParams::default(), &object).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

/// Creates `objects` objects whose rules fire at `instants`.
async fn create_round_objects(
    env: &TestEnv,
    objects: usize,
    instants: &[Timestamp],
) -> anyhow::Result<()> {
    let rules = round_rules(instants);
    let names: Vec<String> = (0..objects).map(|i| format!("tide-{i:04}")).collect();
    if scale_mode() {
        let deployments = env.api::<k8s_openapi::api::apps::v1::Deployment>();
        let created: Vec<kube::Result<_>> = stream::iter(&names)
            .map(|name| {
                let deployments = deployments.clone();
                async move {
                    deployments
                        .create(&PostParams::default(), &deployment(&target_of(name)))
                        .await
                }
            })
            .buffer_unordered(CONCURRENCY)
            .collect()
            .await;
        for result in created {
            result?;
        }
    }
    let manifests = names
        .iter()
        .map(|name| tide_manifest(name, &rules))
        .collect();
    create_all(env, manifests).await
}

/// The first round's instant, far enough ahead to create `objects` objects first.
fn first_instant(objects: usize) -> Timestamp {
    second_after(Duration::from_secs(8) + Duration::from_millis(25 * objects as u64))
}

/// Plain status patches by a bare client at each round's instant.
struct Baseline {
    api: Api<TidalScheduler>,
    deployments: Api<k8s_openapi::api::apps::v1::Deployment>,
    objects: Vec<TidalScheduler>,
    statuses: Vec<TidalSchedulerStatus>,
    instants: Vec<Timestamp>,
    _watching: Option<tokio::task::JoinHandle<()>>,
}

impl Baseline {
    /// Creates the objects and writes their first status, as the controller does on
    /// creation.
    async fn prepare(objects: usize, instants: Vec<Timestamp>) -> anyhow::Result<Baseline> {
        let env = TestEnv::new().await;
        let api = env.api::<TidalScheduler>();
        let watching = std::env::var_os("TIDAL_BENCH_BASELINE_WATCH").map(|_| {
            let api = api.clone();
            tokio::spawn(async move {
                let mut events = kube::runtime::watcher(api, Default::default()).boxed();
                while events.next().await.is_some() {}
            })
        });
        create_round_objects(&env, objects, &instants).await?;
        let stored = api.list(&ListParams::default()).await?.items;
        // The status each object would have, written once untimed (the controller's
        // create-time catch-up), then evolved round by round: the same bodies the
        // controller writes.
        let mut statuses: Vec<TidalSchedulerStatus> = Vec::new();
        for object in &stored {
            let status = next_status(
                object,
                &TidalSchedulerStatus::default(),
                Timestamp::now(),
                None,
            );
            patch_status(&api, object, &status).await?;
            statuses.push(status);
        }
        Ok(Baseline {
            api,
            deployments: env.api(),
            objects: stored,
            statuses,
            instants,
            _watching: watching,
        })
    }

    /// Sends each round's patches at its instant; returns each one's latency.
    async fn run(mut self) -> anyhow::Result<Vec<f64>> {
        let mut samples = Vec::new();
        let cpu_before = process_cpu_seconds(std::process::id())?;
        for &at in &self.instants {
            let bodies: Vec<(&TidalScheduler, TidalSchedulerStatus)> = self
                .objects
                .iter()
                .zip(&self.statuses)
                .map(|(object, old)| (object, next_status(object, old, at, Some(at))))
                .collect();
            sleep_past(at - SignedDuration::from_millis(50)).await;
            let (api, deployments) = (&self.api, &self.deployments);
            let acks: Vec<anyhow::Result<f64>> = stream::iter(&bodies)
                .map(|(object, status)| async move {
                    if scale_mode() {
                        let replicas = status.desired_replicas.unwrap_or_default();
                        write_scale(deployments, &target_of(&object.name_any()), replicas).await?;
                    }
                    patch_status(api, object, status).await?;
                    Ok(Timestamp::now().duration_since(at).as_secs_f64() * 1000.0)
                })
                .buffer_unordered(CONCURRENCY)
                .collect()
                .await;
            for ack in acks {
                samples.push(ack?);
            }
            self.statuses = bodies.into_iter().map(|(_, status)| status).collect();
        }
        let cpu = process_cpu_seconds(std::process::id())? - cpu_before;
        eprintln!(
            "baseline client CPU during its {}-object rounds: {cpu:.2} s ({:.2} ms per patch)",
            self.objects.len(),
            cpu * 1000.0 / samples.len() as f64
        );
        Ok(samples)
    }
}

/// The baseline's target write: a plain `/scale` merge patch, or (with
/// `TIDAL_BENCH_BASELINE_FENCED`) a read then a server-side apply conditional on it.
async fn write_scale(
    deployments: &Api<k8s_openapi::api::apps::v1::Deployment>,
    name: &str,
    replicas: i32,
) -> anyhow::Result<()> {
    if std::env::var_os("TIDAL_BENCH_BASELINE_FENCED").is_none() {
        let patch = Patch::Merge(json!({ "spec": { "replicas": replicas } }));
        deployments
            .patch_scale(name, &PatchParams::default(), &patch)
            .await?;
        return Ok(());
    }
    let read = deployments.get_scale(name).await?;
    let patch = Patch::Apply(json!({
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": { "name": name, "resourceVersion": read.metadata.resource_version },
        "spec": { "replicas": replicas },
    }));
    deployments
        .patch_scale(name, &PatchParams::apply("tidal-bench").force(), &patch)
        .await?;
    Ok(())
}

async fn patch_status(
    api: &Api<TidalScheduler>,
    object: &TidalScheduler,
    status: &TidalSchedulerStatus,
) -> anyhow::Result<()> {
    let body = json!({ "status": status });
    api.patch_status(
        &object.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&body),
    )
    .await?;
    Ok(())
}

/// The status the controller would write for `object` at `at`, after `old`: the same
/// planning the reconcile does (`plan::plan_object`), then the status after it.
fn next_status(
    object: &TidalScheduler,
    old: &TidalSchedulerStatus,
    at: Timestamp,
    armed: Option<Timestamp>,
) -> TidalSchedulerStatus {
    let (_, plan) = plan::plan_object(object, &NoCalendars, old, armed, at).expect("valid object");
    let outcome = Outcome {
        generation: object.metadata.generation,
        history_limit: object.spec.history_limit,
        warnings: &[],
        problem: None,
        now: at,
        trace_id: None,
    };
    plan::status_after(old, &plan, outcome)
}

/// The controller, with objects of its own; its `lateness_ms` of on-time triggers is read
/// from its JSON log.
struct Controller {
    env: TestEnv,
    process: Process,
    objects: usize,
    instants: Vec<Timestamp>,
    cpu_before: f64,
}

impl Controller {
    /// Starts the controller (exporting traces to Jaeger if `traced`) and creates its
    /// objects; returns once all are reconciled.
    async fn start(
        objects: usize,
        instants: Vec<Timestamp>,
        traced: bool,
    ) -> anyhow::Result<Controller> {
        let env = bench_env().await;
        if !scale_mode() {
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
        let process = run_controller(&env, &vars);
        create_round_objects(&env, objects, &instants).await?;
        wait_all_reconciled(&env.api::<TidalScheduler>(), objects, |_| true).await?;
        let cpu_before = cpu_seconds(&process)?;
        Ok(Controller {
            env,
            process,
            objects,
            instants,
            cpu_before,
        })
    }

    /// Waits for the last round and for its Events; returns each trigger's latency and
    /// when each Event was published.
    async fn finish(self) -> anyhow::Result<(Vec<f64>, Vec<Timestamp>)> {
        let (first, last) = (self.instants[0], self.instants[self.instants.len() - 1]);
        let objects = self.objects;
        wait_logged_triggers(&self.process, last, objects).await?;
        let cpu = cpu_seconds(&self.process)? - self.cpu_before;
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
        let events = published_events(&self.env, samples.len()).await?;
        Ok((samples, events))
    }
}

/// When each Event of `env`'s namespace was published (`eventTime`), once `triggered`
/// `Triggered` Events are there: the controller publishes them after its bursts.
async fn published_events(env: &TestEnv, triggered: usize) -> anyhow::Result<Vec<Timestamp>> {
    let api = env.api::<Event>();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let events = api.list(&ListParams::default()).await?.items;
        let published = events
            .iter()
            .filter(|event| event.reason.as_deref() == Some("Triggered"))
            .count();
        if published >= triggered {
            return Ok(events
                .iter()
                .filter_map(|event| event.event_time.as_ref().map(|time| time.0))
                .collect());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "only {published} of {triggered} Triggered Events published after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

fn run_controller(env: &TestEnv, vars: &[(&str, &str)]) -> Process {
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
        env.control_plane().kubeconfig(),
        vars,
    )
}

/// User + system CPU time of `process` so far, in seconds.
fn cpu_seconds(process: &Process) -> anyhow::Result<f64> {
    process_cpu_seconds(process.pid())
}

/// User + system CPU time of process `pid` so far, in seconds.
fn process_cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    // After the command: state is field 3, utime 14 and stime 15 (1-based, man 5 proc).
    let ticks: f64 = fields[11].parse::<f64>()? + fields[12].parse::<f64>()?;
    Ok(ticks / 100.0)
}

/// Waits until `objects` objects have a status satisfying `done`.
async fn wait_all_reconciled(
    api: &Api<TidalScheduler>,
    objects: usize,
    done: impl Fn(&TidalSchedulerStatus) -> bool,
) -> anyhow::Result<()> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    loop {
        let mut ready = 0;
        let mut params = ListParams::default().limit(500);
        loop {
            let page = api.list(&params).await?;
            ready += page
                .items
                .iter()
                .filter(|o| o.status.as_ref().is_some_and(&done))
                .count();
            match page.metadata.continue_ {
                Some(token) if !token.is_empty() => params = params.continue_token(&token),
                _ => break,
            }
        }
        if ready == objects {
            return Ok(());
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "only {ready} of {objects} objects reconciled after 10 minutes"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
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

/// The controller's resident memory with `objects` objects of 5 rules each.
async fn memory(objects: usize) -> anyhow::Result<()> {
    let env = TestEnv::new().await;
    env.api()
        .create(&PostParams::default(), &deployment("web"))
        .await?;
    let controller = run_controller(&env, &[]);
    let rules: Vec<(String, String, i32)> = [
        ("morning", "CRON_TZ=Asia/Shanghai 0 0 8 * * MON-FRI", 20),
        ("lunch", "CRON_TZ=Asia/Shanghai 0 30 11 * * MON-FRI", 40),
        ("evening", "CRON_TZ=Asia/Shanghai 0 0 19-21 * * *", 60),
        ("night", "CRON_TZ=Asia/Shanghai 0 0 23 * * *", 5),
        ("weekend", "CRON_TZ=Asia/Shanghai 0 0 10 * * SAT,SUN", 15),
    ]
    .iter()
    .map(|(n, c, r)| (n.to_string(), c.to_string(), *r))
    .collect();
    let started = std::time::Instant::now();
    let names: Vec<String> = (0..objects).map(|i| format!("tide-{i:05}")).collect();
    create_all(
        &env,
        names.iter().map(|n| tide_manifest(n, &rules)).collect(),
    )
    .await?;
    wait_all_reconciled(&env.api::<TidalScheduler>(), objects, |s| {
        s.observed_generation.is_some()
    })
    .await?;
    let elapsed = started.elapsed();
    let pid = controller.pid().to_string();
    let field = |name: &str| proc_status_mib(&pid, name);
    println!(
        "\nmemory with {objects} TidalSchedulers of 5 rules (all reconciled after {:.0} s): \
         RSS {:.1} MiB, peak {:.1} MiB",
        elapsed.as_secs_f64(),
        field("VmRSS:"),
        field("VmHWM:")
    );
    Ok(())
}
