//! Ingest: scheduler and node history into lemon.db, incrementally.
//!
//! Each source has its own module; [`ingest`] runs those asked for and
//! records each in the `ingests` table. One failing source does not stop the
//! others, but it makes the run's ingest failed, and a failed ingest drains nothing.

pub mod events;
pub mod exclusions;
pub mod sacct;
pub mod spool;
pub mod tickets;

use crate::cli::SourceArgs;
use crate::db;
use crate::error::{LemonError, Result};
use lemonade_slurm::command::SlurmCommands;
use lemonade_sql::rusqlite::Connection;
use serde::Serialize;
use std::io::BufReader;
use std::path::PathBuf;

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
}

impl IngestStats {
    /// Counts a malformed row, keeping its location for the report.
    pub fn malformed(&mut self, where_: String, message: String) {
        self.skipped += 1;
        if self.errors.len() < MAX_LISTED_ERRORS {
            self.errors.push((where_, message));
        }
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
}

impl Sources {
    /// Files replace their Slurm command; giving a jobs file means replaying,
    /// so Slurm is then not asked for the other sources either.
    pub fn from_args(args: &SourceArgs, default_spool: Option<PathBuf>) -> Sources {
        Sources {
            sacct_file: args.sacct_file.clone(),
            events_file: args.events_file.clone(),
            exclusions_file: args.exclusions_file.clone(),
            spool_dir: args.spool_dir.clone().or(default_spool),
            use_slurm: !args.no_slurm && args.sacct_file.is_none(),
        }
    }
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
}

/// Ingests every source of `sources`.
pub fn ingest(
    conn: &mut Connection,
    sources: &Sources,
    ctx: &IngestContext<'_>,
) -> Result<IngestReport> {
    let mut report = IngestReport::default();
    let now = ctx.now;

    let jobs: Option<(String, Result<IngestStats>)> = match &sources.sacct_file {
        Some(path) if path.as_os_str() == "-" => Some((
            "jobs (stdin)".into(),
            sacct::ingest_reader(
                conn,
                BufReader::with_capacity(1 << 20, std::io::stdin()),
                "stdin",
                now,
            ),
        )),
        Some(path) => Some((
            format!("jobs ({})", path.display()),
            std::fs::File::open(path)
                .map_err(|e| LemonError::io(path, e))
                .and_then(|f| {
                    sacct::ingest_reader(
                        conn,
                        BufReader::with_capacity(1 << 20, f),
                        &path.display().to_string(),
                        now,
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
            ),
        )),
        None => None,
    };

    let events = match &sources.events_file {
        Some(path) => Some((
            format!("node events ({})", path.display()),
            std::fs::read_to_string(path)
                .map_err(|e| LemonError::io(path, e))
                .and_then(|t| events::ingest_text(conn, &t, &path.display().to_string())),
        )),
        None if sources.use_slurm => Some((
            "node events (sacctmgr)".into(),
            events::ingest_from_slurm(conn, ctx.slurm, now, ctx.window_days),
        )),
        None => None,
    };

    let excl = match &sources.exclusions_file {
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
    };

    let spool = sources.spool_dir.as_ref().map(|dir| {
        (
            format!("spool ({})", dir.display()),
            spool::ingest_dir(conn, dir),
        )
    });

    for (name, result) in [jobs, events, excl, spool].into_iter().flatten() {
        match result {
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
