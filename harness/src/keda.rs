//! KEDA on the node, as its own kustomize installation (`config/minimal` of the pinned
//! module: CRDs, RBAC, the operator with its cron scaler, the metrics API server and its
//! APIService), for the peers benchmark. Built from the Go module proxy by
//! `provision.sh keda`, packed into one local image by `deploy/image/oci-archive.sh`.
//!
//! Three changes to KEDA's manifests, each for this node rather than for KEDA: the local
//! image (never pulled); the operator's Service on a fixed ClusterIP, and the metrics
//! API server resolving the operator's name to it through `/etc/hosts` (the node has no
//! cluster DNS).

use std::path::{Path, PathBuf};

use tidal_control_plane::run;

use super::cluster::{REPO, run_script};
use super::node::Node;

/// Where KEDA's manifests install it.
pub const NAMESPACE: &str = "keda";
/// The operator's Service address: in the lower band of the service range
/// (10.0.0.0/24), which dynamic allocation leaves to static addresses.
const OPERATOR_CLUSTER_IP: &str = "10.0.0.10";
/// The user KEDA's images run as.
const USER: &str = "1000:1000";

/// Installs KEDA on `node` and waits until its operator and metrics API server are
/// ready and the external metrics API answers; returns KEDA's version.
pub fn install(node: &Node) -> Result<String, String> {
    let built = PathBuf::from(run_script("provision.sh", &["keda"], None)?);
    let version = built
        .file_name()
        .and_then(|name| name.to_str())
        .and_then(|name| name.strip_prefix("keda-"))
        .ok_or_else(|| format!("{} is not a keda-VERSION directory", built.display()))?
        .to_owned();
    let image = format!("docker.io/library/keda:{version}");
    let dir = node.dir().join("keda");
    std::fs::create_dir_all(&dir).map_err(|e| format!("create {}: {e}", dir.display()))?;
    let archive = pack_image(&built, &image, &dir)?;
    node.ctr(&["images", "import", &archive])?;
    copy_config(&dir)?;
    std::fs::write(dir.join("kustomization.yaml"), kustomization(&image))
        .map_err(|e| format!("write {}/kustomization.yaml: {e}", dir.display()))?;
    node.kubectl(&["apply", "--server-side", "-k", &path(&dir)?])?;
    for deployment in ["keda-operator", "keda-metrics-apiserver"] {
        node.rollout(NAMESPACE, deployment)?;
    }
    node.kubectl(&[
        "wait",
        "--for=condition=Available",
        "apiservice/v1beta1.external.metrics.k8s.io",
        "--timeout=120s",
    ])?;
    Ok(version)
}

/// Packs KEDA's two binaries into one image (`/keda`, `/keda-adapter`, as KEDA's own
/// images have them); returns the archive's path.
fn pack_image(built: &Path, image: &str, dir: &Path) -> Result<String, String> {
    let rootfs = dir.join("rootfs");
    let _ = std::fs::remove_dir_all(&rootfs);
    let tmp = rootfs.join("tmp");
    std::fs::create_dir_all(&tmp).map_err(|e| format!("create {}: {e}", tmp.display()))?;
    for binary in ["keda", "keda-adapter"] {
        std::fs::copy(built.join(binary), rootfs.join(binary))
            .map_err(|e| format!("copy {binary} into the image: {e}"))?;
    }
    let archive = path(&dir.join("keda.oci.tar"))?;
    let image_dir = Path::new(REPO).join("deploy/image");
    run(
        &image_dir,
        "oci-archive.sh",
        &[&path(&rootfs)?, image, USER, &archive, "/keda"],
        None,
        &[],
    )
    .map_err(|e| format!("packing KEDA's image: {e}"))?;
    Ok(archive)
}

/// Copies KEDA's `config/` from the module cache (read-only there) to `dir/config`.
fn copy_config(dir: &Path) -> Result<(), String> {
    let module = Path::new(REPO).join("tests/control-plane/keda");
    let source = std::process::Command::new("go")
        .args([
            "list",
            "-m",
            "-f",
            "{{.Dir}}",
            "github.com/kedacore/keda/v2",
        ])
        .current_dir(&module)
        .env("GOWORK", "off")
        .env("GOFLAGS", "-mod=readonly")
        .output()
        .map_err(|e| format!("go list: {e}"))?;
    if !source.status.success() {
        return Err(format!(
            "go list -m github.com/kedacore/keda/v2: {}",
            String::from_utf8_lossy(&source.stderr)
        ));
    }
    let source = String::from_utf8_lossy(&source.stdout).trim().to_owned();
    let config = dir.join("config");
    let _ = std::fs::remove_dir_all(&config);
    let status = std::process::Command::new("cp")
        .args(["-r", &format!("{source}/config"), &path(&config)?])
        .status()
        .map_err(|e| format!("cp: {e}"))?;
    let chmod = std::process::Command::new("chmod")
        .args(["-R", "u+w", &path(&config)?])
        .status()
        .map_err(|e| format!("chmod: {e}"))?;
    if status.success() && chmod.success() {
        Ok(())
    } else {
        Err(format!("copying {source}/config failed"))
    }
}

/// The overlay on KEDA's `config/minimal`.
fn kustomization(image: &str) -> String {
    let (name, tag) = image.rsplit_once(':').expect("IMAGE:TAG");
    format!(
        r#"apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources:
- config/minimal
images:
- name: ghcr.io/kedacore/keda
  newName: {name}
  newTag: {tag}
- name: ghcr.io/kedacore/keda-metrics-apiserver
  newName: {name}
  newTag: {tag}
patches:
- target: {{kind: Deployment, namespace: {NAMESPACE}}}
  patch: |-
    - op: replace
      path: /spec/template/spec/containers/0/imagePullPolicy
      value: Never
- target: {{kind: Service, name: keda-operator, namespace: {NAMESPACE}}}
  patch: |-
    - op: add
      path: /spec/clusterIP
      value: {OPERATOR_CLUSTER_IP}
- target: {{kind: Deployment, name: keda-metrics-apiserver, namespace: {NAMESPACE}}}
  patch: |-
    - op: add
      path: /spec/template/spec/hostAliases
      value:
      - ip: {OPERATOR_CLUSTER_IP}
        hostnames: [keda-operator.{NAMESPACE}.svc.cluster.local]
"#
    )
}

fn path(path: &Path) -> Result<String, String> {
    path.to_str()
        .map(str::to_owned)
        .ok_or_else(|| format!("{} is not UTF-8", path.display()))
}
