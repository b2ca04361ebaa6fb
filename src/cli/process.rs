//! What the subcommands need from the process: instants from flags, the Tokio runtime,
//! termination signals, and stdout that may be closed.

use std::io::Write;

use jiff::Timestamp;

use super::error::CliError;

/// Parses an RFC 3339 instant given on the command line.
pub fn parse_instant(flag: &str, text: &str) -> Result<Timestamp, CliError> {
    text.parse().map_err(|error| {
        CliError::Argument(format!(
            "{flag}: `{text}` is not an RFC 3339 instant such as 2026-03-08T07:30:00Z ({error})"
        ))
    })
}

/// A multi-threaded Tokio runtime for the commands that talk to Kubernetes.
pub fn runtime() -> Result<tokio::runtime::Runtime, CliError> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|error| CliError::Runtime(format!("failed to start the Tokio runtime: {error}")))
}

/// Resolves on SIGINT or SIGTERM.
pub async fn termination() {
    use tokio::signal::unix::{SignalKind, signal};
    match signal(SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// Writes `text` to stdout. A closed stdout (`tidal-scheduler next ... | head -1`) is the
/// end of the output, as for other command-line tools: no error.
pub fn print_stdout(text: &str) -> Result<(), CliError> {
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        written => Ok(written?),
    }
}
