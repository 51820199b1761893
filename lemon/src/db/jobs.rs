//! The runs of jobs (`jobs`, `job_nodes`): the one pass over a window's
//! runs that scoring and the reliability report share, and how a run's
//! nodes are packed with it.

use crate::error::Result;
use lemonade_sql::rusqlite::types::ValueRef;
use lemonade_sql::rusqlite::{params, Connection, Row, Statement};

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

/// One stored run as [`scan_runs`] hands it over: the columns the
/// readers of the pass use, from its row or its packed block.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunRow<'r> {
    pub id: i64,
    pub end: i64,
    pub job_id_raw: i64,
    /// JobID as users see it.
    pub job_id: &'r str,
    pub submit: Option<i64>,
    /// `None`: the run never started.
    pub start: Option<i64>,
    /// sacct's State.
    pub state: &'r str,
    pub partition: Option<&'r str>,
    pub nnodes: i64,
    /// `gres/gpu` of AllocTRES.
    pub gpus: Option<i64>,
    /// The node of a one-node run.
    pub node: Option<i64>,
    /// The other runs' nodes, packed ([`unpack_node_ids`]); `None` where
    /// the writer left them in `job_nodes` only ([`job_nodes_of`]).
    pub node_ids: Option<&'r [u8]>,
    pub user: Option<&'r str>,
    pub exit_code: Option<i64>,
    pub exit_signal: Option<i64>,
    /// sacct's JobName, where the history had the column.
    pub job_name: Option<&'r str>,
}

/// The columns of [`RunRow`], in [`read_row`]'s order; a `WHERE` follows.
pub(super) const SELECT_RUNS: &str =
    "SELECT id, job_id_raw, job_id, submit_time, start_time, end_time, state, partition,
            nnodes, gpus, node, node_ids, user, exit_code, exit_signal, job_name
     FROM jobs";

/// A row of [`SELECT_RUNS`].
pub(super) fn read_row<'r>(r: &'r Row<'r>) -> Result<RunRow<'r>> {
    let text = |i: usize| super::text_of(r, i);
    Ok(RunRow {
        id: r.get(0)?,
        job_id_raw: r.get(1)?,
        job_id: text(2)?.unwrap_or(""),
        submit: r.get(3)?,
        start: r.get(4)?,
        end: r.get(5)?,
        state: text(6)?.unwrap_or(""),
        partition: text(7)?,
        nnodes: r.get(8)?,
        gpus: r.get(9)?,
        node: r.get(10)?,
        node_ids: match r.get_ref(11)? {
            ValueRef::Null => None,
            v => Some(v.as_bytes().map_err(lemonade_sql::rusqlite::Error::from)?),
        },
        user: text(12)?,
        exit_code: r.get(13)?,
        exit_signal: r.get(14)?,
        job_name: text(15)?,
    })
}

/// What takes the runs of [`scan_runs`].
pub trait RunVisitor {
    /// At most `runs` runs follow: room for them can be made at once.
    fn expect(&mut self, _runs: usize) {}

    fn visit(&mut self, run: &RunRow) -> Result<()>;
}

/// Hands every run that ended in `(t0, t1]` to `each`, in row id order.
///
/// One pass over the runs' packed blocks ([`super::run_blocks`]), rather
/// than a million rows, skipping the blocks that end outside the window
/// (ids follow end times closely: the ingest stores each window's runs
/// together); the rows of the blocks not packed yet.
pub fn scan_runs(conn: &Connection, t0: i64, t1: i64, each: &mut dyn RunVisitor) -> Result<()> {
    super::run_blocks::for_each_run(conn, (t0, t1), each)
}

/// [`scan_runs`] for two visitors that each take every run, in row id
/// order, from one read of the blocks: `second` on a thread of its own.
pub fn scan_runs_twice(
    conn: &Connection,
    t0: i64,
    t1: i64,
    first: &mut dyn RunVisitor,
    second: &mut (dyn RunVisitor + Send),
) -> Result<()> {
    super::run_blocks::for_each_run_twice(conn, (t0, t1), first, second)
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

/// A finished run to store, as the ingest read it.
pub struct NewRun<'a> {
    pub job_id_raw: i64,
    pub job_id: &'a str,
    pub submit: Option<i64>,
    pub start: Option<i64>,
    pub end: i64,
    pub elapsed: Option<i64>,
    pub state: &'a str,
    pub cancelled_by: Option<i64>,
    /// (code, signal) of sacct's ExitCode and DerivedExitCode.
    pub exit: Option<(i64, i64)>,
    pub derived: Option<(i64, i64)>,
    pub partition: &'a str,
    pub user: &'a str,
    pub nnodes: i64,
    pub nodelist: &'a str,
    pub gpus: Option<i64>,
    pub alloc_tres: &'a str,
    /// The node of a one-node run.
    pub node: Option<i64>,
    pub job_name: Option<&'a str>,
    /// The other runs' nodes, [`pack_node_ids`]-packed.
    pub node_ids: Option<&'a [u8]>,
}

/// Stores runs and their nodes, with its statements held rather than
/// looked up per row: the statement cache's lookup showed as a tenth of a
/// big ingest's time.
pub struct RunInserter<'c> {
    conn: &'c Connection,
    ins_job: Statement<'c>,
    ins_node: Statement<'c>,
}

impl<'c> RunInserter<'c> {
    pub fn new(conn: &'c Connection) -> Result<Self> {
        Ok(RunInserter {
            conn,
            ins_job: conn.prepare(
                "INSERT OR IGNORE INTO jobs(job_id_raw, job_id, submit_time, start_time, end_time, elapsed_s,
                     state, cancelled_by, exit_code, exit_signal, derived_exit_code, derived_signal,
                     partition, user, nnodes, nodelist, gpus, alloc_tres, node, job_name, node_ids)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21)",
            )?,
            ins_node: conn.prepare("INSERT OR IGNORE INTO job_nodes(job, node) VALUES (?1, ?2)")?,
        })
    }

    /// Stores a run; its row id, or `None` for a run stored before (a run
    /// never changes once ended).
    pub fn insert(&mut self, r: &NewRun) -> Result<Option<i64>> {
        let n = self.ins_job.execute(params![
            r.job_id_raw,
            r.job_id,
            r.submit,
            r.start,
            r.end,
            r.elapsed,
            r.state,
            r.cancelled_by,
            r.exit.map(|e| e.0),
            r.exit.map(|e| e.1),
            r.derived.map(|e| e.0),
            r.derived.map(|e| e.1),
            r.partition,
            r.user,
            r.nnodes,
            r.nodelist,
            r.gpus,
            r.alloc_tres,
            r.node,
            r.job_name,
            r.node_ids,
        ])?;
        Ok((n > 0).then(|| self.conn.last_insert_rowid()))
    }

    /// Stores one node of a multi-node run in `job_nodes`.
    pub fn insert_node(&mut self, job: i64, node: i64) -> Result<()> {
        self.ins_node.execute(params![job, node])?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

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
        let conn = super::super::open(&path, Duration::from_secs(1)).unwrap();
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
        let migration = include_str!("../../../sql/migrations/lemon/0005_job_node_ids.sql");
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
}
