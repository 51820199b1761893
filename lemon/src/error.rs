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
    Reliability(#[from] ReliabilityError),
}

/// Errors of the reliability report (`reliability`), here so that
/// [`LemonError`] wraps it without importing the report.
#[derive(Debug, thiserror::Error)]
pub enum ReliabilityError {
    /// The time range is empty or reversed.
    #[error("empty time range: --since {since} is not before --until {until}")]
    EmptyRange {
        since: chrono::DateTime<chrono::Utc>,
        until: chrono::DateTime<chrono::Utc>,
    },
    /// lemon.db holds no record before the end of the range.
    #[error("no history before {until}: lemon.db holds no runs, health records or node events yet (run `lemon ingest` first)")]
    NoHistory {
        until: chrono::DateTime<chrono::Utc>,
    },
    /// A parameter is outside its meaningful range.
    #[error("invalid parameter {name}: {why}")]
    InvalidParameter { name: &'static str, why: String },
    /// The report could not be serialised.
    #[error("cannot write the report as JSON: {0}")]
    Json(#[source] serde_json::Error),
    /// lemon.db could not be read.
    #[error("lemon database: {0}")]
    Sqlite(#[from] lemonade_sql::rusqlite::Error),
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
