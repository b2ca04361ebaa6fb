//! In-cluster mode: the controller as `kubectl apply -k deploy/` installs it (the
//! Deployment `tidal-scheduler` in `tidal-system`, its pods' names the Lease
//! identities), on the cluster of a kubeconfig. Faults go through the API (pod deletion,
//! a rolling restart) and, given the node's containerd socket, through the container
//! runtime (signals to the controller's container).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;
use tidal_harness::wait::{PACE, poll};

use jiff::Timestamp;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config, ResourceExt};
use serde_json::json;

use crate::timing::{LeaseTiming, parse_duration};

/// Where and how the controller is installed.
#[derive(Debug, Clone)]
pub struct Installation {
    /// The kubeconfig of a cluster admin.
    pub kubeconfig: PathBuf,
    /// The controller's namespace (also its Lease's).
    pub namespace: String,
    /// The controller's Deployment.
    pub deployment: String,
    /// The Lease's name.
    pub lease: String,
    /// containerd's socket on the node, for signal faults (`ctr`); without it only
    /// the API's faults are available.
    pub containerd: Option<String>,
    /// The API server's audit log, if readable here: zombie writes are judged on it.
    pub audit_log: Option<PathBuf>,
    /// The image of the workload's pods (present on the node).
    pub workload_image: String,
    /// The commands of the `upgrade` scenario, one per fault in turn (run by `sh -c`,
    /// with `KUBECONFIG` set): each moves the Deployment to another version, e.g.
    /// `helm upgrade …` then `helm rollback …`.
    pub upgrades: Vec<String>,
}

/// The installed controller and a namespace of the scenario's own for its workload.
pub struct InCluster {
    /// An admin client.
    pub client: Client,
    /// The workload's namespace.
    pub namespace: String,
    /// The installation.
    pub installation: Installation,
    /// The Lease timing of the installed Deployment (its environment, else defaults).
    pub timing: LeaseTiming,
    /// The controller's ServiceAccount.
    service_account: String,
    /// The ConfigMaps of scale targets [`InCluster::allow_widgets`] added the Widget to.
    mapped: Vec<String>,
}

/// The key and resource of the Widget in an admission policy's ConfigMap of scale
/// targets (`Kind.group: resource`).
const WIDGET_KEY: &str = "Widget.example.com";
const WIDGET_RESOURCE: &str = "widgets";
/// The name ending of those ConfigMaps (`tidal-scheduler-scale-targets`, or a Helm
/// release's `FULLNAME-scale-targets`).
const SCALE_TARGETS: &str = "-scale-targets";

/// The controller's pods.
const SELECTOR: &str = "app.kubernetes.io/name=tidal-scheduler";

impl InCluster {
    /// Connects, reads the Deployment's Lease timing and creates the workload's
    /// namespace.
    pub async fn new(installation: Installation) -> Result<InCluster, String> {
        let kubeconfig = Kubeconfig::read_from(&installation.kubeconfig)
            .map_err(|e| format!("read {}: {e}", installation.kubeconfig.display()))?;
        let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .map_err(|e| format!("kubeconfig: {e}"))?;
        let client = Client::try_from(config).map_err(|e| e.to_string())?;
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &installation.namespace);
        let deployment = deployments
            .get(&installation.deployment)
            .await
            .map_err(|e| {
                format!(
                    "Deployment {}/{}: {e} (install it with kubectl apply -k deploy/)",
                    installation.namespace, installation.deployment
                )
            })?;
        let timing = timing_of(&deployment)?;
        let service_account = deployment
            .spec
            .as_ref()
            .and_then(|s| s.template.spec.as_ref())
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".to_owned());
        let namespace: Namespace = serde_json::from_value(json!({
            "metadata": { "generateName": "tidal-chaos-" },
        }))
        .map_err(|e| e.to_string())?;
        let namespace = Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .map_err(|e| format!("create the workload's namespace: {e}"))?
            .name_any();
        Ok(InCluster {
            client,
            namespace,
            installation,
            timing,
            service_account,
            mapped: Vec::new(),
        })
    }

    /// Lets the installed controller scale Widgets: a ClusterRole of the run's own
    /// (`get`, `list` and `watch` on widgets — the watch spares each write a read, as
    /// docs/operations.md advises for custom kinds — and the `widgets/scale`
    /// subresource) bound to its ServiceAccount,
    /// and the kind added to each ConfigMap of scale targets of its admission policy
    /// that lacks it. [`InCluster::remove_workload`] takes both back.
    pub async fn allow_widgets(&mut self) -> Result<(), String> {
        let name = self.widget_role();
        let role: ClusterRole = serde_json::from_value(json!({
            "metadata": { "name": name },
            "rules": [
                {
                    "apiGroups": ["example.com"],
                    "resources": ["widgets"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["example.com"],
                    "resources": ["widgets/scale"],
                    "verbs": ["get", "patch", "update"],
                },
            ],
        }))
        .map_err(|e| e.to_string())?;
        let binding: ClusterRoleBinding = serde_json::from_value(json!({
            "metadata": { "name": name },
            "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name },
            "subjects": [{
                "kind": "ServiceAccount",
                "name": self.service_account,
                "namespace": self.installation.namespace,
            }],
        }))
        .map_err(|e| e.to_string())?;
        Api::<ClusterRole>::all(self.client.clone())
            .create(&PostParams::default(), &role)
            .await
            .map_err(|e| format!("create ClusterRole {name}: {e}"))?;
        Api::<ClusterRoleBinding>::all(self.client.clone())
            .create(&PostParams::default(), &binding)
            .await
            .map_err(|e| format!("create ClusterRoleBinding {name}: {e}"))?;
        let config_maps = self.config_maps();
        let listed = config_maps
            .list(&ListParams::default().labels(SELECTOR))
            .await
            .map_err(|e| format!("list the ConfigMaps of scale targets: {e}"))?;
        for map in listed.items {
            let map_name = map.name_any();
            let lacks = !map.data.is_some_and(|data| data.contains_key(WIDGET_KEY));
            if map_name.ends_with(SCALE_TARGETS) && lacks {
                let patch = json!({ "data": { WIDGET_KEY: WIDGET_RESOURCE } });
                config_maps
                    .patch(&map_name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .map_err(|e| format!("map {WIDGET_KEY} in ConfigMap {map_name}: {e}"))?;
                self.mapped.push(map_name);
            }
        }
        Ok(())
    }

    /// The name of the ClusterRole (and its binding) of [`InCluster::allow_widgets`].
    fn widget_role(&self) -> String {
        format!("{}-widgets", self.namespace)
    }

    /// The controller's pods that are running and not being deleted.
    pub async fn replicas(&self) -> Result<Vec<String>, String> {
        let pods = self
            .pods()
            .list(&ListParams::default().labels(SELECTOR))
            .await;
        let pods = pods.map_err(|e| format!("list the controller's pods: {e}"))?;
        Ok(pods
            .items
            .iter()
            .filter(|pod| pod.metadata.deletion_timestamp.is_none())
            .filter(|pod| pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
            .map(ResourceExt::name_any)
            .collect())
    }

    /// Deletes pod `name`: its container gets SIGTERM, releases the Lease and exits;
    /// the ReplicaSet starts a new pod. `grace` 0 kills it at once.
    pub async fn delete_pod(&self, name: &str, grace: Option<u32>) -> Result<(), String> {
        let params = DeleteParams {
            grace_period_seconds: grace,
            ..DeleteParams::default()
        };
        self.pods()
            .delete(name, &params)
            .await
            .map_err(|e| format!("delete pod {name}: {e}"))?;
        Ok(())
    }

    /// Sends `signal` (e.g. `SIGKILL`, `SIGSTOP`) to pod `name`'s controller container
    /// through the node's containerd.
    pub async fn signal(&self, name: &str, signal: &str) -> Result<(), String> {
        let address =
            self.installation.containerd.as_deref().ok_or(
                "signal faults need the node's containerd socket: pass --containerd-address",
            )?;
        let pod = self
            .pods()
            .get(name)
            .await
            .map_err(|e| format!("get pod {name}: {e}"))?;
        let container = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .and_then(|statuses| statuses.iter().find(|c| c.name == "controller"))
            .and_then(|c| c.container_id.as_deref())
            .and_then(|id| id.strip_prefix("containerd://"))
            .ok_or_else(|| format!("pod {name} has no running controller container"))?
            .to_owned();
        let output = Command::new("ctr")
            .args([
                "--address",
                address,
                "-n",
                "k8s.io",
                "tasks",
                "kill",
                "--signal",
                signal,
            ])
            .arg(&container)
            .output()
            .map_err(|e| format!("run ctr: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "ctr tasks kill --signal {signal} {container}: {}",
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        Ok(())
    }

    /// Restarts the Deployment (`kubectl rollout restart`) and waits until the rollout
    /// is complete.
    pub async fn rolling_restart(&self, limit: Duration) -> Result<(), String> {
        let deployments: Api<Deployment> =
            Api::namespaced(self.client.clone(), &self.installation.namespace);
        let name = &self.installation.deployment;
        let patch = json!({ "spec": { "template": { "metadata": { "annotations": {
            "kubectl.kubernetes.io/restartedAt": Timestamp::now().to_string(),
        } } } } });
        deployments
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .map_err(|e| format!("restart Deployment {name}: {e}"))?;
        self.wait_rolled_out(limit).await
    }

    /// Runs upgrade command `round` (modulo their number) and waits until the
    /// Deployment's rollout is complete.
    pub async fn upgrade(&self, round: usize, limit: Duration) -> Result<(), String> {
        let commands = &self.installation.upgrades;
        if commands.is_empty() {
            return Err("the upgrade scenario needs a command: pass --upgrade-command".to_owned());
        }
        let command = &commands[round % commands.len()];
        let output = tokio::process::Command::new("sh")
            .args(["-c", command])
            .env("KUBECONFIG", &self.installation.kubeconfig)
            .output()
            .await
            .map_err(|e| format!("run sh -c {command:?}: {e}"))?;
        if !output.status.success() {
            return Err(format!(
                "upgrade command {command:?}: {}\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
        self.wait_rolled_out(limit).await
    }

    /// Waits until every replica of the Deployment runs its current template.
    async fn wait_rolled_out(&self, limit: Duration) -> Result<(), String> {
        let deployments: Api<Deployment> =
            Api::namespaced(self.client.clone(), &self.installation.namespace);
        let name = &self.installation.deployment;
        let complete = || async {
            match deployments.get(name).await {
                Ok(deployment) if rolled_out(&deployment) => Ok(Ok(())),
                Ok(_) => Err(format!("rollout of {name} not complete within {limit:?}")),
                Err(error) => Ok(Err(error.to_string())),
            }
        };
        poll(PACE, limit, complete).await?
    }

    /// Deletes the workload's namespace (the controller forgets its objects) and takes
    /// back what [`InCluster::allow_widgets`] granted.
    pub async fn remove_workload(&self) -> Result<(), String> {
        Api::<Namespace>::all(self.client.clone())
            .delete(&self.namespace, &DeleteParams::default())
            .await
            .map_err(|e| format!("delete namespace {}: {e}", self.namespace))?;
        let role = self.widget_role();
        ok_if_absent(
            Api::<ClusterRoleBinding>::all(self.client.clone())
                .delete(&role, &DeleteParams::default())
                .await,
        )
        .map_err(|e| format!("delete ClusterRoleBinding {role}: {e}"))?;
        ok_if_absent(
            Api::<ClusterRole>::all(self.client.clone())
                .delete(&role, &DeleteParams::default())
                .await,
        )
        .map_err(|e| format!("delete ClusterRole {role}: {e}"))?;
        for map_name in &self.mapped {
            let patch = json!({ "data": { WIDGET_KEY: null } });
            ok_if_absent(
                self.config_maps()
                    .patch(map_name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await,
            )
            .map_err(|e| format!("unmap {WIDGET_KEY} in ConfigMap {map_name}: {e}"))?;
        }
        Ok(())
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.installation.namespace)
    }

    fn config_maps(&self) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), &self.installation.namespace)
    }
}

/// A deletion's (or patch's) result, where a 404 (nothing to remove) is success too.
fn ok_if_absent<T>(result: Result<T, kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(drop),
    }
}

/// Whether every replica of `deployment` runs its current template and is available.
fn rolled_out(deployment: &Deployment) -> bool {
    let wanted = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let Some(status) = &deployment.status else {
        return false;
    };
    status.observed_generation >= deployment.metadata.generation
        && status.updated_replicas == Some(wanted)
        && status.available_replicas == Some(wanted)
        && status.replicas == Some(wanted)
}

/// The Lease timing of the controller container's environment (`TIDAL_LEASE_DURATION`,
/// `TIDAL_RENEW_DEADLINE`, `TIDAL_RETRY_PERIOD`), client-go's defaults where unset.
fn timing_of(deployment: &Deployment) -> Result<LeaseTiming, String> {
    let env = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.iter().find(|c| c.name == "controller"))
        .and_then(|c| c.env.clone())
        .unwrap_or_default();
    let setting = |name: &str, default: Duration| -> Result<Duration, String> {
        match env
            .iter()
            .find(|v| v.name == name)
            .and_then(|v| v.value.as_deref())
        {
            None => Ok(default),
            Some(text) => parse_duration(text).map_err(|e| format!("{name}: {e}")),
        }
    };
    Ok(LeaseTiming {
        duration: setting("TIDAL_LEASE_DURATION", Duration::from_secs(15))?,
        renew: setting("TIDAL_RENEW_DEADLINE", Duration::from_secs(10))?,
        retry: setting("TIDAL_RETRY_PERIOD", Duration::from_secs(2))?,
    })
}
