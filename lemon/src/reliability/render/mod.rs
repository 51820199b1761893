//! Rendering a [`ReliabilityReport`](super::ReliabilityReport): text for
//! terminals, JSON for machines, one self-contained HTML page for people.

pub mod html;
pub mod json;
pub mod text;

use super::remediation::RemediationRow;
use super::{ReliabilityError, ReliabilityReport};
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
        Format::Text => Ok(text::render(report)),
        Format::Json => json::render(report),
        Format::Html => Ok(html::render(report)),
    }
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
    } else {
        format!("{:.0} min", h * 60.0)
    }
}

/// One row of the incidents table, as cells: category, incidents, resets,
/// reboots, hand-overs, remediated, returned share, median time out.
pub(crate) fn remediation_cells(row: &RemediationRow) -> [String; 8] {
    [
        row.category.clone(),
        row.incidents.to_string(),
        row.resets.to_string(),
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
