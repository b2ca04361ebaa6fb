//! Local mode: the harness's own control plane (etcd, kube-apiserver with an audit log),
//! controller replicas as processes, each reaching the API server through a Toxiproxy
//! proxy of its own and as a user of its own (impersonated, so that API Priority and
//! Fairness can squeeze it), optionally under libfaketime. Every fault is available.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DeleteParams, PostParams};
use kube::config::Kubeconfig;
use kube::{Api, Client};
use serde_json::json;
use tidal_harness::cluster::{TestEnv, provisioned_bin};
use tidal_harness::http;
use tidal_harness::process::Process;
use tidal_harness::replicas::logged_metrics_address;
use tidal_harness::tide::start_replica_env;
use tidal_harness::toxiproxy::{Toxic, Toxiproxy};
use tidal_harness::wait::poll;

use crate::timing::LeaseTiming;

/// One controller replica.
pub struct Replica {
    /// Its identity (and its proxy's name).
    pub name: String,
    process: Process,
    clock: Option<PathBuf>,
}

/// The replicas of one scenario on the harness's control plane.
pub struct Local {
    /// The scenario's namespace.
    pub env: TestEnv,
    toxiproxy: Toxiproxy,
    upstream: String,
    /// The replicas' Lease timing.
    pub timing: LeaseTiming,
    user: String,
    faked_clocks: bool,
    started: usize,
    /// Replicas running (or stopped by SIGSTOP), oldest first.
    pub replicas: Vec<Replica>,
    /// Replicas that ended, kept for their logs.
    pub ended: Vec<Replica>,
}

impl Local {
    /// A fresh namespace on this process's control plane, Toxiproxy, and the user the
    /// replicas will act as (bound to `cluster-admin`); no replica yet.
    pub async fn new(timing: LeaseTiming, faked_clocks: bool) -> Result<Local, String> {
        let env = TestEnv::new().await;
        let bin = provisioned_bin()?;
        let toxiproxy = Toxiproxy::start(&bin, &env.log_dir().join("toxiproxy.log"))?;
        let kubeconfig = read_kubeconfig(env.control_plane().kubeconfig())?;
        let server = kubeconfig
            .clusters
            .first()
            .and_then(|c| c.cluster.as_ref())
            .and_then(|c| c.server.clone())
            .ok_or("the kubeconfig names no server")?;
        let upstream = server.trim_start_matches("https://").to_owned();
        let user = format!("tidal-chaos-{}", env.namespace);
        bind_cluster_admin(&env.client, &user).await?;
        if faked_clocks {
            tidal_harness::packages::libfaketime()?;
        }
        Ok(Local {
            env,
            toxiproxy,
            upstream,
            timing,
            user,
            faked_clocks,
            started: 0,
            replicas: Vec::new(),
            ended: Vec::new(),
        })
    }

    /// Starts one more replica, `replica-N`; returns its name.
    pub fn add(&mut self) -> Result<String, String> {
        let name = format!("replica-{}", self.started);
        self.started += 1;
        let listen = self.toxiproxy.proxy(&name, &self.upstream)?;
        let kubeconfig = self.kubeconfig_for(&name, &listen)?;
        let clock = self
            .faked_clocks
            .then(|| self.env.log_dir().join(format!("{name}.faketime")));
        let mut vars: Vec<(&str, &str)> = Vec::new();
        if let Some(clock) = &clock {
            std::fs::write(clock, "+0").map_err(|e| format!("write {}: {e}", clock.display()))?;
            vars.extend([
                ("LD_PRELOAD", tidal_harness::packages::LIBFAKETIME),
                (
                    "FAKETIME_TIMESTAMP_FILE",
                    clock.to_str().ok_or("non-UTF-8 path")?,
                ),
                ("FAKETIME_CACHE_DURATION", "1"),
                ("FAKETIME_DONT_FAKE_MONOTONIC", "1"),
            ]);
        }
        let timing = self.timing.flags();
        let timing: Vec<&str> = timing.iter().map(String::as_str).collect();
        let process = start_replica_env(&self.env, &name, &timing, &kubeconfig, &vars);
        self.replicas.push(Replica {
            name: name.clone(),
            process,
            clock,
        });
        Ok(name)
    }

    /// The names of the replicas running.
    pub fn names(&self) -> Vec<String> {
        self.replicas.iter().map(|r| r.name.clone()).collect()
    }

    /// Sends `signal` (`KILL`, `TERM`, `STOP`, `CONT`) to replica `name`.
    pub fn signal(&self, name: &str, signal: &str) -> Result<(), String> {
        self.replica(name)?.process.signal(signal);
        Ok(())
    }

    /// SIGKILLs replica `name` and starts a fresh one in its place, like a Deployment.
    pub async fn kill_and_replace(&mut self, name: &str) -> Result<String, String> {
        self.signal(name, "KILL")?;
        self.retire(name, Duration::from_secs(5)).await?;
        self.add()
    }

    /// Waits (up to `limit`) for replica `name` to exit and keeps it with the ended ones.
    pub async fn retire(&mut self, name: &str, limit: Duration) -> Result<(), String> {
        let at = self
            .replicas
            .iter()
            .position(|r| r.name == name)
            .ok_or_else(|| format!("no replica {name}"))?;
        let mut replica = self.replicas.remove(at);
        let exited = poll(Duration::from_millis(10), limit, || {
            let exited = replica.process.try_status().is_some();
            async move { exited.then_some(()).ok_or_else(String::new) }
        });
        exited
            .await
            .map_err(|_: String| format!("{name} did not exit within {limit:?}"))?;
        self.ended.push(replica);
        Ok(())
    }

    /// Whether replica `name` answers `/readyz` with 200.
    pub fn ready(&self, name: &str) -> bool {
        let Ok(replica) = self.replica(name) else {
            return false;
        };
        logged_metrics_address(&replica.process)
            .is_some_and(|address| http::get(&address, "/readyz").is_ok_and(|(s, _)| s == 200))
    }

    /// Applies `toxic` to the connection of replica `name` to the API server.
    pub fn partition(&self, name: &str, toxic: Toxic) -> Result<(), String> {
        self.toxiproxy.inject(name, toxic)
    }

    /// Removes every toxic of replica `name`'s connection.
    pub fn heal(&self, name: &str) -> Result<(), String> {
        self.toxiproxy.heal(name)
    }

    /// Sets replica `name`'s wall clock `offset` from the real one (libfaketime, e.g.
    /// `+180s`; `+0` heals); it is read within a second.
    pub fn skew(&self, name: &str, offset: &str) -> Result<(), String> {
        let clock = self
            .replica(name)?
            .clock
            .as_ref()
            .ok_or("replicas run without libfaketime")?;
        std::fs::write(clock, offset).map_err(|e| format!("write {}: {e}", clock.display()))
    }

    /// Stops `component` (`kube-apiserver` or `etcd`) like a crash, and starts it again
    /// after `outage`; returns once the API server is ready.
    pub async fn restart(&self, component: &str, outage: Duration) -> Result<(), String> {
        let control_plane = self.env.control_plane();
        tokio::task::block_in_place(|| control_plane.stop_component(component));
        tokio::time::sleep(outage).await;
        tokio::task::block_in_place(|| control_plane.start_stopped());
        Ok(())
    }

    /// Squeezes the replicas' user with API Priority and Fairness: a FlowSchema sends its
    /// requests to a priority level of one share that rejects (429) what it cannot run.
    pub async fn throttle(&self) -> Result<(), String> {
        let name = &self.user;
        let level: PriorityLevelConfiguration = serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": {
                "type": "Limited",
                "limited": {
                    "nominalConcurrencyShares": 1,
                    "lendablePercent": 0,
                    "borrowingLimitPercent": 0,
                    "limitResponse": { "type": "Reject" },
                },
            },
        }))
        .map_err(|e| e.to_string())?;
        let schema: FlowSchema = serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": {
                "priorityLevelConfiguration": { "name": name },
                "matchingPrecedence": 100,
                "distinguisherMethod": { "type": "ByUser" },
                "rules": [{
                    "subjects": [{ "kind": "User", "user": { "name": name } }],
                    "resourceRules": [{
                        "verbs": ["*"], "apiGroups": ["*"], "resources": ["*"],
                        "namespaces": ["*"], "clusterScope": true,
                    }],
                    "nonResourceRules": [{ "verbs": ["*"], "nonResourceURLs": ["*"] }],
                }],
            },
        }))
        .map_err(|e| e.to_string())?;
        let client = &self.env.client;
        Api::<PriorityLevelConfiguration>::all(client.clone())
            .create(&PostParams::default(), &level)
            .await
            .map_err(|e| format!("create PriorityLevelConfiguration {name}: {e}"))?;
        Api::<FlowSchema>::all(client.clone())
            .create(&PostParams::default(), &schema)
            .await
            .map_err(|e| format!("create FlowSchema {name}: {e}"))?;
        Ok(())
    }

    /// Removes what [`Local::throttle`] created.
    pub async fn unthrottle(&self) -> Result<(), String> {
        let client = &self.env.client;
        let name = &self.user;
        Api::<FlowSchema>::all(client.clone())
            .delete(name, &DeleteParams::default())
            .await
            .map_err(|e| format!("delete FlowSchema {name}: {e}"))?;
        Api::<PriorityLevelConfiguration>::all(client.clone())
            .delete(name, &DeleteParams::default())
            .await
            .map_err(|e| format!("delete PriorityLevelConfiguration {name}: {e}"))?;
        Ok(())
    }

    /// The replica named `name`, running.
    fn replica(&self, name: &str) -> Result<&Replica, String> {
        self.replicas
            .iter()
            .find(|r| r.name == name)
            .ok_or_else(|| format!("no running replica {name}"))
    }

    /// How long one request of replica `name` takes now: `GET /version` through its proxy,
    /// on a new connection.
    pub async fn round_trip(&self, name: &str) -> Result<Duration, String> {
        let path = self.env.log_dir().join(format!("{name}.kubeconfig"));
        let config = kube::Config::from_custom_kubeconfig(
            read_kubeconfig(&path)?,
            &kube::config::KubeConfigOptions::default(),
        )
        .await
        .map_err(|e| format!("{}: {e}", path.display()))?;
        let client = Client::try_from(config).map_err(|e| e.to_string())?;
        let started = std::time::Instant::now();
        client
            .apiserver_version()
            .await
            .map_err(|e| format!("GET /version as {name}: {e}"))?;
        Ok(started.elapsed())
    }

    /// A kubeconfig for replica `name`: the admin's, through `listen`, impersonating
    /// the scenario's user.
    fn kubeconfig_for(&self, name: &str, listen: &str) -> Result<PathBuf, String> {
        let mut kubeconfig = read_kubeconfig(self.env.control_plane().kubeconfig())?;
        for cluster in kubeconfig
            .clusters
            .iter_mut()
            .filter_map(|c| c.cluster.as_mut())
        {
            cluster.server = Some(format!("https://{listen}"));
        }
        for user in kubeconfig
            .auth_infos
            .iter_mut()
            .filter_map(|u| u.auth_info.as_mut())
        {
            user.impersonate = Some(self.user.clone());
        }
        let path = self.env.log_dir().join(format!("{name}.kubeconfig"));
        std::fs::create_dir_all(self.env.log_dir()).map_err(|e| e.to_string())?;
        let text = serde_json::to_string(&kubeconfig).map_err(|e| e.to_string())?;
        std::fs::write(&path, text).map_err(|e| format!("write {}: {e}", path.display()))?;
        Ok(path)
    }
}

fn read_kubeconfig(path: &Path) -> Result<Kubeconfig, String> {
    Kubeconfig::read_from(path).map_err(|e| format!("read {}: {e}", path.display()))
}

/// Binds `cluster-admin` to `user`, the identity the replicas act as.
async fn bind_cluster_admin(client: &Client, user: &str) -> Result<(), String> {
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": { "name": user },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin" },
        "subjects": [{ "apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user }],
    }))
    .map_err(|e| e.to_string())?;
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .map_err(|e| format!("bind cluster-admin to {user}: {e}"))?;
    Ok(())
}
