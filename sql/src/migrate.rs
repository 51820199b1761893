//! Applies the `.sql` files of `sql/migrations/<schema>/` in order.
//!
//! Hand-written rather than a crate: it is a dozen lines over `user_version`,
//! and the migrations stay plain SQL files that an administrator can read.

use crate::{Schema, StoreError};
use rusqlite::Connection;
use std::path::Path;

/// Migrations in order; the index + 1 is the schema version after applying it.
const NODE: &[(&str, &str)] = &[
    (
        "0001_runs_findings_state.sql",
        include_str!("../migrations/node/0001_runs_findings_state.sql"),
    ),
    (
        "0002_jobs_state_changes_spool.sql",
        include_str!("../migrations/node/0002_jobs_state_changes_spool.sql"),
    ),
    (
        "0003_validation.sql",
        include_str!("../migrations/node/0003_validation.sql"),
    ),
];

const LEMON: &[(&str, &str)] = &[
    (
        "0001_history.sql",
        include_str!("../migrations/lemon/0001_history.sql"),
    ),
    (
        "0002_task_exit_ms.sql",
        include_str!("../migrations/lemon/0002_task_exit_ms.sql"),
    ),
    (
        "0003_job_name.sql",
        include_str!("../migrations/lemon/0003_job_name.sql"),
    ),
    (
        "0004_inventory_index.sql",
        include_str!("../migrations/lemon/0004_inventory_index.sql"),
    ),
    (
        "0005_job_node_ids.sql",
        include_str!("../migrations/lemon/0005_job_node_ids.sql"),
    ),
    (
        "0006_job_evidence.sql",
        include_str!("../migrations/lemon/0006_job_evidence.sql"),
    ),
    (
        "0007_flight_recorder.sql",
        include_str!("../migrations/lemon/0007_flight_recorder.sql"),
    ),
    (
        "0008_samples.sql",
        include_str!("../migrations/lemon/0008_samples.sql"),
    ),
    (
        "0009_watch_detections.sql",
        include_str!("../migrations/lemon/0009_watch_detections.sql"),
    ),
    (
        "0010_validations.sql",
        include_str!("../migrations/lemon/0010_validations.sql"),
    ),
    (
        "0011_run_blocks.sql",
        include_str!("../migrations/lemon/0011_run_blocks.sql"),
    ),
];

pub(crate) fn migrations(schema: Schema) -> &'static [(&'static str, &'static str)] {
    match schema {
        Schema::Node => NODE,
        Schema::Lemon => LEMON,
    }
}

pub(crate) fn apply(conn: &Connection, path: &Path, schema: Schema) -> Result<(), StoreError> {
    let list = migrations(schema);
    let wrap = |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    };
    let version: i64 = conn
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .map_err(wrap)?;
    if version > list.len() as i64 {
        return Err(StoreError::TooNew {
            path: path.to_path_buf(),
            found: version,
            known: list.len() as i64,
        });
    }
    for (index, (name, sql)) in list.iter().enumerate().skip(version as usize) {
        let migration_error = |source| StoreError::Migration {
            path: path.to_path_buf(),
            name,
            source,
        };
        // IMMEDIATE: two processes opening a fresh database at once must not both migrate.
        conn.execute_batch("BEGIN IMMEDIATE")
            .map_err(migration_error)?;
        let current: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(migration_error)?;
        if current > index as i64 {
            conn.execute_batch("COMMIT").map_err(migration_error)?;
            continue;
        }
        let result = conn
            .execute_batch(sql)
            .and_then(|_| conn.pragma_update(None, "user_version", index as i64 + 1))
            .and_then(|_| conn.execute_batch("COMMIT"));
        if let Err(e) = result {
            let _ = conn.execute_batch("ROLLBACK");
            return Err(migration_error(e));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_lemon_database_of_version_1_gains_task_exit_milliseconds() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lemon.db");
        {
            // As the first release left it, with one task exit in seconds.
            let conn = Connection::open(&path).unwrap();
            conn.execute_batch(LEMON[0].1).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute_batch(
                "INSERT INTO nodes(id, name) VALUES (1, 'n1');
                 INSERT INTO health(node, epoch, seq, at, kind, job_id, signal)
                 VALUES (1, 'e', 1, 1000, 'task_exit', '7', 9);",
            )
            .unwrap();
        }
        let conn = crate::open(&path, Schema::Lemon, Duration::from_secs(1)).unwrap();
        let version: i64 = conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .unwrap();
        assert_eq!(version, LEMON.len() as i64);
        let (at_ms, ms): (Option<i64>, i64) = conn
            .query_row(
                "SELECT at_ms, coalesce(at_ms, at * 1000) FROM health",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!((at_ms, ms), (None, 1_000_000));
    }
}
