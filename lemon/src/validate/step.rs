//! `lemon run`'s validation step (issue 31 parts 3 and 4), when `[validate]
//! enabled`: learn the fleet's bands from its recent passed results and
//! publish them to the spool directory for the nodes, then pick whom to
//! validate ([`selector::select`]) and submit their jobs.
//!
//! * `--dry-run` writes no file and submits nothing: it prints the `sbatch`
//!   argv of each pick.
//! * A run that refused to act (a failed or stale ingest) or whose circuit
//!   breaker tripped submits nothing either: the picks are reported as held,
//!   and they are picked again next run.
//! * A node with a validation job pending or running (`squeue --name`) is
//!   never picked again; its job is charged to the day's budget.

use super::{jobs, learn, nodes, selector};
use crate::db;
use crate::decide::Scores;
use crate::error::{LemonError, Result};
use lemonade_config::ValidateSettings;
use lemonade_slurm::command::SlurmCommands;
use lemonade_slurm::sinfo;
use lemonade_sql::rusqlite::Connection;
use serde::Serialize;
use std::path::{Path, PathBuf};

/// What the step needs beyond lemon.db.
pub struct StepParams<'a> {
    pub settings: &'a ValidateSettings,
    pub slurm: &'a SlurmCommands,
    pub scores: &'a Scores,
    /// Where the nodes read the criteria file; `None`: not published.
    pub spool_dir: Option<&'a Path>,
    pub dry_run: bool,
    /// Why nothing may be submitted this run (refused ingest, breaker).
    pub hold: Option<String>,
    pub now: i64,
}

/// What became of one pick.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome", content = "detail")]
pub enum Outcome {
    Submitted(String),
    WouldSubmit,
    Held(String),
    Failed(String),
}

/// One pick and its job.
#[derive(Debug, Clone, Serialize)]
pub struct Submission {
    pub node: String,
    pub reason: selector::Reason,
    pub risk: f64,
    /// The sbatch argv as typed.
    pub command: String,
    pub outcome: Outcome,
}

/// What the step did.
#[derive(Debug, Clone, Serialize)]
pub struct StepReport {
    pub learned: learn::Learned,
    /// The criteria file written (or that would be, in a dry run).
    pub criteria_file: Option<PathBuf>,
    pub criteria_written: bool,
    pub budget_node_hours: f64,
    pub spent_node_hours: f64,
    pub left_node_hours: f64,
    pub submissions: Vec<Submission>,
    pub deferred: Vec<String>,
    /// Nodes whose validation job is pending or running.
    pub queued: Vec<String>,
}

impl StepReport {
    /// Picks whose submission failed: the run's exit code says so.
    pub fn failed(&self) -> bool {
        (self.submissions.iter()).any(|s| matches!(s.outcome, Outcome::Failed(_)))
    }
}

/// Runs the step; see the module comment.
pub fn run(conn: &Connection, p: &StepParams) -> Result<StepReport> {
    let s = p.settings;
    let since = p.now - i64::from(s.window_days) * 86_400;
    let results = db::validations::latest_results(conn, since, true)?;
    let learned = learn::learn(
        s,
        (results.iter()).map(|r| (r.sku.as_str(), r.metric.as_str(), r.value)),
    );
    let criteria_file = p.spool_dir.map(|d| d.join(super::publish::FILE_NAME));
    let criteria_written = match &criteria_file {
        Some(path) if !p.dry_run => {
            super::publish::write(path, &learned, p.now)?;
            true
        }
        _ => false,
    };
    let slurm_now = slurm_now(p.slurm, &s.job_name)?;
    let remembered = remembered(conn)?;
    let infos = nodes::node_infos(&slurm_now, &remembered, p.scores, s.new_node_days, p.now);
    let duration_h = f64::from(s.time_limit_minutes) / 60.0;
    let spent = db::validations::node_hours_of_jobs(conn, &s.job_name, p.now - 86_400, p.now)?
        + slurm_now.queued.len() as f64 * duration_h;
    let budget = selector::Budget {
        fraction: s.budget_fraction,
        spent_node_hours: spent,
        duration_h,
        never_validated_days: s.never_validated_days,
    };
    let selection = selector::select(&infos, &budget, p.now);
    let submissions = (selection.picks.iter())
        .map(|pick| submit(p, pick))
        .collect();
    Ok(StepReport {
        learned,
        criteria_file,
        criteria_written,
        budget_node_hours: selection.budget_node_hours,
        spent_node_hours: spent,
        left_node_hours: selection.left_node_hours,
        submissions,
        deferred: selection.deferred,
        queued: slurm_now.queued.into_iter().collect(),
    })
}

/// Submits one pick's job, or says why not.
fn submit(p: &StepParams, pick: &selector::Pick) -> Submission {
    let own = jobs::reservation_of(&pick.node);
    let reservation = if pick.reason == selector::Reason::ReturnedFromRepair {
        Some(own.as_str())
    } else {
        p.settings.reservation.as_deref()
    };
    let args = jobs::sbatch_args(p.settings, &pick.node, reservation);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let command = p.slurm.display("sbatch", &argv);
    let outcome = if let Some(why) = &p.hold {
        Outcome::Held(why.clone())
    } else if p.dry_run {
        Outcome::WouldSubmit
    } else {
        match jobs::submit(p.slurm, &args) {
            Ok(id) => Outcome::Submitted(id),
            Err(e) => Outcome::Failed(e.to_string()),
        }
    };
    Submission {
        node: pick.node.clone(),
        reason: pick.reason,
        risk: pick.risk,
        command,
        outcome,
    }
}

/// Nodes, validation reservations and queued validation jobs, from Slurm.
fn slurm_now(slurm: &SlurmCommands, job_name: &str) -> Result<nodes::SlurmNow> {
    let wrap = |what: &str| {
        let what = what.to_string();
        move |source| LemonError::Slurm { what, source }
    };
    Ok(nodes::SlurmNow {
        nodes: sinfo::all_nodes(slurm).map_err(wrap("sinfo"))?.nodes,
        reservations: jobs::reservations(slurm).map_err(wrap("scontrol show reservation"))?,
        queued: jobs::queued(slurm, job_name).map_err(wrap("squeue"))?,
    })
}

fn remembered(conn: &Connection) -> Result<nodes::Remembered> {
    Ok(nodes::Remembered {
        last_validated: (db::validations::last_per_node(conn)?.into_iter())
            .map(|(node, v)| (node, v.at))
            .collect(),
        first_seen: db::validations::first_seen(conn)?,
        firmware_changed_at: db::validations::firmware_changed_at(conn)?,
    })
}
