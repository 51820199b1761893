//! The reliability report's charts: each an SVG on a page (drawn by
//! [`svg`](crate::reliability::svg)), and the rolling rate also as text.

use crate::document::Chart;
use crate::reliability::failure_rate::RollingRate as Rolling;
use crate::reliability::lemons::SignalDistribution;
use crate::reliability::mttf::MttfTable;
use crate::reliability::svg::{self, MttfPoint};

/// The rolling failure rate by category, stacked.
pub struct RollingRate<'a>(pub &'a Rolling);

impl Chart for RollingRate<'_> {
    fn svg(&self) -> String {
        let roll = self.0;
        let days: Vec<String> = roll
            .days
            .iter()
            .map(|d| d.format("%m-%d").to_string())
            .collect();
        let series: Vec<(String, Vec<f64>)> = roll
            .categories
            .iter()
            .cloned()
            .zip(roll.rates.iter().cloned())
            .collect();
        svg::stacked_area(
            "failure-rate",
            &format!(
                "Rolling {}-day failure rate by category (all GPU jobs)",
                roll.window_days
            ),
            "failures / 1000 node-days",
            &days,
            &series,
        )
    }

    /// Every 7th day, ending on the last: the total and each category.
    fn text_lines(&self) -> Vec<String> {
        let roll = self.0;
        if roll.days.is_empty() {
            return Vec::new();
        }
        let mut days: Vec<usize> = (0..roll.days.len()).rev().step_by(7).collect();
        days.reverse();
        let mut lines = vec![format!(
            "rolling {}-day r_f, all GPU jobs (every 7th day):",
            roll.window_days
        )];
        for d in days {
            let parts: Vec<String> = roll
                .categories
                .iter()
                .zip(&roll.rates)
                .filter(|(_, v)| v[d] > 0.0)
                .map(|(c, v)| format!("{c} {:.2}", v[d]))
                .collect();
            lines.push(format!(
                "  {}  {:>7.2}  {}",
                roll.days[d],
                roll.total[d],
                parts.join(", ")
            ));
        }
        lines
    }
}

/// MTTF against job size: empirical points with intervals, the projection.
pub struct Mttf<'a>(pub &'a MttfTable);

impl Chart for Mttf<'_> {
    fn svg(&self) -> String {
        let points: Vec<MttfPoint> = self
            .0
            .rows
            .iter()
            .map(|row| MttfPoint {
                gpus: row.gpus as f64,
                empirical: row.empirical_hours,
                ci: row.ci_low_hours.zip(row.ci_high_hours),
                projected: row.projected_hours,
            })
            .collect();
        svg::mttf_chart("mttf", "MTTF vs job size", &points)
    }
}

/// One signal's distribution over nodes, with its threshold.
pub struct Cdf<'a>(pub &'a SignalDistribution);

impl Chart for Cdf<'_> {
    fn svg(&self) -> String {
        let s = self.0;
        svg::cdf_chart(
            &format!("cdf-{}", s.name),
            &format!("{} over nodes", s.name),
            &s.sorted_values,
            s.threshold,
        )
    }
}
