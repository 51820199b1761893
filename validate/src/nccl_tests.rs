//! nccl-tests output (`all_reduce_perf`, `all_gather_perf`, any `*_perf`).
//!
//! Two header variants exist: current releases print
//! `size count type redop root time algbw busbw #wrong ...`, older ones
//! `size count type [redop] time algbw busbw error ...`, where `error` is the
//! largest deviation rather than a count. Columns are found by name, so both
//! read the same way. Metrics, per message size in bytes:
//! * `busbw.out_of_place.<size>`, `busbw.in_place.<size>` (GB/s);
//! * `wrong.out_of_place.<size>`, `wrong.in_place.<size>` (count), and their
//!   sum `wrong_total`, with a `#wrong` header: a caller fails on non-zero;
//! * `error.out_of_place.<size>`, `error.in_place.<size>` (max deviation),
//!   with an `error` header;
//! * `out_of_bounds` (count) from `# Out of bounds values : N OK|FAILED`;
//! * `avg_busbw` (GB/s) from `# Avg bus bandwidth`, the closing line: an
//!   output without it was cut short.
//!
//! Cells printed as `N/A` (in-place checks of some collectives) give no metric.

use crate::error::ParseError;
use crate::lines::{self, Line};
use crate::metric::Metrics;

const GBPS: &str = "GB/s";

/// Which correctness column the header has.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Check {
    Wrong,
    Error,
}

/// Where the columns are, from the header line.
#[derive(Debug, Clone, Copy)]
struct Layout {
    columns: usize,
    busbw: [usize; 2],
    check: [usize; 2],
    kind: Check,
}

const PLACES: [&str; 2] = ["out_of_place", "in_place"];

pub fn parse(text: &str) -> Result<Metrics, ParseError> {
    let mut metrics = Metrics::default();
    let mut layout: Option<Layout> = None;
    let mut rows = 0usize;
    let mut wrong_total = 0.0;
    let mut avg_seen = false;
    for line in lines::numbered(text) {
        let content = strip_mpi_prefix(line.content).trim();
        let Some(found) = layout else {
            layout = header(content, line.number)?;
            continue;
        };
        let bare = content.trim_start_matches('#').trim_start();
        if let Some(rest) = bare.strip_prefix("Out of bounds values") {
            let count = after_colon(rest).and_then(lines::number);
            let count = count.ok_or_else(|| {
                ParseError::unexpected(line.number, "`Out of bounds values : N OK|FAILED`", content)
            })?;
            metrics.push("out_of_bounds", count, "count");
        } else if let Some(rest) = bare.strip_prefix("Avg bus bandwidth") {
            metrics.push("avg_busbw", avg_busbw(rest, line)?, GBPS);
            avg_seen = true;
            // A log may go on with another collective's run; one output, one test.
            break;
        } else if header(content, line.number)?.is_some() {
            return Err(ParseError::unexpected(
                line.number,
                "`# Avg bus bandwidth` before a second table",
                content,
            ));
        } else if content.starts_with(|c: char| c.is_ascii_digit()) {
            wrong_total += row(content, line.number, found, &mut metrics)?;
            rows += 1;
        }
        // Anything else is NCCL's own logging interleaved with the table.
    }
    let end = lines::after_last(text);
    let Some(found) = layout else {
        return Err(ParseError::truncated(
            end,
            "the table header (`size count type ... busbw`)",
        ));
    };
    if rows == 0 {
        return Err(ParseError::truncated(end, "a result row"));
    }
    if !avg_seen {
        return Err(ParseError::truncated(end, "the `# Avg bus bandwidth` line"));
    }
    if found.kind == Check::Wrong {
        metrics.push("wrong_total", wrong_total, "count");
    }
    Ok(metrics)
}

/// `mpirun --tag-output` prefixes every line with `[1,0]<stdout>:`.
fn strip_mpi_prefix(line: &str) -> &str {
    let trimmed = line.trim_start();
    match trimmed.find("]<stdout>:") {
        Some(at) if trimmed.starts_with('[') => &trimmed[at + "]<stdout>:".len()..],
        _ => line,
    }
}

/// The column layout if `content` is the header line (`# size count ...`),
/// an error if it names itself a header but lacks the columns we read.
fn header(content: &str, number: usize) -> Result<Option<Layout>, ParseError> {
    let tokens: Vec<&str> = content.trim_start_matches('#').split_whitespace().collect();
    if tokens.first() != Some(&"size") || tokens.get(1) != Some(&"count") {
        return Ok(None);
    }
    let positions = |name: &str| -> Vec<usize> {
        let found = tokens
            .iter()
            .enumerate()
            .filter(|(_, token)| **token == name);
        found.map(|(index, _)| index).collect()
    };
    let busbw = positions("busbw");
    let (check, kind) = match (positions("#wrong"), positions("error")) {
        (wrong, _) if wrong.len() == 2 => (wrong, Check::Wrong),
        (_, error) => (error, Check::Error),
    };
    if busbw.len() != 2 || check.len() != 2 {
        let expected =
            "a header with out-of-place and in-place `busbw` and `#wrong` (or `error`) columns";
        return Err(ParseError::unexpected(number, expected, content));
    }
    Ok(Some(Layout {
        columns: tokens.len(),
        busbw: [busbw[0], busbw[1]],
        check: [check[0], check[1]],
        kind,
    }))
}

/// One message size's row; returns its `#wrong` count (0 for `error` headers).
fn row(
    content: &str,
    number: usize,
    layout: Layout,
    metrics: &mut Metrics,
) -> Result<f64, ParseError> {
    let cells: Vec<&str> = content.split_whitespace().collect();
    let expected = || {
        format!(
            "a result row of {} columns as in the header",
            layout.columns
        )
    };
    if cells.len() != layout.columns {
        return Err(ParseError::unexpected(number, expected(), content));
    }
    let size: u64 = cells[0]
        .parse()
        .map_err(|_| ParseError::unexpected(number, expected(), content))?;
    let mut wrong = 0.0;
    for (place, (&bw, &check)) in PLACES.iter().zip(layout.busbw.iter().zip(&layout.check)) {
        if let Some(value) = cell(cells[bw], number, content)? {
            metrics.push(format!("busbw.{place}.{size}"), value, GBPS);
        }
        let Some(value) = cell(cells[check], number, content)? else {
            continue;
        };
        match layout.kind {
            Check::Wrong => {
                wrong += value;
                metrics.push(format!("wrong.{place}.{size}"), value, "count");
            }
            Check::Error => metrics.push(format!("error.{place}.{size}"), value, "max_error"),
        }
    }
    Ok(wrong)
}

/// A number, or `None` for `N/A`.
fn cell(token: &str, number: usize, content: &str) -> Result<Option<f64>, ParseError> {
    if token == "N/A" {
        return Ok(None);
    }
    match lines::number(token) {
        Some(value) => Ok(Some(value)),
        None => Err(ParseError::unexpected(
            number,
            format!("a number or N/A, not {token:?}"),
            content,
        )),
    }
}

fn avg_busbw(rest: &str, line: Line<'_>) -> Result<f64, ParseError> {
    if !line.complete {
        return Err(ParseError::truncated(
            line.number,
            "the end of the `# Avg bus bandwidth` line",
        ));
    }
    let value = after_colon(rest).and_then(lines::number);
    value.ok_or_else(|| {
        ParseError::unexpected(line.number, "`# Avg bus bandwidth : <GB/s>`", line.content)
    })
}

/// The first word after the `:` of `Name : value ...`.
fn after_colon(rest: &str) -> Option<&str> {
    rest.trim_start()
        .strip_prefix(':')?
        .split_whitespace()
        .next()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Hand-made in the old layout (no `root`, an `error` column, no `#`),
    // as nccl-tests printed it around 2018-2021 (see NVIDIA/nccl#583).
    const OLD_LAYOUT: &str = "       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error
        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
          32             8   float     sum    10.00    0.00    0.01  1e-07    10.00    0.00    0.01  2e-07
  1073741824     268435456   float     sum    15986   67.17  123.14  2e-07    15989   67.15  123.12  2e-07
 Out of bounds values : 0 OK
 Avg bus bandwidth    : 61.5728
";

    #[test]
    fn the_old_layout_with_an_error_column_reads_the_same_way() {
        let metrics = parse(OLD_LAYOUT).unwrap();
        assert_eq!(metrics.value("busbw.in_place.1073741824"), Some(123.12));
        assert_eq!(metrics.value("error.in_place.32"), Some(2e-07));
        assert_eq!(metrics.value("avg_busbw"), Some(61.5728));
        assert_eq!(metrics.value("wrong_total"), None);
    }

    #[test]
    fn a_row_cut_in_the_middle_names_its_line() {
        let cut = OLD_LAYOUT.replace("  2e-07    15989   67.15  123.12  2e-07", "");
        let err = parse(&cut).unwrap_err();
        assert_eq!(err.line(), 4, "{err}");
    }

    #[test]
    fn an_avg_line_without_its_newline_is_a_truncation() {
        let cut = OLD_LAYOUT.trim_end_matches("28\n");
        assert!(matches!(
            parse(cut),
            Err(ParseError::Truncated { line: 6, .. })
        ));
    }

    #[test]
    fn mpirun_tagged_lines_are_read_through_their_prefix() {
        let tagged: String = OLD_LAYOUT
            .lines()
            .map(|line| format!("[1,0]<stdout>:{line}\n"))
            .collect();
        assert_eq!(parse(&tagged).unwrap().value("avg_busbw"), Some(61.5728));
    }
}
