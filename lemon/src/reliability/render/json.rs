//! JSON output: the report's own structure, serialised as is.

use crate::reliability::{ReliabilityError, ReliabilityReport};

/// Pretty-printed JSON of the whole report. Non-finite numbers (a
/// checkpoint interval that any value satisfies) become `null`.
pub fn render(report: &ReliabilityReport) -> Result<String, ReliabilityError> {
    serde_json::to_string_pretty(report).map_err(ReliabilityError::Json)
}
