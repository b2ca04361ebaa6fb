//! What the controller tells operators: logs (structured, to stderr, as text or JSON
//! lines, filtered by `RUST_LOG`), OpenTelemetry [`traces`] (exported in [`batch`]es),
//! Prometheus [`metrics`] (with the client's in [`api`]), and the health endpoints of
//! the [`server`].

pub mod api;
pub mod batch;
pub mod carrier;
pub mod metrics;
pub mod server;
pub mod tls;
pub mod traces;

use clap::ValueEnum;
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line, fields at the top level.
    Json,
}

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// `RUST_LOG` is not a valid filter.
    #[error("RUST_LOG is not a valid log filter: {0}")]
    Filter(#[from] tracing_subscriber::filter::ParseError),
    /// A global subscriber was already installed.
    #[error("failed to install the log subscriber: {0}")]
    Install(String),
    /// The OTLP protocol asked for is not one this build speaks.
    #[error(
        "{variable}={value:?} is not supported: use http/protobuf (the default, port 4318) or http/json"
    )]
    Protocol {
        /// The variable that asked for it.
        variable: String,
        /// What it asked for.
        value: String,
    },
    /// Trace export could not start (e.g. an endpoint that is not a URL).
    #[error("cannot export traces: {0}")]
    Export(String),
    /// The TLS of trace export cannot be set up.
    #[error("cannot export traces over TLS")]
    Tls(#[from] tls::TlsError),
}

/// Installs the global subscriber: log lines to stderr, filtered by `RUST_LOG` (`default`
/// when unset), and the [`carrier::Carrier`] of trace contexts into API requests,
/// whatever the log filter (inert without export: no carrier span is ever made).
pub fn init_logs(format: LogFormat, default: &str) -> Result<(), TelemetryError> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::filter::{FilterExt as _, filter_fn};
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.is_empty() => EnvFilter::try_new(directives)?,
        _ => EnvFilter::try_new(default)?,
    };
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let lines = match format {
        LogFormat::Text => lines.with_filter(filter).boxed(),
        // A JSON line shows no span, so the layer asks for none: spans no layer wants are
        // never made (kube-runtime's around each reconcile, entered on every poll, cost
        // a few percent of the controller's CPU per trigger).
        LogFormat::Json => lines
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_span_list(false)
            .with_filter(filter.and(filter_fn(|metadata| metadata.is_event())))
            .boxed(),
    };
    // A static filter: its interest is computed once per callsite, not per event.
    let carrier = carrier::Carrier.with_filter(
        tracing_subscriber::filter::Targets::new().with_target(traces::SPANS, tracing::Level::INFO),
    );
    tracing_subscriber::registry()
        .with(lines)
        .with(carrier)
        .try_init()
        .map_err(|error| TelemetryError::Install(error.to_string()))
}
