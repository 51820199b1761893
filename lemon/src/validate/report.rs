//! Validation in `lemon report` (issue 31 part 5): each node's last
//! validation, the fleet's bands per SKU, and in HTML one chart per SKU of
//! one metric's distribution over the nodes with the failing ones marked.
//! Also the section of `lemon run`'s validation step.

use super::learn::{self, Learned};
use super::step::{Outcome, StepReport};
use crate::db::{self, validations::LastValidation};
use crate::document::{Block, Chart, Item, Paragraph, Section, Span, Table};
use crate::error::Result;
use crate::reliability::svg::{self, NodePoint};
use lemonade_config::ValidateSettings;
use lemonade_sql::rusqlite::Connection;
use serde::Serialize;
use std::collections::BTreeMap;

/// What `lemon report` shows of validation.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ValidationView {
    /// Each node's last validation, by node.
    pub last: Vec<LastValidation>,
    pub learned: Learned,
    pub window_days: u32,
    #[serde(skip)]
    pub charts: Vec<SkuChart>,
}

/// One SKU's chart: its nodes' latest values of one metric.
#[derive(Debug, Clone)]
pub struct SkuChart {
    pub sku: String,
    pub metric: String,
    pub points: Vec<NodePoint>,
    pub bound: Option<f64>,
}

impl Chart for SkuChart {
    fn svg(&self) -> String {
        svg::distribution_chart(
            &format!("validation-{}", self.sku),
            &format!(
                "{} on {} (latest validation per node)",
                self.metric, self.sku
            ),
            &self.points,
            self.bound,
        )
    }
}

/// Reads the view from lemon.db: bands from the passed results of the last
/// `window_days` (as `lemon run` learns them), charts from every node's
/// latest result in that window, passed or not.
pub fn load(conn: &Connection, settings: &ValidateSettings, now: i64) -> Result<ValidationView> {
    let since = now - i64::from(settings.window_days) * 86_400;
    let passed = db::validations::latest_results(conn, since, true)?;
    let learned = learn::learn(
        settings,
        (passed.iter()).map(|r| (r.sku.as_str(), r.metric.as_str(), r.value)),
    );
    let latest = db::validations::latest_results(conn, since, false)?;
    Ok(ValidationView {
        last: db::validations::last_per_node(conn)?
            .into_values()
            .collect(),
        charts: charts(&latest, &learned, &settings.report_metric),
        learned,
        window_days: settings.window_days,
    })
}

/// One chart per SKU: `metric` where the SKU has it, else its first learned.
fn charts(
    latest: &[db::validations::MetricResult],
    learned: &Learned,
    metric: &str,
) -> Vec<SkuChart> {
    let mut by_sku: BTreeMap<&str, Vec<&db::validations::MetricResult>> = BTreeMap::new();
    for r in latest {
        by_sku.entry(r.sku.as_str()).or_default().push(r);
    }
    let mut out = Vec::new();
    for (sku, rows) in by_sku {
        let band_of = |m: &str| learned.bands.iter().find(|b| b.sku == sku && b.metric == m);
        let chosen = if rows.iter().any(|r| r.metric == metric) {
            Some(metric.to_string())
        } else {
            (learned.bands.iter())
                .find(|b| b.sku == sku)
                .map(|b| b.metric.clone())
        };
        let Some(chosen) = chosen else { continue };
        out.push(SkuChart {
            sku: sku.to_string(),
            points: (rows.iter())
                .filter(|r| r.metric == chosen)
                .map(|r| NodePoint {
                    node: r.node.clone(),
                    value: r.value,
                    failing: !r.passed,
                })
                .collect(),
            bound: band_of(&chosen).map(|b| b.bound()),
            metric: chosen,
        });
    }
    out
}

/// `lemon report`'s section.
pub fn section(view: &ValidationView) -> Section<'static> {
    let mut s = Section::new("Validation (benchmarks on idle nodes, after Anubis)");
    if view.last.is_empty() {
        return s.with(Paragraph::plain("No node has been validated yet."));
    }
    let failed = view.last.iter().filter(|v| !v.passed).count();
    s.push(Paragraph::plain(format!(
        "{} nodes validated, {failed} failing their last validation.",
        view.last.len()
    )));
    let mut table = Table::new("validations")
        .left("node", 0)
        .left("last validation", 0)
        .left("SKU", 0)
        .left("result", 0)
        .left("first failing metric", 0);
    // Failing nodes first: they are what the reader looks for.
    let mut last: Vec<&LastValidation> = view.last.iter().collect();
    last.sort_by_key(|v| v.passed);
    for v in last {
        table.row([
            Span::Code(v.node.clone()),
            db::fmt_time(v.at).into(),
            v.sku.clone().into(),
            if v.passed {
                Span::from("pass")
            } else {
                Span::Strong("FAIL".into())
            },
            v.failing.first().cloned().unwrap_or_default().into(),
        ]);
    }
    s.push(table);
    s.push(bands_block(&view.learned, view.window_days));
    for note in learn::too_few_notes(&view.learned.too_few) {
        s.push(Paragraph::plain(format!("note: {note}")));
    }
    for chart in &view.charts {
        s.push(Block::Chart(Box::new(chart.clone())));
    }
    s
}

/// The bands per SKU, as a list.
fn bands_block(learned: &Learned, window_days: u32) -> Block<'static> {
    if learned.bands.is_empty() {
        return Paragraph::plain(format!(
            "Bands: none learned from the passed results of the last {window_days} days."
        ))
        .into();
    }
    let mut by_sku: BTreeMap<&str, Item> = BTreeMap::new();
    for b in &learned.bands {
        let sku = by_sku.entry(b.sku.as_str()).or_insert_with(|| {
            Item::text(format!(
                "{} ({} nodes' latest passed results)",
                b.sku, b.results
            ))
        });
        sku.children.push(Item::text(b.text()));
    }
    Block::List(by_sku.into_values().collect())
}

/// `lemon run`'s section: the criteria published and the jobs submitted.
pub fn step_section(r: &StepReport) -> Section<'static> {
    let mut s = Section::new("Validation");
    let file = match (&r.criteria_file, r.criteria_written) {
        (Some(p), true) => format!("criteria written to {}", p.display()),
        (Some(p), false) => format!("criteria not written (dry run): {}", p.display()),
        (None, _) => "criteria not published: no spool directory".into(),
    };
    s.push(Paragraph::plain(format!(
        "{} bands learned; {file}. Budget {:.1} node-hours a day, {:.1} spent, {:.1} left.",
        r.learned.bands.len(),
        r.budget_node_hours,
        r.spent_node_hours,
        r.left_node_hours
    )));
    for note in learn::too_few_notes(&r.learned.too_few) {
        s.push(Paragraph::plain(format!("note: {note}")));
    }
    let items: Vec<Item> = (r.submissions.iter())
        .map(|sub| {
            let what = match &sub.outcome {
                Outcome::Submitted(id) => format!("submitted job {id}"),
                Outcome::WouldSubmit => "would submit".into(),
                Outcome::Held(why) => format!("held: {why}"),
                Outcome::Failed(e) => format!("submission failed: {e}"),
            };
            let reason = serde_json::to_value(sub.reason)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            Item::new(vec![
                Span::Code(sub.node.clone()),
                format!(": {what} ({reason}, risk {:.3})", sub.risk).into(),
            ])
            .child(Item::new(vec![Span::Code(sub.command.clone())]))
        })
        .collect();
    if !items.is_empty() {
        s.push(Block::List(items));
    }
    if !r.queued.is_empty() {
        s.push(Paragraph::plain(format!(
            "Already queued: {}.",
            r.queued.join(" ")
        )));
    }
    if !r.deferred.is_empty() {
        let shown: Vec<&str> = r.deferred.iter().take(20).map(String::as_str).collect();
        let more = r.deferred.len() - shown.len();
        let more = if more > 0 {
            format!(" and {more} more")
        } else {
            String::new()
        };
        s.push(Paragraph::plain(format!(
            "Deferred for lack of budget, most urgent first: {}{more}.",
            shown.join(" ")
        )));
    }
    s
}
