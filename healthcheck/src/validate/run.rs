//! One `healthcheck validate` run: identify the node, run the suite, judge,
//! act on the verdict, record and export; and its output.

use super::act::{act, Acted};
use super::hardware::{identify, Identity};
use super::judge::{judge, load_criteria, Judgement, Verdict};
use super::suite::{run_suite, BenchRun, Outcome};
use crate::export;
use crate::output::Format;
use crate::root::NodeRoot;
use crate::session::{NodeSession, StoreUse};
use lemonade_config::Config;
use lemonade_spool::{Body, ValidationMetric};
use lemonade_sql::node_jobs;
use lemonade_sql::node_validation::{self, MetricRow, ValidationRow};

/// What a run is asked to do.
pub struct Request<'a> {
    pub config: &'a Config,
    pub root: &'a NodeRoot,
    pub node: &'a str,
    /// The Slurm job it runs in (`$SLURM_JOB_ID`).
    pub job_id: Option<String>,
    /// Show the state changes; run nothing on Slurm, record nothing.
    pub dry_run: bool,
    /// Record in the node database and export.
    pub record: bool,
    /// Unix seconds.
    pub now: i64,
}

/// What a run did.
#[derive(Debug)]
pub struct Report {
    pub node: String,
    pub identity: Option<Identity>,
    pub runs: Vec<BenchRun>,
    pub judgement: Judgement,
    pub acted: Acted,
    /// Why the run was not recorded or exported, when it was meant to be.
    pub problems: Vec<String>,
}

impl Report {
    /// The exit code: 0 pass, 2 fail, 3 unknown.
    pub fn exit_code(&self) -> u8 {
        self.judgement.verdict.exit_code()
    }
}

/// Runs the suite and acts on its verdict.
pub fn run(req: &Request) -> Report {
    let settings = &req.config.validate;
    let identity = match identify(req.config, req.root) {
        Ok(identity) => identity,
        Err(why) => return unknown_without_suite(req, why),
    };
    let runs = run_suite(&settings.suite(), &identity.hardware);
    let criteria = load_criteria(
        req.config.spool.dir.as_deref(),
        req.now,
        settings.criteria_max_age_hours,
    );
    let judgement = judge(&runs, &identity.sku, settings, &criteria);
    let cmds = req.config.slurm.commands();
    let acted = act(&cmds, req.node, &judgement, req.dry_run);
    let mut report = Report {
        node: req.node.to_string(),
        identity: Some(identity),
        runs,
        judgement,
        acted,
        problems: Vec::new(),
    };
    if req.record && !req.dry_run {
        if let Err(why) = record(req, &report) {
            report.problems.push(why);
        }
    }
    report
}

/// The node could not be identified: nothing ran, the verdict is unknown.
fn unknown_without_suite(req: &Request, why: String) -> Report {
    Report {
        node: req.node.to_string(),
        identity: None,
        runs: Vec::new(),
        judgement: Judgement {
            verdict: Verdict::Unknown,
            failing: Vec::new(),
            criteria: String::new(),
            notes: vec![why],
        },
        acted: Acted::default(),
        problems: Vec::new(),
    }
}

/// The run's rows in the node database, and its records in the export.
fn record(req: &Request, report: &Report) -> Result<(), String> {
    let mut session = NodeSession::open(req.config, StoreUse::Record);
    let path = session.path().to_path_buf();
    let Some(store) = session.writable() else {
        let why: Vec<String> = session
            .take_problems()
            .into_iter()
            .map(|f| f.message)
            .collect();
        return Err(format!("not recorded: {}", why.join("; ")));
    };
    let metrics: Vec<MetricRow> = report
        .runs
        .iter()
        .flat_map(|run| match &run.outcome {
            Outcome::Ran { metrics, .. } => metrics.clone(),
            _ => Vec::new(),
        })
        .map(|m| MetricRow {
            benchmark: m.benchmark,
            metric: m.name,
            value: m.value,
            unit: m.unit,
        })
        .collect();
    let j = &report.judgement;
    let sku = report
        .identity
        .as_ref()
        .map(|i| i.sku.clone())
        .unwrap_or_default();
    let json = |lines: &[String]| serde_json::to_string(lines).unwrap_or_else(|_| "[]".into());
    let row = ValidationRow {
        at: req.now,
        job_id: req.job_id.clone(),
        sku,
        verdict: j.verdict.as_str().to_string(),
        criteria: j.criteria.clone(),
        failing: json(&j.failing),
        notes: json(&j.notes),
        metrics,
    };
    node_validation::record(store.connection(), &path, &row).map_err(|e| e.to_string())?;
    for change in &report.acted.changes {
        let _ =
            node_jobs::record_state_change(store.connection(), &path, &change.row(req.now, None));
    }
    let bodies = bodies(req, report, &row);
    export::export(req.config, store, req.node, req.now, bodies)
        .map(|_| ())
        .map_err(|e| format!("not exported: {e}"))
}

/// The run's export records: its `validation` record (an unknown verdict
/// says nothing of the node, and lemon learns only from judged runs), then
/// its state changes.
fn bodies(req: &Request, report: &Report, row: &ValidationRow) -> Vec<Body> {
    let j = &report.judgement;
    let mut bodies = Vec::new();
    if j.verdict != Verdict::Unknown {
        bodies.push(Body::Validation {
            job_id: req.job_id.clone(),
            sku: row.sku.clone(),
            metrics: row
                .metrics
                .iter()
                .map(|m| ValidationMetric {
                    metric: m.metric.clone(),
                    value: m.value,
                })
                .collect(),
            passed: j.verdict == Verdict::Pass,
            failing: j.failing.clone(),
            criteria: j.criteria.clone(),
        });
    }
    bodies.extend(report.acted.changes.iter().map(|c| Body::StateChange {
        action: format!("{} ({})", c.action, c.outcome.as_str()),
        reason: c.reason.clone(),
    }));
    bodies
}

/// The run for people, or one JSON object for programs.
pub fn render(report: &Report, format: Format) -> String {
    let j = &report.judgement;
    let sku = report.identity.as_ref().map_or("?", |i| i.sku.as_str());
    if format == Format::Json {
        let runs: Vec<serde_json::Value> = report.runs.iter().map(run_json).collect();
        let document = serde_json::json!({
            "node": report.node,
            "sku": sku,
            "verdict": j.verdict.as_str(),
            "criteria": j.criteria,
            "failing": j.failing,
            "notes": j.notes,
            "benchmarks": runs,
            "messages": report.acted.messages,
            "problems": report.problems,
        });
        return format!("{document:#}\n");
    }
    let mut out = format!(
        "validate {} (SKU {sku}): {} against {}\n",
        report.node,
        j.verdict.as_str().to_uppercase(),
        if j.criteria.is_empty() {
            "nothing"
        } else {
            &j.criteria
        }
    );
    for run in &report.runs {
        if let Outcome::Ran { metrics, exit_code } = &run.outcome {
            let code = exit_code.map_or("a signal".to_string(), |c| format!("exit {c}"));
            out.push_str(&format!(
                "  {}: {} metrics, {code}\n",
                run.name,
                metrics.len()
            ));
        }
    }
    for line in &j.failing {
        out.push_str(&format!("  FAIL {line}\n"));
    }
    for line in j
        .notes
        .iter()
        .chain(&report.acted.messages)
        .chain(&report.problems)
    {
        out.push_str(&format!("  {line}\n"));
    }
    out
}

fn run_json(run: &BenchRun) -> serde_json::Value {
    match &run.outcome {
        Outcome::Ran { metrics, exit_code } => serde_json::json!({
            "name": run.name,
            "outcome": "ran",
            "exit_code": exit_code,
            "metrics": metrics.iter().map(|m| serde_json::json!({
                "name": m.name, "value": m.value, "unit": m.unit,
            })).collect::<Vec<_>>(),
        }),
        Outcome::NotRun(why) => {
            serde_json::json!({ "name": run.name, "outcome": "not_run", "why": why })
        }
        Outcome::Error(why) => {
            serde_json::json!({ "name": run.name, "outcome": "error", "why": why })
        }
    }
}
