//! `healthcheck history`: the runs and findings the node database holds.

use crate::cli::Format;
use lemonade_sql::node::{FindingRow, NodeStore, RunRow};
use lemonade_sql::StoreError;
use serde::Serialize;
use std::fmt::Write as _;

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
    worst: String,
    exit_code: i32,
}

#[derive(Serialize)]
struct FindingJson {
    check: String,
    entity: String,
    code: String,
    severity: String,
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

/// Renders runs since `since` (unix seconds); ok runs only with `all`.
pub fn render(
    store: &NodeStore,
    since: i64,
    all: bool,
    limit: usize,
    format: Format,
) -> Result<String, StoreError> {
    let runs: Vec<RunRow> = store.runs_since(since, limit)?;
    let mut shown = Vec::new();
    for run in runs {
        let findings: Vec<FindingRow> = store
            .findings_of(run.id)?
            .into_iter()
            .filter(|f| f.severity != "ok")
            .collect();
        if all || !findings.is_empty() || run.job_id.is_some() {
            shown.push((run, findings));
        }
    }
    Ok(match format {
        Format::Json => {
            let list: Vec<RunWithFindings> = shown
                .into_iter()
                .map(|(r, f)| RunWithFindings {
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
                })
                .collect();
            serde_json::to_string_pretty(&list).unwrap_or_default()
        }
        Format::Human => {
            let mut out = String::new();
            if shown.is_empty() {
                out.push_str(
                    "no runs with findings in that period (use --all to list clean runs)\n",
                );
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
    })
}
