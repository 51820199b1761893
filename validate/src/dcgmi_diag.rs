//! `dcgmi diag -r N -j`: DCGM's diagnostic as JSON.
//!
//! The document is `{"DCGM GPU Diagnostic": {"test_categories": [{"category",
//! "tests": [{"name", "results": [{"gpu_ids", "status", "warnings", "info"}]}]}]}}`
//! DCGM 4 names the top object `"DCGM Diagnostic"` and a result's GPU by
//! `"entity_group": "GPU", "entity_id": 0`; both shapes read, and so does a
//! banner line before the document (`Successfully ran diagnostic for group.`).
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
    // Anything before the first `{` is dcgmi's banner; JSON errors count
    // their lines from there, so the banner's lines are added back.
    let start = text.find('{').unwrap_or(text.len());
    let banner_lines = text[..start].matches('\n').count();
    let document: Value = serde_json::from_str(&text[start..]).map_err(|err| ParseError::Json {
        line: err.line() + banner_lines,
        message: err.to_string(),
    })?;
    let diagnostic = ["DCGM GPU Diagnostic", "DCGM Diagnostic", "Diagnostic"]
        .iter()
        .find_map(|key| document.get(*key))
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
        let name = string_field(text, category, "category", "test_categories")?;
        let tests = category.get("tests").unwrap_or(&Value::Null);
        for test in array(text, tests, &format!("{name}: tests"))? {
            let test_name = string_field(text, test, "name", name)?;
            let results = test.get("results").unwrap_or(&Value::Null);
            let results = array(text, results, &format!("{test_name}: results"))?;
            for result in results {
                read_result(text, &format!("{name}.{test_name}"), result, metrics)?;
            }
            // DCGM 4's per-test verdict, kept where no per-GPU result says it.
            match test.get("test_summary") {
                Some(summary) if results.is_empty() => read_result(
                    text,
                    &format!("{name}.{test_name}.summary"),
                    summary,
                    metrics,
                )?,
                _ => {}
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
    let near = test.split_once('.').map_or(test, |(_, name)| name);
    let status = string_field(text, result, "status", near)?;
    let code = status_code(status).ok_or_else(|| {
        ParseError::unexpected(
            line_of(text, status),
            "a status Pass, Skip, Warn or Fail",
            status,
        )
    })?;
    let gpu = entity(result);
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

/// `gpu<ids>` from `gpu_ids`/`gpu_id` (DCGM 3), `<group><id>` from
/// `entity_group`/`entity_id` (DCGM 4), `all` for a result over every GPU.
fn entity(result: &Value) -> String {
    let id = |value: Option<&Value>| match value {
        Some(Value::String(ids)) => Some(ids.clone()),
        Some(Value::Number(id)) => Some(id.to_string()),
        _ => None,
    };
    if let Some(ids) = id(result.get("gpu_ids").or_else(|| result.get("gpu_id"))) {
        return format!("gpu{ids}");
    }
    match id(result.get("entity_id")) {
        Some(id) => {
            let group = result
                .get("entity_group")
                .and_then(Value::as_str)
                .unwrap_or("GPU");
            format!("{}{id}", group.to_lowercase())
        }
        None => "all".to_string(),
    }
}

/// DCGM prints `Pass`, `PASS`, `Skip`, `SKIPPED` and so on across versions;
/// a test that did not run (`Not Run`) is a skip, never a pass.
fn status_code(status: &str) -> Option<f64> {
    match status.to_ascii_lowercase().as_str() {
        "pass" => Some(0.0),
        "skip" | "skipped" | "not run" => Some(1.0),
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

/// `object[key]` as a string; an error names the line of `near`, the
/// enclosing name (the tree keeps no positions of its own).
fn string_field<'a>(
    text: &str,
    object: &'a Value,
    key: &str,
    near: &str,
) -> Result<&'a str, ParseError> {
    object.get(key).and_then(Value::as_str).ok_or_else(|| {
        ParseError::unexpected(
            line_of(text, near),
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

    // Hand-made in the DCGM 4 shape (top object `DCGM Diagnostic`, entities,
    // a `test_summary`), after a level-1 document from a GB10 quoted in a
    // public repository's test whose origin we could not name.
    const DCGM_4: &str = r#"Successfully ran diagnostic for group.
{
	"DCGM Diagnostic" : {
		"test_categories" : [ {
			"category" : "Deployment",
			"tests" : [ {
				"name" : "software",
				"results" : [ {
					"entity_group" : "GPU", "entity_group_id" : 1, "entity_id" : 0,
					"status" : "Fail",
					"warnings" : [ { "error_id" : 29, "warning" : "Persistence Mode: Persistence mode for GPU 0 is disabled." } ]
				} ],
				"test_summary" : { "status" : "Fail" }
			} ]
		} ]
	},
	"metadata" : { "version" : "4.2.3" }
}
"#;

    #[test]
    fn the_dcgm_4_shape_reads_with_entities_and_a_banner() {
        let metrics = parse(DCGM_4).unwrap();
        let software = metrics.get("deployment.software.gpu0").unwrap();
        assert_eq!(software.value, FAIL);
        assert!(software
            .detail
            .as_deref()
            .unwrap()
            .contains("Persistence mode for GPU 0"));
        let cut = &DCGM_4[..DCGM_4.find("\"test_summary\"").unwrap()];
        assert_eq!(parse(cut).unwrap_err().line(), cut.lines().count());
    }

    #[test]
    fn a_result_without_a_status_names_the_line_of_its_test() {
        let doc = "{\"DCGM GPU Diagnostic\": {\"test_categories\": [{\"category\": \"Hardware\", \"tests\": [\n{\"name\": \"Memory\",\n \"results\": [{\"gpu_ids\": \"0\"}]}]}]}}";
        let err = parse(doc).unwrap_err();
        assert_eq!(err.line(), 2, "{err}");
        assert!(err.to_string().contains("a `status` string"), "{err}");
    }

    #[test]
    fn a_test_with_only_a_summary_keeps_its_verdict() {
        let doc = r#"{"DCGM Diagnostic": {"test_categories": [{"category": "Hardware", "tests": [
            {"name": "memtest", "results": [], "test_summary": {"status": "Fail", "warnings": ["boom"]}}]}]}}"#;
        let metrics = parse(doc).unwrap();
        assert_eq!(metrics.value("hardware.memtest.summary.all"), Some(FAIL));
        assert_eq!(metrics.value("tests_failed"), Some(1.0));
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
