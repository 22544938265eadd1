//! Errors of the command-line tool and the exit codes they map to.
//!
//! Exit codes: 0 success; 1 something was not found (a record, a dataset, the
//! database) or an operation failed on the engine side (I/O, corrupt file);
//! 2 a usage or input error (bad arguments, invalid records, the database is
//! held by another process). Clap's own usage errors also exit with 2.

use std::io;

/// Exit code for "not found" and engine-side failures.
pub const EXIT_NOT_FOUND: u8 = 1;
/// Exit code for usage and input errors.
pub const EXIT_USAGE: u8 = 2;

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad arguments or input; the message says what to change.
    #[error("{0}")]
    Usage(String),
    /// Something the user asked for does not exist.
    #[error("{0}")]
    NotFound(String),
    /// An operation failed for a reason other than the user's input.
    #[error("{0}")]
    Failed(String),
    /// An error from the engine; its message already says what to do.
    #[error(transparent)]
    Silt(#[from] silt::Error),
    /// Standard output was closed by the reader (`silt scan ... | head`):
    /// not an error, the command just stops.
    #[error("broken pipe")]
    BrokenPipe,
}

pub type CliResult<T> = Result<T, CliError>;

impl CliError {
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => EXIT_USAGE,
            CliError::NotFound(_) | CliError::Failed(_) => EXIT_NOT_FOUND,
            CliError::BrokenPipe => 0,
            CliError::Silt(e) => match e {
                silt::Error::NoSuchDataset(_) | silt::Error::NoSuchIndex { .. } => EXIT_NOT_FOUND,
                silt::Error::Io { .. } | silt::Error::Corrupt { .. } | silt::Error::Closed(_) => {
                    EXIT_NOT_FOUND
                }
                _ => EXIT_USAGE,
            },
        }
    }

    /// An error writing to standard output.
    pub fn from_stdout(e: io::Error) -> CliError {
        if e.kind() == io::ErrorKind::BrokenPipe {
            CliError::BrokenPipe
        } else {
            CliError::Failed(format!("cannot write to standard output: {e}"))
        }
    }
}
