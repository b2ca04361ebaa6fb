//! `tidal-scheduler run`: the controller, with leader election unless turned off.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::{ArgAction, Args};
use http::HeaderValue;
use http::header::USER_AGENT;
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Client;
use kube::client::ClientBuilder;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::CliError;
use crate::clock::{ClockBound, ClockMetrics, ClockOffset, ClockSkew, OffsetProbe, SystemClock};
use crate::controller::{self, ControllerMetrics, Reason, Recorder, Reporter, Settings};
use crate::election::{self, ElectionMetrics, Elector, KubeLease, Timing, WriteGate};
use crate::schedule::parse_go_duration;
use crate::telemetry::metrics::Metrics;
use crate::telemetry::server::{self, Readiness};
use crate::telemetry::{self, LogFormat};

/// Flags of `run`; each can also come from the environment.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Watch only this namespace (repeat for several); all namespaces by default.
    #[arg(long = "namespace", env = "TIDAL_NAMESPACES", value_delimiter = ',')]
    pub namespaces: Vec<String>,

    /// Reconciles running at once (per watched namespace); 0 means unbounded.
    #[arg(long, env = "TIDAL_CONCURRENCY", default_value_t = 64)]
    pub concurrency: u16,

    /// Log format.
    #[arg(long, env = "TIDAL_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,

    /// Campaign for the Lease and act only while holding it; `false` for a single replica.
    #[arg(long, env = "TIDAL_LEADER_ELECT", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub leader_elect: bool,

    /// Name of the Lease.
    #[arg(long, env = "TIDAL_LEASE_NAME", default_value = "tidal-scheduler")]
    pub lease_name: String,

    /// Namespace of the Lease [default: POD_NAMESPACE, else the in-cluster or kubeconfig
    /// namespace].
    #[arg(long, env = "TIDAL_LEASE_NAMESPACE")]
    pub lease_namespace: Option<String>,

    /// This replica's identity in the Lease and in Events [default: POD_NAME, else the
    /// host name]; must differ between replicas.
    #[arg(long, env = "TIDAL_IDENTITY")]
    pub identity: Option<String>,

    /// How long standbys trust a leader that stopped renewing (whole seconds, e.g. `15s`).
    #[arg(long, env = "TIDAL_LEASE_DURATION", default_value = "15s", value_parser = parse_duration)]
    pub lease_duration: Duration,

    /// How long the leader keeps acting without a successful renew.
    #[arg(long, env = "TIDAL_RENEW_DEADLINE", default_value = "10s", value_parser = parse_duration)]
    pub renew_deadline: Duration,

    /// The pause between Lease attempts, for the leader and the standbys.
    #[arg(long, env = "TIDAL_RETRY_PERIOD", default_value = "2s", value_parser = parse_duration)]
    pub retry_period: Duration,

    /// The largest difference between this replica's clock and the API server's (measured
    /// from the `Date` of its responses) for it to lead; beyond it, it does not campaign,
    /// and steps down if it leads. `0s`: no bound.
    #[arg(long, env = "TIDAL_MAX_CLOCK_OFFSET", default_value = "2s", value_parser = parse_duration)]
    pub max_clock_offset: Duration,

    /// Where `/healthz`, `/readyz` and `/metrics` are served (port 0: any free port, logged).
    #[arg(long, env = "TIDAL_METRICS_ADDRESS", default_value = "0.0.0.0:8080")]
    pub metrics_address: SocketAddr,
}

/// Runs the controller until SIGINT or SIGTERM: drains, then releases the Lease.
pub fn run(args: RunArgs) -> Result<(), CliError> {
    telemetry::init_logs(args.log_format, "info")
        .map_err(|e| CliError::Runtime(format!("failed to set up logging: {e}")))?;
    let timing = Timing {
        lease_duration: args.lease_duration,
        renew_deadline: args.renew_deadline,
        retry_period: args.retry_period,
    };
    if args.leader_elect {
        timing
            .validate()
            .map_err(|error| CliError::Argument(format!("leader election: {error}")))?;
    }
    let identity = args.identity.clone().unwrap_or_else(instance_name);
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let mut registry = telemetry::metrics::registry();
        let election_metrics = ElectionMetrics::register(&mut registry);
        let controller_metrics = ControllerMetrics::register(&mut registry);
        let clock_metrics = ClockMetrics::register(&mut registry);
        let readiness = Readiness::default();
        serve_health(args.metrics_address, &readiness, Metrics::new(registry)).await?;
        let offset = ClockOffset::new(Arc::new(SystemClock));
        let client = client(&identity, &offset).await?;
        clock_metrics.follow(offset.clone());
        let (gate, release) = if args.leader_elect {
            let bound =
                ClockBound::new(offset, Some(args.max_clock_offset).filter(|m| !m.is_zero()));
            let (gate, release) =
                campaign(&args, &client, &identity, timing, bound, election_metrics);
            (gate, Some(release))
        } else {
            tracing::info!("leader election off: acting as the only replica");
            election::Observer::leading(&election_metrics, true);
            (WriteGate::always_open(), None)
        };
        let settings = Settings {
            namespaces: args.namespaces,
            concurrency: args.concurrency,
            instance: identity,
            readiness,
            metrics: controller_metrics,
        };
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(async move {
            super::termination().await;
            tracing::info!("termination signal received: draining");
            let _ = stop.send(true);
        });
        controller::run(client, settings, gate, stopped).await;
        if let Some(release) = release {
            release.release().await;
        }
        Ok(())
    })
}

/// Serves `/healthz`, `/readyz` and `/metrics` on `address` in the background.
async fn serve_health(
    address: SocketAddr,
    readiness: &Readiness,
    metrics: Metrics,
) -> Result<(), CliError> {
    let listener = TcpListener::bind(address).await.map_err(|error| {
        CliError::Runtime(format!(
            "failed to listen on --metrics-address {address}: {error}"
        ))
    })?;
    if let Ok(address) = listener.local_addr() {
        tracing::info!(%address, "serving /healthz, /readyz and /metrics");
    }
    tokio::spawn(server::serve(listener, readiness.clone(), metrics));
    Ok(())
}

/// What the campaign reports goes to the metrics, and clock skews also to an Event about
/// the Lease.
struct CampaignObserver {
    metrics: ElectionMetrics,
    skews: mpsc::UnboundedSender<ClockSkew>,
}

impl election::Observer for CampaignObserver {
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
/// channel.
fn report_clock_skews(
    client: Client,
    identity: &str,
    lease: ObjectReference,
) -> mpsc::UnboundedSender<ClockSkew> {
    let (skews, mut reported) = mpsc::unbounded_channel::<ClockSkew>();
    let reporter = Reporter {
        controller: "tidal-scheduler".to_owned(),
        instance: identity.to_owned(),
    };
    let identity = identity.to_owned();
    tokio::spawn(async move {
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
    skews
}

/// Starts campaigning for the Lease of `args` as `identity`, within the clock `bound`.
fn campaign(
    args: &RunArgs,
    client: &Client,
    identity: &str,
    timing: Timing,
    bound: ClockBound,
    metrics: ElectionMetrics,
) -> (WriteGate, election::Release) {
    let namespace = args
        .lease_namespace
        .clone()
        .or_else(|| {
            std::env::var("POD_NAMESPACE")
                .ok()
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let lock = KubeLease::new(client.clone(), &namespace, &args.lease_name);
    let elector = Elector::new(lock, identity, timing.lease_duration, Arc::new(SystemClock))
        .with_clock_bound(bound);
    tracing::info!(lease = %elector.describe(), identity, ?timing, max_clock_offset = ?args.max_clock_offset, "campaigning for leadership");
    let lease = ObjectReference {
        api_version: Some("coordination.k8s.io/v1".to_owned()),
        kind: Some("Lease".to_owned()),
        namespace: Some(namespace),
        name: Some(args.lease_name.clone()),
        ..ObjectReference::default()
    };
    let skews = report_clock_skews(client.clone(), identity, lease);
    election::spawn(elector, timing, CampaignObserver { metrics, skews })
}

/// A client from the in-cluster configuration or KUBECONFIG, whose User-Agent names this
/// replica (audit logs then tell which replica wrote what) and whose responses measure
/// the clock `offset`.
async fn client(identity: &str, offset: &ClockOffset) -> Result<Client, CliError> {
    let no_config = |error: &dyn std::fmt::Display| {
        CliError::Runtime(format!(
            "failed to load a Kubernetes client configuration (in-cluster or KUBECONFIG): {error}"
        ))
    };
    let mut config = kube::Config::infer().await.map_err(|e| no_config(&e))?;
    let agent = format!("tidal-scheduler/{} ({identity})", env!("CARGO_PKG_VERSION"));
    let agent = HeaderValue::from_str(&agent)
        .map_err(|_| CliError::Argument(format!("--identity {identity:?}: not a header value")))?;
    config.headers.push((USER_AGENT, agent));
    let builder = ClientBuilder::try_from(config).map_err(|e| no_config(&e))?;
    Ok(builder
        .with_layer(&OffsetProbe::new(offset.clone()))
        .build())
}

/// A Go-style duration flag (`4s`, `1m30s`, `500ms`).
fn parse_duration(text: &str) -> Result<Duration, String> {
    let nanos = parse_go_duration(text).map_err(|e| format!("`{text}`: {e}"))?;
    u64::try_from(nanos)
        .map(Duration::from_nanos)
        .map_err(|_| format!("`{text}`: must not be negative"))
}

/// This replica's default name in the Lease and in Events: `POD_NAME`, else the host
/// name.
pub fn instance_name() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "tidal-scheduler".to_owned())
}
