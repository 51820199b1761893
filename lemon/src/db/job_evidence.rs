//! What failed runs' own logs said (`job_evidence`, issue 36): written by
//! ingest, read by the attribution.

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection};

/// One run's verdict as stored: the run (`jobs.id`), `user`, `hardware`,
/// `hardware_unlocalized` or `unknown`, the node named (for `hardware`) and
/// up to two evidence lines.
pub struct StoredVerdict<'a> {
    pub job: i64,
    pub verdict: &'a str,
    pub node: Option<&'a str>,
    pub evidence: [Option<&'a str>; 2],
}

/// Keeps `v`, replacing an earlier verdict on the same run; inside the
/// caller's transaction.
pub fn store(conn: &Connection, v: &StoredVerdict<'_>) -> Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO job_evidence(job, verdict, node, evidence1, evidence2)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        v.job,
        v.verdict,
        v.node,
        v.evidence[0],
        v.evidence[1]
    ])?;
    Ok(())
}

/// A stored verdict as the attribution reads it: the run (`jobs.id`), the
/// verdict, the named node's id (`None` when no node of lemon.db has that
/// name) and the first evidence line (empty when none).
pub struct LoadedVerdict {
    pub job: i64,
    pub verdict: String,
    pub node: Option<i64>,
    pub evidence: String,
}

/// The verdicts of the failed runs (FAILED, NODE_FAIL) that ended in `(t0, t1]`.
pub fn load(conn: &Connection, t0: i64, t1: i64) -> Result<Vec<LoadedVerdict>> {
    let mut stmt = conn.prepare_cached(
        "SELECT e.job, e.verdict, n.id, ifnull(e.evidence1, '')
         FROM job_evidence e JOIN jobs j ON j.id = e.job LEFT JOIN nodes n ON n.name = e.node
         WHERE j.end_time > ?1 AND j.end_time <= ?2 AND j.state IN ('FAILED', 'NODE_FAIL')",
    )?;
    let rows = stmt.query_map(params![t0, t1], |r| {
        Ok(LoadedVerdict {
            job: r.get(0)?,
            verdict: r.get(1)?,
            node: r.get(2)?,
            evidence: r.get(3)?,
        })
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}
