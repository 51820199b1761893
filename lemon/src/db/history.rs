//! The nodes' history as scoring reads it: health records from the spool
//! exports (`health`), node events (`node_events`), tickets and
//! exclusions. Times are `(t0, t1]` for counts, `[lo, hi]` for evidence.

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection};

/// (node, at, code) of every XID event of `(t0, t1]`.
pub fn xid_events(conn: &Connection, t0: i64, t1: i64) -> Result<Vec<(i64, i64, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT node, at, code FROM health
         WHERE kind = 'event' AND code LIKE 'XID%' AND at > ?1 AND at <= ?2",
    )?;
    let rows = stmt.query_map(params![t0, t1], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// (node, start, state) of every node event that began in `(t0, t1]`,
/// lemon's own drains excepted (they would feed back into scoring).
pub fn node_events_not_lemons(
    conn: &Connection,
    t0: i64,
    t1: i64,
) -> Result<Vec<(i64, i64, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT node, start_time, state FROM node_events
         WHERE start_time > ?1 AND start_time <= ?2 AND owner != 'lemon'",
    )?;
    let rows = stmt.query_map(params![t0, t1], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// (node, start, end) of every outage a health check started in `(t0, t1]`
/// (`end` `None`: still out). One row per outage: the primary key is
/// (node, start_time).
pub fn check_outages(conn: &Connection, t0: i64, t1: i64) -> Result<Vec<(i64, i64, Option<i64>)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT node, start_time, end_time FROM node_events
         WHERE start_time > ?1 AND start_time <= ?2 AND owner = 'health_check'",
    )?;
    let rows = stmt.query_map(params![t0, t1], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// (node, opened_at) of every ticket opened in `(t0, t1]`.
pub fn tickets_opened(conn: &Connection, t0: i64, t1: i64) -> Result<Vec<(i64, i64)>> {
    node_times(
        conn,
        "SELECT node, opened_at FROM tickets WHERE opened_at > ?1 AND opened_at <= ?2",
        t0,
        t1,
    )
}

/// (node, first_seen) of every exclusion first seen in `(t0, t1]`.
pub fn exclusions_seen(conn: &Connection, t0: i64, t1: i64) -> Result<Vec<(i64, i64)>> {
    node_times(
        conn,
        "SELECT node, first_seen FROM exclusions WHERE first_seen > ?1 AND first_seen <= ?2",
        t0,
        t1,
    )
}

fn node_times(conn: &Connection, sql: &str, t0: i64, t1: i64) -> Result<Vec<(i64, i64)>> {
    let mut stmt = conn.prepare_cached(sql)?;
    let rows = stmt.query_map(params![t0, t1], |r| Ok((r.get(0)?, r.get(1)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// A `drain` or `down` finding of a node's health checks, its texts
/// borrowed from the row.
#[derive(Debug, Clone, Copy)]
pub struct HardFinding<'r> {
    pub node: i64,
    pub at: i64,
    pub check: Option<&'r str>,
    pub code: Option<&'r str>,
    pub entity: Option<&'r str>,
}

/// Hands every `drain`/`down` finding of `[lo, hi]` to `each`, without
/// owning its texts: a month holds tens of thousands, and most are only
/// counted.
pub fn for_each_hard_finding(
    conn: &Connection,
    lo: i64,
    hi: i64,
    mut each: impl FnMut(HardFinding<'_>),
) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "SELECT node, at, check_name, code, entity FROM health
         WHERE kind = 'finding' AND severity IN ('drain', 'down') AND at >= ?1 AND at <= ?2",
    )?;
    let mut rows = stmt.query(params![lo, hi])?;
    while let Some(r) = rows.next()? {
        each(HardFinding {
            node: r.get(0)?,
            at: r.get(1)?,
            check: super::text_of(r, 2)?,
            code: super::text_of(r, 3)?,
            entity: super::text_of(r, 4)?,
        });
    }
    Ok(())
}

/// (node, start, state, reason) of the node events of our checks and of
/// Slurm itself that began in `[lo, hi]`.
pub fn check_and_slurm_events(
    conn: &Connection,
    lo: i64,
    hi: i64,
) -> Result<Vec<(i64, i64, String, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT node, start_time, state, reason FROM node_events
         WHERE start_time >= ?1 AND start_time <= ?2 AND owner IN ('health_check', 'slurm')",
    )?;
    let rows = stmt.query_map(params![lo, hi], |r| {
        Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
    })?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// (node, Unix milliseconds, job id) of every failed task exit of `[lo,
/// hi]`. Records of nodes that sent only seconds (`at_ms` NULL) count as
/// `at * 1000`.
pub fn failed_task_exits(conn: &Connection, lo: i64, hi: i64) -> Result<Vec<(i64, i64, String)>> {
    let mut stmt = conn.prepare_cached(
        "SELECT node, coalesce(at_ms, at * 1000), job_id FROM health
         WHERE kind = 'task_exit' AND at >= ?1 AND at <= ?2
           AND (ifnull(exit_code, 0) != 0 OR ifnull(signal, 0) != 0)",
    )?;
    let rows = stmt.query_map(params![lo, hi], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?;
    Ok(rows.collect::<Result<_, _>>()?)
}
