//! Small helpers over lemon.db shared by the ingesters and the scoring:
//! node ids, watermarks, ingest bookkeeping.

use crate::error::Result;
use crate::fast_hash::FastMap;
use lemonade_sql::rusqlite::types::ValueRef;
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

/// Packs a run's node ids as `jobs.node_ids` holds them (migration 0005):
/// ascending, without repeats, four bytes each, big-endian. Sorts `ids`.
pub fn pack_node_ids(ids: &mut Vec<i64>) -> Result<Vec<u8>> {
    ids.sort_unstable();
    ids.dedup();
    let mut packed = Vec::with_capacity(ids.len() * 4);
    for &id in ids.iter() {
        let id = u32::try_from(id)
            .map_err(|_| crate::error::LemonError::Usage(format!("node id {id} out of range")))?;
        packed.extend_from_slice(&id.to_be_bytes());
    }
    Ok(packed)
}

/// The node ids of a packed `jobs.node_ids`, in its (ascending) order.
pub fn unpack_node_ids(packed: &[u8]) -> impl Iterator<Item = i64> + '_ {
    packed
        .chunks_exact(4)
        .map(|b| i64::from(u32::from_be_bytes([b[0], b[1], b[2], b[3]])))
}

/// One stored run as [`scan_runs`] reads it: its id and end, and the
/// other columns read on demand (a column costs as much as a row's step,
/// and scoring needs fewer of them than the reliability report).
pub struct RunRow<'r> {
    row: &'r Row<'r>,
    pub id: i64,
    pub end: i64,
}

/// The columns of [`scan_runs`]'s query, by place.
mod col {
    pub const RAW: usize = 1;
    pub const JOB_ID: usize = 2;
    pub const SUBMIT: usize = 3;
    pub const START: usize = 4;
    pub const STATE: usize = 6;
    pub const PARTITION: usize = 7;
    pub const NNODES: usize = 8;
    pub const GPUS: usize = 9;
    pub const NODE: usize = 10;
    pub const NODE_IDS: usize = 11;
    pub const USER: usize = 12;
    pub const EXIT_CODE: usize = 13;
    pub const EXIT_SIGNAL: usize = 14;
}

impl<'r> RunRow<'r> {
    fn text(&self, i: usize) -> Result<Option<&'r str>> {
        Ok(self
            .row
            .get_ref(i)?
            .as_str_or_null()
            .map_err(lemonade_sql::rusqlite::Error::from)?)
    }

    fn int(&self, i: usize) -> Result<Option<i64>> {
        Ok(self.row.get(i)?)
    }

    pub fn job_id_raw(&self) -> Result<i64> {
        Ok(self.row.get(col::RAW)?)
    }

    /// JobID as users see it.
    pub fn job_id(&self) -> Result<&'r str> {
        Ok(self.text(col::JOB_ID)?.unwrap_or(""))
    }

    pub fn submit(&self) -> Result<Option<i64>> {
        self.int(col::SUBMIT)
    }

    /// `None`: the run never started.
    pub fn start(&self) -> Result<Option<i64>> {
        self.int(col::START)
    }

    /// sacct's State.
    pub fn state(&self) -> Result<&'r str> {
        Ok(self.text(col::STATE)?.unwrap_or(""))
    }

    pub fn partition(&self) -> Result<Option<&'r str>> {
        self.text(col::PARTITION)
    }

    pub fn nnodes(&self) -> Result<i64> {
        Ok(self.row.get(col::NNODES)?)
    }

    /// `gres/gpu` of AllocTRES.
    pub fn gpus(&self) -> Result<Option<i64>> {
        self.int(col::GPUS)
    }

    /// The node of a one-node run.
    pub fn node(&self) -> Result<Option<i64>> {
        self.int(col::NODE)
    }

    /// The other runs' nodes, packed ([`unpack_node_ids`]); `None` where
    /// the writer left them in `job_nodes` only ([`job_nodes_of`]).
    pub fn node_ids(&self) -> Result<Option<&'r [u8]>> {
        Ok(match self.row.get_ref(col::NODE_IDS)? {
            ValueRef::Null => None,
            v => Some(v.as_bytes().map_err(lemonade_sql::rusqlite::Error::from)?),
        })
    }

    pub fn user(&self) -> Result<Option<&'r str>> {
        self.text(col::USER)
    }

    pub fn exit_code(&self) -> Result<Option<i64>> {
        self.int(col::EXIT_CODE)
    }

    pub fn exit_signal(&self) -> Result<Option<i64>> {
        self.int(col::EXIT_SIGNAL)
    }
}

/// What takes the runs of [`scan_runs`].
pub trait RunVisitor {
    /// At most `runs` runs follow: room for them can be made at once.
    fn expect(&mut self, _runs: usize) {}

    fn visit(&mut self, run: &RunRow) -> Result<()>;
}

/// Hands every run that ended in `(t0, t1]` to `each`, in row id order.
///
/// One sequential pass over the table from the first id that ends in the
/// range, rather than the end-time index: following the index costs a
/// lookup in the table per row, and ids follow end times closely (the
/// ingest stores each window's runs together).
pub fn scan_runs(conn: &Connection, t0: i64, t1: i64, each: &mut dyn RunVisitor) -> Result<()> {
    let (first, last): (Option<i64>, Option<i64>) = conn.query_row(
        "SELECT (SELECT min(id) FROM jobs WHERE end_time > ?1 AND end_time <= ?2),
                (SELECT max(id) FROM jobs)",
        params![t0, t1],
        |r| Ok((r.get(0)?, r.get(1)?)),
    )?;
    let (Some(first), Some(last)) = (first, last) else {
        return Ok(());
    };
    each.expect(usize::try_from(last - first + 1).unwrap_or(0));
    let mut stmt = conn.prepare_cached(
        "SELECT id, job_id_raw, job_id, submit_time, start_time, end_time, state, partition,
                nnodes, gpus, node, node_ids, user, exit_code, exit_signal
         FROM jobs WHERE id >= ?1 ORDER BY id",
    )?;
    let mut rows = stmt.query([first])?;
    while let Some(r) = rows.next()? {
        let end: i64 = r.get(5)?;
        if end <= t0 || end > t1 {
            continue;
        }
        each.visit(&RunRow {
            row: r,
            id: r.get(0)?,
            end,
        })?;
    }
    Ok(())
}

/// The nodes of run `job` in `job_nodes`, ascending: for rows stored
/// without `jobs.node_ids`.
pub fn job_nodes_of(conn: &Connection, job: i64) -> Result<Vec<i64>> {
    let mut stmt =
        conn.prepare_cached("SELECT node FROM job_nodes WHERE job = ?1 ORDER BY node")?;
    let nodes = stmt
        .query_map([job], |r| r.get(0))?
        .collect::<Result<Vec<i64>, _>>()?;
    Ok(nodes)
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

/// Parses a time as Slurm prints it with `SLURM_TIME_FORMAT=%s` (unix
/// seconds), or as ISO `YYYY-MM-DDTHH:MM:SS` (read as UTC) for histories
/// exported without it. `Unknown`, `None` and empty are `Ok(None)`.
pub fn parse_time(s: &str) -> Result<Option<i64>, String> {
    // UTC repeats no hour: every time has one reading.
    let utc = crate::ingest::time_zone::Zone::Fixed(
        chrono::FixedOffset::east_opt(0).expect("0 is an offset"),
    );
    crate::ingest::time_zone::parse_time(s, &utc).map(|t| t.map(|t| t.earliest()))
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
    fn packed_node_ids_read_back_sorted_without_repeats() {
        let mut ids = vec![300, 7, 70_000, 7];
        let packed = pack_node_ids(&mut ids).unwrap();
        assert_eq!(packed.len(), 12);
        assert_eq!(
            unpack_node_ids(&packed).collect::<Vec<_>>(),
            [7, 300, 70_000]
        );
        assert!(pack_node_ids(&mut vec![-1]).is_err());
    }

    #[test]
    fn the_migration_packs_the_nodes_of_runs_already_stored() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("l.db");
        let conn = open(&path, Duration::from_secs(1)).unwrap();
        // A database as the schema before node_ids left it.
        conn.execute_batch(
            "INSERT INTO nodes(id, name) VALUES (1, 'a'), (2, 'b'), (300, 'c');
             INSERT INTO jobs(id, job_id_raw, job_id, end_time, state, nnodes, nodelist, node)
                 VALUES (1, 1, '1', 10, 'FAILED', 3, 'x', NULL),
                        (2, 2, '2', 10, 'FAILED', 1, 'a', 1),
                        (3, 3, '3', 10, 'FAILED', 0, 'None', NULL);
             INSERT INTO job_nodes(job, node) VALUES (1, 300), (1, 2), (1, 1);",
        )
        .unwrap();
        let migration = include_str!("../../sql/migrations/lemon/0005_job_node_ids.sql");
        let update = &migration[migration.find("UPDATE").unwrap()..];
        conn.execute_batch(update).unwrap();
        let packed = |id: i64| -> Option<Vec<u8>> {
            conn.query_row("SELECT node_ids FROM jobs WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .unwrap()
        };
        let ids = packed(1).unwrap();
        assert_eq!(unpack_node_ids(&ids).collect::<Vec<_>>(), [1, 2, 300]);
        assert_eq!(packed(2), None);
        assert_eq!(packed(3), Some(Vec::new()));
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
