//! What the controller tells operators: logs (structured, to stderr, as text or JSON
//! lines, filtered by `RUST_LOG`), Prometheus [`metrics`], and the health endpoints of
//! the [`server`].

pub mod metrics;
pub mod server;

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
}

/// Installs the global log subscriber; `default` filters when `RUST_LOG` is unset.
pub fn init_logs(format: LogFormat, default: &str) -> Result<(), TelemetryError> {
    let filter = match std::env::var("RUST_LOG") {
        Ok(directives) if !directives.is_empty() => EnvFilter::try_new(directives)?,
        _ => EnvFilter::try_new(default)?,
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .try_init(),
    };
    installed.map_err(|error| TelemetryError::Install(error.to_string()))
}
