//! Out-of-service periods of the nodes (`node_events`) and the nodes that
//! jobs excluded (`exclusions`): what `sacctmgr` and `squeue` tell.

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection};

/// A node event to keep.
pub struct NodeEvent<'a> {
    pub node: i64,
    pub start: i64,
    pub end: Option<i64>,
    pub state: &'a str,
    pub reason: &'a str,
    pub user: &'a str,
    pub owner: &'a str,
}

/// Stores an event; one seen before (same node and start) takes the new
/// end, state and reason. Returns the rows changed.
pub fn upsert(conn: &Connection, e: &NodeEvent) -> Result<usize> {
    let mut up = conn.prepare_cached(
        "INSERT INTO node_events(node, start_time, end_time, state, reason, user, owner)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT(node, start_time) DO UPDATE SET end_time = excluded.end_time,
             state = excluded.state, reason = excluded.reason, user = excluded.user, owner = excluded.owner",
    )?;
    Ok(up.execute(params![
        e.node, e.start, e.end, e.state, e.reason, e.user, e.owner
    ])?)
}

/// Keeps that job `job_id` excluded `node`, first seen at `at`; returns
/// the rows changed (0: known already).
pub fn insert_exclusion(conn: &Connection, job_id: &str, node: i64, at: i64) -> Result<usize> {
    let mut ins = conn.prepare_cached(
        "INSERT OR IGNORE INTO exclusions(job_id, node, first_seen) VALUES (?1, ?2, ?3)",
    )?;
    Ok(ins.execute(params![job_id, node, at])?)
}

/// (events, latest end, largest owner) of all stored events.
#[cfg(test)]
pub fn summary(conn: &Connection) -> Result<(i64, Option<i64>, String)> {
    Ok(conn.query_row(
        "SELECT count(*), max(end_time), max(owner) FROM node_events",
        [],
        |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
    )?)
}
