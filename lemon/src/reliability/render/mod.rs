//! Rendering a [`ReliabilityReport`](super::ReliabilityReport): JSON for
//! machines (the report's own structure); text and one self-contained HTML
//! page from one model of its sections (`sections`), drawn by the
//! [`document`](crate::document) renderers.

mod charts;
pub mod json;
pub mod sections;

use super::failure_rate::Rate;
use super::remediation::RemediationRow;
use super::{ReliabilityError, ReliabilityReport};
use crate::document;
use std::str::FromStr;

/// Output format of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Html,
}

impl FromStr for Format {
    type Err = ReliabilityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "text" => Ok(Format::Text),
            "json" => Ok(Format::Json),
            "html" => Ok(Format::Html),
            other => Err(ReliabilityError::InvalidParameter {
                name: "format",
                why: format!("{other:?} is not one of text, json, html"),
            }),
        }
    }
}

/// Renders the report in `format`.
pub fn render(report: &ReliabilityReport, format: Format) -> Result<String, ReliabilityError> {
    match format {
        Format::Text => Ok(document::text::render(&sections::document(report))),
        Format::Json => json::render(report),
        Format::Html => Ok(document::html::render(&sections::document(report))),
    }
}

/// A quantity for people: three significant digits at most, whole numbers
/// from 100 on (grouped by thousands from 10,000), and powers of ten only
/// below one in a thousand (`6.9e-4`).
pub fn significant(v: f64) -> String {
    let a = v.abs();
    if !v.is_finite() {
        "∞".into()
    } else if a == 0.0 {
        "0".into()
    } else if a >= 10_000.0 {
        thousands(&format!("{v:.0}"))
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a < 1e-3 {
        format!("{v:.1e}")
    } else {
        let digits = (2 - a.log10().floor() as i32).max(0) as usize;
        let s = format!("{v:.digits$}");
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
}

/// `1477259995` as `1,477,259,995`.
fn thousands(digits: &str) -> String {
    let (sign, digits) = digits.split_at(usize::from(digits.starts_with('-')));
    let mut out = String::from(sign);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A failure rate per 1000 node-days: two decimals, as the paper prints
/// them, but never a bare `0.00` for a rate that is not zero.
pub(crate) fn rate_value(v: f64) -> String {
    if v > 0.0 && v < 0.005 {
        significant(v)
    } else {
        format!("{v:.2}")
    }
}

/// `6.93 (95% interval 2.10 to 15.3)` when the rate carries its interval.
pub(crate) fn rate_with_interval(rate: &Rate, confidence: f64) -> String {
    match rate.interval_per_1000 {
        Some((low, high)) => format!(
            "{} ({:.0}% interval {} to {})",
            rate_value(rate.per_1000_node_days),
            confidence * 100.0,
            significant(low),
            significant(high)
        ),
        None => rate_value(rate.per_1000_node_days),
    }
}

/// `1 failure`, `2 failures`.
pub(crate) fn failures(n: u64) -> String {
    format!("{n} failure{}", if n == 1 { "" } else { "s" })
}

/// `12.3%`.
pub(crate) fn pct(share: f64) -> String {
    if share > 0.0 && share < 0.001 {
        format!("{:.2}%", share * 100.0)
    } else {
        format!("{:.1}%", share * 100.0)
    }
}

/// A duration given in hours, in the unit that reads best.
pub(crate) fn duration_hours(h: f64) -> String {
    if !h.is_finite() {
        "∞".into()
    } else if h >= 72.0 {
        format!("{:.1} d", h / 24.0)
    } else if h >= 1.0 {
        format!("{h:.1} h")
    } else if h * 60.0 >= 1.0 {
        format!("{:.0} min", h * 60.0)
    } else {
        format!("{:.0} s", h * 3600.0)
    }
}

/// The span of the report, `from to until UTC (28.0 d)`.
pub(crate) fn range_text(r: &super::TimeRange) -> String {
    format!(
        "{} to {} UTC ({})",
        r.since.format("%Y-%m-%d %H:%M"),
        r.until.format("%Y-%m-%d %H:%M"),
        duration_hours(r.days() * 24.0)
    )
}

/// `Exposure: 0.04 node-days, 0.33 GPU-hours of runtime.`
pub(crate) fn exposure_text(e: &super::Exposure) -> String {
    format!(
        "Exposure: {} node-days, {} GPU-hours of runtime (rates need {} node-days).",
        significant(e.node_days),
        significant(e.gpu_hours),
        significant(e.min_node_days)
    )
}

/// One row of the incidents table, as cells: category, incidents, resets,
/// restarts, reboots, hand-overs, remediated, returned share, median time out.
pub(crate) fn remediation_cells(row: &RemediationRow) -> [String; 9] {
    [
        row.category.clone(),
        row.incidents.to_string(),
        row.resets.to_string(),
        row.restarts.to_string(),
        row.reboots.to_string(),
        row.hand_overs.to_string(),
        row.remediated.to_string(),
        if row.remediated == 0 {
            "—".into()
        } else {
            pct(row.returned_share)
        },
        row.median_hours_out.map_or("—".into(), duration_hours),
    ]
}

/// `Some` number with `digits` decimals, or a dash.
pub(crate) fn opt(v: Option<f64>, digits: usize) -> String {
    match v {
        Some(x) if x.is_infinite() => "any".into(),
        Some(x) => format!("{x:.digits$}"),
        None => "—".into(),
    }
}

/// The checkpoint interval needed for the target, for a table cell.
pub(crate) fn checkpoint_cell(v: Option<f64>) -> String {
    match v {
        Some(x) if x.is_infinite() => "any".into(),
        Some(x) if x >= 600.0 => format!("{:.1} h", x / 60.0),
        Some(x) if x >= 1.0 => format!("{x:.0} min"),
        Some(x) => format!("{:.0} s", x * 60.0),
        None => "unreachable".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn significant_keeps_three_digits_and_no_exponent_above_a_thousandth() {
        assert_eq!(significant(0.0), "0");
        assert_eq!(significant(0.001_736), "0.00174");
        assert_eq!(significant(6.931), "6.93");
        assert_eq!(significant(12.34), "12.3");
        assert_eq!(significant(2.0), "2");
        assert_eq!(significant(100.0), "100");
        assert_eq!(significant(7_734_130.6), "7,734,131");
        assert_eq!(significant(-12_345.0), "-12,345");
        assert_eq!(significant(0.000_42), "4.2e-4");
        assert_eq!(significant(f64::INFINITY), "∞");
    }

    #[test]
    fn a_rate_that_is_not_zero_never_reads_zero() {
        assert_eq!(rate_value(0.000_5), "5.0e-4");
        assert_eq!(rate_value(0.004), "0.004");
        assert_eq!(rate_value(6.934), "6.93");
        assert_eq!(rate_value(0.0), "0.00");
    }

    #[test]
    fn durations_under_a_minute_are_seconds() {
        assert_eq!(duration_hours(30.0 / 3600.0), "30 s");
        assert_eq!(duration_hours(1.0 / 60.0), "1 min");
        assert_eq!(duration_hours(24.0), "24.0 h");
        assert_eq!(duration_hours(28.0 * 24.0), "28.0 d");
    }
}
