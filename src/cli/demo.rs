//! `tidal-scheduler demo`: the whole product on this machine in one command. Starts a
//! local control plane (the test harness's scripts), installs the CRD, runs the
//! controller, creates a Deployment and a TidalScheduler whose rules fire every few
//! seconds, and prints each trigger live until Ctrl-C; then cleans everything up.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use clap::Args;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Config, CustomResourceExt};
use serde_json::json;
use tokio::sync::watch;

use super::CliError;
use crate::api::TidalScheduler;
use crate::controller::{self, Settings};
use crate::election::WriteGate;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::server::Readiness;
use crate::telemetry::{self, LogFormat};

/// The namespace the demo works in.
const NAMESPACE: &str = "tidal-demo";

/// The field manager of the demo's objects.
const MANAGER: &str = "tidal-demo";

/// Arguments of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Directory for the control plane's state and logs (default: a fresh temporary one);
    /// removed on exit.
    #[arg(long)]
    pub dir: Option<PathBuf>,

    /// Directory of the control-plane scripts (`provision.sh`, `up.sh`, `down.sh`).
    #[arg(long, env = "TIDAL_CONTROL_PLANE_SCRIPTS", default_value = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/control-plane"))]
    pub scripts: PathBuf,
}

/// Runs the demo until Ctrl-C (or SIGTERM).
pub fn run(args: DemoArgs) -> Result<(), CliError> {
    // The controller's own logs would drown the demo's lines: warnings only by default.
    telemetry::init_logs(LogFormat::Text, "warn").map_err(|e| CliError::Argument(e.to_string()))?;
    let dir = match args.dir {
        Some(dir) => dir,
        None => std::env::temp_dir().join(format!("tidal-demo-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| failed("create the demo directory", e))?;
    println!("starting a local control plane in {} ...", dir.display());
    let result = start_and_show(&args.scripts, &dir);
    println!("cleaning up ...");
    let stopped = script(&args.scripts, "down.sh", &[path_arg(&dir)?], None);
    let removed = std::fs::remove_dir_all(&dir);
    result?;
    stopped?;
    removed.map_err(|e| failed("remove the demo directory", e))?;
    println!("cleaned up");
    Ok(())
}

fn start_and_show(scripts: &Path, dir: &Path) -> Result<(), CliError> {
    let bin = match std::env::var_os("TIDAL_CONTROL_PLANE_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => PathBuf::from(script(scripts, "provision.sh", &[], None)?),
    };
    let kubeconfig = script(scripts, "up.sh", &[path_arg(dir)?], Some(&bin))?;
    println!("control plane up; KUBECONFIG={kubeconfig}");
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let client = client(Path::new(&kubeconfig)).await?;
        install(&client).await?;
        let (stop, stopped) = watch::channel(false);
        let settings = Settings {
            namespaces: vec![NAMESPACE.to_owned()],
            concurrency: 4,
            instance: "demo".to_owned(),
            readiness: Readiness::default(),
            metrics: Metrics::default(),
        };
        let controller = tokio::spawn(controller::run(
            client.clone(),
            settings,
            WriteGate::always_open(),
            stopped,
        ));
        println!("controller running; triggers every 2 seconds (Ctrl-C to stop):");
        println!(
            "{:<24} {:<6} {:>8} {:>11} {:>11}  note",
            "scheduled", "rule", "replicas", "deployment", "lateness"
        );
        tokio::select! {
            shown = show_triggers(&client) => shown?,
            () = super::termination() => {}
        }
        let _ = stop.send(true);
        let _ = controller.await;
        let tides: Api<TidalScheduler> = Api::namespaced(client.clone(), NAMESPACE);
        // Best effort: the control plane is stopped and deleted right after.
        let _ = tides.delete("web-tide", &DeleteParams::default()).await;
        Ok(())
    })
}

/// Installs the CRD, the namespace, a Deployment and a TidalScheduler.
async fn install(client: &Client) -> Result<(), CliError> {
    let params = PatchParams::apply(MANAGER).force();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = TidalScheduler::crd();
    let name = crd.metadata.name.clone().unwrap_or_default();
    crds.patch(&name, &params, &Patch::Apply(&crd))
        .await
        .map_err(|e| failed("install the CRD", e))?;
    let established = await_condition(crds, &name, conditions::is_crd_established());
    tokio::time::timeout(Duration::from_secs(60), established)
        .await
        .map_err(|e| failed("wait for the CRD", e))?
        .map_err(|e| failed("wait for the CRD", e))?;
    let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": NAMESPACE } }))
        .map_err(|e| failed("build the namespace", e))?;
    Api::<Namespace>::all(client.clone())
        .patch(NAMESPACE, &params, &Patch::Apply(&namespace))
        .await
        .map_err(|e| failed("create the namespace", e))?;
    let deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": { "name": "web" },
        "spec": {
            "replicas": 1,
            "selector": { "matchLabels": { "app": "web" } },
            "template": {
                "metadata": { "labels": { "app": "web" } },
                "spec": { "containers": [{ "name": "web", "image": "registry.example/web:1" }] },
            },
        },
    });
    Api::<Deployment>::namespaced(client.clone(), NAMESPACE)
        .patch("web", &params, &Patch::Apply(&deployment))
        .await
        .map_err(|e| failed("create the Deployment", e))?;
    let tide = json!({
        "apiVersion": "scheduling.tidal.io/v1alpha1", "kind": "TidalScheduler",
        "metadata": { "name": "web-tide" },
        "spec": {
            "targetRef": { "apiVersion": "apps/v1", "kind": "Deployment", "name": "web" },
            "apply": "Scale",
            "triggers": { "times": { "rules": [
                { "name": "ebb", "cron": "CRON_TZ=UTC */6 * * * * *", "replicas": 2 },
                { "name": "flow", "cron": "CRON_TZ=UTC 2/6 * * * * *", "replicas": 5 },
                { "name": "flood", "cron": "CRON_TZ=UTC 4/6 * * * * *", "replicas": 9 },
                { "name": "surge", "cron": "CRON_TZ=UTC 0/30 * * * * *", "replicas": 12,
                  "description": "collides with ebb twice a minute: the max wins" },
            ]}},
        },
    });
    Api::<TidalScheduler>::namespaced(client.clone(), NAMESPACE)
        .patch("web-tide", &params, &Patch::Apply(&tide))
        .await
        .map_err(|e| failed("create the TidalScheduler", e))?;
    Ok(())
}

/// Prints one line per new history entry, with the Deployment's replicas at that time.
async fn show_triggers(client: &Client) -> Result<(), CliError> {
    let tides: Api<TidalScheduler> = Api::namespaced(client.clone(), NAMESPACE);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let mut shown = None;
    let mut updates = watcher(tides, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(update) = updates.next().await {
        let tide = update.map_err(|e| failed("watch the TidalScheduler", e))?;
        let Some(newest) = tide.status.as_ref().and_then(|s| s.history.first()) else {
            continue;
        };
        let key = (newest.rule.clone(), newest.schedule_time.0);
        if shown.as_ref() == Some(&key) {
            continue;
        }
        shown = Some(key);
        let replicas = deployments
            .get_scale("web")
            .await
            .ok()
            .and_then(|scale| scale.spec.and_then(|spec| spec.replicas));
        let lateness = newest
            .execution_time
            .0
            .duration_since(newest.schedule_time.0);
        let mut note = if newest.catch_up {
            "catch-up".to_owned()
        } else {
            String::new()
        };
        if !newest.message.is_empty() {
            note.push_str(&newest.message);
        }
        println!(
            "{:<24} {:<6} {:>8} {:>11} {:>8.1} ms  {note}",
            newest.schedule_time.0.to_string(),
            newest.rule,
            newest.replicas,
            replicas.map_or("?".to_owned(), |r| r.to_string()),
            lateness.as_secs_f64() * 1000.0,
        );
    }
    Ok(())
}

async fn client(kubeconfig: &Path) -> Result<Client, CliError> {
    let kubeconfig =
        Kubeconfig::read_from(kubeconfig).map_err(|e| failed("read the kubeconfig", e))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|e| failed("load the kubeconfig", e))?;
    Client::try_from(config).map_err(|e| failed("build a client", e))
}

/// Runs a control-plane script, its progress on our stderr; returns its last stdout line.
fn script(
    scripts: &Path,
    name: &str,
    args: &[&str],
    bin: Option<&Path>,
) -> Result<String, CliError> {
    let path = scripts.join(name);
    let mut command = Command::new("bash");
    command.arg(&path).args(args).stderr(Stdio::inherit());
    if let Some(bin) = bin {
        command.env("TIDAL_CONTROL_PLANE_BIN", bin);
    }
    let output = command
        .output()
        .map_err(|e| failed("run a control-plane script", e))?;
    if !output.status.success() {
        return Err(CliError::Demo {
            step: "run a control-plane script",
            message: format!("{} exited with {}", path.display(), output.status),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned())
}

fn path_arg(path: &Path) -> Result<&str, CliError> {
    path.to_str().ok_or(CliError::Demo {
        step: "use the demo directory",
        message: "its path is not UTF-8".to_owned(),
    })
}

fn failed(step: &'static str, error: impl std::fmt::Display) -> CliError {
    CliError::Demo {
        step,
        message: error.to_string(),
    }
}
