//! A real Kubernetes control plane for integration tests, the way envtest provides
//! one: etcd and kube-apiserver, built by `tests/control-plane/provision.sh` and
//! started by `tests/control-plane/up.sh`, one per test binary, with the CRD of
//! `deploy/crd.yaml` installed. Each test gets a fresh namespace and a client.
//!
//! Environment:
//! - `TIDAL_TEST_KUBECONFIG`: use the cluster of this kubeconfig instead of starting
//!   one (the CRD is still applied);
//! - `TIDAL_CONTROL_PLANE_BIN`: directory with `etcd` and `kube-apiserver`, instead
//!   of running `provision.sh`;
//! - `TIDAL_KEEP_CONTROL_PLANE`: keep the control plane's directory (logs, data)
//!   after the test binary ends (it is stopped regardless).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, Config, ResourceExt};

use super::process::{Process, binary};
use super::reaper::Reaper;

/// The repository root.
pub use crate::REPO;

/// The field manager of everything the harness applies.
const FIELD_MANAGER: &str = "tidal-tests";

/// One control plane (started here, or given by `TIDAL_TEST_KUBECONFIG`).
pub struct ControlPlane {
    kubeconfig: PathBuf,
    dir: Option<PathBuf>,
    /// Where etcd and kube-apiserver are (a control plane started here).
    bin: Option<PathBuf>,
}

/// This test binary's control plane, started on first use.
pub fn control_plane() -> &'static ControlPlane {
    static SHARED: OnceLock<Result<ControlPlane, String>> = OnceLock::new();
    let shared = SHARED.get_or_init(|| {
        if let Some(kubeconfig) = std::env::var_os("TIDAL_TEST_KUBECONFIG") {
            return ControlPlane::existing(PathBuf::from(kubeconfig));
        }
        let binary = std::env::current_exe().expect("current_exe");
        let binary = binary
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or("tests");
        let dir =
            crate::target_tmpdir().join(format!("control-plane-{binary}-{}", std::process::id()));
        ControlPlane::start(&dir)
    });
    match shared {
        Ok(control_plane) => control_plane,
        Err(e) => panic!("no Kubernetes control plane for the tests: {e}"),
    }
}

impl ControlPlane {
    /// Starts a control plane under `dir`, stopped when this process ends, and
    /// installs the CRD.
    pub fn start(dir: &Path) -> Result<ControlPlane, String> {
        ControlPlane::start_with(dir, &[])
    }

    /// Like [`ControlPlane::start`], with a Jaeger that kube-apiserver and etcd trace to
    /// (`up.sh` with `TIDAL_JAEGER=1`; its addresses are in `DIR/jaeger.env`).
    pub fn start_with_jaeger(dir: &Path) -> Result<ControlPlane, String> {
        ControlPlane::start_with(dir, &[("TIDAL_JAEGER", "1")])
    }

    /// Like [`ControlPlane::start`], as a full single-node cluster (`up.sh --node`, with
    /// the variables `vars`: its node's settings are in `DIR/node.env`).
    pub fn start_node(dir: &Path, vars: &[(&str, &str)]) -> Result<ControlPlane, String> {
        crate::packages::ensure(crate::packages::Packages::Node)?;
        ControlPlane::start_mode(dir, &["--node"], vars)
    }

    fn start_with(dir: &Path, vars: &[(&str, &str)]) -> Result<ControlPlane, String> {
        ControlPlane::start_mode(dir, &[], vars)
    }

    fn start_mode(
        dir: &Path,
        flags: &[&str],
        vars: &[(&str, &str)],
    ) -> Result<ControlPlane, String> {
        let bin = provisioned_bin()?;
        std::fs::create_dir_all(dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
        Reaper::get().watch_control_plane(dir);
        let dir_arg = dir.to_str().ok_or("control plane directory is not UTF-8")?;
        let args: Vec<&str> = flags.iter().copied().chain([dir_arg]).collect();
        let kubeconfig = run_script_with("up.sh", &args, Some(&bin), vars)?;
        let control_plane = ControlPlane {
            kubeconfig: PathBuf::from(kubeconfig),
            dir: Some(dir.to_owned()),
            bin: Some(bin),
        };
        control_plane.install_crd()?;
        Ok(control_plane)
    }

    /// Uses the cluster of an existing kubeconfig and installs the CRD.
    fn existing(kubeconfig: PathBuf) -> Result<ControlPlane, String> {
        let control_plane = ControlPlane {
            kubeconfig,
            dir: None,
            bin: None,
        };
        control_plane.install_crd()?;
        Ok(control_plane)
    }

    /// The admin kubeconfig (what `KUBECONFIG` is set to for child processes).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// `kubectl` (the harness's own build, else the one on `PATH`) with this control
    /// plane's kubeconfig.
    pub fn kubectl(&self) -> Command {
        let program = self
            .bin
            .as_ref()
            .map_or_else(|| PathBuf::from("kubectl"), |bin| bin.join("kubectl"));
        let mut command = Command::new(program);
        command.env("KUBECONFIG", &self.kubeconfig);
        command
    }

    /// The directory of a control plane started here (pid files, logs, data).
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// Its certificates and keys (`pki/` of a control plane started here): proxies in
    /// front of the API server serve its certificate.
    pub fn pki(&self) -> PathBuf {
        self.dir()
            .expect("a control plane started by the harness")
            .join("pki")
    }

    /// The directory of its provisioned binaries (a control plane started here).
    pub fn bin(&self) -> Option<&Path> {
        self.bin.as_deref()
    }

    /// Stops one component (`kube-apiserver` or `etcd`) of a control plane started here,
    /// like a crash (SIGKILL after 1 s): an outage, until [`ControlPlane::start_stopped`].
    pub fn stop_component(&self, component: &str) {
        let status = Command::new("bash")
            .arg(Path::new(REPO).join("tests/control-plane/down.sh"))
            .args([self.dir_arg(), component])
            .env("TIDAL_STOP_GRACE", "1")
            .stderr(Stdio::inherit())
            .status()
            .expect("run down.sh");
        assert!(status.success(), "down.sh {component} failed: {status}");
    }

    /// Starts whatever component is stopped again, on the same ports, and waits until
    /// the API server is ready.
    pub fn start_stopped(&self) {
        let dir = self.dir_arg();
        run_script("up.sh", &[dir], self.bin.as_deref()).expect("up.sh after an outage");
    }

    fn dir_arg(&self) -> &str {
        self.dir
            .as_deref()
            .and_then(Path::to_str)
            .expect("outages need the harness's own control plane, not TIDAL_TEST_KUBECONFIG")
    }

    /// An admin client (group system:masters).
    pub async fn client(&self) -> Client {
        self.client_with(|_| {}).await
    }

    /// A client that impersonates `user`, e.g. `system:serviceaccount:NS:NAME`
    /// (the apiserver adds a ServiceAccount's groups itself).
    pub async fn client_as(&self, user: &str) -> Client {
        self.client_with(|config| config.auth_info.impersonate = Some(user.to_owned()))
            .await
    }

    async fn client_with(&self, customize: impl FnOnce(&mut Config)) -> Client {
        let kubeconfig = Kubeconfig::read_from(&self.kubeconfig)
            .unwrap_or_else(|e| panic!("read {}: {e}", self.kubeconfig.display()));
        let mut config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
            .await
            .expect("kubeconfig is usable");
        customize(&mut config);
        Client::try_from(config).expect("build client")
    }

    /// Applies `deploy/crd.yaml` and waits until it is Established. Runs on its own
    /// thread and runtime, as the shared control plane outlives each test's runtime.
    fn install_crd(&self) -> Result<(), String> {
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let runtime = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| format!("tokio runtime: {e}"))?;
                    runtime.block_on(async {
                        let client = self.client().await;
                        let path = Path::new(REPO).join("deploy/crd.yaml");
                        for object in read_manifests(&path) {
                            apply(&client, &object, None).await?;
                            let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
                            let name = object.name_any();
                            let established =
                                await_condition(crds, &name, conditions::is_crd_established());
                            tokio::time::timeout(Duration::from_secs(60), established)
                                .await
                                .map_err(|_| "CRD not Established after 60 s".to_owned())?
                                .map_err(|e| format!("waiting for the CRD: {e}"))?;
                        }
                        Ok(())
                    })
                })
                .join()
                .map_err(|_| "installing the CRD panicked".to_owned())?
        })
    }
}

/// The directory of the provisioned binaries (kube-apiserver, etcd, kubectl, jaeger,
/// prometheus, promtool): `TIDAL_CONTROL_PLANE_BIN`, else what `provision.sh` prints
/// (building them on first use).
pub fn provisioned_bin() -> Result<PathBuf, String> {
    static BIN: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    BIN.get_or_init(|| match std::env::var_os("TIDAL_CONTROL_PLANE_BIN") {
        Some(bin) => Ok(PathBuf::from(bin)),
        None => run_script("provision.sh", &[], None).map(PathBuf::from),
    })
    .clone()
}

/// Runs a script of `tests/control-plane/` with the runner the demo uses too (`tidal-control-plane`),
/// its progress on our stderr; returns the last line of its stdout.
pub fn run_script(script: &str, args: &[&str], bin: Option<&Path>) -> Result<String, String> {
    run_script_with(script, args, bin, &[])
}

/// Like [`run_script`], with the variables `vars`.
pub fn run_script_with(
    script: &str,
    args: &[&str],
    bin: Option<&Path>,
    vars: &[(&str, &str)],
) -> Result<String, String> {
    let dir = Path::new(REPO).join("tests/control-plane");
    let line = tidal_control_plane::run(&dir, script, args, bin, vars)
        .map_err(|e| format!("{e}; see its output above"))?;
    if line.is_empty() {
        return Err(format!("{script} printed nothing"));
    }
    Ok(line)
}

/// The documents of a YAML manifest file.
pub fn read_manifests(path: &Path) -> Vec<DynamicObject> {
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
        .unwrap_or_else(|e| panic!("{}: not YAML: {e}", path.display()));
    documents
        .into_iter()
        .filter(|document| !document.is_null())
        .map(|document| {
            serde_json::from_value(document)
                .unwrap_or_else(|e| panic!("{}: not a Kubernetes object: {e}", path.display()))
        })
        .collect()
}

/// The API of an object's kind (found by discovery), in its namespace, or in
/// `default_namespace` when it has none and the kind is namespaced.
pub async fn api_for(
    client: &Client,
    object: &DynamicObject,
    default_namespace: Option<&str>,
) -> Result<Api<DynamicObject>, String> {
    let types = object
        .types
        .as_ref()
        .ok_or_else(|| format!("{} has no apiVersion/kind", object.name_any()))?;
    let gvk = GroupVersionKind::try_from(types).map_err(|e| e.to_string())?;
    let (resource, capabilities) = kube::discovery::pinned_kind(client, &gvk)
        .await
        .map_err(|e| format!("discover {gvk:?}: {e}"))?;
    Ok(match capabilities.scope {
        kube::discovery::Scope::Cluster => Api::all_with(client.clone(), &resource),
        kube::discovery::Scope::Namespaced => {
            let namespace = object
                .namespace()
                .or(default_namespace.map(str::to_owned))
                .ok_or_else(|| format!("{} needs a namespace", object.name_any()))?;
            Api::namespaced_with(client.clone(), &namespace, &resource)
        }
    })
}

/// Server-side applies an object (forcing ownership, like `kubectl apply
/// --server-side --force-conflicts`).
pub async fn apply(
    client: &Client,
    object: &DynamicObject,
    default_namespace: Option<&str>,
) -> Result<DynamicObject, String> {
    let api = api_for(client, object, default_namespace).await?;
    api.patch(
        &object.name_any(),
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(|e| format!("apply {}: {e}", object.name_any()))
}

/// What one test works with: a client and a namespace of its own.
pub struct TestEnv {
    pub client: Client,
    pub namespace: String,
    control_plane: &'static ControlPlane,
}

impl TestEnv {
    /// A fresh namespace, named after the running test, on this binary's control
    /// plane.
    pub async fn new() -> TestEnv {
        TestEnv::on(control_plane()).await
    }

    /// A fresh namespace, named after the running test, on `control_plane`.
    pub async fn on(control_plane: &'static ControlPlane) -> TestEnv {
        let client = control_plane.client().await;
        let namespace = Namespace {
            metadata: kube::api::ObjectMeta {
                generate_name: Some(format!("{}-", namespace_prefix())),
                ..Default::default()
            },
            ..Default::default()
        };
        let namespaces = Api::<Namespace>::all(client.clone());
        let params = PostParams::default();
        let created = namespaces.create(&params, &namespace);
        let namespace = tokio::time::timeout(Duration::from_secs(60), created)
            .await
            .expect("no answer within 60 s to creating the test's namespace")
            .expect("create the test's namespace")
            .name_any();
        TestEnv {
            client,
            namespace,
            control_plane,
        }
    }

    /// The control plane the test runs on.
    pub fn control_plane(&self) -> &'static ControlPlane {
        self.control_plane
    }

    /// The typed API of a namespaced kind in the test's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The API of a namespaced kind in the test's namespace, objects read as stored (JSON,
    /// no typed defaults): what a field left out looks like to other clients.
    pub fn raw_api<K>(&self) -> Api<DynamicObject>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        let resource = kube::api::ApiResource::erase::<K>(&Default::default());
        Api::namespaced_with(self.client.clone(), &self.namespace, &resource)
    }

    /// Runs the product binary with `args` against this control plane (as
    /// `KUBECONFIG`), logging to `target/tmp/logs/NAMESPACE/NAME.log`.
    pub fn run_binary(&self, name: &str, args: &[&str]) -> Process {
        self.run_binary_with(name, args, self.control_plane.kubeconfig())
    }

    /// Like [`TestEnv::run_binary`], with `KUBECONFIG` set to `kubeconfig`.
    pub fn run_binary_with(&self, name: &str, args: &[&str], kubeconfig: &Path) -> Process {
        self.run_binary_with_env(name, args, kubeconfig, &[])
    }

    /// Like [`TestEnv::run_binary_with`], with extra environment variables.
    pub fn run_binary_with_env(
        &self,
        name: &str,
        args: &[&str],
        kubeconfig: &Path,
        vars: &[(&str, &str)],
    ) -> Process {
        let log = self.log_dir().join(format!("{name}.log"));
        let mut command = Command::new(binary());
        command.args(args).env("KUBECONFIG", kubeconfig);
        command.envs(vars.iter().copied());
        Process::spawn(name, command, log)
    }

    /// Writes a copy of the admin kubeconfig whose server is `server` (e.g.
    /// `https://127.0.0.1:1`) next to the test's logs, as `NAME.kubeconfig`; returns its path.
    pub fn kubeconfig_for_server(&self, name: &str, server: &str) -> PathBuf {
        let admin =
            std::fs::read_to_string(self.control_plane.kubeconfig()).expect("read kubeconfig");
        let redirected: Vec<String> = admin
            .lines()
            .map(|line| match line.trim_start().strip_prefix("server:") {
                Some(_) => format!("    server: {server}"),
                None => line.to_owned(),
            })
            .collect();
        let dir = self.log_dir();
        std::fs::create_dir_all(&dir).expect("create log directory");
        let path = dir.join(format!("{name}.kubeconfig"));
        std::fs::write(&path, redirected.join("\n")).expect("write kubeconfig");
        path
    }

    /// Where the test's child processes log.
    pub fn log_dir(&self) -> PathBuf {
        crate::target_tmpdir().join("logs").join(&self.namespace)
    }
}

/// A DNS label from the running test's name (libtest names the thread after it).
fn namespace_prefix() -> String {
    let thread = std::thread::current();
    let test = thread.name().unwrap_or("test");
    let test = test.rsplit("::").next().unwrap_or(test);
    let mut label: String = test
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .take(50)
        .collect();
    label = label.trim_matches('-').to_owned();
    if label.is_empty() {
        "test".to_owned()
    } else {
        label
    }
}
