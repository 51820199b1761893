//! One run against the node database: read the checks' previous state, run
//! the engine, write the run, its findings, the new state and new events.
//!
//! The store never stops the checks: a locked, corrupt or unwritable database
//! adds an `unknown` finding for `store`, and the run reports as usual.

use crate::check::{Check, CheckContext, JobContext, Profile, Shared};
use crate::engine::{self, CheckSummary, Job};
use crate::finding::{worst, Finding};
use crate::root::NodeRoot;
use chrono::{DateTime, Utc};
use lemonade_config::{Config, ConfigError, Severity};
use lemonade_sql::lock::RunLock;
use lemonade_sql::node::{EventRow, FindingRow, NodeStore, RunRecord};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Code of every check's finding when the config cannot be read.
pub const CONFIG_ERROR: &str = "CONFIG_ERROR";
/// Code of the store's finding when the node database cannot be used.
pub const STORE_UNAVAILABLE: &str = "STORE_UNAVAILABLE";

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
    /// Write the run to the node database.
    pub record: bool,
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
    pub exit_code: i32,
    pub checks: Vec<CheckSummary>,
    pub findings: Vec<Finding>,
    /// Events recorded for the first time in this run (new XIDs).
    #[serde(skip)]
    pub new_events: Vec<EventRow>,
    #[serde(skip)]
    pub run_id: Option<i64>,
}

/// The checks a run executes: those named, or the enabled ones of the profile.
pub fn select<'a>(
    registry: &'a [Arc<dyn Check>],
    config: &Config,
    opts: &RunOptions,
) -> Result<Vec<&'a Arc<dyn Check>>, String> {
    match &opts.only {
        Some(names) => names
            .iter()
            .map(|n| {
                registry.iter().find(|c| c.name() == n).ok_or_else(|| {
                    let known: Vec<_> = registry.iter().map(|c| c.name()).collect();
                    format!("no check named `{n}` (known: {})", known.join(", "))
                })
            })
            .collect(),
        None => Ok(registry
            .iter()
            .filter(|c| c.profiles().contains(&opts.profile) && c.settings(config).enabled)
            .collect()),
    }
}

/// Runs the selected checks and records the run.
pub fn execute(
    config: Result<Config, ConfigError>,
    registry: &[Arc<dyn Check>],
    opts: &RunOptions,
) -> Result<RunReport, String> {
    let started = Instant::now();
    let (config, config_error) = match config {
        Ok(c) => (c, None),
        Err(e) => (Config::default(), Some(e)),
    };
    let selected = select(registry, &config, opts)?;
    let mut findings = Vec::new();
    let mut store_findings = Vec::new();

    // The lock first: two runs at once must not both apply counter deltas.
    let store_path = config.store.path.clone();
    let lock = if opts.record {
        match RunLock::acquire(
            &store_path,
            Duration::from_millis(config.store.lock_wait_ms),
        ) {
            Ok(lock) => Some(lock),
            Err(e) => {
                store_findings.push(store_unknown(
                    &store_path,
                    &format!("{e}; this run's counters are not saved"),
                ));
                None
            }
        }
    } else {
        None
    };
    let mut store = match NodeStore::open(
        &store_path,
        Duration::from_millis(config.store.lock_wait_ms),
    ) {
        Ok(store) => Some(store),
        Err(e) => {
            if opts.record {
                store_findings.push(store_unknown(&store_path, &e.to_string()));
            }
            None
        }
    };
    let previous: HashMap<String, String> = match store.as_ref().map(|s| s.check_states()) {
        Some(Ok(states)) => states,
        Some(Err(e)) => {
            store_findings.push(store_unknown(&store_path, &e.to_string()));
            store = None;
            HashMap::new()
        }
        None => HashMap::new(),
    };

    let mut summaries = Vec::new();
    let mut states = Vec::new();
    let mut events = Vec::new();
    if let Some(e) = &config_error {
        for check in &selected {
            findings.push(Finding::unknown(
                check.name(),
                "node",
                CONFIG_ERROR,
                format!("config error: {e}"),
            ));
        }
    } else {
        let mut config = config.clone();
        crate::checks::gpu::count::resolve(&mut config, &opts.root);
        let config = Arc::new(config);
        let root = Arc::clone(&opts.root);
        let shared = Arc::new(Shared::default());
        let job = opts.job.clone().map(Arc::new);
        let default_deadline = Duration::from_secs_f64(config.engine.check_deadline_s.max(0.001));
        let jobs = selected
            .iter()
            .map(|check| Job {
                check: Arc::clone(check),
                context: CheckContext {
                    root: Arc::clone(&root),
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
        findings.extend(result.findings);
        summaries = result.checks;
        states = result.states;
        events = result.events;
    }

    let check_worst = worst(&findings);
    findings.extend(store_findings);
    let mut report = RunReport {
        node: opts.node.clone(),
        started_at: opts.now,
        duration_ms: 0.0,
        profile: opts.profile,
        trigger: opts.trigger,
        job_id: opts.job.as_ref().map(|j| j.job_id.clone()),
        worst: worst(&findings),
        // The checks' own code: a store failure is visible as a finding, not in the exit code.
        exit_code: check_worst.exit_code(),
        checks: summaries,
        findings,
        new_events: Vec::new(),
        run_id: None,
    };

    if let (Some(store), Some(_lock)) = (store.as_mut(), lock.as_ref()) {
        let event_rows: Vec<EventRow> = events
            .iter()
            .map(|(check, e)| EventRow {
                check_name: check.clone(),
                entity: e.entity.clone(),
                code: e.code.clone(),
                severity: e.severity.as_str().to_string(),
                occurred_at: e.occurred_at,
                boot_id: e.boot_id.clone(),
                seq: e.seq,
                detail: e.detail.clone(),
            })
            .collect();
        let record = RunRecord {
            started_at: opts.now.timestamp(),
            duration_ms: started.elapsed().as_millis() as i64,
            trigger: opts.trigger.as_str().to_string(),
            profile: opts.profile.as_str().to_string(),
            job_id: report.job_id.clone(),
            worst: report.worst.as_str().to_string(),
            exit_code: report.exit_code,
            findings: report.findings.iter().map(finding_row).collect(),
            states: states
                .iter()
                .map(|(name, v)| (name.clone(), v.to_string()))
                .collect(),
            events: event_rows.clone(),
        };
        match store.record_run(&record) {
            Ok((run_id, new)) => {
                report.run_id = Some(run_id);
                report.new_events = event_rows
                    .into_iter()
                    .zip(new)
                    .filter(|(_, new)| *new)
                    .map(|(e, _)| e)
                    .collect();
                let horizon =
                    opts.now.timestamp() - i64::from(config.store.retention_days) * 86_400;
                if let Err(e) = store.prune(horizon) {
                    report.findings.push(store_unknown(
                        &store_path,
                        &format!("pruning old runs: {e}"),
                    ));
                }
            }
            Err(e) => report
                .findings
                .push(store_unknown(&store_path, &e.to_string())),
        }
    }
    if opts.record {
        let path = config.store.status_path();
        if let Err(e) = crate::status_file::write(&path, check_worst, opts.now) {
            report
                .findings
                .push(store_unknown(&path, &format!("status file: {e}")));
        }
    }
    report.worst = worst(&report.findings);
    report.duration_ms = started.elapsed().as_secs_f64() * 1000.0;
    Ok(report)
}

fn store_unknown(path: &std::path::Path, message: &str) -> Finding {
    Finding::unknown(
        "store",
        path.display().to_string(),
        STORE_UNAVAILABLE,
        message.to_string(),
    )
}

/// A finding as the store keeps it.
pub fn finding_row(f: &Finding) -> FindingRow {
    FindingRow {
        check_name: f.check.clone(),
        entity: f.entity.clone(),
        pci_bus_id: f.pci_bus_id.clone(),
        uuid: f.uuid.clone(),
        code: f.code.clone(),
        severity: f.severity.as_str().to_string(),
        expected: f.expected.clone(),
        actual: f.actual.clone(),
        action: f.action.as_str().to_string(),
        message: f.message.clone(),
    }
}
