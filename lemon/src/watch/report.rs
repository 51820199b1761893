//! `lemon report`'s section of `lemon watch --live`'s detections.

use crate::db::detections::DetectionRow;
use crate::db::fmt_time;
use crate::document::{Section, Table};

/// Detections shown by `lemon report`.
pub const REPORT_DETECTIONS: usize = 20;

/// The newest detections: when, job, node, what was done, metrics, score.
pub fn section(rows: &[DetectionRow]) -> Section<'static> {
    let table = Table::new("watch detections")
        .left("when", 0)
        .left("job", 12)
        .left("node", 16)
        .left("action", 24)
        .left("metrics", 0)
        .left("score", 0)
        .rows(rows.iter().map(|d| {
            let metrics: Vec<String> = serde_json::from_str(&d.metrics).unwrap_or_default();
            [
                fmt_time(d.at),
                d.job.clone(),
                d.node.clone(),
                format!("{}{}", d.action, if d.dry_run { " (dry run)" } else { "" }),
                metrics.join(","),
                format!("{:.1}", d.score),
            ]
        }));
    Section::new("Outliers in running jobs (lemon watch)").with(table)
}
