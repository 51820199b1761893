//! Judges a validation run: each metric against the band lemon learned for
//! this node's SKU (the criteria file in the spool directory, when fresh),
//! the site's static floors of the node's own config, and the counts that
//! must be 0; then the run's verdict.

use super::suite::{BenchRun, Outcome, SuiteMetric};
use lemonade_config::ValidateSettings;
use std::path::Path;
use validate::criteria_file::{self, CriteriaFile, Direction, FILE_NAME};

/// The run's verdict, by the severity model's exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// A metric out of its band, floor or zero; or a tool that said so.
    Fail,
    /// A benchmark that did not run or could not be read: the checker's
    /// own failure, never a pass and never a drain.
    Unknown,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Fail => "fail",
            Verdict::Unknown => "unknown",
        }
    }

    /// 0 pass, 2 fail, 3 unknown.
    pub fn exit_code(self) -> u8 {
        match self {
            Verdict::Pass => 0,
            Verdict::Fail => 2,
            Verdict::Unknown => 3,
        }
    }
}

/// The criteria a run is judged by.
#[derive(Debug, Clone, Default)]
pub struct Criteria {
    /// The learned bands, when the file was there, readable and fresh.
    pub learned: Option<CriteriaFile>,
    /// Why it was not used, for the output.
    pub notes: Vec<String>,
}

/// Reads `<spool dir>/validate-criteria.json`; a missing, unreadable or
/// stale file leaves the static floors, and a note says why.
pub fn load_criteria(spool_dir: Option<&Path>, now: i64, max_age_hours: f64) -> Criteria {
    let Some(dir) = spool_dir else {
        return note("no [spool] dir: no learned criteria; static floors only".into());
    };
    let path = dir.join(FILE_NAME);
    match criteria_file::read(&path) {
        Err(criteria_file::CriteriaFileError::Io { error, .. })
            if error.kind() == std::io::ErrorKind::NotFound =>
        {
            note(format!("{}: none yet; static floors only", path.display()))
        }
        Err(e) => note(format!("{e}; ignored, static floors only")),
        Ok(file) => {
            let age_hours = (now - file.generated_at) as f64 / 3600.0;
            if age_hours > max_age_hours {
                return note(format!(
                    "{}: {age_hours:.0} h old, over criteria_max_age_hours = {max_age_hours}; \
                     ignored, static floors only",
                    path.display()
                ));
            }
            Criteria {
                learned: Some(file),
                notes: Vec::new(),
            }
        }
    }
}

fn note(line: String) -> Criteria {
    Criteria {
        learned: None,
        notes: vec![line],
    }
}

/// What judging found.
#[derive(Debug, Clone, PartialEq)]
pub struct Judgement {
    pub verdict: Verdict,
    /// `avg_busbw 312<371 GB/s (learned)`, in the suite's order.
    pub failing: Vec<String>,
    /// `learned <generated_at>` or `static floors`.
    pub criteria: String,
    /// Benchmarks not run or not read, criteria not used.
    pub notes: Vec<String>,
}

/// Judges the suite's runs for a node of `sku`.
pub fn judge(
    runs: &[BenchRun],
    sku: &str,
    settings: &ValidateSettings,
    criteria: &Criteria,
) -> Judgement {
    let learned = criteria
        .learned
        .as_ref()
        .filter(|file| file.bands_for(sku).next().is_some());
    let mut notes = criteria.notes.clone();
    if criteria.learned.is_some() && learned.is_none() {
        notes.push(format!(
            "the criteria file has no band for SKU {sku}; static floors only"
        ));
    }
    let mut failing = Vec::new();
    let mut unknown = false;
    for run in runs {
        match &run.outcome {
            Outcome::Ran { metrics, exit_code } => {
                for metric in metrics {
                    failing.extend(judge_metric(metric, sku, settings, learned));
                }
                if let Some(code) = exit_code.filter(|c| *c != 0) {
                    failing.push(format!("{} exit {code}", run.name));
                }
            }
            Outcome::NotRun(why) => {
                unknown = true;
                notes.push(format!("{}: NOT RUN: {why}", run.name));
            }
            Outcome::Error(why) => {
                unknown = true;
                notes.push(format!("{}: ERROR: {why}", run.name));
            }
        }
    }
    let verdict = if !failing.is_empty() {
        Verdict::Fail
    } else if unknown || runs.is_empty() {
        Verdict::Unknown
    } else {
        Verdict::Pass
    };
    Judgement {
        verdict,
        failing,
        criteria: match learned {
            Some(file) => format!("learned {}", file.generated_at),
            None => "static floors".to_string(),
        },
        notes,
    }
}

/// The first rule `metric` fails, as a line: the learned band, then the
/// site's floor, then must-be-zero.
fn judge_metric(
    metric: &SuiteMetric,
    sku: &str,
    settings: &ValidateSettings,
    learned: Option<&CriteriaFile>,
) -> Option<String> {
    let (name, value, unit) = (&metric.name, metric.value, &metric.unit);
    let band = learned.and_then(|file| file.bands_for(sku).find(|b| &b.metric == name));
    if let Some(band) = band.filter(|b| b.fails(value)) {
        return Some(match band.direction {
            Direction::HigherIsBetter => {
                format!("{name} {}<{} {unit} (learned)", num(value), num(band.bound))
            }
            Direction::LowerIsBetter => {
                format!("{name} {}>{} {unit} (learned)", num(value), num(band.bound))
            }
            Direction::MustBeZero => format!("{name} {} (must be 0)", num(value)),
        });
    }
    for floor in settings
        .floor
        .iter()
        .filter(|f| &f.metric == name && f.sku.as_deref().is_none_or(|s| s == sku))
    {
        if let Some(min) = floor.min.filter(|min| value.is_nan() || value < *min) {
            return Some(format!("{name} {}<{} {unit} (floor)", num(value), num(min)));
        }
        if let Some(max) = floor.max.filter(|max| value.is_nan() || value > *max) {
            return Some(format!("{name} {}>{} {unit} (floor)", num(value), num(max)));
        }
    }
    if settings.is_must_be_zero(name) && value != 0.0 {
        return Some(format!("{name} {} (must be 0)", num(value)));
    }
    None
}

/// `312`, `312.5`, `0.125`: short enough for a drain reason.
fn num(value: f64) -> String {
    if value.abs() >= 100.0 {
        format!("{value:.0}")
    } else {
        let s = format!("{value:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}
