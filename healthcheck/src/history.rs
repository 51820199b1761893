//! `healthcheck history`: the runs and findings the node database holds.

use crate::output::Format;
use lemonade_config::Severity;
use lemonade_sql::node::{FindingRow, NodeStore, RunRow};
use lemonade_sql::node_jobs::{jobs_since, state_changes_since, JobRow, StateChangeRow};
use lemonade_sql::StoreError;
use serde::Serialize;
use std::fmt::Write as _;

#[derive(Serialize)]
struct HistoryJson {
    runs: Vec<RunWithFindings>,
    jobs: Vec<JobJson>,
    state_changes: Vec<StateChangeJson>,
}

#[derive(Serialize)]
struct JobJson {
    job_id: String,
    user: Option<String>,
    started_at: Option<String>,
    ended_at: Option<String>,
    exit_code: Option<i32>,
    signal: Option<i32>,
}

#[derive(Serialize)]
struct StateChangeJson {
    at: String,
    action: String,
    reason: String,
    outcome: String,
    detail: String,
}

#[derive(Serialize)]
struct RunWithFindings {
    #[serde(flatten)]
    run: RunJson,
    findings: Vec<FindingJson>,
}

#[derive(Serialize)]
struct RunJson {
    id: i64,
    started_at: String,
    duration_ms: i64,
    trigger: String,
    profile: String,
    job_id: Option<String>,
    worst: Severity,
    exit_code: i32,
}

#[derive(Serialize)]
struct FindingJson {
    check: String,
    entity: String,
    code: String,
    severity: Severity,
    expected: Option<String>,
    actual: Option<String>,
    action: String,
    message: String,
}

fn time(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .map(|d| d.format("%Y-%m-%d %H:%M:%S").to_string())
        .unwrap_or_default()
}

/// What `history` shows where the node has no database yet: nothing was
/// recorded, and reading the history creates none.
pub fn render_no_database(path: &std::path::Path, format: Format) -> String {
    match format {
        Format::Json => serde_json::to_string_pretty(&HistoryJson {
            runs: Vec::new(),
            jobs: Vec::new(),
            state_changes: Vec::new(),
        })
        .unwrap_or_default(),
        Format::Human => format!(
            "no node database at {}: no run has been recorded\n",
            path.display()
        ),
    }
}

/// An ok finding that carries a GPU's past, repaired errors (the `ecc`
/// check's lifetime counts): shown with the runs that are shown, never the
/// reason to show one.
fn is_history(f: &FindingRow) -> bool {
    f.severity == Severity::Ok && f.check_name == "ecc" && f.actual.is_some()
}

/// A run to show, with the findings to show with it.
type ShownRun = (RunRow, Vec<FindingRow>);

/// Renders runs, jobs and state changes since `since` (unix seconds); ok runs only with `all`.
pub fn render(
    store: &NodeStore,
    since: i64,
    all: bool,
    limit: usize,
    format: Format,
) -> Result<String, StoreError> {
    let shown = runs_to_show(store, since, all, limit)?;
    let jobs = jobs_since(store.connection(), store.path(), since)?;
    let changes = state_changes_since(store.connection(), store.path(), since)?;
    Ok(match format {
        Format::Json => json(shown, jobs, changes),
        Format::Human => {
            let mut out = human_runs(shown);
            out.push_str(&human_jobs(&jobs));
            out.push_str(&human_changes(&changes));
            out
        }
    })
}

/// Runs with a fault or a job, and the others too with `all`; each with its
/// findings that are not ok (and those that carry history).
fn runs_to_show(
    store: &NodeStore,
    since: i64,
    all: bool,
    limit: usize,
) -> Result<Vec<ShownRun>, StoreError> {
    let mut shown = Vec::new();
    for run in store.runs_since(since, limit)? {
        let findings: Vec<FindingRow> = store
            .findings_of(run.id)?
            .into_iter()
            .filter(|f| f.severity != Severity::Ok || is_history(f))
            .collect();
        let faults = findings.iter().any(|f| f.severity != Severity::Ok);
        if all || faults || run.job_id.is_some() {
            shown.push((run, findings));
        }
    }
    Ok(shown)
}

fn json(shown: Vec<ShownRun>, jobs: Vec<JobRow>, changes: Vec<StateChangeRow>) -> String {
    let history = HistoryJson {
        runs: shown.into_iter().map(run_json).collect(),
        jobs: jobs.into_iter().map(job_json).collect(),
        state_changes: changes.into_iter().map(change_json).collect(),
    };
    serde_json::to_string_pretty(&history).unwrap_or_default()
}

fn run_json((r, f): ShownRun) -> RunWithFindings {
    RunWithFindings {
        run: RunJson {
            id: r.id,
            started_at: time(r.started_at),
            duration_ms: r.duration_ms,
            trigger: r.trigger,
            profile: r.profile,
            job_id: r.job_id,
            worst: r.worst,
            exit_code: r.exit_code,
        },
        findings: f
            .into_iter()
            .map(|f| FindingJson {
                check: f.check_name,
                entity: f.entity,
                code: f.code,
                severity: f.severity,
                expected: f.expected,
                actual: f.actual,
                action: f.action,
                message: f.message,
            })
            .collect(),
    }
}

fn human_runs(shown: Vec<ShownRun>) -> String {
    let mut out = String::new();
    if shown.is_empty() {
        out.push_str("no runs with findings in that period (use --all to list clean runs)\n");
    }
    for (run, findings) in shown {
        let job = run
            .job_id
            .as_deref()
            .map(|j| format!(" job {j}"))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{}  {:<8} {:<8}{}  {} ({} ms)",
            time(run.started_at),
            run.trigger,
            run.profile,
            job,
            run.worst,
            run.duration_ms
        );
        for f in findings {
            let _ = writeln!(
                out,
                "    {:<8} {:<10} {:<14} {:<24} {}",
                f.severity, f.check_name, f.entity, f.code, f.message
            );
        }
    }
    out
}

fn human_jobs(jobs: &[JobRow]) -> String {
    let mut out = String::new();
    if !jobs.is_empty() {
        out.push_str("\njobs:\n");
    }
    for j in jobs {
        let _ = writeln!(
            out,
            "    {:<10} {:<10} start {:<19} end {:<19} exit {}",
            j.job_id,
            j.user.as_deref().unwrap_or("-"),
            j.started_at.map(time).unwrap_or_else(|| "-".into()),
            j.ended_at.map(time).unwrap_or_else(|| "-".into()),
            exit_text(j),
        );
    }
    out
}

fn human_changes(changes: &[StateChangeRow]) -> String {
    let mut out = String::new();
    if !changes.is_empty() {
        out.push_str("\nstate changes:\n");
    }
    for c in changes {
        let _ = writeln!(
            out,
            "    {}  {:<7} {:<9} {}  {}",
            time(c.at),
            c.action,
            c.outcome,
            c.reason,
            c.detail
        );
    }
    out
}

fn exit_text(j: &JobRow) -> String {
    match (j.exit_code, j.signal) {
        (_, Some(s)) if s != 0 => format!("signal {s}"),
        (Some(c), _) => c.to_string(),
        _ => "-".into(),
    }
}

fn job_json(j: JobRow) -> JobJson {
    JobJson {
        job_id: j.job_id,
        user: j.user,
        started_at: j.started_at.map(time),
        ended_at: j.ended_at.map(time),
        exit_code: j.exit_code,
        signal: j.signal,
    }
}

fn change_json(c: StateChangeRow) -> StateChangeJson {
    StateChangeJson {
        at: time(c.at),
        action: c.action,
        reason: c.reason,
        outcome: c.outcome,
        detail: c.detail,
    }
}
