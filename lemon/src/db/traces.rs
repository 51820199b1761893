//! The per-rank summaries of jobs' NCCL flight-recorder dumps
//! (`flight_recorder`, issue 32): written by the spool ingest, read by
//! `lemon trace JOBID` and the attribution.

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection, OptionalExtension};

/// One collected dump as a node exported it.
pub struct NewTrace<'a> {
    pub job_id: &'a str,
    /// `nodes.id` of the node that held the dump.
    pub node: i64,
    pub rank: Option<u32>,
    pub at: i64,
    /// `flight_recorder::RankSummary` as JSON.
    pub summary: Option<&'a str>,
    pub error: Option<&'a str>,
}

/// Keeps `t`, replacing an earlier collection of the same rank's dump on
/// the same node; inside the caller's transaction.
pub fn store(conn: &Connection, t: &NewTrace<'_>) -> Result<()> {
    conn.prepare_cached(
        "INSERT OR REPLACE INTO flight_recorder(job_id, node, rank, at, summary, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![t.job_id, t.node, t.rank, t.at, t.summary, t.error])?;
    Ok(())
}

/// A stored dump: the node's name, the rank, its summary (JSON) or error.
#[derive(Debug, Clone)]
pub struct StoredTrace {
    pub node: String,
    pub rank: Option<u32>,
    pub summary: Option<String>,
    pub error: Option<String>,
}

/// The last run of a job, as the trace analysis needs it.
#[derive(Debug, Clone)]
pub struct TracedRun {
    /// `jobs.id`.
    pub row_id: i64,
    pub job_id_raw: i64,
    pub job_id: String,
    /// The NodeList as sacct wrote it.
    pub nodelist: String,
    pub start: Option<i64>,
    pub end: i64,
}

/// The last run of `job` (its JobID as users see it, or its raw id).
pub fn last_run(conn: &Connection, job: &str) -> Result<Option<TracedRun>> {
    Ok(conn
        .query_row(
            "SELECT id, job_id_raw, job_id, nodelist, start_time, end_time FROM jobs
             WHERE job_id = ?1 OR job_id_raw = CAST(?1 AS INTEGER)
             ORDER BY end_time DESC LIMIT 1",
            [job],
            |r| {
                Ok(TracedRun {
                    row_id: r.get(0)?,
                    job_id_raw: r.get(1)?,
                    job_id: r.get(2)?,
                    nodelist: r.get(3)?,
                    start: r.get(4)?,
                    end: r.get(5)?,
                })
            },
        )
        .optional()?)
}

/// The dumps collected for `job` (as the nodes named it: the raw id) at or
/// after `since` (a run's start: a requeued job's earlier dumps are not its).
pub fn of_job(conn: &Connection, job: &str, since: i64) -> Result<Vec<StoredTrace>> {
    let mut stmt = conn.prepare_cached(
        "SELECT n.name, t.rank, t.summary, t.error
         FROM flight_recorder t JOIN nodes n ON n.id = t.node
         WHERE t.job_id = ?1 AND t.at >= ?2
         ORDER BY t.rank, n.name",
    )?;
    let rows = stmt.query_map(params![job, since], stored)?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

fn stored(r: &lemonade_sql::rusqlite::Row<'_>) -> lemonade_sql::rusqlite::Result<StoredTrace> {
    Ok(StoredTrace {
        node: r.get(0)?,
        rank: r.get(1)?,
        summary: r.get(2)?,
        error: r.get(3)?,
    })
}

/// The summaries of the failed runs (FAILED, NODE_FAIL) that ended in
/// `(t0, t1]`, by run: `(jobs.id, NodeList, dump)`, collected between the
/// run's start and an hour after its end. Errors are left out.
pub fn of_failed_runs(
    conn: &Connection,
    t0: i64,
    t1: i64,
) -> Result<Vec<(i64, String, StoredTrace)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT j.id, j.nodelist, n.name, t.rank, t.summary, t.error
         FROM flight_recorder t
         JOIN jobs j ON j.job_id_raw = CAST(t.job_id AS INTEGER)
         JOIN nodes n ON n.id = t.node
         WHERE j.end_time > ?1 AND j.end_time <= ?2 AND j.state IN ('FAILED', 'NODE_FAIL')
           AND t.summary IS NOT NULL
           AND t.at >= coalesce(j.start_time, j.end_time) AND t.at <= j.end_time + 3600
         ORDER BY j.id, t.rank",
    )?;
    let rows = stmt.query_map(params![t0, t1], |r| {
        Ok((
            r.get(0)?,
            r.get(1)?,
            StoredTrace {
                node: r.get(2)?,
                rank: r.get(3)?,
                summary: r.get(4)?,
                error: r.get(5)?,
            },
        ))
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

/// A failed run for tests above the data layer: `jobs.id` 1 on `nodes`
/// (their NodeList `nodelist`), from `start` to `end`.
#[cfg(test)]
pub fn insert_failed_run_for_test(
    conn: &Connection,
    job_id: &str,
    nodelist: &str,
    nodes: &[&str],
    (start, end): (i64, i64),
) -> Result<()> {
    conn.execute(
        "INSERT INTO jobs(id, job_id_raw, job_id, start_time, end_time, state, nnodes, nodelist)
         VALUES (1, CAST(?1 AS INTEGER), ?1, ?2, ?3, 'FAILED', ?4, ?5)",
        params![job_id, start, end, nodes.len() as i64, nodelist],
    )?;
    for n in nodes {
        conn.execute("INSERT OR IGNORE INTO nodes(name) VALUES (?1)", [n])?;
        conn.execute(
            "INSERT INTO job_nodes(job, node) SELECT 1, id FROM nodes WHERE name = ?1",
            [n],
        )?;
    }
    Ok(())
}
