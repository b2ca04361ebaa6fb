//! No orphan processes, however a test binary ends.
//!
//! Each test binary spawns one reaper: a small shell process reading commands on
//! its stdin (`pid N`, `gone N`, `control-plane DIR`). The write end of that pipe
//! lives as long as the test process, so when the test process ends — normally,
//! after a panic, on Ctrl-C or SIGKILL — the kernel closes it, the reaper reads
//! end-of-file, kills every registered pid that is still there and stops every
//! registered control plane (`down.sh`). The reaper ignores SIGINT, SIGTERM and
//! SIGHUP, which a terminal sends to the whole process group.

use std::io::Write;
use std::path::Path;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock};

const SCRIPT: &str = r#"
trap '' INT TERM HUP
pids=" "
dirs=""
while read -r verb arg; do
  case "$verb" in
    pid) pids="$pids$arg " ;;
    gone) pids="$(printf '%s' "$pids" | sed "s/ $arg / /")" ;;
    control-plane) dirs="$dirs$arg
" ;;
  esac
done
for pid in $pids; do kill -KILL "$pid" 2>/dev/null; done
printf '%s' "$dirs" | while IFS= read -r dir; do
  "$TIDAL_DOWN" "$dir"
  [ -n "$TIDAL_KEEP_CONTROL_PLANE" ] || rm -rf "$dir"
done
"#;

/// Where `down.sh` is.
pub const DOWN_SCRIPT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../tests/control-plane/down.sh"
);

/// The test process's end of the pipe to its reaper.
pub struct Reaper {
    commands: Mutex<ChildStdin>,
}

impl Reaper {
    /// The reaper of this test process, spawned on first use.
    pub fn get() -> &'static Reaper {
        static REAPER: OnceLock<Reaper> = OnceLock::new();
        REAPER.get_or_init(Reaper::spawn)
    }

    fn spawn() -> Reaper {
        let log_dir = crate::target_tmpdir();
        std::fs::create_dir_all(&log_dir).expect("create target/tmp");
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log_dir.join("reaper.log"))
            .expect("open the reapers' log");
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(SCRIPT)
            .env("TIDAL_DOWN", DOWN_SCRIPT)
            .stdin(Stdio::piped())
            .stdout(log.try_clone().expect("clone log handle"))
            .stderr(log)
            .spawn()
            .expect("spawn the reaper (sh)");
        let commands = child.stdin.take().expect("reaper stdin");
        // Not waited for: it must outlive this process.
        std::mem::forget(child);
        Reaper {
            commands: Mutex::new(commands),
        }
    }

    /// Kill `pid` with SIGKILL when this test process ends.
    pub fn watch_pid(&self, pid: u32) {
        self.send(&format!("pid {pid}"));
    }

    /// `pid` was reaped by the test itself; forget it (its number may be reused).
    pub fn forget_pid(&self, pid: u32) {
        self.send(&format!("gone {pid}"));
    }

    /// Stop the control plane under `dir` (and remove `dir`, unless
    /// `TIDAL_KEEP_CONTROL_PLANE` is set) when this test process ends.
    pub fn watch_control_plane(&self, dir: &Path) {
        let dir = dir.to_str().expect("control plane directory is UTF-8");
        assert!(
            !dir.contains('\n'),
            "control plane directory with a newline"
        );
        self.send(&format!("control-plane {dir}"));
    }

    fn send(&self, line: &str) {
        let mut commands = self.commands.lock().unwrap_or_else(|e| e.into_inner());
        writeln!(commands, "{line}")
            .and_then(|()| commands.flush())
            .expect("the reaper process is gone");
    }
}
