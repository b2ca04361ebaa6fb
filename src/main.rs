//! The `tidal-scheduler` binary: parses the command line and dispatches. Installed (or
//! linked) as `kubectl-tidal` on PATH, it is the kubectl plugin `kubectl tidal`.

use std::process::ExitCode;

use tidal_scheduler::cli;

fn main() -> ExitCode {
    cli::run(cli::parse_args(std::env::args_os()))
}
