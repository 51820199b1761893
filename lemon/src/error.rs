//! What can go wrong in the lemon job, worded for the operator who reads cron mail.

use std::path::PathBuf;
use thiserror::Error;

/// Errors of the lemon library; the binary turns them into exit code 2.
#[derive(Debug, Error)]
pub enum LemonError {
    #[error(transparent)]
    Store(#[from] lemonade_sql::StoreError),
    #[error("lemon database: {0} (is another `lemon` running, or the disk full?)")]
    Sqlite(#[from] lemonade_sql::rusqlite::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{what} failed: {source} (check that Slurm answers, e.g. run it by hand, then re-run `lemon ingest`)")]
    Slurm {
        what: String,
        source: lemonade_slurm::command::CommandError,
    },
    #[error("{0}")]
    Usage(String),
    #[error(transparent)]
    Reliability(#[from] crate::reliability::ReliabilityError),
}

/// Result of the lemon library.
pub type Result<T, E = LemonError> = std::result::Result<T, E>;

impl LemonError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> LemonError {
        LemonError::Io {
            path: path.into(),
            source,
        }
    }
}
