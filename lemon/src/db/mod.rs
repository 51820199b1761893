//! lemon's data layer: every SQL statement of the lemon job is here, one
//! file per family of tables. This file: opening lemon.db, node ids,
//! watermarks, ingest bookkeeping.

pub mod attributions;
pub mod decisions;
pub mod detections;
pub mod history;
pub mod inventory;
pub mod job_evidence;
mod jobs;
pub mod node_events;
pub mod reliability;
pub mod run_blocks;
pub mod samples;
pub mod spool;
pub mod tickets;
pub mod traces;
pub mod validations;

pub use decisions::{active_lemons, releases};
pub use jobs::{
    job_nodes_of, pack_node_ids, scan_runs, scan_runs_twice, unpack_node_ids, NewRun, RunInserter,
    RunRow, RunVisitor,
};

use crate::error::Result;
use crate::fast_hash::FastMap;
use lemonade_sql::rusqlite::{params, Connection, OptionalExtension, Row};
use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

/// Opens (and migrates) lemon.db.
pub fn open(path: &Path, busy_timeout: Duration) -> Result<Connection> {
    let conn = lemonade_sql::open(path, lemonade_sql::Schema::Lemon, busy_timeout)?;
    // 32 MB of page cache: a big ingest or a scoring pass over a million
    // jobs otherwise spends its time re-reading pages.
    conn.pragma_update(None, "cache_size", -32_768)?;
    Ok(conn)
}

/// Column `i` of `r` as text borrowed from the row (`None` for NULL), for
/// readers of many rows that need not own their strings.
pub(crate) fn text_of<'r>(r: &'r Row<'r>, i: usize) -> Result<Option<&'r str>> {
    Ok(r.get_ref(i)?
        .as_str_or_null()
        .map_err(lemonade_sql::rusqlite::Error::from)?)
}

/// Begins a transaction by hand, for writers that commit in batches.
pub fn begin(conn: &Connection) -> Result<()> {
    Ok(conn.execute_batch("BEGIN")?)
}

/// Commits the transaction of [`begin`].
pub fn commit(conn: &Connection) -> Result<()> {
    Ok(conn.execute_batch("COMMIT")?)
}

/// Rolls back the transaction of [`begin`].
pub fn rollback(conn: &Connection) -> Result<()> {
    Ok(conn.execute_batch("ROLLBACK")?)
}

/// Node name → id, filled from the `nodes` table and extended on demand.
#[derive(Debug, Default)]
pub struct NodeIds {
    ids: FastMap<String, i64>,
}

impl NodeIds {
    /// Loads every known node.
    pub fn load(conn: &Connection) -> Result<NodeIds> {
        let mut stmt = conn.prepare("SELECT name, id FROM nodes")?;
        let ids = stmt
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))?
            .collect::<Result<FastMap<_, _>, _>>()?;
        Ok(NodeIds { ids })
    }

    /// The id of `name`, inserting the node when new. Call inside the
    /// transaction that uses the id, so a rollback cannot leave a dangling id
    /// in the cache: on rollback, drop the cache.
    pub fn get_or_insert(&mut self, conn: &Connection, name: &str) -> Result<i64> {
        if let Some(&id) = self.ids.get(name) {
            return Ok(id);
        }
        conn.prepare_cached("INSERT INTO nodes(name) VALUES (?1) ON CONFLICT(name) DO NOTHING")?
            .execute([name])?;
        let id: i64 = conn
            .prepare_cached("SELECT id FROM nodes WHERE name = ?1")?
            .query_row([name], |r| r.get(0))?;
        self.ids.insert(name.to_string(), id);
        Ok(id)
    }

    /// The id of a known node.
    pub fn get(&self, name: &str) -> Option<i64> {
        self.ids.get(name).copied()
    }
}

/// The largest node id (0 with no node).
pub fn max_node_id(conn: &Connection) -> Result<i64> {
    Ok(conn.query_row("SELECT ifnull(max(id), 0) FROM nodes", [], |r| r.get(0))?)
}

/// Id → name of every node.
pub fn node_names(conn: &Connection) -> Result<HashMap<i64, String>> {
    let mut stmt = conn.prepare("SELECT id, name FROM nodes")?;
    let names = stmt
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<HashMap<_, _>, _>>()?;
    Ok(names)
}

/// A watermark's value.
pub fn watermark(conn: &Connection, source: &str) -> Result<Option<i64>> {
    Ok(conn
        .query_row(
            "SELECT value FROM watermarks WHERE source = ?1",
            [source],
            |r| r.get(0),
        )
        .optional()?)
}

/// Sets a watermark to `value`, or keeps the larger one when `monotonic`.
pub fn set_watermark(
    conn: &Connection,
    source: &str,
    value: i64,
    now: i64,
    monotonic: bool,
) -> Result<()> {
    let sql = if monotonic {
        "INSERT INTO watermarks(source, value, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(source) DO UPDATE SET value = max(value, excluded.value), updated_at = excluded.updated_at"
    } else {
        "INSERT INTO watermarks(source, value, updated_at) VALUES (?1, ?2, ?3)
         ON CONFLICT(source) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at"
    };
    conn.prepare_cached(sql)?
        .execute(params![source, value, now])?;
    Ok(())
}

/// Watermark of the sacct windows: the end of the last window ingested.
pub const WM_SACCT: &str = "sacct";
/// Watermark of the job history: the latest end time of any stored run.
pub const WM_JOBS_UNTIL: &str = "jobs_until";

/// Until when the job history is complete: the later of the two job watermarks.
pub fn history_until(conn: &Connection) -> Result<Option<i64>> {
    Ok(conn.query_row(
        "SELECT max(value) FROM watermarks WHERE source IN (?1, ?2)",
        [WM_SACCT, WM_JOBS_UNTIL],
        |r| r.get(0),
    )?)
}

/// Records one ingest of a source.
#[allow(clippy::too_many_arguments)]
pub fn record_ingest(
    conn: &Connection,
    started_at: i64,
    source: &str,
    rows_read: u64,
    inserted: u64,
    skipped: u64,
    ok: bool,
    error: Option<&str>,
) -> Result<()> {
    conn.execute(
        "INSERT INTO ingests(started_at, source, rows_read, inserted, skipped, ok, error)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
        params![
            started_at,
            source,
            rows_read as i64,
            inserted as i64,
            skipped as i64,
            ok,
            error
        ],
    )?;
    Ok(())
}

/// Parses a time as Slurm prints it with `SLURM_TIME_FORMAT=%s` (unix
/// seconds), or as ISO `YYYY-MM-DDTHH:MM:SS` (read as UTC) for histories
/// exported without it. `Unknown`, `None` and empty are `Ok(None)`.
pub fn parse_time(s: &str) -> Result<Option<i64>, String> {
    // UTC repeats no hour: every time has one reading.
    let utc =
        crate::time_zone::Zone::Fixed(chrono::FixedOffset::east_opt(0).expect("0 is an offset"));
    crate::time_zone::parse_time(s, &utc).map(|t| t.map(|t| t.earliest()))
}

/// Formats unix seconds the way Slurm's `-S`/`-E`/`Start=` options read them:
/// local time, `YYYY-MM-DDTHH:MM:SS` (Slurm does not take unix seconds there).
pub fn slurm_time_arg(t: i64) -> String {
    use chrono::TimeZone;
    match chrono::Local.timestamp_opt(t, 0) {
        chrono::LocalResult::Single(dt) | chrono::LocalResult::Ambiguous(dt, _) => {
            dt.format("%Y-%m-%dT%H:%M:%S").to_string()
        }
        chrono::LocalResult::None => chrono::DateTime::from_timestamp(t, 0)
            .unwrap_or_default()
            .format("%Y-%m-%dT%H:%M:%S")
            .to_string(),
    }
}

/// Unix seconds as `YYYY-MM-DD HH:MM` UTC for reports.
pub fn fmt_time(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|| t.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_epoch_iso_and_unknown() {
        assert_eq!(parse_time("1700000000"), Ok(Some(1_700_000_000)));
        assert_eq!(parse_time("Unknown"), Ok(None));
        assert_eq!(parse_time(""), Ok(None));
        assert_eq!(parse_time("1970-01-01T00:01:00"), Ok(Some(60)));
        assert!(parse_time("yesterday").is_err());
    }

    #[test]
    fn watermarks_and_node_ids_persist() {
        let dir = tempfile::tempdir().unwrap();
        let conn = open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        let mut ids = NodeIds::load(&conn).unwrap();
        let a = ids.get_or_insert(&conn, "gpu001").unwrap();
        assert_eq!(ids.get_or_insert(&conn, "gpu001").unwrap(), a);
        assert_eq!(NodeIds::load(&conn).unwrap().get("gpu001"), Some(a));
        set_watermark(&conn, WM_JOBS_UNTIL, 10, 0, true).unwrap();
        set_watermark(&conn, WM_JOBS_UNTIL, 5, 0, true).unwrap();
        assert_eq!(watermark(&conn, WM_JOBS_UNTIL).unwrap(), Some(10));
        set_watermark(&conn, WM_SACCT, 20, 0, false).unwrap();
        assert_eq!(history_until(&conn).unwrap(), Some(20));
    }
}
