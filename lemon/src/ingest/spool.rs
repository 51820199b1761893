//! Node health from the compute nodes' spool exports (`<dir>/<node>.jsonl`).
//!
//! Read incrementally per node: records with a `seq` above the last one taken
//! from the same `epoch`. A new epoch (the node database was recreated) is
//! read from its start. Each node's file is one transaction together with its
//! progress, so a crash re-reads at most that file, and (node, epoch, seq) is
//! the key, so nothing is stored twice.

use super::IngestStats;
use crate::db::spool::HealthColumns as Flat;
use crate::db::{self, NodeIds};
use crate::error::{LemonError, Result};
use lemonade_spool::{Body, Record};
use lemonade_sql::rusqlite::Connection;
use std::path::Path;

/// Ingests every `*.jsonl` export in `dir`.
pub fn ingest_dir(conn: &mut Connection, dir: &Path) -> Result<IngestStats> {
    let mut stats = IngestStats::default();
    let entries = std::fs::read_dir(dir).map_err(|e| LemonError::io(dir, e))?;
    let mut files: Vec<_> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "jsonl")
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    files.sort();
    let mut nodes = NodeIds::load(conn)?;
    for path in files {
        let held = known_progress(conn, &nodes, &path)?;
        let after = held.as_ref().map(|(epoch, seq)| (epoch.as_str(), *seq));
        let (records, errors) = match lemonade_spool::read_after(&path, after) {
            Ok(r) => r,
            // The node may be rewriting it right now (rename is atomic, but the
            // file may vanish between listing and reading): next run.
            Err(e) => {
                stats.malformed(path.display().to_string(), e.to_string());
                continue;
            }
        };
        for e in errors {
            stats.malformed(path.display().to_string(), e.to_string());
        }
        stats.rows_read += records.len() as u64;
        stats.inserted += ingest_records(conn, &mut nodes, &records)?;
    }
    let now = chrono::Utc::now().timestamp();
    db::samples::prune(
        conn,
        now - SAMPLES_KEPT_AFTER_END,
        now - SAMPLES_KEPT_AT_MOST,
    )?;
    db::validations::prune(conn, now - VALIDATIONS_KEPT)?;
    Ok(stats)
}

/// What lemon.db already holds of the node whose export `path` is
/// (`<node>.jsonl`): its epoch and last seq, so that re-reading a file
/// parses only its new lines.
fn known_progress(
    conn: &Connection,
    nodes: &NodeIds,
    path: &Path,
) -> Result<Option<(String, u64)>> {
    let Some(node) = path
        .file_stem()
        .and_then(|s| s.to_str())
        .and_then(|n| nodes.get(n))
    else {
        return Ok(None);
    };
    Ok(db::spool::progress(conn, node)?
        .and_then(|(epoch, seq)| u64::try_from(seq).ok().map(|seq| (epoch, seq))))
}

/// Validation results are kept a year (each node's latest for ever): far
/// more than the bands learn from (`[validate] window_days`), enough to
/// look back at a node's history.
pub const VALIDATIONS_KEPT: i64 = 365 * 86_400;

/// How long a job's samples stay after its end on the node: long enough for
/// a `lemon watch` poll that is still looking at it, and no longer.
pub const SAMPLES_KEPT_AFTER_END: i64 = 3600;
/// No sample stays longer than this, running job or not: `lemon watch`
/// keeps what it learned of a job itself, and a week of 10 s samples of a
/// 500-node cluster would be hundreds of millions of rows. As long as the
/// nodes keep their chunks (`healthcheck sample`).
pub const SAMPLES_KEPT_AT_MOST: i64 = 2 * 3600;

/// Stores one node file's new records; returns how many were new.
pub fn ingest_records(
    conn: &mut Connection,
    nodes: &mut NodeIds,
    records: &[Record],
) -> Result<u64> {
    let Some(first) = records.first() else {
        return Ok(0);
    };
    let tx = conn.transaction()?;
    let node = nodes.get_or_insert(&tx, &first.node)?;
    let progress = db::spool::progress(&tx, node)?;
    let mut inserted = 0;
    let mut last = None;
    {
        for r in records {
            last = Some((r.epoch.clone(), r.seq as i64));
            if let Some((epoch, seq)) = &progress {
                if *epoch == r.epoch && r.seq as i64 <= *seq {
                    continue;
                }
            }
            // A file holds one node's records; a stray record naming another
            // node is still stored under the name it gives.
            let rec_node = if r.node == first.node {
                node
            } else {
                nodes.get_or_insert(&tx, &r.node)?
            };
            // Samples go to their own table, not `health`: many per record,
            // and pruned once the job has ended (`db::samples::prune`).
            if let Body::Samples { job_id, samples } = &r.body {
                inserted += db::samples::insert(&tx, rec_node, job_id, samples)?;
                continue;
            }
            // Validation results too (issue 31): `validations`, one row per
            // run and its metrics beside, what `lemon run` learns from.
            if let Body::Validation { .. } = &r.body {
                inserted += store_validation(&tx, rec_node, r)?;
                continue;
            }
            let f = Flat::of(&r.body);
            let new = db::spool::insert(&tx, rec_node, &r.epoch, r.seq as i64, r.at, &f)? as u64;
            inserted += new;
            if new == 1 && f.kind == "state_change" && f.code == Some(HANDED_OVER) {
                super::tickets::open_for_hand_over(&tx, rec_node, r.at, f.detail.unwrap_or(""))?;
            }
            if new == 1 {
                store_trace(&tx, rec_node, r)?;
            }
        }
    }
    if let Some((epoch, seq)) = last {
        db::spool::set_progress(&tx, node, &epoch, seq)?;
    }
    tx.commit()?;
    Ok(inserted)
}

/// Stores a validation record in `validations` (issue 31).
fn store_validation(conn: &Connection, node: i64, r: &Record) -> Result<u64> {
    let Body::Validation {
        job_id,
        sku,
        metrics,
        passed,
        failing,
        criteria,
    } = &r.body
    else {
        return Ok(0);
    };
    let metrics: Vec<(&str, f64)> = (metrics.iter())
        .map(|m| (m.metric.as_str(), m.value))
        .collect();
    db::validations::insert(
        conn,
        &db::validations::NewValidation {
            node,
            epoch: &r.epoch,
            seq: r.seq as i64,
            at: r.at,
            job_id: job_id.as_deref().unwrap_or(""),
            sku,
            passed: *passed,
            failing,
            criteria,
            metrics: &metrics,
        },
    )
}

/// Keeps a flight-recorder summary (issue 32) beside its `health` row,
/// which holds only the job, the rank and the error.
fn store_trace(conn: &Connection, node: i64, r: &Record) -> Result<()> {
    let Body::FlightRecorder {
        job_id,
        rank,
        summary,
        error,
    } = &r.body
    else {
        return Ok(());
    };
    let summary = summary.as_ref().map(|v| v.to_string());
    db::traces::store(
        conn,
        &db::traces::NewTrace {
            job_id,
            node,
            rank: *rank,
            at: r.at,
            summary: summary.as_deref(),
            error: error.as_deref(),
        },
    )
}

/// The state change of a node's remediation handing the node to a human
/// (`healthcheck/src/repair`): it opens a repair ticket.
const HANDED_OVER: &str = "hand-over (applied)";

impl<'a> Flat<'a> {
    fn of(body: &'a Body) -> Flat<'a> {
        match body {
            Body::Finding {
                check,
                entity,
                code,
                severity,
                message,
                job_id,
            } => Flat {
                kind: "finding",
                check: Some(check),
                entity: Some(entity),
                code: Some(code),
                severity: Some(severity.as_str()),
                job_id: job_id.as_deref(),
                detail: Some(message),
                ..Flat::default()
            },
            Body::Event {
                check,
                entity,
                code,
                severity,
                detail,
            } => Flat {
                kind: "event",
                check: Some(check),
                entity: Some(entity),
                code: Some(code),
                severity: Some(severity.as_str()),
                detail: Some(detail),
                ..Flat::default()
            },
            Body::JobStart { job_id, user } => Flat {
                kind: "job_start",
                job_id: Some(job_id),
                detail: user.as_deref(),
                ..Flat::default()
            },
            Body::JobEnd {
                job_id,
                exit_code,
                signal,
            } => Flat {
                kind: "job_end",
                job_id: Some(job_id),
                exit_code: *exit_code,
                signal: *signal,
                ..Flat::default()
            },
            Body::TaskExit {
                job_id,
                step_id,
                task_id,
                exit_code,
                signal,
                at_ms,
            } => Flat {
                kind: "task_exit",
                job_id: Some(job_id),
                step_id: Some(step_id),
                task_id: Some(*task_id),
                exit_code: *exit_code,
                signal: *signal,
                at_ms: *at_ms,
                ..Flat::default()
            },
            Body::StateChange { action, reason } => Flat {
                kind: "state_change",
                code: Some(action),
                detail: Some(reason),
                ..Flat::default()
            },
            Body::Inventory {
                check,
                entity,
                value,
            } => Flat {
                kind: "inventory",
                check: Some(check),
                entity: Some(entity),
                detail: Some(value),
                ..Flat::default()
            },
            Body::FlightRecorder {
                job_id,
                rank,
                error,
                ..
            } => Flat {
                kind: "flight_recorder",
                job_id: Some(job_id),
                task_id: *rank,
                detail: error.as_deref(),
                ..Flat::default()
            },
            // Stored by `ingest_records` in `samples`; never a `health` row.
            Body::Samples { job_id, .. } => Flat {
                kind: "samples",
                job_id: Some(job_id),
                ..Flat::default()
            },
            // Stored by the validation ingest (issue 31), never a `health` row.
            Body::Validation { job_id, .. } => Flat {
                kind: "validation",
                job_id: job_id.as_deref(),
                ..Flat::default()
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rec(seq: u64, epoch: &str) -> Record {
        Record {
            seq,
            epoch: epoch.into(),
            node: "gpu001".into(),
            at: 1000 + seq as i64,
            body: Body::Event {
                check: "xid".into(),
                entity: "gpu3".into(),
                code: "XID_79".into(),
                severity: lemonade_spool::Severity::Down,
                detail: "fell off the bus".into(),
            },
        }
    }

    #[test]
    fn reads_incrementally_and_restarts_on_a_new_epoch() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let mut conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        lemonade_spool::write(&spool, "gpu001", &[rec(1, "a"), rec(2, "a")], 1 << 20).unwrap();
        assert_eq!(ingest_dir(&mut conn, &spool).unwrap().inserted, 2);
        assert_eq!(ingest_dir(&mut conn, &spool).unwrap().inserted, 0);
        lemonade_spool::write(&spool, "gpu001", &[rec(3, "a"), rec(1, "b")], 1 << 20).unwrap();
        assert_eq!(ingest_dir(&mut conn, &spool).unwrap().inserted, 2);
        let n = db::spool::count(&conn).unwrap();
        assert_eq!(n, 4);
    }

    #[test]
    fn task_exits_keep_their_milliseconds_when_sent() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let mut conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let exit = |seq: u64, at_ms: Option<i64>| Record {
            body: Body::TaskExit {
                job_id: "7".into(),
                step_id: "0".into(),
                task_id: seq as u32,
                exit_code: Some(1),
                signal: None,
                at_ms,
            },
            ..rec(seq, "a")
        };
        let records = [rec(1, "a"), exit(2, Some(1_002_345)), exit(3, None)];
        lemonade_spool::write(&spool, "gpu001", &records, 1 << 20).unwrap();
        assert_eq!(ingest_dir(&mut conn, &spool).unwrap().inserted, 3);
        let rows = db::spool::seqs_and_ms(&conn).unwrap();
        assert_eq!(rows, [(1, None), (2, Some(1_002_345)), (3, None)]);
    }

    fn chunk(seq: u64, node: &str, job: &str, at: i64) -> Record {
        Record {
            seq,
            epoch: "a".into(),
            node: node.into(),
            at,
            body: Body::Samples {
                job_id: job.into(),
                samples: vec![
                    (at - 10, "gpu_util".into(), 97.0),
                    (at, "gpu_util".into(), 96.0),
                    (at, "ib_tx".into(), 2.5e10),
                ],
            },
        }
    }

    #[test]
    fn samples_are_stored_once_read_back_per_job_and_pruned_after_the_job_ends() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let mut conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let now = chrono::Utc::now().timestamp();
        lemonade_spool::write(
            &spool,
            "gpu001",
            &[chunk(1, "gpu001", "7", now - 20)],
            1 << 20,
        )
        .unwrap();
        lemonade_spool::write(
            &spool,
            "gpu002",
            &[chunk(1, "gpu002", "7", now - 20)],
            1 << 20,
        )
        .unwrap();
        lemonade_spool::write(&spool, "gpu002", &[chunk(2, "gpu002", "8", now)], 1 << 20).unwrap();
        // Three hours old: stored, and gone by age at once.
        let old = chunk(1, "gpu003", "9", now - 3 * 3600);
        lemonade_spool::write(&spool, "gpu003", &[old], 1 << 20).unwrap();
        assert_eq!(ingest_dir(&mut conn, &spool).unwrap().inserted, 12);
        assert!(db::samples::recent(&conn, "9", &[], 0).unwrap().is_empty());
        assert_eq!(
            ingest_dir(&mut conn, &spool).unwrap().inserted,
            0,
            "read once"
        );
        assert_eq!(db::spool::count(&conn).unwrap(), 0, "no health rows");

        let all = db::samples::recent(&conn, "7", &[], now - 20).unwrap();
        let seen: Vec<_> = all
            .iter()
            .map(|s| (s.node.as_str(), s.metric.as_str(), s.value))
            .collect();
        assert_eq!(
            seen,
            [
                ("gpu001", "gpu_util", 96.0),
                ("gpu001", "ib_tx", 2.5e10),
                ("gpu002", "gpu_util", 96.0),
                ("gpu002", "ib_tx", 2.5e10)
            ]
        );
        assert!(all.iter().all(|s| s.job == "7" && s.time == now - 20));
        let one = db::samples::recent(&conn, "7", &["gpu002"], 0).unwrap();
        assert_eq!(one.len(), 3);
        assert_eq!(one[0].as_sample().node, "gpu002");

        // Job 7 ended on gpu001 80 minutes ago; job 8 ended just now.
        let end = |seq: u64, job: &str, at: i64| Record {
            at,
            body: Body::JobEnd {
                job_id: job.into(),
                exit_code: Some(0),
                signal: None,
            },
            ..rec(seq, "a")
        };
        lemonade_spool::write(&spool, "gpu001", &[end(2, "7", now - 4800)], 1 << 20).unwrap();
        lemonade_spool::write(&spool, "gpu002", &[end(3, "8", now)], 1 << 20).unwrap();
        ingest_dir(&mut conn, &spool).unwrap();
        assert!(db::samples::recent(&conn, "7", &["gpu001"], 0)
            .unwrap()
            .is_empty());
        assert_eq!(
            db::samples::recent(&conn, "7", &["gpu002"], 0)
                .unwrap()
                .len(),
            3
        );
        assert_eq!(db::samples::recent(&conn, "8", &[], 0).unwrap().len(), 3);
        assert_eq!(db::samples::count(&conn).unwrap(), 6);
    }

    #[test]
    fn validation_records_go_to_their_own_table_once_with_their_metrics() {
        let dir = tempfile::tempdir().unwrap();
        let spool = dir.path().join("spool");
        let mut conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let result = Record {
            body: Body::Validation {
                job_id: Some("70".into()),
                sku: "H100x8".into(),
                metrics: vec![lemonade_spool::ValidationMetric {
                    metric: "avg_busbw".into(),
                    value: 312.5,
                }],
                passed: false,
                failing: vec!["avg_busbw 312.5<371 GB/s (learned)".into()],
                criteria: "learned 1700000000".into(),
            },
            ..rec(2, "a")
        };
        lemonade_spool::write(&spool, "gpu001", &[rec(1, "a"), result], 1 << 20).unwrap();
        assert_eq!(ingest_dir(&mut conn, &spool).unwrap().inserted, 2);
        assert_eq!(ingest_dir(&mut conn, &spool).unwrap().inserted, 0);
        assert_eq!(
            db::spool::count(&conn).unwrap(),
            1,
            "only the event is a health row"
        );
        let last = db::validations::last_per_node(&conn).unwrap();
        assert_eq!(last["gpu001"].job_id, "70");
        assert_eq!(
            last["gpu001"].failing,
            ["avg_busbw 312.5<371 GB/s (learned)"]
        );
        let metrics = db::validations::latest_results(&conn, 0, false).unwrap();
        assert_eq!(metrics.len(), 1);
        assert_eq!(
            (metrics[0].metric.as_str(), metrics[0].value),
            ("avg_busbw", 312.5)
        );
    }
}
