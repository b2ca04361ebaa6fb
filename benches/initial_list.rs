//! A fresh leader's initial list, both ways: how long until the watch cache holds every
//! one of N TidalSchedulers of 5 rules (the stream's progress reported: everything
//! listed and consumed, as the read-your-own-writes check needs) and how much memory it
//! took — the lister's peak resident set, and the kube-apiserver's peak during the list
//! over its resident set before — with the initial list streamed (`sendInitialEvents`,
//! the default) and paged (LIST in pages of 500, then a watch). Each measurement runs in
//! a fresh child process (this bench re-run with `TIDAL_BENCH_LISTER=streaming|paged`),
//! so its peak is its own; the two take turns.
//!
//! Run: `cargo bench --bench initial_list` (numbers on stdout; docs/performance.md keeps them).
//! `TIDAL_BENCH_LIST_OBJECTS=N` (default 10,000), `TIDAL_BENCH_ROUNDS=N` (default 3).

use tidal_harness as common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt, stream};
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::{WatchStreamExt, reflector};
use kube::{Client, Config};
use tidal_scheduler::api::TidalScheduler;
use tidal_scheduler::controller::{InitialList, Slim, WATCH_TIMEOUT, list_watch};

use common::bench_options::parsed_or;
use common::cluster::{TestEnv, control_plane};
use common::measure::{grouped, proc_status_mib, run_heading, summary};
use common::tide::manifest;

/// The child's mode; its kubeconfig and namespace.
const LISTER: &str = "TIDAL_BENCH_LISTER";
const KUBECONFIG: &str = "TIDAL_BENCH_KUBECONFIG";
const NAMESPACE: &str = "TIDAL_BENCH_NAMESPACE";
/// A lister still running after this is stuck (10,000 objects take seconds).
const LISTER_LIMIT: Duration = Duration::from_secs(600);

fn main() {
    if let Ok(mode) = std::env::var(LISTER) {
        let mode = match mode.as_str() {
            "streaming" => InitialList::Streaming,
            "paged" => InitialList::Paged,
            other => panic!("{LISTER}={other}"),
        };
        return tokio::runtime::Runtime::new()
            .expect("runtime")
            .block_on(lister(mode));
    }
    tokio::runtime::Runtime::new()
        .expect("runtime")
        .block_on(bench());
}

/// The child: lists-and-watches the namespace into a reflector store until the stream
/// reports the list consumed; prints `milliseconds objects peak-MiB`.
async fn lister(mode: InitialList) {
    let kubeconfig =
        Kubeconfig::read_from(std::env::var(KUBECONFIG).expect(KUBECONFIG)).expect("kubeconfig");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("config");
    let client = Client::try_from(config).expect("client");
    // Read as the controller reads them.
    let api: Api<Slim<TidalScheduler>> =
        Api::namespaced(client, &std::env::var(NAMESPACE).expect(NAMESPACE));
    let (reader, writer) = reflector::store();
    let listed = Arc::new(tokio::sync::Notify::new());
    let once = Arc::new(AtomicBool::new(false));
    let (signal, first) = (listed.clone(), once.clone());
    let started = Instant::now();
    let events = list_watch(api, mode, WATCH_TIMEOUT, move |_| {
        if !first.swap(true, Ordering::SeqCst) {
            signal.notify_one();
        }
    })
    // As the controller does: a failing watch is retried after a pause, never in a loop
    // that would keep the consumer from ever yielding (and so from being aborted).
    .default_backoff()
    .reflect(writer);
    let consumer = tokio::spawn(async move {
        let mut events = events.boxed();
        while let Some(event) = events.next().await {
            // Once the list is consumed the process ends: a watch cut short then is no news.
            if let Err(error) = event {
                eprintln!("list-watch: {error}");
            }
        }
    });
    listed.notified().await;
    let elapsed = started.elapsed();
    consumer.abort();
    // Stopped before the runtime goes: its shutdown drops the client, after which every
    // poll of a still-running consumer would fail at once.
    let _ = consumer.await;
    println!(
        "{:.1} {} {:.1}",
        elapsed.as_secs_f64() * 1000.0,
        reader.state().len(),
        proc_status_mib("self", "VmHWM:")
    );
}

/// One child's run.
struct Run {
    /// Until the list was consumed.
    ms: f64,
    /// In the cache then.
    objects: usize,
    /// The lister's peak resident set.
    lister_mib: f64,
    /// The API server's peak resident set during it, over its resident set before.
    server_mib: f64,
}

/// Runs a lister of `mode` in a child process.
fn run_lister(mode: &str, env: &TestEnv, apiserver: &str) -> Run {
    let before = proc_status_mib(apiserver, "VmRSS:");
    let mut child = Command::new(std::env::current_exe().expect("current_exe"))
        .env(LISTER, mode)
        .env(KUBECONFIG, control_plane().kubeconfig())
        .env(NAMESPACE, &env.namespace)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn the lister");
    let mut peak = before;
    let started = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if started.elapsed() > LISTER_LIMIT {
            child.kill().expect("kill the lister");
            panic!("the {mode} lister has not finished in {LISTER_LIMIT:?}");
        }
        peak = peak.max(proc_status_mib(apiserver, "VmRSS:"));
        std::thread::sleep(Duration::from_millis(10));
    }
    let output = child.wait_with_output().expect("the lister's output");
    assert!(output.status.success(), "the {mode} lister failed");
    let line = String::from_utf8_lossy(&output.stdout).into_owned();
    let fields: Vec<&str> = line.split_whitespace().collect();
    let [ms, objects, mib] = fields[..] else {
        panic!("the lister printed {line:?}");
    };
    Run {
        ms: ms.parse().expect("ms"),
        objects: objects.parse().expect("objects"),
        lister_mib: mib.parse().expect("MiB"),
        server_mib: peak - before,
    }
}

async fn bench() {
    let setting = |name, default| parsed_or(name, default).unwrap_or_else(|e| panic!("{e}"));
    let objects = setting("TIDAL_BENCH_LIST_OBJECTS", 10_000);
    let rounds = setting("TIDAL_BENCH_ROUNDS", 3);
    let env = TestEnv::new().await;
    let apiserver = std::fs::read_to_string(
        control_plane()
            .dir()
            .expect("the harness's control plane")
            .join("kube-apiserver.pid"),
    )
    .expect("kube-apiserver.pid")
    .trim()
    .to_owned();
    let rules = [
        ("morning", "CRON_TZ=Asia/Shanghai 0 0 8 * * MON-FRI", 20),
        ("lunch", "CRON_TZ=Asia/Shanghai 0 30 11 * * MON-FRI", 40),
        ("evening", "CRON_TZ=Asia/Shanghai 0 0 19-21 * * *", 60),
        ("night", "CRON_TZ=Asia/Shanghai 0 0 23 * * *", 5),
        ("weekend", "CRON_TZ=Asia/Shanghai 0 0 10 * * SAT,SUN", 15),
    ];
    let api = env.api::<TidalScheduler>();
    let created = Instant::now();
    stream::iter(0..objects)
        .map(|i| {
            let (api, rules) = (&api, &rules);
            async move {
                let object: TidalScheduler = serde_json::from_value(manifest(
                    &format!("tide-{i:05}"),
                    "apps/v1",
                    "Deployment",
                    "web",
                    "Status",
                    rules,
                ))
                .expect("a TidalScheduler");
                api.create(&PostParams::default(), &object).await.map(drop)
            }
        })
        .buffer_unordered(64)
        .try_collect::<Vec<()>>()
        .await
        .expect("create the objects");
    println!(
        "\ninitial list of {objects} TidalSchedulers of 5 rules (created in {:.0} s by 64 parallel \
         requests); {rounds} rounds each way, turn by turn",
        created.elapsed().as_secs_f64()
    );
    let mut results: [(&str, Vec<Run>); 2] = [("paged", vec![]), ("streaming", vec![])];
    for _ in 0..rounds {
        for (mode, runs) in &mut results {
            let run = run_lister(mode, &env, &apiserver);
            assert_eq!(run.objects, objects, "the {mode} cache holds every object");
            runs.push(run);
        }
    }
    // A Markdown table, as docs/performance.md keeps it.
    println!(
        "{}\n\n| initial list | p50 | max | lister peak RSS | kube-apiserver peak RSS over before |\n|---|---|---|---|---|",
        run_heading()
    );
    for (mode, runs) in &results {
        let ms: Vec<f64> = runs.iter().map(|r| r.ms).collect();
        let (p50, _, max) = summary(&ms);
        let lister = runs.iter().map(|r| r.lister_mib).fold(0.0, f64::max);
        let server = runs.iter().map(|r| r.server_mib).fold(0.0, f64::max);
        let mode = match *mode {
            "paged" => "paged (LIST, 500 a page)",
            _ => "streaming (`sendInitialEvents`)",
        };
        println!(
            "| {mode} | {} ms | {} ms | {lister:.1} MiB | {server:+.1} MiB |",
            grouped(p50),
            grouped(max)
        );
    }
}
