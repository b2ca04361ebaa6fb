//! `tidal-scheduler run`: the controller, with leader election unless turned off.

use std::net::SocketAddr;
use std::time::Duration;

use clap::{ArgAction, Args};

use super::error::CliError;
use super::process;
use crate::controller::InitialList;
use crate::election::Timing;
use crate::rate_limit::RateLimit;
use crate::runtime::{ElectionOptions, Options, Runtime};
use crate::schedule::parse_go_duration;
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

    /// How a fresh leader's cache lists the objects: `streaming` (a watch that sends them
    /// first, `sendInitialEvents`; pages when the API server does not stream) or `paged`.
    #[arg(long, env = "TIDAL_INITIAL_LIST", value_enum, default_value_t = InitialList::Streaming)]
    pub initial_list: InitialList,

    /// Watch the targets written through `/scale` (metadata only) so that each write
    /// carries the version seen instead of reading the target first, and the HPAs so that
    /// checking for one that also scales a target needs no LIST and an HPA's floor is
    /// written without reading it; `false` trades one read per trigger for no watch of
    /// the targets' kinds or of the HPAs.
    #[arg(long, env = "TIDAL_WATCH_TARGETS", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub watch_targets: bool,

    /// Pace requests to the API server to this many per second (client-go's QPS); 0: no
    /// client-side limit (API Priority and Fairness still applies on the server).
    #[arg(long, env = "TIDAL_API_QPS", default_value_t = 0.0, value_parser = parse_qps)]
    pub api_qps: f64,

    /// Requests allowed at once above `--api-qps` (client-go's Burst).
    #[arg(long, env = "TIDAL_API_BURST", default_value_t = 100, requires = "api_qps",
          value_parser = clap::value_parser!(u32).range(1..))]
    pub api_burst: u32,

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

    /// Export series per object (`desired_replicas`, `next_trigger_timestamp_seconds`
    /// by namespace and name); `false` for very large fleets.
    #[arg(long, env = "TIDAL_PER_OBJECT_METRICS", default_value_t = true, action = ArgAction::Set,
          num_args = 0..=1, default_missing_value = "true")]
    pub per_object_metrics: bool,
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
    let options = Options {
        identity: args.identity.clone().unwrap_or_else(instance_name),
        namespaces: args.namespaces,
        concurrency: args.concurrency,
        metrics_address: Some(args.metrics_address),
        election: args.leader_elect.then(|| ElectionOptions {
            timing,
            lease_name: args.lease_name,
            lease_namespace: args.lease_namespace,
            max_clock_offset: Some(args.max_clock_offset).filter(|max| !max.is_zero()),
        }),
        kubeconfig: None,
        per_object_metrics: args.per_object_metrics,
        trace_endpoint: None,
        initial_list: args.initial_list,
        watch_targets: args.watch_targets,
        rate_limit: (args.api_qps > 0.0).then_some(RateLimit {
            qps: args.api_qps,
            burst: args.api_burst,
        }),
    };
    process::runtime()?.block_on(async {
        let runtime = Runtime::start(options).await.map_err(CliError::from)?;
        runtime
            .run(process::termination())
            .await
            .map_err(CliError::from)
    })
}

/// A `--api-qps` flag: a finite number, not negative.
fn parse_qps(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(qps) if qps.is_finite() && qps >= 0.0 => Ok(qps),
        _ => Err(format!(
            "`{text}`: must be a number of requests per second, 0 or more"
        )),
    }
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
