//! `watch_detections`: what `lemon watch --live` called and did.

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection, OptionalExtension};

/// One detection and what was done about it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct DetectionRow {
    pub at: i64,
    pub job: String,
    pub node: String,
    pub detected_at: i64,
    /// JSON array.
    pub metrics: String,
    pub score: f64,
    pub action: String,
    pub reason: String,
    /// JSON.
    pub evidence: String,
    pub dry_run: bool,
}

/// Records a detection (false: already recorded). One row per job, node
/// and mode: a second detection is ignored, except that a node's call that
/// was only `reported` is replaced by what a later drain-tier call of it did.
pub fn insert(conn: &Connection, d: &DetectionRow) -> Result<bool> {
    let n = conn.execute(
        "INSERT INTO watch_detections
         (at, job, node, detected_at, metrics, score, action, reason, evidence, dry_run)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)
         ON CONFLICT (job, node, dry_run) DO UPDATE SET
             at = excluded.at, detected_at = excluded.detected_at,
             metrics = excluded.metrics, score = excluded.score,
             action = excluded.action, reason = excluded.reason,
             evidence = excluded.evidence
         WHERE watch_detections.action = 'reported' AND excluded.action != 'reported'",
        params![
            d.at,
            d.job,
            d.node,
            d.detected_at,
            d.metrics,
            d.score,
            d.action,
            d.reason,
            d.evidence,
            d.dry_run
        ],
    )?;
    Ok(n == 1)
}

/// The action already taken on this job's node in this mode, if any: a
/// restarted service must not drain twice.
pub fn action_of(
    conn: &Connection,
    job: &str,
    node: &str,
    dry_run: bool,
) -> Result<Option<String>> {
    Ok(conn
        .query_row(
            "SELECT action FROM watch_detections WHERE job = ?1 AND node = ?2 AND dry_run = ?3",
            params![job, node, dry_run],
            |r| r.get(0),
        )
        .optional()?)
}

/// The newest `limit` detections, newest first.
pub fn recent(conn: &Connection, limit: usize) -> Result<Vec<DetectionRow>> {
    let mut stmt = conn.prepare(
        "SELECT at, job, node, detected_at, metrics, score, action, reason, evidence, dry_run
         FROM watch_detections ORDER BY at DESC, id DESC LIMIT ?1",
    )?;
    let rows = stmt.query_map([limit as i64], |r| {
        Ok(DetectionRow {
            at: r.get(0)?,
            job: r.get(1)?,
            node: r.get(2)?,
            detected_at: r.get(3)?,
            metrics: r.get(4)?,
            score: r.get(5)?,
            action: r.get(6)?,
            reason: r.get(7)?,
            evidence: r.get(8)?,
            dry_run: r.get(9)?,
        })
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_detection_is_recorded_once_per_job_node_and_mode() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::db::open(
            &dir.path().join("lemon.db"),
            std::time::Duration::from_secs(1),
        )
        .unwrap();
        let mut row = DetectionRow {
            at: 100,
            job: "7".into(),
            node: "n2".into(),
            detected_at: 90,
            metrics: "[\"gpu_util\"]".into(),
            score: 9.5,
            action: "would_drain".into(),
            reason: "lemon: OUTLIER gpu_util job 7".into(),
            evidence: "[]".into(),
            dry_run: true,
        };
        assert!(insert(&conn, &row).unwrap());
        assert!(!insert(&conn, &row).unwrap());
        assert_eq!(action_of(&conn, "7", "n2", false).unwrap(), None);
        row.dry_run = false;
        row.action = "drained".into();
        row.at = 200;
        assert!(insert(&conn, &row).unwrap());
        assert_eq!(
            action_of(&conn, "7", "n2", false).unwrap().as_deref(),
            Some("drained")
        );
        let all = recent(&conn, 10).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0], row);
    }

    #[test]
    fn a_reported_call_is_replaced_by_the_drain_that_followed_it_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::db::open(
            &dir.path().join("lemon.db"),
            std::time::Duration::from_secs(1),
        )
        .unwrap();
        let mut row = DetectionRow {
            at: 100,
            job: "7".into(),
            node: "n2".into(),
            detected_at: 90,
            metrics: "[\"gpu_util\"]".into(),
            score: 9.5,
            action: "reported".into(),
            reason: "lemon: j7 gutl OUTLIER gpu_util".into(),
            evidence: "[]".into(),
            dry_run: false,
        };
        assert!(insert(&conn, &row).unwrap());
        assert!(!insert(&conn, &row).unwrap(), "a second report is ignored");
        row.action = "drained".into();
        row.at = 300;
        assert!(insert(&conn, &row).unwrap());
        assert_eq!(
            action_of(&conn, "7", "n2", false).unwrap().as_deref(),
            Some("drained")
        );
        row.action = "reported".into();
        assert!(
            !insert(&conn, &row).unwrap(),
            "a drain is never overwritten"
        );
        let all = recent(&conn, 10).unwrap();
        assert_eq!(
            (all.len(), all[0].at, all[0].action.as_str()),
            (1, 300, "drained")
        );
    }
}
