//! Jobs from `sacct`: reading its `-P` output and storing finished runs.
//!
//! Each row is one run of an allocation (`-X -D`): a requeued job has one row
//! per run. A run is stored once it has ended and never changes after that, so
//! a row is identified by (End, JobIDRaw) and re-ingesting any window,
//! or a whole file, inserts nothing twice. Rows are written in batches, one
//! transaction each, with the watermark in the batch's transaction: an
//! interrupted ingest loses at most the batch in flight, and re-running it
//! picks that batch up again.
//!
//! Reading is in three parts: [`layout`] (which column is what: a header line
//! or the fixed list), [`reader`] (lines → records, put back together where a
//! field held a line break) and [`row`] (a record → a run). The live ingest
//! and `--sacct-file` share all three.

pub mod layout;
pub mod reader;
pub mod row;

pub use row::gpus_of;

use super::job_logs::{HeldJobs, JobLogs};
use super::IngestStats;
use crate::db::{self, NewRun, NodeIds, RunInserter};
use crate::error::{LemonError, Result};
use crate::time_zone::Zone;
use lemonade_slurm::command::SlurmCommands;
use lemonade_sql::rusqlite::Connection;
use reader::{Reader, Stop};
use std::io::BufRead;

/// The fields of a file without a header line, in this order.
pub const SACCT_FIELDS: &str = layout::FIXED_FIELDS;

/// The fields `lemon` asks sacct for, by name: the fixed list and JobName,
/// last, so that a `|` in a job name has one place to go.
pub const LIVE_FIELDS: &str = concat!(
    "JobIDRaw,JobID,NodeList,NNodes,State,ExitCode,DerivedExitCode,Submit,Start,End,ElapsedRaw,Partition,User,AllocTRES",
    ",JobName"
);

/// [`LIVE_FIELDS`] with the job's user id and log files (issue 36), free
/// text before JobName, asked with `--expand-patterns` (sacct prints the
/// `%j` of `slurm-%j.out` as written without it). Slurm before 23.02 has no
/// StdOut and refuses the whole call ("Invalid field requested"): lemon then
/// asks again without, and asks slurmctld ([`HeldJobs`]) instead.
pub const LIVE_FIELDS_WITH_LOGS: &str = concat!(
    "JobIDRaw,JobID,NodeList,NNodes,State,ExitCode,DerivedExitCode,Submit,Start,End,ElapsedRaw,Partition,User,AllocTRES",
    ",UID,StdOut,StdErr,JobName"
);

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
    /// JobName, when the input has the column.
    pub job_name: Option<String>,
    /// Where the job's output went (StdOut, StdErr: absolute, expanded
    /// paths), when the input has them: read for its evidence (issue 36).
    pub std_out: Option<String>,
    pub std_err: Option<String>,
    /// The job user's uid (UID), when the input has it: a log must be theirs.
    pub uid: Option<u32>,
}

/// What a record of sacct output is.
#[derive(Debug, Clone, PartialEq)]
pub enum Line {
    /// A run that has ended.
    Finished(Box<JobRow>),
    /// Still pending or running: taken when a later window sees it end.
    Unfinished,
    /// A job step (`.batch`, `.extern`, `.0`): lemon reads allocations only.
    Step,
    /// Blank line or a header.
    Ignored,
}

/// Parses one line of the fixed field list (no header), ISO times in `zone`.
pub fn parse_line(line: &str, zone: &Zone) -> Result<Line, String> {
    row::parse_record(
        line.trim_end_matches(['\n', '\r']),
        &layout::Layout::fixed(),
        zone,
    )
}

/// Stores runs for one ingest, one transaction per [`BATCH_ROWS`] rows.
///
/// Rows are inserted as they are parsed, inside an open transaction, rather
/// than collected first: a million-row ingest then allocates nothing per row
/// beyond the parse itself.
pub struct JobWriter<'c> {
    conn: &'c Connection,
    runs: RunInserter<'c>,
    nodes: NodeIds,
    in_tx: bool,
    in_batch: usize,
    batch_inserted: u64,
    max_end: Option<i64>,
    now: i64,
    /// Failed runs of the open batch whose logs are read when it commits.
    logs: JobLogs,
    /// What this writer has read and stored so far.
    pub stats: IngestStats,
}

impl<'c> JobWriter<'c> {
    pub fn new(conn: &'c Connection, now: i64) -> Result<JobWriter<'c>> {
        let nodes = NodeIds::load(conn)?;
        Ok(JobWriter {
            conn,
            runs: RunInserter::new(conn)?,
            nodes,
            in_tx: false,
            in_batch: 0,
            batch_inserted: 0,
            max_end: None,
            now,
            logs: JobLogs::new(None),
            stats: IngestStats::default(),
        })
    }

    /// Classifies failed runs' logs with `catalog` rather than the defaults.
    pub fn with_catalog(mut self, catalog: Option<joblog::Catalog>) -> Self {
        self.logs = JobLogs::new(catalog);
        self
    }

    /// Asks slurmctld for the log paths of failed runs sacct names none for.
    pub fn with_held_jobs(mut self, held: HeldJobs) -> Self {
        self.logs = std::mem::replace(&mut self.logs, JobLogs::new(None)).with_held_jobs(held);
        self
    }

    /// Stores one parsed record that starts on line `number`; `where_` names
    /// it in errors (`file:12`).
    pub fn accept(
        &mut self,
        number: usize,
        parsed: Result<Line, String>,
        where_: impl FnOnce() -> String,
    ) -> Result<()> {
        match parsed {
            Ok(Line::Ignored) => {}
            Ok(Line::Unfinished) => {
                self.stats.rows_read += 1;
                self.stats.unfinished += 1;
            }
            Ok(Line::Step) => {
                self.stats.rows_read += 1;
                self.stats.steps_skipped += 1;
            }
            Ok(Line::Finished(row)) => {
                self.stats.rows_read += 1;
                self.stats.allocations += 1;
                if !self.in_tx {
                    db::begin(self.conn)?;
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
                self.stats.malformed_line(number, where_(), message);
            }
        }
        Ok(())
    }

    fn insert(&mut self, r: &JobRow) -> Result<()> {
        let single = match r.nodes.as_slice() {
            [one] => Some(self.nodes.get_or_insert(self.conn, one)?),
            _ => None,
        };
        let mut ids = Vec::new();
        if single.is_none() {
            for name in &r.nodes {
                ids.push(self.nodes.get_or_insert(self.conn, name)?);
            }
        }
        let packed = match single {
            Some(_) => None,
            None => Some(db::pack_node_ids(&mut ids)?),
        };
        let inserted = self.runs.insert(&NewRun {
            job_id_raw: r.job_id_raw,
            job_id: &r.job_id,
            submit: r.submit,
            start: r.start,
            end: r.end,
            elapsed: r.elapsed,
            state: &r.state,
            cancelled_by: r.cancelled_by,
            exit: r.exit,
            derived: r.derived,
            partition: &r.partition,
            user: &r.user,
            nnodes: r.nnodes,
            nodelist: &r.nodelist,
            gpus: r.gpus,
            alloc_tres: &r.alloc_tres,
            node: single,
            job_name: r.job_name.as_deref(),
            node_ids: packed.as_deref(),
        })?;
        self.max_end = Some(self.max_end.map_or(r.end, |m| m.max(r.end)));
        let Some(job) = inserted else {
            return Ok(());
        };
        self.batch_inserted += 1;
        self.logs.note(job, r, &mut self.stats.job_logs);
        if single.is_some() {
            return Ok(());
        }
        for node in ids {
            self.runs.insert_node(job, node)?;
        }
        Ok(())
    }

    fn rollback(&mut self) -> Result<()> {
        if self.in_tx {
            db::rollback(self.conn)?;
            self.in_tx = false;
        }
        self.in_batch = 0;
        self.batch_inserted = 0;
        self.logs.clear();
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
            db::begin(self.conn)?;
            self.in_tx = true;
        }
        let marks = (|| -> Result<()> {
            self.logs
                .classify_pending(self.conn, &mut self.stats.job_logs)?;
            if let Some(end) = self.max_end {
                db::set_watermark(self.conn, db::WM_JOBS_UNTIL, end, self.now, true)?;
            }
            if let Some(end) = sacct_window_end {
                db::set_watermark(self.conn, db::WM_SACCT, end, self.now, true)?;
            }
            // With the rows they copy, so that no reader sees one without the other.
            db::run_blocks::refresh(self.conn)?;
            Ok(())
        })();
        if let Err(e) = marks.and_then(|_| db::commit(self.conn)) {
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
            let _ = db::rollback(self.conn);
        }
    }
}

/// Records per hand-over from the parsing thread to the writing one.
const PIPE_LINES: usize = 4096;

/// Ingests sacct-format text from a reader (a file, stdin), ISO times read
/// in the local time zone.
pub fn ingest_reader(
    conn: &Connection,
    reader: impl BufRead + Send,
    name: &str,
    now: i64,
) -> Result<IngestStats> {
    ingest_reader_in(conn, reader, name, now, &Zone::Local)
}

/// Ingests sacct-format text from a reader, ISO times read in `zone`.
///
/// Parsing runs on a thread of its own, a few thousand records ahead of the
/// thread that writes SQLite: a million-row replay takes the time of the
/// writes alone.
pub fn ingest_reader_in(
    conn: &Connection,
    reader: impl BufRead + Send,
    name: &str,
    now: i64,
    zone: &Zone,
) -> Result<IngestStats> {
    ingest_reader_with(conn, reader, name, now, zone, None)
}

/// [`ingest_reader_in`], classifying failed runs' logs with `catalog`
/// (`None`: the default signatures).
pub fn ingest_reader_with(
    conn: &Connection,
    reader: impl BufRead + Send,
    name: &str,
    now: i64,
    zone: &Zone,
    catalog: Option<joblog::Catalog>,
) -> Result<IngestStats> {
    let mut w = JobWriter::new(conn, now)?.with_catalog(catalog);
    let zone = *zone;
    std::thread::scope(|s| -> Result<IngestStats> {
        type Batch = Vec<reader::NumberedLine>;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Batch>(16);
        let parser = s.spawn(move || -> Result<Reader<_>, Stop> {
            let mut records = Reader::new(reader, zone);
            let mut batch: Batch = Vec::with_capacity(PIPE_LINES);
            while let Some(record) = records.next_record()? {
                batch.push(record);
                if batch.len() == PIPE_LINES {
                    let full = std::mem::replace(&mut batch, Vec::with_capacity(PIPE_LINES));
                    if tx.send(full).is_err() {
                        // The writer stopped on an error; it reports it.
                        return Ok(records);
                    }
                }
            }
            let _ = tx.send(batch);
            Ok(records)
        });
        for batch in rx {
            for (number, parsed) in batch {
                w.accept(number, parsed, || format!("{name}:{number}"))?;
            }
        }
        let records = parser
            .join()
            .map_err(|_| LemonError::Usage(format!("{name}: the parser thread panicked")))?
            .map_err(|stop| match stop {
                Stop::Io(e) => LemonError::io(name, e),
                Stop::Format(m) => LemonError::Usage(format!("{name}: {m}")),
            })?;
        w.flush(None)?;
        let mut stats = std::mem::take(&mut w.stats);
        describe_read(&mut stats, &records, Some(&zone));
        Ok(stats)
    })
}

/// Adds to `stats` how the input was read, for the summary; `zone` is the
/// zone of ISO times (none for sacct asked for unix seconds).
fn describe_read<R>(stats: &mut IngestStats, records: &Reader<R>, zone: Option<&Zone>) {
    let layout = records.layout();
    stats.read_as = Some(if layout.from_header {
        format!("the header's {} fields", layout.width)
    } else {
        format!(
            "no header: the fixed {} fields ({SACCT_FIELDS})",
            layout.width
        )
    });
    stats.time_zone = zone.map(Zone::to_string);
    stats.invalid_utf8 += records.invalid_utf8;
    stats.reassembled += records.reassembled;
    let missing = layout.missing_optional();
    if !missing.is_empty() {
        let note = format!("the header has {missing}");
        if !stats.notes.contains(&note) {
            stats.notes.push(note);
        }
    }
}

/// Runs sacct over bounded windows from the watermark (or the start of the
/// scoring window on first use) to `now`; each window is committed with its
/// watermark, so a failure stops where it was and the next run resumes there.
///
/// sacct is asked for [`LIVE_FIELDS`] by name and prints its header (no
/// `-n`), which the same reader as `--sacct-file` maps.
pub fn ingest_from_slurm(
    conn: &Connection,
    slurm: &SlurmCommands,
    now: i64,
    window_days: u32,
    step_hours: u32,
    catalog: Option<joblog::Catalog>,
) -> Result<IngestStats> {
    let start = db::watermark(conn, db::WM_SACCT)?.unwrap_or(now - i64::from(window_days) * 86_400);
    let step = i64::from(step_hours.max(1)) * 3600;
    let mut w = JobWriter::new(conn, now)?
        .with_catalog(catalog)
        .with_held_jobs(HeldJobs::new(slurm.clone()));
    let mut fields = LIVE_FIELDS_WITH_LOGS;
    let mut t0 = start;
    while t0 < now {
        let t1 = (t0 + step).min(now);
        let (s, e) = (db::slurm_time_arg(t0), db::slurm_time_arg(t1));
        let mut args = vec![
            "-X",
            "-a",
            "-D",
            "-P",
            "--noconvert",
            "-S",
            &s,
            "-E",
            &e,
            "-o",
            fields,
        ];
        if fields == LIVE_FIELDS_WITH_LOGS {
            args.push("--expand-patterns");
        }
        let what = || format!("sacct -S {s} -E {e}");
        let out = match slurm.run_with_env("sacct", &args, &[("SLURM_TIME_FORMAT", "%s")]) {
            // An older sacct: no StdOut field, or no --expand-patterns.
            Err(source)
                if fields != LIVE_FIELDS
                    && ["Invalid field", "unrecognized option"]
                        .iter()
                        .any(|m| source.to_string().contains(m)) =>
            {
                fields = LIVE_FIELDS;
                continue;
            }
            out => out.map_err(|source| LemonError::Slurm {
                what: what(),
                source,
            })?,
        };
        // Times are unix seconds (SLURM_TIME_FORMAT); the zone reads none.
        let mut records = Reader::new(out.stdout.as_bytes(), Zone::Local);
        loop {
            let next = records.next_record().map_err(|stop| match stop {
                Stop::Io(e) => LemonError::io(what(), e),
                Stop::Format(m) => LemonError::Usage(format!("{}: {m}", what())),
            })?;
            let Some((number, parsed)) = next else { break };
            w.accept(number, parsed, || format!("{}, line {number}", what()))?;
        }
        describe_read(&mut w.stats, &records, None);
        w.flush(Some(t1))?;
        t0 = t1;
    }
    Ok(std::mem::take(&mut w.stats))
}
