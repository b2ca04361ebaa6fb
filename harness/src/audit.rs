//! The API server's audit log (up.sh logs every write with its User-Agent and response
//! code): which controller replica wrote what, and when, as the server saw it.

use jiff::Timestamp;
use serde_json::Value;

use super::cluster::TestEnv;

/// One write request, as audited.
#[derive(Debug, Clone)]
pub struct Write {
    /// When the API server received it.
    pub at: Timestamp,
    /// The replica that sent it (from `tidal-scheduler/VERSION (IDENTITY)`).
    pub replica: String,
    /// `create`, `update`, `patch`, `delete`.
    pub verb: String,
    /// e.g. `tidalschedulers`, `leases`, `events`, `deployments`.
    pub resource: String,
    /// e.g. `status`, `scale`, or empty.
    pub subresource: String,
    /// The object's name.
    pub name: String,
    /// The response's HTTP status.
    pub code: u16,
}

/// The controller replicas' writes in the test's namespace, in the order the API server
/// received them.
pub fn replica_writes(env: &TestEnv) -> Vec<Write> {
    let dir = env
        .control_plane()
        .dir()
        .expect("the audit log needs the harness's own control plane, not TIDAL_TEST_KUBECONFIG");
    let log = std::fs::read_to_string(dir.join("audit.log")).expect("read audit.log");
    replica_writes_in(&log, &[&env.namespace])
}

/// The controller replicas' writes in `namespaces` of the audit log `log` (JSON
/// lines), in the order the API server received them.
pub fn replica_writes_in(log: &str, namespaces: &[&str]) -> Vec<Write> {
    let mut writes: Vec<Write> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| {
            let namespace = event["objectRef"]["namespace"].as_str().unwrap_or_default();
            namespaces.contains(&namespace)
        })
        .filter_map(|event| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            Some(Write {
                at: event["requestReceivedTimestamp"].as_str()?.parse().ok()?,
                replica: replica_of(event["userAgent"].as_str()?)?.to_owned(),
                verb: text(&event["verb"]),
                resource: text(&event["objectRef"]["resource"]),
                subresource: text(&event["objectRef"]["subresource"]),
                name: text(&event["objectRef"]["name"]),
                code: event["responseStatus"]["code"].as_u64()? as u16,
            })
        })
        .collect();
    writes.sort_by_key(|w| w.at);
    writes
}

/// `IDENTITY` of a `tidal-scheduler/VERSION (IDENTITY)` User-Agent.
fn replica_of(agent: &str) -> Option<&str> {
    agent
        .strip_prefix("tidal-scheduler/")?
        .split_once(" (")?
        .1
        .strip_suffix(')')
}

/// Checks that every write (attempted, whatever its outcome) other than to the Lease
/// came from the replica whose Lease write last succeeded before it: at every moment at
/// most one replica writes, and it is the Lease holder. Returns the writes checked.
pub fn assert_only_the_holder_writes(env: &TestEnv, lease: &str) -> Vec<Write> {
    let writes = replica_writes(env);
    let mut holder: Option<&str> = None;
    let mut checked = Vec::new();
    for write in &writes {
        if write.resource == "leases" && write.name == lease {
            if write.code < 300 {
                holder = Some(&write.replica);
            }
            continue;
        }
        assert_eq!(
            holder,
            Some(write.replica.as_str()),
            "{write:?} sent while the Lease was last taken or renewed by {holder:?}"
        );
        checked.push(write.clone());
    }
    checked
}
