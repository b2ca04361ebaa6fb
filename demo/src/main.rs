//! `tidal-demo` (`cargo run -p tidal-demo`): the whole product on this machine in one
//! command, from a source checkout (it runs the harness's scripts). Starts a
//! local control plane (the test harness's scripts) — with Jaeger, when provisioned,
//! which the controller, kube-apiserver and etcd trace to — installs the CRD, runs the
//! controller, creates a Deployment and a TidalScheduler whose rules fire every few
//! seconds, and prints each trigger live (with its trace id) until Ctrl-C; then cleans
//! everything up.

use std::path::{Path, PathBuf};
use std::time::Duration;

use std::process::ExitCode;

use clap::Parser;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, CustomResourceExt};
use serde_json::json;

use tidal_control_plane::{self as scripts, Jaeger};
use tidal_scheduler::api::{ClusterTidalCalendar, TidalCalendar, TidalScheduler};
use tidal_scheduler::cli::process;
use tidal_scheduler::controller::InitialList;
use tidal_scheduler::runtime::{Options, Runtime};
use tidal_scheduler::telemetry::{self, LogFormat};

/// The namespace the demo works in.
const NAMESPACE: &str = "tidal-demo";

/// The field manager of the demo's objects.
const MANAGER: &str = "tidal-demo";

/// Starts a local control plane (and Jaeger, when provisioned), runs the controller on
/// a Deployment whose tide changes every few seconds, and shows each trigger live until
/// Ctrl-C; then stops and removes everything it started.
#[derive(Debug, Parser)]
#[command(name = "tidal-demo", version, about, long_about = None)]
struct DemoArgs {
    /// Directory for the control plane's state and logs (default: a fresh temporary one);
    /// removed on exit.
    #[arg(long)]
    dir: Option<PathBuf>,

    /// Directory of the control-plane scripts (`provision.sh`, `up.sh`, `down.sh`).
    #[arg(long, env = "TIDAL_CONTROL_PLANE_SCRIPTS", default_value = scripts::SCRIPTS)]
    scripts: PathBuf,
}

/// Why the demo stopped early.
#[derive(Debug, thiserror::Error)]
enum DemoError {
    /// A step failed.
    #[error("demo: failed to {step}: {message}")]
    Step {
        /// What was being done.
        step: &'static str,
        /// Why it failed.
        message: String,
    },
}

fn main() -> ExitCode {
    match run(DemoArgs::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the demo until Ctrl-C, SIGTERM or a closed stdout (`demo | head`); whatever
/// happened — a failed start, a panic — the control plane is stopped and the directory
/// removed before it returns.
fn run(args: DemoArgs) -> Result<(), DemoError> {
    // The controller's own logs would drown the demo's lines: warnings only by default.
    telemetry::init_logs(LogFormat::Text, "warn").map_err(|e| failed("set up logging", e))?;
    // The runtime comes first so that SIGTERM and SIGINT are caught from the start.
    let runtime = process::runtime().map_err(|e| failed("start", e))?;
    let dir = match args.dir {
        Some(dir) => dir,
        None => std::env::temp_dir().join(format!("tidal-demo-{}", std::process::id())),
    };
    std::fs::create_dir_all(&dir).map_err(|e| failed("create the demo directory", e))?;
    let cleanup = Cleanup::new(&args.scripts, &dir);
    let mut out = Output::default();
    let shown = runtime.block_on(async {
        tokio::select! {
            shown = start_and_show(&args.scripts, &dir, &mut out) => shown,
            () = process::termination() => Ok(()),
        }
    });
    // Stop the controller and anything else still running before the control plane.
    drop(runtime);
    let cleaned = cleanup.run();
    shown?;
    cleaned
}

/// Stops the demo's control plane and removes its directory when run, or when dropped
/// without having run (a panic unwinding).
struct Cleanup {
    scripts: PathBuf,
    dir: PathBuf,
    done: bool,
}

impl Cleanup {
    fn new(scripts: &Path, dir: &Path) -> Cleanup {
        Cleanup {
            scripts: scripts.to_owned(),
            dir: dir.to_owned(),
            done: false,
        }
    }

    /// Stops and removes everything; progress on stderr (stdout may be closed).
    fn run(mut self) -> Result<(), DemoError> {
        self.done = true;
        self.stop()
    }

    fn stop(&self) -> Result<(), DemoError> {
        eprintln!("cleaning up ...");
        let stopped = path_arg(&self.dir)
            .and_then(|dir| script(&self.scripts, "down.sh", &[dir], None).map(drop));
        let removed = match std::fs::remove_dir_all(&self.dir) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                Err(failed("remove the demo directory", error))
            }
            _ => Ok(()),
        };
        stopped?;
        removed?;
        eprintln!("cleaned up");
        Ok(())
    }
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        if !self.done
            && let Err(error) = self.stop()
        {
            eprintln!("error: {error}");
        }
    }
}

/// The demo's stdout: once the reader has gone (`demo | head`), nothing more is written
/// and the demo ends quietly.
#[derive(Default)]
struct Output {
    closed: bool,
}

impl Output {
    /// Writes one line; `Err(Closed)` once stdout is closed.
    fn line(&mut self, text: std::fmt::Arguments<'_>) -> Result<(), Closed> {
        use std::io::Write;
        if self.closed {
            return Err(Closed);
        }
        let mut stdout = std::io::stdout().lock();
        match writeln!(stdout, "{text}").and_then(|()| stdout.flush()) {
            Ok(()) => Ok(()),
            Err(_) => {
                // A broken pipe, or any other reason the output is gone: stop writing.
                self.closed = true;
                Err(Closed)
            }
        }
    }
}

/// Stdout is closed.
struct Closed;

async fn start_and_show(scripts: &Path, dir: &Path, out: &mut Output) -> Result<(), DemoError> {
    if out
        .line(format_args!(
            "starting a local control plane in {} ...",
            dir.display()
        ))
        .is_err()
    {
        return Ok(());
    }
    let bin = match std::env::var_os("TIDAL_CONTROL_PLANE_BIN") {
        Some(bin) => PathBuf::from(bin),
        None => PathBuf::from(script_async(scripts, "provision.sh", &[], None).await?),
    };
    let with_jaeger = bin.join("jaeger").is_file();
    let vars: &[(&str, &str)] = if with_jaeger {
        &[("TIDAL_JAEGER", "1")]
    } else {
        &[]
    };
    let kubeconfig = scripts::run_async(scripts, "up.sh", &[path_arg(dir)?], Some(&bin), vars)
        .await
        .map_err(|e| failed("run a control-plane script", e))?;
    if out
        .line(format_args!("control plane up; KUBECONFIG={kubeconfig}"))
        .is_err()
    {
        return Ok(());
    }
    let jaeger = if with_jaeger {
        Some(Jaeger::of(dir).map_err(|e| failed("read the Jaeger addresses", e))?)
    } else {
        None
    };
    if let Some(jaeger) = &jaeger
        && out
            .line(format_args!(
                "Jaeger at http://{0}; a trigger's trace: http://{0}/api/traces/<trace id> \
                 (this build serves Jaeger's API, not its UI's assets)",
                jaeger.query
            ))
            .is_err()
    {
        return Ok(());
    }
    let runtime = Runtime::start(Options {
        identity: "demo".to_owned(),
        namespaces: vec![NAMESPACE.to_owned()],
        concurrency: 4,
        metrics_address: None,
        election: None,
        kubeconfig: Some(PathBuf::from(&kubeconfig)),
        per_object_metrics: true,
        trace_endpoint: jaeger.as_ref().map(|jaeger| jaeger.otlp_http.clone()),
        initial_list: InitialList::Streaming,
        watch_targets: true,
        rate_limit: None,
    })
    .await
    .map_err(|e| failed("start the controller", e))?;
    let client = runtime.client().clone();
    install(&client).await?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let controller = tokio::spawn(runtime.run(async {
        let _ = stopped.await;
    }));
    let header = out
        .line(format_args!(
            "controller running; triggers every 2 seconds (Ctrl-C to stop):"
        ))
        .and_then(|()| {
            out.line(format_args!(
                "{:<24} {:<6} {:>8} {:>11} {:>11}  {:<32}  note",
                "scheduled", "rule", "replicas", "deployment", "lateness", "trace"
            ))
        });
    let shown = match header {
        Ok(()) => show_triggers(&client, out).await,
        Err(Closed) => Ok(()),
    };
    let _ = stop.send(());
    let ran = controller.await;
    let tides: Api<TidalScheduler> = Api::namespaced(client.clone(), NAMESPACE);
    // Best effort: the control plane is stopped and deleted right after.
    let _ = tides.delete("web-tide", &DeleteParams::default()).await;
    shown?;
    match ran {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(failed("run the controller", error)),
        Err(error) => Err(failed("run the controller", error)),
    }
}

/// Installs the CRDs, the namespace, a Deployment and a TidalScheduler.
async fn install(client: &Client) -> Result<(), DemoError> {
    let params = PatchParams::apply(MANAGER).force();
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        TidalScheduler::crd(),
        TidalCalendar::crd(),
        ClusterTidalCalendar::crd(),
    ] {
        let name = crd.metadata.name.clone().unwrap_or_default();
        crds.patch(&name, &params, &Patch::Apply(&crd))
            .await
            .map_err(|e| failed("install the CRDs", e))?;
        let established = await_condition(crds.clone(), &name, conditions::is_crd_established());
        tokio::time::timeout(Duration::from_secs(60), established)
            .await
            .map_err(|e| failed("wait for the CRDs", e))?
            .map_err(|e| failed("wait for the CRDs", e))?;
    }
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

/// Prints one line per new history entry, with the Deployment's replicas at that time,
/// until stdout is closed.
async fn show_triggers(client: &Client, out: &mut Output) -> Result<(), DemoError> {
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
        let written = out.line(format_args!(
            "{:<24} {:<6} {:>8} {:>11} {:>8.1} ms  {:<32}  {note}",
            newest.schedule_time.0.to_string(),
            newest.rule,
            newest.replicas,
            replicas.map_or("?".to_owned(), |r| r.to_string()),
            lateness.as_secs_f64() * 1000.0,
            newest.trace_id.as_deref().unwrap_or("-"),
        ));
        if written.is_err() {
            return Ok(());
        }
    }
    Ok(())
}

/// Runs a control-plane script, cancellable (see [`scripts::run_async`]).
async fn script_async(
    dir: &Path,
    name: &str,
    args: &[&str],
    bin: Option<&Path>,
) -> Result<String, DemoError> {
    scripts::run_async(dir, name, args, bin, &[])
        .await
        .map_err(|e| failed("run a control-plane script", e))
}

/// Runs a control-plane script.
fn script(dir: &Path, name: &str, args: &[&str], bin: Option<&Path>) -> Result<String, DemoError> {
    scripts::run(dir, name, args, bin, &[]).map_err(|e| failed("run a control-plane script", e))
}

fn path_arg(path: &Path) -> Result<&str, DemoError> {
    path.to_str().ok_or(DemoError::Step {
        step: "use the demo directory",
        message: "its path is not UTF-8".to_owned(),
    })
}

fn failed(step: &'static str, error: impl std::fmt::Display) -> DemoError {
    DemoError::Step {
        step,
        message: error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_still_stops_the_control_plane_and_removes_the_directory() {
        let root = std::env::temp_dir().join(format!("tidal-demo-cleanup-{}", std::process::id()));
        let (scripts, dir, mark) = (root.join("scripts"), root.join("state"), root.join("down"));
        std::fs::create_dir_all(&scripts).unwrap();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            scripts.join("down.sh"),
            format!("touch {}\n", mark.display()),
        )
        .unwrap();
        let unwound = std::panic::catch_unwind(|| {
            let _cleanup = Cleanup::new(&scripts, &dir);
            panic!("a bug in the demo");
        });
        assert!(unwound.is_err());
        assert!(mark.exists(), "down.sh ran");
        assert!(!dir.exists(), "the directory is gone");
        std::fs::remove_dir_all(&root).unwrap();
    }
}
