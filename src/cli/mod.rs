//! Subcommands of the `tidal-scheduler` binary.

mod calendar;
mod chart;
mod error;
mod live;
mod manifests;
mod next;
mod plan;
pub mod process;
mod run;
mod svg;
mod timeline;

use std::process::ExitCode;

use std::ffi::OsString;
use std::path::Path;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
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
    /// Print the CustomResourceDefinitions (TidalScheduler, TidalCalendar,
    /// ClusterTidalCalendar) as YAML.
    Crd,
    /// Print the next fire instants of a cron expression, in UTC.
    Next(next::NextArgs),
    /// Validate TidalScheduler manifests (or a live cluster's objects) and show their tide
    /// over a window, as text, JSON or an SVG chart.
    Plan(plan::PlanArgs),
    /// Work with holiday calendars (TidalCalendar, ClusterTidalCalendar).
    #[command(subcommand)]
    Calendar(calendar::CalendarCommand),
    /// Run the controller (uses KUBECONFIG or the in-cluster configuration).
    Run(run::RunArgs),
}

/// The file name that makes the binary a kubectl plugin (`kubectl tidal ...`).
pub const KUBECTL_PLUGIN: &str = "kubectl-tidal";

/// Parses `args` (the first is the program); as `kubectl-tidal`, help and usage say
/// `kubectl tidal`. Exits on `--help`, `--version` and usage errors, as clap does.
pub fn parse_args(args: impl IntoIterator<Item = OsString>) -> Cli {
    let args: Vec<OsString> = args.into_iter().collect();
    let program = args
        .first()
        .and_then(|arg0| Path::new(arg0).file_name())
        .and_then(|name| name.to_str());
    let mut command = Cli::command();
    if program == Some(KUBECTL_PLUGIN) {
        command = command
            .bin_name("kubectl tidal")
            .display_name("kubectl tidal");
    }
    let matches = command.get_matches_from(args);
    Cli::from_arg_matches(&matches).unwrap_or_else(|error| error.exit())
}

/// Runs a parsed command line; errors are printed to stderr.
pub fn run(cli: Cli) -> ExitCode {
    let result = match cli.command {
        Command::Crd => process::print_stdout(&crate::api::crd_yaml()),
        Command::Next(args) => next::run(&args, Timestamp::now()),
        Command::Plan(args) => plan::run(&args, Timestamp::now()),
        Command::Calendar(command) => calendar::run(&command),
        Command::Run(args) => run::run(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::from(error.exit_code())
        }
    }
}
