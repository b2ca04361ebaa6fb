//! Local mode: the harness's own control plane (etcd, kube-apiserver with an audit log),
//! controller replicas as processes, each reaching the API server as a user of its own
//! (impersonated, so that API Priority and Fairness can squeeze it), through a Toxiproxy
//! proxy of its own when a scenario cuts or slows connections, optionally under
//! libfaketime. Every fault is available.

use std::time::Duration;

use k8s_openapi::api::flowcontrol::v1::{FlowSchema, PriorityLevelConfiguration};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{DeleteParams, PostParams};
use kube::{Api, Client};
use serde_json::json;
use tidal_harness::cluster::TestEnv;
use tidal_harness::fleet::{Clocks, Fleet, Options, Route, read_kubeconfig};
use tidal_harness::toxiproxy::Toxic;

use crate::scenario::Scenario;
use crate::timing::LeaseTiming;

/// The replicas of one scenario on the harness's control plane.
pub struct Local {
    /// The scenario's namespace.
    pub env: TestEnv,
    /// The replicas' Lease timing.
    pub timing: LeaseTiming,
    user: String,
    fleet: Fleet,
}

impl Local {
    /// A fresh namespace on this process's control plane, the user the replicas will act
    /// as (bound to `cluster-admin`), and what `scenarios` need of the replicas: Toxiproxy
    /// in their path, libfaketime; no replica yet.
    pub async fn new(timing: LeaseTiming, scenarios: &[Scenario]) -> Result<Local, String> {
        let env = TestEnv::new().await;
        let user = format!("tidal-chaos-{}", env.namespace);
        bind_cluster_admin(&env.client, &user).await?;
        let flags = timing.flags();
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        let clocks = if scenarios.iter().any(|s| s.faked_clocks()) {
            Clocks::Faked { initial: "+0" }
        } else {
            Clocks::Real
        };
        let route = if scenarios.iter().any(|s| s.proxied()) {
            Route::Toxiproxy
        } else {
            Route::Direct
        };
        let options = Options::new("replica", &flags)
            .route(route)
            .clocks(clocks)
            .user(&user);
        let fleet = Fleet::new(&env, options)?;
        Ok(Local {
            env,
            timing,
            user,
            fleet,
        })
    }

    /// Starts one more replica, `replica-N`; returns its name.
    pub async fn add(&mut self) -> Result<String, String> {
        self.fleet.add(&self.env).await
    }

    /// The names of the replicas running.
    pub fn names(&self) -> Vec<String> {
        self.fleet.names()
    }

    /// Sends `signal` (`KILL`, `TERM`, `STOP`, `CONT`) to replica `name`.
    pub fn signal(&self, name: &str, signal: &str) -> Result<(), String> {
        self.fleet.signal(name, signal)
    }

    /// SIGKILLs replica `name` and starts a fresh one in its place, like a Deployment.
    pub async fn kill_and_replace(&mut self, name: &str) -> Result<String, String> {
        self.fleet.kill_and_replace(&self.env, name).await
    }

    /// Waits (up to `limit`) for replica `name` to exit and keeps it with the ended ones.
    pub async fn retire(&mut self, name: &str, limit: Duration) -> Result<(), String> {
        self.fleet.retire(name, limit).await
    }

    /// Whether replica `name` answers `/readyz` with 200.
    pub fn ready(&self, name: &str) -> bool {
        self.fleet.ready(name)
    }

    /// Applies `toxic` to the connection of replica `name` to the API server.
    pub fn partition(&self, name: &str, toxic: Toxic) -> Result<(), String> {
        self.fleet.toxiproxy()?.inject(name, toxic)
    }

    /// Removes every toxic of replica `name`'s connection.
    pub fn heal(&self, name: &str) -> Result<(), String> {
        self.fleet.toxiproxy()?.heal(name)
    }

    /// Sets replica `name`'s wall clock `offset` from the real one (libfaketime, e.g.
    /// `+180s`; `+0` heals); it is read within a second.
    pub fn skew(&self, name: &str, offset: &str) -> Result<(), String> {
        self.fleet.skew(name, offset)
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

    /// How long one request of replica `name` takes now: `GET /version` through its proxy,
    /// on a new connection.
    pub async fn round_trip(&self, name: &str) -> Result<Duration, String> {
        let path = self.fleet.kubeconfig(name)?;
        let config = kube::Config::from_custom_kubeconfig(
            read_kubeconfig(path)?,
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
