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
    purge_freed_pages_at_once();
    cli::run(cli::parse_args(std::env::args_os()))
}

/// `mi_option_purge_delay` of mimalloc.h's `mi_option_e` (v2 and v3 alike); libmimalloc-sys
/// does not name it, "for stability reasons".
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Has mimalloc return freed pages to the kernel at once rather than a second later, unless
/// `MIMALLOC_PURGE_DELAY` says otherwise: at 100,000 objects 11 MiB less resident and peaks
/// 18–21 MiB lower, for ~1 % more CPU per trigger in a 10,000-object burst
/// (docs/performance.md). mimalloc reads the option at each purge.
fn purge_freed_pages_at_once() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets an integer option before any other thread exists (the call is not
        // thread-safe).
        unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
    }
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

#[cfg(test)]
mod tests {
    use super::{MI_OPTION_PURGE_DELAY, purge_freed_pages_at_once};

    #[test]
    fn freed_pages_are_purged_at_once_unless_the_environment_says_otherwise() {
        // SAFETY: reads an integer option.
        let purge_delay = || unsafe { libmimalloc_sys::mi_option_get(MI_OPTION_PURGE_DELAY) };
        let configured = std::env::var("MIMALLOC_PURGE_DELAY").ok();
        // mimalloc v3's default purge delay, 1,000 ms: the index is the purge delay's.
        let before = configured
            .as_deref()
            .map_or(1000, |value| value.parse().unwrap());
        assert_eq!(purge_delay(), before);
        purge_freed_pages_at_once();
        assert_eq!(purge_delay(), if configured.is_some() { before } else { 0 });
    }
}
