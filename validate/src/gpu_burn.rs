//! gpu-burn's log.
//!
//! Progress lines read
//! `100.0%  proc'd: 18000 (6311 Gflop/s) - ...   errors: 0 - -524288000  (WARNING!)- ...   temps: 51 C - ...`,
//! one entry per GPU; the run ends with `Tested N GPUs:` and one
//! `GPU i: OK|FAULTY` line per GPU, the closing lines: a log without all N of
//! them was cut short. Metrics: from the last progress line,
//! `gflops.gpu<i>` (Gflop/s) and `errors.gpu<i>` (count, as printed: gpu-burn
//! prints a wrapped-around count as a negative number, which is still an
//! error); from the summary, `faulty.gpu<i>` (1 FAULTY, 0 OK), `gpus_tested`
//! and `gpus_faulty`.

use crate::error::ParseError;
use crate::lines::{self, Line};
use crate::metric::Metrics;

/// The per-GPU figures of one progress line.
struct Progress {
    gflops: Vec<f64>,
    errors: Vec<f64>,
}

/// The `Tested N GPUs:` summary as read so far.
struct Summary {
    tested: usize,
    verdicts: Vec<bool>,
}

pub fn parse(text: &str) -> Result<Metrics, ParseError> {
    let mut progress: Option<Progress> = None;
    let mut summary: Option<Summary> = None;
    'lines: for line in lines::numbered(text) {
        // gpu-burn redraws its progress line with carriage returns.
        for segment in line.content.split('\r') {
            let content = segment.trim();
            if let Some(found) = summary.as_mut() {
                verdict(found, content, line)?;
                if found.verdicts.len() == found.tested {
                    break 'lines;
                }
            } else if content.contains("proc'd:") {
                progress = Some(progress_line(content, line.number)?);
            } else if let Some(tested) = tested_count(content, line.number)? {
                summary = Some(Summary {
                    tested,
                    verdicts: Vec::new(),
                });
            }
        }
    }
    let end = lines::after_last(text);
    let Some(summary) = summary else {
        return Err(ParseError::truncated(end, "the `Tested N GPUs:` summary"));
    };
    if summary.verdicts.len() < summary.tested {
        return Err(ParseError::truncated(
            end,
            format!(
                "the summary line `GPU {}: OK|FAULTY`",
                summary.verdicts.len()
            ),
        ));
    }
    Ok(metrics(progress, &summary))
}

fn metrics(progress: Option<Progress>, summary: &Summary) -> Metrics {
    let mut metrics = Metrics::default();
    if let Some(progress) = progress {
        for (gpu, gflops) in progress.gflops.iter().enumerate() {
            metrics.push(format!("gflops.gpu{gpu}"), *gflops, "Gflop/s");
        }
        for (gpu, errors) in progress.errors.iter().enumerate() {
            metrics.push(format!("errors.gpu{gpu}"), *errors, "count");
        }
    }
    for (gpu, faulty) in summary.verdicts.iter().enumerate() {
        let word = if *faulty { "FAULTY" } else { "OK" };
        metrics.push_detail(
            format!("faulty.gpu{gpu}"),
            f64::from(u8::from(*faulty)),
            "bool",
            word.to_string(),
        );
    }
    metrics.push("gpus_tested", summary.tested as f64, "count");
    let faulty = summary.verdicts.iter().filter(|faulty| **faulty).count();
    metrics.push("gpus_faulty", faulty as f64, "count");
    metrics
}

/// `Tested N GPUs:` (or `Tested 1 GPUs:`).
fn tested_count(content: &str, number: usize) -> Result<Option<usize>, ParseError> {
    let Some(rest) = content.strip_prefix("Tested ") else {
        return Ok(None);
    };
    let count = rest
        .strip_suffix("GPUs:")
        .and_then(|count| count.trim().parse().ok());
    match count {
        Some(count) if count > 0 => Ok(Some(count)),
        _ => Err(ParseError::unexpected(number, "`Tested N GPUs:`", content)),
    }
}

/// The next `GPU i: OK|FAULTY` line, in order; blank lines are skipped.
fn verdict(summary: &mut Summary, content: &str, line: Line<'_>) -> Result<(), ParseError> {
    if content.is_empty() {
        return Ok(());
    }
    let gpu = summary.verdicts.len();
    let expected = || format!("`GPU {gpu}: OK|FAULTY`");
    let word = content.strip_prefix(&format!("GPU {gpu}:")).map(str::trim);
    let faulty = match word {
        Some("OK") => false,
        Some("FAULTY") => true,
        _ => return Err(ParseError::unexpected(line.number, expected(), content)),
    };
    if gpu + 1 == summary.tested && !line.complete {
        return Err(ParseError::truncated(
            line.number,
            "the end of the last summary line",
        ));
    }
    summary.verdicts.push(faulty);
    Ok(())
}

/// `P%  proc'd: <n> (<g> Gflop/s) - ...   errors: <e> [(WARNING!)]- ...   temps: ...`
fn progress_line(content: &str, number: usize) -> Result<Progress, ParseError> {
    let garbled = || {
        ParseError::unexpected(
            number,
            "a progress line `proc'd: N (G Gflop/s) ... errors: E ...`",
            content,
        )
    };
    let after = content
        .split_once("proc'd:")
        .map(|(_, after)| after)
        .ok_or_else(garbled)?;
    let (processed, rest) = after.split_once("errors:").ok_or_else(garbled)?;
    let errors = rest.split_once("temps:").map_or(rest, |(errors, _)| errors);
    let gflops: Option<Vec<f64>> = processed.split(" - ").map(gflops_entry).collect();
    let errors: Option<Vec<f64>> = errors
        .split_whitespace()
        // Separators, and the flags after a count: `(WARNING!)-`, `(DIED!)`.
        .filter(|token| *token != "-" && !token.starts_with('('))
        .map(|token| token.parse::<i64>().ok().map(|count| count as f64))
        .collect();
    match (gflops, errors) {
        (Some(gflops), Some(errors)) if !gflops.is_empty() && gflops.len() == errors.len() => {
            Ok(Progress { gflops, errors })
        }
        _ => Err(garbled()),
    }
}

/// `18000 (6311 Gflop/s)` → 6311.
fn gflops_entry(entry: &str) -> Option<f64> {
    let (count, rest) = entry.trim().split_once(" (")?;
    count.parse::<i64>().ok()?;
    lines::number(rest.strip_suffix(" Gflop/s)")?)
}

#[cfg(test)]
mod tests {
    use super::*;

    // From wilicc/gpu-burn#124 (one RTX A500, no progress line in the summary run).
    const ONE_GPU_OK: &str =
        "GPU 0: NVIDIA RTX A2000 Embedded GPU (UUID: GPU-cfc454d6-f42b-1ba2-c01a-bca141734c4b)
Initialized device 0 with 7866 MB of memory (7765 MB available, using 6989 MB of it), using FLOATS

Killing processes with SIGTERM (soft kill)
Freed memory for dev 0
Uninitted cublas
done

Tested 1 GPUs:
        GPU 0: OK
";

    #[test]
    fn a_summary_without_progress_lines_still_reads() {
        let metrics = parse(ONE_GPU_OK).unwrap();
        assert_eq!(metrics.value("faulty.gpu0"), Some(0.0));
        assert_eq!(metrics.value("gpus_faulty"), Some(0.0));
        assert_eq!(metrics.value("gflops.gpu0"), None);
    }

    #[test]
    fn a_log_cut_before_its_summary_is_truncated() {
        let cut = ONE_GPU_OK.split("Tested").next().unwrap();
        assert!(matches!(parse(cut), Err(ParseError::Truncated { .. })));
    }

    #[test]
    fn a_carriage_return_redrawn_progress_line_reads_its_last_state() {
        let log = "10.0%  proc'd: 1 (5 Gflop/s)   errors: 0   temps: 40 C \r20.0%  proc'd: 2 (7 Gflop/s)   errors: 3  (WARNING!)   temps: 41 C \nTested 1 GPUs:\n\tGPU 0: FAULTY\n";
        let metrics = parse(log).unwrap();
        assert_eq!(metrics.value("gflops.gpu0"), Some(7.0));
        assert_eq!(metrics.value("errors.gpu0"), Some(3.0));
        assert_eq!(metrics.value("faulty.gpu0"), Some(1.0));
    }
}
