//! Subcommands of the `tidal-scheduler` binary.

mod chart;
mod demo;
mod error;
mod next;
mod plan;
mod process;
mod run;
pub mod scripts;

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use jiff::Timestamp;

pub use error::{CliError, EXIT_FAILURE, EXIT_INVALID_INPUT};

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
        Command::Crd => process::print_stdout(&crate::api::crd_yaml()),
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
