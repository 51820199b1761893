//! Node-database queries of the Slurm side: jobs seen by the prolog and the
//! epilog, the state changes the policy made, the policy's memory between
//! runs, and the spool export's numbering.
//!
//! They take a plain [`Connection`] (from `NodeStore::connection`) so that the
//! prolog, the epilog and the periodic run share one open database.

use crate::StoreError;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;

fn wrap(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// A job as this node saw it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JobRow {
    pub job_id: String,
    pub user: Option<String>,
    pub started_at: Option<i64>,
    pub ended_at: Option<i64>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
}

/// A state change the policy made, or tried to make.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StateChangeRow {
    pub at: i64,
    pub run_id: Option<i64>,
    /// `drain`, `down` or `resume`.
    pub action: String,
    pub reason: String,
    /// JSON list of the findings that caused it.
    pub causes: String,
    /// `applied`, `dry-run`, `failed`, `breaker` or `skipped`.
    pub outcome: String,
    pub detail: String,
}

/// The spool export's numbering for this database.
#[derive(Debug, Clone, PartialEq)]
pub struct SpoolState {
    pub epoch: String,
    pub next_seq: u64,
    /// Rows with a time at or after this (unix seconds) are not exported yet.
    pub exported_until: i64,
    pub task_exits_offset: u64,
}

/// Records a job start (prolog). A second prolog for the same job (a requeue)
/// restarts the record.
pub fn job_started(
    conn: &Connection,
    path: &Path,
    job_id: &str,
    user: Option<&str>,
    at: i64,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO jobs (job_id, user, started_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(job_id) DO UPDATE SET user = COALESCE(excluded.user, user),
             started_at = excluded.started_at, ended_at = NULL, exit_code = NULL, signal = NULL",
        params![job_id, user, at],
    )
    .map_err(wrap(path))?;
    Ok(())
}

/// Records a job end (epilog), creating the row when the prolog did not run here.
pub fn job_ended(
    conn: &Connection,
    path: &Path,
    job_id: &str,
    at: i64,
    exit_code: Option<i32>,
    signal: Option<i32>,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO jobs (job_id, ended_at, exit_code, signal) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT(job_id) DO UPDATE SET ended_at = excluded.ended_at,
             exit_code = excluded.exit_code, signal = excluded.signal",
        params![job_id, at, exit_code, signal],
    )
    .map_err(wrap(path))?;
    Ok(())
}

/// Jobs that started or ended at or after `since`, oldest first.
pub fn jobs_since(conn: &Connection, path: &Path, since: i64) -> Result<Vec<JobRow>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT job_id, user, started_at, ended_at, exit_code, signal FROM jobs
             WHERE COALESCE(started_at, 0) >= ?1 OR COALESCE(ended_at, 0) >= ?1
             ORDER BY COALESCE(started_at, ended_at), job_id",
        )
        .map_err(wrap(path))?;
    let rows = stmt
        .query_map([since], |r| {
            Ok(JobRow {
                job_id: r.get(0)?,
                user: r.get(1)?,
                started_at: r.get(2)?,
                ended_at: r.get(3)?,
                exit_code: r.get(4)?,
                signal: r.get(5)?,
            })
        })
        .map_err(wrap(path))?;
    rows.collect::<Result<_, _>>().map_err(wrap(path))
}

/// Jobs running on this node: a prolog's start and no epilog's end yet,
/// started after `started_after` (a job whose epilog never ran is not
/// sampled for ever). Oldest first.
pub fn running_jobs(
    conn: &Connection,
    path: &Path,
    started_after: i64,
) -> Result<Vec<String>, StoreError> {
    job_ids(
        conn,
        path,
        "SELECT job_id FROM jobs WHERE ended_at IS NULL AND started_at > ?1
         ORDER BY started_at, job_id",
        started_after,
    )
}

/// Jobs whose epilog ran before `before` (and after a week before it: the
/// node sampler's chunks of older jobs are long gone from the spool file).
pub fn jobs_ended_before(
    conn: &Connection,
    path: &Path,
    before: i64,
) -> Result<Vec<String>, StoreError> {
    job_ids(
        conn,
        path,
        "SELECT job_id FROM jobs WHERE ended_at < ?1 AND ended_at >= ?1 - 604800
         ORDER BY ended_at, job_id",
        before,
    )
}

fn job_ids(conn: &Connection, path: &Path, sql: &str, at: i64) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached(sql).map_err(wrap(path))?;
    let rows = stmt.query_map([at], |r| r.get(0)).map_err(wrap(path))?;
    rows.collect::<Result<_, _>>().map_err(wrap(path))
}

/// Appends a state change.
pub fn record_state_change(
    conn: &Connection,
    path: &Path,
    change: &StateChangeRow,
) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO state_changes (at, run_id, action, reason, causes, outcome, detail)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            change.at,
            change.run_id,
            change.action,
            change.reason,
            change.causes,
            change.outcome,
            change.detail
        ],
    )
    .map_err(wrap(path))?;
    Ok(())
}

/// State changes at or after `since`, oldest first.
pub fn state_changes_since(
    conn: &Connection,
    path: &Path,
    since: i64,
) -> Result<Vec<StateChangeRow>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT at, run_id, action, reason, causes, outcome, detail FROM state_changes
             WHERE at >= ?1 ORDER BY at, id",
        )
        .map_err(wrap(path))?;
    let rows = stmt
        .query_map([since], |r| {
            Ok(StateChangeRow {
                at: r.get(0)?,
                run_id: r.get(1)?,
                action: r.get(2)?,
                reason: r.get(3)?,
                causes: r.get(4)?,
                outcome: r.get(5)?,
                detail: r.get(6)?,
            })
        })
        .map_err(wrap(path))?;
    rows.collect::<Result<_, _>>().map_err(wrap(path))
}

/// The policy's memory (JSON text), if any run saved one.
pub fn policy_state(conn: &Connection, path: &Path) -> Result<Option<String>, StoreError> {
    conn.query_row("SELECT state FROM policy_state WHERE id = 1", [], |r| {
        r.get(0)
    })
    .optional()
    .map_err(wrap(path))
}

/// Replaces the policy's memory.
pub fn save_policy_state(conn: &Connection, path: &Path, json: &str) -> Result<(), StoreError> {
    conn.execute(
        "INSERT INTO policy_state (id, state) VALUES (1, ?1)
         ON CONFLICT(id) DO UPDATE SET state = excluded.state",
        [json],
    )
    .map_err(wrap(path))?;
    Ok(())
}

/// Adds findings to a recorded run (the policy's own, such as an unknown streak).
pub fn add_findings(
    conn: &Connection,
    path: &Path,
    run_id: i64,
    findings: &[crate::node::FindingRow],
) -> Result<(), StoreError> {
    crate::node::insert_findings(conn, run_id, findings).map_err(wrap(path))
}

/// The spool numbering, created on first use with `new_epoch`.
pub fn spool_state(
    conn: &Connection,
    path: &Path,
    new_epoch: &str,
    now: i64,
) -> Result<SpoolState, StoreError> {
    conn.execute(
        "INSERT OR IGNORE INTO spool_state (id, epoch, next_seq, exported_until) VALUES (1, ?1, 1, ?2)",
        params![new_epoch, now],
    )
    .map_err(wrap(path))?;
    conn.query_row(
        "SELECT epoch, next_seq, exported_until, task_exits_offset FROM spool_state WHERE id = 1",
        [],
        |r| {
            Ok(SpoolState {
                epoch: r.get(0)?,
                next_seq: r.get::<_, i64>(1)? as u64,
                exported_until: r.get(2)?,
                task_exits_offset: r.get::<_, i64>(3)? as u64,
            })
        },
    )
    .map_err(wrap(path))
}

/// Saves the numbering after an export.
pub fn save_spool_state(
    conn: &Connection,
    path: &Path,
    state: &SpoolState,
) -> Result<(), StoreError> {
    conn.execute(
        "UPDATE spool_state SET next_seq = ?1, exported_until = ?2, task_exits_offset = ?3 WHERE id = 1",
        params![
            state.next_seq as i64,
            state.exported_until,
            state.task_exits_offset as i64
        ],
    )
    .map_err(wrap(path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::node::NodeStore;
    use std::time::Duration;

    #[test]
    fn jobs_state_changes_and_spool_numbering_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.db");
        let store = NodeStore::open(&path, Duration::from_millis(100)).unwrap();
        let conn = store.connection();
        job_started(conn, &path, "7", Some("alice"), 100).unwrap();
        job_ended(conn, &path, "7", 160, Some(1), None).unwrap();
        job_ended(conn, &path, "8", 170, Some(0), Some(9)).unwrap();
        let jobs = jobs_since(conn, &path, 0).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].user.as_deref(), Some("alice"));
        assert_eq!(jobs[0].exit_code, Some(1));
        assert_eq!(jobs[1].signal, Some(9));

        let change = StateChangeRow {
            at: 150,
            action: "drain".into(),
            reason: "hc: XID_79 gpu3".into(),
            outcome: "applied".into(),
            ..Default::default()
        };
        record_state_change(conn, &path, &change).unwrap();
        assert_eq!(
            state_changes_since(conn, &path, 0).unwrap()[0].reason,
            "hc: XID_79 gpu3"
        );

        assert_eq!(policy_state(conn, &path).unwrap(), None);
        save_policy_state(conn, &path, "{\"a\":1}").unwrap();
        save_policy_state(conn, &path, "{\"a\":2}").unwrap();
        assert_eq!(
            policy_state(conn, &path).unwrap().as_deref(),
            Some("{\"a\":2}")
        );

        let mut spool = spool_state(conn, &path, "e1", 50).unwrap();
        assert_eq!((spool.epoch.as_str(), spool.next_seq), ("e1", 1));
        spool.next_seq = 5;
        save_spool_state(conn, &path, &spool).unwrap();
        let again = spool_state(conn, &path, "other", 60).unwrap();
        assert_eq!(
            (again.epoch.as_str(), again.next_seq),
            ("e1", 5),
            "the epoch is fixed once"
        );
    }
}
