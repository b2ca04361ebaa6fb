//! The `tidal-scheduler` binary: parses the command line and dispatches. Installed (or
//! linked) as `kubectl-tidal` on PATH, it is the kubectl plugin `kubectl tidal`.

use std::process::ExitCode;

use tidal_scheduler::cli;

/// mimalloc: at 100,000 cached objects glibc's per-allocation overhead alone pushed the
/// process past 500 MiB (docs/dependencies.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    disable_transparent_huge_pages();
    cli::run(cli::parse_args(std::env::args_os()))
}

/// Turns transparent huge pages off for this process, as mimalloc's `allow_thp=0` would
/// (too late to set from here): mimalloc asks for them on its arenas, and each huge page
/// faulted in is zeroed whole and resident whole — at 10,000 objects 93 MiB against
/// 74 MiB without, and the page clearing a tenth of the controller's CPU in a burst
/// (docs/performance.md). Best effort: a kernel without the call leaves them as they are.
fn disable_transparent_huge_pages() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and touches no memory of
    // this process.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
