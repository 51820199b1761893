//! Keeping a database's write-ahead log short.
//!
//! SQLite's automatic checkpoint does not do it for short processes such as
//! a healthcheck run. The first connection of a new process finds the
//! shared-memory index stale, rebuilds it by reading the whole log, and
//! records the log as not yet copied back (`nBackfill = 0`). The automatic
//! checkpoint that follows a commit is PASSIVE: it copies frames back into
//! the database, but the log only restarts from its beginning when a later
//! write transaction *began* on a fully copied log. A run that writes and
//! exits never gets there, so the log only grows (measured: 200 MB after
//! 1,200 periodic runs, the checkpoint sequence still 0), and every new
//! process reads all of it again.
//!
//! The fix: whichever run finds the log past a limit checkpoints it with
//! TRUNCATE, which copies it back and empties the file. That costs two
//! fsyncs once per limit's worth of writes instead of one per run (which a
//! checkpoint at every close would cost). A reader holding an old snapshot
//! keeps the log from being emptied: the checkpoint then waits at most
//! `wait`, reports itself busy, and the next run past the limit tries again.

use crate::StoreError;
use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The default limit: about a thousand pages, where SQLite's own automatic
/// checkpoint would start, and a few dozen runs of the full periodic suite.
pub const DEFAULT_LIMIT_BYTES: u64 = 4 * 1024 * 1024;

/// How long a checkpoint waits for readers before it gives up for this run.
pub const DEFAULT_WAIT: Duration = Duration::from_millis(50);

/// What [`truncate_if_over`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upkeep {
    /// The log was within the limit: nothing done.
    WithinLimit,
    /// The log was copied back and emptied.
    Truncated { bytes_before: u64 },
    /// A reader held the log: it was copied back as far as the reader
    /// allowed and stays as long as it is; the next run tries again.
    Busy { bytes_before: u64 },
}

/// The `-wal` file beside `db`.
pub fn log_path(db: &Path) -> PathBuf {
    let mut p = db.as_os_str().to_owned();
    p.push("-wal");
    p.into()
}

/// The size of `db`'s log in bytes (0 when there is none).
pub fn log_size(db: &Path) -> u64 {
    std::fs::metadata(log_path(db)).map_or(0, |m| m.len())
}

/// Checkpoints `conn`'s log with TRUNCATE when its file is larger than
/// `limit` bytes, waiting at most `wait` for readers. The connection's busy
/// timeout is `busy_timeout` again afterwards.
pub fn truncate_if_over(
    conn: &Connection,
    db: &Path,
    limit: u64,
    wait: Duration,
    busy_timeout: Duration,
) -> Result<Upkeep, StoreError> {
    let bytes_before = log_size(db);
    if bytes_before <= limit {
        return Ok(Upkeep::WithinLimit);
    }
    let wrap = |source| StoreError::Sqlite {
        path: db.to_path_buf(),
        source,
    };
    conn.busy_timeout(wait).map_err(wrap)?;
    let busy = conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
        r.get::<_, i64>(0)
    });
    conn.busy_timeout(busy_timeout).map_err(wrap)?;
    match busy {
        Ok(0) => Ok(Upkeep::Truncated { bytes_before }),
        Ok(_) => Ok(Upkeep::Busy { bytes_before }),
        // A writer in another process kept the lock past `wait`: like a reader.
        Err(rusqlite::Error::SqliteFailure(e, _))
            if e.code == rusqlite::ErrorCode::DatabaseBusy =>
        {
            Ok(Upkeep::Busy { bytes_before })
        }
        Err(e) => Err(wrap(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{open, Schema};
    use rusqlite::OpenFlags;

    const BUSY: Duration = Duration::from_millis(500);

    fn grow(conn: &Connection, rows: usize) {
        for i in 0..rows {
            conn.execute(
                "INSERT INTO runs (started_at, duration_ms, trigger, profile, worst, exit_code)
                 VALUES (?1, 1, 'periodic', 'periodic', 'ok', 0)",
                [i as i64],
            )
            .unwrap();
        }
    }

    #[test]
    fn a_log_past_the_limit_is_copied_back_and_emptied() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("node.db");
        let conn = open(&db, Schema::Node, BUSY).unwrap();
        grow(&conn, 50);
        let before = log_size(&db);
        assert!(
            before > 16 * 1024,
            "50 commits grow the log: {before} bytes"
        );
        assert_eq!(
            truncate_if_over(&conn, &db, before, DEFAULT_WAIT, BUSY).unwrap(),
            Upkeep::WithinLimit
        );
        assert_eq!(
            truncate_if_over(&conn, &db, 16 * 1024, DEFAULT_WAIT, BUSY).unwrap(),
            Upkeep::Truncated {
                bytes_before: before
            }
        );
        assert_eq!(log_size(&db), 0);
        let runs: i64 = conn
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .unwrap();
        assert_eq!(runs, 50, "nothing is lost");
    }

    #[test]
    fn a_reader_keeps_the_log_without_blocking_and_the_next_try_empties_it() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("node.db");
        let conn = open(&db, Schema::Node, BUSY).unwrap();
        grow(&conn, 5);
        let reader = Connection::open_with_flags(&db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
        reader.execute_batch("BEGIN").unwrap();
        let _: i64 = reader
            .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
            .unwrap();
        grow(&conn, 50);

        let started = std::time::Instant::now();
        let upkeep = truncate_if_over(&conn, &db, 1024, DEFAULT_WAIT, BUSY).unwrap();
        assert!(matches!(upkeep, Upkeep::Busy { .. }), "{upkeep:?}");
        assert!(
            started.elapsed() < BUSY,
            "waited {:?}, not the connection's busy timeout",
            started.elapsed()
        );
        assert!(log_size(&db) > 1024, "the reader's snapshot stays readable");

        reader.execute_batch("COMMIT").unwrap();
        drop(reader);
        assert!(matches!(
            truncate_if_over(&conn, &db, 1024, DEFAULT_WAIT, BUSY).unwrap(),
            Upkeep::Truncated { .. }
        ));
        assert_eq!(log_size(&db), 0);
    }
}
