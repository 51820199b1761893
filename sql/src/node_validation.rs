//! Node-database queries of proactive validation (issue 31): each
//! `healthcheck validate` run and the metrics of its benchmarks.

use crate::StoreError;
use rusqlite::{params, Connection};
use std::path::Path;

fn wrap(path: &Path) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
    move |source| StoreError::Sqlite {
        path: path.to_path_buf(),
        source,
    }
}

/// One validation run as the node database keeps it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ValidationRow {
    pub at: i64,
    pub job_id: Option<String>,
    pub sku: String,
    /// `pass`, `fail` or `unknown`.
    pub verdict: String,
    pub criteria: String,
    /// JSON list of failure lines.
    pub failing: String,
    /// JSON list of notes (benchmarks not run, criteria ignored).
    pub notes: String,
    pub metrics: Vec<MetricRow>,
}

/// One metric of a run.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MetricRow {
    pub benchmark: String,
    pub metric: String,
    pub value: f64,
    pub unit: String,
}

/// Records a run and its metrics in one transaction; returns its id. A
/// metric named twice keeps its last value.
pub fn record(conn: &Connection, path: &Path, row: &ValidationRow) -> Result<i64, StoreError> {
    let tx = conn.unchecked_transaction().map_err(wrap(path))?;
    tx.execute(
        "INSERT INTO validation_runs (at, job_id, sku, verdict, criteria, failing, notes)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            row.at,
            row.job_id,
            row.sku,
            row.verdict,
            row.criteria,
            row.failing,
            row.notes
        ],
    )
    .map_err(wrap(path))?;
    let id = tx.last_insert_rowid();
    {
        let mut stmt = tx
            .prepare_cached(
                "INSERT OR REPLACE INTO validation_metrics (run_id, benchmark, metric, value, unit)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(wrap(path))?;
        for m in &row.metrics {
            stmt.execute(params![id, m.benchmark, m.metric, m.value, m.unit])
                .map_err(wrap(path))?;
        }
    }
    tx.commit().map_err(wrap(path))?;
    Ok(id)
}

/// The latest run's verdict and time, if any.
pub fn last(conn: &Connection, path: &Path) -> Result<Option<(i64, String)>, StoreError> {
    use rusqlite::OptionalExtension;
    conn.query_row(
        "SELECT at, verdict FROM validation_runs ORDER BY id DESC LIMIT 1",
        [],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )
    .optional()
    .map_err(wrap(path))
}

/// The metrics of run `id`, in the order they were recorded.
pub fn metrics_of(conn: &Connection, path: &Path, id: i64) -> Result<Vec<MetricRow>, StoreError> {
    let mut stmt = conn
        .prepare_cached(
            "SELECT benchmark, metric, value, unit FROM validation_metrics
             WHERE run_id = ?1 ORDER BY rowid",
        )
        .map_err(wrap(path))?;
    let rows = stmt
        .query_map([id], |r| {
            Ok(MetricRow {
                benchmark: r.get(0)?,
                metric: r.get(1)?,
                value: r.get(2)?,
                unit: r.get(3)?,
            })
        })
        .map_err(wrap(path))?;
    rows.collect::<Result<_, _>>().map_err(wrap(path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_and_its_metrics_read_back_after_the_migration() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("node.db");
        let store = crate::node::NodeStore::open(&path, std::time::Duration::from_secs(1)).unwrap();
        let conn = store.connection();
        assert_eq!(last(conn, &path).unwrap(), None);
        let metric = |name: &str, value| MetricRow {
            benchmark: "all_reduce".into(),
            metric: name.into(),
            value,
            unit: "GB/s".into(),
        };
        let row = ValidationRow {
            at: 1_700_000_000,
            sku: "H100x8".into(),
            verdict: "fail".into(),
            criteria: "static floors".into(),
            failing: r#"["avg_busbw 312<350 GB/s (floor)"]"#.into(),
            notes: "[]".into(),
            metrics: vec![
                metric("avg_busbw", 312.0),
                metric("busbw.out_of_place.8", 0.1),
            ],
            ..ValidationRow::default()
        };
        let id = record(conn, &path, &row).unwrap();
        assert_eq!(
            last(conn, &path).unwrap(),
            Some((1_700_000_000, "fail".into()))
        );
        assert_eq!(metrics_of(conn, &path, id).unwrap(), row.metrics);
    }
}
