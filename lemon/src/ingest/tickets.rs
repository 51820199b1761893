//! Repair tickets: opened and closed by hand (`lemon ticket`), imported from
//! CSV, or opened when a node's remediation hands it over to a human.

use super::IngestStats;
use crate::db::{self, NodeIds};
use crate::error::{LemonError, Result};
use lemonade_sql::rusqlite::Connection;
use std::path::Path;

/// Opens a ticket for `node` at `now`.
pub fn open(conn: &Connection, node: &str, note: &str, now: i64) -> Result<()> {
    let mut ids = NodeIds::load(conn)?;
    let id = ids.get_or_insert(conn, node)?;
    db::tickets::open_by_hand(conn, id, now, note)
}

/// Opens a ticket for a node whose remediation handed it over to a human
/// (`reason`: `hc: CODE entity human needed`), unless one is open already:
/// a node handed over twice is still one repair.
pub fn open_for_hand_over(conn: &Connection, node: i64, at: i64, reason: &str) -> Result<()> {
    db::tickets::open_unless_open(conn, node, at, reason)
}

/// A repair ticket as `lemon ticket list` shows it.
pub use db::tickets::Ticket;

/// The open tickets, or all of them, oldest first.
pub fn list(conn: &Connection, all: bool) -> Result<Vec<Ticket>> {
    db::tickets::list(conn, all)
}

/// Closes the node's open tickets; returns how many.
pub fn close(conn: &Connection, node: &str, note: &str, now: i64) -> Result<usize> {
    let Some(id) = NodeIds::load(conn)?.get(node) else {
        return Ok(0);
    };
    db::tickets::close(conn, id, now, note)
}

/// Splits one CSV line, honouring double quotes (`""` inside quotes is a quote).
pub fn split_csv(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut field = String::new();
    let mut quoted = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                field.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut field)),
            (c, _) => field.push(c),
        }
    }
    out.push(field);
    out
}

/// Imports `node,opened_at,closed_at,note` rows; a header line is skipped.
/// Re-importing the same file updates rather than duplicates.
pub fn import_csv(conn: &mut Connection, path: &Path) -> Result<IngestStats> {
    let text = std::fs::read_to_string(path).map_err(|e| LemonError::io(path, e))?;
    let source = format!("csv:{}", path.display());
    let mut stats = IngestStats::default();
    let mut ids = NodeIds::load(conn)?;
    let tx = conn.transaction()?;
    for (i, line) in text.lines().enumerate() {
        let f = split_csv(line);
        if line.trim().is_empty() || (i == 0 && f[0].trim() == "node") {
            continue;
        }
        stats.rows_read += 1;
        let where_ = format!("{}:{}", path.display(), i + 1);
        if f.len() < 2 || f[0].trim().is_empty() {
            stats.malformed(where_, "expected node,opened_at,closed_at,note".into());
            continue;
        }
        let opened = match db::parse_time(&f[1]) {
            Ok(Some(t)) => t,
            Ok(None) => {
                stats.malformed(where_, "opened_at is empty".into());
                continue;
            }
            Err(e) => {
                stats.malformed(where_, format!("opened_at: {e}"));
                continue;
            }
        };
        let closed = match f.get(2).map(|s| db::parse_time(s)).transpose() {
            Ok(c) => c.flatten(),
            Err(e) => {
                stats.malformed(where_, format!("closed_at: {e}"));
                continue;
            }
        };
        let note = f.get(3).cloned().unwrap_or_default();
        let node = ids.get_or_insert(&tx, f[0].trim())?;
        stats.inserted +=
            db::tickets::upsert_imported(&tx, node, opened, closed, &note, &source)? as u64;
    }
    tx.commit()?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn csv_with_quotes_imports_idempotently() {
        assert_eq!(split_csv(r#"a,"b, ""c""",d"#), ["a", "b, \"c\"", "d"]);
        let dir = tempfile::tempdir().unwrap();
        let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let csv = dir.path().join("t.csv");
        std::fs::write(
            &csv,
            "node,opened_at,closed_at,note\ngpu001,100,,\"dimm, slot 3\"\ngpu002,soon,,x\n",
        )
        .unwrap();
        let s = import_csv(&mut conn, &csv).unwrap();
        assert_eq!((s.inserted, s.skipped), (1, 1));
        assert!(s.errors[0].0.ends_with(":3"), "{:?}", s.errors);
        import_csv(&mut conn, &csv).unwrap();
        open(&conn, "gpu003", "psu", 500).unwrap();
        assert_eq!(close(&conn, "gpu003", "fixed", 600).unwrap(), 1);
        let n = db::tickets::count(&conn).unwrap();
        assert_eq!(n, 2);
    }
}
