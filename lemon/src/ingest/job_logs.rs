//! Job evidence at ingest (issue 36): for each failed run that sacct names
//! log files for, read their tails ([`joblog::read_tails`]), classify them
//! against the signature catalog and store the verdict in `job_evidence`.
//!
//! Where sacct names none (Slurm before 23.02 has no StdOut column), a live
//! ingest asks slurmctld, which still holds jobs that ended within
//! `MinJobAge` ([`HeldJobs`], `scontrol show job`).
//!
//! Runs are noted as their rows are inserted and classified when their batch
//! commits, inside its transaction: a run's verdict is stored with the run,
//! and re-ingesting a run that is already stored reads nothing. A log that
//! cannot be read safely is a counted skip, never an error.

use crate::db::job_evidence::{self, StoredVerdict};
use crate::error::{LemonError, Result};
use crate::ingest::sacct::JobRow;
use crate::job_state::JobState;
use joblog::{Catalog, JobLayout, Limits, LogTail, Skip};
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::show_job::{self, PatternJob};
use lemonade_sql::rusqlite::Connection;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The states of a run whose logs are read: it ended badly, and its output
/// may say why. (Blame counts FAILED and NODE_FAIL; the others' verdicts are
/// shown in reports.)
const READ_STATES: [JobState; 6] = [
    JobState::Failed,
    JobState::NodeFail,
    JobState::Timeout,
    JobState::OutOfMemory,
    JobState::Cancelled,
    JobState::BootFail,
];
/// What the ingest did with failed runs' logs, for its summary.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct JobLogStats {
    /// Failed runs with at least one log path.
    pub runs_with_logs: u64,
    /// Runs classified (at least one log read), per verdict name.
    pub verdicts: BTreeMap<String, u64>,
    /// Logs not read, per reason ([`Skip::name`], or `unknown_user`).
    pub skipped: BTreeMap<String, u64>,
    /// Reads still hanging on a stuck mount when the ingest ended.
    pub stalled: u64,
    /// Runs whose log paths came from `scontrol show job`, not sacct.
    pub named_by_scontrol: u64,
    /// Why slurmctld could not be asked for log paths, when it could not.
    pub scontrol_error: Option<String>,
}

impl JobLogStats {
    /// One summary line, or `None` when no run had logs.
    pub fn summary(&self) -> Option<String> {
        if self.runs_with_logs == 0 && self.skipped.is_empty() {
            return self
                .scontrol_error
                .as_ref()
                .map(|e| format!("job logs: slurmctld not asked for paths: {e}"));
        }
        let list = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{v} {k}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut s = format!(
            "job logs of {} failed runs{}: verdicts {}",
            self.runs_with_logs,
            match self.named_by_scontrol {
                0 => String::new(),
                n => format!(" ({n} named by scontrol)"),
            },
            if self.verdicts.is_empty() {
                "none".to_string()
            } else {
                list(&self.verdicts)
            }
        );
        if !self.skipped.is_empty() {
            s.push_str(&format!("; logs skipped: {}", list(&self.skipped)));
        }
        if self.stalled > 0 {
            s.push_str(&format!("; {} reads still hanging", self.stalled));
        }
        if let Some(e) = &self.scontrol_error {
            s.push_str(&format!("; slurmctld not asked for paths: {e}"));
        }
        Some(s)
    }
}

/// The catalog of one ingest: the defaults, and the site's file on top
/// when `[lemon] signatures` names one. Built once per run.
pub fn load_catalog(site_file: Option<&Path>) -> Result<Catalog> {
    match site_file {
        None => Ok(Catalog::defaults()),
        Some(path) => Catalog::with_site_file(path)
            .map_err(|e| LemonError::Usage(format!("[lemon] signatures: {e}"))),
    }
}

/// A stored failed run whose logs wait for its batch to commit.
struct Pending {
    job: i64,
    nodes: Vec<String>,
    alloc_tres: String,
    owner: Option<u32>,
    paths: Vec<PathBuf>,
}

/// Log paths from slurmctld for runs sacct names none for (Slurm before
/// 23.02), asked only about jobs it still holds: the held ids are listed once
/// per ingest, then each failed held run is asked for (`scontrol show job
/// ID`, argv under the Slurm deadline). The first failure stops the asking
/// for the rest of the ingest: a slow slurmctld costs one deadline.
pub struct HeldJobs {
    slurm: SlurmCommands,
    held: Option<BTreeSet<i64>>,
    stopped: bool,
}

impl HeldJobs {
    pub fn new(slurm: SlurmCommands) -> HeldJobs {
        HeldJobs {
            slurm,
            held: None,
            stopped: false,
        }
    }

    /// The run's paths as slurmctld has them, Slurm's remaining filename
    /// patterns expanded; a path with a pattern that cannot be expanded is
    /// counted as skipped (`unknown_pattern`), not guessed.
    fn paths_of(&mut self, r: &JobRow, stats: &mut JobLogStats) -> Vec<PathBuf> {
        let files = match self.ask(r.job_id_raw) {
            Ok(Some(files)) => files,
            Ok(None) => return Vec::new(),
            Err(e) => {
                self.stopped = true;
                stats.scontrol_error = Some(e.to_string());
                return Vec::new();
            }
        };
        let array = array_of(&r.job_id);
        let job = PatternJob {
            job_id: r.job_id_raw,
            array,
            user: Some(r.user.as_str()).filter(|u| !u.is_empty()),
            name: r.job_name.as_deref(),
            first_node: r.nodes.first().map(String::as_str),
        };
        let mut names = vec![files.std_out, files.std_err];
        // One file for both (Slurm's default) is read, or refused, once.
        names.dedup();
        let mut paths: Vec<PathBuf> = Vec::new();
        for name in names.into_iter().flatten() {
            match show_job::expand_pattern(&name, &job) {
                Ok(p) if !paths.contains(&PathBuf::from(&p)) => paths.push(p.into()),
                Ok(_) => {}
                Err(_) => *stats.skipped.entry("unknown_pattern".into()).or_default() += 1,
            }
        }
        if !paths.is_empty() {
            stats.named_by_scontrol += 1;
        }
        paths
    }

    fn ask(
        &mut self,
        job: i64,
    ) -> Result<Option<show_job::JobFiles>, lemonade_slurm::command::CommandError> {
        if self.stopped {
            return Ok(None);
        }
        if self.held.is_none() {
            self.held = Some(show_job::held_job_ids(&self.slurm)?);
        }
        if !self.held.as_ref().is_some_and(|h| h.contains(&job)) {
            return Ok(None);
        }
        show_job::job_files(&self.slurm, job)
    }
}

/// An array task's `(ArrayJobId, ArrayTaskId)` from sacct's JobID `40_2`.
fn array_of(job_id: &str) -> Option<(i64, i64)> {
    let (job, task) = job_id.split_once('_')?;
    Some((job.parse().ok()?, task.parse().ok()?))
}

/// The failed runs of the open batch and the catalog to classify them with.
pub struct JobLogs {
    catalog: Option<Catalog>,
    limits: Limits,
    pending: Vec<Pending>,
    uids: BTreeMap<String, Option<u32>>,
    held: Option<HeldJobs>,
}

impl JobLogs {
    /// Classifies with `catalog`; `None`: the defaults, built on first use.
    pub fn new(catalog: Option<Catalog>) -> JobLogs {
        JobLogs {
            catalog,
            limits: Limits::default(),
            pending: Vec::new(),
            uids: BTreeMap::new(),
            held: None,
        }
    }

    /// Asks slurmctld for the paths of failed runs that sacct names none for.
    pub fn with_held_jobs(mut self, held: HeldJobs) -> JobLogs {
        self.held = Some(held);
        self
    }

    /// Notes a run just stored as `jobs.id = job`, when it failed and names logs.
    pub fn note(&mut self, job: i64, r: &JobRow, stats: &mut JobLogStats) {
        if !READ_STATES.contains(&JobState::from_sacct(&r.state)) {
            return;
        }
        let mut paths: Vec<PathBuf> = Vec::new();
        for p in [&r.std_out, &r.std_err].into_iter().flatten() {
            let p = PathBuf::from(p);
            // Slurm sends both to one file unless told otherwise: read it once.
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        if paths.is_empty() {
            if let Some(held) = &mut self.held {
                paths = held.paths_of(r, stats);
            }
        }
        if paths.is_empty() {
            return;
        }
        stats.runs_with_logs += 1;
        let owner = r.uid.or_else(|| self.uid_of(&r.user));
        self.pending.push(Pending {
            job,
            nodes: r.nodes.clone(),
            alloc_tres: r.alloc_tres.clone(),
            owner,
            paths,
        });
    }

    /// The uid of `user` from the passwd database, looked up once per ingest.
    fn uid_of(&mut self, user: &str) -> Option<u32> {
        if user.is_empty() {
            return None;
        }
        *self.uids.entry(user.to_string()).or_insert_with(|| {
            nix::unistd::User::from_name(user)
                .ok()
                .flatten()
                .map(|u| u.uid.as_raw())
        })
    }

    /// Forgets the noted runs: their batch was rolled back.
    pub fn clear(&mut self) {
        self.pending.clear();
    }

    /// Reads, classifies and stores the noted runs' logs, inside the batch's
    /// open transaction.
    pub fn classify_pending(&mut self, conn: &Connection, stats: &mut JobLogStats) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        let catalog = self.catalog.get_or_insert_with(Catalog::defaults);
        let mut logs: Vec<(PathBuf, u32)> = Vec::new();
        let mut owner_of: Vec<usize> = Vec::new();
        for (k, p) in pending.iter().enumerate() {
            match p.owner {
                Some(uid) => {
                    for path in &p.paths {
                        logs.push((path.clone(), uid));
                        owner_of.push(k);
                    }
                }
                None => *stats.skipped.entry("unknown_user".into()).or_default() += 1,
            }
        }
        let mut tails: Vec<Vec<LogTail>> = pending.iter().map(|_| Vec::new()).collect();
        joblog::read_tails(&logs, &self.limits, |i, read| match read {
            Ok(tail) => tails[owner_of[i]].push(tail),
            Err(skip) => count_skip(stats, skip),
        });
        for (p, tails) in pending.iter().zip(&tails) {
            if tails.is_empty() {
                continue;
            }
            let layout = JobLayout::from_alloc_tres(p.nodes.clone(), &p.alloc_tres);
            let verdict = joblog::classify(&layout, tails, catalog);
            *stats
                .verdicts
                .entry(verdict.kind.name().to_string())
                .or_default() += 1;
            job_evidence::store(
                conn,
                &StoredVerdict {
                    job: p.job,
                    verdict: verdict.kind.name(),
                    node: verdict.kind.node(),
                    evidence: [0, 1].map(|i| verdict.evidence.get(i).map(String::as_str)),
                },
            )?;
        }
        stats.stalled = joblog::stalled_now() as u64;
        Ok(())
    }
}

fn count_skip(stats: &mut JobLogStats, skip: Skip) {
    *stats.skipped.entry(skip.name().to_string()).or_default() += 1;
}

/// The man page's section on job logs (`lemon ingest --help`).
pub const HELP: &str = "\
JOB LOGS (issue 36)

For every run that ended FAILED, NODE_FAIL, TIMEOUT, OUT_OF_MEMORY, CANCELLED or \
BOOT_FAIL, ingest reads the tail of the files that sacct's StdOut and StdErr columns \
name (Slurm 23.02 and later, or a headed --sacct-file dump with StdOut, StdErr and \
UID) and gives the run one verdict: user (never counts against a node, NODE_FAIL \
excepted), hardware on NODE (counts against that node only), hardware not localized \
(a hardware failure blamed on no node), or unknown (the exit-code model decides). \
The verdict and up to two evidence lines are stored in lemon.db and shown by \
`lemon report`.

A log is read only as a regular file of the job's uid, reached through no symbolic \
link and no directory another user can change, within 3 s and at most its last \
256 KiB; a log that breaks a rule is skipped and counted by reason in the summary \
(no_log, symlink, not_regular, wrong_owner, unsafe_parent, too_slow, ...).

SIGNATURES

What a line means is data: the defaults are compiled in; `[lemon] signatures` in \
lemonade.toml names a site file (e.g. /etc/lemonade/signatures.toml) of \
[[signature]] tables with the fields id, class (hardware, user, collateral, \
unknown, ignore), component (gpu, network, memory, storage, software), localize \
(host_in_line, rank_in_line, none), triggers (literal words), regex and \
description. A new id is tried before the defaults; a default's id replaces that \
default (class = \"ignore\" turns it off). Example:

  [[signature]]
  id = \"site-nccl-ofi-error\"
  class = \"hardware\"
  component = \"network\"
  localize = \"host_in_line\"
  triggers = [\"NCCL WARN NET/OFI\"]
  regex = '(?P<host>[A-Za-z0-9][\\w.-]*):\\d+:\\d+ \\[\\d+\\] NCCL WARN NET/OFI .*(?:[Ee]rror|failed)'
  description = \"EFA error seen by NCCL's OFI plugin\"";
