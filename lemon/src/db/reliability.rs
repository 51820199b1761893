//! What the reliability report reads besides the runs (which come from
//! [`super::scan_runs`]): state changes, the start of the history, the
//! fleet, the drains and releases. Errors are SQLite's own, for the
//! report's error type to wrap.

use lemonade_sql::rusqlite::{params, Connection, Result};

/// A node's state change as its spool export gave it.
pub struct StateChangeRow {
    pub node: String,
    pub at: i64,
    pub code: Option<String>,
    pub detail: Option<String>,
}

/// The nodes' state changes in `[since, until)`, by time.
pub fn state_changes(conn: &Connection, since: i64, until: i64) -> Result<Vec<StateChangeRow>> {
    let mut stmt = conn.prepare(
        "SELECT n.name, h.at, h.code, h.detail FROM health h JOIN nodes n ON n.id = h.node
         WHERE h.kind = 'state_change' AND h.at >= ?1 AND h.at < ?2 ORDER BY h.at",
    )?;
    let rows = stmt.query_map(params![since, until], |r| {
        Ok(StateChangeRow {
            node: r.get(0)?,
            at: r.get(1)?,
            code: r.get(2)?,
            detail: r.get(3)?,
        })
    })?;
    rows.collect()
}

/// The earliest start or end of a run that ends from `since` on, health
/// record or node event, whichever comes first; `None` when there is none.
pub fn first_record(conn: &Connection, since: i64) -> Result<Option<i64>> {
    conn.query_row(
        "SELECT min(t) FROM (
             SELECT min(coalesce(start_time, end_time)) AS t FROM jobs WHERE end_time >= ?1
             UNION ALL SELECT min(at) FROM health
             UNION ALL SELECT min(start_time) FROM node_events)",
        params![since],
        |r| r.get(0),
    )
}

/// Nodes known to lemon.db (every node seen in any history).
pub fn node_count(conn: &Connection) -> Result<i64> {
    conn.query_row("SELECT count(*) FROM nodes", [], |r| r.get(0))
}

/// (node, at, action, reason) of every real (not dry-run) drain and
/// release, in the order they happened.
pub fn drains_and_releases(conn: &Connection) -> Result<Vec<(String, i64, String, String)>> {
    let mut stmt = conn.prepare(
        "SELECT n.name, d.at, d.action, d.reason FROM decisions d JOIN nodes n ON n.id = d.node
         WHERE d.dry_run = 0 AND d.action IN ('drained', 'released')
         ORDER BY d.at, d.id",
    )?;
    let rows = stmt.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))?;
    rows.collect()
}
