//! Child processes a test runs — controller replicas above all — each with its own
//! arguments and log file, signalled like in a chaos drill, and never outliving the
//! test process (see [`Reaper`]).

use crate::wait::blocking_poll;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::Duration;

use super::reaper::Reaper;

/// The product binary, which Cargo builds next to the integration tests and benches
/// (`target/PROFILE/tidal-scheduler`).
pub fn binary() -> PathBuf {
    crate::profile_dir().join("tidal-scheduler")
}

/// Runs `command`; its stdout, or what it said on failure.
pub fn output(mut command: Command) -> Result<String, String> {
    let out = command
        .output()
        .map_err(|e| format!("spawn {command:?}: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{command:?}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// A running child process whose stdout and stderr go to a log file. Dropping it
/// kills it (SIGKILL) and reaps it.
pub struct Process {
    name: String,
    child: Child,
    log: PathBuf,
    status: Option<ExitStatus>,
}

impl Process {
    /// Spawns `command`, logging to `log` (created, with its parent directories).
    pub fn spawn(name: &str, mut command: Command, log: PathBuf) -> Process {
        if let Some(parent) = log.parent() {
            std::fs::create_dir_all(parent).expect("create log directory");
        }
        let file = File::create(&log).unwrap_or_else(|e| panic!("create {}: {e}", log.display()));
        let child = command
            .stdin(Stdio::null())
            .stdout(file.try_clone().expect("clone log handle"))
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name} ({command:?}): {e}"));
        Reaper::get().watch_pid(child.id());
        Process {
            name: name.to_owned(),
            child,
            log,
            status: None,
        }
    }

    /// The name it was started under.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id, e.g. to find the process in `/proc`.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file its stdout and stderr go to.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// Everything the process wrote so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends a signal by name (`TERM`, `KILL`, `STOP`, `CONT`, `INT`, ...).
    pub fn signal(&self, signal: &str) {
        if self.status.is_some() {
            panic!("{} already exited; cannot send SIG{signal}", self.name);
        }
        let status = Command::new("kill")
            .args(["-s", signal, &self.pid().to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -s {signal} {} failed", self.pid());
    }

    /// The exit status, once the process has ended.
    pub fn try_status(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().expect("try_wait");
            if self.status.is_some() {
                Reaper::get().forget_pid(self.pid());
            }
        }
        self.status
    }

    /// Waits for the process to end; panics with its log after `timeout`.
    pub fn wait(&mut self, timeout: Duration) -> ExitStatus {
        let pace = Duration::from_millis(20);
        let ended = blocking_poll(pace, timeout, || self.try_status().ok_or_else(String::new));
        ended.unwrap_or_else(|_| {
            panic!(
                "{} still running after {timeout:?}; log:\n{}",
                self.name,
                self.log()
            )
        })
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if self.try_status().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            Reaper::get().forget_pid(self.pid());
        }
    }
}
