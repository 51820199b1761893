//! Repair tickets (`tickets`).

use crate::error::Result;
use lemonade_sql::rusqlite::{params, Connection};

/// Opens a ticket from the command line (a repeat at the same second
/// replaces the note).
pub fn open_by_hand(conn: &Connection, node: i64, at: i64, note: &str) -> Result<()> {
    conn.execute(
        "INSERT INTO tickets(node, opened_at, note, source) VALUES (?1, ?2, ?3, 'cli')
         ON CONFLICT(node, opened_at) DO UPDATE SET note = excluded.note",
        params![node, at, note],
    )?;
    Ok(())
}

/// Opens a ticket for a node handed over to a human, unless one is open.
pub fn open_unless_open(conn: &Connection, node: i64, at: i64, note: &str) -> Result<()> {
    conn.execute(
        "INSERT INTO tickets(node, opened_at, note, source)
         SELECT ?1, ?2, ?3, 'hand-over'
         WHERE NOT EXISTS (SELECT 1 FROM tickets WHERE node = ?1 AND closed_at IS NULL)
         ON CONFLICT(node, opened_at) DO NOTHING",
        params![node, at, note],
    )?;
    Ok(())
}

/// A ticket as stored, with its node's name.
#[derive(Debug, Clone, PartialEq)]
pub struct Ticket {
    pub node: String,
    pub opened_at: i64,
    pub closed_at: Option<i64>,
    /// `cli`, `csv:<file>` or `hand-over`.
    pub source: String,
    pub note: String,
}

/// The open tickets, or all of them, oldest first.
pub fn list(conn: &Connection, all: bool) -> Result<Vec<Ticket>> {
    let mut stmt = conn.prepare(
        "SELECT n.name, t.opened_at, t.closed_at, t.source, t.note
         FROM tickets t JOIN nodes n ON n.id = t.node
         WHERE ?1 OR t.closed_at IS NULL ORDER BY t.opened_at, n.name",
    )?;
    let rows = stmt.query_map([all], |r| {
        Ok(Ticket {
            node: r.get(0)?,
            opened_at: r.get(1)?,
            closed_at: r.get(2)?,
            source: r.get(3)?,
            note: r.get(4)?,
        })
    })?;
    Ok(rows.collect::<std::result::Result<_, _>>()?)
}

/// Closes the node's open tickets; returns how many.
pub fn close(conn: &Connection, node: i64, at: i64, note: &str) -> Result<usize> {
    Ok(conn.execute(
        "UPDATE tickets SET closed_at = ?2, close_note = ?3 WHERE node = ?1 AND closed_at IS NULL",
        params![node, at, note],
    )?)
}

/// Stores an imported ticket (a repeat replaces its close and note);
/// returns the rows changed.
pub fn upsert_imported(
    conn: &Connection,
    node: i64,
    opened: i64,
    closed: Option<i64>,
    note: &str,
    source: &str,
) -> Result<usize> {
    Ok(conn.prepare_cached(
        "INSERT INTO tickets(node, opened_at, closed_at, note, source) VALUES (?1, ?2, ?3, ?4, ?5)
         ON CONFLICT(node, opened_at) DO UPDATE SET closed_at = excluded.closed_at, note = excluded.note",
    )?
    .execute(params![node, opened, closed, note, source])?)
}

/// How many tickets there are.
pub fn count(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("SELECT count(*) FROM tickets", [], |r| r.get(0))?)
}
