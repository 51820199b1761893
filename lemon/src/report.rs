//! Reports: ranked nodes with their signals and rules, what was done, and
//! the history of lemon decisions; as text, JSON or Markdown.

use crate::act::ActReport;
use crate::db;
use crate::decide::{fmt_value, Scores, Verdict, P_FLOOR};
use crate::error::Result;
use crate::ingest::IngestReport;
use crate::reliability::render::significant;
use crate::signals::Signal;
use lemonade_sql::rusqlite::Connection;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Output formats of scores and reports.
#[derive(Debug, Clone, Copy, clap::ValueEnum, PartialEq, Eq, Default)]
pub enum Format {
    #[default]
    Text,
    Json,
    Markdown,
    /// One self-contained page (with `report --reliability`: inline SVG charts).
    Html,
}

pub use crate::db::decisions::{recent as decisions, Decision};
pub use crate::db::inventory::{firmware_versions as versions, Version};

/// Everything a report shows.
#[derive(Debug, Serialize)]
pub struct Report<'a> {
    pub generated_at: i64,
    pub history_until: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ingest: Option<&'a IngestReport>,
    pub window_days: u32,
    pub fleet_nodes: usize,
    pub fleet_rate_per_1000_node_days: f64,
    pub uncaught_rate_per_1000_node_days: f64,
    pub fleet_node_days: f64,
    pub min_report_node_days: f64,
    pub attributed_failures: u64,
    pub unattributed_failures: u64,
    pub user_error_failures: u64,
    /// The tail below which a node's count was improbable.
    pub p_cutoff: f64,
    pub false_discovery_rate: f64,
    pub thresholds: &'a [(Signal, f64)],
    pub flagged: Vec<&'a Verdict>,
    /// The next-worst nodes, for context.
    pub others: Vec<&'a Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actions: Option<&'a ActReport>,
    pub decisions: Vec<Decision>,
    /// The firmware versions of the flagged nodes: firmware is a common
    /// root cause of lemons.
    pub firmware: BTreeMap<String, Vec<Version>>,
}

impl<'a> Report<'a> {
    /// Assembles a report; `top` healthy nodes follow the flagged ones.
    pub fn new(
        scores: &'a Scores,
        window_days: u32,
        top: usize,
        generated_at: i64,
        history_until: Option<i64>,
        decisions: Vec<Decision>,
    ) -> Report<'a> {
        Report {
            generated_at,
            history_until,
            ingest: None,
            window_days,
            fleet_nodes: scores.fleet_nodes,
            fleet_rate_per_1000_node_days: scores.fleet_rate_per_1000_node_days,
            uncaught_rate_per_1000_node_days: scores.uncaught_rate_per_1000_node_days,
            fleet_node_days: scores.fleet_node_days,
            min_report_node_days: scores.min_report_node_days,
            attributed_failures: scores.attributed_failures,
            unattributed_failures: scores.unattributed_failures,
            user_error_failures: scores.user_error_failures,
            p_cutoff: scores.p_cutoff,
            false_discovery_rate: scores.false_discovery_rate,
            thresholds: &scores.thresholds.values,
            flagged: scores.flagged().collect(),
            others: scores
                .verdicts
                .iter()
                .filter(|v| !v.flagged)
                .take(top)
                .collect(),
            actions: None,
            decisions,
            firmware: BTreeMap::new(),
        }
    }

    /// Adds the flagged nodes' firmware versions from `conn`.
    pub fn with_firmware(mut self, conn: &Connection) -> Result<Self> {
        let names: Vec<&str> = self
            .flagged
            .iter()
            .map(|v| v.signals.node.as_str())
            .collect();
        self.firmware = versions(conn, &names)?;
        Ok(self)
    }

    fn firmware_text(&self, node: &str) -> String {
        match self.firmware.get(node).map(Vec::as_slice) {
            None => String::new(),
            Some([]) => "none exported (no [spool] dir, or no firmware check)".into(),
            Some(versions) => versions
                .iter()
                .map(|v| match v.item.split_once('/') {
                    Some(("gpu", gpu)) => format!("{gpu}.vbios={}", v.value),
                    Some((_, entity)) => format!("{entity}={}", v.value),
                    None => format!("{}={}", v.item, v.value),
                })
                .collect::<Vec<_>>()
                .join(" "),
        }
    }

    /// Renders in `format`.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => serde_json::to_string_pretty(self).unwrap_or_default() + "\n",
            Format::Text => self.text(),
            Format::Markdown => self.markdown(),
            Format::Html => format!(
                "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>lemon report</title></head><body><pre>{}</pre></body></html>\n",
                crate::reliability::svg::esc(&self.text())
            ),
        }
    }

    fn text(&self) -> String {
        let mut s = String::new();
        if let Some(i) = self.ingest {
            s.push_str(&i.text());
        }
        let _ = writeln!(
            s,
            "lemon report, {}; history until {}; window {} days",
            db::fmt_time(self.generated_at),
            self.history_until
                .map_or("(none)".to_string(), db::fmt_time),
            self.window_days
        );
        let _ = writeln!(s, "fleet: {}", self.fleet_text());
        let _ = writeln!(s, "{}", self.cut_text());
        let th: Vec<String> = self
            .thresholds
            .iter()
            .map(|(n, v)| format!("{n}>={}", fmt_value(*v)))
            .collect();
        let _ = writeln!(s, "thresholds: {}", th.join(" "));
        let _ = writeln!(s, "\nflagged nodes: {}", self.flagged.len());
        for v in &self.flagged {
            node_text(&mut s, v, &self.firmware_text(&v.signals.node));
        }
        if !self.others.is_empty() {
            let _ = writeln!(s, "\nnext-worst nodes:");
            for v in &self.others {
                let _ = writeln!(
                    s,
                    "  {:<16} fails {:>3}  p {:>9}  rules {}",
                    v.signals.node,
                    v.signals.fails(),
                    p_text(v.p_value),
                    v.tripped.len()
                );
            }
        }
        if let Some(a) = self.actions {
            let _ = writeln!(s, "\nactions:");
            if let Some(r) = &a.refused {
                let _ = writeln!(s, "  NOTHING DRAINED: {r}");
            }
            if a.breaker_tripped {
                let _ = writeln!(
                    s,
                    "  CIRCUIT BREAKER: more lemons than the cap of {} per run",
                    a.breaker_cap
                );
            }
            for o in &a.outcomes {
                let _ = writeln!(s, "  {:<16} {:<24} {}", o.node, o.action.as_str(), o.detail);
                if let Some(c) = &o.command {
                    let _ = writeln!(s, "    {c}");
                }
            }
        }
        let _ = writeln!(s, "\ndecision history:");
        for d in &self.decisions {
            let _ = writeln!(
                s,
                "  {}  {:<16} {:<24} {}{}",
                db::fmt_time(d.at),
                d.node,
                d.action,
                d.reason,
                if d.dry_run { " (dry run)" } else { "" }
            );
        }
        s
    }

    /// The fleet's line: its rate, or why there is none yet.
    fn fleet_text(&self) -> String {
        let counts = format!(
            "{} failed jobs blamed on nodes, {} unattributed, {} the users' own",
            self.attributed_failures, self.unattributed_failures, self.user_error_failures
        );
        let exposure = significant(self.fleet_node_days);
        if self.fleet_node_days < self.min_report_node_days {
            return format!(
                "{} nodes, no failure rate yet: not enough history: {exposure} node-days of the {} needed ({counts})",
                self.fleet_nodes,
                significant(self.min_report_node_days)
            );
        }
        format!(
            "{} nodes, {exposure} node-days, {:.2} hardware failures per 1000 node-days, {:.2} of them caught by no check ({counts})",
            self.fleet_nodes,
            self.fleet_rate_per_1000_node_days,
            self.uncaught_rate_per_1000_node_days,
        )
    }

    /// What made a count improbable in this scoring.
    fn cut_text(&self) -> String {
        if self.false_discovery_rate > 0.0 {
            format!(
                "improbable: a Poisson tail at most {} (the false-discovery cut at rate {} over {} nodes)",
                p_text(self.p_cutoff), self.false_discovery_rate, self.fleet_nodes
            )
        } else {
            format!("improbable: a Poisson tail below {}", p_text(self.p_cutoff))
        }
    }

    /// The markdown table of every node's signals.
    fn markdown_nodes(&self, s: &mut String) {
        let _ = writeln!(s, "## Nodes\n");
        let _ = write!(s, "| node | flagged | fails | p |");
        for n in Signal::ALL {
            let _ = write!(s, " {n} |");
        }
        let _ = write!(s, "\n|---|---|---|---|");
        for _ in Signal::ALL {
            let _ = write!(s, "---|");
        }
        s.push('\n');
        let _ = write!(s, "| *threshold* | | | |");
        for (_, v) in self.thresholds {
            let _ = write!(s, " {} |", fmt_value(*v));
        }
        s.push('\n');
        for v in self.flagged.iter().chain(self.others.iter()) {
            let _ = write!(
                s,
                "| {} | {} | {} | {} |",
                v.signals.node,
                if v.flagged { "**yes**" } else { "no" },
                v.signals.fails(),
                p_text(v.p_value)
            );
            for n in Signal::ALL {
                let tripped = v.tripped.iter().any(|t| t.signal == n);
                let val = fmt_value(v.signals.get(n));
                let _ = if tripped {
                    write!(s, " **{val}** |")
                } else {
                    write!(s, " {val} |")
                };
            }
            s.push('\n');
        }
    }

    /// The jobs counted against each flagged node, in markdown.
    fn markdown_flagged_jobs(&self, s: &mut String) {
        if !self.flagged.is_empty() {
            let _ = writeln!(s, "\n## Jobs counted against flagged nodes\n");
            for v in &self.flagged {
                let _ = writeln!(
                    s,
                    "* `{}`: {} jobs, {} of them caught by no check ({} seen by Slurm) where {:.2} were expected from the fleet's rate ({}, {} {})",
                    v.signals.node,
                    v.signals.fails(),
                    v.signals.uncaught_fails,
                    v.signals.uncaught_witnessed,
                    v.expected_fails,
                    p_equals(v.p_value),
                    if v.poisson_tripped { "at most the cut" } else { "above the cut" },
                    p_text(v.p_cutoff)
                );
                let firmware = self.firmware_text(&v.signals.node);
                if !firmware.is_empty() {
                    let _ = writeln!(s, "  * firmware: {}", firmware.replace('|', "\\|"));
                }
                for j in &v.signals.evidence {
                    let _ = writeln!(
                        s,
                        "  * {} `{}` ({}): {}{}: {}",
                        db::fmt_time(j.end),
                        j.job_id,
                        j.user,
                        j.rule.as_str(),
                        caught_text(j),
                        j.detail.replace('|', "\\|")
                    );
                }
            }
        }
    }

    fn markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "# Lemon report\n");
        let _ = writeln!(
            s,
            "Generated {}; history until {}; window {} days.\n",
            db::fmt_time(self.generated_at),
            self.history_until
                .map_or("(none)".to_string(), db::fmt_time),
            self.window_days
        );
        let _ = writeln!(s, "Fleet: {}.\n", self.fleet_text());
        let _ = writeln!(s, "{}.\n", self.cut_text());
        self.markdown_nodes(&mut s);
        self.markdown_flagged_jobs(&mut s);
        if let Some(a) = self.actions {
            let _ = writeln!(s, "\n## Actions\n");
            if let Some(r) = &a.refused {
                let _ = writeln!(s, "**Nothing drained**: {r}\n");
            }
            for o in &a.outcomes {
                let _ = writeln!(s, "* `{}`: {} {}", o.node, o.action.as_str(), o.detail);
            }
        }
        let _ = writeln!(s, "\n## Decision history\n");
        let _ = writeln!(s, "| when | node | action | reason |\n|---|---|---|---|");
        for d in &self.decisions {
            let _ = writeln!(
                s,
                "| {} | {} | {}{} | {} |",
                db::fmt_time(d.at),
                d.node,
                d.action,
                if d.dry_run { " (dry run)" } else { "" },
                d.reason.replace('|', "\\|")
            );
        }
        s
    }
}

fn node_text(s: &mut String, v: &Verdict, firmware: &str) {
    let _ = writeln!(
        s,
        "  {}: {} distinct failing jobs on {} days; {} caught by no check ({} seen by Slurm), on {} days, where the fleet's rate of those predicts {:.2} ({}, {} {})",
        v.signals.node,
        v.signals.fails(),
        v.signals.failing_days,
        v.signals.uncaught_fails,
        v.signals.uncaught_witnessed,
        v.signals.uncaught_days,
        v.expected_fails,
        p_equals(v.p_value),
        if v.poisson_tripped {
            "improbable: at most the cut"
        } else {
            "above the cut"
        },
        p_text(v.p_cutoff)
    );
    let vals: Vec<String> = Signal::ALL
        .iter()
        .map(|n| format!("{n}={}", fmt_value(v.signals.get(*n))))
        .collect();
    let _ = writeln!(s, "    signals: {}", vals.join(" "));
    let rules: Vec<String> = v
        .tripped
        .iter()
        .map(|t| format!("{}>={}", t.signal, fmt_value(t.threshold)))
        .collect();
    let _ = writeln!(
        s,
        "    rules tripped: {}{}",
        if v.poisson_tripped { "poisson " } else { "" },
        rules.join(" ")
    );
    if !firmware.is_empty() {
        let _ = writeln!(s, "    firmware: {firmware}");
    }
    let _ = writeln!(s, "    jobs counted against it, with the evidence:");
    for j in &v.signals.evidence {
        let _ = writeln!(
            s,
            "      {} {} {:<16} {}{}: {}",
            db::fmt_time(j.end),
            j.user,
            j.job_id,
            j.rule.as_str(),
            caught_text(j),
            j.detail
        );
    }
}

/// A probability for people: `< 1e-12`, `3.1e-5`, `0.042`, `0.98`.
fn p_text(p: f64) -> String {
    if p < P_FLOOR {
        "< 1e-12".into()
    } else if p < 0.01 {
        format!("{p:.1e}")
    } else {
        format!("{p:.2}")
    }
}

/// `p = 3.1e-5`, or `p < 1e-12`.
fn p_equals(p: f64) -> String {
    let t = p_text(p);
    if t.starts_with('<') {
        format!("p {t}")
    } else {
        format!("p = {t}")
    }
}

/// Marks a job whose fault a health check caught (it does not count in the test).
fn caught_text(j: &crate::signals::BlamedJob) -> &'static str {
    if j.caught_by_check {
        " (caught by a check)"
    } else {
        ""
    }
}

#[cfg(test)]
mod tests {
    use super::{p_equals, p_text};

    #[test]
    fn probabilities_below_double_precision_read_as_a_bound() {
        assert_eq!(p_equals(0.0), "p < 1e-12");
        assert_eq!(p_text(3e-13), "< 1e-12");
        assert_eq!(p_equals(3.14e-5), "p = 3.1e-5");
        assert_eq!(p_text(0.098), "0.10");
        assert_eq!(p_text(1.0), "1.00");
    }
}
