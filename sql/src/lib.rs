//! Lemonade's SQLite databases.
//!
//! Both databases (the node's `node.db`, the head node's `lemon.db`) are opened
//! the same way: WAL, a busy timeout, foreign keys on, and the plain `.sql`
//! migrations under `sql/migrations/` applied in order, tracked by
//! `PRAGMA user_version`.
//!
//! [`node`] holds the queries of the node database. The lemon database's
//! queries live with the `lemon` binary, which is their only user.

pub mod lock;
pub mod migrate;
pub mod node;
pub mod node_jobs;
pub mod node_validation;
pub mod wal;

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;
use thiserror::Error;

pub use rusqlite;

/// Why a database could not be used.
#[derive(Debug, Error)]
pub enum StoreError {
    #[error("{path}: {source}")]
    Sqlite {
        path: PathBuf,
        source: rusqlite::Error,
    },
    #[error("{path}: cannot create directory: {source}")]
    Directory {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: migration {name}: {source}")]
    Migration {
        path: PathBuf,
        name: &'static str,
        source: rusqlite::Error,
    },
    #[error("{path}: schema version {found} is newer than this program knows ({known}); upgrade Lemonade")]
    TooNew {
        path: PathBuf,
        found: i64,
        known: i64,
    },
    #[error("{path}: another run holds the lock (waited {waited_ms} ms)")]
    Locked { path: PathBuf, waited_ms: u64 },
}

/// Which database, and so which migrations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Schema {
    Node,
    Lemon,
}

/// Opens (creating if needed) and migrates a database.
pub fn open(path: &Path, schema: Schema, busy_timeout: Duration) -> Result<Connection, StoreError> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|source| StoreError::Directory {
            path: dir.to_path_buf(),
            source,
        })?;
    }
    let wrap = |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let conn = Connection::open(path).map_err(wrap)?;
    conn.busy_timeout(busy_timeout).map_err(wrap)?;
    // WAL lets the history readers (healthcheck history, lemon report) run beside a writer.
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(wrap)?;
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(wrap)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(wrap)?;
    // A healthcheck run is a short process: checkpointing (and fsyncing) the
    // WAL at every close would cost more than the whole run. SQLite's own
    // checkpoint does not keep the log short for such processes either: the
    // runs call `wal::truncate_if_over` (see there why).
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE,
        true,
    )
    .map_err(wrap)?;
    migrate::apply(&conn, path, schema)?;
    Ok(conn)
}
