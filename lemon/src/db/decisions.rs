//! Lemon's decisions (`decisions`): drains, releases, and what they mean
//! for scoring.

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection, OptionalExtension};
use serde::Serialize;
use std::collections::HashMap;

/// When each node was last released (`lemon release`): its history before that is forgiven.
pub fn releases(conn: &Connection) -> Result<HashMap<i64, i64>> {
    let mut stmt = conn
        .prepare("SELECT node, max(at) FROM decisions WHERE action = 'released' GROUP BY node")?;
    let map = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<HashMap<_, _>, _>>()?;
    Ok(map)
}

/// Nodes that lemon drained and nobody released since: known lemons.
pub fn active_lemons(conn: &Connection) -> Result<HashMap<i64, i64>> {
    let mut stmt = conn.prepare(
        "SELECT d.node, max(d.at) FROM decisions d
         WHERE d.action = 'drained'
           AND d.at >= ifnull((SELECT max(r.at) FROM decisions r
                               WHERE r.node = d.node AND r.action = 'released'), 0)
         GROUP BY d.node",
    )?;
    let map = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<HashMap<_, _>, _>>()?;
    Ok(map)
}

/// One past decision.
#[derive(Debug, Clone, Serialize)]
pub struct Decision {
    pub at: i64,
    pub node: String,
    pub action: String,
    pub reason: String,
    pub dry_run: bool,
}

/// The most recent decisions, newest first.
pub fn recent(conn: &Connection, limit: usize) -> Result<Vec<Decision>> {
    let mut stmt = conn.prepare(
        "SELECT d.at, n.name, d.action, d.reason, d.dry_run FROM decisions d
         JOIN nodes n ON n.id = d.node ORDER BY d.at DESC, d.id DESC LIMIT ?1",
    )?;
    let rows = stmt
        .query_map(params![limit as i64], |r| {
            Ok(Decision {
                at: r.get(0)?,
                node: r.get(1)?,
                action: r.get(2)?,
                reason: r.get(3)?,
                dry_run: r.get(4)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The action of `node`'s latest decision.
pub fn last_action(conn: &Connection, node: i64) -> Result<Option<String>> {
    Ok(conn
        .query_row(
            "SELECT action FROM decisions WHERE node = ?1 ORDER BY at DESC, id DESC LIMIT 1",
            [node],
            |r| r.get(0),
        )
        .optional()?)
}

/// A decision to keep: `signals` and `jobs` are JSON.
pub struct NewDecision<'a> {
    pub at: i64,
    pub node: i64,
    pub action: &'a str,
    pub reason: &'a str,
    pub signals: &'a str,
    pub jobs: &'a str,
    pub dry_run: bool,
}

/// Keeps one decision.
pub fn insert(conn: &Connection, d: &NewDecision) -> Result<()> {
    conn.execute(
        "INSERT INTO decisions(at, node, action, reason, signals, jobs, dry_run)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![d.at, d.node, d.action, d.reason, d.signals, d.jobs, d.dry_run],
    )?;
    Ok(())
}

/// Keeps a release of `node` (`lemon release`).
pub fn insert_release(conn: &Connection, node: i64, note: &str, at: i64) -> Result<()> {
    conn.execute(
        "INSERT INTO decisions(at, node, action, reason) VALUES (?1, ?2, 'released', ?3)",
        params![at, node, note],
    )?;
    Ok(())
}
