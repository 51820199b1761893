//! How a run is shown: a compact table for people, one JSON object for
//! programs, and node_exporter textfile metrics.

use crate::record::RunReport;
use std::fmt::Write as _;

/// How a command prints what it has to say (`--format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// A table for people.
    Human,
    /// One JSON object for programs.
    Json,
}

/// Version of the JSON object; bumped when a field changes meaning.
pub const JSON_VERSION: u32 = 1;

/// The compact table: problems in full, healthy checks as one line each.
pub fn human(report: &RunReport) -> String {
    let mut out = String::new();
    let rows: Vec<[String; 5]> = report
        .checks
        .iter()
        .flat_map(|summary| {
            let findings: Vec<_> = report
                .findings
                .iter()
                .filter(|f| f.check == summary.name)
                .collect();
            let problems: Vec<_> = findings.iter().filter(|f| !f.is_ok()).collect();
            if problems.is_empty() {
                let entities = findings.len();
                vec![[
                    summary.name.clone(),
                    "-".into(),
                    "ok".into(),
                    "OK".into(),
                    format!(
                        "{entities} {} healthy",
                        if entities == 1 { "entity" } else { "entities" }
                    ),
                ]]
            } else {
                problems.iter().map(|f| row(f)).collect()
            }
        })
        .chain(
            // Findings outside any check summary: the store, config errors.
            report
                .findings
                .iter()
                .filter(|f| !report.checks.iter().any(|c| c.name == f.check))
                .map(row),
        )
        .collect();
    let headers = ["CHECK", "ENTITY", "SEVERITY", "CODE", "DETAIL"];
    let widths: Vec<usize> = (0..4)
        .map(|i| {
            rows.iter()
                .map(|r| r[i].len())
                .chain([headers[i].len()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cols: [&str; 5]| {
        let mut s = String::new();
        for (i, col) in cols.iter().enumerate().take(4) {
            let _ = write!(s, "{:<w$}  ", col, w = widths[i]);
        }
        s.push_str(cols[4]);
        s.trim_end().to_string()
    };
    out.push_str(&line(headers));
    out.push('\n');
    for r in &rows {
        out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4]]));
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "{}: {} ({} profile, {} checks, {:.1} ms, exit {})",
        report.node,
        report.worst,
        report.profile.as_str(),
        report.checks.len(),
        report.duration_ms,
        report.exit_code
    );
    out
}

fn row(f: &crate::finding::Finding) -> [String; 5] {
    let mut detail = f.message.clone();
    if f.expected.is_some() || f.actual.is_some() {
        let _ = write!(
            detail,
            "{}expected {}, got {}",
            if detail.is_empty() { "" } else { "; " },
            f.expected.as_deref().unwrap_or("-"),
            f.actual.as_deref().unwrap_or("-")
        );
    }
    if f.action != lemonade_config::Action::None && !f.is_ok() {
        let _ = write!(detail, " [{}]", f.action);
    }
    [
        f.check.clone(),
        f.entity.clone(),
        f.severity.to_string(),
        f.code.clone(),
        detail,
    ]
}

/// The documented JSON object (see the README's "JSON output").
pub fn json(report: &RunReport) -> String {
    let mut value = serde_json::to_value(report).unwrap_or_default();
    if let Some(obj) = value.as_object_mut() {
        obj.insert("version".into(), JSON_VERSION.into());
    }
    serde_json::to_string_pretty(&value).unwrap_or_default()
}

/// node_exporter textfile metrics.
pub fn prometheus(report: &RunReport) -> String {
    let mut out = String::new();
    out.push_str("# HELP lemonade_check_severity Severity of a check's finding for an entity: 0 ok, 1 unknown, 2 warning, 3 drain, 4 down.\n");
    out.push_str("# TYPE lemonade_check_severity gauge\n");
    // One gauge per check and entity: the worst finding wins.
    let mut worst: std::collections::BTreeMap<(&str, &str), &crate::finding::Finding> =
        Default::default();
    for f in &report.findings {
        let slot = worst
            .entry((f.check.as_str(), f.entity.as_str()))
            .or_insert(f);
        if f.severity > slot.severity {
            *slot = f;
        }
    }
    for ((check, entity), f) in &worst {
        let _ = writeln!(
            out,
            "lemonade_check_severity{{node=\"{}\",check=\"{}\",entity=\"{}\",code=\"{}\"}} {}",
            escape(&report.node),
            escape(check),
            escape(entity),
            escape(&f.code),
            f.severity.rank()
        );
    }
    out.push_str("# HELP lemonade_run_duration_seconds Wall time of the last health-check run.\n");
    out.push_str("# TYPE lemonade_run_duration_seconds gauge\n");
    let _ = writeln!(
        out,
        "lemonade_run_duration_seconds{{node=\"{}\",profile=\"{}\"}} {:.6}",
        escape(&report.node),
        report.profile.as_str(),
        report.duration_ms / 1000.0
    );
    out.push_str("# HELP lemonade_run_timestamp_seconds When the last health-check run started.\n");
    out.push_str("# TYPE lemonade_run_timestamp_seconds gauge\n");
    let _ = writeln!(
        out,
        "lemonade_run_timestamp_seconds{{node=\"{}\"}} {}",
        escape(&report.node),
        report.started_at.timestamp()
    );
    out
}

fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
