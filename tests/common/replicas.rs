//! Several controller replicas on one test namespace, campaigning for its Lease with short
//! durations, and what their logs say they applied.

use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::coordination::v1::Lease;
use serde_json::Value;

use super::cluster::TestEnv;
use super::process::Process;
use super::tide::{PATIENCE, start_replica};

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
    let lease = env
        .api::<Lease>()
        .get_opt(LEASE_NAME)
        .await
        .expect("get Lease");
    let spec = lease.and_then(|l| l.spec).unwrap_or_default();
    (
        spec.holder_identity.unwrap_or_default(),
        spec.lease_transitions.unwrap_or(0),
    )
}

/// Polls the Lease (every 20 ms) until its holder satisfies `wanted`; returns the holder.
pub async fn wait_holder(env: &TestEnv, what: &str, wanted: impl Fn(&str) -> bool) -> String {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (holder, _) = lease_state(env).await;
        if wanted(&holder) {
            return holder;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no {what} within {PATIENCE:?}; holder is {holder:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
