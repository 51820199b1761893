//! Reports: ranked nodes with their signals and rules, what was done, and
//! the history of lemon decisions; as JSON, or as one model
//! ([`crate::document`]) rendered as text, Markdown or HTML.

use crate::act::ActReport;
use crate::db;
use crate::decide::{fmt_value, Scores, Verdict, P_FLOOR};
use crate::document::{self, Block, Document, Item, Paragraph, Section, Span, Table};
use crate::error::Result;
use crate::ingest::IngestReport;
use crate::reliability::render::significant;
use crate::signals::Signal;
use lemonade_sql::rusqlite::Connection;
use serde::Serialize;
use std::collections::BTreeMap;

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
    /// Nodes with exactly one uncaught failure their own job log pinned on
    /// their hardware: what counting cannot see yet. Never drained.
    pub watch_list: Vec<&'a Verdict>,
    /// The log tier's cut (`[lemon] log_p_value`) and the fleet's rate of
    /// log-witnessed failures it is tested against.
    pub log_p_cutoff: f64,
    pub log_rate_per_1000_node_days: f64,
    /// The next-worst nodes, for context.
    pub others: Vec<&'a Verdict>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub actions: Option<&'a ActReport>,
    pub decisions: Vec<Decision>,
    /// The firmware versions of the flagged nodes: firmware is a common
    /// root cause of lemons.
    pub firmware: BTreeMap<String, Vec<Version>>,
    /// `lemon watch --live`'s newest detections (issue 33).
    pub watch_detections: Vec<db::detections::DetectionRow>,
    /// Take-outs the nodes' fleet breaker refused within the window, as
    /// their spool export told (issue 48): a node left in service with a
    /// fault is news for the administrator, not only for slurmd's log.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub node_breaker_holds: Vec<BreakerHold>,
    /// The nodes whose versions differ from their SKU's (issue 34).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<crate::drift::DriftReport>,
    /// The nodes whose NVLink clique or cluster differs from their rack's
    /// (issue 50); only where racks are known or nodes sent a domain.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rack_drift: Option<crate::rack_drift::RackDriftReport>,
    /// `lemon run`'s validation step (issue 31), when enabled.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validation_step: Option<&'a crate::validate::step::StepReport>,
    /// Each node's last validation and the fleet's bands (issue 31).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub validations: Option<crate::validate::report::ValidationView>,
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
            watch_list: scores.watch_list().collect(),
            log_p_cutoff: scores.log_p_cutoff,
            log_rate_per_1000_node_days: scores.log_rate_per_1000_node_days,
            others: scores
                .verdicts
                .iter()
                .filter(|v| !v.flagged)
                .take(top)
                .collect(),
            actions: None,
            decisions,
            firmware: BTreeMap::new(),
            watch_detections: Vec::new(),
            node_breaker_holds: Vec::new(),
            drift: None,
            rack_drift: None,
            validation_step: None,
            validations: None,
        }
    }

    /// Adds each node's last validation and the fleet's bands per SKU,
    /// when the site validates (`[validate] enabled`) or has results.
    pub fn with_validations(
        mut self,
        conn: &Connection,
        settings: &lemonade_config::ValidateSettings,
    ) -> Result<Self> {
        let view = crate::validate::report::load(conn, settings, self.generated_at)?;
        if settings.enabled || !view.last.is_empty() {
            self.validations = Some(view);
        }
        Ok(self)
    }

    /// Adds the version drift within each SKU, from the inventory in `conn`.
    pub fn with_drift(mut self, conn: &Connection) -> Result<Self> {
        let inventory = db::inventory::latest_inventory(conn)?;
        self.drift = Some(crate::drift::from_inventory(&inventory));
        Ok(self)
    }

    /// Adds the NVLink domain drift within each rack of `racks`, from the
    /// inventory in `conn`; nothing on a site with no rack and no domain.
    pub fn with_rack_drift(
        mut self,
        conn: &Connection,
        racks: &crate::rack_drift::Racks,
    ) -> Result<Self> {
        let inventory = db::inventory::latest_inventory(conn)?;
        let report = crate::rack_drift::analyse(&inventory, racks);
        if !racks.is_empty() || report.judged > 0 || !report.unplaced.is_empty() {
            self.rack_drift = Some(report);
        }
        Ok(self)
    }

    /// Adds `lemon watch --live`'s newest detections from `conn`.
    pub fn with_watch_detections(mut self, conn: &Connection) -> Result<Self> {
        self.watch_detections =
            db::detections::recent(conn, crate::watch::report::REPORT_DETECTIONS)?;
        Ok(self)
    }

    /// Adds the take-outs the nodes' fleet breaker refused within the
    /// window, from the state changes the spool export brought to `conn`.
    pub fn with_node_breaker_holds(mut self, conn: &Connection) -> Result<Self> {
        let since = self.generated_at - i64::from(self.window_days) * 86_400;
        let rows = db::reliability::state_changes(conn, since, self.generated_at + 1)?;
        self.node_breaker_holds = rows
            .into_iter()
            .filter_map(|r| {
                let action = r.code?.strip_suffix(" (breaker)")?.to_string();
                Some(BreakerHold {
                    node: r.node,
                    at: r.at,
                    action,
                    reason: r.detail.unwrap_or_default(),
                })
            })
            .collect();
        Ok(self)
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

    /// Renders in `format`: JSON is the report's own structure; the other
    /// formats render one model of it ([`Report::document`]).
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => serde_json::to_string_pretty(self).unwrap_or_default() + "\n",
            Format::Text => document::text::render(&self.document()),
            Format::Markdown => document::markdown::render(&self.document()),
            Format::Html => document::html::render(&self.document()),
        }
    }

    /// The report as a document: the fleet, the flagged nodes with their
    /// evidence, every shown node's signals, what was done, and the
    /// decision history.
    pub fn document(&self) -> Document<'static> {
        let mut sections = vec![
            self.flagged_section(),
            self.watch_section(),
            self.nodes_section(),
        ];
        sections.extend(self.actions.map(actions_section));
        sections.extend((self.validation_step).map(crate::validate::report::step_section));
        if !self.node_breaker_holds.is_empty() {
            sections.push(breaker_section(&self.node_breaker_holds));
        }
        sections.push(self.history_section());
        if !self.watch_detections.is_empty() {
            sections.push(crate::watch::report::section(&self.watch_detections));
        }
        sections.extend(self.drift.as_ref().map(crate::drift::section));
        sections.extend(self.rack_drift.as_ref().map(crate::rack_drift::section));
        sections.extend((self.validations.as_ref()).map(crate::validate::report::section));
        Document {
            title: "Lemon report".into(),
            preamble: self.preamble(),
            sections,
        }
    }

    fn preamble(&self) -> Vec<Block<'static>> {
        let mut blocks = vec![Block::from(Paragraph::plain(format!(
            "Generated {}; history until {}; window {} days.",
            db::fmt_time(self.generated_at),
            self.history_until
                .map_or("(none)".to_string(), db::fmt_time),
            self.window_days
        )))];
        if let Some(i) = self.ingest {
            blocks.push(Block::Preformatted(i.text()));
        }
        let th: Vec<String> = self
            .thresholds
            .iter()
            .map(|(n, v)| format!("{n}>={}", fmt_value(*v)))
            .collect();
        for line in [
            format!("Fleet: {}.", self.fleet_text()),
            format!("{}.", self.cut_text()),
            format!("Thresholds: {}.", th.join(" ")),
        ] {
            blocks.push(Paragraph::plain(line).into());
        }
        blocks
    }

    /// Each flagged node: why, its signals and rules, its firmware, and
    /// the jobs counted against it with their evidence.
    fn flagged_section(&self) -> Section<'static> {
        let items: Vec<Item> = self
            .flagged
            .iter()
            .map(|v| node_item(v, &self.firmware_text(&v.signals.node)))
            .collect();
        let s = Section::new(format!("Flagged nodes ({})", self.flagged.len()));
        if items.is_empty() {
            s
        } else {
            s.with(Block::List(items))
        }
    }

    /// The watch list: each node with its one log-witnessed failure. Said
    /// to be no drain, so nobody reads it as one.
    fn watch_section(&self) -> Section<'static> {
        let s = Section::new(format!("Watch list ({})", self.watch_list.len()));
        if self.watch_list.is_empty() {
            return s;
        }
        let items: Vec<Item> = self
            .watch_list
            .iter()
            .map(|v| {
                let mut item = Item::new(vec![
                    Span::Strong(v.signals.node.clone()),
                    ": one uncaught failure its own job log pinned on its hardware; not drained, one more makes it testable".into(),
                ]);
                item.children = v
                    .signals
                    .evidence
                    .iter()
                    .filter(|j| j.rule == crate::attribute::Rule::JobLog && !j.caught_by_check)
                    .map(|j| {
                        Item::new(vec![
                            Span::Code(j.job_id.clone()),
                            format!(" {} {}", db::fmt_time(j.end), j.detail).into(),
                        ])
                    })
                    .collect();
                item
            })
            .collect();
        s.with(Block::List(items))
    }

    /// Every shown node's signals against the thresholds; tripped rules
    /// stand out.
    fn nodes_section(&self) -> Section<'static> {
        let mut table = Table::new("nodes")
            .left("node", 16)
            .left("flagged", 0)
            .right("fails", 0)
            .right("p", 9);
        for n in Signal::ALL {
            table = table.right(&n.to_string(), 0);
        }
        let mut threshold = vec![Span::Emphasis("threshold".into())];
        threshold.extend(std::iter::repeat_n(Span::from(""), 3));
        threshold.extend(self.thresholds.iter().map(|(_, v)| fmt_value(*v).into()));
        table.rows.push(threshold);
        for v in self.flagged.iter().chain(self.others.iter()) {
            let mut row = vec![
                Span::Text(v.signals.node.clone()),
                if v.flagged {
                    Span::Strong("yes".into())
                } else {
                    "no".into()
                },
                v.signals.fails().to_string().into(),
                p_text(v.p_value).into(),
            ];
            row.extend(Signal::ALL.iter().map(|n| {
                let val = fmt_value(v.signals.get(*n));
                if v.tripped.iter().any(|t| t.signal == *n) {
                    Span::Strong(val)
                } else {
                    Span::Text(val)
                }
            }));
            table.rows.push(row);
        }
        Section::new("Nodes").with(table)
    }

    fn history_section(&self) -> Section<'static> {
        let table = Table::new("decisions")
            .left("when", 0)
            .left("node", 16)
            .left("action", 24)
            .left("reason", 0)
            .rows(self.decisions.iter().map(|d| {
                [
                    db::fmt_time(d.at),
                    d.node.clone(),
                    format!("{}{}", d.action, if d.dry_run { " (dry run)" } else { "" }),
                    d.reason.clone(),
                ]
            }));
        Section::new("Recent decision history").with(table)
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

    /// What made a count improbable in this scoring: the weighed count's
    /// cut, then the log tier's.
    fn cut_text(&self) -> String {
        format!(
            "{}; failures a job's log pinned on the node's own hardware: a Poisson tail at most {} against {:.3} per 1000 node-days",
            self.count_cut_text(),
            p_text(self.log_p_cutoff),
            self.log_rate_per_1000_node_days
        )
    }

    fn count_cut_text(&self) -> String {
        if self.false_discovery_rate > 0.0 {
            format!(
                "improbable: a Poisson tail at most {} (the false-discovery cut at rate {} over {} nodes)",
                p_text(self.p_cutoff), self.false_discovery_rate, self.fleet_nodes
            )
        } else {
            format!("improbable: a Poisson tail below {}", p_text(self.p_cutoff))
        }
    }
}

/// One take-out a node's fleet breaker refused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BreakerHold {
    pub node: String,
    pub at: i64,
    /// `drain` or `down`.
    pub action: String,
    /// The reason it would have set (`hc: ECC_VOLATILE_UNCORRECTED gpu5`).
    pub reason: String,
}

/// The nodes the fleet breaker left in service, one line each: each still
/// has the fault its reason names, unless a later run cleared it.
fn breaker_section(holds: &[BreakerHold]) -> Section<'static> {
    let mut s = Section::new(format!(
        "Held by the fleet breaker on the nodes ({})",
        holds.len()
    ));
    s.push(Paragraph::plain(
        "A burst of take-outs with one code made these nodes leave their fault in service: \
         check the config that was pushed, or take them out by hand.",
    ));
    let items: Vec<Item> = holds
        .iter()
        .map(|h| {
            Item::text(format!(
                "FLEET BREAKER {}: {} not set `{}` ({})",
                db::fmt_time(h.at),
                h.node,
                h.reason,
                h.action
            ))
        })
        .collect();
    s.with(Block::List(items))
}

/// What was done: a refusal, the breaker, and each node's outcome with
/// the command it ran (or would run).
fn actions_section(a: &ActReport) -> Section<'static> {
    let mut s = Section::new("Actions");
    if let Some(r) = &a.refused {
        s.push(Paragraph::spans(vec![
            Span::Strong("NOTHING DRAINED".into()),
            format!(": {r}").into(),
        ]));
    }
    if a.breaker_tripped {
        s.push(Paragraph::spans(vec![
            Span::Strong("CIRCUIT BREAKER".into()),
            format!(": more lemons than the cap of {} per run", a.breaker_cap).into(),
        ]));
    }
    let items: Vec<Item> = a
        .outcomes
        .iter()
        .map(|o| {
            let what = format!(": {} {}", o.action.as_str(), o.detail);
            let item = Item::new(vec![Span::Code(o.node.clone()), what.trim_end().into()]);
            match &o.command {
                Some(c) => item.child(Item::new(vec![Span::Code(c.clone())])),
                None => item,
            }
        })
        .collect();
    if !items.is_empty() {
        s.push(Block::List(items));
    }
    s
}

/// A flagged node's item: the test, then its signals, rules, firmware and
/// the jobs counted against it.
fn node_item(v: &Verdict, firmware: &str) -> Item {
    let head = format!(
        ": {} distinct failing jobs on {} days; {} caught by no check ({} seen by Slurm), on {} days, where the fleet's rate of those predicts {:.2} ({}, {} {})",
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
    let rules: Vec<String> = v
        .tripped
        .iter()
        .map(|t| format!("{}>={}", t.signal, fmt_value(t.threshold)))
        .collect();
    let mut item = Item::new(vec![Span::Code(v.signals.node.clone()), head.into()])
        .child(Item::text(format!("signals: {}", vals.join(" "))))
        .child(Item::text(format!(
            "rules tripped: {}{}",
            if v.poisson_tripped { "poisson " } else { "" },
            rules.join(" ")
        )));
    if !firmware.is_empty() {
        item = item.child(Item::text(format!("firmware: {firmware}")));
    }
    let mut jobs = Item::text("jobs counted against it, with the evidence:");
    for j in &v.signals.evidence {
        jobs = jobs.child(Item::new(vec![
            format!("{} ", db::fmt_time(j.end)).into(),
            Span::Code(j.job_id.clone()),
            format!(
                " ({}): {}{}: {}",
                j.user,
                j.rule.as_str(),
                caught_text(j),
                j.detail
            )
            .into(),
        ]));
    }
    item.child(jobs)
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
    use super::{p_equals, p_text, Format, Report};
    use crate::attribute::Rule;
    use crate::decide::decide;
    use crate::signals::{BlamedJob, FleetSignals, NodeSignals};
    use lemonade_config::LemonSettings;

    /// A fleet where `seen` has one uncaught failure its log pinned on it
    /// and `quiet` one that only an exit code blames.
    fn scores() -> crate::decide::Scores {
        let job = |id: &str, rule| BlamedJob {
            job_id: id.into(),
            end: 1_700_000_000,
            user: "u".into(),
            rule,
            category: "job_log".into(),
            detail: "Xid 79 on this node".into(),
            caught_by_check: false,
        };
        let node = |name: &str, id: i64, rule: Rule, log: u32| NodeSignals {
            node: name.into(),
            node_id: id,
            failing_jobs: vec![format!("{name}-1")],
            failing_days: 1,
            uncaught_fails: 1,
            uncaught_days: 1,
            uncaught_log_fails: log,
            uncaught_log_days: log,
            node_days: 28.0,
            evidence: vec![job(&format!("{name}-1"), rule)],
            ..NodeSignals::default()
        };
        let nodes = vec![
            node("seen", 1, Rule::JobLog, 1),
            node("quiet", 2, Rule::NodeExit, 0),
        ];
        let fleet = FleetSignals {
            nodes,
            ..FleetSignals::default()
        };
        decide(fleet, &LemonSettings::default())
    }

    #[test]
    fn the_report_lists_a_node_with_one_log_witnessed_failure_on_its_watch_list_in_every_format() {
        let scores = scores();
        let report = Report::new(&scores, 28, 5, 1_700_000_100, None, Vec::new());
        let text = report.render(Format::Text);
        assert!(text.contains("Watch list (1)"), "{text}");
        assert!(text.contains("Flagged nodes (0)"), "{text}");
        let listed = text.split("Watch list (1)").nth(1).unwrap();
        assert!(
            listed.contains("seen") && listed.contains("seen-1"),
            "{text}"
        );
        let html = report.render(Format::Html);
        assert!(html.contains("Watch list (1)"), "{html}");
        let json: serde_json::Value = serde_json::from_str(&report.render(Format::Json)).unwrap();
        let watched: Vec<&str> = json["watch_list"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v["signals"]["node"].as_str().unwrap())
            .collect();
        assert_eq!(watched, ["seen"]);
    }

    #[test]
    fn probabilities_below_double_precision_read_as_a_bound() {
        assert_eq!(p_equals(0.0), "p < 1e-12");
        assert_eq!(p_text(3e-13), "< 1e-12");
        assert_eq!(p_equals(3.14e-5), "p = 3.1e-5");
        assert_eq!(p_text(0.098), "0.10");
        assert_eq!(p_text(1.0), "1.00");
    }
}
