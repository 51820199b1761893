//! The spool export: after each run, the node appends what the head node
//! needs (non-ok findings, new events, job records, our state changes, and
//! the task exits the SPANK plugin left in the node-local file) to its file in
//! the spool directory, with the sequence numbers kept in the node database.

use crate::policy::StateChange;
use crate::record::RunReport;
use lemonade_config::Config;
use lemonade_spool::{Body, Record, TaskExit};
use lemonade_sql::node::NodeStore;
use lemonade_sql::node_jobs;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum ExportError {
    #[error(transparent)]
    Store(#[from] lemonade_sql::StoreError),
    #[error(transparent)]
    Spool(#[from] lemonade_spool::SpoolError),
}

/// The records of one run: its non-ok findings, its new events, our state changes.
pub fn bodies_of_run(report: &RunReport, changes: &[StateChange]) -> Vec<Body> {
    let mut out: Vec<Body> = report
        .findings
        .iter()
        .filter(|f| !f.is_ok())
        .map(|f| Body::Finding {
            check: f.check.clone(),
            entity: f.entity.clone(),
            code: f.code.clone(),
            severity: f.severity.as_str().to_string(),
            message: f.message.clone(),
            job_id: report.job_id.clone(),
        })
        .collect();
    out.extend(report.new_events.iter().map(|e| Body::Event {
        check: e.check_name.clone(),
        entity: e.entity.clone(),
        code: e.code.clone(),
        severity: e.severity.clone(),
        detail: e.detail.clone(),
    }));
    out.extend(changes.iter().map(|c| Body::StateChange {
        action: format!("{} ({})", c.action, c.outcome.as_str()),
        reason: c.reason.clone(),
    }));
    out
}

/// Appends `bodies` (and any new task exits) to the node's export. Does
/// nothing when `[spool] dir` is unset. Returns the number of records written.
pub fn export(
    config: &Config,
    node: &str,
    at: i64,
    bodies: Vec<Body>,
) -> Result<usize, ExportError> {
    let Some(dir) = &config.spool.dir else {
        return Ok(0);
    };
    let path = config.store.path.as_path();
    let store = NodeStore::open(path, Duration::from_millis(config.store.lock_wait_ms))?;
    let conn = store.connection();
    let epoch = format!(
        "{}-{}",
        chrono::Utc::now().timestamp_nanos_opt().unwrap_or(at),
        std::process::id()
    );
    let mut state = node_jobs::spool_state(conn, path, &epoch, at)?;
    let (exits, offset) = read_task_exits(&config.store.task_exits_path(), state.task_exits_offset);
    let mut timed: Vec<(i64, Body)> = bodies.into_iter().map(|b| (at, b)).collect();
    timed.extend(exits.into_iter().map(|e| {
        (
            e.at,
            Body::TaskExit {
                job_id: e.job_id,
                step_id: e.step_id,
                task_id: e.task_id,
                exit_code: e.exit_code,
                signal: e.signal,
                // Lines of an older plugin have none: the head node falls back to `at`.
                at_ms: e.at_ms,
            },
        )
    }));
    if timed.is_empty() && offset == state.task_exits_offset {
        return Ok(0);
    }
    let records: Vec<Record> = timed
        .into_iter()
        .enumerate()
        .map(|(i, (t, body))| Record {
            seq: state.next_seq + i as u64,
            epoch: state.epoch.clone(),
            node: node.to_string(),
            at: t,
            body,
        })
        .collect();
    lemonade_spool::write(dir, node, &records, config.spool.max_bytes)?;
    state.next_seq += records.len() as u64;
    state.exported_until = at;
    state.task_exits_offset = offset;
    node_jobs::save_spool_state(conn, path, &state)?;
    Ok(records.len())
}

/// Complete lines of the task-exits file after `offset`, and the new offset.
/// A file shorter than the offset was rotated: read it from the start.
/// Malformed lines are skipped (the plugin writes whole lines; a torn one is
/// a crash we cannot repair).
fn read_task_exits(path: &Path, offset: u64) -> (Vec<TaskExit>, u64) {
    let Ok(mut file) = std::fs::File::open(path) else {
        return (Vec::new(), 0);
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let start = if len < offset { 0 } else { offset };
    if file.seek(SeekFrom::Start(start)).is_err() {
        return (Vec::new(), offset);
    }
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_err() {
        return (Vec::new(), offset);
    }
    // A line still being written has no newline yet: leave it for next time.
    let complete = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    let exits = bytes[..complete]
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .filter_map(|l| serde_json::from_slice(l).ok())
        .collect();
    (exits, start + complete as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_bodies_and_task_exits_once_with_growing_seq() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.store.path = dir.path().join("state/node.db");
        config.spool.dir = Some(dir.path().join("spool"));
        let exit = TaskExit {
            at: 5,
            job_id: "9".into(),
            step_id: "0".into(),
            task_id: 1,
            exit_code: Some(1),
            signal: None,
            at_ms: Some(5_678),
        };
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        lemonade_spool::append_task_exit(&config.store.task_exits_path(), &exit).unwrap();
        let job = Body::JobStart {
            job_id: "9".into(),
            user: None,
        };
        assert_eq!(export(&config, "node1", 10, vec![job.clone()]).unwrap(), 2);
        assert_eq!(
            export(&config, "node1", 11, vec![]).unwrap(),
            0,
            "task exit taken once"
        );
        assert_eq!(export(&config, "node1", 12, vec![job]).unwrap(), 1);
        let (records, errors) = lemonade_spool::read(&lemonade_spool::node_file(
            config.spool.dir.as_ref().unwrap(),
            "node1",
        ))
        .unwrap();
        assert!(errors.is_empty());
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3]);
        assert_eq!(records[1].at, 5);
        assert!(matches!(
            records[1].body,
            Body::TaskExit {
                task_id: 1,
                at_ms: Some(5_678),
                ..
            }
        ));
    }

    #[test]
    fn task_exits_of_an_older_plugin_have_no_milliseconds() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = Config::default();
        config.store.path = dir.path().join("state/node.db");
        config.spool.dir = Some(dir.path().join("spool"));
        std::fs::create_dir_all(dir.path().join("state")).unwrap();
        std::fs::write(
            config.store.task_exits_path(),
            concat!(
                r#"{"at":5,"job_id":"9","step_id":"0","task_id":1,"signal":9}"#,
                "\n"
            ),
        )
        .unwrap();
        assert_eq!(export(&config, "node1", 10, vec![]).unwrap(), 1);
        let (records, errors) = lemonade_spool::read(&lemonade_spool::node_file(
            config.spool.dir.as_ref().unwrap(),
            "node1",
        ))
        .unwrap();
        assert!(errors.is_empty());
        assert_eq!(records[0].at, 5);
        assert!(matches!(
            records[0].body,
            Body::TaskExit {
                signal: Some(9),
                at_ms: None,
                ..
            }
        ));
    }
}
