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

/// Imports `node,opened_at,closed_at,note` rows; a header line is skipped.
/// Re-importing the same file updates rather than duplicates. The file is
/// read as RFC 4180 CSV (the `csv` crate): a quoted note may hold commas,
/// quotes (`""`) and line breaks, and each row is named by the line it
/// starts on.
pub fn import_csv(conn: &mut Connection, path: &Path) -> Result<IngestStats> {
    let bytes = std::fs::read(path).map_err(|e| LemonError::io(path, e))?;
    let source = format!("csv:{}", path.display());
    let mut stats = IngestStats::default();
    let mut ids = NodeIds::load(conn)?;
    let tx = conn.transaction()?;
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .from_reader(bytes.as_slice());
    for (i, record) in reader.records().enumerate() {
        let line = match &record {
            Ok(r) => r.position(),
            Err(e) => e.position(),
        }
        .map_or(i as u64 + 1, csv::Position::line);
        let where_ = format!("{}:{line}", path.display());
        let f = match record {
            Ok(r) => r,
            Err(e) => {
                stats.rows_read += 1;
                stats.malformed(where_, format!("not CSV: {e}"));
                continue;
            }
        };
        if f.iter().all(|c| c.trim().is_empty()) || (i == 0 && f[0].trim() == "node") {
            continue;
        }
        stats.rows_read += 1;
        match row(&f) {
            Ok((name, opened, closed, note)) => {
                let node = ids.get_or_insert(&tx, name)?;
                stats.inserted +=
                    db::tickets::upsert_imported(&tx, node, opened, closed, note, &source)? as u64;
            }
            Err(why) => stats.malformed(where_, why),
        }
    }
    tx.commit()?;
    Ok(stats)
}

/// One ticket row: node, opened, closed and note, or why it is malformed.
fn row(f: &csv::StringRecord) -> std::result::Result<(&str, i64, Option<i64>, &str), String> {
    let node = f.get(0).map(str::trim).unwrap_or_default();
    if f.len() < 2 || node.is_empty() {
        return Err("expected node,opened_at,closed_at,note".into());
    }
    let opened = match db::parse_time(&f[1]) {
        Ok(Some(t)) => t,
        Ok(None) => return Err("opened_at is empty".into()),
        Err(e) => return Err(format!("opened_at: {e}")),
    };
    let closed = match f.get(2).map(db::parse_time).transpose() {
        Ok(c) => c.flatten(),
        Err(e) => return Err(format!("closed_at: {e}")),
    };
    Ok((node, opened, closed, f.get(3).unwrap_or_default()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn csv_with_quotes_imports_idempotently() {
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

    #[test]
    fn a_quoted_note_with_a_line_break_and_a_comma_is_one_row_and_a_bad_row_names_its_line() {
        let dir = tempfile::tempdir().unwrap();
        let mut conn = db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let csv = dir.path().join("t.csv");
        std::fs::write(
            &csv,
            "node,opened_at,closed_at,note\n\
             gpu001,100,200,\"dimm, slot 3\nreplaced \"\"B2\"\"\"\n\
             gpu002,soon,,x\n",
        )
        .unwrap();
        let s = import_csv(&mut conn, &csv).unwrap();
        assert_eq!((s.rows_read, s.inserted, s.skipped), (2, 1, 1), "{s:?}");
        let (at, why) = &s.errors[0];
        assert!(
            at.ends_with("t.csv:4"),
            "the bad row starts on line 4: {at}"
        );
        assert!(why.starts_with("opened_at: "), "{why}");
        let all = list(&conn, true).unwrap();
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].note, "dimm, slot 3\nreplaced \"B2\"");
    }
}
