//! The checks' part of a run: select the checks, run them with the previous
//! run's state, and write the run, its findings, the new state and the new
//! events to the node database. [`crate::pipeline`] calls these in order.

use crate::check::{Check, CheckContext, Event, JobContext, Profile, Shared};
use crate::engine::{self, CheckSummary, Job};
use crate::exit_status::ExitStatus;
use crate::finding::{worst, Finding};
use crate::root::NodeRoot;
use crate::session::NodeSession;
use chrono::{DateTime, Utc};
use lemonade_config::{Config, ConfigError, Severity};
use lemonade_sql::node::{EventRow, FindingRow, RunRecord};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use thiserror::Error;

/// Code of every check's finding when the config cannot be read.
pub const CONFIG_ERROR: &str = "CONFIG_ERROR";

/// What started the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    Manual,
    Periodic,
    Prolog,
    Epilog,
    Spank,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Manual => "manual",
            Trigger::Periodic => "periodic",
            Trigger::Prolog => "prolog",
            Trigger::Epilog => "epilog",
            Trigger::Spank => "spank",
        }
    }
}

/// How to run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    pub node: String,
    pub root: Arc<NodeRoot>,
    pub profile: Profile,
    /// Run exactly these checks (by name) instead of the profile's.
    pub only: Option<Vec<String>>,
    pub trigger: Trigger,
    pub job: Option<JobContext>,
    pub now: DateTime<Utc>,
}

/// What a run found.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    pub node: String,
    pub started_at: DateTime<Utc>,
    pub duration_ms: f64,
    pub profile: Profile,
    pub trigger: Trigger,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_id: Option<String>,
    pub worst: Severity,
    pub exit_code: ExitStatus,
    pub checks: Vec<CheckSummary>,
    pub findings: Vec<Finding>,
    /// Seconds since the node booted (`/proc/uptime`); `None` when unreadable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uptime_s: Option<f64>,
    /// Events recorded for the first time in this run (new XIDs).
    #[serde(skip)]
    pub new_events: Vec<EventRow>,
    #[serde(skip)]
    pub run_id: Option<i64>,
}

/// A check named for a run (`--checks`) that the registry does not have.
#[derive(Debug, Error)]
#[error("no check named `{name}` (known: {})", .known.join(", "))]
pub struct UnknownCheck {
    pub name: String,
    /// The registry's checks, in its order.
    pub known: Vec<&'static str>,
}

/// The checks a run executes: those named, or the enabled ones of the profile.
pub fn select<'a>(
    registry: &'a [Arc<dyn Check>],
    config: &Config,
    opts: &RunOptions,
) -> Result<Vec<&'a Arc<dyn Check>>, UnknownCheck> {
    match &opts.only {
        Some(names) => names
            .iter()
            .map(|n| {
                registry
                    .iter()
                    .find(|c| c.name() == n)
                    .ok_or_else(|| UnknownCheck {
                        name: n.clone(),
                        known: registry.iter().map(|c| c.name()).collect(),
                    })
            })
            .collect(),
        None => Ok(registry
            .iter()
            .filter(|c| c.profiles().contains(&opts.profile) && c.settings(config).enabled)
            .collect()),
    }
}

/// What the checks produced.
#[derive(Debug, Default)]
pub struct Checked {
    pub findings: Vec<Finding>,
    pub checks: Vec<CheckSummary>,
    /// New state per check, for those that gave one.
    pub states: Vec<(String, serde_json::Value)>,
    pub events: Vec<(String, Event)>,
}

/// Runs the selected checks, each with its state from `previous`. A config
/// that cannot be read makes every selected check `unknown` instead.
pub fn run_checks(
    config: &Result<Config, ConfigError>,
    registry: &[Arc<dyn Check>],
    opts: &RunOptions,
    previous: &HashMap<String, String>,
    started: Instant,
) -> Result<Checked, UnknownCheck> {
    let fallback = Config::default();
    let selected = select(registry, config.as_ref().unwrap_or(&fallback), opts)?;
    Ok(match config {
        Err(e) => Checked {
            findings: selected
                .iter()
                .map(|check| {
                    Finding::unknown(
                        check.name(),
                        "node",
                        CONFIG_ERROR,
                        format!("config error: {e}"),
                    )
                })
                .collect(),
            ..Checked::default()
        },
        Ok(config) => run_engine(config, &selected, opts, previous, started),
    })
}

fn run_engine(
    config: &Config,
    selected: &[&Arc<dyn Check>],
    opts: &RunOptions,
    previous: &HashMap<String, String>,
    started: Instant,
) -> Checked {
    let mut config = config.clone();
    // `expected_count = "auto"` is counted once, so every GPU check sees one number.
    crate::checks::gpu::count::resolve(&mut config, &opts.root);
    let config = Arc::new(config);
    let shared = Arc::new(Shared::default());
    let job = opts.job.clone().map(Arc::new);
    let default_deadline = Duration::from_secs_f64(config.engine.check_deadline_s.max(0.001));
    let jobs = selected
        .iter()
        .map(|check| Job {
            check: Arc::clone(check),
            context: CheckContext {
                root: Arc::clone(&opts.root),
                config: Arc::clone(&config),
                previous: previous
                    .get(check.name())
                    .and_then(|s| serde_json::from_str(s).ok()),
                now: opts.now,
                profile: opts.profile,
                job: job.clone(),
                shared: Arc::clone(&shared),
            },
            deadline: check.settings(&config).deadline.unwrap_or(default_deadline),
        })
        .collect();
    let run_deadline = Duration::from_secs_f64(config.engine.run_deadline_s.max(0.001))
        .saturating_sub(started.elapsed());
    let result = engine::run(jobs, run_deadline);
    Checked {
        findings: result.findings,
        checks: result.checks,
        states: result.states,
        events: result.events,
    }
}

impl RunReport {
    /// The report of the checks' part of a run: their findings, then those
    /// about the store. The exit status is the checks' own: a store failure
    /// is visible as a finding, not in the exit code.
    pub fn of_checks(opts: &RunOptions, checked: &Checked, store: Vec<Finding>) -> RunReport {
        let exit_code = ExitStatus::of(worst(&checked.findings));
        let mut findings = checked.findings.clone();
        findings.extend(store);
        RunReport {
            node: opts.node.clone(),
            started_at: opts.now,
            duration_ms: 0.0,
            profile: opts.profile,
            trigger: opts.trigger,
            job_id: opts.job.as_ref().map(|j| j.job_id.clone()),
            worst: worst(&findings),
            exit_code,
            checks: checked.checks.clone(),
            findings,
            uptime_s: uptime_s(&opts.root),
            new_events: Vec::new(),
            run_id: None,
        }
    }
}

/// Seconds since boot: the first field of `/proc/uptime`.
fn uptime_s(root: &NodeRoot) -> Option<f64> {
    let text = root.read_to_string("/proc/uptime").ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// What recording a run wrote.
#[derive(Debug, Default)]
pub struct Recorded {
    pub run_id: Option<i64>,
    /// The run's events that the store had not seen before.
    pub new_events: Vec<EventRow>,
    /// Why something could not be written, as `unknown` findings of `store`.
    pub problems: Vec<Finding>,
}

/// Writes the run, its findings, the checks' new state and their events,
/// and prunes what is older than the retention. Needs the run lock: without
/// it nothing is written (the lock's absence is already a finding).
pub fn record(
    session: &mut NodeSession,
    report: &RunReport,
    checked: &Checked,
    duration: Duration,
    retention_days: u32,
) -> Recorded {
    let path = session.path().to_path_buf();
    let Some(store) = session.for_counters() else {
        return Recorded::default();
    };
    let events: Vec<EventRow> = checked.events.iter().map(event_row).collect();
    let row = run_record(report, checked, duration, events.clone());
    let mut recorded = Recorded::default();
    match store.record_run(&row) {
        Ok((run_id, new)) => {
            recorded.run_id = Some(run_id);
            recorded.new_events = events
                .into_iter()
                .zip(new)
                .filter_map(|(e, new)| new.then_some(e))
                .collect();
            let horizon = report.started_at.timestamp() - i64::from(retention_days) * 86_400;
            if let Err(e) = store.prune(horizon) {
                recorded.problems.push(crate::session::store_unknown(
                    &path,
                    format!("pruning old runs: {e}"),
                ));
            }
        }
        Err(e) => recorded
            .problems
            .push(crate::session::store_unknown(&path, e.to_string())),
    }
    recorded
}

fn run_record(
    report: &RunReport,
    checked: &Checked,
    duration: Duration,
    events: Vec<EventRow>,
) -> RunRecord {
    RunRecord {
        started_at: report.started_at.timestamp(),
        duration_ms: duration.as_millis() as i64,
        trigger: report.trigger.as_str().to_string(),
        profile: report.profile.as_str().to_string(),
        job_id: report.job_id.clone(),
        worst: report.worst,
        exit_code: i32::from(report.exit_code.code()),
        findings: report.findings.iter().map(FindingRow::from).collect(),
        states: checked
            .states
            .iter()
            .map(|(name, v)| (name.clone(), v.to_string()))
            .collect(),
        events,
    }
}

/// An event as the store keeps it.
fn event_row((check, e): &(String, Event)) -> EventRow {
    EventRow {
        check_name: check.clone(),
        entity: e.entity.clone(),
        code: e.code.clone(),
        severity: e.severity,
        occurred_at: e.occurred_at,
        boot_id: e.boot_id.clone(),
        seq: e.seq,
        detail: e.detail.clone(),
    }
}
