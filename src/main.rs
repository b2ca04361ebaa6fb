//! The `tidal-scheduler` binary: parses the command line and dispatches. Installed (or
//! linked) as `kubectl-tidal` on PATH, it is the kubectl plugin `kubectl tidal`.

use std::process::ExitCode;

use tidal_scheduler::cli;

/// mimalloc: at 100,000 cached objects glibc's per-allocation overhead alone pushed the
/// process past 500 MiB (docs/dependencies.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    cli::run(cli::parse_args(std::env::args_os()))
}
