//! Why a subcommand failed, and the exit status that says so.

/// Exit status for input the command cannot use (bad expression, invalid manifest,
/// invalid flags, ...); clap's own usage errors exit with it too.
pub const EXIT_INVALID_INPUT: u8 = 2;

/// Exit status for a failure at run time (no usable kubeconfig, an address that cannot be
/// bound, output that cannot be written, ...).
pub const EXIT_FAILURE: u8 = 1;

/// Why a subcommand failed.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// A command-line value is not usable.
    #[error("{0}")]
    Argument(String),
    /// A cron expression is invalid.
    #[error("invalid cron expression: {0}")]
    Cron(#[from] crate::schedule::CronError),
    /// A file could not be read.
    #[error("failed to read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// A manifest is not valid YAML or not a TidalScheduler.
    #[error("{path}: {message}")]
    Manifest {
        /// The file.
        path: String,
        /// What is wrong.
        message: String,
    },
    /// One or more objects failed validation; the details were already printed.
    #[error("{0} invalid object(s)")]
    InvalidObjects(usize),
    /// Writing the output failed.
    #[error("failed to write output: {0}")]
    Write(#[from] std::io::Error),
    /// Something the command needs at run time failed; the message names the action.
    #[error("{0}")]
    Runtime(String),
}

impl CliError {
    /// The process exit status: [`EXIT_INVALID_INPUT`] for input or arguments the command
    /// cannot use, [`EXIT_FAILURE`] for a failure at run time.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Argument(_)
            | CliError::Cron(_)
            | CliError::Read { .. }
            | CliError::Manifest { .. }
            | CliError::InvalidObjects(_) => EXIT_INVALID_INPUT,
            CliError::Write(_) | CliError::Runtime(_) => EXIT_FAILURE,
        }
    }
}

impl From<crate::runtime::RuntimeError> for CliError {
    fn from(error: crate::runtime::RuntimeError) -> CliError {
        match error {
            crate::runtime::RuntimeError::Identity(_)
            | crate::runtime::RuntimeError::Telemetry(_) => CliError::Argument(error.to_string()),
            other => CliError::Runtime(other.to_string()),
        }
    }
}
