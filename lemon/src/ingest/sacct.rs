//! Jobs from `sacct`: parsing its `-P` output and storing finished runs.
//!
//! Each row is one run of an allocation (`-X -D`): a requeued job has one row
//! per run. A run is stored once it has ended and never changes after that, so
//! a row is identified by (End, JobIDRaw) and re-ingesting any window,
//! or a whole file, inserts nothing twice. Rows are written in batches, one
//! transaction each, with the watermark in the batch's transaction: an
//! interrupted ingest loses at most the batch in flight, and re-running it
//! picks that batch up again.

use super::IngestStats;
use crate::db::{self, NodeIds};
use crate::error::{LemonError, Result};
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::hostlist;
use lemonade_sql::rusqlite::{params, Connection, Statement};
use std::io::BufRead;

/// The fields `lemon` asks sacct for, in this order; files replayed with
/// `--sacct-file` must have the same.
pub const SACCT_FIELDS: &str = "JobIDRaw,JobID,NodeList,NNodes,State,ExitCode,DerivedExitCode,Submit,Start,End,ElapsedRaw,Partition,User,AllocTRES";
const FIELD_COUNT: usize = 14;

/// Rows per transaction.
pub const BATCH_ROWS: usize = 50_000;

/// One finished run as sacct describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRow {
    pub job_id_raw: i64,
    pub job_id: String,
    pub nodelist: String,
    pub nodes: Vec<String>,
    pub nnodes: i64,
    pub state: String,
    pub cancelled_by: Option<i64>,
    pub exit: Option<(i64, i64)>,
    pub derived: Option<(i64, i64)>,
    pub submit: Option<i64>,
    pub start: Option<i64>,
    pub end: i64,
    pub elapsed: Option<i64>,
    pub partition: String,
    pub user: String,
    pub gpus: Option<i64>,
    pub alloc_tres: String,
}

/// What a line of sacct output is.
#[derive(Debug, PartialEq)]
pub enum Line {
    /// A run that has ended.
    Finished(Box<JobRow>),
    /// Still pending or running: taken when a later window sees it end.
    Unfinished,
    /// Blank line or a header.
    Ignored,
}

/// Parses one line of `sacct -n -P -o SACCT_FIELDS` output.
pub fn parse_line(line: &str) -> Result<Line, String> {
    let line = line.trim_end_matches(['\n', '\r']);
    if line.trim().is_empty() || line.starts_with("JobIDRaw|") {
        return Ok(Line::Ignored);
    }
    let mut f = [""; FIELD_COUNT];
    let mut count = 0;
    for (i, field) in line.split('|').enumerate() {
        if i < FIELD_COUNT {
            f[i] = field;
        }
        count += 1;
    }
    if count != FIELD_COUNT {
        return Err(format!(
            "{count} fields, expected {FIELD_COUNT} ({SACCT_FIELDS})"
        ));
    }
    let job_id_raw: i64 = f[0]
        .trim()
        .parse()
        .map_err(|_| format!("JobIDRaw `{}` is not a number", f[0]))?;
    let (state, cancelled_by) = parse_state(f[4])?;
    let end = db::parse_time(f[9]).map_err(|e| format!("End: {e}"))?;
    let Some(end) = end else {
        return Ok(Line::Unfinished);
    };
    if matches!(state, "RUNNING" | "PENDING" | "SUSPENDED" | "RESIZING") {
        return Ok(Line::Unfinished);
    }
    let submit = db::parse_time(f[7]).map_err(|e| format!("Submit: {e}"))?;
    let start = db::parse_time(f[8]).map_err(|e| format!("Start: {e}"))?;
    if let Some(s) = start {
        if s > end {
            return Err(format!("Start {s} is after End {end}"));
        }
    }
    let nnodes = f[3]
        .trim()
        .parse::<i64>()
        .map_err(|_| format!("NNodes `{}` is not a number", f[3]))?;
    let nodes = match f[2].trim() {
        // The common case, one plain node, without the hostlist machinery.
        one if !one.is_empty()
            && one != "None assigned"
            && one != "(null)"
            && !one.contains(['[', ']', ',']) =>
        {
            vec![one.to_string()]
        }
        list => hostlist::expand(list).map_err(|e| format!("NodeList: {e}"))?,
    };
    let elapsed = match f[10].trim() {
        "" => None,
        s => Some(
            s.parse::<i64>()
                .map_err(|_| format!("ElapsedRaw `{s}` is not a number"))?,
        ),
    };
    Ok(Line::Finished(Box::new(JobRow {
        job_id_raw,
        job_id: f[1].trim().to_string(),
        nodelist: f[2].trim().to_string(),
        nodes,
        nnodes,
        state: state.to_string(),
        cancelled_by,
        exit: parse_exit(f[5]).map_err(|e| format!("ExitCode: {e}"))?,
        derived: parse_exit(f[6]).map_err(|e| format!("DerivedExitCode: {e}"))?,
        submit,
        start,
        end,
        elapsed,
        partition: f[11].trim().to_string(),
        user: f[12].trim().to_string(),
        gpus: gpus_of(f[13]),
        alloc_tres: f[13].trim().to_string(),
    })))
}

/// `CANCELLED by 1234` → (`CANCELLED`, Some(1234)).
fn parse_state(s: &str) -> Result<(&str, Option<i64>), String> {
    let s = s.trim();
    let (word, by) = match s.split_once(" by ") {
        Some((w, uid)) => (
            w.trim(),
            Some(
                uid.trim()
                    .parse::<i64>()
                    .map_err(|_| format!("State `{s}`: uid is not a number"))?,
            ),
        ),
        None => (s, None),
    };
    if word.is_empty() || !word.bytes().all(|b| b.is_ascii_uppercase() || b == b'_') {
        return Err(format!("State `{s}` is not a Slurm job state"));
    }
    Ok((word, by))
}

/// `exit:signal`, e.g. `1:0`; empty is unknown.
fn parse_exit(s: &str) -> Result<Option<(i64, i64)>, String> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    let (a, b) = s
        .split_once(':')
        .ok_or_else(|| format!("`{s}` is not N:M"))?;
    match (a.parse(), b.parse()) {
        (Ok(a), Ok(b)) => Ok(Some((a, b))),
        _ => Err(format!("`{s}` is not N:M")),
    }
}

/// GPUs of the allocation from AllocTRES (`...,gres/gpu=8,...`). The plain
/// `gres/gpu` entry is the total; typed ones (`gres/gpu:a100=8`) only when it is missing.
pub fn gpus_of(tres: &str) -> Option<i64> {
    let mut typed = None;
    for item in tres.split(',') {
        let Some((k, v)) = item.trim().split_once('=') else {
            continue;
        };
        if k == "gres/gpu" {
            return v.parse().ok();
        }
        if k.starts_with("gres/gpu:") && typed.is_none() {
            typed = v.parse().ok();
        }
    }
    typed
}

/// Stores runs for one ingest, one transaction per [`BATCH_ROWS`] rows.
///
/// Rows are inserted as they are parsed, inside an open transaction, rather
/// than collected first: a million-row ingest then allocates nothing per row
/// beyond the parse itself.
pub struct JobWriter<'c> {
    conn: &'c Connection,
    // Held rather than looked up per row: the statement cache's lookup showed
    // as a tenth of a big ingest's time.
    ins_job: Statement<'c>,
    ins_node: Statement<'c>,
    nodes: NodeIds,
    in_tx: bool,
    in_batch: usize,
    batch_inserted: u64,
    max_end: Option<i64>,
    now: i64,
    /// What this writer has read and stored so far.
    pub stats: IngestStats,
}

impl<'c> JobWriter<'c> {
    pub fn new(conn: &'c Connection, now: i64) -> Result<JobWriter<'c>> {
        let nodes = NodeIds::load(conn)?;
        Ok(JobWriter {
            conn,
            ins_job: conn.prepare(INSERT_JOB)?,
            ins_node: conn.prepare(INSERT_JOB_NODE)?,
            nodes,
            in_tx: false,
            in_batch: 0,
            batch_inserted: 0,
            max_end: None,
            now,
            stats: IngestStats::default(),
        })
    }

    /// Parses and stores one line; `where_` names it in errors (`file:12`).
    pub fn line(&mut self, line: &str, where_: impl FnOnce() -> String) -> Result<()> {
        self.accept(parse_line(line), where_)
    }

    /// Stores one parsed line.
    pub fn accept(
        &mut self,
        parsed: Result<Line, String>,
        where_: impl FnOnce() -> String,
    ) -> Result<()> {
        match parsed {
            Ok(Line::Ignored) => {}
            Ok(Line::Unfinished) => {
                self.stats.rows_read += 1;
                self.stats.unfinished += 1;
            }
            Ok(Line::Finished(row)) => {
                self.stats.rows_read += 1;
                if !self.in_tx {
                    self.conn.execute_batch("BEGIN")?;
                    self.in_tx = true;
                }
                if let Err(e) = self.insert(&row) {
                    self.rollback()?;
                    return Err(e);
                }
                self.in_batch += 1;
                if self.in_batch >= BATCH_ROWS {
                    self.flush(None)?;
                }
            }
            Err(message) => {
                self.stats.rows_read += 1;
                self.stats.malformed(where_(), message);
            }
        }
        Ok(())
    }

    fn insert(&mut self, r: &JobRow) -> Result<()> {
        let single = match r.nodes.as_slice() {
            [one] => Some(self.nodes.get_or_insert(self.conn, one)?),
            _ => None,
        };
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
            single,
        ])?;
        self.max_end = Some(self.max_end.map_or(r.end, |m| m.max(r.end)));
        if n == 0 {
            return Ok(());
        }
        self.batch_inserted += 1;
        if single.is_some() {
            return Ok(());
        }
        let job = self.conn.last_insert_rowid();
        for name in &r.nodes {
            let node = self.nodes.get_or_insert(self.conn, name)?;
            self.ins_node.execute(params![job, node])?;
        }
        Ok(())
    }

    fn rollback(&mut self) -> Result<()> {
        if self.in_tx {
            self.conn.execute_batch("ROLLBACK")?;
            self.in_tx = false;
        }
        self.in_batch = 0;
        self.batch_inserted = 0;
        // Ids of nodes inserted by the rolled-back transaction are gone.
        self.nodes = NodeIds::load(self.conn)?;
        Ok(())
    }

    /// Commits the open batch, with the sacct watermark when this completes a
    /// window: rows and watermark land together or not at all.
    pub fn flush(&mut self, sacct_window_end: Option<i64>) -> Result<()> {
        if !self.in_tx && sacct_window_end.is_none() {
            return Ok(());
        }
        if !self.in_tx {
            self.conn.execute_batch("BEGIN")?;
            self.in_tx = true;
        }
        let marks = (|| -> Result<()> {
            if let Some(end) = self.max_end {
                db::set_watermark(self.conn, db::WM_JOBS_UNTIL, end, self.now, true)?;
            }
            if let Some(end) = sacct_window_end {
                db::set_watermark(self.conn, db::WM_SACCT, end, self.now, true)?;
            }
            Ok(())
        })();
        if let Err(e) = marks.and_then(|_| Ok(self.conn.execute_batch("COMMIT")?)) {
            self.rollback()?;
            return Err(e);
        }
        self.in_tx = false;
        self.stats.inserted += self.batch_inserted;
        self.batch_inserted = 0;
        self.in_batch = 0;
        Ok(())
    }
}

impl Drop for JobWriter<'_> {
    fn drop(&mut self) {
        // An error left a batch open: nothing of it may stay half-written.
        if self.in_tx {
            let _ = self.conn.execute_batch("ROLLBACK");
        }
    }
}

const INSERT_JOB: &str =
    "INSERT OR IGNORE INTO jobs(job_id_raw, job_id, submit_time, start_time, end_time, elapsed_s,
         state, cancelled_by, exit_code, exit_signal, derived_exit_code, derived_signal,
         partition, user, nnodes, nodelist, gpus, alloc_tres, node)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19)";
const INSERT_JOB_NODE: &str = "INSERT OR IGNORE INTO job_nodes(job, node) VALUES (?1, ?2)";

/// Lines per hand-over from the parsing thread to the writing one.
const PIPE_LINES: usize = 4096;

/// Ingests sacct-format text from a reader (a file, stdin).
///
/// Parsing runs on a thread of its own, a few thousand lines ahead of the
/// thread that writes SQLite: a million-row replay takes the time of the
/// writes alone.
pub fn ingest_reader(
    conn: &Connection,
    reader: impl BufRead + Send,
    name: &str,
    now: i64,
) -> Result<IngestStats> {
    let mut w = JobWriter::new(conn, now)?;
    std::thread::scope(|s| -> Result<IngestStats> {
        type Batch = Vec<(usize, Result<Line, String>)>;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(16);
        let parser = s.spawn(move || -> std::io::Result<()> {
            let mut reader = reader;
            let mut buf = Vec::with_capacity(512);
            let mut batch: Batch = Vec::with_capacity(PIPE_LINES);
            let mut number = 0;
            loop {
                buf.clear();
                if reader.read_until(b'\n', &mut buf)? == 0 {
                    break;
                }
                number += 1;
                batch.push((number, parse_line(&String::from_utf8_lossy(&buf))));
                if batch.len() == PIPE_LINES {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(PIPE_LINES));
                    if tx.send(full).is_err() {
                        // The writer stopped on an error; it reports it.
                        return Ok(());
                    }
                }
            }
            let _ = tx.send(batch);
            Ok(())
        });
        for batch in rx {
            for (number, parsed) in batch {
                w.accept(parsed, || format!("{name}:{number}"))?;
            }
        }
        parser
            .join()
            .map_err(|_| LemonError::Usage(format!("{name}: the parser thread panicked")))?
            .map_err(|e| LemonError::io(name, e))?;
        w.flush(None)?;
        Ok(std::mem::take(&mut w.stats))
    })
}

/// Runs sacct over bounded windows from the watermark (or the start of the
/// scoring window on first use) to `now`; each window is committed with its
/// watermark, so a failure stops where it was and the next run resumes there.
pub fn ingest_from_slurm(
    conn: &Connection,
    slurm: &SlurmCommands,
    now: i64,
    window_days: u32,
    step_hours: u32,
) -> Result<IngestStats> {
    let start = db::watermark(conn, db::WM_SACCT)?.unwrap_or(now - i64::from(window_days) * 86_400);
    let step = i64::from(step_hours.max(1)) * 3600;
    let mut w = JobWriter::new(conn, now)?;
    let mut t0 = start;
    while t0 < now {
        let t1 = (t0 + step).min(now);
        let (s, e) = (db::slurm_time_arg(t0), db::slurm_time_arg(t1));
        let args = [
            "-X",
            "-a",
            "-D",
            "-n",
            "-P",
            "--noconvert",
            "-S",
            &s,
            "-E",
            &e,
            "-o",
            SACCT_FIELDS,
        ];
        let out = slurm
            .run_with_env("sacct", &args, &[("SLURM_TIME_FORMAT", "%s")])
            .map_err(|source| LemonError::Slurm {
                what: format!("sacct -S {s} -E {e}"),
                source,
            })?;
        for (i, line) in out.stdout.lines().enumerate() {
            w.line(line, || format!("sacct -S {s} -E {e}, line {}", i + 1))?;
        }
        w.flush(Some(t1))?;
        t0 = t1;
    }
    Ok(std::mem::take(&mut w.stats))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(line: &str) -> JobRow {
        match parse_line(line).unwrap() {
            Line::Finished(r) => *r,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn parses_a_multi_node_failure() {
        let r = row("1234|1234|gpu[001-002,010]|3|FAILED|1:0|0:0|100|200|900|700|batch|alice|billing=24,cpu=24,gres/gpu=24,node=3");
        assert_eq!(r.nodes, ["gpu001", "gpu002", "gpu010"]);
        assert_eq!(r.state, "FAILED");
        assert_eq!(r.exit, Some((1, 0)));
        assert_eq!((r.submit, r.start, r.end), (Some(100), Some(200), 900));
        assert_eq!(r.gpus, Some(24));
    }

    #[test]
    fn cancelled_by_none_assigned_and_unknown_start() {
        let r =
            row("77|70_7|None assigned|1|CANCELLED by 1001|0:0|0:0|100|Unknown|150|0|batch|bob|");
        assert!(r.nodes.is_empty());
        assert_eq!(
            (r.state.as_str(), r.cancelled_by),
            ("CANCELLED", Some(1001))
        );
        assert_eq!(r.start, None);
        assert_eq!(r.job_id, "70_7");
        assert_eq!(r.gpus, None);
    }

    #[test]
    fn running_jobs_wait_for_a_later_window() {
        assert_eq!(
            parse_line("5|5|gpu001|1|RUNNING|0:0|0:0|100|200|Unknown|50|b|u|").unwrap(),
            Line::Unfinished
        );
        assert_eq!(parse_line("").unwrap(), Line::Ignored);
    }

    #[test]
    fn malformed_rows_say_why() {
        assert!(parse_line("1|1|gpu1").unwrap_err().contains("fields"));
        assert!(parse_line("x|1|gpu1|1|FAILED|1:0|0:0|1|2|3|1|b|u|")
            .unwrap_err()
            .contains("JobIDRaw"));
        assert!(parse_line("1|1|gpu[1-|1|FAILED|1:0|0:0|1|2|3|1|b|u|")
            .unwrap_err()
            .contains("NodeList"));
        assert!(parse_line("1|1|gpu1|1|failed!|1:0|0:0|1|2|3|1|b|u|")
            .unwrap_err()
            .contains("State"));
        assert!(parse_line("1|1|gpu1|1|FAILED|1:0|0:0|1|9|3|1|b|u|")
            .unwrap_err()
            .contains("after End"));
    }

    #[test]
    fn gpus_prefer_the_untyped_total() {
        assert_eq!(gpus_of("cpu=8,gres/gpu:a100=4,gres/gpu=4"), Some(4));
        assert_eq!(gpus_of("cpu=8,gres/gpu:a100=2"), Some(2));
        assert_eq!(gpus_of("cpu=8"), None);
    }
}
