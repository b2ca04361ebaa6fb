//! Subcommands of the `tidal-scheduler` binary.

mod chart;
mod demo;
mod next;
mod plan;
mod run;
pub mod scripts;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use jiff::Timestamp;

/// Exit status for input the command cannot use (bad expression, invalid manifest,
/// invalid flags, ...); clap's own usage errors exit with it too.
pub const EXIT_INVALID_INPUT: u8 = 2;

/// Exit status for a failure at run time (no usable kubeconfig, an address that cannot be
/// bound, a demo step that failed, output that cannot be written, ...).
pub const EXIT_FAILURE: u8 = 1;

/// tidal-scheduler: scales Kubernetes workloads on a calendar.
#[derive(Debug, Parser)]
#[command(name = "tidal-scheduler", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Print the TidalScheduler CustomResourceDefinition (YAML).
    Crd,
    /// Print the next fire instants of a cron expression, in UTC.
    Next(next::NextArgs),
    /// Validate TidalScheduler manifests and show their tide over a window.
    Plan(plan::PlanArgs),
    /// Run the controller (uses KUBECONFIG or the in-cluster configuration).
    Run(run::RunArgs),
    /// Start a local control plane, run the controller on a sample, show triggers live.
    Demo(demo::DemoArgs),
}

/// Runs a parsed command line; errors are printed to stderr.
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Crd => print_stdout(&crate::api::crd_yaml()),
        Command::Next(args) => next::run(&args, Timestamp::now()),
        Command::Plan(args) => plan::run(&args, Timestamp::now()),
        Command::Run(args) => run::run(args),
        Command::Demo(args) => demo::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}

/// Why a subcommand failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A command-line value is not usable.
    #[error("{0}")]
    Argument(String),
    /// A cron expression is invalid.
    #[error("invalid cron expression: {0}")]
    Cron(#[from] crate::schedule::CronError),
    /// A file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A manifest is not valid YAML or not a TidalScheduler.
    #[error("{path}: {message}")]
    Manifest {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// One or more objects failed validation; the details were already printed.
    #[error("{0} invalid object(s)")]
    InvalidObjects(usize),
    /// A step of the demo failed.
    #[error("demo: failed to {step}: {message}")]
    Demo {
        /// What was being done.
        step: &'static str,
        /// Why it failed.
        message: String,
    },
    /// Writing the output failed.
    #[error("failed to write output: {0}")]
    Write(#[from] std::io::Error),
    /// Something the command needs at run time failed; the message names the action.
    #[error("{0}")]
    Runtime(String),
}

impl CliError {
    /// The process exit status: [`EXIT_INVALID_INPUT`] for input or arguments the command
    /// cannot use, [`EXIT_FAILURE`] for a failure at run time.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Argument(_)
            | CliError::Cron(_)
            | CliError::Read { .. }
            | CliError::Manifest { .. }
            | CliError::InvalidObjects(_) => EXIT_INVALID_INPUT,
            CliError::Demo { .. } | CliError::Write(_) | CliError::Runtime(_) => EXIT_FAILURE,
        }
    }
}

impl From<crate::runtime::RuntimeError> for CliError {
    fn from(error: crate::runtime::RuntimeError) -> CliError {
        match error {
            crate::runtime::RuntimeError::Identity(_) => CliError::Argument(error.to_string()),
            other => CliError::Runtime(other.to_string()),
        }
    }
}

/// Parses an RFC 3339 instant given on the command line.
fn parse_instant(flag: &str, text: &str) -> Result<Timestamp, CliError> {
    text.parse().map_err(|error| {
        CliError::Argument(format!(
            "{flag}: `{text}` is not an RFC 3339 instant such as 2026-03-08T07:30:00Z ({error})"
        ))
    })
}

/// A multi-threaded Tokio runtime for the commands that talk to Kubernetes.
fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| CliError::Runtime(format!("failed to start the Tokio runtime: {error}")))
}

/// Resolves on SIGINT or SIGTERM.
async fn termination() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Writes `text` to stdout. A closed stdout (`tidal-scheduler next ... | head -1`) is the
/// end of the output, as for other command-line tools: no error.
fn print_stdout(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => Ok(written?),
    }
}
