//! The replicas a scenario works on, in either mode: the faults both modes have, and
//! access to local mode's own.

use std::path::Path;
use std::time::Duration;

use kube::Client;
use tidal_harness::audit::{Write, replica_writes_in};

use crate::in_cluster::InCluster;
use crate::local::Local;
use crate::scenario::Mode;
use crate::timing::LeaseTiming;

/// Local processes or the installed Deployment.
pub enum Cluster {
    /// See [`Local`].
    Local(Local),
    /// See [`InCluster`].
    InCluster(InCluster),
}

impl Cluster {
    /// Its mode.
    pub fn mode(&self) -> Mode {
        match self {
            Cluster::Local(_) => Mode::Local,
            Cluster::InCluster(_) => Mode::InCluster,
        }
    }

    /// An admin client no fault touches.
    pub fn client(&self) -> Client {
        match self {
            Cluster::Local(local) => local.env.client.clone(),
            Cluster::InCluster(cluster) => cluster.client.clone(),
        }
    }

    /// The workload's namespace.
    pub fn namespace(&self) -> &str {
        match self {
            Cluster::Local(local) => &local.env.namespace,
            Cluster::InCluster(cluster) => &cluster.namespace,
        }
    }

    /// The namespace and name of the replicas' Lease.
    pub fn lease(&self) -> (&str, &str) {
        match self {
            Cluster::Local(local) => (&local.env.namespace, tidal_harness::replicas::LEASE_NAME),
            Cluster::InCluster(cluster) => {
                (&cluster.installation.namespace, &cluster.installation.lease)
            }
        }
    }

    /// The replicas' Lease timing.
    pub fn timing(&self) -> LeaseTiming {
        match self {
            Cluster::Local(local) => local.timing,
            Cluster::InCluster(cluster) => cluster.timing,
        }
    }

    /// The identities of the replicas running.
    pub async fn replicas(&self) -> Result<Vec<String>, String> {
        match self {
            Cluster::Local(local) => Ok(local.names()),
            Cluster::InCluster(cluster) => cluster.replicas().await,
        }
    }

    /// SIGKILL of replica `name`, which is replaced (locally by a fresh process, in a
    /// cluster by kubelet restarting the container).
    pub async fn kill(&mut self, name: &str) -> Result<(), String> {
        match self {
            Cluster::Local(local) => local.kill_and_replace(name).await.map(drop),
            Cluster::InCluster(cluster) => cluster.signal(name, "SIGKILL").await,
        }
    }

    /// Graceful termination of replica `name` (its pod deleted: SIGTERM), replaced by a
    /// fresh one.
    pub async fn terminate(&mut self, name: &str) -> Result<(), String> {
        match self {
            Cluster::Local(local) => {
                local.signal(name, "TERM")?;
                local.retire(name, Duration::from_secs(30)).await?;
                local.add().await.map(drop)
            }
            Cluster::InCluster(cluster) => cluster.delete_pod(name, None).await,
        }
    }

    /// Every replica SIGKILLed at once, all replaced (or restarted in their pods).
    /// Returns whether they come back under the same identities.
    pub async fn kill_all(&mut self) -> Result<bool, String> {
        match self {
            Cluster::Local(local) => {
                let names = local.names();
                for name in &names {
                    local.signal(name, "KILL")?;
                }
                for name in &names {
                    local.retire(name, Duration::from_secs(5)).await?;
                }
                for _ in &names {
                    local.add().await?;
                }
                Ok(false)
            }
            // SIGKILL through the runtime when it is reachable (kubelet restarts the
            // containers in their pods); else deleting the pods without grace, which
            // kubelet carries out as a short SIGTERM.
            Cluster::InCluster(cluster) if cluster.installation.containerd.is_some() => {
                for name in cluster.replicas().await? {
                    cluster.signal(&name, "SIGKILL").await?;
                }
                Ok(true)
            }
            Cluster::InCluster(cluster) => {
                for name in cluster.replicas().await? {
                    cluster.delete_pod(&name, Some(0)).await?;
                }
                Ok(false)
            }
        }
    }

    /// Freezes (`STOP`) or thaws (`CONT`) replica `name`.
    pub async fn freeze(&self, name: &str, frozen: bool) -> Result<(), String> {
        match self {
            Cluster::Local(local) => local.signal(name, if frozen { "STOP" } else { "CONT" }),
            Cluster::InCluster(cluster) => {
                cluster
                    .signal(name, if frozen { "SIGSTOP" } else { "SIGCONT" })
                    .await
            }
        }
    }

    /// Local mode's replicas, for the faults only it has.
    pub fn local(&mut self) -> Result<&mut Local, String> {
        match self {
            Cluster::Local(local) => Ok(local),
            Cluster::InCluster(_) => Err("this fault needs local mode".to_owned()),
        }
    }

    /// The replicas' writes from the API server's audit log (local mode: the harness's
    /// control plane logs them), or `None` without one.
    pub fn writes(&self) -> Option<Result<Vec<Write>, String>> {
        let (lease_namespace, _) = self.lease();
        let namespaces = [self.namespace(), lease_namespace];
        let log = match self {
            Cluster::Local(local) => local.env.control_plane().dir().map(|d| d.join("audit.log")),
            Cluster::InCluster(cluster) => cluster.installation.audit_log.clone(),
        }?;
        Some(read_writes(&log, &namespaces))
    }
}

fn read_writes(log: &Path, namespaces: &[&str]) -> Result<Vec<Write>, String> {
    let text = std::fs::read_to_string(log).map_err(|e| format!("read {}: {e}", log.display()))?;
    Ok(replica_writes_in(&text, namespaces))
}
