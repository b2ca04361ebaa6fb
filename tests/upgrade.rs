//! Upgrading from the previous release (the newest in `release/releases`, built from its
//! commit) to this tree and back, on a real node, as docs/installing.md's "Upgrading" says: with
//! Helm (the CRD applied first, then `helm upgrade`; back with `helm rollback`) and with
//! `kubectl apply -k` (back with the previous release's `deploy/` minus its CRD). 100
//! objects fire every 2 s (see [`PERIOD`]) in Scale mode across both rollouts, each
//! scaling a Widget (a custom kind with `/scale` no controller acts on: the chaos
//! scenario's workload); the chaos checker judges every instant applied or superseded
//! exactly once, none early, no write from an ended term (the node's audit log).

use std::path::{Path, PathBuf};
use std::time::Duration;

use tidal_chaos::in_cluster::Installation;
use tidal_chaos::report::table as chaos_table;
use tidal_chaos::run::{Limits, Patience, Target, run_mixed};
use tidal_chaos::scenario::Scenario;
use tidal_harness as common;

use common::cluster::REPO;
use common::node::{KUSTOMIZE_NAMESPACE, Node, node, turn};
use common::release::{Artifacts, previous_artifacts};

/// The controller's namespace, Deployment and Lease (both installations name them so:
/// the Helm release is `tidal-scheduler`).
const SYSTEM: &str = KUSTOMIZE_NAMESPACE;
const NAME: &str = "tidal-scheduler";
/// The CRDs of `deploy/crd.yaml`.
const CRDS: [&str; 3] = [
    "tidalschedulers.scheduling.tidal.io",
    "tidalcalendars.scheduling.tidal.io",
    "clustertidalcalendars.scheduling.tidal.io",
];

/// Seconds between the workload's instants, the scenario's own. All 100 objects fire
/// together: a burst of 100 Scale-mode triggers — each a `/scale` write, a status write
/// and an Event — every period. Against 0.1.0, which also read each target before writing
/// it, this 2-core node fell behind a 2 s period when both cores were busy with other work
/// (a backlog that never converged), so the test ran every 4 s until 0.2.0, whose triggers
/// need no read, became the previous release (docs/installing.md has the runs).
const PERIOD: u32 = 2;

/// A shell word.
fn quoted(word: &Path) -> String {
    format!("'{}'", word.display())
}

/// `kubectl ARGS` as a shell command (the runner sets `KUBECONFIG`).
fn kubectl(node: &Node, args: &str) -> String {
    let bin = node.control_plane().bin().expect("a node started here");
    format!("{} {args}", quoted(&bin.join("kubectl")))
}

/// `helm ARGS` as a shell command, its state under the node's directory.
fn helm(node: &Node, args: &str) -> String {
    let bin = node.control_plane().bin().expect("a node started here");
    let home = node.dir().join("helm");
    format!(
        "HELM_CACHE_HOME={} HELM_CONFIG_HOME={} HELM_DATA_HOME={} {} {args}",
        quoted(&home.join("cache")),
        quoted(&home.join("config")),
        quoted(&home.join("data")),
        quoted(&bin.join("helm"))
    )
}

/// Runs a shell command of [`kubectl`] or [`helm`] now.
fn sh(node: &Node, command: &str) -> String {
    let output = std::process::Command::new("sh")
        .args(["-c", command])
        .env("KUBECONFIG", node.control_plane().kubeconfig())
        .output()
        .expect("run sh");
    assert!(
        output.status.success(),
        "{command}: {}\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Both images on the node: the previous release's and this tree's.
fn images(node: &Node, old: &Artifacts) {
    node.ctr(&["images", "import", old.image.to_str().expect("UTF-8 path")])
        .unwrap_or_else(|e| panic!("import {}: {e}", old.image.display()));
    node.load_controller_image(tidal_scheduler::VERSION);
}

/// The image the controller's Deployment runs.
fn running_image(node: &Node) -> String {
    node.kubectl(&[
        "-n",
        SYSTEM,
        "get",
        "deployment",
        NAME,
        "-o",
        "jsonpath={.spec.template.spec.containers[0].image}",
    ])
    .expect("the controller's Deployment")
}

/// A shell command that fails unless the controller's Deployment runs `version`.
fn runs(node: &Node, version: &str) -> String {
    format!(
        "test \"$({})\" = tidal-scheduler:{version}",
        kubectl(
            node,
            &format!(
                "-n {SYSTEM} get deployment {NAME} -o jsonpath='{{.spec.template.spec.containers[0].image}}'"
            )
        )
    )
}

/// The `upgrade` chaos scenario with one fault per command (the upgrade, then the
/// downgrade), on one workload that lives across both; asserts the checker's verdict.
async fn across(node: &Node, commands: Vec<String>) {
    let installation = Installation {
        kubeconfig: node.control_plane().kubeconfig().to_owned(),
        namespace: SYSTEM.to_owned(),
        deployment: NAME.to_owned(),
        lease: NAME.to_owned(),
        containerd: Some(node.containerd_address().to_owned()),
        audit_log: Some(node.dir().join("audit.log")),
        workload_image: node.pause_image().to_owned(),
        upgrades: commands.clone(),
    };
    let limits = Limits {
        faults: commands.len(),
        duration: Duration::from_secs(1200),
        patience: Patience::Loaded,
        period: Some(PERIOD),
        objects: None,
    };
    let report = run_mixed(
        &[Scenario::Upgrade],
        limits,
        &Target::InCluster(installation),
    )
    .await
    .unwrap_or_else(|e| panic!("upgrade: {e}"));
    eprint!("{}", chaos_table(std::slice::from_ref(&report)));
    if !report.passed() {
        keep_controller_logs(node);
    }
    assert!(report.passed(), "{:?}", report.problems);
    assert_eq!(
        report.faults.len(),
        commands.len(),
        "one rollout per command"
    );
    assert!(report.verdict.instants > 0, "no instant judged");
}

/// What the controller's pods said, for a failure's diagnosis: each pod's whole log in
/// the node's directory, its last lines on stderr.
fn keep_controller_logs(node: &Node) {
    let pods = node
        .kubectl(&["-n", SYSTEM, "get", "pods", "-o", "name"])
        .unwrap_or_default();
    for pod in pods.lines() {
        let log = node
            .kubectl(&["-n", SYSTEM, "logs", pod, "--tail=-1"])
            .unwrap_or_else(|e| e);
        let file = node
            .dir()
            .join(format!("upgrade-{}.log", pod.replace('/', "-")));
        let kept = std::fs::write(&file, &log).map_or_else(
            |e| format!("not kept: {e}"),
            |()| format!("whole log: {}", file.display()),
        );
        let lines: Vec<&str> = log.lines().collect();
        let tail = &lines[lines.len().saturating_sub(60)..];
        eprintln!("--- {pod} ({kept})\n{}", tail.join("\n"));
    }
}

/// Removes any installation — Helm's or kustomize's, whichever an earlier test left, even
/// one that failed half-way — with its CRDs (and every object), so that a test installs on
/// an empty cluster.
fn uninstall(node: &Node) {
    let _ = node.helm(&["uninstall", NAME, "-n", SYSTEM, "--wait"]);
    let deploy = Path::new(REPO).join("deploy");
    node.kubectl(&[
        "delete",
        "-k",
        deploy.to_str().expect("UTF-8 path"),
        "--ignore-not-found",
        "--wait=true",
    ])
    .expect("delete what kubectl apply -k installs");
    let mut args = vec!["delete", "crd", "--ignore-not-found", "--wait=true"];
    args.extend(CRDS);
    node.kubectl(&args).expect("delete the CRDs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn helm_upgrade_from_the_previous_release_and_rollback_lose_no_trigger() {
    let node = node();
    let _turn = turn().await;
    let old = previous_artifacts();
    uninstall(node);
    images(node, old);
    let chart = Path::new(REPO).join("deploy/helm/tidal-scheduler");
    sh(
        node,
        &helm(
            node,
            &format!(
                "install {NAME} {} -n {SYSTEM} --create-namespace --wait --timeout 5m",
                quoted(&old.chart)
            ),
        ),
    );
    assert_eq!(
        running_image(node),
        format!("tidal-scheduler:{}", old.release.version)
    );

    let upgrade = format!(
        "{} && {}",
        kubectl(
            node,
            &format!(
                "apply --server-side --force-conflicts -f {}",
                quoted(&chart.join("crds/crds.yaml"))
            )
        ),
        helm(
            node,
            &format!(
                "upgrade {NAME} {} -n {SYSTEM} --wait --timeout 5m",
                quoted(&chart)
            )
        )
    );
    let upgrade = format!("{upgrade} && {}", runs(node, tidal_scheduler::VERSION));
    let rollback = helm(
        node,
        &format!("rollback {NAME} -n {SYSTEM} --wait --timeout 5m"),
    );
    across(node, vec![upgrade, rollback]).await;
    assert_eq!(
        running_image(node),
        format!("tidal-scheduler:{}", old.release.version),
        "rolled back"
    );
    let history = sh(
        node,
        &helm(node, &format!("history {NAME} -n {SYSTEM} -o json")),
    );
    assert!(
        history.contains(&format!("\"app_version\":\"{}\"", tidal_scheduler::VERSION)),
        "the upgrade is in Helm's history: {history}"
    );
    uninstall(node);
}

/// A kustomization of the previous release's `deploy/` without its CRDs: the downgrade
/// keeps the newer CRD (an older schema would prune the fields the newer added).
fn without_crds(node: &Node, old: &Artifacts) -> PathBuf {
    let overlay = node
        .dir()
        .join(format!("downgrade-{}", old.release.version));
    let _ = std::fs::remove_dir_all(&overlay);
    std::fs::create_dir_all(&overlay).expect("create the overlay");
    let status = std::process::Command::new("cp")
        .arg("-R")
        .arg(&old.deploy)
        .arg(overlay.join("base"))
        .status()
        .expect("cp");
    assert!(status.success(), "copy {}", old.deploy.display());
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "resources:\n  - base\npatches:\n  - target:\n      kind: CustomResourceDefinition\n    \
         patch: |-\n      $patch: delete\n      apiVersion: apiextensions.k8s.io/v1\n      \
         kind: CustomResourceDefinition\n      metadata:\n        name: any\n",
    )
    .expect("write the overlay");
    overlay
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kubectl_apply_k_upgrade_from_the_previous_release_and_back_lose_no_trigger() {
    let node = node();
    let _turn = turn().await;
    let old = previous_artifacts();
    uninstall(node);
    images(node, old);
    sh(
        node,
        &kubectl(
            node,
            &format!("apply --server-side -k {}", quoted(&old.deploy)),
        ),
    );
    node.rollout(SYSTEM, NAME)
        .expect("the previous release's rollout");
    assert_eq!(
        running_image(node),
        format!("tidal-scheduler:{}", old.release.version)
    );

    let downgrade = without_crds(node, old);
    let rendered = node
        .kubectl(&["kustomize", downgrade.to_str().expect("UTF-8 path")])
        .expect("kubectl kustomize of the downgrade");
    assert!(
        !rendered.contains("kind: CustomResourceDefinition")
            && rendered.contains("kind: Deployment"),
        "the downgrade keeps the CRD and changes the controller:\n{rendered}"
    );
    let deploy = Path::new(REPO).join("deploy");
    across(
        node,
        vec![
            format!(
                "{} && {}",
                kubectl(
                    node,
                    &format!(
                        "apply --server-side --force-conflicts -k {}",
                        quoted(&deploy)
                    )
                ),
                runs(node, tidal_scheduler::VERSION)
            ),
            kubectl(
                node,
                &format!(
                    "apply --server-side --force-conflicts -k {}",
                    quoted(&downgrade)
                ),
            ),
        ],
    )
    .await;
    assert_eq!(
        running_image(node),
        format!("tidal-scheduler:{}", old.release.version),
        "downgraded"
    );
    uninstall(node);
}
