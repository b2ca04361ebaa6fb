//! The `tidal-scheduler` binary: parses the command line and dispatches.

use std::process::ExitCode;

use clap::Parser;
use tidal_scheduler::cli::{self, Cli};

fn main() -> ExitCode {
    cli::run(Cli::parse())
}
