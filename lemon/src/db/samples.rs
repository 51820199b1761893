//! The node sampler's metric samples (`samples`, migration 0008): stored by
//! `lemon ingest` from the nodes' spool exports, read by `lemon watch`.

use crate::error::Result;
use lemonade_sql::rusqlite::{params, params_from_iter, Connection};
use lemonade_watch::Sample;

/// One stored sample, owning its names; [`OwnedSample::as_sample`] lends it
/// to the detector.
#[derive(Debug, Clone, PartialEq)]
pub struct OwnedSample {
    pub time: i64,
    pub job: String,
    pub node: String,
    pub metric: String,
    pub value: f64,
}

impl OwnedSample {
    pub fn as_sample(&self) -> Sample<'_> {
        Sample {
            time: self.time,
            job: &self.job,
            node: &self.node,
            metric: &self.metric,
            value: self.value,
        }
    }
}

/// Stores a node's chunk of samples of `job`; a sample stored already (the
/// same file read twice) is kept once. Returns the rows added.
pub fn insert(conn: &Connection, node: i64, job: &str, rows: &[(i64, String, f64)]) -> Result<u64> {
    let mut ins = conn.prepare_cached(
        "INSERT OR IGNORE INTO samples(job_id, node, metric, at, value) VALUES (?1, ?2, ?3, ?4, ?5)",
    )?;
    let mut added = 0;
    for (at, metric, value) in rows {
        // NaN is not a number SQLite keeps (it becomes NULL): never stored.
        if value.is_finite() {
            added += ins.execute(params![job, node, metric, at, value])? as u64;
        }
    }
    Ok(added)
}

/// The samples of `job` on `nodes` (every node of the job when empty) at or
/// after `since`, in time order: what `lemon watch` feeds the detector.
pub fn recent(
    conn: &Connection,
    job: &str,
    nodes: &[&str],
    since: i64,
) -> Result<Vec<OwnedSample>> {
    let mut sql = String::from(
        "SELECT s.at, n.name, s.metric, s.value FROM samples s JOIN nodes n ON n.id = s.node
         WHERE s.job_id = ?1 AND s.at >= ?2",
    );
    if !nodes.is_empty() {
        let marks = vec!["?"; nodes.len()].join(", ");
        sql.push_str(&format!(" AND n.name IN ({marks})"));
    }
    sql.push_str(" ORDER BY s.at, n.name, s.metric");
    let mut stmt = conn.prepare(&sql)?;
    let job_and_since: [&dyn lemonade_sql::rusqlite::ToSql; 2] = [&job, &since];
    let args = job_and_since.into_iter().chain(
        nodes
            .iter()
            .map(|n| n as &dyn lemonade_sql::rusqlite::ToSql),
    );
    let rows = stmt.query_map(params_from_iter(args), |r| {
        Ok(OwnedSample {
            time: r.get(0)?,
            job: job.to_string(),
            node: r.get(1)?,
            metric: r.get(2)?,
            value: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

/// Deletes the samples of every job that ended on its node before
/// `ended_before` (the node's `job_end` record), and every sample older
/// than `older_than`. Returns the rows gone. Only ends after `older_than`
/// are looked at (older jobs' samples went by age), each by the primary
/// key's (job, node) prefix: no pass over all samples.
pub fn prune(conn: &Connection, ended_before: i64, older_than: i64) -> Result<u64> {
    let ended = conn.execute(
        "DELETE FROM samples WHERE (job_id, node) IN (
             SELECT job_id, node FROM health
             WHERE kind = 'job_end' AND job_id IS NOT NULL AND at < ?1 AND at >= ?2)",
        params![ended_before, older_than],
    )?;
    let old = conn.execute("DELETE FROM samples WHERE at < ?1", [older_than])?;
    Ok((ended + old) as u64)
}

/// How many samples are stored.
pub fn count(conn: &Connection) -> Result<u64> {
    Ok(conn.query_row("SELECT COUNT(*) FROM samples", [], |r| r.get::<_, i64>(0))? as u64)
}
