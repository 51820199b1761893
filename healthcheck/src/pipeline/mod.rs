//! One run, start to end, for every entry point: the periodic run (a bare
//! `healthcheck`), `run --apply-policy`, `lemonade-prolog`, `lemonade-epilog`.
//!
//! ```text
//! open the node database and take the run lock (once)
//!   → the job's start or end (prolog, epilog)
//!   → run the checks with their previous state
//!   → record the run
//!   → policy (drain, down, resume)     returns what it adds
//!   → remediation (reset, reboot; periodic runs only)
//!   → export for the head node
//!   → the report and the exit status
//! ```
//!
//! Each stage returns what it produced; only [`run`] puts the parts together.

use crate::check::Check;
use crate::exit_status::ExitStatus;
use crate::export::{self, ExportError, Exported, Inventory};
use crate::finding::worst;
use crate::flight_recorder;
use crate::hooks::{self, HookEvent};
use crate::policy::{self, confirm, PolicyResult};
use crate::record::{self, RunOptions, RunReport, UnknownCheck};
use crate::repair;
use crate::session::{self, NodeSession, StoreUse};
use crate::state_change::{ChangeOutcome, StateChange};
use chrono::{DateTime, Utc};
use lemonade_config::{Config, ConfigError, Severity};
use lemonade_spool::Body;
use lemonade_sql::node_jobs;
use std::sync::Arc;
use std::time::Instant;
use thiserror::Error;

/// What to run, and what to do after.
#[derive(Debug, Clone)]
pub struct Request {
    pub run: RunOptions,
    pub store: StoreUse,
    /// Apply the node-state policy and export for the head node.
    pub apply_policy: bool,
    /// Print the Slurm commands instead of running them.
    pub dry_run: bool,
    /// The job's start (prolog) or end (epilog), recorded before the checks.
    pub job_record: Option<JobRecord>,
    /// This program's argv (config, root, node) to run checks again in a
    /// fresh process after a GPU reset; empty where the run cannot.
    pub recheck: Vec<String>,
}

/// A job seen by the prolog or the epilog.
#[derive(Debug, Clone, PartialEq)]
pub enum JobRecord {
    Started {
        job_id: String,
        user: Option<String>,
    },
    Ended {
        job_id: String,
        exit_code: Option<i32>,
        signal: Option<i32>,
    },
}

/// Why a run exported nothing for the head node.
#[derive(Debug, Error)]
pub enum NotExported {
    /// A checker that cannot read its config applies no policy and exports nothing.
    #[error("config error: no policy, no export")]
    ConfigError,
    #[error("the node database is unavailable: nothing exported")]
    NoStore,
    #[error(transparent)]
    Export(#[from] ExportError),
}

/// What a run did.
pub struct RunOutcome {
    /// The checks' findings, the store's, and the policy's.
    pub report: RunReport,
    pub policy: PolicyResult,
    /// What was exported, or why nothing was.
    pub exported: Result<Exported, NotExported>,
}

impl RunOutcome {
    /// The exit status: the checks' own, raised to a warning by a warning of
    /// the policy (its unknowns, Slurm unreachable, are our own failure).
    pub fn exit(&self) -> ExitStatus {
        self.report.exit_code
    }

    /// Lines for stderr: the policy's messages, export trouble.
    pub fn stderr_lines(&self) -> Vec<String> {
        let mut lines = self.policy.messages.clone();
        match &self.exported {
            Ok(exported) => lines.extend(
                exported
                    .malformed
                    .iter()
                    .map(|m| format!("healthcheck: {m}")),
            ),
            Err(e) => lines.push(format!("healthcheck: spool export: {e}")),
        }
        lines
    }

    /// True when a finding takes the node out and the fleet breaker did not stop it.
    pub fn took_node_out(&self) -> bool {
        self.report
            .findings
            .iter()
            .any(|f| f.severity.removes_node())
            && !self
                .policy
                .changes
                .iter()
                .any(|c| c.outcome == ChangeOutcome::Breaker)
    }
}

/// Runs a whole run. The policy and the export need a config that could be
/// read: a checker that cannot read its config never touches Slurm.
pub fn run(
    config: Result<Config, ConfigError>,
    registry: &[Arc<dyn Check>],
    request: &Request,
) -> Result<RunOutcome, UnknownCheck> {
    let started = Instant::now();
    let opts = &request.run;
    let mut session =
        NodeSession::open(config.as_ref().unwrap_or(&Config::default()), request.store);
    let job_bodies = match (&config, &request.job_record) {
        (Ok(config), Some(job)) => job_bodies(config, &mut session, job, opts.now),
        _ => Vec::new(),
    };
    let previous = session.previous_states();
    let checked = record::run_checks(&config, registry, opts, &previous, started)?;
    let mut report = RunReport::of_checks(opts, &checked, session.take_problems());
    if session.records() {
        let retention = config
            .as_ref()
            .map_or(Config::default().store.retention_days, |c| {
                c.store.retention_days
            });
        let recorded = record::record(
            &mut session,
            &report,
            &checked,
            started.elapsed(),
            retention,
        );
        report.run_id = recorded.run_id;
        report.new_events = recorded.new_events;
        report.findings.extend(recorded.problems);
        report
            .findings
            .extend(status_file(&session, worst(&checked.findings), opts.now));
    }
    report.worst = worst(&report.findings);
    let (policy, exported) = match (&config, request.apply_policy) {
        (Ok(config), true) => after_checks(config, request, &report, &mut session, job_bodies),
        (Err(_), true) => (PolicyResult::default(), Err(NotExported::ConfigError)),
        (_, false) => (PolicyResult::default(), Ok(Exported::default())),
    };
    let mut report = with_policy(report, &policy);
    if let Some(problem) = session.keep_log_short() {
        report.findings.push(problem);
        report.worst = worst(&report.findings);
    }
    report.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(RunOutcome {
        report,
        policy,
        exported,
    })
}

/// The policy, then the export of the run with what the policy added.
fn after_checks(
    config: &Config,
    request: &Request,
    report: &RunReport,
    session: &mut NodeSession,
    job_bodies: Vec<Body>,
) -> (PolicyResult, Result<Exported, NotExported>) {
    let mut policy = policy::apply(config, report, request.dry_run, session);
    let repaired = repair::apply(
        config,
        &request.run.root,
        report,
        &policy,
        request.dry_run,
        &request.recheck,
        session,
    );
    policy.changes.extend(repaired.changes);
    policy.messages.extend(repaired.messages);
    run_hooks(config, request, report, &mut policy, session);
    let mut bodies = job_bodies;
    bodies.extend(export::bodies_of_run(
        &with_policy(report.clone(), &policy),
        &policy.changes,
    ));
    let inventory = Inventory::of_run(report);
    let sent = session
        .writable()
        .map(|s| Inventory::sent(s))
        .unwrap_or_default();
    let changes = inventory.changes_since(&sent);
    let changed = !changes.is_empty();
    bodies.extend(changes);
    let exported = export_with(config, session, &request.run.node, request.run.now, bodies);
    if let (true, Ok(_), Some(_), Some(store)) =
        (changed, &exported, &config.spool.dir, session.writable())
    {
        // Not fatal: unsaved, the versions are sent again next time.
        if let Err(e) = inventory.save_as_sent(sent, store, request.run.now.timestamp()) {
            eprintln!(
                "healthcheck: the versions sent were not recorded (sent again next run): {e}"
            );
        }
    }
    (policy, exported)
}

/// Tells the `[hooks]` about the policy's state changes, and records how
/// each hook run went as a `state_changes` row of its own.
fn run_hooks(
    config: &Config,
    request: &Request,
    report: &RunReport,
    policy: &mut PolicyResult,
    session: &mut NodeSession,
) {
    if config.hooks.commands.is_empty() || policy.changes.is_empty() {
        return;
    }
    let dry_run = request.dry_run || config.policy.dry_run;
    let path = session.path().to_path_buf();
    let since = report.started_at.timestamp() - RUNNING_JOB_HORIZON_S;
    let job_ids: Vec<String> = session
        .readable()
        .and_then(|s| node_jobs::jobs_since(s.connection(), &path, since).ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|j| j.started_at.is_some() && j.ended_at.is_none())
        .map(|j| j.job_id)
        .collect();
    let events: Vec<HookEvent> = policy
        .changes
        .iter()
        .map(|c| HookEvent::of(c, report, &job_ids))
        .collect();
    let runs = hooks::notify(&config.hooks, &events, dry_run);
    let at = report.started_at.timestamp();
    for run in &runs {
        let event = &events[run.event];
        match run.outcome {
            ChangeOutcome::DryRun => policy
                .messages
                .push(format!("dry-run: hook {}", run.detail)),
            ChangeOutcome::Failed => policy.messages.push(format!(
                "healthcheck: hook `{}` failed: {}",
                run.shown, run.detail
            )),
            _ => {}
        }
        if let Some(store) = session.writable() {
            let change = StateChange {
                action: "hook".into(),
                reason: event.reason.clone(),
                causes: event.causes.clone(),
                outcome: run.outcome,
                detail: format!(
                    "{} ({} {}): {}",
                    run.shown, event.event, event.outcome, run.detail
                ),
            };
            // Best effort, as the policy's own rows.
            let row = change.row(at, report.run_id);
            if let Err(e) = node_jobs::record_state_change(store.connection(), &path, &row) {
                eprintln!("healthcheck: hook run not recorded: {}: {e}", change.detail);
            }
        }
    }
}

/// How far back a job whose start was recorded, and its end not, still
/// counts as running (an epilog that never ran must not name it forever).
const RUNNING_JOB_HORIZON_S: i64 = 7 * 86_400;

/// The report with the policy's findings after the checks', the findings
/// that wait for confirmation as the warnings they are for now, and the exit
/// status they make together.
fn with_policy(mut report: RunReport, policy: &PolicyResult) -> RunReport {
    if !policy.unconfirmed.is_empty() {
        for f in report.findings.iter_mut() {
            if let Some(w) = policy
                .unconfirmed
                .iter()
                .find(|w| f.severity.removes_node() && confirm::same(f, w))
            {
                *f = w.clone();
            }
        }
        // The checks' own status, as the store's troubles never count in it.
        report.exit_code =
            ExitStatus::of(worst(report.findings.iter().filter(|f| f.check != "store")));
    }
    if policy
        .findings
        .iter()
        .any(|f| f.severity == Severity::Warning)
    {
        report.exit_code = report.exit_code.with_policy_warning();
    }
    report.findings.extend(policy.findings.iter().cloned());
    report.worst = worst(&report.findings);
    report
}

/// Exports `bodies` when the run records (and so holds the store).
fn export_with(
    config: &Config,
    session: &mut NodeSession,
    node: &str,
    now: DateTime<Utc>,
    bodies: Vec<Body>,
) -> Result<Exported, NotExported> {
    if !session.records() {
        return Ok(Exported::default());
    }
    match session.writable() {
        Some(store) => Ok(export::export(
            config,
            store,
            node,
            now.timestamp(),
            bodies,
        )?),
        None => Err(NotExported::NoStore),
    }
}

/// The prolog or epilog of a job whose checks do not run here (the SPANK
/// plugin runs them, or the user chose `--health-check=off`): the job's
/// start or end is recorded and exported all the same.
pub fn record_job_only(
    config: &Config,
    node: &str,
    job: &JobRecord,
    now: DateTime<Utc>,
) -> Result<Exported, NotExported> {
    let mut session = NodeSession::open(config, StoreUse::Record);
    let bodies = job_bodies(config, &mut session, job, now);
    export_with(config, &mut session, node, now, bodies)
}

/// The jobs the node database says run here, started in the last 30 days
/// (an end record lost to a crash must not spare a directory forever).
fn running_here(session: &NodeSession, now: DateTime<Utc>) -> Vec<String> {
    let since = now.timestamp() - 30 * 86_400;
    session
        .readable()
        .and_then(|s| node_jobs::running_jobs(s.connection(), session.path(), since).ok())
        .unwrap_or_default()
}

/// The job's start or end record; at a job's end on a live node, also the
/// summaries of its NCCL flight-recorder dumps (issue 32), and the raw
/// dumps of jobs past `[store] flight_recorder_keep_days` pruned.
fn job_bodies(
    config: &Config,
    session: &mut NodeSession,
    job: &JobRecord,
    now: DateTime<Utc>,
) -> Vec<Body> {
    let mut bodies = vec![record_job(session, job, now)];
    if let (JobRecord::Ended { job_id, .. }, true) = (job, session.records()) {
        bodies.extend(flight_recorder::collect(config, job_id));
        let mut spared = running_here(session, now);
        spared.push(job_id.clone());
        let (_, problems) = flight_recorder::prune(config, &spared, now.into());
        for p in problems {
            eprintln!("healthcheck: flight recorder: {p}");
        }
    }
    bodies
}

/// Writes the job's start or end to the node database (best effort: the
/// export record is made either way) and returns its export record.
fn record_job(session: &mut NodeSession, job: &JobRecord, now: DateTime<Utc>) -> Body {
    let path = session.path().to_path_buf();
    let at = now.timestamp();
    let store = session.writable();
    match job {
        JobRecord::Started { job_id, user } => {
            if let Some(s) = store {
                let written =
                    node_jobs::job_started(s.connection(), &path, job_id, user.as_deref(), at);
                say_unrecorded("start", job_id, written);
            }
            Body::JobStart {
                job_id: job_id.clone(),
                user: user.clone(),
            }
        }
        JobRecord::Ended {
            job_id,
            exit_code,
            signal,
        } => {
            if let Some(s) = store {
                let written =
                    node_jobs::job_ended(s.connection(), &path, job_id, at, *exit_code, *signal);
                say_unrecorded("end", job_id, written);
            }
            Body::JobEnd {
                job_id: job_id.clone(),
                exit_code: *exit_code,
                signal: *signal,
            }
        }
    }
}

/// The export record carries a job's start or end either way; a node
/// database that could not keep it is said on stderr (slurmd's log).
fn say_unrecorded<E: std::fmt::Display>(what: &str, job_id: &str, written: Result<(), E>) {
    if let Err(e) = written {
        eprintln!(
            "healthcheck: job {job_id}: its {what} was not recorded in the node database: {e}"
        );
    }
}

/// Writes the status file the SPANK plugin reads; a failure is a finding of `store`.
fn status_file(
    session: &NodeSession,
    checks_worst: Severity,
    now: DateTime<Utc>,
) -> Option<crate::finding::Finding> {
    let path = session.status_path();
    crate::status_file::write(path, checks_worst, now)
        .err()
        .map(|e| session::store_unknown(path, format!("status file: {e}")))
}
