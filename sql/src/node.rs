//! Queries of the node database (`node.db`).

use crate::{open, Schema, StoreError};
use lemonade_config::Severity;
use rusqlite::types::Type;
use rusqlite::{params, Connection, OptionalExtension, Row};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A run as stored.
#[derive(Debug, Clone, PartialEq)]
pub struct RunRow {
    pub id: i64,
    pub started_at: i64,
    pub duration_ms: i64,
    pub trigger: String,
    pub profile: String,
    pub job_id: Option<String>,
    pub worst: Severity,
    pub exit_code: i32,
}

/// A finding as stored.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FindingRow {
    pub check_name: String,
    pub entity: String,
    pub pci_bus_id: Option<String>,
    pub uuid: Option<String>,
    pub code: String,
    pub severity: Severity,
    pub expected: Option<String>,
    pub actual: Option<String>,
    pub action: String,
    pub message: String,
}

/// Something that happened once (an XID line): recorded once, whatever the number of runs that see it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct EventRow {
    pub check_name: String,
    pub entity: String,
    pub code: String,
    pub severity: Severity,
    pub occurred_at: i64,
    pub boot_id: String,
    pub seq: i64,
    pub detail: String,
}

/// Everything one run writes, written in one transaction.
#[derive(Debug, Clone, Default)]
pub struct RunRecord {
    pub started_at: i64,
    pub duration_ms: i64,
    pub trigger: String,
    pub profile: String,
    pub job_id: Option<String>,
    pub worst: Severity,
    pub exit_code: i32,
    pub findings: Vec<FindingRow>,
    /// New state per check (JSON text). Checks not listed keep their old state.
    pub states: Vec<(String, String)>,
    pub events: Vec<EventRow>,
}

/// A severity column, stored as its lowercase name (`ok` ... `down`, the
/// spelling of the JSON and spool forms). Anything else is an error naming
/// the column, never a guess.
fn severity(row: &Row<'_>, column: usize) -> rusqlite::Result<Severity> {
    let text: String = row.get(column)?;
    text.parse().map_err(|message: String| {
        rusqlite::Error::FromSqlConversionFailure(
            column,
            Type::Text,
            format!(
                "column {}: {message}",
                row.as_ref().column_name(column).unwrap_or("?")
            )
            .into(),
        )
    })
}

/// Inserts findings of run `run_id`; shared by [`NodeStore::record_run`] and
/// the policy, which adds its own findings to a run after it.
pub(crate) fn insert_findings(
    conn: &Connection,
    run_id: i64,
    findings: &[FindingRow],
) -> rusqlite::Result<()> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO findings (run_id, check_name, entity, pci_bus_id, uuid, code, severity, expected, actual, action, message)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    )?;
    for f in findings {
        insert.execute(params![
            run_id,
            f.check_name,
            f.entity,
            f.pci_bus_id,
            f.uuid,
            f.code,
            f.severity.as_str(),
            f.expected,
            f.actual,
            f.action,
            f.message
        ])?;
    }
    Ok(())
}

/// The most rows of one kind (runs, events, jobs, state changes) that one
/// [`NodeStore::prune`] deletes.
pub const PRUNE_BATCH: i64 = 500;

/// The node database.
pub struct NodeStore {
    conn: Connection,
    path: PathBuf,
}

impl NodeStore {
    pub fn open(path: &Path, busy_timeout: Duration) -> Result<NodeStore, StoreError> {
        Ok(NodeStore {
            conn: open(path, Schema::Node, busy_timeout)?,
            path: path.to_path_buf(),
        })
    }

    /// Opens an existing database for reading only: `None` when there is
    /// none. Creates nothing (no directory, file, WAL switch or migration),
    /// for runs that must leave the node's database as it is (`--no-record`).
    pub fn open_read_only(
        path: &Path,
        busy_timeout: Duration,
    ) -> Result<Option<NodeStore>, StoreError> {
        if !path.exists() {
            return Ok(None);
        }
        let wrap = |source| StoreError::Sqlite {
            path: path.to_path_buf(),
            source,
        };
        let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY
            | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX
            | rusqlite::OpenFlags::SQLITE_OPEN_URI;
        let conn = Connection::open_with_flags(path, flags).map_err(wrap)?;
        conn.busy_timeout(busy_timeout).map_err(wrap)?;
        Ok(Some(NodeStore {
            conn,
            path: path.to_path_buf(),
        }))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The raw connection, for the queries of later components (jobs, state changes).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    fn wrap(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        move |source| StoreError::Sqlite {
            path: self.path.clone(),
            source,
        }
    }

    /// Every check's saved state (JSON text), by check name.
    pub fn check_states(&self) -> Result<HashMap<String, String>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached("SELECT check_name, state FROM check_state")
            .map_err(self.wrap())?;
        let rows = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))
            .map_err(self.wrap())?;
        rows.collect::<Result<_, _>>().map_err(self.wrap())
    }

    /// Writes a run, its findings, the new check states and new events atomically.
    /// Events already recorded (same check, boot, sequence, code, entity) are skipped.
    /// Returns the run id and, per event of `run.events`, whether it was new.
    pub fn record_run(&mut self, run: &RunRecord) -> Result<(i64, Vec<bool>), StoreError> {
        let path = self.path.clone();
        let wrap = |source| StoreError::Sqlite {
            path: path.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(wrap)?;
        tx.execute(
            "INSERT INTO runs (started_at, duration_ms, trigger, profile, job_id, worst, exit_code)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![
                run.started_at,
                run.duration_ms,
                run.trigger,
                run.profile,
                run.job_id,
                run.worst.as_str(),
                run.exit_code
            ],
        )
        .map_err(wrap)?;
        let run_id = tx.last_insert_rowid();
        insert_findings(&tx, run_id, &run.findings).map_err(wrap)?;
        {
            let mut state = tx
                .prepare_cached(
                    "INSERT INTO check_state (check_name, state, updated_at) VALUES (?1, ?2, ?3)
                     ON CONFLICT(check_name) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                )
                .map_err(wrap)?;
            for (check, json) in &run.states {
                state
                    .execute(params![check, json, run.started_at])
                    .map_err(wrap)?;
            }
        }
        let mut new_events = Vec::with_capacity(run.events.len());
        {
            let mut event = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO events (check_name, entity, code, severity, occurred_at, boot_id, seq, detail, recorded_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                )
                .map_err(wrap)?;
            for e in &run.events {
                let inserted = event
                    .execute(params![
                        e.check_name,
                        e.entity,
                        e.code,
                        e.severity.as_str(),
                        e.occurred_at,
                        e.boot_id,
                        e.seq,
                        e.detail,
                        run.started_at
                    ])
                    .map_err(wrap)?;
                new_events.push(inserted == 1);
            }
        }
        tx.commit().map_err(wrap)?;
        Ok((run_id, new_events))
    }

    /// Deletes history older than `before` (unix seconds): runs with their
    /// findings, events, jobs and state changes, at most [`PRUNE_BATCH`] rows
    /// of each a call. A call per run catches up with any backlog (a
    /// shortened retention) in a few runs without one long write holding the
    /// lock. The checks' state (cursors, counters), the policy's memory and
    /// the export's numbering are not history and are kept. Returns the rows
    /// deleted, findings not counted.
    pub fn prune(&self, before: i64) -> Result<usize, StoreError> {
        const OLDEST_FIRST: [&str; 4] = [
            "DELETE FROM runs WHERE id IN
               (SELECT id FROM runs WHERE started_at < ?1 ORDER BY started_at LIMIT ?2)",
            "DELETE FROM events WHERE id IN
               (SELECT id FROM events WHERE occurred_at < ?1 ORDER BY occurred_at LIMIT ?2)",
            "DELETE FROM jobs WHERE job_id IN
               (SELECT job_id FROM jobs WHERE coalesce(ended_at, started_at, 0) < ?1 LIMIT ?2)",
            "DELETE FROM state_changes WHERE id IN
               (SELECT id FROM state_changes WHERE at < ?1 ORDER BY at LIMIT ?2)",
        ];
        let mut deleted = 0;
        for sql in OLDEST_FIRST {
            deleted += self
                .conn
                .prepare_cached(sql)
                .and_then(|mut s| s.execute(params![before, PRUNE_BATCH]))
                .map_err(self.wrap())?;
        }
        Ok(deleted)
    }

    /// Runs since `since` (unix seconds), newest first, at most `limit`.
    pub fn runs_since(&self, since: i64, limit: usize) -> Result<Vec<RunRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT id, started_at, duration_ms, trigger, profile, job_id, worst, exit_code
                 FROM runs WHERE started_at >= ?1 ORDER BY started_at DESC, id DESC LIMIT ?2",
            )
            .map_err(self.wrap())?;
        let rows = stmt
            .query_map(params![since, limit as i64], |r| {
                Ok(RunRow {
                    id: r.get(0)?,
                    started_at: r.get(1)?,
                    duration_ms: r.get(2)?,
                    trigger: r.get(3)?,
                    profile: r.get(4)?,
                    job_id: r.get(5)?,
                    worst: severity(r, 6)?,
                    exit_code: r.get(7)?,
                })
            })
            .map_err(self.wrap())?;
        rows.collect::<Result<_, _>>().map_err(self.wrap())
    }

    /// The findings of one run.
    pub fn findings_of(&self, run_id: i64) -> Result<Vec<FindingRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT check_name, entity, pci_bus_id, uuid, code, severity, expected, actual, action, message
                 FROM findings WHERE run_id = ?1 ORDER BY id",
            )
            .map_err(self.wrap())?;
        let rows = stmt
            .query_map([run_id], |r| {
                Ok(FindingRow {
                    check_name: r.get(0)?,
                    entity: r.get(1)?,
                    pci_bus_id: r.get(2)?,
                    uuid: r.get(3)?,
                    code: r.get(4)?,
                    severity: severity(r, 5)?,
                    expected: r.get(6)?,
                    actual: r.get(7)?,
                    action: r.get(8)?,
                    message: r.get(9)?,
                })
            })
            .map_err(self.wrap())?;
        rows.collect::<Result<_, _>>().map_err(self.wrap())
    }

    /// Events since `since` (unix seconds), oldest first.
    pub fn events_since(&self, since: i64) -> Result<Vec<EventRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare_cached(
                "SELECT check_name, entity, code, severity, occurred_at, boot_id, seq, detail
                 FROM events WHERE occurred_at >= ?1 ORDER BY occurred_at, id",
            )
            .map_err(self.wrap())?;
        let rows = stmt
            .query_map([since], |r| {
                Ok(EventRow {
                    check_name: r.get(0)?,
                    entity: r.get(1)?,
                    code: r.get(2)?,
                    severity: severity(r, 3)?,
                    occurred_at: r.get(4)?,
                    boot_id: r.get(5)?,
                    seq: r.get(6)?,
                    detail: r.get(7)?,
                })
            })
            .map_err(self.wrap())?;
        rows.collect::<Result<_, _>>().map_err(self.wrap())
    }

    /// The latest run, if any.
    pub fn last_run(&self) -> Result<Option<RunRow>, StoreError> {
        Ok(self.runs_since(i64::MIN, 1)?.into_iter().next())
    }

    /// Saves the state kept under `key` (JSON text) outside a run: what the
    /// export last sent, for instance.
    pub fn set_check_state(&self, key: &str, state: &str, at: i64) -> Result<(), StoreError> {
        self.conn
            .execute(
                "INSERT INTO check_state (check_name, state, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT(check_name) DO UPDATE SET state = excluded.state, updated_at = excluded.updated_at",
                rusqlite::params![key, state, at],
            )
            .map(|_| ())
            .map_err(self.wrap())
    }

    /// State of one check (JSON text).
    pub fn check_state(&self, check: &str) -> Result<Option<String>, StoreError> {
        self.conn
            .query_row(
                "SELECT state FROM check_state WHERE check_name = ?1",
                [check],
                |r| r.get(0),
            )
            .optional()
            .map_err(self.wrap())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(started_at: i64, events: Vec<EventRow>) -> RunRecord {
        RunRecord {
            started_at,
            duration_ms: 3,
            trigger: "manual".into(),
            profile: "full".into(),
            worst: Severity::Ok,
            findings: vec![FindingRow {
                check_name: "xid".into(),
                code: "OK".into(),
                ..Default::default()
            }],
            states: vec![("xid".into(), "{\"seq\":4}".into())],
            events,
            ..Default::default()
        }
    }

    #[test]
    fn records_runs_states_and_events_once() {
        let dir = tempfile::tempdir().unwrap();
        let mut store =
            NodeStore::open(&dir.path().join("node.db"), Duration::from_millis(100)).unwrap();
        let xid = EventRow {
            check_name: "xid".into(),
            code: "XID_79".into(),
            boot_id: "b".into(),
            seq: 7,
            ..Default::default()
        };
        let (_, new) = store.record_run(&run(100, vec![xid.clone()])).unwrap();
        assert_eq!(new, [true]);
        let (_, new) = store.record_run(&run(200, vec![xid])).unwrap();
        assert_eq!(new, [false], "an event seen twice is recorded once");
        assert_eq!(store.check_states().unwrap()["xid"], "{\"seq\":4}");
        assert_eq!(store.runs_since(0, 10).unwrap().len(), 2);
        assert_eq!(store.events_since(0).unwrap().len(), 1);
        assert_eq!(store.prune(150).unwrap(), 2, "one run and the event at t=0");
        assert_eq!(store.runs_since(0, 10).unwrap().len(), 1);
    }

    #[test]
    fn retention_deletes_old_history_in_batches_and_keeps_the_checks_state() {
        let dir = tempfile::tempdir().unwrap();
        let mut store =
            NodeStore::open(&dir.path().join("node.db"), Duration::from_millis(100)).unwrap();
        let old = PRUNE_BATCH as usize + 20;
        for t in 0..old as i64 + 3 {
            store.record_run(&run(t, vec![])).unwrap();
        }
        let count = |table: &str| -> i64 {
            store
                .conn
                .query_row(&format!("SELECT count(*) FROM {table}"), [], |r| r.get(0))
                .unwrap()
        };
        let before = old as i64;
        let (conn, path) = (&store.conn, &store.path);
        crate::node_jobs::job_started(conn, path, "1", None, 0).unwrap();
        crate::node_jobs::job_ended(conn, path, "1", 1, Some(0), None).unwrap();
        crate::node_jobs::job_started(conn, path, "2", None, 5).unwrap();
        crate::node_jobs::job_ended(conn, path, "2", before, Some(0), None).unwrap();
        for at in [0, before] {
            let change = crate::node_jobs::StateChangeRow {
                at,
                action: "drain".into(),
                ..Default::default()
            };
            crate::node_jobs::record_state_change(conn, path, &change).unwrap();
        }
        assert_eq!(store.prune(before).unwrap(), PRUNE_BATCH as usize + 2);
        assert_eq!(count("runs"), 23, "one batch a call");
        assert_eq!(
            store.prune(before).unwrap(),
            20,
            "the rest on the next call"
        );
        assert_eq!(store.prune(before).unwrap(), 0);
        assert_eq!(count("runs"), 3, "the window is kept");
        assert_eq!(count("findings"), 3, "findings go with their runs");
        assert_eq!(count("jobs"), 1, "a job that ended in the window is kept");
        assert_eq!(count("state_changes"), 1);
        assert_eq!(store.check_states().unwrap()["xid"], "{\"seq\":4}");
    }

    #[test]
    fn severities_are_stored_by_name_and_read_back_typed() {
        let dir = tempfile::tempdir().unwrap();
        let mut store =
            NodeStore::open(&dir.path().join("node.db"), Duration::from_millis(100)).unwrap();
        let mut record = run(100, vec![]);
        record.worst = Severity::Drain;
        record.findings[0].severity = Severity::Drain;
        record.events = vec![EventRow {
            check_name: "xid".into(),
            code: "XID_79".into(),
            severity: Severity::Down,
            ..Default::default()
        }];
        let (run_id, _) = store.record_run(&record).unwrap();
        let stored: (String, String) = store
            .connection()
            .query_row(
                "SELECT r.worst, f.severity FROM runs r JOIN findings f ON f.run_id = r.id",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        assert_eq!(stored, ("drain".to_string(), "drain".to_string()));
        assert_eq!(store.last_run().unwrap().unwrap().worst, Severity::Drain);
        assert_eq!(
            store.findings_of(run_id).unwrap()[0].severity,
            Severity::Drain
        );
        assert_eq!(store.events_since(0).unwrap()[0].severity, Severity::Down);
    }

    #[test]
    fn a_stored_severity_we_do_not_know_is_an_error_naming_the_column() {
        let dir = tempfile::tempdir().unwrap();
        let mut store =
            NodeStore::open(&dir.path().join("node.db"), Duration::from_millis(100)).unwrap();
        let (run_id, _) = store.record_run(&run(100, vec![])).unwrap();
        store
            .connection()
            .execute("UPDATE findings SET severity = 'critical'", [])
            .unwrap();
        let err = store.findings_of(run_id).unwrap_err().to_string();
        assert!(
            err.contains("severity") && err.contains("critical"),
            "{err}"
        );
    }

    #[test]
    fn reopening_keeps_the_schema() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.db");
        drop(NodeStore::open(&path, Duration::from_millis(100)).unwrap());
        let store = NodeStore::open(&path, Duration::from_millis(100)).unwrap();
        assert!(store.last_run().unwrap().is_none());
    }

    #[test]
    fn a_read_only_open_creates_nothing_and_reads_what_is_there() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state/node.db");
        let none = NodeStore::open_read_only(&path, Duration::from_millis(100)).unwrap();
        assert!(none.is_none());
        assert!(!dir.path().join("state").exists(), "no directory made");
        NodeStore::open(&path, Duration::from_millis(100))
            .unwrap()
            .record_run(&run(100, vec![]))
            .unwrap();
        let store = NodeStore::open_read_only(&path, Duration::from_millis(100))
            .unwrap()
            .expect("the database");
        assert_eq!(store.check_states().unwrap()["xid"], "{\"seq\":4}");
        assert!(store.connection().execute("DELETE FROM runs", []).is_err());
    }

    #[test]
    fn corrupt_file_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.db");
        std::fs::write(
            &path,
            b"this is not a database, just bytes that are long enough to look like a header",
        )
        .unwrap();
        assert!(NodeStore::open(&path, Duration::from_millis(100)).is_err());
    }
}
