//! Several controller replicas on one test namespace, campaigning for its Lease with short
//! durations, what their logs say they applied, and the workload the drills run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::wait::eventually_every;
use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::Value;
use tidal_scheduler::api::{NoCalendars, validate};
use tidal_scheduler::schedule::Tide;

use super::cluster::TestEnv;
use super::fixtures::deployment;
use super::process::Process;
use super::tide::{create, manifest, start_replica};
use super::wait::PATIENCE;

/// Lease duration of the failover tests.
pub const LEASE: Duration = Duration::from_secs(4);
/// Renew deadline of the failover tests.
pub const RENEW: Duration = Duration::from_secs(3);
/// Retry period of the failover tests.
pub const RETRY: Duration = Duration::from_secs(1);

/// The flags for [`LEASE`], [`RENEW`] and [`RETRY`].
pub const FAST_LEASE: [&str; 6] = [
    "--lease-duration",
    "4s",
    "--renew-deadline",
    "3s",
    "--retry-period",
    "1s",
];

/// The default Lease name.
pub const LEASE_NAME: &str = "tidal-scheduler";

/// Starts replicas `names` with [`FAST_LEASE`].
pub fn start_replicas(env: &TestEnv, names: &[&str]) -> Vec<Process> {
    names
        .iter()
        .map(|name| start_replica(env, name, &FAST_LEASE))
        .collect()
}

/// The Lease's holder and transition count (empty holder when released or absent).
pub async fn lease_state(env: &TestEnv) -> (String, i32) {
    lease_record(&env.api::<Lease>(), LEASE_NAME).await
}

/// Holder and transition count of the Lease `name` of `leases` (empty holder when
/// released or absent).
pub async fn lease_record(leases: &Api<Lease>, name: &str) -> (String, i32) {
    let lease = leases.get_opt(name).await.expect("get Lease");
    let spec = lease.and_then(|l| l.spec).unwrap_or_default();
    (
        spec.holder_identity.unwrap_or_default(),
        spec.lease_transitions.unwrap_or(0),
    )
}

/// Every holder the Lease had since [`HolderLog::start`], as its watch delivered them (a
/// release shows as `""`), each stamped when seen: a brief state that polling could miss
/// is kept.
pub struct HolderLog {
    changes: Arc<Mutex<Vec<(Timestamp, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl HolderLog {
    /// Starts watching the test's Lease.
    pub fn start(env: &TestEnv) -> HolderLog {
        HolderLog::watch(env.api(), LEASE_NAME)
    }

    /// Starts watching the Lease `name` of `leases`.
    pub fn watch(leases: Api<Lease>, name: &str) -> HolderLog {
        let changes = Arc::new(Mutex::new(Vec::new()));
        let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
        let log = changes.clone();
        let task = tokio::spawn(async move {
            let mut events = watcher(leases, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let lease = match event {
                    Ok(watcher::Event::Apply(lease) | watcher::Event::InitApply(lease)) => lease,
                    _ => continue,
                };
                let holder = lease
                    .spec
                    .and_then(|s| s.holder_identity)
                    .unwrap_or_default();
                let mut log = log.lock().expect("holder log");
                if log.last().is_none_or(|(_, last)| *last != holder) {
                    log.push((Timestamp::now(), holder));
                }
            }
        });
        HolderLog { changes, task }
    }

    /// The holder changes seen so far, oldest first.
    pub fn changes(&self) -> Vec<(Timestamp, String)> {
        self.changes.lock().expect("holder log").clone()
    }

    /// Waits until the watch has delivered `holder` as the current one (so that a release
    /// after it is seen).
    pub async fn wait_for(&self, holder: &str) {
        crate::wait::eventually("the holder in the Lease's watch", || async {
            let changes = self.changes();
            match changes.last() {
                Some((_, last)) if last == holder => Ok(()),
                _ => Err(format!("{changes:?}")),
            }
        })
        .await;
    }

    /// Whether the holder after `holder`'s last holding was nobody: it released the Lease
    /// before anyone else took it.
    pub fn released_by(&self, holder: &str) -> bool {
        let changes = self.changes();
        changes
            .iter()
            .rposition(|(_, h)| h == holder)
            .and_then(|at| changes.get(at + 1))
            .is_some_and(|(_, next)| next.is_empty())
    }
}

impl Drop for HolderLog {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Polls the Lease (every 20 ms) until its holder satisfies `wanted`; returns the holder.
pub async fn wait_holder(env: &TestEnv, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let pace = Duration::from_millis(20);
    eventually_every(pace, PATIENCE, what, || async {
        match lease_state(env).await {
            (holder, _) if wanted(&holder) => Ok(holder),
            (holder, _) => Err(format!("holder is {holder:?}")),
        }
    })
    .await
}

/// The replica in `replicas` named `name`.
pub fn replica<'a>(replicas: &'a mut [Process], name: &str) -> &'a mut Process {
    replicas
        .iter_mut()
        .find(|p| p.name() == name)
        .unwrap_or_else(|| panic!("no replica {name}"))
}

/// A `trigger applied` line of a replica's JSON log.
#[derive(Debug, Clone, PartialEq)]
pub struct Applied {
    /// The rule.
    pub rule: String,
    /// The fire instant.
    pub schedule_time: Timestamp,
    /// Whether it was applied late.
    pub catch_up: bool,
}

/// The triggers a replica's log says it applied.
pub fn applied(log: &str) -> Vec<Applied> {
    log.lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|line| line["message"] == "trigger applied")
        .map(|line| Applied {
            rule: line["rule"].as_str().unwrap_or_default().to_owned(),
            schedule_time: line["schedule_time"]
                .as_str()
                .and_then(|t| t.parse().ok())
                .expect("schedule_time"),
            catch_up: line["catch_up"].as_bool().expect("catch_up"),
        })
        .collect()
}

/// GETs `path` from the health and metrics server of `process` (its address is in its
/// log); returns the HTTP status and body.
pub fn http_get(process: &Process, path: &str) -> (u16, String) {
    let address = metrics_address(process);
    crate::http::get(&address, path).unwrap_or_else(|e| panic!("{}: {e}", process.name()))
}

/// The `host:port` of the health and metrics server of `process`, from its log.
pub fn metrics_address(process: &Process) -> String {
    logged_metrics_address(process).unwrap_or_else(|| {
        panic!(
            "{} logged no server address:\n{}",
            process.name(),
            process.log()
        )
    })
}

/// Like [`metrics_address`], `None` while the process has not logged it yet.
pub fn logged_metrics_address(process: &Process) -> Option<String> {
    process
        .log()
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|line| line["message"] == "serving /healthz, /readyz and /metrics")
        .and_then(|line| line["address"].as_str().map(str::to_owned))
}

/// Rules alternating the level every 2 s: each instant is a new trigger.
pub const ALTERNATING: [(&str, &str, i32); 2] = [
    ("even", "CRON_TZ=UTC */4 * * * * *", 2),
    ("odd", "CRON_TZ=UTC 2/4 * * * * *", 3),
];

/// Creates the Deployment `web` and the TidalScheduler `web` targeting it in Status mode
/// with `rules`, keeping `history_limit` entries; returns its tide.
pub async fn create_web(env: &TestEnv, rules: &[(&str, &str, i32)], history_limit: i32) -> Tide {
    env.api::<Deployment>()
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create Deployment");
    let mut manifest = manifest("web", "apps/v1", "Deployment", "web", "Status", rules);
    manifest["spec"]["historyLimit"] = history_limit.into();
    let created = create(env, manifest).await;
    validate(&created, &NoCalendars, Timestamp::now())
        .expect("valid")
        .tide
}
