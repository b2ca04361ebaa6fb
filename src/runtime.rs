//! The process around the controller, built in one place for `run` and `demo` (in the
//! spirit of kubert's `Runtime`): the Kubernetes client (User-Agent naming the replica,
//! the clock probe), the metrics registry, the health and metrics server, the elector
//! and the clock-skew Events, then the controller until shutdown. It keeps the handle of
//! every task it spawns; if one ends while the controller runs, the run fails naming it
//! instead of going on without it.
//!
//! ```text
//!  Runtime::start ── trace export (if OTEL_* asks: a thread of its own)
//!                 ── client ─┬─ server (/healthz /readyz /metrics)   ┐ background tasks:
//!                            ├─ elector ── gate ──┐                  │ the end of any is
//!                            ├─ clock gauge       │                  │ fatal
//!                            └─ ClockSkew Events  │                  ┘
//!  Runtime::run(shutdown) ── controller::run(gate) ── drain ── release the Lease
//!                                                          ── flush pending spans
//! ```

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use http::header::USER_AGENT;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::client::ClientBuilder;
use kube::config::{KubeConfigOptions, Kubeconfig};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use crate::clock::{
    ClockBound, ClockMetrics, ClockOffset, ClockSkew, DEFAULT_MAX_CLOCK_OFFSET, OffsetProbe,
    SystemClock,
};
use crate::controller::TriggerTracer;
use crate::controller::read_back::future_tolerance;
use crate::controller::{
    self, ControllerMetrics, InitialList, Reason, Recorder, Reporter, Settings,
};
use crate::election::{
    self, ElectionMetrics, Elector, KubeLease, Observer, Release, Timing, WriteGate,
};
use crate::rate_limit::{RateLimit, RateLimited};
use crate::task::{self, Task, TaskEnded};
use crate::telemetry::TelemetryError;
use crate::telemetry::api::{ApiMetrics, ApiProbe};
use crate::telemetry::batch::SpanMetrics;
use crate::telemetry::metrics::{self, Metrics};
use crate::telemetry::server::{self, Readiness};
use crate::telemetry::traces::Traces;

/// Longest wait at exit for pending spans to reach the collector.
const SPAN_FLUSH: Duration = Duration::from_secs(5);

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// This replica's name: Lease holder, `reportingInstance`, User-Agent.
    pub identity: String,
    /// Namespaces to watch; empty means all.
    pub namespaces: Vec<String>,
    /// Reconciles at once, per watched namespace (0: unbounded).
    pub concurrency: u16,
    /// Where to serve `/healthz`, `/readyz` and `/metrics`; none without.
    pub metrics_address: Option<SocketAddr>,
    /// Leader election; without it this process always acts.
    pub election: Option<ElectionOptions>,
    /// A kubeconfig file; the in-cluster configuration or `KUBECONFIG` otherwise.
    pub kubeconfig: Option<PathBuf>,
    /// Export series per object (`desired_replicas`, `next_trigger_timestamp_seconds`).
    pub per_object_metrics: bool,
    /// Export traces to this OTLP/HTTP base URL, whatever `OTEL_*` says (the demo's
    /// Jaeger); `None`: as `OTEL_*` says.
    pub trace_endpoint: Option<String>,
    /// How the watch cache's initial list is fetched.
    pub initial_list: InitialList,
    /// Watch the targets written through `/scale` (metadata only), so that a write needs
    /// no read first.
    pub watch_targets: bool,
    /// Pace requests on the client side; `None`: as fast as the API server answers.
    pub rate_limit: Option<RateLimit>,
}

/// How to campaign for the Lease.
#[derive(Debug, Clone)]
pub struct ElectionOptions {
    /// Lease timing.
    pub timing: Timing,
    /// The Lease's name.
    pub lease_name: String,
    /// Its namespace; `POD_NAMESPACE`, else the client's default namespace, otherwise.
    pub lease_namespace: Option<String>,
    /// The largest clock offset from the API server for this replica to lead.
    pub max_clock_offset: Option<Duration>,
}

/// Why the process could not start or stopped early.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// No usable client configuration.
    #[error("failed to load a Kubernetes client configuration ({source_of}): {message}")]
    Config {
        /// Where it was looked for.
        source_of: String,
        /// What went wrong.
        message: String,
    },
    /// The identity cannot be sent as a header.
    #[error("--identity {0:?}: not usable in a User-Agent header")]
    Identity(String),
    /// The health and metrics address cannot be bound.
    #[error("failed to listen on --metrics-address {address}: {source}")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// The error.
        source: std::io::Error,
    },
    /// A background task ended while the controller ran.
    #[error(transparent)]
    TaskEnded(#[from] TaskEnded),
    /// Trace export is misconfigured.
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
}

/// A started process, ready to run the controller.
pub struct Runtime {
    client: Client,
    settings: Settings,
    gate: WriteGate,
    release: Option<Release>,
    tasks: Vec<Task>,
    traces: Option<Traces>,
}

impl Runtime {
    /// Builds the client, serves the endpoints and starts campaigning.
    pub async fn start(options: Options) -> Result<Runtime, RuntimeError> {
        let mut registry = metrics::registry();
        let election_metrics = ElectionMetrics::register(&mut registry);
        let controller_metrics =
            ControllerMetrics::register(&mut registry, options.per_object_metrics);
        let clock_metrics = ClockMetrics::register(&mut registry);
        let api_metrics = ApiMetrics::register(&mut registry);
        let traces = Traces::start(
            &options.identity,
            options.trace_endpoint.as_deref(),
            SpanMetrics::register(&mut registry),
        )?;
        if traces.is_some() {
            tracing::info!("exporting a trace per trigger over OTLP");
        }
        let tracer = TriggerTracer::new(traces.as_ref().map(Traces::tracer));
        let readiness = Readiness::default();
        let mut tasks = Vec::new();
        if let Some(address) = options.metrics_address {
            tasks.push(serve(address, &readiness, Metrics::new(registry)).await?);
        }
        let offset = ClockOffset::new(Arc::new(SystemClock));
        let client = client(&options, &offset, api_metrics).await?;
        tasks.push(task::spawn(
            "clock gauge",
            clock_metrics.follow(offset.clone()),
        ));
        let (gate, release) = match &options.election {
            Some(election) => {
                let bound = ClockBound::new(offset, election.max_clock_offset);
                let (gate, release, campaign, reporter) = campaign(
                    &client,
                    &options.identity,
                    election,
                    bound,
                    election_metrics,
                );
                tasks.extend([campaign, reporter]);
                (gate, Some(release))
            }
            None => {
                tracing::info!("leader election off: acting as the only replica");
                election_metrics.leading(true);
                (WriteGate::always_open(), None)
            }
        };
        let settings = Settings {
            namespaces: options.namespaces,
            concurrency: options.concurrency,
            initial_list: options.initial_list,
            watch_targets: options.watch_targets,
            instance: options.identity,
            readiness,
            metrics: controller_metrics,
            tracer,
            status_tolerance: future_tolerance(match &options.election {
                Some(election) => election.max_clock_offset,
                // One replica: only its own clock writes status, bound as by default.
                None => Some(DEFAULT_MAX_CLOCK_OFFSET),
            }),
        };
        Ok(Runtime {
            client,
            settings,
            gate,
            release,
            tasks,
            traces,
        })
    }

    /// The client, for whatever else the command does.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Runs the controller until `shutdown` resolves, lets running reconciles finish and
    /// releases the Lease. Fails, naming it, if a background task ends first.
    pub async fn run(
        mut self,
        shutdown: impl Future<Output = ()> + Send,
    ) -> Result<(), RuntimeError> {
        let (stop, stopped) = watch::channel(false);
        // Spawned, so that the reconciles (polled by the controller's stream) run on the
        // runtime's workers beside the connections they wait on — not on the thread
        // blocking on this future, which every response would have to wake.
        let mut controller = tokio::spawn(controller::run(
            self.client.clone(),
            self.settings,
            self.gate,
            stopped,
        ));
        tokio::pin!(shutdown);
        let mut stopping = false;
        let result = loop {
            tokio::select! {
                ran = &mut controller => {
                    // A panic is fatal, as for the background tasks.
                    let ran = ran.unwrap_or(Err(TaskEnded { name: "controller", panicked: true }));
                    break ran.map_err(RuntimeError::from);
                }
                () = &mut shutdown, if !stopping => {
                    tracing::info!("termination signal received: draining");
                    stopping = true;
                    let _ = stop.send(true);
                }
                ended = task::first_ended(&mut self.tasks) => break Err(ended.into()),
            }
        };
        if let Err(error) = &result {
            tracing::error!(%error, "stopping");
        }
        if !controller.is_finished() {
            // Stopped before the Lease is released: no write of this term after it.
            controller.abort();
            let _ = controller.await;
        }
        if let Some(release) = self.release {
            release.release().await;
        }
        if let Some(traces) = self.traces {
            // The flush waits on the export thread: not on the async runtime's workers.
            let _ = tokio::task::spawn_blocking(move || traces.shutdown(SPAN_FLUSH)).await;
        }
        result
    }

    /// Adds a background task (tests use it to see that the end of one is fatal).
    #[doc(hidden)]
    pub fn watch_task(&mut self, task: Task) {
        self.tasks.push(task);
    }
}

/// Binds `address` (so a taken port fails start-up) and serves the endpoints on it.
async fn serve(
    address: SocketAddr,
    readiness: &Readiness,
    metrics: Metrics,
) -> Result<Task, RuntimeError> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| RuntimeError::Listen { address, source })?;
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "serving /healthz, /readyz and /metrics");
    }
    Ok(task::spawn(
        "health and metrics server",
        server::serve(listener, readiness.clone(), metrics),
    ))
}

/// A client whose User-Agent names this replica (audit logs then tell which replica
/// wrote what), whose responses measure the clock `offset`, and whose requests are
/// counted on `metrics` and carry the current trace context.
async fn client(
    options: &Options,
    offset: &ClockOffset,
    metrics: ApiMetrics,
) -> Result<Client, RuntimeError> {
    let failed = |source_of: &str, error: &dyn std::fmt::Display| RuntimeError::Config {
        source_of: source_of.to_owned(),
        message: error.to_string(),
    };
    let mut config = match &options.kubeconfig {
        Some(path) => {
            let source_of = path.display().to_string();
            let file = Kubeconfig::read_from(path).map_err(|e| failed(&source_of, &e))?;
            kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| failed(&source_of, &e))?
        }
        None => kube::Config::infer()
            .await
            .map_err(|e| failed("in-cluster or KUBECONFIG", &e))?,
    };
    let identity = &options.identity;
    let agent = format!("tidal-scheduler/{} ({identity})", crate::VERSION);
    let agent =
        HeaderValue::from_str(&agent).map_err(|_| RuntimeError::Identity(identity.clone()))?;
    config.headers.push((USER_AGENT, agent));
    let builder = ClientBuilder::try_from(config).map_err(|e| failed("the configuration", &e))?;
    let builder = builder
        .with_layer(&OffsetProbe::new(offset.clone()))
        .with_layer(&ApiProbe::new(metrics));
    Ok(match options.rate_limit {
        // Outermost, so that a request's wait for its token is not timed as its latency.
        Some(limit) => builder.with_layer(&RateLimited::new(limit)).build(),
        None => builder.build(),
    })
}

/// Starts campaigning for the Lease as `identity` within the clock `bound`; returns the
/// gate, the release handle, and the elector's and the skew reporter's tasks.
fn campaign(
    client: &Client,
    identity: &str,
    options: &ElectionOptions,
    bound: ClockBound,
    metrics: ElectionMetrics,
) -> (WriteGate, Release, Task, Task) {
    let namespace = options
        .lease_namespace
        .clone()
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let timing = options.timing;
    let lock = KubeLease::new(client.clone(), &namespace, &options.lease_name);
    let elector = Elector::new(lock, identity, timing.lease_duration, Arc::new(SystemClock))
        .with_clock_bound(bound);
    tracing::info!(lease = %elector.describe(), identity, ?timing, max_clock_offset = ?options.max_clock_offset, "campaigning for leadership");
    let lease = ObjectReference {
        api_version: Some("coordination.k8s.io/v1".to_owned()),
        kind: Some("Lease".to_owned()),
        namespace: Some(namespace),
        name: Some(options.lease_name.clone()),
        ..ObjectReference::default()
    };
    let (skews, reporter) = report_clock_skews(client.clone(), identity, lease);
    let (gate, release, campaign) =
        election::spawn(elector, timing, CampaignObserver { metrics, skews });
    (gate, release, campaign, reporter)
}

/// What the campaign reports goes to the metrics, and clock skews also to an Event about
/// the Lease.
struct CampaignObserver {
    metrics: ElectionMetrics,
    skews: mpsc::UnboundedSender<ClockSkew>,
}

impl Observer for CampaignObserver {
    fn leading(&self, leading: bool) {
        self.metrics.leading(leading);
    }

    fn clock_skewed(&self, skew: Option<ClockSkew>) {
        self.metrics.clock_skewed(skew);
        if let Some(skew) = skew {
            let _ = self.skews.send(skew);
        }
    }
}

/// Publishes a `ClockSkew` Warning about `lease` for each skew reported on the returned
/// channel, from the returned task.
fn report_clock_skews(
    client: Client,
    identity: &str,
    lease: ObjectReference,
) -> (mpsc::UnboundedSender<ClockSkew>, Task) {
    let (skews, mut reported) = mpsc::unbounded_channel::<ClockSkew>();
    let reporter = Reporter {
        controller: "tidal-scheduler".to_owned(),
        instance: identity.to_owned(),
    };
    let identity = identity.to_owned();
    let task = task::spawn("clock skew events", async move {
        let mut recorder = Recorder::new(client, reporter);
        while let Some(skew) = reported.recv().await {
            let note = format!(
                "{identity}: {skew}; it does not lead until its clock is back within the bound"
            );
            if let Err(error) = recorder.publish(&lease, Reason::ClockSkew, note).await {
                tracing::warn!(%error, "failed to publish the ClockSkew event");
            }
        }
    });
    (skews, task)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Options for a process whose API server is unreachable (nothing listens on port 1);
    /// `test` names its kubeconfig file.
    fn unreachable_cluster(test: &str) -> Options {
        let dir = std::env::temp_dir().join(format!("tidal-runtime-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let kubeconfig = dir.join(format!("{test}.kubeconfig"));
        std::fs::write(
            &kubeconfig,
            "apiVersion: v1\nkind: Config\ncurrent-context: c\n\
             clusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n\
             users: [{name: u, user: {token: t}}]\n\
             contexts: [{name: c, context: {cluster: c, user: u, namespace: default}}]\n",
        )
        .unwrap();
        Options {
            identity: "test".to_owned(),
            namespaces: vec!["default".to_owned()],
            concurrency: 1,
            metrics_address: Some("127.0.0.1:0".parse().unwrap()),
            election: None,
            kubeconfig: Some(kubeconfig),
            per_object_metrics: true,
            trace_endpoint: None,
            initial_list: InitialList::Streaming,
            watch_targets: true,
            rate_limit: None,
        }
    }

    #[tokio::test]
    async fn the_end_of_a_background_task_ends_the_run_naming_it() {
        let mut runtime = Runtime::start(unreachable_cluster("task")).await.unwrap();
        runtime.watch_task(task::spawn("event forwarder", async {}));
        let ran =
            tokio::time::timeout(Duration::from_secs(30), runtime.run(std::future::pending()))
                .await
                .expect("the run ends");
        let error = ran.unwrap_err();
        assert!(
            matches!(&error, RuntimeError::TaskEnded(ended) if ended.name == "event forwarder"),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "the event forwarder task ended unexpectedly"
        );
    }

    #[tokio::test]
    async fn shutdown_ends_the_run_cleanly_even_without_an_api_server() {
        let runtime = Runtime::start(unreachable_cluster("shutdown"))
            .await
            .unwrap();
        let ran = tokio::time::timeout(Duration::from_secs(30), runtime.run(async {})).await;
        assert!(matches!(ran, Ok(Ok(()))), "{ran:?}");
    }

    #[tokio::test]
    async fn a_taken_metrics_address_fails_the_start() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let options = Options {
            metrics_address: Some(taken.local_addr().unwrap()),
            ..unreachable_cluster("taken")
        };
        let error = Runtime::start(options).await.err().expect("a start error");
        assert!(matches!(error, RuntimeError::Listen { .. }), "{error:?}");
    }
}
