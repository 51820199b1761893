//! The compute nodes' spool records (`health`) and how far each node's
//! export has been read (`spool_progress`).

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection, OptionalExtension};

/// A record's body as the columns of `health`.
#[derive(Default)]
pub struct HealthColumns<'a> {
    pub kind: &'static str,
    pub check: Option<&'a str>,
    pub entity: Option<&'a str>,
    pub code: Option<&'a str>,
    pub severity: Option<&'a str>,
    pub job_id: Option<&'a str>,
    pub step_id: Option<&'a str>,
    pub task_id: Option<u32>,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub detail: Option<&'a str>,
    /// Unix milliseconds of a task exit, when the node sent them.
    pub at_ms: Option<i64>,
}

/// Where the node's export was read up to: (epoch, last sequence number).
pub fn progress(conn: &Connection, node: i64) -> Result<Option<(String, i64)>> {
    Ok(conn
        .query_row(
            "SELECT epoch, last_seq FROM spool_progress WHERE node = ?1",
            [node],
            |r| Ok((r.get(0)?, r.get(1)?)),
        )
        .optional()?)
}

/// Stores one record unless stored already; returns the rows changed.
pub fn insert(
    conn: &Connection,
    node: i64,
    epoch: &str,
    seq: i64,
    at: i64,
    f: &HealthColumns,
) -> Result<usize> {
    let mut ins = conn.prepare_cached(
        "INSERT OR IGNORE INTO health(node, epoch, seq, at, kind, check_name, entity, code,
             severity, job_id, step_id, task_id, exit_code, signal, detail, at_ms)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
    )?;
    Ok(ins.execute(params![
        node,
        epoch,
        seq,
        at,
        f.kind,
        f.check,
        f.entity,
        f.code,
        f.severity,
        f.job_id,
        f.step_id,
        f.task_id,
        f.exit_code,
        f.signal,
        f.detail,
        f.at_ms
    ])?)
}

/// Keeps how far the node's export was read.
pub fn set_progress(conn: &Connection, node: i64, epoch: &str, seq: i64) -> Result<()> {
    conn.execute(
        "INSERT INTO spool_progress(node, epoch, last_seq) VALUES (?1, ?2, ?3)
         ON CONFLICT(node) DO UPDATE SET epoch = excluded.epoch, last_seq = excluded.last_seq",
        params![node, epoch, seq],
    )?;
    Ok(())
}

/// How many records are stored.
#[cfg(test)]
pub fn count(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("SELECT count(*) FROM health", [], |r| r.get(0))?)
}

/// (seq, at_ms) of every record, by seq.
#[cfg(test)]
pub fn seqs_and_ms(conn: &Connection) -> Result<Vec<(i64, Option<i64>)>> {
    let mut stmt = conn.prepare("SELECT seq, at_ms FROM health ORDER BY seq")?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}
