//! The firmware versions the nodes export (`health`, `kind = 'inventory'`).

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection};
use serde::Serialize;
use std::collections::BTreeMap;

/// A firmware version a node exported (the latest of its item).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Version {
    /// `firmware/bios`, `firmware/board`, `firmware/mlx5_0`.
    pub item: String,
    pub value: String,
    /// When the node first sent this value.
    pub at: i64,
}

/// The latest firmware versions of each of `nodes` (none for a node that
/// never exported any).
pub fn firmware_versions(
    conn: &Connection,
    nodes: &[&str],
) -> Result<BTreeMap<String, Vec<Version>>> {
    // SQLite's bare columns beside max(): the row of the latest record.
    let mut stmt = conn.prepare(
        "SELECT h.check_name || '/' || h.entity, h.detail, max(h.at)
         FROM health h WHERE h.kind = 'inventory' AND h.node = (SELECT id FROM nodes WHERE name = ?1)
         GROUP BY h.check_name, h.entity ORDER BY 1",
    )?;
    let mut out = BTreeMap::new();
    for node in nodes {
        let found = stmt
            .query_map(params![node], |r| {
                Ok(Version {
                    item: r.get(0)?,
                    value: r.get::<_, Option<String>>(1)?.unwrap_or_default(),
                    at: r.get(2)?,
                })
            })?
            .collect::<std::result::Result<Vec<_>, _>>()?;
        out.insert(node.to_string(), found);
    }
    Ok(out)
}

/// Every node's latest inventory, node to `check/entity` to value: the
/// drift report's input (`crate::drift::from_inventory`).
pub fn latest_inventory(conn: &Connection) -> Result<BTreeMap<String, BTreeMap<String, String>>> {
    // One pass over the partial index; the bare columns beside max() are the
    // latest record's.
    let mut stmt = conn.prepare(
        "SELECT n.name, h.check_name || '/' || h.entity, h.detail, max(h.at)
         FROM health h JOIN nodes n ON n.id = h.node
         WHERE h.kind = 'inventory'
         GROUP BY h.node, h.check_name, h.entity",
    )?;
    let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, Option<String>>(2)?.unwrap_or_default(),
        ))
    })?;
    for row in rows {
        let (node, item, value) = row?;
        out.entry(node).or_default().insert(item, value);
    }
    Ok(out)
}
