//! Proactive validation (issue 31; `validations` and `validation_metrics`,
//! migration 0010): the nodes' validation results as `lemon ingest` stores
//! them, and what `lemon run` and `lemon report` read back: the fleet's
//! recent passed results to learn bands from, each node's last validation,
//! the machine time validation jobs took, and the inventory facts the
//! selector needs (first seen, firmware changed).

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection, OptionalExtension};
use std::collections::BTreeMap;

/// One validation result as a node exported it.
#[derive(Debug, Clone, PartialEq)]
pub struct NewValidation<'a> {
    pub node: i64,
    pub epoch: &'a str,
    pub seq: i64,
    pub at: i64,
    pub job_id: &'a str,
    pub sku: &'a str,
    pub passed: bool,
    pub failing: &'a [String],
    pub criteria: &'a str,
    /// (metric, value); values that are not finite are not stored.
    pub metrics: &'a [(&'a str, f64)],
}

/// Stores one result unless stored already (the same export read twice);
/// returns 1 when new, else 0.
pub fn insert(conn: &Connection, v: &NewValidation) -> Result<u64> {
    let failing = serde_json::to_string(v.failing).unwrap_or_else(|_| "[]".into());
    let added = conn
        .prepare_cached(
            "INSERT OR IGNORE INTO validations(node, epoch, seq, at, job_id, sku, passed, failing, criteria)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            v.node, v.epoch, v.seq, v.at, v.job_id, v.sku, v.passed, failing, v.criteria
        ])?;
    if added == 0 {
        return Ok(0);
    }
    let id = conn.last_insert_rowid();
    let mut ins = conn.prepare_cached(
        "INSERT OR REPLACE INTO validation_metrics(validation, metric, value) VALUES (?1, ?2, ?3)",
    )?;
    for (metric, value) in v.metrics {
        // NaN would become NULL in SQLite: a metric without a value is none.
        if value.is_finite() {
            ins.execute(params![id, metric, value])?;
        }
    }
    Ok(1)
}

/// Deletes the results older than `older_than`, except each node's latest
/// (the selector's "last validated"). Returns the results gone.
pub fn prune(conn: &Connection, older_than: i64) -> Result<u64> {
    let old = "SELECT id FROM validations v WHERE at < ?1
               AND at < (SELECT max(at) FROM validations w WHERE w.node = v.node)";
    conn.execute(
        &format!("DELETE FROM validation_metrics WHERE validation IN ({old})"),
        [older_than],
    )?;
    let gone = conn.execute(
        &format!("DELETE FROM validations WHERE id IN ({old})"),
        [older_than],
    )?;
    Ok(gone as u64)
}

/// A node's latest validation.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LastValidation {
    pub node: String,
    pub at: i64,
    pub job_id: String,
    pub sku: String,
    pub passed: bool,
    /// The node's lines for its failing metrics, in its order.
    pub failing: Vec<String>,
}

/// Every node's latest validation, by node name.
pub fn last_per_node(conn: &Connection) -> Result<BTreeMap<String, LastValidation>> {
    // SQLite's bare columns beside max(): the latest row's.
    let mut stmt = conn.prepare(
        "SELECT n.name, max(v.at), v.job_id, v.sku, v.passed, v.failing
         FROM validations v JOIN nodes n ON n.id = v.node GROUP BY v.node",
    )?;
    let rows = stmt.query_map([], |r| {
        let failing: String = r.get(5)?;
        Ok(LastValidation {
            node: r.get(0)?,
            at: r.get(1)?,
            job_id: r.get(2)?,
            sku: r.get(3)?,
            passed: r.get(4)?,
            failing: serde_json::from_str(&failing).unwrap_or_default(),
        })
    })?;
    let mut out = BTreeMap::new();
    for row in rows {
        let row = row?;
        out.insert(row.node.clone(), row);
    }
    Ok(out)
}

/// One metric of one node's latest validation.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricResult {
    pub node: String,
    pub sku: String,
    pub at: i64,
    pub passed: bool,
    pub metric: String,
    pub value: f64,
}

/// The metrics of each node's latest validation at or after `since`; of
/// its latest passed one when `passed_only` (what bands are learned from).
pub fn latest_results(
    conn: &Connection,
    since: i64,
    passed_only: bool,
) -> Result<Vec<MetricResult>> {
    let mut stmt = conn.prepare(
        "WITH latest AS (
             SELECT v.id, v.node, v.sku, v.at, v.passed,
                    row_number() OVER (PARTITION BY v.node ORDER BY v.at DESC, v.id DESC) AS k
             FROM validations v WHERE v.at >= ?1 AND (v.passed = 1 OR ?2 = 0))
         SELECT n.name, l.sku, l.at, l.passed, m.metric, m.value
         FROM latest l JOIN nodes n ON n.id = l.node
         JOIN validation_metrics m ON m.validation = l.id
         WHERE l.k = 1 ORDER BY l.sku, m.metric, n.name",
    )?;
    let rows = stmt.query_map(params![since, passed_only], |r| {
        Ok(MetricResult {
            node: r.get(0)?,
            sku: r.get(1)?,
            at: r.get(2)?,
            passed: r.get(3)?,
            metric: r.get(4)?,
            value: r.get(5)?,
        })
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

/// Node-hours the jobs named `job_name` ran between `since` and `now`, from
/// the job history (`jobs`, as sacct reported them once ended).
pub fn node_hours_of_jobs(conn: &Connection, job_name: &str, since: i64, now: i64) -> Result<f64> {
    let seconds: Option<f64> = conn
        .query_row(
            "SELECT sum((min(end_time, ?3) - max(coalesce(start_time, end_time), ?2)) * nnodes)
             FROM jobs WHERE end_time > ?2 AND job_name = ?1",
            params![job_name, since, now],
            |r| r.get(0),
        )
        .optional()?
        .flatten();
    Ok(seconds.unwrap_or(0.0).max(0.0) / 3600.0)
}

/// When each node first exported its inventory: when lemon first saw it
/// as a machine (its first run of the node checks).
pub fn first_seen(conn: &Connection) -> Result<BTreeMap<String, i64>> {
    let mut stmt = conn.prepare(
        "SELECT n.name, min(h.at) FROM health h JOIN nodes n ON n.id = h.node
         WHERE h.kind = 'inventory' GROUP BY h.node",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

/// When each node last changed a firmware, VBIOS or software version: the
/// latest inventory record of such an item whose value differs from the
/// item's record before it (a first report is no change).
pub fn firmware_changed_at(conn: &Connection) -> Result<BTreeMap<String, i64>> {
    let mut stmt = conn.prepare(
        "SELECT n.name, max(c.at) FROM (
             SELECT node, at, detail,
                    lag(detail) OVER (PARTITION BY node, check_name, entity ORDER BY at) AS before
             FROM health
             WHERE kind = 'inventory' AND check_name IN ('firmware', 'gpu', 'versions')
               AND NOT (check_name = 'versions' AND entity = 'sku')) c
         JOIN nodes n ON n.id = c.node
         WHERE c.before IS NOT NULL AND c.before IS NOT c.detail GROUP BY c.node",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::{self, NodeIds};
    use std::time::Duration;

    fn stored(conn: &Connection, node: i64, seq: i64, at: i64, passed: bool, bw: f64) -> u64 {
        let failing = if passed {
            vec![]
        } else {
            vec![format!("avg_busbw {bw}<400")]
        };
        insert(
            conn,
            &NewValidation {
                node,
                epoch: "e",
                seq,
                at,
                job_id: &format!("{}", 100 + seq),
                sku: "H100x8",
                passed,
                failing: &failing,
                criteria: "learned",
                metrics: &[("avg_busbw", bw), ("wrong_total", 0.0), ("nan", f64::NAN)],
            },
        )
        .unwrap()
    }

    #[test]
    fn each_nodes_latest_passed_result_is_what_bands_learn_from() {
        let dir = tempfile::tempdir().unwrap();
        let conn = db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let mut ids = NodeIds::load(&conn).unwrap();
        let a = ids.get_or_insert(&conn, "gpu001").unwrap();
        let b = ids.get_or_insert(&conn, "gpu002").unwrap();
        assert_eq!(stored(&conn, a, 1, 1000, true, 450.0), 1);
        assert_eq!(stored(&conn, a, 1, 1000, true, 450.0), 0, "stored once");
        stored(&conn, a, 2, 2000, true, 460.0);
        stored(&conn, b, 1, 1500, true, 455.0);
        stored(&conn, b, 2, 2500, false, 300.0);

        let passed = latest_results(&conn, 0, true).unwrap();
        let seen: Vec<_> = (passed.iter())
            .filter(|r| r.metric == "avg_busbw")
            .map(|r| (r.node.as_str(), r.value))
            .collect();
        assert_eq!(seen, [("gpu001", 460.0), ("gpu002", 455.0)]);
        assert!(passed.iter().all(|r| r.metric != "nan"));
        // The window cuts old results; without `passed_only` the failure shows.
        let recent = latest_results(&conn, 1600, false).unwrap();
        let seen: Vec<_> = (recent.iter())
            .filter(|r| r.metric == "avg_busbw")
            .map(|r| (r.node.as_str(), r.value, r.passed))
            .collect();
        assert_eq!(seen, [("gpu001", 460.0, true), ("gpu002", 300.0, false)]);

        // Pruning keeps each node's latest, however old.
        assert_eq!(prune(&conn, 2200).unwrap(), 2);
        assert_eq!(latest_results(&conn, 0, false).unwrap().len(), 4);
        assert_eq!(prune(&conn, 10_000).unwrap(), 0);

        let last = last_per_node(&conn).unwrap();
        assert_eq!(last["gpu002"].at, 2500);
        assert!(!last["gpu002"].passed);
        assert_eq!(last["gpu002"].failing, ["avg_busbw 300<400"]);
        assert_eq!(last["gpu001"].job_id, "102");
    }

    #[test]
    fn the_selectors_facts_come_from_inventory_changes_and_the_validation_jobs_runtime() {
        let dir = tempfile::tempdir().unwrap();
        let conn = db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let mut ids = NodeIds::load(&conn).unwrap();
        let a = ids.get_or_insert(&conn, "gpu001").unwrap();
        let b = ids.get_or_insert(&conn, "gpu002").unwrap();
        let inv = |node, seq, at, check, entity, value| {
            let f = db::spool::HealthColumns {
                kind: "inventory",
                check: Some(check),
                entity: Some(entity),
                detail: Some(value),
                ..Default::default()
            };
            db::spool::insert(&conn, node, "e", seq, at, &f).unwrap();
        };
        inv(a, 1, 100, "firmware", "bios", "1.0");
        inv(a, 2, 200, "firmware", "bios", "1.0"); // the same again: no change
        inv(a, 3, 300, "gpu", "gpu0", "96.00.5E");
        inv(b, 1, 150, "firmware", "bios", "1.0");
        inv(b, 2, 400, "firmware", "bios", "1.1");
        inv(b, 3, 500, "versions", "sku", "H100x8"); // the SKU is no version
        inv(b, 4, 600, "versions", "sku", "H200x8");
        assert_eq!(
            first_seen(&conn).unwrap(),
            [("gpu001".into(), 100), ("gpu002".into(), 150)].into()
        );
        assert_eq!(
            firmware_changed_at(&conn).unwrap(),
            [("gpu002".into(), 400)].into()
        );

        // Two validation jobs: one of 2 nodes x 1 h inside the day, one
        // that started before it (only its last half hour counts); another
        // job's name is not charged.
        for (id, start, end, nnodes, name) in [
            (1, 10_000, 13_600, 2, "lemonade-validate"),
            (2, 1_000, 5_000, 1, "lemonade-validate"),
            (3, 10_000, 13_600, 8, "train"),
        ] {
            conn.execute(
                "INSERT INTO jobs(job_id_raw, job_id, start_time, end_time, state, nnodes, nodelist, job_name)
                 VALUES (?1, ?1, ?2, ?3, 'COMPLETED', ?4, 'gpu001', ?5)",
                params![id, start, end, nnodes, name],
            )
            .unwrap();
        }
        let hours = node_hours_of_jobs(&conn, "lemonade-validate", 3_200, 20_000).unwrap();
        assert!((hours - 2.5).abs() < 1e-9, "{hours}");
    }
}
