//! `tidal-scheduler run`: the controller.

use clap::Args;
use kube::Client;
use tokio::sync::watch;

use super::CliError;
use crate::controller::{self, Settings};
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
}

/// Runs the controller until SIGINT or SIGTERM.
pub fn run(args: RunArgs) -> Result<(), CliError> {
    telemetry::init_logs(args.log_format, "info").map_err(|e| CliError::Argument(e.to_string()))?;
    let runtime = super::runtime()?;
    runtime.block_on(async {
        let client = Client::try_default().await.map_err(|error| {
            CliError::Argument(format!(
                "no Kubernetes client configuration (in-cluster or KUBECONFIG): {error}"
            ))
        })?;
        let settings = Settings {
            namespaces: args.namespaces,
            concurrency: args.concurrency,
            instance: instance_name(),
        };
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(async move {
            super::termination().await;
            tracing::info!("termination signal received: draining");
            let _ = stop.send(true);
        });
        controller::run(client, settings, stopped).await;
        Ok(())
    })
}

/// This replica's name in Events: `POD_NAME`, else the host name.
pub fn instance_name() -> String {
    std::env::var("POD_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "tidal-scheduler".to_owned())
}
