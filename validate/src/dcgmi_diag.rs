//! `dcgmi diag -r N -j`: DCGM's diagnostic as JSON.
//!
//! The document is `{"DCGM GPU Diagnostic": {"test_categories": [{"category",
//! "tests": [{"name", "results": [{"gpu_ids", "status", "warnings", "info"}]}]}]}}`
//! (DCGM 4 may name the top object `"Diagnostic"` and the GPU `"gpu_id"`).
//! Each result becomes `<category>.<test>.gpu<ids>` (or `.all` where no GPU
//! is given), lower case with `_` for spaces, valued by its status:
//! 0 Pass, 1 Skip, 2 Warn, 3 Fail (unit `status`), with the status word and
//! the warnings as its detail. `tests_failed` and `tests_warned` count them.
//! A `runtime_error` (the diagnostic could not run) is a `runtime_error`
//! metric valued 3 (Fail), never a pass.

use crate::error::ParseError;
use crate::metric::Metrics;
use serde_json::{Map, Value};

/// A `-j` document of a full level-4 run on 8 GPUs is tens of kilobytes.
pub const MAX_JSON_BYTES: usize = 4 * 1024 * 1024;

const FAIL: f64 = 3.0;

pub fn parse(text: &str) -> Result<Metrics, ParseError> {
    if text.len() > MAX_JSON_BYTES {
        return Err(ParseError::TooLarge {
            size: text.len(),
            max: MAX_JSON_BYTES,
        });
    }
    let document: Value = serde_json::from_str(text).map_err(|err| ParseError::Json {
        line: err.line(),
        message: err.to_string(),
    })?;
    let diagnostic = document
        .get("DCGM GPU Diagnostic")
        .or_else(|| document.get("Diagnostic"))
        .and_then(Value::as_object)
        .ok_or_else(|| {
            ParseError::unexpected(1, "a `DCGM GPU Diagnostic` object", first_line(text))
        })?;
    let mut metrics = Metrics::default();
    if let Some(error) = diagnostic.get("runtime_error").and_then(Value::as_str) {
        metrics.push_detail("runtime_error", FAIL, "status", format!("Fail: {error}"));
    }
    read_categories(text, diagnostic, &mut metrics)?;
    if metrics.is_empty() {
        return Err(ParseError::unexpected(
            line_of(text, "test_categories"),
            "at least one test result",
            "",
        ));
    }
    let count = |code: f64| {
        metrics
            .metrics
            .iter()
            .filter(|metric| metric.value == code)
            .count() as f64
    };
    let (failed, warned) = (count(FAIL), count(2.0));
    metrics.push("tests_failed", failed, "count");
    metrics.push("tests_warned", warned, "count");
    Ok(metrics)
}

fn read_categories(
    text: &str,
    diagnostic: &Map<String, Value>,
    metrics: &mut Metrics,
) -> Result<(), ParseError> {
    let Some(categories) = diagnostic.get("test_categories") else {
        return Ok(());
    };
    let categories = array(text, categories, "test_categories")?;
    for category in categories {
        let name = string_field(text, category, "category")?;
        let tests = category.get("tests").unwrap_or(&Value::Null);
        for test in array(text, tests, &format!("{name}: tests"))? {
            let test_name = string_field(text, test, "name")?;
            let results = test.get("results").unwrap_or(&Value::Null);
            for result in array(text, results, &format!("{test_name}: results"))? {
                read_result(text, &format!("{name}.{test_name}"), result, metrics)?;
            }
        }
    }
    Ok(())
}

fn read_result(
    text: &str,
    test: &str,
    result: &Value,
    metrics: &mut Metrics,
) -> Result<(), ParseError> {
    let status = string_field(text, result, "status")?;
    let code = status_code(status).ok_or_else(|| {
        ParseError::unexpected(
            line_of(text, status),
            "a status Pass, Skip, Warn or Fail",
            status,
        )
    })?;
    let gpu = match result.get("gpu_ids").or_else(|| result.get("gpu_id")) {
        Some(Value::String(ids)) => format!("gpu{ids}"),
        Some(Value::Number(id)) => format!("gpu{id}"),
        _ => "all".to_string(),
    };
    let warnings = warnings(result.get("warnings"));
    let detail = if warnings.is_empty() {
        status.to_string()
    } else {
        format!("{status}: {}", warnings.join("; "))
    };
    metrics.push_detail(
        metric_name(&format!("{test}.{gpu}")),
        code,
        "status",
        detail,
    );
    Ok(())
}

/// DCGM prints `Pass`, `PASS`, `Skip`, `SKIPPED` and so on across versions.
fn status_code(status: &str) -> Option<f64> {
    match status.to_ascii_lowercase().as_str() {
        "pass" => Some(0.0),
        "skip" | "skipped" => Some(1.0),
        "warn" | "warning" => Some(2.0),
        "fail" => Some(FAIL),
        _ => None,
    }
}

/// Warnings are strings in DCGM 2, objects with a `warning` text later.
fn warnings(value: Option<&Value>) -> Vec<String> {
    let text = |warning: &Value| match warning {
        Value::String(text) => Some(text.clone()),
        Value::Object(fields) => fields
            .get("warning")
            .and_then(Value::as_str)
            .map(str::to_string),
        _ => None,
    };
    match value {
        Some(Value::Array(items)) => items.iter().filter_map(text).collect(),
        Some(single) => text(single).into_iter().collect(),
        None => Vec::new(),
    }
}

fn metric_name(raw: &str) -> String {
    raw.trim().to_lowercase().replace(' ', "_")
}

fn array<'a>(text: &str, value: &'a Value, what: &str) -> Result<&'a Vec<Value>, ParseError> {
    value.as_array().ok_or_else(|| {
        let key = what.rsplit(": ").next().unwrap_or(what);
        ParseError::unexpected(
            line_of(text, key),
            format!("`{what}` as a list"),
            &value.to_string(),
        )
    })
}

fn string_field<'a>(text: &str, object: &'a Value, key: &str) -> Result<&'a str, ParseError> {
    object.get(key).and_then(Value::as_str).ok_or_else(|| {
        ParseError::unexpected(
            line_of(text, &object.to_string()),
            format!("a `{key}` string"),
            &object.to_string(),
        )
    })
}

/// The line where `needle` first occurs, for errors about the JSON's
/// structure (serde_json's tree keeps no positions); 1 if it does not.
fn line_of(text: &str, needle: &str) -> usize {
    let quoted = format!("\"{needle}\"");
    let at = text
        .find(&quoted)
        .or_else(|| text.find(needle))
        .unwrap_or(0);
    text[..at].matches('\n').count() + 1
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runtime_error_is_a_failure_not_a_pass() {
        let doc = r#"{"DCGM GPU Diagnostic": {"runtime_error": "Couldn't find GPUs", "version": "3.3.1"}}"#;
        let metrics = parse(doc).unwrap();
        assert_eq!(metrics.value("runtime_error"), Some(FAIL));
        assert_eq!(metrics.value("tests_failed"), Some(1.0));
    }

    #[test]
    fn an_unknown_status_is_an_error() {
        let doc = r#"{"DCGM GPU Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
            {"name": "Memory", "results": [{"gpu_ids": "0", "status": "Maybe"}]}]}]}}"#;
        let err = parse(doc).unwrap_err();
        assert_eq!(err.line(), 2, "{err}");
    }

    #[test]
    fn a_document_without_results_is_an_error() {
        assert!(parse(r#"{"DCGM GPU Diagnostic": {"test_categories": []}}"#).is_err());
        assert!(parse(r#"{"something": "else"}"#).is_err());
    }

    #[test]
    fn dcgm_4_names_and_numeric_gpu_ids_read_too() {
        let doc = r#"{"Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
            {"name": "diagnostic", "results": [{"status": "Fail", "gpu_id": 0}]}]}]}}"#;
        assert_eq!(
            parse(doc).unwrap().value("hardware.diagnostic.gpu0"),
            Some(FAIL)
        );
    }
}
