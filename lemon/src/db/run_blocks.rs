//! Packed copies of the runs in `jobs` (`run_blocks`, migration 0011): the
//! rows of 1024 consecutive row ids in one blob, which the pass over a
//! month's runs decodes instead of stepping through a million rows of
//! sixteen columns (half a second of SQLite for the reliability report).
//!
//! Invariant: a block that exists equals its rows. The migration's
//! triggers drop a row's block, and mark it stale, on any write to that
//! row; [`refresh`] packs the stale blocks again (the ingest calls it
//! before each commit). Readers take the rows themselves where a block is
//! missing or unreadable, so a block can only make a read faster, never
//! different.
//!
//! The format, all integers LEB128 (signed ones zigzagged):
//! `version`, `rows`, `strings`, each string as `len bytes`; then per row
//! `id − previous id`, `present` (bit flags of [`Present`]), `job_id_raw −
//! previous`, `end − previous`, the string numbers of job id and state,
//! and then, each only where its flag is set: submit and start (as `end −
//! time`), partition, gpus, node, node ids (`len bytes`, as
//! `jobs.node_ids`), user, exit code, exit signal, job name. `nnodes`
//! comes after the state, always.

use super::jobs::{read_row, RunRow, RunVisitor, SELECT_RUNS};
use crate::error::Result;
use crate::fast_hash::FastMap;
use lemonade_sql::rusqlite::{params, Connection, Statement};
use std::sync::Arc;

/// Row ids per block: `block = id >> BLOCK_SHIFT` (as in the triggers).
pub const BLOCK_SHIFT: u32 = 10;
const VERSION: u64 = 1;

/// Which optional columns a packed row carries.
struct Present;
impl Present {
    const SUBMIT: u64 = 1;
    const START: u64 = 1 << 1;
    const PARTITION: u64 = 1 << 2;
    const GPUS: u64 = 1 << 3;
    const NODE: u64 = 1 << 4;
    const NODE_IDS: u64 = 1 << 5;
    const USER: u64 = 1 << 6;
    const EXIT_CODE: u64 = 1 << 7;
    const EXIT_SIGNAL: u64 = 1 << 8;
    const JOB_NAME: u64 = 1 << 9;
}

/// Packs every stale block again; the number packed. A block whose rows
/// cannot be read (a hand-edited row of the wrong type) stays stale: its
/// readers then meet the error themselves, as they would without blocks.
pub fn refresh(conn: &Connection) -> Result<usize> {
    let stale: Vec<i64> = conn
        .prepare_cached("SELECT block FROM run_blocks_stale ORDER BY block")?
        .query_map([], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    let mut packed = 0;
    for block in stale {
        let Ok(data) = pack_rows(conn, block) else {
            continue;
        };
        if let Some((min_end, max_end, data)) = data {
            conn.prepare_cached(
                "INSERT OR REPLACE INTO run_blocks(block, min_end, max_end, data)
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![block, min_end, max_end, data])?;
            packed += 1;
        }
        conn.prepare_cached("DELETE FROM run_blocks_stale WHERE block = ?1")?
            .execute([block])?;
    }
    Ok(packed)
}

/// The rows of `block`, packed, with their ends; `None` when it has none.
fn pack_rows(conn: &Connection, block: i64) -> Result<Option<(i64, i64, Vec<u8>)>> {
    let mut packer = Packer::default();
    rows_of(conn, block, &mut |run| {
        packer.push(run);
        Ok(())
    })?;
    Ok(packer.finish())
}

/// The first and the next block's first row id of `block`.
fn bounds(block: i64) -> (i64, i64) {
    (block << BLOCK_SHIFT, (block + 1) << BLOCK_SHIFT)
}

/// Where the pass takes one block's runs from.
#[derive(Clone, Copy)]
enum Source {
    /// Its packed copy (its rows where that does not decode).
    Packed(i64),
    /// Its rows: the block is stale.
    Rows(i64),
}

/// The blocks that hold runs with an end in `(t0, t1]`, in block order,
/// and how many runs they may hold (a hint: a database whose blocks are
/// all stale must not reserve room for its whole history).
fn blocks_to_read(conn: &Connection, (t0, t1): (i64, i64)) -> Result<(Vec<Source>, usize)> {
    let blocks = |sql: &str, args: &[i64]| -> Result<Vec<i64>> {
        let mut stmt = conn.prepare_cached(sql)?;
        let blocks = stmt
            .query_map(lemonade_sql::rusqlite::params_from_iter(args), |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        Ok(blocks)
    };
    let packed = blocks(
        "SELECT block FROM run_blocks WHERE max_end > ?1 AND min_end <= ?2 ORDER BY block",
        &[t0, t1],
    )?;
    let stale = blocks("SELECT block FROM run_blocks_stale ORDER BY block", &[])?;
    let hint = (packed.len() + stale.len().min(64)) << BLOCK_SHIFT;
    let mut sources = Vec::with_capacity(packed.len() + stale.len());
    let (mut packed, mut stale) = (packed.into_iter().peekable(), stale.into_iter().peekable());
    loop {
        let from_rows = match (packed.peek(), stale.peek()) {
            (None, None) => return Ok((sources, hint)),
            (Some(p), Some(s)) => s <= p,
            (p, _) => p.is_none(),
        };
        if from_rows {
            let block = stale.next().unwrap_or_default();
            // A block both packed and stale (never left so) is read from its rows.
            packed.next_if_eq(&block);
            sources.push(Source::Rows(block));
        } else {
            sources.push(Source::Packed(packed.next().unwrap_or_default()));
        }
    }
}

/// Hands every run with an end in `(t0, t1]` to `each`, in row id order:
/// from its block where that is packed, else from its row. Reads in one
/// transaction where the caller holds none, so that blocks and rows come
/// from one snapshot.
pub(super) fn for_each_run(
    conn: &Connection,
    (t0, t1): (i64, i64),
    each: &mut dyn RunVisitor,
) -> Result<()> {
    let _snapshot = ReadSnapshot::begin(conn)?;
    let (sources, hint) = blocks_to_read(conn, (t0, t1))?;
    each.expect(hint);
    let mut visit = |run: &RunRow| -> Result<()> {
        if run.end > t0 && run.end <= t1 {
            each.visit(run)?;
        }
        Ok(())
    };
    let mut data = conn.prepare_cached("SELECT data FROM run_blocks WHERE block = ?1")?;
    for source in sources {
        let block = match source {
            Source::Rows(block) => block,
            Source::Packed(block) => {
                let read = read_packed(&mut data, block, |_, runs| {
                    runs.iter().try_for_each(&mut visit)
                })?;
                if read.is_some() {
                    continue;
                }
                block
            }
        };
        rows_of(conn, block, &mut visit)?;
    }
    Ok(())
}

/// Hands the packed copy of `block` and its runs to `with`; `None`, without
/// a call, where the block is gone or does not decode (its rows are then
/// the ones to read).
fn read_packed<T>(
    data: &mut Statement,
    block: i64,
    with: impl FnOnce(&[u8], Vec<RunRow>) -> Result<T>,
) -> Result<Option<T>> {
    let mut rows = data.query([block])?;
    let Some(row) = rows.next()? else {
        return Ok(None);
    };
    let blob = row.get_ref(0)?.as_blob().unwrap_or_default();
    match unpack(blob) {
        Some(runs) => with(blob, runs).map(Some),
        None => Ok(None),
    }
}

/// Blocks read ahead of the second visitor of [`for_each_run_twice`].
const QUEUED_BLOCKS: usize = 16;

/// [`for_each_run`] for two visitors at once, each taking every run in
/// row id order: `second` on a thread of its own, which decodes its own
/// copy of each block, while this thread reads the blocks (one snapshot)
/// and hands them to `first`. A block read from its rows is packed here
/// first, so both take the very same runs.
pub(super) fn for_each_run_twice(
    conn: &Connection,
    (t0, t1): (i64, i64),
    first: &mut dyn RunVisitor,
    second: &mut (dyn RunVisitor + Send),
) -> Result<()> {
    let _snapshot = ReadSnapshot::begin(conn)?;
    let (sources, hint) = blocks_to_read(conn, (t0, t1))?;
    first.expect(hint);
    second.expect(hint);
    let in_window = move |run: &&RunRow| run.end > t0 && run.end <= t1;
    let (blocks, queued) = std::sync::mpsc::sync_channel::<Arc<[u8]>>(QUEUED_BLOCKS);
    std::thread::scope(|s| {
        let theirs = s.spawn(move || -> Result<()> {
            for data in queued {
                let runs = unpack(&data).ok_or_else(undecodable)?;
                runs.iter()
                    .filter(in_window)
                    .try_for_each(|r| second.visit(r))?;
            }
            Ok(())
        });
        let mine = (|| -> Result<()> {
            let mut data = conn.prepare_cached("SELECT data FROM run_blocks WHERE block = ?1")?;
            for source in sources {
                let mut visit = |block: Arc<[u8]>, runs: Vec<RunRow>| -> Result<bool> {
                    if blocks.send(block).is_err() {
                        // The other visitor failed: its error is the one to tell.
                        return Ok(false);
                    }
                    runs.iter()
                        .filter(in_window)
                        .try_for_each(|r| first.visit(r))?;
                    Ok(true)
                };
                let block = match source {
                    Source::Rows(block) => block,
                    Source::Packed(block) => {
                        match read_packed(&mut data, block, |blob, runs| {
                            visit(Arc::from(blob), runs)
                        })? {
                            Some(false) => return Ok(()),
                            Some(true) => continue,
                            None => block,
                        }
                    }
                };
                let Some((_, _, packed)) = pack_rows(conn, block)? else {
                    continue;
                };
                let packed: Arc<[u8]> = packed.into();
                let runs = unpack(&packed).ok_or_else(undecodable)?;
                if !visit(packed.clone(), runs)? {
                    return Ok(());
                }
            }
            Ok(())
        })();
        drop(blocks);
        let theirs = theirs
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        theirs.and(mine)
    })
}

/// A block this code packed that does not decode: a defect, never data.
fn undecodable() -> crate::error::LemonError {
    crate::error::LemonError::Usage(
        "a packed block of runs did not decode again (a defect in lemon: please report it)"
            .to_string(),
    )
}

/// Hands the rows of `block` to `visit`, read from `jobs` itself.
fn rows_of(
    conn: &Connection,
    block: i64,
    visit: &mut dyn FnMut(&RunRow) -> Result<()>,
) -> Result<()> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT_RUNS} WHERE id >= ?1 AND id < ?2 ORDER BY id"
    ))?;
    let (lo, hi) = bounds(block);
    let mut rows = stmt.query([lo, hi])?;
    while let Some(r) = rows.next()? {
        visit(&read_row(r)?)?;
    }
    Ok(())
}

/// A read transaction for the span of a read, where the caller has none.
struct ReadSnapshot<'c>(Option<&'c Connection>);

impl<'c> ReadSnapshot<'c> {
    fn begin(conn: &'c Connection) -> Result<Self> {
        if !conn.is_autocommit() {
            return Ok(ReadSnapshot(None));
        }
        conn.execute_batch("BEGIN DEFERRED")?;
        Ok(ReadSnapshot(Some(conn)))
    }
}

impl Drop for ReadSnapshot<'_> {
    fn drop(&mut self) {
        // Nothing was written: ending it cannot lose anything.
        if let Some(conn) = self.0 {
            let _ = conn.execute_batch("COMMIT");
        }
    }
}

/// Builds one block from its rows, in row id order.
#[derive(Default)]
struct Packer {
    rows: Vec<u8>,
    count: u64,
    strings: Vec<String>,
    numbers: FastMap<String, u64>,
    previous: (i64, i64, i64),
    ends: Option<(i64, i64)>,
}

impl Packer {
    fn push(&mut self, r: &RunRow) {
        let (id, raw, end) = self.previous;
        self.previous = (r.id, r.job_id_raw, r.end);
        self.count += 1;
        self.ends = Some(
            self.ends
                .map_or((r.end, r.end), |(lo, hi)| (lo.min(r.end), hi.max(r.end))),
        );
        let present = [
            (r.submit.is_some(), Present::SUBMIT),
            (r.start.is_some(), Present::START),
            (r.partition.is_some(), Present::PARTITION),
            (r.gpus.is_some(), Present::GPUS),
            (r.node.is_some(), Present::NODE),
            (r.node_ids.is_some(), Present::NODE_IDS),
            (r.user.is_some(), Present::USER),
            (r.exit_code.is_some(), Present::EXIT_CODE),
            (r.exit_signal.is_some(), Present::EXIT_SIGNAL),
            (r.job_name.is_some(), Present::JOB_NAME),
        ]
        .iter()
        .filter(|(is, _)| *is)
        .fold(0, |flags, (_, flag)| flags | flag);
        self.signed(r.id.wrapping_sub(id));
        self.unsigned(present);
        self.signed(r.job_id_raw.wrapping_sub(raw));
        self.signed(r.end.wrapping_sub(end));
        self.unique_string(r.job_id);
        self.string(r.state);
        self.signed(r.nnodes);
        self.optional(r.submit.map(|t| r.end.wrapping_sub(t)));
        self.optional(r.start.map(|t| r.end.wrapping_sub(t)));
        self.optional_string(r.partition);
        self.optional(r.gpus);
        self.optional(r.node);
        if let Some(ids) = r.node_ids {
            self.unsigned(ids.len() as u64);
            self.rows.extend_from_slice(ids);
        }
        self.optional_string(r.user);
        self.optional(r.exit_code);
        self.optional(r.exit_signal);
        self.optional_string(r.job_name);
    }

    /// The block's (first end, last end, data); `None` without rows.
    fn finish(self) -> Option<(i64, i64, Vec<u8>)> {
        let (min_end, max_end) = self.ends?;
        let mut out = Vec::with_capacity(self.rows.len() + 16 * self.strings.len());
        for n in [VERSION, self.count, self.strings.len() as u64] {
            put_unsigned(&mut out, n);
        }
        for s in &self.strings {
            put_unsigned(&mut out, s.len() as u64);
            out.extend_from_slice(s.as_bytes());
        }
        out.extend_from_slice(&self.rows);
        Some((min_end, max_end, out))
    }

    /// A text that repeats (state, partition, user, job name): written
    /// once per block, numbered after that.
    fn string(&mut self, s: &str) {
        let n = match self.numbers.get(s) {
            Some(&n) => n,
            None => {
                let n = self.new_string(s);
                self.numbers.insert(s.to_string(), n);
                n
            }
        };
        self.unsigned(n);
    }

    /// A text that seldom repeats (the job id): not looked up.
    fn unique_string(&mut self, s: &str) {
        let n = self.new_string(s);
        self.unsigned(n);
    }

    fn new_string(&mut self, s: &str) -> u64 {
        self.strings.push(s.to_string());
        self.strings.len() as u64 - 1
    }

    fn optional_string(&mut self, s: Option<&str>) {
        if let Some(s) = s {
            self.string(s);
        }
    }

    fn optional(&mut self, v: Option<i64>) {
        if let Some(v) = v {
            self.signed(v);
        }
    }

    fn signed(&mut self, v: i64) {
        put_unsigned(&mut self.rows, ((v << 1) ^ (v >> 63)) as u64);
    }

    fn unsigned(&mut self, v: u64) {
        put_unsigned(&mut self.rows, v);
    }
}

fn put_unsigned(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The runs of a block; `None` when it is not one this code wrote.
fn unpack(data: &[u8]) -> Option<Vec<RunRow<'_>>> {
    let mut at = Cursor { data, pos: 0 };
    if at.unsigned()? != VERSION {
        return None;
    }
    let count = usize::try_from(at.unsigned()?).ok()?;
    let string_count = usize::try_from(at.unsigned()?).ok()?;
    let mut strings = Vec::with_capacity(string_count.min(data.len()));
    for _ in 0..string_count {
        let len = usize::try_from(at.unsigned()?).ok()?;
        strings.push(std::str::from_utf8(at.bytes(len)?).ok()?);
    }
    let mut runs = Vec::with_capacity(count.min(1 << BLOCK_SHIFT));
    let mut previous = RunRow::default();
    for _ in 0..count {
        previous = unpack_row(&mut at, &strings, &previous)?;
        runs.push(previous);
    }
    (at.pos == data.len()).then_some(runs)
}

fn unpack_row<'b>(
    at: &mut Cursor<'b>,
    strings: &[&'b str],
    previous: &RunRow,
) -> Option<RunRow<'b>> {
    let id = previous.id.wrapping_add(at.signed()?);
    let present = at.unsigned()?;
    let job_id_raw = previous.job_id_raw.wrapping_add(at.signed()?);
    let end = previous.end.wrapping_add(at.signed()?);
    let string = |at: &mut Cursor<'b>| strings.get(usize::try_from(at.unsigned()?).ok()?).copied();
    let has = |flag: u64| present & flag != 0;
    let job_id = string(at)?;
    let state = string(at)?;
    let nnodes = at.signed()?;
    let submit = at
        .optional(has(Present::SUBMIT))?
        .map(|d| end.wrapping_sub(d));
    let start = at
        .optional(has(Present::START))?
        .map(|d| end.wrapping_sub(d));
    let partition = if has(Present::PARTITION) {
        Some(string(at)?)
    } else {
        None
    };
    let gpus = at.optional(has(Present::GPUS))?;
    let node = at.optional(has(Present::NODE))?;
    let node_ids = if has(Present::NODE_IDS) {
        let len = usize::try_from(at.unsigned()?).ok()?;
        Some(at.bytes(len)?)
    } else {
        None
    };
    let user = if has(Present::USER) {
        Some(string(at)?)
    } else {
        None
    };
    let exit_code = at.optional(has(Present::EXIT_CODE))?;
    let exit_signal = at.optional(has(Present::EXIT_SIGNAL))?;
    let job_name = if has(Present::JOB_NAME) {
        Some(string(at)?)
    } else {
        None
    };
    Some(RunRow {
        id,
        end,
        job_id_raw,
        job_id,
        submit,
        start,
        state,
        partition,
        nnodes,
        gpus,
        node,
        node_ids,
        user,
        exit_code,
        exit_signal,
        job_name,
    })
}

/// Reads a block; every read is `None` past its end.
struct Cursor<'b> {
    data: &'b [u8],
    pos: usize,
}

impl<'b> Cursor<'b> {
    fn unsigned(&mut self) -> Option<u64> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = *self.data.get(self.pos)?;
            self.pos += 1;
            v |= u64::from(byte & 0x7f) << shift;
            if byte < 0x80 {
                return Some(v);
            }
        }
        None
    }

    fn signed(&mut self) -> Option<i64> {
        let v = self.unsigned()?;
        Some((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// `Some(None)` where the value is absent, `None` past the end.
    fn optional(&mut self, present: bool) -> Option<Option<i64>> {
        if present {
            self.signed().map(Some)
        } else {
            Some(None)
        }
    }

    fn bytes(&mut self, len: usize) -> Option<&'b [u8]> {
        let end = self.pos.checked_add(len)?;
        let bytes = self.data.get(self.pos..end)?;
        self.pos = end;
        Some(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::scan_runs;
    use lemonade_sql::rusqlite::OptionalExtension;
    use proptest::prelude::*;
    use std::time::Duration;

    /// Every run a scan hands over, as owned values.
    #[derive(Default)]
    struct Collect(Vec<String>);

    impl RunVisitor for Collect {
        fn visit(&mut self, run: &RunRow) -> Result<()> {
            self.0.push(format!("{run:?}"));
            Ok(())
        }
    }

    fn is_packed(conn: &Connection, block: i64) -> Result<bool> {
        Ok(conn
            .query_row("SELECT 1 FROM run_blocks WHERE block = ?1", [block], |_| {
                Ok(())
            })
            .optional()?
            .is_some())
    }

    fn scan(conn: &Connection, t0: i64, t1: i64) -> Vec<String> {
        let mut all = Collect::default();
        scan_runs(conn, t0, t1, &mut all).unwrap();
        all.0
    }

    fn db() -> (tempfile::TempDir, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let conn = crate::db::open(&dir.path().join("l.db"), Duration::from_secs(1)).unwrap();
        (dir, conn)
    }

    /// Rows with every column null that may be, odd texts, ids that skip
    /// blocks, and ends out of order.
    fn insert_messy_rows(conn: &Connection, ids: impl Iterator<Item = i64>) {
        let mut stmt = conn
            .prepare(
                "INSERT INTO jobs(id, job_id_raw, job_id, submit_time, start_time, end_time, state,
                     partition, nnodes, nodelist, gpus, node, node_ids, user, exit_code,
                     exit_signal, job_name)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, 'x', ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            )
            .unwrap();
        for id in ids {
            let some = |k: i64| id % k != 0;
            stmt.execute(params![
                id,
                if some(7) { 1000 + id / 2 } else { -id },
                if some(5) {
                    format!("{}_{}", id / 3, id % 3)
                } else {
                    String::new()
                },
                some(3).then_some(id * 10 - 500),
                some(4).then_some(id * 10 - 100),
                (id * 37) % 5000,
                ["FAILED", "COMPLETED", "NODE_FAIL", "CANCELLED by 0", ""][id as usize % 5],
                some(6).then_some("gpu"),
                id % 9,
                some(8).then_some(id % 17 * 8),
                (id % 2 == 0).then_some(id % 40),
                (id % 2 == 1).then(|| {
                    if id % 11 == 0 {
                        Vec::new()
                    } else {
                        vec![0, 0, 1, id as u8, 0xff, 0, 0, 0]
                    }
                }),
                some(10).then(|| format!("user{}", id % 4)),
                some(12).then_some(id % 256 - 128),
                some(13).then_some(id % 64),
                some(14).then_some(if id % 15 == 0 {
                    "[validate] ünïcode"
                } else {
                    "train"
                }),
            ])
            .unwrap();
        }
    }

    #[test]
    fn a_scan_over_packed_blocks_hands_over_exactly_what_the_rows_hold() {
        let (_dir, conn) = db();
        let ids = (1..3000).chain(5000..5100).chain([1 << 20]);
        insert_messy_rows(&conn, ids);
        let windows = [
            (-1, 10_000),
            (1000, 3000),
            (0, 1),
            (4998, 4999),
            (5000, 9000),
        ];
        let from_rows: Vec<Vec<String>> = windows.iter().map(|w| scan(&conn, w.0, w.1)).collect();
        assert_eq!(from_rows[0].len(), 3100);
        assert!(refresh(&conn).unwrap() > 3);
        assert!(is_packed(&conn, 0).unwrap() && is_packed(&conn, 1 << 10).unwrap());
        for (w, rows) in windows.iter().zip(&from_rows) {
            assert_eq!(&scan(&conn, w.0, w.1), rows, "window {w:?}");
        }
    }

    #[test]
    fn a_write_to_a_row_drops_its_block_until_the_next_refresh() {
        let (_dir, conn) = db();
        insert_messy_rows(&conn, 1..2100);
        refresh(&conn).unwrap();
        assert!(is_packed(&conn, 1).unwrap());
        conn.execute("UPDATE jobs SET state = 'TIMEOUT' WHERE id = 1500", [])
            .unwrap();
        assert!(
            !is_packed(&conn, 1).unwrap(),
            "a stale block must not be read"
        );
        assert!(is_packed(&conn, 0).unwrap() && is_packed(&conn, 2).unwrap());
        let seen = scan(&conn, -1, 10_000);
        assert!(seen
            .iter()
            .any(|r| r.contains("id: 1500,") && r.contains("TIMEOUT")));
        assert_eq!(refresh(&conn).unwrap(), 1);
        assert_eq!(scan(&conn, -1, 10_000), seen);
        conn.execute("DELETE FROM jobs WHERE id = 10", []).unwrap();
        insert_messy_rows(&conn, [2100].into_iter());
        assert!(!is_packed(&conn, 0).unwrap() && !is_packed(&conn, 2).unwrap());
        assert_eq!(refresh(&conn).unwrap(), 2);
        assert_eq!(scan(&conn, -1, 10_000).len(), seen.len());
    }

    #[test]
    fn a_block_that_does_not_decode_is_read_from_its_rows() {
        let (_dir, conn) = db();
        insert_messy_rows(&conn, 1..1500);
        let from_rows = scan(&conn, -1, 10_000);
        refresh(&conn).unwrap();
        for bad in [&b""[..], b"\x02\x01\x00", b"\x01\x05\x00\x01"] {
            conn.execute("UPDATE run_blocks SET data = ?1 WHERE block = 0", [bad])
                .unwrap();
            assert_eq!(scan(&conn, -1, 10_000), from_rows);
        }
    }

    #[test]
    fn runs_stored_before_the_blocks_existed_are_packed_at_the_next_refresh() {
        let (_dir, conn) = db();
        insert_messy_rows(&conn, 1..1500);
        conn.execute_batch("DELETE FROM run_blocks_stale; DELETE FROM run_blocks;")
            .unwrap();
        let migration = include_str!("../../../sql/migrations/lemon/0011_run_blocks.sql");
        let mark = &migration[migration.rfind("INSERT OR IGNORE").unwrap()..];
        conn.execute_batch(mark).unwrap();
        assert_eq!(refresh(&conn).unwrap(), 2);
    }

    /// Both visitors of a two-visitor scan, as owned values.
    fn scan_twice(conn: &Connection, t0: i64, t1: i64) -> (Vec<String>, Vec<String>) {
        let (mut first, mut second) = (Collect::default(), Collect::default());
        crate::db::scan_runs_twice(conn, t0, t1, &mut first, &mut second).unwrap();
        (first.0, second.0)
    }

    #[test]
    fn two_visitors_each_take_what_one_visitor_takes_from_packed_stale_and_broken_blocks() {
        let (_dir, conn) = db();
        insert_messy_rows(&conn, (1..5000).chain([1 << 20]));
        let windows = [(-1, 10_000), (1000, 3000), (4998, 4999)];
        let from_rows: Vec<Vec<String>> = windows.iter().map(|w| scan(&conn, w.0, w.1)).collect();
        let check = |state: &str| {
            for (w, rows) in windows.iter().zip(&from_rows) {
                let (first, second) = scan_twice(&conn, w.0, w.1);
                assert_eq!(&first, rows, "first visitor, {state}, window {w:?}");
                assert_eq!(&second, rows, "second visitor, {state}, window {w:?}");
            }
        };
        check("every block stale");
        refresh(&conn).unwrap();
        check("every block packed");
        conn.execute("UPDATE run_blocks SET data = x'0205' WHERE block = 1", [])
            .unwrap();
        conn.execute("UPDATE jobs SET state = state WHERE id = 3000", [])
            .unwrap();
        check("one block undecodable, one stale");
    }

    /// Takes runs until the `fail_at`th, then fails.
    struct FailAt(usize);

    impl RunVisitor for FailAt {
        fn visit(&mut self, _: &RunRow) -> Result<()> {
            self.0 = self.0.checked_sub(1).ok_or_else(|| {
                crate::error::LemonError::Usage("the visitor gave up".to_string())
            })?;
            Ok(())
        }
    }

    #[test]
    fn a_two_visitor_scan_ends_with_the_error_of_whichever_visitor_failed() {
        let (_dir, conn) = db();
        insert_messy_rows(&conn, 1..5000);
        refresh(&conn).unwrap();
        for at in [0, 10, 3000] {
            let mut all = Collect::default();
            let failed = crate::db::scan_runs_twice(&conn, -1, 10_000, &mut all, &mut FailAt(at));
            assert!(
                failed.unwrap_err().to_string().contains("gave up"),
                "second fails at {at}"
            );
            let failed = crate::db::scan_runs_twice(&conn, -1, 10_000, &mut FailAt(at), &mut all);
            assert!(
                failed.unwrap_err().to_string().contains("gave up"),
                "first fails at {at}"
            );
        }
        // The snapshot was ended either way: a writer is not kept out.
        conn.execute("DELETE FROM jobs WHERE id = 1", []).unwrap();
        assert!(conn.is_autocommit());
    }

    proptest! {
        #[test]
        fn any_run_packs_and_unpacks_to_itself(
            runs in proptest::collection::vec(
                (any::<i64>(), any::<i64>(), any::<i64>(), ".{0,6}", any::<Option<i64>>(),
                 any::<Option<i64>>(), any::<Option<String>>(), any::<i64>(),
                 any::<Option<i64>>(), any::<Option<Vec<u8>>>(), any::<Option<i64>>()),
                1..40,
            )
        ) {
            let rows: Vec<RunRow> = runs
                .iter()
                .map(|(id, raw, end, job_id, submit, start, user, nnodes, gpus, ids, code)| RunRow {
                    id: *id,
                    end: *end,
                    job_id_raw: *raw,
                    job_id,
                    submit: *submit,
                    start: *start,
                    state: "FAILED",
                    partition: user.as_deref(),
                    nnodes: *nnodes,
                    gpus: *gpus,
                    node: *code,
                    node_ids: ids.as_deref(),
                    user: user.as_deref(),
                    exit_code: *code,
                    exit_signal: *gpus,
                    job_name: user.as_deref(),
                })
                .collect();
            let mut packer = Packer::default();
            rows.iter().for_each(|r| packer.push(r));
            let (_, _, data) = packer.finish().unwrap();
            prop_assert_eq!(unpack(&data).unwrap(), rows);
            // Cut anywhere, it is refused rather than misread.
            for cut in [1, data.len() / 2, data.len() - 1] {
                prop_assert!(unpack(&data[..cut]).is_none());
            }
        }
    }
}
