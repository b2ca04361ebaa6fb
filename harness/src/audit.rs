//! The API server's audit log (up.sh logs every request, reads included, with its
//! User-Agent and response code at Metadata level): which controller replica wrote what,
//! and when, as the server saw it; and what a client sent, by verb and resource.

use std::path::Path;

use jiff::Timestamp;
use serde_json::Value;

use super::cluster::TestEnv;

/// One request, as audited.
#[derive(Debug, Clone)]
pub struct Request {
    /// When the API server received it.
    pub at: Timestamp,
    /// Its User-Agent header.
    pub user_agent: String,
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, ...
    pub verb: String,
    /// e.g. `tidalschedulers`, `leases`, `events`, `deployments`; empty for a non-resource
    /// path such as discovery.
    pub resource: String,
    /// e.g. `status`, `scale`, or empty.
    pub subresource: String,
    /// The object's namespace; empty if cluster-scoped.
    pub namespace: String,
    /// The object's name; empty for a collection.
    pub name: String,
    /// The response's HTTP status; 0 while a watch is still open.
    pub code: u16,
    /// The request's URI, e.g. `/apis/apps/v1` for discovery.
    pub uri: String,
}

impl Request {
    /// Whether it asked to change something (the verbs that `assert_only_the_holder_writes`
    /// and the chaos checker judge).
    pub fn is_write(&self) -> bool {
        matches!(
            self.verb.as_str(),
            "create" | "update" | "patch" | "delete" | "deletecollection"
        )
    }

    /// The replica that sent it, from a `tidal-scheduler/VERSION (IDENTITY)` User-Agent.
    pub fn replica(&self) -> Option<&str> {
        replica_of(&self.user_agent)
    }

    /// `resource` or `resource/subresource`.
    pub fn resource_path(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.clone()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

/// One write request of a controller replica, as audited.
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

/// The audit log of the control plane started in `dir`, rotated parts included
/// (`audit-TIME.log`, oldest first, then `audit.log`).
pub fn read_log(dir: &Path) -> String {
    let mut parts: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|entry| entry.file_name()))
        .filter_map(|name| name.into_string().ok())
        .filter(|name| name.starts_with("audit-") && name.ends_with(".log"))
        .collect();
    parts.sort();
    parts.push("audit.log".to_owned());
    let read = |name: &String| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
    parts.iter().map(read).collect::<Vec<_>>().join("\n")
}

/// Every request of the audit log `log` (JSON lines) that finished, in the order the API
/// server received them. A watch is listed once, when its response started.
pub fn requests_in(log: &str) -> Vec<Request> {
    let mut requests: Vec<Request> = log
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .filter(|event| {
            matches!(
                event["stage"].as_str(),
                Some("ResponseComplete" | "ResponseStarted")
            )
        })
        .filter(|event| {
            // A watch has both stages: count it once.
            event["stage"] == "ResponseStarted" || event["verb"] != "watch"
        })
        .filter_map(|event| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            Some(Request {
                at: event["requestReceivedTimestamp"].as_str()?.parse().ok()?,
                user_agent: text(&event["userAgent"]),
                verb: text(&event["verb"]),
                resource: text(&event["objectRef"]["resource"]),
                subresource: text(&event["objectRef"]["subresource"]),
                namespace: text(&event["objectRef"]["namespace"]),
                name: text(&event["objectRef"]["name"]),
                code: event["responseStatus"]["code"].as_u64().unwrap_or(0) as u16,
                uri: text(&event["requestURI"]),
            })
        })
        .collect();
    requests.sort_by_key(|r| r.at);
    requests
}

/// The controller replicas' writes in the test's namespace, in the order the API server
/// received them.
pub fn replica_writes(env: &TestEnv) -> Vec<Write> {
    let dir = env
        .control_plane()
        .dir()
        .expect("the audit log needs the harness's own control plane, not TIDAL_TEST_KUBECONFIG");
    replica_writes_in(&read_log(dir), &[&env.namespace])
}

/// The controller replicas' writes in `namespaces` of the audit log `log` (JSON
/// lines), in the order the API server received them. Reads, which a cluster's audit
/// policy may log too, are left out.
pub fn replica_writes_in(log: &str, namespaces: &[&str]) -> Vec<Write> {
    requests_in(log)
        .into_iter()
        .filter(|request| request.is_write() && namespaces.contains(&request.namespace.as_str()))
        .filter_map(|request| {
            Some(Write {
                replica: request.replica()?.to_owned(),
                at: request.at,
                verb: request.verb,
                resource: request.resource,
                subresource: request.subresource,
                name: request.name,
                code: request.code,
            })
        })
        .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    fn line(stage: &str, verb: &str, agent: &str, resource: &str, at: &str) -> String {
        serde_json::json!({
            "stage": stage,
            "verb": verb,
            "userAgent": agent,
            "requestReceivedTimestamp": at,
            "objectRef": { "resource": resource, "namespace": "ns", "name": "a" },
            "responseStatus": { "code": 200 },
        })
        .to_string()
    }

    #[test]
    fn a_watch_counts_once_and_reads_are_not_writes() {
        let agent = "tidal-scheduler/0.3.0 (r1)";
        let log = [
            line(
                "ResponseStarted",
                "watch",
                agent,
                "leases",
                "2026-12-05T00:00:01Z",
            ),
            line(
                "ResponseComplete",
                "watch",
                agent,
                "leases",
                "2026-12-05T00:00:02Z",
            ),
            line(
                "ResponseComplete",
                "get",
                agent,
                "leases",
                "2026-12-05T00:00:03Z",
            ),
            line(
                "ResponseComplete",
                "update",
                agent,
                "leases",
                "2026-12-05T00:00:04Z",
            ),
            "not json".to_owned(),
        ]
        .join("\n");
        let verbs: Vec<String> = requests_in(&log).into_iter().map(|r| r.verb).collect();
        assert_eq!(verbs, ["watch", "get", "update"]);
        let writes = replica_writes_in(&log, &["ns"]);
        assert_eq!(writes.len(), 1);
        assert_eq!(
            (writes[0].verb.as_str(), writes[0].replica.as_str()),
            ("update", "r1")
        );
    }
}
