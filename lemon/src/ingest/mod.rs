//! Ingest: scheduler and node history into lemon.db, incrementally.
//!
//! Each source has its own module; [`ingest`] runs those asked for and
//! records each in the `ingests` table. One failing source does not stop the
//! others, but it makes the run's ingest failed, and a failed ingest drains nothing.

pub mod events;
pub mod exclusions;
pub mod job_logs;
pub mod sacct;
pub mod spool;
pub mod tickets;
/// Where the time zones of the histories live now (a lower layer, which
/// the database helpers share); kept here for the paths that name it.
pub use crate::time_zone;

use crate::db;
use crate::error::{LemonError, Result};
use lemonade_slurm::command::SlurmCommands;
use lemonade_sql::rusqlite::Connection;
use serde::Serialize;
use std::io::BufReader;
use std::path::PathBuf;
use time_zone::Zone;

/// At most this many malformed rows are listed; all are counted.
pub const MAX_LISTED_ERRORS: usize = 20;

/// What one source gave.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct IngestStats {
    pub rows_read: u64,
    pub inserted: u64,
    /// Malformed rows skipped.
    pub skipped: u64,
    /// Runs still pending or running, left for a later ingest.
    pub unfinished: u64,
    /// (where, why) of the first malformed rows.
    pub errors: Vec<(String, String)>,
    /// Line numbers of the first malformed rows (sources read by line).
    pub malformed_lines: Vec<usize>,
    /// Jobs: finished allocations read, stored now or by an earlier ingest.
    pub allocations: u64,
    /// Jobs: step rows (`.batch`, `.extern`, `.0`) skipped; lemon reads allocations.
    pub steps_skipped: u64,
    /// Lines whose invalid UTF-8 was replaced (U+FFFD) and kept.
    pub invalid_utf8: u64,
    /// Jobs: records put back together from several lines.
    pub reassembled: u64,
    /// Jobs: which fields were read (a header's, or the fixed list).
    pub read_as: Option<String>,
    /// The time zone ISO times were read in.
    pub time_zone: Option<String>,
    /// Anything else the reader of the summary should know.
    pub notes: Vec<String>,
    /// Jobs: what the failed runs' logs said, and the logs skipped (issue 36).
    pub job_logs: job_logs::JobLogStats,
}

/// Line numbers listed in a summary line; the rest are counted.
const SUMMARY_LINES: usize = 5;

impl IngestStats {
    /// Counts a malformed row, keeping its location for the report.
    pub fn malformed(&mut self, where_: String, message: String) {
        self.skipped += 1;
        if self.errors.len() < MAX_LISTED_ERRORS {
            self.errors.push((where_, message));
        }
    }

    /// Counts a malformed row that starts on line `number`.
    pub fn malformed_line(&mut self, number: usize, where_: String, message: String) {
        if self.malformed_lines.len() < MAX_LISTED_ERRORS {
            self.malformed_lines.push(number);
        }
        self.malformed(where_, message);
    }

    /// The summary line of a job source: what was read and what became of it.
    fn jobs_summary(&self) -> String {
        let mut s = format!(
            "{} rows read: {} allocations ingested ({} new), {} steps skipped",
            self.rows_read, self.allocations, self.inserted, self.steps_skipped
        );
        if self.unfinished > 0 {
            s.push_str(&format!(", {} still running", self.unfinished));
        }
        s.push_str(&format!(", {} malformed", self.skipped));
        if !self.malformed_lines.is_empty() {
            let shown: Vec<String> = self
                .malformed_lines
                .iter()
                .take(SUMMARY_LINES)
                .map(usize::to_string)
                .collect();
            let more = if self.skipped as usize > shown.len() {
                ", ..."
            } else {
                ""
            };
            let word = if shown.len() == 1 { "line" } else { "lines" };
            s.push_str(&format!(" ({word} {}{more})", shown.join(", ")));
        }
        if let Some(zone) = &self.time_zone {
            s.push_str(&format!("; times in {zone}"));
        }
        s
    }
}

/// Where ingest reads from, resolved from config and flags.
#[derive(Debug, Clone, Default)]
pub struct Sources {
    pub sacct_file: Option<PathBuf>,
    pub events_file: Option<PathBuf>,
    pub exclusions_file: Option<PathBuf>,
    pub spool_dir: Option<PathBuf>,
    /// Ask Slurm for whatever no file replaces.
    pub use_slurm: bool,
    /// `--time-zone`: the zone of ISO times in the files.
    pub time_zone: Option<String>,
}

/// The outcome of one ingest of every source.
#[derive(Debug, Clone, Default, Serialize)]
pub struct IngestReport {
    pub sources: Vec<(String, IngestStats)>,
    /// Sources that failed, with the error.
    pub failures: Vec<(String, String)>,
}

impl IngestReport {
    /// True when every source asked for was read.
    pub fn ok(&self) -> bool {
        self.failures.is_empty()
    }

    /// Human summary, one line per source plus the listed malformed rows.
    pub fn text(&self) -> String {
        let mut s = String::new();
        for (name, st) in &self.sources {
            if st.read_as.is_some() {
                s.push_str(&format!("ingest {name}: {}\n", st.jobs_summary()));
            } else {
                s.push_str(&format!(
                    "ingest {name}: {} rows read, {} new, {} malformed skipped{}\n",
                    st.rows_read,
                    st.inserted,
                    st.skipped,
                    if st.unfinished > 0 {
                        format!(", {} still running", st.unfinished)
                    } else {
                        String::new()
                    }
                ));
            }
            let mut read = Vec::new();
            if let Some(how) = &st.read_as {
                read.push(format!("read with {how}"));
            }
            if st.reassembled > 0 {
                read.push(format!(
                    "{} records put back together from several lines",
                    st.reassembled
                ));
            }
            if st.invalid_utf8 > 0 {
                read.push(format!(
                    "{} lines with invalid UTF-8 kept (bytes replaced by U+FFFD)",
                    st.invalid_utf8
                ));
            }
            read.extend(st.notes.iter().cloned());
            read.extend(st.job_logs.summary());
            if !read.is_empty() {
                s.push_str(&format!("  {}\n", read.join("; ")));
            }
            for (w, m) in &st.errors {
                s.push_str(&format!("  skipped {w}: {m}\n"));
            }
            if st.skipped as usize > st.errors.len() {
                s.push_str(&format!(
                    "  ... and {} more malformed rows\n",
                    st.skipped as usize - st.errors.len()
                ));
            }
        }
        for (name, e) in &self.failures {
            s.push_str(&format!("ingest {name} FAILED: {e}\n"));
        }
        s
    }
}

/// Settings the ingest needs.
pub struct IngestContext<'a> {
    pub slurm: &'a SlurmCommands,
    pub now: i64,
    pub window_days: u32,
    pub sacct_window_hours: u32,
    /// `[lemon] time_zone`: the zone of ISO times when `--time-zone` is not given.
    pub time_zone: Option<String>,
    /// `[lemon] signatures`: the site's job-log signatures (issue 36).
    pub signatures: Option<PathBuf>,
}

impl<'a> IngestContext<'a> {
    /// The settings of config, at `now`: what `lemon ingest`, `lemon run`
    /// and the `lemon watch` service's spool feed ingest with.
    pub fn of(cfg: &lemonade_config::Config, slurm: &'a SlurmCommands, now: i64) -> Self {
        IngestContext {
            slurm,
            now,
            window_days: cfg.lemon.window_days,
            sacct_window_hours: cfg.lemon.sacct_window_hours,
            time_zone: cfg.lemon.time_zone.clone(),
            signatures: cfg.lemon.signatures.clone(),
        }
    }
}

/// The zone ISO times in files are read in: `--time-zone`, then
/// `[lemon] time_zone`, then the local zone (where sacct printed them).
pub fn resolve_zone(flag: Option<&str>, config: Option<&str>) -> Result<Zone> {
    match (flag, config) {
        (Some(z), _) => Zone::parse(z).map_err(|e| LemonError::Usage(format!("--time-zone: {e}"))),
        (None, Some(z)) => {
            Zone::parse(z).map_err(|e| LemonError::Usage(format!("config [lemon] time_zone: {e}")))
        }
        (None, None) => Ok(Zone::Local),
    }
}

/// Ingests every source of `sources`.
pub fn ingest(
    conn: &mut Connection,
    sources: &Sources,
    ctx: &IngestContext<'_>,
) -> Result<IngestReport> {
    let mut report = IngestReport::default();
    let now = ctx.now;
    let zone = resolve_zone(sources.time_zone.as_deref(), ctx.time_zone.as_deref())?;
    let catalog = job_logs::load_catalog(ctx.signatures.as_deref())?;

    let jobs = ingest_jobs(conn, sources, ctx, &zone, catalog);
    let events = ingest_events(conn, sources, ctx, &zone);
    let excl = ingest_exclusions(conn, sources, ctx);
    let spool = sources.spool_dir.as_ref().map(|dir| {
        (
            format!("spool ({})", dir.display()),
            spool::ingest_dir(conn, dir),
        )
    });

    for (name, result) in [jobs, events, excl, spool].into_iter().flatten() {
        match result.and_then(nothing_readable) {
            Ok(stats) => {
                db::record_ingest(
                    conn,
                    now,
                    &name,
                    stats.rows_read,
                    stats.inserted,
                    stats.skipped,
                    true,
                    None,
                )?;
                report.sources.push((name, stats));
            }
            Err(e) => {
                let msg = e.to_string();
                db::record_ingest(conn, now, &name, 0, 0, 0, false, Some(&msg))?;
                report.failures.push((name, msg));
            }
        }
    }
    Ok(report)
}

/// A source of which every row was malformed read nothing: a file in
/// another format (a `sacct` without `-P`, the wrong columns), not an
/// empty history. Failing it keeps `lemon run` from judging and draining
/// on the history it lacks (issue 48); an empty source stays fine.
fn nothing_readable(stats: IngestStats) -> Result<IngestStats> {
    if stats.skipped == 0 || stats.rows_read > stats.skipped || stats.inserted > 0 {
        return Ok(stats);
    }
    let first = (stats.errors.first())
        .map(|(at, why)| format!(" (first: {at}: {why})"))
        .unwrap_or_default();
    Err(LemonError::Usage(format!(
        "every one of its {} rows was malformed, nothing was read{first}",
        stats.skipped
    )))
}

/// One source's name in the report and how reading it went.
type SourceResult = Option<(String, Result<IngestStats>)>;

/// The jobs: from a file, stdin (`-`), or sacct.
fn ingest_jobs(
    conn: &mut Connection,
    sources: &Sources,
    ctx: &IngestContext<'_>,
    zone: &Zone,
    catalog: joblog::Catalog,
) -> SourceResult {
    let now = ctx.now;
    match &sources.sacct_file {
        Some(path) if path.as_os_str() == "-" => Some((
            "jobs (stdin)".into(),
            sacct::ingest_reader_with(
                conn,
                BufReader::with_capacity(1 << 20, std::io::stdin()),
                "stdin",
                now,
                zone,
                Some(catalog),
            ),
        )),
        Some(path) => Some((
            format!("jobs ({})", path.display()),
            std::fs::File::open(path)
                .map_err(|e| LemonError::io(path, e))
                .and_then(|f| {
                    sacct::ingest_reader_with(
                        conn,
                        BufReader::with_capacity(1 << 20, f),
                        &path.display().to_string(),
                        now,
                        zone,
                        Some(catalog),
                    )
                }),
        )),
        None if sources.use_slurm => Some((
            "jobs (sacct)".into(),
            sacct::ingest_from_slurm(
                conn,
                ctx.slurm,
                now,
                ctx.window_days,
                ctx.sacct_window_hours,
                Some(catalog),
            ),
        )),
        None => None,
    }
}

/// The node events: from a file or sacctmgr.
fn ingest_events(
    conn: &mut Connection,
    sources: &Sources,
    ctx: &IngestContext<'_>,
    zone: &Zone,
) -> SourceResult {
    match &sources.events_file {
        Some(path) => Some((
            format!("node events ({})", path.display()),
            std::fs::read(path)
                .map_err(|e| LemonError::io(path, e))
                .and_then(|bytes| {
                    events::ingest_bytes(conn, &bytes, &path.display().to_string(), zone)
                }),
        )),
        None if sources.use_slurm => Some((
            "node events (sacctmgr)".into(),
            events::ingest_from_slurm(conn, ctx.slurm, ctx.now, ctx.window_days),
        )),
        None => None,
    }
}

/// The exclusions: from a file or squeue.
fn ingest_exclusions(
    conn: &mut Connection,
    sources: &Sources,
    ctx: &IngestContext<'_>,
) -> SourceResult {
    let now = ctx.now;
    match &sources.exclusions_file {
        Some(path) => Some((
            format!("exclusions ({})", path.display()),
            std::fs::read_to_string(path)
                .map_err(|e| LemonError::io(path, e))
                .and_then(|t| exclusions::ingest_text(conn, &t, &path.display().to_string(), now)),
        )),
        None if sources.use_slurm => Some((
            "exclusions (squeue)".into(),
            exclusions::ingest_from_slurm(conn, ctx.slurm, now),
        )),
        None => None,
    }
}

#[cfg(test)]
mod nothing_readable_tests {
    use super::*;

    fn stats(rows_read: u64, skipped: u64, inserted: u64) -> IngestStats {
        IngestStats {
            rows_read,
            skipped,
            inserted,
            ..IngestStats::default()
        }
    }

    #[test]
    fn a_source_whose_every_row_was_malformed_fails_and_an_empty_or_partly_bad_one_does_not() {
        let err = nothing_readable(stats(3, 3, 0)).unwrap_err();
        assert!(err.to_string().contains("every one of its 3 rows"), "{err}");
        // The spool counts only its good records as read.
        assert!(nothing_readable(stats(0, 2, 0)).is_err());
        assert!(nothing_readable(stats(0, 0, 0)).is_ok(), "empty is fine");
        assert!(nothing_readable(stats(5, 1, 4)).is_ok(), "some read");
    }
}
