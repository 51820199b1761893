//! nvbandwidth's plain-text output (not `-j`).
//!
//! Each test prints `Running <test>.`, a title such as
//! `memcpy CE GPU(row) -> GPU(column) bandwidth (GB/s)`, a line of column
//! numbers, one row per source, and `SUM <test> <value>`. The `SUM` line
//! closes a test: a matrix without it was cut short. Metrics:
//! `<test>.<row>.<column>` per cell (the title's unit, `N/A` cells left out)
//! and `<test>.sum`. Waived tests print no matrix and give no metric.

use crate::error::ParseError;
use crate::lines::{self, Line};
use crate::metric::Metrics;

/// The test being read: from its title line to its `SUM` line.
struct Block {
    /// From the `Running <test>.` line, when the output has it.
    name: Option<String>,
    unit: String,
    columns: Option<usize>,
    rows: usize,
    cells: Vec<(usize, usize, f64)>,
}

pub fn parse(text: &str) -> Result<Metrics, ParseError> {
    let mut metrics = Metrics::default();
    let mut running: Option<String> = None;
    let mut block: Option<Block> = None;
    let mut tests = 0usize;
    for line in lines::numbered(text) {
        let content = line.content.trim();
        if let Some(name) = content
            .strip_prefix("Running ")
            .and_then(|rest| rest.strip_suffix('.'))
        {
            expect_no_block(&block, line)?;
            running = Some(name.to_string());
        } else if content.starts_with("Waiving ") {
            running = None;
        } else if let Some(unit) = title_unit(content) {
            expect_no_block(&block, line)?;
            block = Some(Block {
                name: running.take(),
                unit,
                columns: None,
                rows: 0,
                cells: Vec::new(),
            });
        } else if let Some(current) = block.as_mut() {
            if let Some(rest) = content.strip_prefix("SUM ") {
                finish(current, rest, line, &mut metrics)?;
                block = None;
                tests += 1;
            } else if !content.is_empty() {
                matrix_line(current, content, line.number)?;
            }
        }
        // Outside a test: the version and device preamble.
    }
    let end = lines::after_last(text);
    if let Some(current) = block {
        let name = current.name.unwrap_or_else(|| "<test>".to_string());
        return Err(ParseError::truncated(end, format!("the `SUM {name}` line")));
    }
    if let Some(name) = running {
        return Err(ParseError::truncated(end, format!("the matrix of {name}")));
    }
    if tests == 0 {
        return Err(ParseError::truncated(
            end,
            "a test's matrix (`... bandwidth (GB/s)`)",
        ));
    }
    Ok(metrics)
}

fn expect_no_block(block: &Option<Block>, line: Line<'_>) -> Result<(), ParseError> {
    match block {
        Some(current) => {
            let name = current.name.as_deref().unwrap_or("<test>");
            Err(ParseError::unexpected(
                line.number,
                format!("`SUM {name}` before the next test"),
                line.content,
            ))
        }
        None => Ok(()),
    }
}

/// The unit of a matrix title: `... GPU(row) -> GPU(column) bandwidth (GB/s)`,
/// `memcpy local GPU(column) bandwidth (GB/s)`, `... latency ... (ns)`.
fn title_unit(content: &str) -> Option<String> {
    // `(row)` is absent where a test has one row (`memcpy local GPU(column)`).
    if !content.contains("(column)") {
        return None;
    }
    let open = content.rfind('(')?;
    let unit = content[open + 1..].strip_suffix(')')?;
    Some(unit.to_string())
}

/// The column numbers, then one row per source: `<row> <value|N/A>...`.
fn matrix_line(block: &mut Block, content: &str, number: usize) -> Result<(), ParseError> {
    let tokens: Vec<&str> = content.split_whitespace().collect();
    let Some(columns) = block.columns else {
        let numbered = tokens
            .iter()
            .enumerate()
            .all(|(index, token)| token.parse() == Ok(index));
        if !numbered {
            return Err(ParseError::unexpected(
                number,
                "the column numbers `0 1 2 ...`",
                content,
            ));
        }
        block.columns = Some(tokens.len());
        return Ok(());
    };
    let expected = || format!("a matrix row: its number and {columns} values");
    let row: usize = match tokens.first().map(|token| token.parse()) {
        Some(Ok(row)) if tokens.len() == columns + 1 => row,
        _ => return Err(ParseError::unexpected(number, expected(), content)),
    };
    for (column, token) in tokens[1..].iter().enumerate() {
        if *token == "N/A" {
            continue;
        }
        let value = lines::number(token)
            .ok_or_else(|| ParseError::unexpected(number, expected(), content))?;
        block.cells.push((row, column, value));
    }
    block.rows += 1;
    Ok(())
}

/// `SUM <test> <value>`: checks the name, then emits the test's metrics.
fn finish(
    block: &Block,
    rest: &str,
    line: Line<'_>,
    metrics: &mut Metrics,
) -> Result<(), ParseError> {
    let expected = "`SUM <test> <value>`";
    if !line.complete {
        return Err(ParseError::truncated(
            line.number,
            "the end of the `SUM` line",
        ));
    }
    let tokens: Vec<&str> = rest.split_whitespace().collect();
    let (name, sum) = match tokens.as_slice() {
        [name, value] => (*name, lines::number(value)),
        _ => return Err(ParseError::unexpected(line.number, expected, line.content)),
    };
    let sum = sum.ok_or_else(|| ParseError::unexpected(line.number, expected, line.content))?;
    if block.name.as_deref().is_some_and(|running| running != name) {
        let running = block.name.as_deref().unwrap_or_default();
        return Err(ParseError::unexpected(
            line.number,
            format!("`SUM {running}`"),
            line.content,
        ));
    }
    if block.rows == 0 {
        // A title and a SUM with no rows between them: the matrix was lost.
        return Err(ParseError::unexpected(
            line.number,
            "the matrix rows before `SUM`",
            line.content,
        ));
    }
    for (row, column, value) in &block.cells {
        metrics.push(format!("{name}.{row}.{column}"), *value, &block.unit);
    }
    metrics.push(format!("{name}.sum"), sum, &block.unit);
    Ok(())
}

/// The tests of `wanted` that have no `SUM` in `metrics`. nvbandwidth prints
/// no end-of-run line, so an output cut between two tests reads as a shorter
/// run: the caller, which knows the tests it asked for (`-t`), checks them.
pub fn missing_tests<'a>(metrics: &Metrics, wanted: &[&'a str]) -> Vec<&'a str> {
    let missing = wanted
        .iter()
        .filter(|test| metrics.get(&format!("{test}.sum")).is_none());
    missing.copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hand-made in the shape of nvbandwidth's single-row tests, whose title
    // names no `(row)`.
    const LOCAL_COPY: &str = "Running device_local_copy.
memcpy local GPU(column) bandwidth (GB/s)
           0         1
 0   1453.21   1448.90

SUM device_local_copy 2902.11
";

    #[test]
    fn a_single_row_test_without_a_row_label_reads() {
        let metrics = parse(LOCAL_COPY).unwrap();
        assert_eq!(metrics.value("device_local_copy.0.1"), Some(1448.90));
        assert_eq!(metrics.value("device_local_copy.sum"), Some(2902.11));
    }

    #[test]
    fn a_sum_for_another_test_is_an_error() {
        let wrong = LOCAL_COPY.replace("SUM device_local_copy", "SUM host_to_device_memcpy_ce");
        assert_eq!(parse(&wrong).unwrap_err().line(), 6);
    }

    #[test]
    fn a_running_line_with_nothing_after_it_is_truncated() {
        let cut = "Running device_local_copy.\n";
        assert!(matches!(parse(cut), Err(ParseError::Truncated { .. })));
    }
}
