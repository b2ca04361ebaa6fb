//! A real single-node Kubernetes cluster for the tests of what users install
//! (`tests/control-plane/up.sh --node`: kube-controller-manager, kube-scheduler,
//! containerd, kubelet, kube-proxy), with the controller's image of
//! `deploy/image/build.sh` imported into its containerd. One per test binary, stopped
//! with it; its tests take [`turn`]s, since one machine holds one node and the node one
//! installation of the controller at a time.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use k8s_openapi::api::core::v1::Pod;
use tidal_control_plane::env_value;

use super::cluster::{ControlPlane, REPO};
use super::process::output;

/// The image of pod sandboxes, which any pod can run (pull policy `Never`).
const PAUSE_IMAGE: &str = "PAUSE_IMAGE";
/// The node's containerd socket.
const CONTAINERD_ADDRESS: &str = "CONTAINERD_ADDRESS";
/// Where `kubectl apply -k deploy/` installs the controller.
pub const KUSTOMIZE_NAMESPACE: &str = "tidal-system";

/// A running node and its control plane.
pub struct Node {
    control_plane: ControlPlane,
    containerd: String,
    pause_image: String,
}

/// This test binary's node, started on first use, with the controller's image built
/// before it (a release build: minutes on a fresh machine), so that no test's bound
/// includes the build and no node test runs beside it.
pub fn node() -> &'static Node {
    static SHARED: OnceLock<Result<Node, String>> = OnceLock::new();
    let shared = SHARED.get_or_init(|| {
        controller_image();
        let binary = std::env::current_exe().expect("current_exe");
        let binary = binary
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("tests");
        Node::start(&crate::target_tmpdir().join(format!("node-{binary}-{}", std::process::id())))
    });
    match shared {
        Ok(node) => node,
        Err(e) => panic!("no Kubernetes node for the tests: {e}"),
    }
}

/// Waits for this test's turn on the node; the turn lasts as long as the guard.
pub async fn turn() -> tokio::sync::MutexGuard<'static, ()> {
    static TURN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    TURN.lock().await
}

impl Node {
    /// Starts a node under `dir` (stopped and removed when the test process ends).
    pub fn start(dir: &Path) -> Result<Node, String> {
        Node::start_with(dir, &[])
    }

    /// Like [`Node::start`], with variables of `up.sh` (`TIDAL_HPA_SYNC_PERIOD`, ...).
    pub fn start_with(dir: &Path, vars: &[(&str, &str)]) -> Result<Node, String> {
        let control_plane = ControlPlane::start_node(dir, vars)?;
        let settings = std::fs::read_to_string(dir.join("node.env"))
            .map_err(|e| format!("read {}/node.env: {e}", dir.display()))?;
        let setting = |name: &str| {
            env_value(&settings, name)
                .map(str::to_owned)
                .ok_or_else(|| format!("node.env has no {name}"))
        };
        Ok(Node {
            containerd: setting(CONTAINERD_ADDRESS)?,
            pause_image: setting(PAUSE_IMAGE)?,
            control_plane,
        })
    }

    /// Its control plane (kubeconfig, clients, audit log).
    pub fn control_plane(&self) -> &ControlPlane {
        &self.control_plane
    }

    /// The socket of the node's containerd.
    pub fn containerd_address(&self) -> &str {
        &self.containerd
    }

    /// An image any pod can run here, with `imagePullPolicy: Never`.
    pub fn pause_image(&self) -> &str {
        &self.pause_image
    }

    /// The node's directory (state, component logs).
    pub fn dir(&self) -> &Path {
        self.control_plane.dir().expect("a node started here")
    }

    /// Runs `kubectl ARGS`; returns its stdout, or its stderr as the error.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        let mut command = self.control_plane.kubectl();
        command.args(args);
        output(command)
    }

    /// Waits until Deployment `namespace/name`'s rollout is complete (`kubectl rollout
    /// status`, at most 180 s).
    pub fn rollout(&self, namespace: &str, name: &str) -> Result<(), String> {
        let deployment = format!("deployment/{name}");
        self.kubectl(&[
            "-n",
            namespace,
            "rollout",
            "status",
            &deployment,
            "--timeout=180s",
        ])
        .map(drop)
    }

    /// Installs the controller with `kubectl apply -k deploy/` (again: idempotent, and it
    /// undoes what was changed since), its image imported first, and waits for the
    /// rollout of its replicas.
    pub fn install_kustomized(&self) -> Result<(), String> {
        self.load_controller_image(tidal_scheduler::VERSION);
        let deploy = Path::new(REPO).join("deploy");
        self.kubectl(&["apply", "-k", deploy.to_str().expect("UTF-8 path")])?;
        self.rollout(KUSTOMIZE_NAMESPACE, "tidal-scheduler")
    }

    /// Runs `ctr` on the node's containerd, in the Kubernetes namespace (`k8s.io`).
    pub fn ctr(&self, args: &[&str]) -> Result<String, String> {
        let mut command = Command::new("ctr");
        command
            .args(["--address", &self.containerd, "-n", "k8s.io"])
            .args(args);
        output(command)
    }

    /// Runs `helm ARGS` (the provisioned build) against this cluster, its caches and
    /// configuration under the node's directory.
    pub fn helm(&self, args: &[&str]) -> Result<String, String> {
        let bin = self.control_plane.bin().expect("a node started here");
        let mut command = helm_command(bin, &self.dir().join("helm"));
        command
            .args(args)
            .env("KUBECONFIG", self.control_plane.kubeconfig());
        output(command)
    }

    /// Imports the controller's image (built once per test binary) as
    /// `tidal-scheduler:TAG`; returns that reference.
    pub fn load_controller_image(&self, tag: &str) -> String {
        let archive = controller_image();
        let built = format!(
            "docker.io/library/tidal-scheduler:{}",
            tidal_scheduler::VERSION
        );
        let images = self.ctr(&["images", "ls", "-q"]).expect("ctr images ls");
        if !images.lines().any(|line| line == built) {
            self.ctr(&["images", "import", archive.to_str().expect("UTF-8 path")])
                .unwrap_or_else(|e| panic!("import {}: {e}", archive.display()));
        }
        let wanted = format!("docker.io/library/tidal-scheduler:{tag}");
        if wanted != built && !images.lines().any(|line| line == wanted) {
            self.ctr(&["images", "tag", &built, &wanted])
                .unwrap_or_else(|e| panic!("tag {built} as {wanted}: {e}"));
        }
        format!("tidal-scheduler:{tag}")
    }

    /// The process id (on this machine) of a container, by its containerd id.
    pub fn task_pid(&self, container: &str) -> u32 {
        let tasks = self.ctr(&["tasks", "ls"]).expect("ctr tasks ls");
        tasks
            .lines()
            .find_map(|line| {
                let mut columns = line.split_whitespace();
                (columns.next()? == container).then(|| columns.next()?.parse().ok())?
            })
            .unwrap_or_else(|| panic!("no running task {container}:\n{tasks}"))
    }
}

/// `helm` of the provisioned binaries in `bin`, its caches and configuration under
/// `home` (never the user's own).
pub fn helm_command(bin: &Path, home: &Path) -> Command {
    let mut command = Command::new(bin.join("helm"));
    command
        .env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    command
}

/// The containerd id of a pod's container `name` (from its status).
pub fn container_id(pod: &Pod, name: &str) -> String {
    pod.status
        .as_ref()
        .and_then(|status| status.container_statuses.as_ref())
        .and_then(|statuses| statuses.iter().find(|s| s.name == name))
        .and_then(|status| status.container_id.as_deref())
        .and_then(|id| id.strip_prefix("containerd://"))
        .unwrap_or_else(|| panic!("pod {:?} has no running {name}", pod.metadata.name))
        .to_owned()
}

/// The controller's image archive (`deploy/image/build.sh`, run once per test binary),
/// tagged with [`tidal_scheduler::VERSION`].
pub fn controller_image() -> &'static Path {
    static IMAGE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let image = IMAGE.get_or_init(|| {
        let dir = Path::new(REPO).join("deploy/image");
        tidal_control_plane::run(&dir, "build.sh", &[tidal_scheduler::VERSION], None, &[])
            .map(PathBuf::from)
            .map_err(|e| format!("{e}; see its output above"))
    });
    match image {
        Ok(archive) => archive,
        Err(e) => panic!("building the controller's image failed: {e}"),
    }
}
