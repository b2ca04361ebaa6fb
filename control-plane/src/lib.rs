//! Runs the local control plane's scripts (`tests/control-plane/`: `provision.sh`,
//! `up.sh`, `down.sh`, ...): for the demo (`tidal-demo`) and for the test harness, which
//! call these same functions. A development crate: the product binary carries none of it.

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

/// A script that could not be run or that failed.
#[derive(Debug, thiserror::Error)]
pub enum ScriptError {
    /// It could not be started.
    #[error("failed to run {path}: {source}")]
    Spawn {
        /// The script.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// It exited unsuccessfully (its own messages went to stderr).
    #[error("{path} exited with {status}")]
    Failed {
        /// The script.
        path: PathBuf,
        /// Its exit status.
        status: std::process::ExitStatus,
    },
}

/// The directory of the scripts in this source tree.
pub const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../tests/control-plane");

/// Runs `dir/name` with `args` (with `TIDAL_CONTROL_PLANE_BIN=bin` if given, and the
/// variables `vars`), its progress on our stderr; returns the last line of its stdout.
pub fn run(
    dir: &Path,
    name: &str,
    args: &[&str],
    bin: Option<&Path>,
    vars: &[(&str, &str)],
) -> Result<String, ScriptError> {
    let path = dir.join(name);
    let output = command(&path, args, bin, vars)
        .output()
        .map_err(|source| ScriptError::Spawn {
            path: path.clone(),
            source,
        })?;
    last_line(path, output)
}

/// Like [`run`], cancellable: dropping the future (Ctrl-C, SIGTERM) kills the script;
/// whatever it started is stopped by `down.sh`.
pub async fn run_async(
    dir: &Path,
    name: &str,
    args: &[&str],
    bin: Option<&Path>,
    vars: &[(&str, &str)],
) -> Result<String, ScriptError> {
    let path = dir.join(name);
    let mut command = tokio::process::Command::from(command(&path, args, bin, vars));
    let output = command
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|source| ScriptError::Spawn {
            path: path.clone(),
            source,
        })?;
    last_line(path, output)
}

/// `bash PATH ARGS…`, with stderr inherited, `TIDAL_CONTROL_PLANE_BIN=bin` if given,
/// and `vars`.
fn command(
    path: &Path,
    args: &[&str],
    bin: Option<&Path>,
    vars: &[(&str, &str)],
) -> std::process::Command {
    let mut command = std::process::Command::new("bash");
    command
        .arg(path)
        .args(args)
        .envs(vars.iter().copied())
        .stderr(Stdio::inherit());
    if let Some(bin) = bin {
        command.env("TIDAL_CONTROL_PLANE_BIN", bin);
    }
    command
}

/// The last stdout line of a script that succeeded.
fn last_line(path: PathBuf, output: Output) -> Result<String, ScriptError> {
    if !output.status.success() {
        return Err(ScriptError::Failed {
            path,
            status: output.status,
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout)
        .lines()
        .last()
        .unwrap_or_default()
        .to_owned())
}

/// The value of `NAME=value` in an environment file a script wrote (`DIR/jaeger.env`,
/// `DIR/node.env`).
pub fn env_value<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix('='))
}

/// The addresses of the Jaeger that `up.sh DIR` started with `TIDAL_JAEGER=1`, from
/// `DIR/jaeger.env`.
#[derive(Debug, Clone)]
pub struct Jaeger {
    /// OTLP/HTTP base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub otlp_http: String,
    /// `host:port` of the query API.
    pub query: String,
}

impl Jaeger {
    /// Reads `dir/jaeger.env`.
    pub fn of(dir: &Path) -> Result<Jaeger, String> {
        let path = dir.join("jaeger.env");
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("read {}: {e}", path.display()))?;
        let var = |name: &str| {
            env_value(&text, name)
                .map(str::to_owned)
                .ok_or_else(|| format!("{} has no {name}", path.display()))
        };
        Ok(Jaeger {
            otlp_http: var("JAEGER_OTLP_HTTP")?,
            query: var("JAEGER_QUERY")?,
        })
    }
}
